#!/usr/bin/env bash
# Runs every benchmark suite of the project in one go, in a Release build, with fixed seeds, and
# keeps the raw results and plots:
#
#   bench/reproduce.sh [SUITE...]   (all of them: over an hour on a 2-core machine, the compile
#                                    farm 25 minutes of it; or only the SUITEs named, e.g. scaling)
#
# Every suite whose clients can use either transport runs twice: over TCP (NAME) and over UCX
# shared memory (NAME_ucx: ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self, so READ/WRITE/CAS/FETCH_ADD
# are one-sided). core_bench, redis_compare and cluster_compare hold both transports in one run
# already; the cluster suites start etcd and several ardmad each.
#
# Writes docs/results/<date>/ (each suite's output, the command that made it, the machine),
# docs/figures/*.png (gnuplot; the latency sweep and the scaling plot put both transports on the
# same axes), and the "Reproduced run" section at the end of docs/BENCHMARKS.md (bench/report.py:
# every table with its command, the machine and the date). The sections above it are the
# hand-written analysis. Installs gnuplot, redis and python3 if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
suites=(core_bench list_dht_bench dfs_bench jvm_bench latency_sweep dma_sweep redis_compare
        lock_compare scaling apps_compare monitor_compare region_bench cc_compare
        cluster_compare reshard_compare cluster_scaling)
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  echo "suites: ${suites[*]}"
  exit 0
fi
selected=("$@")
for s in "${selected[@]}"; do
  [[ " ${suites[*]} " == *" $s "* ]] || { echo "reproduce.sh: no suite '$s' (${suites[*]})" >&2; exit 2; }
