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
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return f.read()


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


def swap(*pairs):
    """A reference finder: the row named like this one with `a` replaced by `b`."""
    def find(b, by_name):
        for a, c in pairs:
            if a in b["name"] and b["name"].replace(a, c) in by_name:
                return by_name[b["name"].replace(a, c)]
        return None
    return find


def tcp_floor(*only):
    """A reference finder for single-operation rows (names containing one of `only`, or any):
    the raw TCP ping-pong of the run closest in bytes per op, with the same thread count. Not for
    a UCX row, nor for one that crosses no network (no round trips counted: the server alone)."""
    def find(b, by_name):
        if ("RawTcpPingPong" in b["name"] or "Ucx" in b["name"] or "round_trips/op" not in b or
                (only and not any(o in b["name"] for o in only))):
            return None
        threads = b["name"].split("threads:")[-1] if "threads:" in b["name"] else "1"

        def floor_threads(f):
            return f["name"].split("threads:")[-1] if "threads:" in f["name"] else "1"
        floors = [f for f in by_name.values()
                  if "RawTcpPingPong" in f["name"] and floor_threads(f) == threads]
        if not floors:
            return None
        return min(floors, key=lambda f: abs(f.get("bytes/op", 0) - b.get("bytes/op", 0)))
    return find


def ucx_own():
    """A reference finder for core_bench's UCX rows: UCX's own operation of the same kind, measured
    by the same binary between two of its workers (bench/ucx_reference.cc)."""
    own = (("BM_PingUcx/", "BM_UcxOwnAmRoundTrip/"), ("BM_ExecuteNoopUcx/", "BM_UcxOwnAmRoundTrip/"),
           ("BM_ReadUcx/8/", "BM_UcxOwnGet/8/"), ("BM_ReadUcx/4096/", "BM_UcxOwnGet/4096/"),
           ("BM_CasUcx/", "BM_UcxOwnAtomic/"), ("BM_FetchAddUcx/", "BM_UcxOwnAtomic/"))

    def find(b, by_name):
        for ours, theirs in own:
            if b["name"].startswith(ours):
                return next((r for n, r in by_name.items() if n.startswith(theirs)), None)
        return None
    return find


def either(*finders):
    def find(b, by_name):
        for f in finders:
            r = f(b, by_name)
            if r is not None:
                return r
        return None
    return find


def bench_table(run, name, medians_only=False, extra=(), reference=None):
    """`reference(row, rows_by_name)` names the row of the same run that row is compared with;
    the table then says the time ratio and against what."""
    text = read(run, name + ".json")
    if not text:
        return f"(no {name}.json in this run)\n"
    rows = json.loads(text)["benchmarks"]
    if medians_only:
        rows = sorted((b for b in rows if b.get("aggregate_name") == "median"),
                      key=lambda b: b["run_name"])
        for b in rows:
            b["name"] = b["run_name"]
    by_name = {b["name"]: b for b in rows if not b.get("error_occurred")}
    head = ["benchmark", "time", "round trips/op", "bytes/op"] + [e for e in extra]
    if reference:
        head.append("ratio (same run)")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" + "---:|" * (len(head) - 1)]
    for b in rows:
        if b.get("error_occurred"):
            continue
        cells = [b["name"], fmt_time(ns(b)),
                 f'{b.get("round_trips/op", 0):.2f}', f'{b.get("bytes/op", 0):.0f}']
        for e in extra:
            v = b.get(e)
            cells.append("" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v)))
        if reference:
            ref = reference(b, by_name)
            cells.append(f"{ns(b) / ns(ref):.2f}× {ref['name'].split('/real_time')[0]}" if ref else "")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def us(v):
    """Microseconds to three significant digits, or whole ones from 100 up."""
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def sweep_table(run, suffix=""):
    text = read(run, f"latency_sweep{suffix}.out")
    if not text:
        return f"(no latency_sweep{suffix}.out)\n"
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
            out.append(f'| {names[op]} | {d} | {us(float(a["rtt_us"]))} | {us(ta)} | {us(tb)} | '
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


def scaling_table(run, suffix=""):
    """scaling.sh's table, with each active row's throughput against RDMA mode's at the same
    client count."""
    text = read(run, f"scaling{suffix}.out")
    if not text:
        return f"(no scaling{suffix}.out)\n"
    lines = [l for l in text.splitlines() if l.startswith("|")]
    rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in lines[2:]]
    ops = {(r[0], r[1], r[2]): float(r[3]) for r in rows}
    out = [lines[0] + " active / rdma ops/s |", lines[1] + "---:|"]
    for r, l in zip(rows, lines[2:]):
        other = ops.get((r[0], "rdma", r[2])) if r[1] == "active" else None
        out.append(l + (f" {float(r[3]) / other:.2f}× |" if other else " |"))
    return "\n".join(out) + "\n"


