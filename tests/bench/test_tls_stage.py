"""The TLS stage's tables (``connmgr_evidence.bench.stages.tls``), from measurements given by hand:
which
client gets a first-ack ratio, and how the simulated handshakes are priced. The stage itself
(a real secured cluster) runs in tests/bench/test_bench_quick.py and tests/real_kafka/test_tls.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.bench.stages.tls import (
    PRICE_RTT_MS,
    PRICED,
    first_ack_rows,
    price_rows,
    read_tls,
)
from connmgr_evidence.handshake_cost import HandshakeCost


def ack(client: str, rtt: float, ms: float | None, sockets: int = 3) -> dict[str, Any]:
    return {"client": client, "rtt_ms": rtt, "ttfa_ms": ms, "sockets": sockets}


def test_only_the_drop_in_gets_a_ratio_and_it_is_to_stock_aiokafka_at_the_same_rtt() -> None:
    report = {
        "first_acks": [
            ack("aiokafka", 0.0, 100.0),
            ack("proposed", 0.0, 80.0),
            ack("aiokafka", 0.0, 120.0),
            ack("proposed", 0.0, 90.0, sockets=4),
            ack("java", 0.0, 1000.0, sockets=5),
            ack("aiokafka", 20.0, 300.0),
            ack("proposed", 20.0, None),
        ]
    }
    rows = {(r["rtt_ms"], r["client"]): r for r in first_ack_rows(report)}
    assert rows[(0.0, "proposed")]["ratio"] == pytest.approx(85.0 / 110.0)
    assert rows[(0.0, "proposed")]["sockets"] == 4
    assert rows[(0.0, "aiokafka")]["ratio"] is None
    # Java's clock starts before a cold JVM: context, never a ratio.
    assert rows[(0.0, "java")]["ratio"] is None
    assert rows[(0.0, "java")]["ttfa_ms"] == 1000.0
    # No ack, no median and no ratio; the start is still counted.
    assert rows[(20.0, "proposed")]["ttfa_ms"] is None
    assert rows[(20.0, "proposed")]["ratio"] is None
    assert (rows[(20.0, "proposed")]["starts"], rows[(20.0, "proposed")]["acked"]) == (1, 0)


def test_handshakes_are_priced_at_the_sasl_ssl_cost() -> None:
    cost = HandshakeCost(PRICED, round_trips=5.0, fixed_ms=25.0, broker_cpu_ms=20.0)
    costs = {PRICED: cost, "SSL": HandshakeCost("SSL", 2.0, 20.0, 30.0)}
    rows = [
        {"policy": "proposed", "handshakes_per_h": 4.0},
        {"policy": "proposed", "handshakes_per_h": 6.0},
        {"policy": "java-today", "handshakes_per_h": 12.0},
    ]
    priced = {r["policy"]: r for r in price_rows(costs, rows, "sim")}
    assert priced["proposed"]["runs"] == 2
    assert priced["proposed"]["handshakes_per_h"] == 5.0
    assert priced["proposed"]["broker_cpu_ms_per_h"] == 100.0
    # 25 ms fixed + (5 round trips + TCP's) x 20 ms = 145 ms a handshake.
    assert PRICE_RTT_MS == 20.0
    assert priced["proposed"]["setup_ms_per_h"] == pytest.approx(5.0 * 145.0)
    assert priced["java-today"]["broker_cpu_ms_per_h"] == 240.0


def test_a_run_without_the_stage_has_no_tls_file(tmp_path: Path) -> None:
    assert read_tls(tmp_path) is None
    (tmp_path / "tls.json").write_text('{"settings": {}}')
    with pytest.raises(Exception, match="missing 'report'"):
        read_tls(tmp_path)