done
picked() {  # picked SUITE: true if it is to run (every suite when none was named)
  ((${#selected[@]} == 0)) || [[ " ${selected[*]} " == *" $1 "* ]]
}
export BUILD_DIR=build-release BUILD_TYPE=Release
bin=$BUILD_DIR/bin
need=()
command -v gnuplot >/dev/null || need+=(gnuplot-nox)
command -v redis-server >/dev/null || need+=(redis-server redis-tools)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# The suites run here directly; the scripts build what they run themselves.
./scripts/build.sh core_bench list_dht_bench dfs_bench jvm_bench latency_sweep monitor_bench \
  region_bench >/dev/null
out=docs/results/$(date -u +%Y-%m-%d)
mkdir -p "$out" docs/figures
if ((${#selected[@]})) && [[ -s $out/machine.txt ]]; then
  # Some suites again: the machine was described by the first run of the day.
  echo "rerun: ${selected[*]} at $(date -u +%Y-%m-%dT%H:%M:%SZ)," \
    "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >> "$out/machine.txt"
else {
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "build: $BUILD_TYPE ($BUILD_DIR)"
} > "$out/machine.txt"
fi

# run NAME COMMAND...: runs it, keeping its output and the command line, if its suite (NAME
# without _ucx) was asked for.
run() {
  local name=$1
  shift
  picked "${name%_ucx}" || return 0
  echo "== $name: $*" >&2
  echo "\$ $*" > "$out/$name.cmd"
  "$@" > "$out/$name.out" 2> "$out/$name.err" || echo "   ($name exited $?)" >&2
}

# Console output in NAME.out; suites with mixed counters also write JSON (Google Benchmark's CSV
# writer refuses runs whose counters differ).
json() { echo "--benchmark_out=$out/$1.json" --benchmark_out_format=json; }
run core_bench env UCX_TLS=shm,self "$bin"/core_bench --benchmark_repetitions=5 \
  --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.2 $(json core_bench)
for transport in tcp ucx; do
  s= over=(env ARDMA_BENCH_TRANSPORT=tcp)
  [[ $transport == ucx ]] && s=_ucx over=(env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self)
  run list_dht_bench$s "${over[@]}" "$bin"/list_dht_bench \
    --benchmark_filter='-threads:50|ClosedLoop' --benchmark_min_time=0.3 $(json list_dht_bench$s)
  run dfs_bench$s "${over[@]}" "$bin"/dfs_bench --benchmark_min_time=0.3 $(json dfs_bench$s)
  run jvm_bench$s "${over[@]}" "$bin"/jvm_bench --benchmark_min_time=0.3 $(json jvm_bench$s)
  run latency_sweep$s "${over[@]}" "$bin"/latency_sweep --benchmark_format=csv
  run dma_sweep$s "${over[@]}" bench/dma_sweep.sh
  run lock_compare$s "${over[@]}" bench/lock_compare.sh $(json lock_bench$s)
  run scaling$s "${over[@]}" bench/scaling.sh 20000
  run apps_compare$s "${over[@]}" bench/apps_compare.sh 3
  run monitor_compare$s "${over[@]}" bench/monitor_compare.sh "$out" "$s"
done
run redis_compare bench/redis_compare.sh 3
run region_bench env UCX_TLS=shm,self "$bin"/region_bench --benchmark_min_time=0.2 \
  $(json region_bench)
run cc_compare bench/cc_compare.sh 2
# The cluster (etcd and several ardmad; cluster_compare has both transports in one run).
run cluster_compare bench/cluster_compare.sh 3
run reshard_compare bench/reshard_compare.sh 1000000
run cluster_scaling bench/cluster_scaling.sh 200000

# Plots: both transports on the same axes (a suite that did not run leaves its series empty).
python3 - "$out" <<'PY'
import csv, os, sys
out = sys.argv[1]
transports = (("tcp", ""), ("ucx", "_ucx"))
def rows(name):
    path = os.path.join(out, name + ".out")
    if not os.path.exists(path):
        return []
    text = open(path).read().splitlines()
    start = next((i for i, l in enumerate(text) if l.startswith("name,")), None)
    return [] if start is None else list(csv.DictReader(text[start:]))
# latency sweep: time per op vs RTT; per op four blocks: (tcp, ucx) x (active, rdma)
sweeps = {t: rows("latency_sweep" + s) for t, s in transports}
with open(os.path.join(out, "sweep.dat"), "w") as f:
    for op in ("0", "1", "2"):
        for t, _ in transports:
            for mode in ("0", "1"):
                f.write(f"# op {op} {t} rdma {mode}\n")
                for r in sweeps[t]:
                    parts = dict(p.split(":") for p in r["name"].split("/")[1:4])
                    if parts["op"] == op and parts["rdma"] == mode and r.get("rtt_us"):
                        f.write(f'{float(r["rtt_us"]):.2f} {float(r["real_time"]):.2f} '
                                f'{float(r["model_us"]):.2f}\n')
                f.write("\n\n")
# scaling: ops/s vs clients per test, mode and transport
series = {}
for t, s in transports:
    path = os.path.join(out, f"scaling{s}.out")
    if not os.path.exists(path):
        continue
    for l in open(path):
        if l.startswith("| ") and "test" not in l:
            c = [x.strip() for x in l.strip().strip("|").split("|")]
            series.setdefault(f"{c[0]}/{c[1]}/{t}", []).append((int(c[2]), float(c[3])))
with open(os.path.join(out, "scaling.dat"), "w") as f:
    for name, pts in series.items():
        f.write(f"# {name}\n" + "".join(f"{n} {v}\n" for n, v in pts) + "\n\n")
open(os.path.join(out, "scaling.series"), "w").write(" ".join(series))
PY
if [[ -s $out/latency_sweep.out || -s $out/latency_sweep_ucx.out ]]; then
  gnuplot <<GP
set terminal pngcairo size 1500,450 font ",10"
set output "docs/figures/latency_sweep.png"
set multiplot layout 1,3 title "Active vs RDMA as the round trip grows, over TCP and over UCX shared memory (points: measured; lines: model)"
set xlabel "RTT (us)"; set ylabel "time per op (us)"; set logscale xy; set key top left
do for [op=0:2] {
  set title word("DHT-GET DHT-PUT list-append-(20-long)", op + 1)
  plot "$out/sweep.dat" index (4*op) using 1:2 with points pt 7 lc 1 title "active, TCP", \
       "" index (4*op) using 1:3 with lines lc 1 notitle, \
       "" index (4*op+1) using 1:2 with points pt 5 lc 2 title "RDMA, TCP", \
       "" index (4*op+1) using 1:3 with lines lc 2 notitle, \
       "" index (4*op+2) using 1:2 with points pt 6 lc 3 title "active, UCX", \
       "" index (4*op+2) using 1:3 with lines lc 3 dt 2 notitle, \
       "" index (4*op+3) using 1:2 with points pt 4 lc 4 title "RDMA, UCX (one-sided)", \
       "" index (4*op+3) using 1:3 with lines lc 4 dt 2 notitle
}
unset multiplot
GP
fi
if [[ -s $out/scaling.series ]]; then
  tcp_series=$(tr ' ' '\n' < "$out/scaling.series" | grep -c '/tcp$' || true)  # they come first
  gnuplot <<GP
set output "docs/figures/scaling.png"
set terminal pngcairo size 1000,550 font ",10" noenhanced
set logscale x 2; set logscale y
set title "Throughput vs connections (ardma-bench, one ardmad, 2 cores), TCP and UCX shared memory"
set xlabel "connections"; set ylabel "operations/s"; set key outside right
titles = system("cat $out/scaling.series")
plot for [i=0:$tcp_series-1] "$out/scaling.dat" index i using 1:2 with linespoints lc i + 1 \
       title word(titles, i + 1), \
     for [i=$tcp_series:words(titles)-1] "$out/scaling.dat" index i using 1:2 \
       with linespoints dt 2 lc i - $tcp_series + 1 title word(titles, i + 1)
GP
fi
python3 bench/report.py "$out" docs/BENCHMARKS.md
echo "results in $out, plots in docs/figures/, tables in docs/BENCHMARKS.md (Reproduced run)" >&2
