#!/usr/bin/env python3
"""Checks the tree's structure (docs/ARCHITECTURE.md): every include arrow points down.

  - A file under core/ includes nothing of the project outside core/, and inside core/ only the
    layers below its own (tests and core/testing may use any core layer).
  - A service never includes an app or a tool; an app never includes a tool.
  - No source file outside tests is longer than 700 lines.
  - docs/ARCHITECTURE.md's layer table says exactly what CORE_LAYERS below says: one row per core
    layer, its "may include" column the same layers ("core top": none; "any core layer").
Prints every violation and exits 1 if there is any. Run from anywhere: scripts/check_structure.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 700
SOURCE_SUFFIXES = (".cc", ".h")
TOP_DIRS = ("core", "services", "apps", "tools", "bench", "examples", "python")

# core/<layer>: the core layers each may include (besides itself and core's top-level files).
CORE_LAYERS = {
    "": set(),
    "wire": set(),
    "context": {"wire"},
    "memory": {"wire", "context"},
    "active": {"wire", "context", "memory"},
    "net": set(),
    "ucx": set(),
    "security": set(),
    "metrics": {"net"},
    "server": {"wire", "context", "memory", "active", "net", "ucx", "security", "metrics"},
    "client": {"wire", "context", "memory", "active", "net", "ucx", "security"},
    "cli": {"wire", "context", "memory", "security", "client"},
    "cluster": {"context", "memory", "net", "client"},
    "testing": None,  # helpers for tests: any core layer
}
# Above core: which top-level directories each may include.
ALLOWED_TOP = {
    "services": {"core", "services"},
    "apps": {"core", "services", "apps"},
    "tools": {"core", "services", "apps", "tools"},
    "bench": {"core", "services", "apps", "tools", "bench"},
    "examples": {"core", "services", "examples"},
    "python": {"core", "services", "python"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def core_layer(rel):
    parts = rel.split("/")
    return "" if len(parts) == 2 else parts[1]


def is_test(rel):
    name = os.path.basename(rel)
    return name.endswith("_test.cc") or "/testdata/" in rel or name.endswith("_fuzz.cc")


def project_files():
    for top in TOP_DIRS:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(dirpath, f), ROOT)


def check(rel, problems):
    with open(os.path.join(ROOT, rel), encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    if not is_test(rel) and len(lines) > MAX_LINES:
        problems.append(f"{rel}: {len(lines)} lines (more than {MAX_LINES})")
    top = rel.split("/")[0]
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = m.group(1)
        target_top = target.split("/")[0]
        if target_top not in TOP_DIRS:
            continue  # a library's header (absl/..., gtest/...) or a generated file
        where = f"{rel}:{number}: includes {target}"
        if top == "core":
            if target_top != "core":
                problems.append(f"{where}: core includes nothing outside core/")
                continue
            layer, target_layer = core_layer(rel), core_layer(target)
            allowed = CORE_LAYERS.get(layer)
            if layer not in CORE_LAYERS:
                problems.append(f"{where}: core/{layer} is not a known layer (add it here)")
            elif allowed is None or is_test(rel) or target_layer in ("", layer):
                continue
            elif target_layer not in allowed:
                problems.append(f"{where}: core/{layer} may not include core/{target_layer}")
        elif target_top not in ALLOWED_TOP[top]:
            problems.append(f"{where}: {top}/ may not include {target_top}/")


def check_architecture_table(problems):
    """The core rows of docs/ARCHITECTURE.md's layer table against CORE_LAYERS."""
    doc = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    with open(doc, encoding="utf-8") as f:
        rows = [line.split("|") for line in f if line.startswith("| core")]
    documented = {}
    for cells in rows:
        layer_cell, includes = cells[1].strip(), cells[3].strip()
        layer = "" if layer_cell == "core top" else layer_cell.removeprefix("core/")
        if includes == "any core layer":
            documented[layer] = None
        elif includes in ("core top", "nothing"):
            documented[layer] = set()
        else:
            documented[layer] = {word.strip() for word in includes.split(",")}
    for layer, allowed in CORE_LAYERS.items():
        name = f"core/{layer}" if layer else "core top"
        if layer not in documented:
            problems.append(f"docs/ARCHITECTURE.md: no row for {name} in the layer table")
        elif documented[layer] != allowed:
            said = "any core layer" if documented[layer] is None else sorted(documented[layer])
            real = "any core layer" if allowed is None else sorted(allowed)
            problems.append(f"docs/ARCHITECTURE.md: {name} may include {real}, the table says {said}")
    for layer in documented.keys() - CORE_LAYERS.keys():
        problems.append(f"docs/ARCHITECTURE.md: the table names core/{layer}, which is no layer")


def main():
    problems = []
    files = sorted(project_files())
    for rel in files:
        check(rel, problems)
    check_architecture_table(problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check_structure: {len(problems)} problem(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"check_structure: {len(files)} files, every include points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
