"""java-patched against the real kafka-clients 4.3.1 with the project's patch, switches on.

The patched client (``benchmarks/kafka-clients-patch``, run by the probe as
``4.3.1-patched``) is accounted like every other Java client: its NetworkClient log, its own
connection metrics and the kernel's view of its sockets must agree (``verify_kernel``). The
model is java-today plus rules (b0) and 6 (:mod:`connmgr.policies.java_patched`); the picks the
real client made at random or by timing are replayed as for java-today, everything else -- which
connections, which of them the rules close, when -- is the model's prediction. The runs settle
for :data:`~connmgr_evidence.java.patched.SETTLE_MS`, longer than the linger, before the steady
count.

At 1,000 brokers (big-producer, big-consumer) and on the seed topologies.
"""

from __future__ import annotations

import asyncio
import functools

import pytest

from connmgr.sim.result import RunResult
from connmgr_evidence.java.patched import SETTLE_MS, SWITCHES
from connmgr_evidence.realrun import RealRun, run_real, sequence_differences

pytestmark = pytest.mark.java

SCENARIOS = ["seed-consumer", "seed-producer", "big-producer", "big-consumer"]
SETTINGS = {"records": "60", "settle_ms": str(SETTLE_MS)}


@functools.cache
def _real(scenario: str, version: str, attempt: int = 0) -> RealRun:
    return asyncio.run(run_real(scenario, "java", SETTINGS, kafka_clients=version))


def _roles(counts: dict[str, dict[str, int]]) -> dict[str, tuple[int, int, int]]:
    return {role: (c["opened"], c["closed"], c["open_at_end"]) for role, c in counts.items()}


def _agrees(run: RealRun, model: RunResult) -> bool:
    return (
        sequence_differences(run.ledger.dials(), model) == []
        and run.steady_summary["steady"] == model.steady
        and _roles(run.steady_summary["by_role"]) == _roles(model.by_role)
    )


def _patched_model(run: RealRun, linger_ms: str | None = None) -> RunResult:
    """java-patched on the run's topology and picks, at the linger the client was given (or
    ``linger_ms``)."""
    settings = run.model_settings()
    assert settings["connection_linger_ms"] == SWITCHES["connections.linger.ms"]
    if linger_ms is not None:
        settings["connection_linger_ms"] = linger_ms
    return run.simulate("java-patched", settings)


def _closed_by_choice(run: RealRun) -> dict[str, int]:
    """Connections the client closed itself, by role (stock 4.3.1 closes none in a short run)."""
    return {role: c["closed"] for role, c in run.steady_summary["by_role"].items() if c["closed"]}


@pytest.mark.parametrize("attempt", range(2))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_patched_predicts_the_patched_client(scenario: str, attempt: int) -> None:
    run = _real(scenario, "4.3.1-patched", attempt)
    model = _patched_model(run)
    print(scenario, "real", run.ledger.sequence(), "choices", run.choices)
    print("real summary", run.steady_summary, "model", model.steady, model.by_role)
    assert {k: run.client_config[k] for k in SWITCHES} == dict(SWITCHES)
    assert sequence_differences(run.ledger.dials(), model) == []
    assert run.steady_summary["steady"] == model.steady
    assert _roles(run.steady_summary["by_role"]) == _roles(model.by_role)
    # The rule acted: every bootstrap connection was closed by the client, none is left.
    bootstrap = run.steady_summary["by_role"]["bootstrap"]
    assert bootstrap["opened"] == bootstrap["closed"] >= 1 and bootstrap["open_at_end"] == 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_comparison_tells_the_patch_from_todays_client(scenario: str) -> None:
    """Each model matches its own client only: java-today misses the patched client's closes,
    java-patched predicts closes stock 4.3.1 never makes."""
    patched, stock = _real(scenario, "4.3.1-patched"), _real(scenario, "4.3.1")
    assert _agrees(stock, stock.simulate("java-today", stock.replay_settings()))
    assert not _agrees(patched, patched.simulate("java-today", patched.replay_settings()))
    assert not _agrees(stock, stock.simulate("java-patched", stock.model_settings()))


def test_the_linger_closed_a_connection_and_only_a_model_with_it_predicts_that() -> None:
    """Rule 6 acts in these runs: at 1,000 brokers the consumer's FindCoordinator broker is
    neither read from nor its coordinator, and the patched client closes it one linger after
    its answer; java-patched with a linger that never runs out misses that close.

    Which broker FindCoordinator goes to is the client's leastLoadedNode pick: when the fetch
    connection is up first (a busy machine), it goes over that connection and the linger has
    nothing to close. Such a run must then agree with a linger that never runs out, and a
    later attempt is looked at; three attempts without a close fail the test."""
    for attempt in range(3):
        run = _real("big-consumer", "4.3.1-patched", attempt)
        if set(_closed_by_choice(run)) - {"bootstrap"}:
            break
        assert _agrees(run, _patched_model(run, linger_ms=str(10**9))), run.choices
    else:
        pytest.fail("the linger closed nothing but bootstrap connections in 3 big-consumer runs")
    assert _agrees(run, _patched_model(run))
    assert not _agrees(run, _patched_model(run, linger_ms=str(10**9)))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_patch_keeps_fewer_sockets_and_loses_no_record(scenario: str) -> None:
    """Patched against stock 4.3.1: the same dials, the bootstrap connections and those the
    linger closed gone by the steady count, every record through.

    "The same dials" given the same picks: the telemetry sender's first request races the
    producer's own first connection and goes to a broker not yet dialled in some runs of
    either client (opened 5 or 6 at 1,000 brokers). So the patched run is held against stock
    4.3.1 as java-today predicts it with the patched run's picks (java-today is exact for
    stock, test above), and against the stock run itself when both made the same picks."""
    patched, stock = _real(scenario, "4.3.1-patched"), _real(scenario, "4.3.1")
    closed = sum(_closed_by_choice(patched).values())
    assert _closed_by_choice(stock) == {}
    stock_same_picks = patched.simulate("java-today", patched.replay_settings())
    assert patched.steady_summary["opened"] == stock_same_picks.opened
    assert patched.steady_summary["steady"] == stock_same_picks.steady - closed
    if patched.replay_settings() == stock.replay_settings():
        assert patched.steady_summary["opened"] == stock.steady_summary["opened"]
        assert patched.steady_summary["steady"] == stock.steady_summary["steady"] - closed
    for run in (patched, stock):
        if run.spec.client.value == "producer":
            assert run.records_acked == run.records_sent == 60
        else:
            assert run.records_consumed == 60
