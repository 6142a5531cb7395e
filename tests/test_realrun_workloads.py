"""Which workload a real run gives each client and scenario
(connmgr_evidence.realrun.run.workload_of):
one table, every workload taking the same WorkloadInputs."""

from __future__ import annotations

import pytest

from connmgr.sim.run import prepare
from connmgr_evidence.realrun.librdkafka import run_librdkafka
from connmgr_evidence.realrun.run import workload_of
from connmgr_evidence.realrun.transactional import run_txn_producer
from connmgr_evidence.realrun.workloads import run_consumer, run_producer


@pytest.mark.parametrize(
    ("client", "scenario", "expected"),
    [
        ("aiokafka", "seed-producer", run_producer),
        ("proposed", "seed-producer", run_producer),
        ("aiokafka", "seed-consumer", run_consumer),
        ("proposed", "seed-consumer", run_consumer),
        ("aiokafka", "txn-producer", run_txn_producer),
        ("proposed", "ctp-producer", run_txn_producer),
        ("librdkafka", "seed-producer", run_librdkafka),
        ("librdkafka", "seed-consumer", run_librdkafka),
    ],
)
def test_each_client_and_scenario_gets_its_workload(
    client: str, scenario: str, expected: object
) -> None:
    spec, _, _ = prepare(scenario, {})
    assert workload_of(client, spec) is expected
