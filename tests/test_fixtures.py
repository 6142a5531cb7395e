"""The java-described model against the real Java client logs of the seed articles."""

from __future__ import annotations

from conftest import FIXTURES
from connmgr import javalog
from connmgr.ledger import ConnEvent
from connmgr.sim import simulate
from connmgr.sim.result import java_log_events


def logged(name: str) -> list[tuple[int, str, int]]:
    lines = (FIXTURES / name).read_text().splitlines()
    return [(c.node_id, c.host, c.port) for c in javalog.parse_connections(lines)]


def test_parser_reads_the_fixtures() -> None:
    consumer = logged("java-consumer-2019.log")
    assert len(consumer) == 5 and consumer[0] == (-1, "localhost", 9092)
    producer_lines = (FIXTURES / "java-producer-2.1.log").read_text().splitlines()
    assert len(javalog.parse_connections(producer_lines)) == 2
    assert [m.node_id for m in javalog.parse_metadata_requests(producer_lines)] == [-2]


def test_seed_consumer_reproduces_the_2019_consumer_log() -> None:
    expected = logged("java-consumer-2019.log")
    result = simulate("seed-consumer", "java-described")
    assert result.connection_sequence() == expected
    # Before -1 idles out: two sockets each to 9092 and 9094. C5: then 4 remain.
    assert result.peak == len(expected) == 5
    assert sorted(port for _, _, port in expected) == [9092, 9092, 9093, 9094, 9094]
    assert result.steady == len(expected) - 1
    assert sorted(c["port"] for c in result.steady_connections) == [9092, 9093, 9094, 9094]
    closes = [e for e in result.timeline if e.kind is ConnEvent.CLOSED and e.reason == "idle"]
    assert [e.key.node.java_id for e in closes] == [-1]


def test_seed_producer_reproduces_the_2_1_producer_log() -> None:
    lines = (FIXTURES / "java-producer-2.1.log").read_text().splitlines()
    expected = logged("java-producer-2.1.log")
    result = simulate("seed-producer", "java-described")
    sequence = result.connection_sequence()
    assert sequence[: len(expected)] == expected
    # P1: every bootstrap server first; P2: then every broker, none reused.
    assert sorted(n for n, _, _ in sequence[len(expected) :]) == [0, 1, 2]
    sim_lines = list(javalog.render_events("producer", java_log_events(result)))
    first_md = javalog.parse_metadata_requests(sim_lines)[0]
    real_md = javalog.parse_metadata_requests(lines)[0]
    assert (first_md.node_id, first_md.host, first_md.port) == (
        real_md.node_id,
        real_md.host,
        real_md.port,
    )


def test_java_log_output_parses_back_to_the_same_sequence() -> None:
    for scenario, policy in [("seed-consumer", "proposed"), ("big-producer", "java-today")]:
        result = simulate(scenario, policy, {"duration_ms": "60000"})
        lines = list(javalog.render_events("consumer", java_log_events(result)))
        parsed = [(c.node_id, c.host, c.port) for c in javalog.parse_connections(lines)]
        assert parsed == result.connection_sequence()
