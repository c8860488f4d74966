#!/usr/bin/env bash
# Runs every benchmark suite of the project in one go, in a Release build, with fixed seeds, and
# keeps the raw results and plots:
#
#   bench/reproduce.sh            (about 40 minutes on a 2-core machine; the compile farm 25 of them)
#
# Writes docs/results/<date>/ (each suite's output, the command that made it, the machine),
# docs/figures/*.png (gnuplot), and the "Reproduced run" section at the end of docs/BENCHMARKS.md
# (bench/report.py: every table with its command, the machine and the date). The sections above it
# are the hand-written analysis. Installs gnuplot, redis and python3 if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
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
./scripts/build.sh >/dev/null
out=docs/results/$(date -u +%Y-%m-%d)
mkdir -p "$out" docs/figures
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
  echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "kernel: $(uname -r)"
  echo "build: $BUILD_TYPE ($BUILD_DIR)"
} > "$out/machine.txt"

# run NAME COMMAND...: runs it, keeping its output and the command line.
run() {
  local name=$1
  shift
  echo "== $name: $*" >&2
  echo "\$ $*" > "$out/$name.cmd"
  "$@" > "$out/$name.out" 2> "$out/$name.err" || echo "   ($name exited $?)" >&2
}

# Console output in NAME.out; suites with mixed counters also write JSON (Google Benchmark's CSV
# writer refuses runs whose counters differ).
json() { echo "--benchmark_out=$out/$1.json" --benchmark_out_format=json; }
run core_bench "$bin"/core_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 $(json core_bench)
run list_dht_bench "$bin"/list_dht_bench --benchmark_filter='-threads:50|ClosedLoop' \
  --benchmark_min_time=0.3 $(json list_dht_bench)
run dfs_bench "$bin"/dfs_bench --benchmark_min_time=0.3 $(json dfs_bench)
run jvm_bench "$bin"/jvm_bench --benchmark_min_time=0.3 $(json jvm_bench)
run latency_sweep "$bin"/latency_sweep --benchmark_format=csv
run dma_sweep bench/dma_sweep.sh
run redis_compare bench/redis_compare.sh 3
run lock_compare bench/lock_compare.sh $(json lock_bench)
run scaling bench/scaling.sh 20000
run apps_compare bench/apps_compare.sh 3
run monitor_compare bench/monitor_compare.sh "$out"
run region_bench env UCX_TLS=shm,self "$bin"/region_bench --benchmark_min_time=0.2 $(json region_bench)
run cc_compare bench/cc_compare.sh 2

# Plots.
python3 - "$out" <<'PY'
import csv, os, sys
out = sys.argv[1]
def rows(name):
    text = open(os.path.join(out, name + ".out")).read().splitlines()
    start = next(i for i, l in enumerate(text) if l.startswith("name,"))
    return list(csv.DictReader(text[start:]))
# latency sweep: time per op vs RTT, per op and mode
sweep = rows("latency_sweep")
with open(os.path.join(out, "sweep.dat"), "w") as f:
    for op in ("0", "1", "2"):
        for mode in ("0", "1"):
            f.write(f"# op {op} rdma {mode}\n")
            for r in sweep:
                parts = dict(p.split(":") for p in r["name"].split("/")[1:4])
                if parts["op"] == op and parts["rdma"] == mode:
                    f.write(f'{float(r["rtt_us"]):.1f} {float(r["real_time"]):.1f} {float(r["model_us"]):.1f}\n')
            f.write("\n\n")
# scaling: ops/s vs clients per test and mode
with open(os.path.join(out, "scaling.dat"), "w") as f:
    lines = [l for l in open(os.path.join(out, "scaling.out")) if l.startswith("| ") and "test" not in l]
    series = {}
    for l in lines:
        c = [x.strip() for x in l.strip().strip("|").split("|")]
        series.setdefault((c[0], c[1]), []).append((int(c[2]), float(c[3])))
    for (test, mode), pts in series.items():
        f.write(f"# {test} {mode}\n")
        for n, v in pts:
            f.write(f"{n} {v}\n")
        f.write("\n\n")
    open(os.path.join(out, "scaling.series"), "w").write(" ".join(f"{t}/{m}" for t, m in series))
PY
gnuplot <<GP
set terminal pngcairo size 1200,400 font ",10"
set output "docs/figures/latency_sweep.png"
set multiplot layout 1,3 title "Active vs RDMA as the round trip grows (points: measured; lines: model)"
set xlabel "RTT (us)"; set ylabel "time per op (us)"; set logscale y; set key top left
do for [op=0:2] {
  set title word("DHT-GET DHT-PUT list-append-(20-long)", op + 1)
  plot "$out/sweep.dat" index (2*op) using 1:2 with points pt 7 title "active", \
       "" index (2*op) using 1:3 with lines notitle, \
       "" index (2*op+1) using 1:2 with points pt 5 title "RDMA", \
       "" index (2*op+1) using 1:3 with lines notitle
}
unset multiplot
set output "docs/figures/scaling.png"
set terminal pngcairo size 900,500 font ",10"
unset logscale; set logscale x 2
set title "Throughput vs connections (ardma-bench, one ardmad, 2 cores)"
set xlabel "connections"; set ylabel "operations/s"; set key outside right
titles = system("cat $out/scaling.series")
plot for [i=0:words(titles)-1] "$out/scaling.dat" index i using 1:2 with linespoints title word(titles, i + 1)
GP
python3 bench/report.py "$out" docs/BENCHMARKS.md
echo "results in $out, plots in docs/figures/, tables in docs/BENCHMARKS.md (Reproduced run)" >&2
