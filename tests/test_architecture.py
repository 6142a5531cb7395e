"""The package's shape: no import cycles between its modules, no module over 600 lines.

Imports are read from the source (every ``import`` and ``from ... import``, including those
under ``TYPE_CHECKING`` and inside functions): a cycle that only type checking sees is
still two modules that cannot be understood one without the other. A module over the limit
must be named in :data:`OVERSIZED` with the reason, and leaves the list once it is split
(the test fails on a stale entry too).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "prototype" / "connmgr"
MAX_LINES = 600

OVERSIZED: dict[str, str] = {}
"""Modules allowed over :data:`MAX_LINES` for now, each with why."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (a ``from x import y`` counts ``x.y``
    when that is a module, else ``x``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            subs = {f"{base}.{a.name}" for a in node.names} & known
            found.update(subs or {base})
    return (found & known) - {name}


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_inside_the_package() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_count(tmp_path: Path) -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from connmgr.x import Y\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imports_of("connmgr.m", path, {"connmgr.x", "connmgr.m"}) == {"connmgr.x"}


@pytest.mark.parametrize(
    "path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: p.relative_to(PACKAGE).as_posix()
)
def test_no_module_over_the_limit_unless_named(path: Path) -> None:
    rel = path.relative_to(PACKAGE).as_posix()
    lines = len(path.read_text().splitlines())
    if rel in OVERSIZED:
        assert lines > MAX_LINES, f"{rel} has {lines} lines: take it off OVERSIZED"
    else:
        assert lines <= MAX_LINES, f"{rel} has {lines} lines (limit {MAX_LINES})"


def test_every_named_exception_exists() -> None:
    missing = [rel for rel in OVERSIZED if not (PACKAGE / rel).exists()]
    assert missing == [], f"OVERSIZED names modules that are gone: {missing}"
