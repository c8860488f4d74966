#!/usr/bin/env bash
# The RDMA load-monitoring paper's load-monitor micro-benchmarks, all four schemes in one run (bench/monitor_bench.cc
# says how one 2-core machine stands in for back-end host, back-end NIC and front end):
#
#   bench/monitor_compare.sh [OUT_DIR [SUFFIX]]      (about 3 minutes)
#
# Keeps OUT_DIR/monitor_bench<SUFFIX>.json, draws docs/figures/monitor_{latency,slowdown,accuracy}
# <SUFFIX>.png (gnuplot) and prints the three tables in Markdown. Uses $BUILD_DIR (default build).
# ARDMA_BENCH_TRANSPORT=ucx makes the RDMA schemes one-sided UCX reads; reproduce.sh runs it so
# with SUFFIX _ucx.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BUILD_DIR:-build}/bin
out=${1:-$(mktemp -d)}
suffix=${2:-}
mkdir -p "$out" docs/figures
command -v gnuplot >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnuplot-nox >/dev/null
}
"$bin"/monitor_bench --benchmark_out="$out/monitor_bench$suffix.json" --benchmark_out_format=json >&2

python3 - "$out" "$suffix" <<'PY'
import json, os, sys
out, suffix = sys.argv[1], sys.argv[2]
rows = [b for b in json.load(open(os.path.join(out, f"monitor_bench{suffix}.json")))["benchmarks"]
        if not b.get("error_occurred")]
schemes = ["rdma-sync", "rdma-async", "socket-sync", "socket-async"]
def args(b):
    return dict(p.split(":") for p in b["name"].split("/")[1:] if ":" in p)
def mean_us(b):
    return b["real_time"] * {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}[b["time_unit"]]

def grid(prefix, axis, dat, columns):
    """{(scheme, x): benchmark} for one benchmark family, and its .dat file for gnuplot
    (one block per scheme: x, then `columns` of each benchmark)."""
    cells = {}
    for b in rows:
        if b["name"].startswith(prefix + "/"):
            a = args(b)
            cells[(int(a["scheme"]), int(a[axis]))] = b
    xs = sorted({x for _, x in cells})
    with open(os.path.join(out, dat), "w") as f:
        for s in range(4):
            f.write(f"# {schemes[s]}\n")
            for x in xs:
                if (s, x) in cells:
                    f.write(f"{x} " + " ".join(f"{c(cells[(s, x)]):.2f}" for c in columns) + "\n")
            f.write("\n\n")
    return cells, xs

lat, hogs = grid("BM_Latency", "hogs", f"monitor_latency{suffix}.dat", (mean_us, lambda b: b["p99_us"]))
print("#### (1) Poll latency vs busy threads on the back end's host CPU (mean µs; p99 in brackets)\n")
print("| scheme | " + " | ".join(f"{h} busy" for h in hogs) + f" | {hogs[-1]} busy / idle | round trips/op | bytes/op |")
print("|---|" + "---:|" * (len(hogs) + 3))
for s in range(4):
    if (s, 0) not in lat:
        continue
    cells = [f"{mean_us(lat[(s, h)]):.0f} ({lat[(s, h)]['p99_us']:.0f})" for h in hogs if (s, h) in lat]
    ratio = mean_us(lat[(s, hogs[-1])]) / mean_us(lat[(s, 0)])
    b = lat[(s, 0)]
    print(f"| {schemes[s]} | " + " | ".join(cells) +
          f" | {ratio:.2f}× | {b['round_trips/op']:.0f} | {b['bytes/op']:.0f} |")
rt = [b.get("realtime", 0) for b in rows]
print(f"\nFront end and ardmad I/O thread under SCHED_FIFO: {'yes' if all(rt) else 'NO (refused; figures not comparable)'}.\n")

slow, intervals = grid("BM_Slowdown", "interval_ms", f"monitor_slowdown{suffix}.dat",
                       (lambda b: b["wait_pct"], lambda b: b["slowdown_pct"]))
print("#### (2) A CPU-bound application on the back end vs monitoring granularity\n")
print("Extra time the application waited for its CPU, % of its run time (schedstat; wall-time slowdown in brackets):\n")
print("| scheme | " + " | ".join(f"{g} ms" for g in intervals) + " |")
print("|---|" + "---:|" * len(intervals))
for s in range(4):
    cells = [f"{slow[(s, g)]['wait_pct']:.1f} ({slow[(s, g)]['slowdown_pct']:+.1f})" for g in intervals if (s, g) in slow]
    print(f"| {schemes[s]} | " + " | ".join(cells) + " |")

acc = next((b for b in rows if b["name"].startswith("BM_Accuracy")), None)
print("\n#### (3) Accuracy against a 1 ms ground-truth sampler (all four at once, every 50 ms)\n")
if acc:
    with open(os.path.join(out, f"monitor_accuracy{suffix}.dat"), "w") as f:
        for i, s in enumerate(schemes):
            k = s.replace("-", "_")
            f.write(f'{i} "{s}" {acc["dev_running_" + k]:.3f} {acc["dev_cpu_" + k]:.2f}\n')
    print("| scheme | procs_running deviation (tasks) | host-CPU load deviation (points) | polls |")
    print("|---|---:|---:|---:|")
    for s in schemes:
        k = s.replace("-", "_")
        print(f'| {s} | {acc["dev_running_" + k]:.2f} | {acc["dev_cpu_" + k]:.1f} | {acc["polls_" + k]:.0f} |')
else:
    print("(BM_Accuracy did not run)")
PY

gnuplot <<GP
set terminal pngcairo size 800,500 font ",10" noenhanced
set output "docs/figures/monitor_latency$suffix.png"
set title "Poll latency vs background load on the back end (the RDMA load-monitoring paper, Fig. 3)"
set xlabel "busy threads on the back end's host CPU"; set ylabel "mean poll latency (us)"
set logscale y; set key top left
plot for [i=0:3] "$out/monitor_latency$suffix.dat" index i using 1:2 with linespoints lw 2 \
     title word("rdma-sync rdma-async socket-sync socket-async", i + 1)
set output "docs/figures/monitor_slowdown$suffix.png"
set title "Application delay vs monitoring granularity (the RDMA load-monitoring paper, Fig. 4)"
set xlabel "granularity (ms)"; set ylabel "extra CPU wait of the application (%)"
set logscale x 2; unset logscale y; set key top right
plot for [i=0:3] "$out/monitor_slowdown$suffix.dat" index i using 1:2 with linespoints lw 2 \
     title word("rdma-sync rdma-async socket-sync socket-async", i + 1)
set output "docs/figures/monitor_accuracy$suffix.png"
set title "Deviation from a 1 ms ground truth (the RDMA load-monitoring paper, Fig. 5)"
unset logscale; set style data histograms; set style fill solid 0.7; set boxwidth 0.8
set ylabel "mean absolute deviation"; set key top left; set xlabel ""
plot "$out/monitor_accuracy$suffix.dat" using 3:xtic(2) title "procs_running (tasks)", \
     "" using (\$4/10):xtic(2) title "host-CPU load (10 points)"
GP
echo "figures: docs/figures/monitor_{latency,slowdown,accuracy}$suffix.png" >&2