TRANSPORTS = (("TCP", ""), ("UCX shared memory (one-sided READ/WRITE/CAS/FETCH_ADD)", "_ucx"))


def both(title, part):
    """A section per transport: `part(suffix)` is its Markdown ("" for TCP, "_ucx" for UCX)."""
    out = [f"### {title}", ""]
    for name, suffix in TRANSPORTS:
        out += [f"#### Over {name}", "", part(suffix)]
    return "\n".join(out)


def report(run):
    machine = read(run, "machine.txt") or ""
    parts = [
        BEGIN,
        f"## Reproduced run: `{run}`",
        "",
        "Written by `bench/report.py` from the raw outputs of `bench/reproduce.sh` (each command",
        "below; `*.out`, `*.json` and `*.err` beside it). Every ratio compares two rows of this",
        "run: a row with the raw TCP floor of about its size, RDMA mode with active mode, Java with",
        "native code, a peer (Redis, GNU tools, memcpy) with ours. Machine:",
        "",
        "\n".join("    " + l for l in machine.strip().splitlines()),
        "",
        "### Core ops vs the raw TCP floor and UCX's own operations (medians)",
        "", command(run, "core_bench") + bench_table(run, "core_bench", medians_only=True,
                                                  reference=either(ucx_own(), tcp_floor())),
        both("List and hash table, both modes", lambda s: command(run, "list_dht_bench" + s) +
             bench_table(run, "list_dht_bench" + s, reference=either(
                 swap(("rdma:1", "rdma:0")), tcp_floor("BM_Dht", "AppendAt")))),
        both("File system, both modes", lambda s: command(run, "dfs_bench" + s) + bench_table(
            run, "dfs_bench" + s, extra=("round_trips/MiB",),
            reference=swap(("rdma:1", "rdma:0"), ("BM_DfsCopy256MiB", "BM_Memcpy256MiB")))),
        both("Java vs native active code", lambda s: command(run, "jvm_bench" + s) + bench_table(
            run, "jvm_bench" + s, extra=("server_us/op",), reference=swap(("lang:1", "lang:0")))),
        both("Latency sweep and the synthetic-time model",
             lambda s: command(run, "latency_sweep" + s) + sweep_table(run, s)),
        "![latency sweep](figures/latency_sweep.png)",
        "",
        both("DMA-cost sweep", lambda s: command(run, "dma_sweep" + s) + verbatim(run, "dma_sweep" + s)),
        "### Hash table vs Redis (and Redis Lua)",
        "", command(run, "redis_compare") + verbatim(run, "redis_compare"),
        both("Locks vs the Redis recipe", lambda s: command(run, "lock_compare" + s) + bench_table(
            run, "lock_bench" + s,
            extra=("items_per_second", "wait_p50_us", "wait_p99_us", "fairness"),
            reference=swap(("rdma:1", "rdma:0"),
                           ("BM_RedisLockUncontended", "BM_LockUncontended/rdma:0"),
                           ("BM_RedisLockContended/", "BM_LockContended/rdma:0/")))),
        both("Client-count scaling", lambda s: command(run, "scaling" + s) + scaling_table(run, s)),
        "![scaling](figures/scaling.png)",
        "",
        both("Tools beside GNU grep/find/cp and download + upload",
             lambda s: command(run, "apps_compare" + s) + verbatim(run, "apps_compare" + s)),
        both("Load monitor: the four schemes of the RDMA load-monitoring paper",
             lambda s: command(run, "monitor_compare" + s) + verbatim(run, "monitor_compare" + s) +
             "\n" + "\n".join(f"![{f}](figures/monitor_{f}{s}.png)"
                               for f in ("latency", "slowdown", "accuracy")) + "\n"),
        "### Cluster: three members against a three-master Redis Cluster",
        "", command(run, "cluster_compare") + verbatim(run, "cluster_compare"),
        "### Cluster: moving a quarter of the slots to a fourth member, against redis-cli reshard",
        "", command(run, "reshard_compare") + verbatim(run, "reshard_compare"),
        "### Cluster: scale-out over 1, 2 and 3 members, and the model",
        "", command(run, "cluster_scaling") + verbatim(run, "cluster_scaling"),
        "### One-sided region operations (UCX shared memory)",
        "", command(run, "region_bench") + bench_table(run, "region_bench"),
        END,
    ]
    return "\n".join(parts) + "\n"


def main():
    run = sys.argv[1]
    doc = sys.argv[2] if len(sys.argv) > 2 else "docs/BENCHMARKS.md"
    with open(doc) as f:
        text = f.read()
    section = report(run)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(doc, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
