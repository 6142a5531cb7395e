"""Stateful runs of the real proposed producer on the embedded cluster, beside the simulator
(the machine and its invariants: :mod:`connmgr.testing.real_pair`).

Few, short examples: each starts a mock cluster and a real client. Select them with
``pytest -m real_stateful``. The examples are derandomized so that this suite is
reproducible; explore further by running the machine with more examples and without
``derandomize``.
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test

from connmgr.testing.real_pair import RealPairMachine

pytestmark = [pytest.mark.embedded, pytest.mark.real_stateful]

REAL_STATEFUL = settings(
    max_examples=5, stateful_step_count=6, deadline=None, database=None, derandomize=True
)


def test_real_proposed_producer_agrees_with_the_simulator() -> None:
    run_state_machine_as_test(RealPairMachine, settings=REAL_STATEFUL)


def test_leader_moving_to_a_broker_that_then_dies_loses_no_record() -> None:
    # Found by the machine above: a request waiting for a broker that then left metadata
    # stayed pending in the policy until request_timeout_ms and the producer's batch
    # expired. Now the policy hands it back (Reject) once metadata newer than the request
    # lacks its broker, and aiokafka's retry path re-drains the batch to the new leader.
    machine = RealPairMachine()
    try:
        machine.begin(leaders=(1,), seed=0)
        machine.do_produce(1)  # connected to broker 1, the leader
        machine.do_broker_down(1)  # socket closed: the client refreshes, leader is now 2
        machine.do_broker_down(2)  # no socket to 2: the client still thinks 2 leads
        machine.do_produce(1)  # dial to 2 refused; 2 leaves metadata while a request waits
        machine.check()
    finally:
        machine.teardown()
