"""java-today against the real kafka-clients 4.4.0 on the embedded cluster.

The client's choices are observed and replayed, not loosened: the nodes its
``leastLoadedNode`` returned "with no active connection" (TRACE log, the random scan offset
and the picks that depend on sub-millisecond timing) and the node its telemetry sender
asked for a subscription. Everything else -- which requests go where, bootstrap connections
that are never reused nor closed, the ``2147483647 - id`` coordinator connection, the dial
batches -- is the model's own prediction, compared dial by dial.
"""

from __future__ import annotations

import asyncio

import pytest
from connmgr.realrun import RealRun, run_real, sequence_differences

pytestmark = pytest.mark.java

SCENARIOS = ["seed-consumer", "seed-producer", "big-producer", "big-consumer"]


def _real(scenario: str) -> RealRun:
    return asyncio.run(
        run_real(scenario, "java", {"records": "60", "settle_ms": "1500"}, kafka_clients="4.4.0")
    )


@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_today_predicts_kafka_clients_4_4(scenario: str, attempt: int) -> None:
    run = _real(scenario)
    model = run.simulate("java-today", run.replay_settings())
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.steady_summary["steady"] == model.steady
    for role, counts in run.steady_summary["by_role"].items():
        assert counts["opened"] == model.by_role[role]["opened"], role


def test_the_consumer_finds_its_coordinator_through_a_broker() -> None:
    run = _real("seed-consumer")
    model = run.simulate("java-today", run.replay_settings())
    # Today's client dials a broker for FindCoordinator after the first metadata response,
    # where the 2019 log shows it on the bootstrap connection: one more data connection.
    assert model.by_role["data"]["opened"] == 3 and model.by_role["coordination"]["opened"] == 1
    assert sequence_differences(run.ledger.dials(), model) == []


def test_the_comparison_catches_a_wrong_pick() -> None:
    """Replaying the picks with every bootstrap node swapped for another must not match."""
    run = _real("big-producer")
    count = len(run.spec.bootstrap)
    settings = run.replay_settings()
    swapped = [
        str(-(-int(node) % count) - 1) if int(node) < 0 else node
        for node in settings["replay_choices"].split(",")
    ]
    model = run.simulate("java-today", {**settings, "replay_choices": ",".join(swapped)})
    assert sequence_differences(run.ledger.dials(), model) != []
