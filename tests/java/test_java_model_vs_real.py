"""java-today against the real kafka-clients 4.4.0 on the embedded cluster.

The client's choices are observed and replayed, not loosened: the nodes its
``leastLoadedNode`` returned "with no active connection" (TRACE log, the random scan offset
and the picks that depend on sub-millisecond timing) and the node its telemetry sender
asked for a subscription. Everything else -- which requests go where, bootstrap connections
that are never reused nor closed, the ``2147483647 - id`` coordinator connection, the dial
batches -- is the model's own prediction, compared dial by dial.

The transactional producers (txn-producer, ctp-producer: issue 16) are compared the same
way, and their requests too (see tests/txn_cases.py): the order in which each transactional
API and Produce was first sent, where kafka-clients determines it, and the broker each
reached. Two outcomes of races between the application and sender threads are observed in
the log and replayed, like the picks: the telemetry loop's detour to one more broker
(replay_choices) and whether the sender dialled the first batches' leaders before
TxnOffsetCommit (``ScenarioSpec.early_leader_dials``).
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from connmgr.core.decisions import Placement
from connmgr.core.events import Api
from connmgr.core.identity import CoordinatorNode, Purpose
from connmgr.core.request import Request, ToCoordinator
from connmgr.javalog import parse_sent_requests
from connmgr.policies import JavaTodayPolicy
from connmgr_evidence.realrun import RealRun, run_real, sequence_differences
from txn_cases import (
    JAVA_CHAINS,
    TXN_CASES,
    TXN_SETTINGS,
    chain_shape,
    model_shape,
    real_shape,
)

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
    # Shown only when the test fails: what the real client did, against the model.
    print(scenario, "real", run.ledger.sequence(), "choices", run.choices)
    print("real summary", run.steady_summary, "model", model.steady, model.by_role)
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


@functools.cache
def _real_txn(case: str, attempt: int = 0) -> RealRun:
    scenario = case.split("/")[0]
    settings = {**TXN_SETTINGS, **TXN_CASES[case]}
    return asyncio.run(run_real(scenario, "java", settings, kafka_clients="4.4.0"))


@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("case", TXN_CASES)
def test_java_today_predicts_kafka_clients_4_4_transactions(case: str, attempt: int) -> None:
    run = _real_txn(case, attempt)
    model = run.simulate("java-today", run.replay_settings())
    print(case, "real", run.ledger.sequence(), "choices", run.choices)
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.steady_summary["steady"] == model.steady
    for role, counts in run.steady_summary["by_role"].items():
        assert (counts["opened"], counts["peak"]) == (
            model.by_role[role]["opened"],
            model.by_role[role]["peak"],
        ), role
    assert chain_shape(real_shape(run), JAVA_CHAINS) == chain_shape(model_shape(model), JAVA_CHAINS)
    assert run.records_acked == run.records_sent == 60


class GroupNodeForTxnOffsetCommit(JavaTodayPolicy):
    """java-today as it was: a producer's TxnOffsetCommit on the ``2147483647 - id`` node,
    like the consumer's group requests."""

    def place(self, request: Request) -> Placement:
        target = request.target
        if request.api is Api.TXN_OFFSET_COMMIT and isinstance(target, ToCoordinator):
            assert self.metadata is not None
            endpoint = self.metadata.endpoint_of(target.broker_id)
            assert endpoint is not None
            node = CoordinatorNode(target.broker_id)
            return self.connection_for(node, endpoint, Purpose.COORDINATION)
        return super().place(request)


def test_the_transaction_manager_commits_offsets_on_the_brokers_own_node() -> None:
    """TransactionManager keeps the group coordinator FindCoordinator named by its real id
    (FindCoordinatorHandler: ``consumerGroupCoordinator = new Node(nodeId, host, port)``):
    TxnOffsetCommit goes on that broker's ordinary connection, never on a coordinator node."""
    run = _real_txn("ctp-producer", 0)  # the cached first attempt
    group = run.spec.cluster.coordinator("app")
    assert run.java_log is not None
    with open(run.java_log) as log:
        sent = parse_sent_requests(log.readlines())
    assert {node for _, api, node in sent if api == "TXN_OFFSET_COMMIT"} == {group}
    assert run.steady_summary["by_role"]["coordination"]["opened"] == 0
    old = run.simulate(GroupNodeForTxnOffsetCommit, run.replay_settings())
    assert sequence_differences(run.ledger.dials(), old) != []
