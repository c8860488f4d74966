#!/usr/bin/env python3
"""A flame graph (SVG) of `perf script` output: where the samples' time went, by call stack.

  perf record -F 10000 --call-graph dwarf -o perf.data PROGRAM ...
  perf script -i perf.data | bench/flamegraph.py --title "PING over UCX" [--comm NAME] > out.svg

Each sample's stack is folded root first; a box's width is its share of the samples (of the
threads --comm keeps, by name prefix), its children stand on it, and boxes under --min-share of
the whole are left out. Colours only tell neighbours apart. Made for docs/figures; reads text,
needs nothing beyond Python.
"""
import argparse
import html
import re
import sys
from collections import defaultdict

FRAME = re.compile(r"^\s+[0-9a-f]+\s+(.*?)(?:\s+\((.*)\))?$")


def fold(lines, comm_prefix=None):
    """Counts of stacks (tuples of function names, root first) in perf script text."""
    counts = defaultdict(int)
    stack, keep = [], False
    for line in list(lines) + [""]:
        line = line.rstrip("\n")
        if not line.strip():
            if stack and keep:
                counts[tuple(reversed(stack))] += 1
            stack, keep = [], False
            continue
        if not line[0].isspace():  # a sample's header: "comm pid/tid time: period event:"
            stack = []
            comm = line.split()[0]
            keep = comm_prefix is None or comm.startswith(comm_prefix)
            continue
        m = FRAME.match(line)
        if not m:
            continue
        name = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1).strip())
        if name in ("[unknown]", ""):  # no symbol: the library it is in, if known
            dso = (m.group(2) or "").rsplit("/", 1)[-1].strip("[]")
            name = f"[{dso or 'unknown'}]"
        stack.append(name)
    return counts


def tree(counts):
    """{name: [samples, children]} from folded stacks."""
    root = [0, {}]
    for stack, n in counts.items():
        root[0] += n
        node = root
        for name in stack:
            child = node[1].setdefault(name, [0, {}])
            child[0] += n
            node = child
    return root


def svg(root, title, min_share, width=1200, row=16):
    total = root[0] or 1
    boxes = []

    def place(node, x, depth):
        for name, child in sorted(node[1].items()):
            w = child[0] / total
            if w >= min_share:
                boxes.append((x, depth, w, name, child[0]))
                place(child, x, depth + 1)
            x += w

    place(root, 0.0, 0)
    depth = max((b[1] for b in boxes), default=0) + 1
    height = (depth + 2) * row + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="11">',
           f'<text x="{width / 2}" y="{row}" text-anchor="middle" font-size="13">'
           f'{html.escape(title)} ({total} samples)</text>']
    for x, d, w, name, n in boxes:
        px, pw = x * width, w * width
        py = height - (d + 1) * row - 4
        hue = (hash(name) % 60) + 10  # warm colours, stable per name within a run
        label = name if len(name) * 7 < pw - 4 else name[: max(int((pw - 4) / 7) - 2, 0)] + ".."
        out.append(f'<g><title>{html.escape(name)}: {n} samples, {100 * w:.1f}%</title>'
                   f'<rect x="{px:.1f}" y="{py}" width="{pw:.1f}" height="{row - 1}" '
                   f'fill="hsl({hue},80%,60%)"/>'
                   + (f'<text x="{px + 2:.1f}" y="{py + row - 4}">{html.escape(label)}</text>'
                      if pw > 20 else "") + "</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="?", help="perf script output (default: standard input)")
    p.add_argument("--title", default="flame graph")
    p.add_argument("--comm", help="only threads whose name starts with this")
    p.add_argument("--min-share", type=float, default=0.002, help="smallest box kept (0.002)")
    args = p.parse_args()
    src = open(args.input) if args.input else sys.stdin
    counts = fold(src, args.comm)
    if not counts:
        print("flamegraph.py: no samples (wrong --comm, or not perf script output?)",
              file=sys.stderr)
        return 1
    sys.stdout.write(svg(tree(counts), args.title, args.min_share))
    return 0


if __name__ == "__main__":
    sys.exit(main())
