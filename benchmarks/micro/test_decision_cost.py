"""The cost of one policy decision: a warm policy told that a produce request needs the
partition leader, returning its actions (one ``Lease`` of the connection it already has).

The policy is the real one, warmed by the simulator: a big-producer client (1,000 brokers)
runs one simulated minute, so the policy holds metadata and its connections. The benchmark
then calls :meth:`Policy.handle` directly, as a driver does. Each round times
:data:`DECISIONS` requests; their responses are fed back between rounds, untimed, so every
round starts from the same state.

Every policy is measured in the same run, side by side; the whole hot path (the request and
then its response) is :mod:`test_request_roundtrip`.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from connmgr.core.actions import Lease
from connmgr.core.events import Api, BrokerRequestNeeded, ResponseReceived
from connmgr.core.policy import Policy
from connmgr.policies import POLICIES
from connmgr.sim.run import build_simulator, prepare

SCENARIO = "big-producer"
SETTINGS = {"brokers": "1000", "duration_ms": "600000"}
WARM_MS = 60_000.0
"""Simulated time before the benchmark: bootstrap, metadata and connections are done."""
DECISIONS = 500
"""Decisions timed per round."""


def warm_policy(name: str) -> tuple[Policy, int, float]:
    """Policy ``name`` after ``WARM_MS`` of the scenario, the leader of partition 0, and the
    simulated time."""
    spec, policy_settings, seed = prepare(SCENARIO, SETTINGS)
    sim = build_simulator(spec, name, policy_settings, seed)
    policy = sim.policy
    sim.start()
    sim.advance_to(WARM_MS)
    return policy, spec.cluster.topics[spec.topics[0]][0], sim.now


@pytest.mark.parametrize("policy", tuple(POLICIES))
def test_decision_cost(benchmark: Any, rounds: int, policy: str) -> None:
    warm, leader, now = warm_policy(policy)
    # Request ids far above the simulator's, fresh for every decision.
    ids = itertools.count(1_000_000_000)

    probe = next(ids)
    actions = warm.handle(BrokerRequestNeeded(probe, Api.PRODUCE, leader), now)
    assert len(actions) == 1 and isinstance(actions[0], Lease), (
        f"{policy}: a warm produce should be one Lease, got {actions} ({warm!r})"
    )
    assert warm.handle(ResponseReceived(probe), now) == []
    outstanding: list[int] = []

    def setup() -> tuple[tuple[list[BrokerRequestNeeded]], dict[str, Any]]:
        for rid in outstanding:  # the previous round's responses, untimed
            warm.handle(ResponseReceived(rid), now)
        outstanding[:] = [next(ids) for _ in range(DECISIONS)]
        events = [BrokerRequestNeeded(rid, Api.PRODUCE, leader) for rid in outstanding]
        return (events,), {}

    def decide(events: list[BrokerRequestNeeded]) -> None:
        handle = warm.handle
        for event in events:
            handle(event, now)

    benchmark.group = "decision"
    benchmark.extra_info.update(
        {
            "policy": policy,
            "scenario": f"{SCENARIO} brokers={SETTINGS['brokers']}, warm {WARM_MS / 1000:.0f} s",
            "event": "BrokerRequestNeeded(PRODUCE) to a connected leader",
            "decisions": DECISIONS,
            "decisions_per_round": DECISIONS,
        }
    )
    benchmark.pedantic(decide, setup=setup, rounds=rounds, warmup_rounds=1)
    if benchmark.stats is not None:  # None under --benchmark-disable
        mean = benchmark.stats.stats.mean
        benchmark.extra_info["per_decision_us"] = mean / DECISIONS * 1e6
        median = benchmark.stats.stats.median
        benchmark.extra_info["per_decision_median_us"] = median / DECISIONS * 1e6
