"""``place`` decides and the base dials: a policy's answer to "where does this request go" is
a :data:`~connmgr.core.decisions.Placement`, and asking changes no connection record."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import connmgr
from connmgr.core.decisions import OpenFor, SendOn
from connmgr.core.events import Api
from connmgr.core.identity import BrokerNode, Purpose
from connmgr.core.policy import Policy
from connmgr.core.request import Request, ToBroker
from connmgr.policies import POLICIES
from connmgr.sim.run import build_simulator, prepare


def warm(policy: str) -> tuple[Policy, int | None]:
    """Policy ``policy`` after a simulated minute of a 20-broker producer, and a broker it
    has no connection to (None for a model that dials every broker metadata names)."""
    spec, settings, seed = prepare("big-producer", {"brokers": "20"})
    sim = build_simulator(spec, policy, settings, seed)
    sim.start()
    sim.advance_to(60_000.0)
    p = sim.policy
    assert p.metadata is not None
    cold = next(
        (
            b.broker_id
            for b in p.metadata.brokers
            if p.table.live_for_node(BrokerNode(b.broker_id), Purpose.DATA) is None
        ),
        None,
    )
    return p, cold


@pytest.mark.parametrize("policy", POLICIES)
def test_placing_a_request_for_an_unconnected_broker_dials_nothing(policy: str) -> None:
    p, cold = warm(policy)
    if cold is None:
        pytest.skip(f"{policy} holds a connection to every broker")
    records, generation = p.table.all(), p.derived.generation
    placement = p.place(Request(10**9, Api.PRODUCE, ToBroker(cold)))
    assert isinstance(placement, OpenFor), placement
    assert placement.key.broker_id == cold
    assert p.table.all() == records and p.derived.generation == generation, (
        f"{policy}: place() changed the connection records ({p!r})"
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_placing_a_request_for_a_connected_leader_sends_on_its_connection(policy: str) -> None:
    p, _ = warm(policy)
    ready = next(c for c in p.table.records() if c.key.broker_id is not None)
    assert ready.key.broker_id is not None
    generation = p.derived.generation
    placement = p.place(Request(10**9, Api.PRODUCE, ToBroker(ready.key.broker_id)))
    # The connection itself, or its key (whose live connection the base finds).
    assert (isinstance(placement, SendOn) and placement.conn is ready) or (
        isinstance(placement, OpenFor) and placement.key == ready.key
    ), placement
    assert p.derived.generation == generation


def test_no_policy_module_dials() -> None:
    """Only the executor opens connections: a policy naming ``get_or_dial`` (or the
    executor) is a hook that dials."""
    package = Path(connmgr.__file__).parent
    dialling = sorted(
        str(path.relative_to(package))
        for path in (package / "policies").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr in ("get_or_dial", "_do", "take")
    )
    assert dialling == []


def test_no_placement_is_dropped() -> None:
    """A placement computed and thrown away is a dial that no longer happens (the dial used
    to be a side effect of asking): every call of ``place`` or ``connection_for`` in a policy
    module is used."""
    package = Path(connmgr.__file__).parent
    dropped = sorted(
        f"{path.relative_to(package)}:{node.lineno}"
        for path in (package / "policies").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr in ("place", "connection_for", "_poll_loop", "_telemetry_detour")
    )
    assert dropped == []
