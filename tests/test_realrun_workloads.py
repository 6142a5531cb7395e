"""Which workload a real run gives each client and scenario (connmgr.realrun.run.workload_of):
one table, every workload taking the same WorkloadInputs."""

from __future__ import annotations

import pytest
from connmgr.realrun.librdkafka import run_librdkafka
from connmgr.realrun.run import workload_of
from connmgr.realrun.transactional import run_txn_producer
from connmgr.realrun.workloads import run_consumer, run_producer
from connmgr.sim.run import prepare


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
