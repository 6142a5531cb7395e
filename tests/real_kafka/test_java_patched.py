"""The patched kafka-clients 4.3.1 on the real 3-broker KRaft cluster, against stock 4.3.1
and against the models (java-patched, java-today), kernel-checked.

On the real cluster the models' counts are exact for both clients; the consumers' dial
order is not (a data connection and the coordinator connection come in the other order than
on the embedded cluster, for stock and patched alike: timing, not the rule), so producers are
compared dial by dial and consumers by their counts. The runs settle for
:data:`~connmgr_evidence.java.patched.SETTLE_MS`, longer than the patched client's linger.
"""

from __future__ import annotations

import asyncio

import pytest

from connmgr_evidence.java.patched import SETTLE_MS
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realrun import RealRun, run_real, sequence_differences
from connmgr_evidence.realrun.backends import KafkaBackend

pytestmark = pytest.mark.real_kafka
SCENARIOS = ["seed-producer", "seed-consumer", "big-producer", "big-consumer"]


def _run(cluster: KafkaCluster, scenario: str, version: str) -> RealRun:
    settings = {"records": "60", "settle_ms": str(SETTLE_MS)}
    if scenario.startswith("big-"):
        settings["brokers"] = "3"
    return asyncio.run(
        run_real(scenario, "java", settings, cluster=KafkaBackend(cluster), kafka_clients=version)
    )


def _counts(
    steady: int, by_role: dict[str, dict[str, int]]
) -> tuple[int, dict[str, tuple[int, ...]]]:
    roles = {r: (c["opened"], c["closed"], c["open_at_end"]) for r, c in by_role.items()}
    return steady, roles


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_patched_client_on_kraft(kafka_cluster: KafkaCluster, scenario: str) -> None:
    stock, patched = (
        _run(kafka_cluster, scenario, "4.3.1"),
        _run(kafka_cluster, scenario, "4.3.1-patched"),
    )
    for run, policy in ((stock, "java-today"), (patched, "java-patched")):
        model = run.simulate(policy, run.model_settings())
        summary = run.steady_summary
        print(scenario, policy, run.ledger.sequence(), summary["by_role"])
        assert _counts(summary["steady"], summary["by_role"]) == _counts(
            model.steady, model.by_role
        )
        if run.spec.client.value == "producer":
            assert sequence_differences(run.ledger.dials(), model) == []
            assert run.records_acked == run.records_sent == 60
        else:
            assert run.records_consumed == 60
    closed = {r: c["closed"] for r, c in patched.steady_summary["by_role"].items()}
    assert closed["bootstrap"] >= 1
    assert all(c["closed"] == 0 for c in stock.steady_summary["by_role"].values())
    # 0009: the patched client never dials the second bootstrap connection stock makes while
    # its first cannot take a request yet, so it holds what stock holds, less what (b0) closed,
    # less the bootstrap connections it did not open.
    opened = {
        r: stock.steady_summary["by_role"][r]["opened"] - c["opened"]
        for r, c in patched.steady_summary["by_role"].items()
    }
    assert opened["data"] == opened["coordination"] == 0
    assert opened["bootstrap"] >= 0
    assert patched.steady_summary["steady"] == (
        stock.steady_summary["steady"] - sum(closed.values()) - opened["bootstrap"]
    )
