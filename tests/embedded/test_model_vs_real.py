"""Model matches reality: the simulator's connection sequence equals the real client's.

For stock aiokafka, the random brokers it picked (for metadata and FindCoordinator) are
observed in the real run and replayed by the ``aiokafka-today`` model: the comparison is
exact, not loosened. The proposed client and its simulation draw from the same seeded stream.

The transactional producers (txn-producer, ctp-producer: issue 16) are compared the same
way, and their requests too: the order in which each transactional API (and Produce) was
first sent, where the client determines it (tests/txn_cases.py), and the broker each
reached, as the embedded cluster saw them.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from connmgr.core.events import Api
from connmgr.core.identity import Role
from connmgr.sim.result import RunResult
from connmgr_evidence.realrun import RealRun, run_real, sequence_differences
from txn_cases import (
    AIOKAFKA_CHAINS,
    TXN_CASES,
    TXN_SETTINGS,
    chain_shape,
    model_shape,
    real_shape,
)

pytestmark = pytest.mark.embedded
SCENARIOS = ["seed-consumer", "seed-producer", "big-producer", "big-consumer"]
SETTINGS = {"records": "60", "settle_ms": "3500"}


@functools.cache
def real(scenario: str, client: str) -> RealRun:
    return asyncio.run(run_real(scenario, client, SETTINGS))


@functools.cache
def real_txn(case: str, client: str) -> RealRun:
    scenario = case.split("/")[0]
    return asyncio.run(run_real(scenario, client, {**TXN_SETTINGS, **TXN_CASES[case]}))


def replayed(run: RealRun) -> str:
    """The any-node choices stock aiokafka made, in order, as a replay_choices value."""
    picks = [node for purpose, node in run.choices if purpose in ("metadata", "find_coordinator")]
    return ",".join(str(n) for n in picks)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_stock_aiokafka_matches_the_aiokafka_today_model(scenario: str) -> None:
    run = real(scenario, "aiokafka")
    boot = [index for purpose, index in run.choices if purpose == "bootstrap"]
    model = run.simulate(
        "aiokafka-today", {"replay_choices": replayed(run), "bootstrap_offset": str(boot[0])}
    )
    print(scenario, "real", run.ledger.sequence(), "choices", run.choices)
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.ledger.open_now() == []  # the run stopped the client: nothing is left open
    assert run.steady_summary["steady"] == model.steady


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_proposed_client_matches_the_proposed_model(scenario: str) -> None:
    run = real(scenario, "proposed")
    model = run.simulate("proposed")
    print(scenario, "real", run.ledger.sequence())
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.steady_summary["steady"] == model.steady
    for role, counts in run.steady_summary["by_role"].items():
        assert (counts["opened"], counts["peak"]) == (
            model.by_role[role]["opened"],
            model.by_role[role]["peak"],
        ), role


def test_the_comparison_is_exact_across_batches() -> None:
    model = real("seed-consumer", "proposed").simulate("proposed")
    batches = model.dial_batches()
    flat = [d for batch in batches for d in batch]
    assert sequence_differences(flat, model) == []
    assert sequence_differences(list(reversed(flat)), model)  # batch order is enforced
    assert sequence_differences(flat[:-1], model)  # a missing dial is caught
    assert sequence_differences([*flat, (1, Role.DATA, "x:1")], model)  # an extra one too
    assert sequence_differences([(d[0], Role.COORDINATION, d[2]) for d in flat], model)
    assert sequence_differences([(d[0], d[1], "127.0.0.1:1") for d in flat], model)


def test_headline_figures() -> None:
    consumer = real("seed-consumer", "proposed")
    # No broker confirms its id on a socket today, so the bootstrap connection is not adopted:
    # it serves the first requests and closes before the first broker dial.
    assert consumer.steady_summary["opened"] == 5 and consumer.steady_summary["steady"] == 4
    assert consumer.steady_summary["peak"] == 4
    assert consumer.steady_summary["by_role"]["data"]["handshakes_avoided"] == 0
    # Each role's own peak: they add up to 5, but the bootstrap socket was gone before the
    # others came, so no more than 4 were ever open at once.
    peaks = {role: c["peak"] for role, c in consumer.steady_summary["by_role"].items()}
    assert peaks == {"bootstrap": 1, "data": 3, "coordination": 1}
    producer = real("big-producer", "proposed")
    assert producer.steady_summary["opened"] <= 4
    assert producer.steady_summary["steady"] == 3
    leaders = set(producer.spec.cluster.topics["events"])
    assert {
        int(b) for b, c in producer.steady_summary["by_broker"].items() if c["open_at_end"]
    } == leaders
    for run in (consumer, producer, real("seed-consumer", "aiokafka")):
        assert run.records_acked == run.records_sent or run.records_consumed == 60


def stock_model(run: RealRun) -> RunResult:
    boot = [index for purpose, index in run.choices if purpose == "bootstrap"]
    return run.simulate(
        "aiokafka-today", {"replay_choices": replayed(run), "bootstrap_offset": str(boot[0])}
    )


@pytest.mark.parametrize("case", TXN_CASES)
def test_stock_aiokafka_transactions_match_the_aiokafka_today_model(case: str) -> None:
    run = real_txn(case, "aiokafka")
    model = stock_model(run)
    print(case, "real", run.ledger.sequence(), "choices", run.choices)
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.ledger.open_now() == []
    assert run.steady_summary["steady"] == model.steady
    for role, counts in run.steady_summary["by_role"].items():
        assert (counts["opened"], counts["peak"]) == (
            model.by_role[role]["opened"],
            model.by_role[role]["peak"],
        ), role
    assert chain_shape(real_shape(run), AIOKAFKA_CHAINS) == chain_shape(
        model_shape(model), AIOKAFKA_CHAINS
    )
    assert run.records_acked == run.records_sent == 60


@pytest.mark.parametrize("case", TXN_CASES)
def test_proposed_transactions_match_the_proposed_model(case: str) -> None:
    run = real_txn(case, "proposed")
    model = run.simulate("proposed")
    print(case, "real", run.ledger.sequence())
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.steady_summary["steady"] == model.steady
    for role, counts in run.steady_summary["by_role"].items():
        assert (counts["opened"], counts["peak"]) == (
            model.by_role[role]["opened"],
            model.by_role[role]["peak"],
        ), role
    assert chain_shape(real_shape(run), AIOKAFKA_CHAINS) == chain_shape(
        model_shape(model), AIOKAFKA_CHAINS
    )
    assert run.records_acked == run.records_sent == 60


def test_stock_aiokafka_probes_each_coordinator_it_finds() -> None:
    """aiokafka's Sender._find_coordinator dials the coordination connection of every
    coordinator it finds (client.ready), before InitProducerId goes out on the DEFAULT
    group: the transaction coordinator gets two sockets, the group coordinator one."""
    run = real_txn("ctp-producer", "aiokafka")
    cluster = run.spec.cluster
    txn, group = cluster.txn_coordinator("txn-app"), cluster.coordinator("app")
    dials = [(broker, role) for broker, role, _ in run.ledger.dials()]
    assert dials.count((txn, Role.COORDINATION)) == dials.count((txn, Role.DATA)) == 1
    # The probe comes before InitProducerId's data connection, unless the random broker the
    # FindCoordinator went to (1 in the cluster's size) was the coordinator itself: then
    # that lookup dialled its data connection first.
    lookup = next(node for purpose, node in run.choices if purpose == "find_coordinator")
    probe_first = dials.index((txn, Role.COORDINATION)) < dials.index((txn, Role.DATA))
    assert probe_first == (lookup != txn), (dials, run.choices)
    assert (group, Role.COORDINATION) in dials
    # The model probes as aiokafka does (a readiness request on the coordinator it found).
    model = stock_model(run)
    probes = [(r.reached, r.key.role) for r in model.requests if r.api is Api.OTHER]
    assert probes == [(txn, Role.COORDINATION), (group, Role.COORDINATION)]
