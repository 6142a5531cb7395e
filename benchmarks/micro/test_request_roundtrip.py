"""The produce/fetch hot path, whole: a request for a broker the policy already has a READY
connection to (one ``Lease`` out), then its response (no action out) -- the two decisions a
driver asks for per request (acquire and done), for every policy side by side in one run.

The warm policy is the one :mod:`test_decision_cost` builds (a big-producer client after a
simulated minute). Each round times :data:`PAIRS` request/response pairs, one after the
other, so the connection is idle between them, as it is for a producer that waits for each
acknowledgement. ``extra_info.per_pair_us`` is the round's mean over the pairs; half of it is
the mean cost of one of the two decisions.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from test_decision_cost import SCENARIO, SETTINGS, WARM_MS, warm_policy

from connmgr.core.actions import Lease
from connmgr.core.events import Api, BrokerRequestNeeded, ResponseReceived
from connmgr.policies import POLICIES

PAIRS = 500
"""Request/response pairs timed per round."""


@pytest.mark.parametrize("policy", tuple(POLICIES))
def test_request_roundtrip_cost(benchmark: Any, rounds: int, policy: str) -> None:
    warm, leader, now = warm_policy(policy)
    ids = itertools.count(1_000_000_000)

    probe = next(ids)
    sent = warm.handle(BrokerRequestNeeded(probe, Api.PRODUCE, leader), now)
    assert len(sent) == 1 and isinstance(sent[0], Lease), (
        f"{policy}: a warm produce should be one Lease, got {sent} ({warm!r})"
    )
    assert warm.handle(ResponseReceived(probe), now) == []

    def setup() -> tuple[tuple[list[tuple[BrokerRequestNeeded, ResponseReceived]]], dict[str, Any]]:
        # Events are built untimed: a driver has them before it asks the policy.
        pairs = []
        for _ in range(PAIRS):
            rid = next(ids)
            pairs.append((BrokerRequestNeeded(rid, Api.PRODUCE, leader), ResponseReceived(rid)))
        return (pairs,), {}

    def roundtrips(pairs: list[tuple[BrokerRequestNeeded, ResponseReceived]]) -> None:
        handle = warm.handle
        for request, response in pairs:
            handle(request, now)
            handle(response, now)

    benchmark.group = "decision-roundtrip"
    benchmark.extra_info.update(
        {
            "policy": policy,
            "scenario": f"{SCENARIO} brokers={SETTINGS['brokers']}, warm {WARM_MS / 1000:.0f} s",
            "event": "BrokerRequestNeeded(PRODUCE) to a connected leader, then its response",
            "pairs": PAIRS,
        }
    )
    benchmark.pedantic(roundtrips, setup=setup, rounds=rounds, warmup_rounds=1)
    if benchmark.stats is not None:  # None under --benchmark-disable
        benchmark.extra_info["per_pair_us"] = benchmark.stats.stats.mean / PAIRS * 1e6
        benchmark.extra_info["per_pair_median_us"] = benchmark.stats.stats.median / PAIRS * 1e6
