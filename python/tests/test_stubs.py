"""The type stubs (ardma/_ardma.pyi) name exactly what the extension has, so help() and a type
checker agree."""

import ast
import pathlib

import ardma._ardma as ext

STUBS = pathlib.Path(__file__).resolve().parents[1] / "ardma" / "_ardma.pyi"


def stub_names():
    tree = ast.parse(STUBS.read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body
                                if isinstance(n, ast.FunctionDef) and n.name != "__init__"}
            names[node.name] |= {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
    return names


def test_every_stub_exists_and_every_public_name_has_a_stub():
    names = stub_names()
    for name, members in names.items():
        assert hasattr(ext, name), f"stub {name} is not in the extension"
        for member in members or ():
            if name.endswith("Error") and member == "code":
                continue
            assert hasattr(getattr(ext, name), member), f"stub {name}.{member} does not exist"
    public = {n for n in dir(ext) if not n.startswith("__")}
    assert public - set(names) == set(), "names without stubs"
    for cls in (ext.Client, ext.Batch, ext.Dht, ext.Lock, ext.List, ext.Stat, ext._Dfs):
        methods = {m for m in dir(cls) if not m.startswith("_") or m in ("__enter__", "__exit__",
                                                                          "__len__")}
        assert methods - names[cls.__name__] - {"items"} == set(), cls.__name__
