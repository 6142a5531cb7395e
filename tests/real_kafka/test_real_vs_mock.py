"""The same scenarios on a real Kafka cluster and on the embedded mock: every record gets
through, and the connection counts of each client agree between the two clusters."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from connmgr.aio.identity import API_VERSIONS_KEY, CHECK_VERSION
from connmgr.ledger import ConnEvent
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realrun import RealRun, run_real
from connmgr_evidence.realrun.backends import KafkaBackend

pytestmark = pytest.mark.real_kafka
SETTINGS = {"records": "90", "settle_ms": "3500"}
CASES = [
    ("seed-consumer", "aiokafka", None),
    ("seed-producer", "aiokafka", None),
    ("seed-consumer", "proposed", None),
    ("seed-producer", "proposed", None),
    ("seed-consumer", "java", "4.4.0"),
    ("seed-consumer", "java", "2.1.0"),
]


def counts(run: RealRun) -> dict[str, Any]:
    summary = run.steady_summary
    roles = {role: (c["opened"], c["open_at_end"]) for role, c in summary["by_role"].items()}
    return {"opened": summary["opened"], "steady": summary["steady"], "roles": roles}


@pytest.mark.parametrize(("scenario", "client", "version"), CASES)
def test_counts_agree_with_the_mock(
    kafka_cluster: KafkaCluster, scenario: str, client: str, version: str | None
) -> None:
    real = asyncio.run(
        run_real(
            scenario, client, SETTINGS, cluster=KafkaBackend(kafka_cluster), kafka_clients=version
        )
    )
    mock = asyncio.run(run_real(scenario, client, SETTINGS, kafka_clients=version))
    print(scenario, client, version, "real Kafka", counts(real), "mock", counts(mock))
    for run in (real, mock):
        if run.spec.client.value == "producer":
            assert run.records_acked == run.records_sent == 90
        else:
            assert run.records_consumed == 90
    expected = counts(mock)
    adopted = real.ledger.count(ConnEvent.ADOPTED)
    if client == "proposed" and answers_identity_check(kafka_cluster):
        # A 4.4 broker confirms the bootstrap socket's node (KIP-1242), which the mock cannot:
        # the drop-in adopts it (as a leader's data socket here) and dials that broker no more.
        assert adopted == 1
        opened, at_end = expected["roles"]["data"]
        expected["roles"]["data"] = (opened - 1, at_end)
        expected["opened"] -= 1
    else:
        assert adopted == 0
    assert counts(real) == expected


def answers_identity_check(cluster: KafkaCluster) -> bool:
    """Whether the cluster's brokers accept ApiVersions v5 (Kafka 4.4+)."""
    low, high = cluster.api_versions(1)[API_VERSIONS_KEY]
    return low <= CHECK_VERSION <= high
