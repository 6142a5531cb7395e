"""A scaled-life real run (``--set life_s=... time_scale=...``): every real client gets its
connection timers scaled, keeps working through its life, is counted per represented
client-hour from its own ledger, and still matches the kernel at the end -- also through a
rolling restart of the embedded cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from connmgr.errors import ConfigError
from connmgr.ledger import HOUR_S, ConnEvent
from connmgr_evidence.realrun import RealRun, run_real
from connmgr_evidence.realrun.life import LifePlan

pytestmark = pytest.mark.embedded

LIFE = {"life_s": "5", "time_scale": "60", "records": "10", "brokers": "3"}
"""Five seconds standing for five minutes: a metadata refresh (5 s) and two records."""


def _run(client: str, scenario: str, **settings: str) -> RealRun:
    java = client.removeprefix("java-") if client.startswith("java-") else None
    return asyncio.run(
        run_real(
            scenario,
            "java" if java else client,
            {**LIFE, **settings},
            kafka_clients=java,
        )
    )


EXPECTED: dict[str, dict[str, Any]] = {
    "proposed": {
        "metadata_max_age_ms": 5000,
        "connections_max_idle_ms": 9000,
        "connection_linger_ms": 50,
    },
    "aiokafka": {"metadata_max_age_ms": 5000, "connections_max_idle_ms": 9000},
    "librdkafka": {"topic.metadata.refresh.interval.ms": 5000},
    "java-4.4.0": {"metadata.max.age.ms": "5000", "connections.max.idle.ms": "9000"},
}
"""What each client must be given at scale 60: 300 s, 540 s and 3 s divided by 60;
librdkafka keeps its idle default (never), so it is given none."""


@pytest.mark.parametrize(
    "client",
    [
        "proposed",
        "aiokafka",
        "librdkafka",
        pytest.param("java-4.4.0", marks=pytest.mark.java),
    ],
)
def test_a_scaled_life_scales_each_clients_timers_and_counts_per_represented_hour(
    client: str,
) -> None:
    run = _run(client, "big-producer")  # the kernel check at the life's end runs inside
    given = {k: v for k, v in run.client_config.items() if k != "group.protocol"}
    assert given == EXPECTED[client]
    # It kept working: the 10 records, then one every 2 s of its 5-s life.
    assert run.records_sent >= 12
    assert run.records_acked == run.records_sent
    # Per represented hour = the ledger's own integral over the life, scaled by 60.
    life = run.represented
    assert life is not None
    end_ms = run.steady_summary["life"]["horizon_s"] * 1000.0
    wall = run.ledger.life(end_ms)
    assert life.horizon_s == pytest.approx(wall.horizon_s * 60)
    assert end_ms >= 5000
    assert sum(life.per_hour(life.handshakes).values()) == pytest.approx(
        sum(wall.handshakes.values()) * HOUR_S / (wall.horizon_s * 60)
    )
    assert sum(life.per_hour(life.socket_seconds).values()) == pytest.approx(
        sum(wall.socket_seconds.values()) * HOUR_S / wall.horizon_s
    )
    assert run.as_json()["scaled_life"]["client_config"] == run.client_config


@pytest.mark.parametrize("client", ["proposed", "librdkafka"])
def test_a_rolling_restart_during_a_life_is_seen_and_the_kernel_check_holds(client: str) -> None:
    run = _run(
        client, "big-consumer", life_s="12", rolling_restart="1", down_ms="1000"
    )  # verify_kernel: ledger == kernel sockets at the life's end, nothing after close
    downs = [e.broker for e in run.restarts if e.what == "down"]
    ups = [e.broker for e in run.restarts if e.what == "up"]
    assert downs == ups == [1, 2, 3]
    # Every broker's connections were cut while it was down, and dialled again after.
    cut = {
        e.broker for e in run.ledger.entries if e.kind in (ConnEvent.PEER_CLOSED, ConnEvent.FAILED)
    }
    assert cut, "no connection saw a broker go down"
    brokers_dialled = [e.broker for e in run.ledger.dial_entries() if e.broker is not None]
    assert all(brokers_dialled.count(b) >= 2 for b in cut if b is not None)
    assert run.records_consumed == 10 and run.duplicates == 0


def test_life_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs a life"):
        _run("proposed", "big-producer", life_s="0", rolling_restart="1")
    with pytest.raises(ConfigError, match="more than half the life"):
        _run("proposed", "big-producer", brokers="10", rolling_restart="1")
    with pytest.raises(ConfigError, match="producer and consumer"):
        _run("proposed", "txn-producer", brokers="4")


def test_the_plan_scales_connection_timers_and_leaves_disabled_idle_disabled() -> None:
    plan = LifePlan(60, 60, idle_ms=-1)
    assert (plan.metadata_max_age_ms, plan.scaled_idle_ms, plan.linger_ms(), plan.every_ms) == (
        5000,
        -1,
        50,
        2000,
    )
    assert (
        plan.policy_settings("proposed", {"connection_linger_ms": "30000"})["connection_linger_ms"]
        == "500"
    )
    assert plan.policy_settings("java", {}) == {}
    assert "connections.max.idle.ms" not in plan.librdkafka_config()
