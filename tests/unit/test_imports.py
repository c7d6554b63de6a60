"""The program's modules import each other without circles, and tiers never import upward.

Every import counts: at the top, inside a function, under ``TYPE_CHECKING``. A circle, even one
that Python resolves at run time, means two modules that cannot be read or changed apart; what
both need belongs in a module below them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("components", "stacks", "offline", "policy", "benchmarks")
# Who may import whom: tiers (components) never import the composition, the tooling or the pack.
LOWER = {"components": {"components"}, "stacks": {"components", "stacks"}, "policy": {"components", "policy"}}


def modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from pkg import mod`` names the submodule)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join([*anchor, *([base] if base else [])])
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                if target in known:
                    out.add(target)
    out.discard(name)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, name, known) for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_finder_sees_a_circle_and_a_chain():
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_relative_and_from_package_imports_resolve_to_modules(tmp_path):
    known = {"pkg": tmp_path / "__init__.py", "pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    (tmp_path / "a.py").write_text("from pkg import b\nfrom . import b as again\n")
    assert imports(tmp_path / "a.py", "pkg.a", known) == {"pkg.b"}
    (tmp_path / "__init__.py").write_text("from .a import x\n")
    assert imports(tmp_path / "__init__.py", "pkg", known) == {"pkg.a"}


def test_no_import_circle_in_the_program():
    edges = graph()
    assert len(edges) > 60 and "stacks.monitoring" in edges["stacks.cluster"]
    assert circles(edges) == []


def test_tiers_never_import_upward():
    upward = [
        f"{src} imports {dst}"
        for src, targets in graph().items()
        for dst in targets
        if src.split(".")[0] in LOWER and dst.split(".")[0] not in LOWER[src.split(".")[0]]
    ]
    assert upward == []
