"""The two packages' shape: the product (``connmgr``) never imports the evidence
(``connmgr_evidence``); no import cycle between modules, nor between sub-packages (``bench``,
``realrun``, ``core``, ... and the top-level modules, each a node); no module over 600 lines
(400 in the policy core and the policies, which must read as their rules).

Imports are read from the source (every ``import`` and ``from ... import``, including those
under ``TYPE_CHECKING`` and inside functions): a cycle that only type checking sees is
still two modules that cannot be understood one without the other. A module over the limit
must be named in :data:`OVERSIZED` with the reason, and leaves the list once it is split
(the test fails on a stale entry too).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = "connmgr"
EVIDENCE = "connmgr_evidence"
TREES: dict[str, Path] = {
    PRODUCT: ROOT / "prototype" / PRODUCT,
    EVIDENCE: ROOT / "evidence" / EVIDENCE,
}
"""Each package and its directory: the product's distribution and the evidence's."""
PACKAGE = TREES[PRODUCT]
MAX_LINES = 600
PACKAGE_LIMITS: dict[str, int] = {"core": 400, "policies": 400}
"""Stricter limits for the modules under these sub-packages (paths relative to the package)."""

OVERSIZED: dict[str, str] = {}
"""Modules allowed over :data:`MAX_LINES` for now, each with why (``package/path.py``)."""


def module_name(path: Path) -> str:
    package = next(p for p in TREES.values() if path.is_relative_to(p))
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for tree in TREES.values() for p in sorted(tree.rglob("*.py"))}


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


def sub_package(module: str) -> str:
    """The node of ``module`` in the package graph: its package and first name under it
    (``connmgr.core.execution`` -> ``connmgr.core``; ``connmgr.ledger`` stays itself)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` (module -> modules it imports) folded onto :func:`sub_package` nodes."""
    folded: dict[str, set[str]] = {}
    for module, imported in graph.items():
        node = sub_package(module)
        folded.setdefault(node, set()).update(
            sub_package(i) for i in imported if sub_package(i) != node
        )
        for i in imported:
            folded.setdefault(sub_package(i), set())
    return folded


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def product_imports_of_the_evidence(graph: Mapping[str, set[str]]) -> list[str]:
    """Every ``product module -> evidence module`` edge of ``graph``."""
    return sorted(
        f"{module} -> {imported}"
        for module, targets in graph.items()
        if in_package(module, PRODUCT)
        for imported in targets
        if in_package(imported, EVIDENCE)
    )


def dynamic_imports_of_the_evidence(path: Path) -> list[int]:
    """Lines of ``path`` that name the evidence to an import function (``import_module``,
    ``__import__``, ``find_spec``): an import the graph above cannot see."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in {"import_module", "__import__", "find_spec"}:
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith(EVIDENCE):
                lines.append(node.lineno)
    return lines


def test_no_import_cycle_inside_the_packages() -> None:
    assert cycles(import_graph()) == []


def test_no_import_cycle_between_sub_packages() -> None:
    assert cycles(package_graph(import_graph())) == []


def test_the_product_never_imports_the_evidence() -> None:
    graph = import_graph()
    assert any(in_package(m, EVIDENCE) for m in graph), "the evidence's tree was not read"
    assert product_imports_of_the_evidence(graph) == []
    dynamic = {
        name: lines
        for name, path in modules().items()
        if in_package(name, PRODUCT) and (lines := dynamic_imports_of_the_evidence(path))
    }
    assert dynamic == {}


def test_the_checks_find_a_package_cycle_and_a_product_import(tmp_path: Path) -> None:
    # No module cycle, but bench -> java -> bench as packages (patchcompare's old place).
    graph = {
        "connmgr_evidence.bench.job": {"connmgr_evidence.java.probe"},
        "connmgr_evidence.java.patchcompare": {"connmgr_evidence.bench.results"},
        "connmgr_evidence.java.probe": {"connmgr.core.api"},
        "connmgr_evidence.bench.results": set(),
        "connmgr.core.api": set(),
    }
    assert cycles(graph) == []
    assert cycles(package_graph(graph)) == [["connmgr_evidence.bench", "connmgr_evidence.java"]]
    graph["connmgr.ledger"] = {"connmgr_evidence.bench.results", "connmgr.core.api"}
    assert product_imports_of_the_evidence(graph) == [
        "connmgr.ledger -> connmgr_evidence.bench.results"
    ]
    path = tmp_path / "m.py"
    path.write_text("import importlib\nimportlib.import_module('connmgr_evidence.cli')\n")
    assert dynamic_imports_of_the_evidence(path) == [2]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_type_checking_imports_count(tmp_path: Path) -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from connmgr.x import Y\n"
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imports_of("connmgr.m", path, {"connmgr.x", "connmgr.m"}) == {"connmgr.x"}


def limit_of(rel: str, limits: Mapping[str, int]) -> int:
    """The line limit of the module at ``rel``: its sub-package's in ``limits``, else
    :data:`MAX_LINES`."""
    return limits.get(rel.partition("/")[0], MAX_LINES) if "/" in rel else MAX_LINES


def size_problems(
    package: Path, oversized: Mapping[str, str], limits: Mapping[str, int] = PACKAGE_LIMITS
) -> list[str]:
    """Every breach of the line limit under ``package``: a module over its limit
    (:func:`limit_of`) that ``oversized`` does not name, a named one at or under it (take it
    off the list), and a named one that is gone. Paths are relative to ``package``."""
    lines = {
        p.relative_to(package).as_posix(): len(p.read_text().splitlines())
        for p in sorted(package.rglob("*.py"))
    }
    problems = []
    for rel, count in lines.items():
        limit = limit_of(rel, limits)
        if rel in oversized and count <= limit:
            problems.append(f"{rel} has {count} lines: take it off OVERSIZED")
        elif rel not in oversized and count > limit:
            problems.append(f"{rel} has {count} lines (limit {limit})")
    problems += [f"OVERSIZED names {rel}, which is gone" for rel in oversized if rel not in lines]
    return problems


def test_no_module_over_the_limit_unless_named() -> None:
    problems = []
    for package, tree in TREES.items():
        named = {
            rel.partition("/")[2]: why
            for rel, why in OVERSIZED.items()
            if rel.partition("/")[0] == package
        }
        problems += [f"{package}/{p}" for p in size_problems(tree, named)]
    assert problems == []


def test_the_line_limit_check_flags_a_601_line_module_and_every_stale_exception(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "at_limit.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "sub" / "over.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert size_problems(tmp_path, {}) == ["sub/over.py has 601 lines (limit 600)"]
    assert size_problems(tmp_path, {"sub/over.py": "why"}) == []
    assert size_problems(tmp_path, {"sub/over.py": "why", "at_limit.py": "why"}) == [
        "at_limit.py has 600 lines: take it off OVERSIZED"
    ]
    assert size_problems(tmp_path, {"sub/over.py": "why", "gone.py": "why"}) == [
        "OVERSIZED names gone.py, which is gone"
    ]


def test_the_core_and_the_policies_have_a_stricter_limit(tmp_path: Path) -> None:
    for sub in ("core", "policies/proposed", "sim"):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / "m.py").write_text("x = 1\n" * 401)
    assert size_problems(tmp_path, {}) == [
        "core/m.py has 401 lines (limit 400)",
        "policies/proposed/m.py has 401 lines (limit 400)",
    ]
    assert limit_of("core/policy.py", PACKAGE_LIMITS) == 400
    assert limit_of("core.py", PACKAGE_LIMITS) == MAX_LINES


def _runs_at_import(path: Path) -> list[int]:
    """Lines of ``path``'s top level that do something when it is imported: anything but
    imports, definitions, assignments, a docstring or an ``if __name__ == "__main__":``."""
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
    lines = []
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, quiet):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            continue
        lines.append(node.lineno)
    return lines


def test_no_program_runs_when_its_module_is_imported() -> None:
    """A ``__main__.py`` (``python -m ...``) runs only under ``__name__ == "__main__"``:
    walking the package imports every module (the property suite's
    ``testing.constants.load_whole_package``), and an unguarded one started a whole hour's
    benchmark in every process that walked it."""
    found = {
        name: _runs_at_import(path)
        for name, path in modules().items()
        if path.name == "__main__.py"
    }
    assert found, "no __main__.py found: the test has nothing to check"
    assert {name: lines for name, lines in found.items() if lines} == {}
