"""The core's own rules: sans-IO imports, keys as values, the transition table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import connmgr
from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import (
    BootstrapNode,
    BrokerNode,
    ConnectionKey,
    CoordinatorNode,
    Purpose,
    Role,
)
from connmgr.core.state import SOCKET_STATES, TRANSITIONS, ConnState, Trigger, next_state
from connmgr.errors import InvalidTransition

FORBIDDEN = {
    "asyncio",
    "socket",
    "ssl",
    "select",
    "selectors",
    "time",
    "random",
    "threading",
    "multiprocessing",
    "concurrent",
    "subprocess",
    "aiokafka",
}
OWN_ALLOWED = ("connmgr.core", "connmgr.policies", "connmgr.errors")
"""What the core may import from the project: nothing that reaches a driver, the simulator
or aiokafka through a side door."""
PACKAGE = Path(connmgr.__file__).parent
SANS_IO = sorted([*(PACKAGE / "core").rglob("*.py"), *(PACKAGE / "policies").rglob("*.py")])
SANS_IO_MODULES = 36
"""core/ (22), policies/ (7) and policies/proposed/ (7): a module added, moved or no longer
found changes the count, and whoever changes it sees that the guard covers it."""


def imported_modules(source: str) -> set[str]:
    """Every module ``source`` imports, dotted, at any depth of the file (import,
    from-import, and ``importlib.import_module`` or ``__import__`` with a literal name).
    Relative imports are resolved by the caller's package layout: they stay inside it."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)
    return names


def forbidden_imports(source: str) -> list[str]:
    """The imports of ``source`` the sans-IO rule forbids, sorted."""
    bad = set()
    for name in imported_modules(source):
        top = name.split(".")[0]
        if top in FORBIDDEN or (
            top == "connmgr" and not any(name == p or name.startswith(p + ".") for p in OWN_ALLOWED)
        ):
            bad.add(name)
    return sorted(bad)


def test_the_import_check_catches_forbidden_imports() -> None:
    assert forbidden_imports("import asyncio\nfrom time import monotonic") == ["asyncio", "time"]
    assert forbidden_imports("from random import Random") == ["random"]
    assert forbidden_imports("import asyncio, socket, time") == ["asyncio", "socket", "time"]
    nested = "def f():\n    if True:\n        import socket\n"
    assert forbidden_imports(nested) == ["socket"]
    assert forbidden_imports("importlib.import_module('asyncio')") == ["asyncio"]
    assert forbidden_imports("__import__('time')") == ["time"]
    assert forbidden_imports("from connmgr.aio.driver import X") == ["connmgr.aio.driver"]
    assert forbidden_imports("from connmgr.sim import run") == ["connmgr.sim"]
    allowed = "from connmgr.core.state import ConnState\nfrom connmgr.errors import X\n"
    assert forbidden_imports(allowed + "import heapq\nfrom .budget import B") == []


@pytest.mark.parametrize("path", SANS_IO, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_core_and_policies_are_sans_io(path: Path) -> None:
    bad = forbidden_imports(path.read_text())
    assert not bad, f"{path} imports {bad}: the policy core must stay sans-IO"


def test_every_core_and_policy_module_is_guarded() -> None:
    """The guard sees every module of core/ and policies/, at any depth, and no other."""
    found = [str(p.relative_to(PACKAGE)) for p in SANS_IO]
    assert len(found) == SANS_IO_MODULES, (
        f"{len(found)} modules under core/ and policies/, expected {SANS_IO_MODULES}: "
        f"update SANS_IO_MODULES if a module was added or removed on purpose ({found})"
    )
    assert "policies/proposed/budget.py" in found


def test_connection_keys_are_values() -> None:
    a = ConnectionKey(Endpoint("Host", 1), BrokerNode(3))
    b = ConnectionKey(Endpoint("host", 1), BrokerNode(3), Purpose.DATA)
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != ConnectionKey(Endpoint("host", 2), BrokerNode(3))
    assert a != ConnectionKey(Endpoint("host", 1), BrokerNode(3), Purpose.COORDINATION)
    with pytest.raises(AttributeError):
        a.endpoint = Endpoint("x", 1)  # type: ignore[misc]


def test_java_ids_and_roles() -> None:
    assert BootstrapNode(0).java_id == -1 and BootstrapNode(1).java_id == -2
    assert CoordinatorNode(2).java_id == 2147483645
    ep = Endpoint("h", 1)
    assert ConnectionKey(ep, BootstrapNode(0)).role is Role.BOOTSTRAP
    assert ConnectionKey(ep, BrokerNode(1)).role is Role.DATA
    assert ConnectionKey(ep, BrokerNode(1), Purpose.COORDINATION).role is Role.COORDINATION
    assert ConnectionKey(ep, CoordinatorNode(1), Purpose.COORDINATION).broker_id == 1


def test_every_state_but_closed_has_a_way_out() -> None:
    sources = {state for state, _ in TRANSITIONS}
    assert sources == set(ConnState) - {ConnState.CLOSED}
    assert all(next_state(s, Trigger.CLOSE) is ConnState.CLOSED for s in sources)
    assert {ConnState.CONNECTING, ConnState.READY, ConnState.DRAINING} == SOCKET_STATES


def test_missing_transition_raises_a_precise_error() -> None:
    with pytest.raises(InvalidTransition, match=r"state ready cannot take 'established'"):
        next_state(ConnState.READY, Trigger.ESTABLISHED)
    with pytest.raises(InvalidTransition, match="terminal"):
        next_state(ConnState.CLOSED, Trigger.DIAL)
