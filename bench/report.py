#!/usr/bin/env python3
"""Turns one bench/reproduce.sh run (docs/results/DATE/) into Markdown tables, each with the
command that produced it and the machine it ran on, and puts them into docs/BENCHMARKS.md between
the markers <!-- reproduced:begin --> and <!-- reproduced:end -->.

    bench/report.py docs/results/2026-11-21 [docs/BENCHMARKS.md]
"""
import csv
import json
import os
import sys

BEGIN, END = "<!-- reproduced:begin -->", "<!-- reproduced:end -->"


def read(run, name):
    path = os.path.join(run, name)
    return open(path).read() if os.path.exists(path) else None


def command(run, name):
    cmd = read(run, name + ".cmd")
    return f"    {cmd.strip().lstrip('$ ')}\n\n" if cmd else ""


def ns(b):
    """A benchmark's real time in ns."""
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    return b["real_time"] * scale


def fmt_time(t_ns):
    if t_ns >= 1e6:
        return f"{t_ns / 1e6:.2f} ms"
    if t_ns >= 1e3:
        return f"{t_ns / 1e3:.1f} µs"
    return f"{t_ns:.0f} ns"


def bench_table(run, name, medians_only=False, extra=()):
    text = read(run, name + ".json")
    if not text:
        return f"(no {name}.json in this run)\n"
    rows = json.loads(text)["benchmarks"]
    if medians_only:
        rows = sorted((b for b in rows if b.get("aggregate_name") == "median"),
                      key=lambda b: b["run_name"])
    head = ["benchmark", "time", "round trips/op", "bytes/op"] + [e for e in extra]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
    for b in rows:
        if b.get("error_occurred"):
            continue
        cells = [b["run_name"] if medians_only else b["name"], fmt_time(ns(b)),
                 f'{b.get("round_trips/op", 0):.2f}', f'{b.get("bytes/op", 0):.0f}']
        for e in extra:
            v = b.get(e)
            cells.append("" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v)))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def sweep_table(run):
    text = read(run, "latency_sweep.out")
    if not text:
        return "(no latency_sweep.out)\n"
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("name,"))
    res = {}
    for r in csv.DictReader(lines[start:]):
        p = dict(x.split(":") for x in r["name"].split("/")[1:4])
        res[(p["op"], p["rdma"], int(p["delay_us"]))] = r
    names = {"0": "DHT GET", "1": "DHT PUT", "2": "list append @20 (+ remove)"}
    out = ["| op | one-way delay (µs) | RTT (µs) | active (µs) | RDMA (µs) | RDMA / active |"
           " model / measured (active, RDMA) |", "|---|---:|---:|---:|---:|---:|---:|"]
    for op in ("0", "1", "2"):
        for d in sorted({k[2] for k in res}):
            a, b = res.get((op, "0", d)), res.get((op, "1", d))
            if not a or not b:
                continue
            ta, tb = float(a["real_time"]), float(b["real_time"])
            out.append(f'| {names[op]} | {d} | {float(a["rtt_us"]):.0f} | {ta:.0f} | {tb:.0f} | '
                       f'{tb / ta:.1f}× | {float(a["model_us"]) / ta:.2f}, '
                       f'{float(b["model_us"]) / tb:.2f} |')
    return "\n".join(out) + "\n"


def verbatim(run, name):
    text = read(run, name + ".out")
    if not text:
        return f"(no {name}.out)\n"
    if text.lstrip().startswith(("|", "#")):
        return text.strip() + "\n"
    return "\n".join("    " + l for l in text.strip().splitlines()) + "\n"


def report(run):
    machine = read(run, "machine.txt") or ""
    parts = [
        BEGIN,
        f"## Reproduced run: `{run}`",
        "",
        "Written by `bench/report.py` from the raw outputs of `bench/reproduce.sh` (each command",
        "below; `*.out`, `*.json` and `*.err` beside it). Machine:",
        "",
        "\n".join("    " + l for l in machine.strip().splitlines()),
        "",
        "### Core ops vs the raw TCP floor (medians)",
        "", command(run, "core_bench") + bench_table(run, "core_bench", medians_only=True),
        "### List and hash table, both modes",
        "", command(run, "list_dht_bench") + bench_table(run, "list_dht_bench"),
        "### File system, both modes",
        "", command(run, "dfs_bench") + bench_table(run, "dfs_bench", extra=("round_trips/MiB",)),
        "### Java vs native active code",
        "", command(run, "jvm_bench") + bench_table(run, "jvm_bench", extra=("server_us/op",)),
        "### Latency sweep and the synthetic-time model",
        "", command(run, "latency_sweep") + sweep_table(run),
        "### DMA-cost sweep",
        "", command(run, "dma_sweep") + verbatim(run, "dma_sweep"),
        "### Hash table vs Redis (and Redis Lua)",
        "", command(run, "redis_compare") + verbatim(run, "redis_compare"),
        "### Locks vs the Redis recipe",
        "", command(run, "lock_compare") + bench_table(
            run, "lock_bench", extra=("items_per_second", "wait_p50_us", "wait_p99_us", "fairness")),
        "### Client-count scaling",
        "", command(run, "scaling") + verbatim(run, "scaling"),
        "### Tools beside GNU grep/find and download + upload",
        "", command(run, "apps_compare") + verbatim(run, "apps_compare"),
        "### Load monitor: the four schemes of seed 002",
        "", command(run, "monitor_compare") + verbatim(run, "monitor_compare"),
        "![poll latency](figures/monitor_latency.png)",
        "![application delay](figures/monitor_slowdown.png)",
        "![accuracy](figures/monitor_accuracy.png)",
        "",
        END,
    ]
    return "\n".join(parts) + "\n"


def main():
    run = sys.argv[1]
    doc = sys.argv[2] if len(sys.argv) > 2 else "docs/BENCHMARKS.md"
    text = open(doc).read()
    section = report(run)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    open(doc, "w").write(text)


if __name__ == "__main__":
    main()
