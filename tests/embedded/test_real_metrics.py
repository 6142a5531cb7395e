"""Real runs measure more than connections: time to the first acknowledged or consumed
record, handshakes, and producer throughput of two clients taking turns on one cluster."""

from __future__ import annotations

import asyncio
import functools

import pytest

from connmgr.errors import ConfigError
from connmgr_evidence.realrun import ABTurn, RealRun, run_real, throughput_ab

pytestmark = pytest.mark.embedded
SETTINGS = {"records": "20", "settle_ms": "500"}
STOCK_AND_PROPOSED = ["aiokafka", "proposed"]


@functools.cache
def real(scenario: str, client: str, rtt_ms: int = 0) -> RealRun:
    return asyncio.run(run_real(scenario, client, {**SETTINGS, "rtt_ms": str(rtt_ms)}))


@pytest.mark.parametrize("client", STOCK_AND_PROPOSED)
def test_a_producer_run_times_its_first_acknowledged_record(client: str) -> None:
    run = real("seed-producer", client)
    data = run.as_json()
    assert run.records_acked == 20
    assert data["ttfa_ms"] == pytest.approx(run.ttfa_ms, abs=0.001)
    assert data["ttfc_ms"] is None
    assert run.ttfa_ms is not None
    assert 0 < run.ttfa_ms <= run.wall_s * 1000


@pytest.mark.parametrize("client", STOCK_AND_PROPOSED)
def test_a_consumer_run_times_its_first_consumed_record(client: str) -> None:
    run = real("seed-consumer", client)
    data = run.as_json()
    assert run.records_consumed == 20
    assert data["ttfc_ms"] == pytest.approx(run.ttfc_ms, abs=0.001)
    assert data["ttfa_ms"] is None
    assert run.ttfc_ms is not None
    assert 0 < run.ttfc_ms <= run.wall_s * 1000


@pytest.mark.parametrize(
    ("scenario", "client"),
    [(s, c) for s in ("seed-producer", "seed-consumer") for c in STOCK_AND_PROPOSED],
)
def test_handshakes_are_the_dials_that_did_not_fail(scenario: str, client: str) -> None:
    data = real(scenario, client).as_json()
    assert data["handshakes"] == data["opened"] - data["failed"]
    # Every scenario dials at least a bootstrap server and the brokers it uses.
    assert data["handshakes"] >= 2


@pytest.mark.parametrize("client", STOCK_AND_PROPOSED)
def test_broker_rtt_delays_the_first_acknowledgement(client: str) -> None:
    near, far = real("seed-producer", client, 0), real("seed-producer", client, 20)
    assert near.ttfa_ms is not None and far.ttfa_ms is not None
    print(f"{client}: ttfa {near.ttfa_ms:.1f} ms at rtt 0, {far.ttfa_ms:.1f} ms at rtt 20")
    # Metadata and Produce responses (at least) each wait one RTT before the first ack.
    assert far.ttfa_ms > near.ttfa_ms


@functools.cache
def ab_turns() -> list[ABTurn]:
    return asyncio.run(throughput_ab(brokers=3, records=300, rounds=2))


def test_throughput_ab_alternates_which_client_goes_first() -> None:
    turns = ab_turns()
    for turn in turns:
        print(turn)
    assert [(t.round, t.client) for t in turns] == [
        (0, "proposed"),
        (0, "aiokafka"),
        (1, "aiokafka"),
        (1, "proposed"),
    ]


def test_throughput_ab_turns_acknowledge_every_record_at_a_positive_rate() -> None:
    for turn in ab_turns():
        assert turn.records == 300
        assert turn.seconds > 0
        assert turn.records_per_s == pytest.approx(turn.records / turn.seconds)
        # One data connection per leader is open when the last record is acknowledged.
        assert turn.steady >= 3
        assert turn.opened >= turn.peak >= turn.steady


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "rounds"),
        ({"records": 0}, "records"),
        ({"brokers": 0}, "brokers"),
        ({"rtt_ms": -1.0}, "rtt_ms"),
        ({"clients": ("proposed", "kafka-python")}, "kafka-python"),
        ({"clients": ("proposed",)}, "pair"),
    ],
)
def test_throughput_ab_refuses_bad_input(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        asyncio.run(throughput_ab(**kwargs))  # type: ignore[arg-type]


@pytest.mark.java
def test_the_java_producer_reports_its_first_acknowledgement() -> None:
    run = asyncio.run(run_real("seed-producer", "java", SETTINGS, kafka_clients="4.4.0"))
    data = run.as_json()
    print(f"java 4.4.0: ttfa {run.ttfa_ms} ms, wall {run.wall_s:.3f} s")
    assert run.records_acked == 20
    assert run.ttfa_ms is not None
    assert 0 < run.ttfa_ms <= run.wall_s * 1000
    assert data["ttfc_ms"] is None
    assert data["handshakes"] == data["opened"] - data["failed"]
