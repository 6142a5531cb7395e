"""``estimate logs``: the per-client account of real and rendered NetworkClient logs, the
proposal's replay (the proposed policy driven by a log's requests, counting what the simulator
counts for the same requests), bad input, and the in-process and Spark paths giving the same
document."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import FIXTURES
from connmgr import javalog
from connmgr.core.config import ClientKind
from connmgr.core.identity import COORDINATOR_ID_BASE, Purpose
from connmgr.sim.result import RunResult
from connmgr.sim.run import build_simulator, prepare
from connmgr_evidence.estimate import logs
from connmgr_evidence.estimate.cli import main as estimate_main
from connmgr_evidence.estimate.logs_cli import main as logs_main

CONSUMER_2019 = FIXTURES / "java-consumer-2019.log"
PRODUCER_2018 = FIXTURES / "java-producer-2.1.log"
P44 = "Consumer clientId=consumer-g-1, groupId=g"


def one_client(path: Path) -> dict[str, Any]:
    result = logs.analyse_file(str(path))
    assert result.error is None
    (client,) = result.clients
    return client


def test_the_2019_consumer_log() -> None:
    client = one_client(CONSUMER_2019)
    assert (client["client_id"], client["group"], client["kind"]) == (
        "consumer-1",
        "test",
        "consumer",
    )
    # Five "Initiating connection" lines: id -1 (negative: bootstrap), 2147483645
    # (2147483647 - 2: broker 2 as group coordinator) and 2, 0, 1 (brokers).
    assert client["opened"] == {"bootstrap": 1, "coordinator": 1, "broker": 3}
    # No line closes any of them: all five open at once, and at the end.
    assert client["peak"] == client["open_at_end"] == 5
    assert client["bootstrap_lived_ms"] == [None]
    # Requests: the DEBUG metadata request and the TRACE FIND_COORDINATOR, both to -1; the
    # other four connections carry none before the log ends.
    assert client["requests"] == 2 and client["never_used"] == 4
    # The proposal: the metadata request dials one bootstrap server, FindCoordinator rides it,
    # and nothing else is needed before the log ends (54,238 - 54,188 = 50 ms < the linger).
    assert client["proposal"] == {
        "opened": {"bootstrap": 1, "coordinator": 0, "broker": 0},
        "peak": 1,
        "open_at_end": 1,
    }
    # Of 8 lines, only "Completed receive ..." is neither a connection nor a request line.
    result = logs.analyse_file(str(CONSUMER_2019))
    assert (result.lines, result.skipped_lines) == (8, 1)


def test_the_2018_producer_log() -> None:
    client = one_client(PRODUCER_2018)
    assert (client["client_id"], client["group"], client["kind"]) == (
        "producer-1",
        None,
        "producer",
    )
    # Two dials, ids -2 then -1: both bootstrap servers.
    assert client["opened"] == {"bootstrap": 2, "coordinator": 0, "broker": 0}
    assert client["peak"] == 2
    # The one metadata request goes to -2; -1 is never used.
    assert client["requests"] == 1 and client["never_used"] == 1
    assert client["proposal"]["opened"] == {"bootstrap": 1, "coordinator": 0, "broker": 0}
    # The two "Initialize connection ... for sending metadata request" lines are skipped.
    result = logs.analyse_file(str(PRODUCER_2018))
    assert (result.lines, result.skipped_lines) == (5, 2)


def _consumer_44(coordinator_id: int | str) -> list[str]:
    """A consumer's start: bootstrap -1, the coordinator of broker 2 printed as
    ``coordinator_id``, brokers 1 and 2, the bootstrap socket closed after 1.5 s."""
    who = P44
    return [
        javalog.connect_line(0, who, "b1", 9092, -1),
        javalog.request_line(1, who, "API_VERSIONS", -1, 1),
        javalog.metadata_line(2, who, "b1", 9092, -1),
        javalog.request_line(3, who, "FIND_COORDINATOR", -1, 2),
        javalog.connect_line(10, who, "b2", 9092, coordinator_id),
        javalog.request_line(11, who, "JOIN_GROUP", coordinator_id, 3),
        javalog.connect_line(20, who, "b1", 9092, 1),
        javalog.connect_line(21, who, "b2", 9092, 2),
        javalog.request_line(22, who, "FETCH", 1, 4),
        javalog.request_line(23, who, "FETCH", 2, 5),
        javalog.close_line(1500, who, -1, "idle"),
        "[2026-01-01 00:00:02,000] INFO [Consumer clientId=consumer-g-1, groupId=g] Resetting"
        " offset for partition t-0 (org.apache.kafka.clients.consumer.internals.SubscriptionState)",
    ]


@pytest.mark.parametrize("coordinator_id", ["+2", 2147483645], ids=["4.4 +B", "2147483647-B"])
def test_coordinator_ids_of_every_generation(coordinator_id: int | str) -> None:
    clients, skipped, count = logs.analyse_lines(_consumer_44(coordinator_id), "x.log")
    (client,) = clients
    assert client["opened"] == {"bootstrap": 1, "coordinator": 1, "broker": 2}
    assert client["peak"] == 4 and client["open_at_end"] == 3
    assert client["never_used"] == 0
    assert client["bootstrap_lived_ms"] == [1500.0]
    assert (count, skipped) == (12, 1)
    assert logs.combine([logs.FileResult("x.log", clients, skipped, count)])["totals"][
        "bootstrap_lived_ms"
    ] == {"closed": 1, "median": 1500.0, "max": 1500.0, "open_at_end": 0}
    # The proposal: the bootstrap socket to b1:9092 is broker 1's, so broker 1 adopts it;
    # the group coordinator gets a connection of its own; broker 2 one more.
    assert client["proposal"] == {
        "opened": {"bootstrap": 1, "coordinator": 1, "broker": 1},
        "peak": 3,
        "open_at_end": 3,
    }


def test_a_bootstrap_socket_no_broker_adopts_closes_when_metadata_replaces_it() -> None:
    who = "Producer clientId=producer-7"
    lines = [
        javalog.connect_line(0, who, "seed", 9092, -1),
        javalog.metadata_line(1, who, "seed", 9092, -1),
        javalog.connect_line(5, who, "b1", 9092, 1),
        javalog.request_line(6, who, "PRODUCE", 1, 2),
        javalog.connect_line(7, who, "b2", 9092, 2),
        javalog.request_line(8, who, "PRODUCE", 2, 3),
        javalog.metadata_line(9000, who, "b1", 9092, 1),
    ]
    (client,) = logs.analyse_lines(lines, "p.log")[0]
    assert client["opened"] == {"bootstrap": 1, "coordinator": 0, "broker": 2}
    assert client["peak"] == 3 and client["bootstrap_lived_ms"] == [None]
    # The bootstrap socket closes at broker 1's dial, so at most 2 are held at once.
    assert client["proposal"] == {
        "opened": {"bootstrap": 1, "coordinator": 0, "broker": 2},
        "peak": 2,
        "open_at_end": 2,
    }


def test_clients_are_told_apart_by_prefix_and_file(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.log"
    mixed.write_text(
        "\n".join(
            [
                javalog.connect_line(0, "Producer clientId=p-1, transactionalId=t1", "b", 1, -1),
                javalog.connect_line(0, "AdminClient clientId=adminclient-1", "b", 1, -1),
                javalog.connect_line(0, P44, "b", 1, -1),
            ]
        )
    )
    (tmp_path / "again.log").write_text(javalog.connect_line(0, P44, "b", 1, -1))
    document = logs.estimate(logs.collect_files([tmp_path])[0], engine="local")
    seen = [(c["source"][-9:], c["client_id"], c["group"], c["kind"]) for c in document["clients"]]
    assert seen == [
        ("again.log", "consumer-g-1", "g", "consumer"),
        ("mixed.log", "adminclient-1", None, "admin"),
        ("mixed.log", "consumer-g-1", "g", "consumer"),
        ("mixed.log", "p-1", None, "transactional-producer"),
    ]
    assert document["totals"]["opened"]["bootstrap"] == 4


def test_bad_files_are_named_and_the_rest_still_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    (nested / "consumer.log.gz").write_bytes(gzip.compress(CONSUMER_2019.read_bytes()))
    (tmp_path / "producer.log").write_bytes(PRODUCER_2018.read_bytes())
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x00\x00binary")
    (tmp_path / "broken.gz").write_bytes(b"not gzip at all")
    code = logs_main([str(tmp_path), str(tmp_path / "missing.log"), "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "core.bin: binary data" in err and "broken.gz: cannot be read" in err
    assert "missing.log: no such file or directory" in err
    document = json.loads(out)
    assert [c["client_id"] for c in document["clients"]] == ["consumer-1", "producer-1"]
    assert document["totals"]["opened"] == {"bootstrap": 3, "coordinator": 1, "broker": 3}
    assert document["skipped_lines"] == 3 and len(document["errors"]) == 3


def test_the_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert estimate_main(["logs", str(CONSUMER_2019), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert {"clients", "totals", "skipped_lines"} <= set(document)
    (client,) = document["clients"]
    assert {"client_id", "group", "kind", "opened", "peak", "never_used", "proposal"} <= set(client)
    assert set(client["opened"]) == {"bootstrap", "coordinator", "broker"}
    assert set(document["totals"]) >= {"clients", "opened", "peak", "never_used", "proposal"}


def test_the_table_and_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "opened.png"
    assert logs_main([str(FIXTURES / "java-consumer-2019.log"), "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "consumer-1" in out and "total (1 clients)" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_subcommand_this_branch_lacks_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code = estimate_main(["nonsense"])
    assert code == 2 and "unknown subcommand 'nonsense'" in capsys.readouterr().err


def test_the_synthetic_logs_parse_back(tmp_path: Path) -> None:
    from connmgr_evidence.estimate.synth_logs import main as synth

    assert synth(["--clients", "20", "--requests", "30", "--out", str(tmp_path)]) == 0
    document = logs.estimate(logs.collect_files([tmp_path])[0], engine="local")
    assert document["errors"] == [] and document["totals"]["clients"] == 20
    # Every client dials exactly one bootstrap server, and sends requests on every connection.
    assert all(c["opened"]["bootstrap"] == 1 for c in document["clients"])
    assert document["totals"]["never_used"] == 0


@pytest.mark.spark
def test_spark_and_in_process_give_the_same_document(tmp_path: Path) -> None:
    from connmgr_evidence.estimate.synth_logs import main as synth

    synth(["--clients", "60", "--requests", "40", "--out", str(tmp_path)])
    (tmp_path / "core.bin").write_bytes(b"\x00\x01")
    files = logs.collect_files([tmp_path])[0]
    here = logs.estimate(files, engine="local")
    there = logs.estimate(files, engine="spark", master="local[2]")
    assert (here.pop("engine"), there.pop("engine")) == ("local", "spark")
    assert here == there and len(here["errors"]) == 1


def _rendered(result: RunResult, who: str) -> list[str]:
    """A simulated run as the Java client's log lines (``connmgr.javalog``'s renderers): a
    connection line for each dial and close, and a request line for each request, to the id
    the Java client prints for where it went (a coordinator's ``2147483647 - B``)."""
    rows: list[tuple[float, int, int, str]] = []
    for n, (t, kind, host, port, node, reason) in enumerate(
        result.ledger.java_log_rows(failures=False)
    ):
        line = (
            javalog.connect_line(t, who, host, port, node)
            if kind == "connect"
            else javalog.close_line(t, who, node, reason)
        )
        rows.append((t, 0, n, line))
    for n, r in enumerate(result.requests):
        broker = r.key.broker_id
        coordinator = r.key.purpose is Purpose.COORDINATION and broker is not None
        node = COORDINATOR_ID_BASE - broker if coordinator and broker is not None else None
        shown = r.key.node.java_id if node is None else node
        rows.append((r.t_ms, 1, n, javalog.request_line(r.t_ms, who, r.api.name, shown, n)))
    rows.sort(key=lambda row: row[:3])
    return [line for *_, line in rows]


@pytest.mark.parametrize(
    ("scenario", "duration_ms"),
    [
        ("seed-consumer", 120_000),
        ("seed-producer", 120_000),
        ("big-consumer", 120_000),
        ("txn-producer", 60_000),
        ("ctp-producer", 60_000),
        ("rebalance", 120_000),
    ],
)
def test_the_replay_gives_the_simulators_figures_for_the_same_needs(
    scenario: str, duration_ms: int
) -> None:
    # The proposed policy runs a scenario in the simulator (dials, answers and time as a
    # network would give them); its requests, rendered as a Java client's log, are replayed
    # from the log alone. Same needs, same policy: the replay must count what the simulator
    # counted. The simulated brokers do not answer KIP-1242's check, nor does the replay
    # take them to (on a 4.4 cluster the simulated client adopts its bootstrap connection,
    # and its log then shows no address for that broker: the replay could not adopt it).
    # Not here: a client that closes before the log ends (its close prints no line per
    # connection, so a log cannot say they closed), and a broker moving to a new host:port
    # (the replay's metadata is one snapshot).
    spec, settings, seed = prepare(scenario, {"duration_ms": str(duration_ms)})
    spec.cluster.confirms_identity = False
    result = build_simulator(spec, "proposed", settings, seed).run()
    consumer = spec.client is ClientKind.CONSUMER
    who = "Consumer clientId=consumer-1, groupId=test" if consumer else "Producer clientId=p-1"
    clients, _, _ = logs.analyse_lines(
        _rendered(result, who), "sim.log", brokers_check_identity=False
    )
    (client,) = clients
    roles = result.by_role
    assert client["proposal"] == {
        "opened": {
            "bootstrap": roles["bootstrap"]["opened"],
            "coordinator": roles["coordination"]["opened"],
            "broker": roles["data"]["opened"],
        },
        "peak": result.peak,
        "open_at_end": result.steady,
    }
    # Not the same function compared with itself: the log carries only requests and
    # connection lines, and today's figures read from it are the simulator's too.
    assert client["requests"] == len(result.requests)
    assert sum(client["opened"].values()) == result.opened
