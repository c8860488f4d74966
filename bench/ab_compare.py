#!/usr/bin/env python3
"""Paired A/B run of one Google Benchmark suite built twice (e.g. before and after a change).

  bench/ab_compare.py A_BINARY B_BINARY [--rounds 3] [--filter REGEX] [--min-time 0.2]

Runs A and B in turn (A B A B ...), each time the whole filtered suite, and prints per benchmark
the median real time of each and the ratio B/A of the medians, so machine drift between runs
falls on both sides alike. Exit status 0; it measures, it does not judge.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile


def run(binary, bench_filter, min_time):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [binary, f"--benchmark_min_time={min_time}", f"--benchmark_out={out.name}",
               "--benchmark_out_format=json"]
        if bench_filter:
            cmd.append(f"--benchmark_filter={bench_filter}")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out.name) as f:
            data = json.load(f)
    return {b["name"]: b["real_time"] for b in data["benchmarks"] if b.get("run_type") == "iteration"}, \
        {b["name"]: b.get("time_unit", "ns") for b in data["benchmarks"]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--filter", default="")
    p.add_argument("--min-time", default="0.2")
    args = p.parse_args()
    times = {"a": {}, "b": {}}
    units = {}
    for _ in range(args.rounds):
        for side, binary in (("a", args.a), ("b", args.b)):
            got, u = run(binary, args.filter, args.min_time)
            units.update(u)
            for name, t in got.items():
                times[side].setdefault(name, []).append(t)
    names = [n for n in times["a"] if n in times["b"]]
    width = max(len(n) for n in names) if names else 10
    print(f"{'benchmark':<{width}}  {'A median':>12}  {'B median':>12}  {'B/A':>6}")
    ratios = []
    for n in names:
        a, b = statistics.median(times["a"][n]), statistics.median(times["b"][n])
        ratios.append(b / a)
        print(f"{n:<{width}}  {a:>10.1f}{units[n]:>2}  {b:>10.1f}{units[n]:>2}  {b / a:>6.2f}")
    if ratios:
        print(f"{'geometric mean of B/A':<{width}}  {'':>12}  {'':>12}  "
              f"{statistics.geometric_mean(ratios):>6.2f}")
    # A benchmark one side lacks (new in B, say a reference measurement) is shown, not compared.
    for side, other in (("a", "b"), ("b", "a")):
        for n in times[side]:
            if n not in times[other]:
                t = statistics.median(times[side][n])
                a, b = (f"{t:>10.1f}{units[n]:>2}", "-") if side == "a" else ("-", f"{t:>10.1f}{units[n]:>2}")
                print(f"{n:<{width}}  {a:>12}  {b:>12}  {'':>6}  (only in {side.upper()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
