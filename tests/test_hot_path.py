"""The hot path (a broker request on a remembered READY route, see :mod:`connmgr.core.policy`)
and the derivation caches (:mod:`connmgr.core.derived`) change no decision: every policy, on
every scenario, gives the same run with both as with both switched off
(``stable_broker_routes = False`` sends every request through ``place``; :class:`Uncached`
computes every derivation afresh and redoes every piece of work marked done), connection by
connection and request by request. A writer that forgot to drop the caches shows here."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from connmgr.core.actions import Lease
from connmgr.core.derived import Uncached
from connmgr.core.events import Api, BrokerRequestNeeded, ResponseReceived
from connmgr.core.policy import Policy
from connmgr.errors import PolicyMisuse
from connmgr.policies import POLICIES, policy_class
from connmgr.sim import SCENARIOS, simulate
from connmgr.sim.run import build_simulator, prepare


@functools.cache
def without_hot_path(name: str) -> type[Policy]:
    """Policy ``name`` with every broker request placed by ``place`` and nothing cached."""
    base = policy_class(name)
    return type(
        f"{base.__name__}WithoutHotPath",
        (base,),
        {"stable_broker_routes": False, "derived_type": Uncached},
    )


def comparable(policy: str | type[Policy], scenario: str) -> dict[str, Any]:
    doc = simulate(scenario, policy).as_json()
    doc.pop("wall_s")
    return doc


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_run_without_the_hot_path(scenario: str, policy: str) -> None:
    fast = comparable(policy, scenario)
    slow = comparable(without_hot_path(policy), scenario)
    assert fast["requests"] == slow["requests"]
    assert fast["timeline"] == slow["timeline"]
    assert fast == slow


def warm(policy: str) -> tuple[Policy, int, float]:
    spec, settings, seed = prepare("big-producer", {"brokers": "20"})
    sim = build_simulator(spec, policy, settings, seed)
    sim.start()
    sim.advance_to(60_000.0)
    return sim.policy, spec.cluster.topics[spec.topics[0]][0], sim.now


@pytest.mark.parametrize("policy", POLICIES)
def test_hot_path_refuses_a_request_id_in_use(policy: str) -> None:
    p, leader, now = warm(policy)
    for _ in range(2):  # the first goes through place() and remembers the route
        rid = 10**9 + _
        (sent,) = p.handle(BrokerRequestNeeded(rid, Api.PRODUCE, leader), now)
        assert isinstance(sent, Lease)
    with pytest.raises(PolicyMisuse, match="already in use"):
        p.handle(BrokerRequestNeeded(10**9 + 1, Api.PRODUCE, leader), now)
    assert p.handle(ResponseReceived(10**9 + 1), now) == []
