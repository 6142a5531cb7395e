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

FORBIDDEN = {"asyncio", "socket", "time", "random", "aiokafka", "selectors", "threading"}
PACKAGE = Path(connmgr.__file__).parent
SANS_IO = sorted([*(PACKAGE / "core").glob("*.py"), *(PACKAGE / "policies").glob("*.py")])


def imported_modules(source: str) -> set[str]:
    """Top-level names of every module ``source`` imports (import and from-import)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_import_check_catches_forbidden_imports() -> None:
    assert imported_modules("import asyncio\nfrom time import monotonic") >= {"asyncio", "time"}
    assert imported_modules("from random import Random") & FORBIDDEN == {"random"}


@pytest.mark.parametrize("path", SANS_IO, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_core_and_policies_are_sans_io(path: Path) -> None:
    bad = imported_modules(path.read_text()) & FORBIDDEN
    assert not bad, f"{path} imports {sorted(bad)}: the policy core must stay sans-IO"


def test_core_modules_found() -> None:
    assert len(SANS_IO) >= 12


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
