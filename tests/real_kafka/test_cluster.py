"""Real Apache Kafka (KRaft, 3 nodes from Maven) under stock aiokafka and the drop-in clients.

Shares the session's ``kafka_cluster`` (see conftest.py); each test keeps to its own topic and
group names. ``pytest -s -m real_kafka tests/real_kafka`` prints timings and the (broker,
role) ledgers observed. The last test stops the shared cluster and checks nothing is left.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.identity import API_VERSIONS_KEY, CHECK_VERSION
from connmgr.aio.kernel import averify_against_kernel, kernel_connections
from connmgr.aio.observe import expected_stock_sequence, observed_consumer, observed_producer
from connmgr.core.identity import Role
from connmgr.ledger import ConnectionLedger, ConnEvent
from connmgr_evidence.realkafka import (
    KAFKA_VERSION,
    KafkaCluster,
    MissingTool,
    RealKafkaError,
    java_string_hash,
    kafka_version,
    offsets_partition_for,
    process,
    resolve_broker_classpath,
)
from connmgr_evidence.realkafka import cluster as cluster_module
from connmgr_evidence.realkafka.classpath import LOG4J_VERSIONS
from connmgr_evidence.realkafka.cli import cluster_command, parse_broker_config

from .conftest import java_children

pytestmark = pytest.mark.real_kafka

LEADERS = [2, 3, 1]  # partition i is led by LEADERS[i]
COORDINATOR = 3
RECORDS = 300


# -- helpers ------------------------------------------------------------------------------------


def _short(sequence: Sequence[tuple[int | None, Role]]) -> list[tuple[int | None, str]]:
    return [(broker, role.value) for broker, role in sequence]


def _held(ledger: ConnectionLedger) -> set[tuple[int | None, Role]]:
    return {(e.broker, e.role) for e in ledger.open_now()}


def _first_server(cluster: KafkaCluster) -> str:
    return cluster.bootstrap_servers.split(",")[0]


def _values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}{i}".encode() for i in range(n)]


async def _produce(producer: AIOKafkaProducer, topic: str, tag: str) -> None:
    futures = [
        await producer.send(topic, value, partition=i % len(LEADERS))
        for i, value in enumerate(_values(RECORDS, tag))
    ]
    metadata = await asyncio.gather(*futures)
    assert len(metadata) == RECORDS and all(m.offset >= 0 for m in metadata)


async def _consume(consumer: AIOKafkaConsumer, n: int) -> list[bytes]:
    """Read until ``n`` records arrived, then poll once more to catch any duplicate."""
    got: list[bytes] = []
    async with asyncio.timeout(60):
        while len(got) < n:
            batch = await consumer.getmany(timeout_ms=500)
            got += [m.value for records in batch.values() for m in records]
    batch = await consumer.getmany(timeout_ms=500)
    got += [m.value for records in batch.values() for m in records]
    return got


def _assert_exactly_once(got: list[bytes], tag: str) -> None:
    assert [v for v, n in collections.Counter(got).items() if n > 1] == []
    assert sorted(got) == sorted(_values(RECORDS, tag))


async def _committed(consumer: AIOKafkaConsumer, topic: str) -> list[int | None]:
    return [await consumer.committed(TopicPartition(topic, p)) for p in range(len(LEADERS))]


async def _join_consume_commit(
    consumer: AIOKafkaConsumer, topic: str, started: float
) -> tuple[float, list[bytes], list[int | None]]:
    """Wait for the group join (seconds since ``started``), read every record, commit."""
    async with asyncio.timeout(30):
        while not consumer.assignment():
            await consumer.getmany(timeout_ms=100)
    joined = time.monotonic() - started
    got = await _consume(consumer, RECORDS)
    await consumer.commit()
    return joined, got, await _committed(consumer, topic)


# -- the cluster itself -------------------------------------------------------------------------


def test_cluster_starts_three_brokers_at_distinct_ports(kafka_cluster: KafkaCluster) -> None:
    cluster = kafka_cluster
    print(f"\nstart {cluster.start_seconds:.2f}s, phases {cluster.timings}")
    assert cluster.running and cluster.start_seconds is not None
    assert cluster.broker_ids == (1, 2, 3)
    endpoints = cluster.endpoints()
    assert set(endpoints) == {1, 2, 3}
    assert {host for host, _ in endpoints.values()} == {"127.0.0.1"}
    assert len({port for _, port in endpoints.values()}) == 3
    assert cluster.listeners() == endpoints
    assert cluster.bootstrap_servers == ",".join(f"{h}:{p}" for h, p in endpoints.values())
    assert "\n" not in repr(cluster) and "running" in repr(cluster)
    assert sorted(p.pid for p in java_children()) == sorted(cluster.pids().values())
    versions = cluster.api_versions(1)
    shown = {
        name: versions[key]
        for name, key in [
            ("Produce", 0),
            ("Fetch", 1),
            ("Metadata", 3),
            ("OffsetCommit", 8),
            ("FindCoordinator", 10),
            ("JoinGroup", 11),
        ]
    }
    print(f"broker api versions (min, max): {shown}")
    # Kafka 4 dropped the oldest request versions (KIP-896): Fetch starts at v4 and
    # OffsetCommit at v2; aiokafka 0.14 copes by negotiating per connection. Produce still
    # advertises v0 (kept for old clients' version probing; v0-v2 requests are refused).
    assert versions[1][0] >= 4 and versions[8][0] >= 2


def test_topic_with_leaders_2_3_1_has_exactly_those_leaders(kafka_cluster: KafkaCluster) -> None:
    t = time.monotonic()
    kafka_cluster.create_topic_with_leaders("leaders", LEADERS)
    print(f"\ntopic created and led as asked in {time.monotonic() - t:.2f}s")
    want = dict(enumerate(LEADERS))
    for broker in kafka_cluster.broker_ids:
        assert kafka_cluster.leaders("leaders", broker) == want
    # The preferred leaders already lead, so the broker answers ELECTION_NOT_NEEDED (84):
    # this also checks our hand-made ElectLeaders v1 request against the real broker.
    assert kafka_cluster.elect_preferred_leaders("leaders", [0, 1, 2]) == {0: 84, 1: 84, 2: 84}
    with pytest.raises(RealKafkaError, match="TopicAlreadyExists"):
        kafka_cluster.create_topic_with_leaders("leaders", LEADERS)
    with pytest.raises(RealKafkaError, match="not a broker id"):
        kafka_cluster.create_topic_with_leaders("nope", [1, 4])


def test_group_for_coordinator_finds_a_group_on_each_broker(kafka_cluster: KafkaCluster) -> None:
    found = {b: kafka_cluster.group_for_coordinator(b) for b in kafka_cluster.broker_ids}
    print(f"\ngroups by coordinator: {found}")
    for broker, group in found.items():
        assert kafka_cluster.coordinator_for(group) == broker
        assert kafka_cluster.group_for_coordinator(broker) == group  # deterministic
    assert len(set(found.values())) == 3
    with pytest.raises(RealKafkaError, match="no broker 7"):
        kafka_cluster.group_for_coordinator(7)


# -- stock aiokafka -----------------------------------------------------------------------------


def test_stock_aiokafka_acks_all_and_group_consumer_exactly_once(
    kafka_cluster: KafkaCluster,
) -> None:
    cluster = kafka_cluster
    cluster.create_topic_with_leaders("stock", LEADERS)
    group = cluster.group_for_coordinator(COORDINATOR, prefix="stock")

    async def main() -> tuple[list[bytes], list[int | None], int, float]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            await _produce(producer, "stock", "s")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "stock",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        t = time.monotonic()
        await consumer.start()
        try:
            joined, got, committed = await _join_consume_commit(consumer, "stock", t)
            coordinator = consumer._coordinator.coordinator_id
        finally:
            await consumer.stop()
        return got, committed, coordinator, joined

    got, committed, coordinator, joined = asyncio.run(main())
    print(f"\nstock: group {group!r} joined in {joined:.2f}s, coordinator {coordinator}")
    _assert_exactly_once(got, "s")
    assert coordinator == COORDINATOR
    assert committed == [RECORDS // 3] * 3


def test_observed_stock_ledgers_follow_the_stock_model(kafka_cluster: KafkaCluster) -> None:
    """Stock aiokafka with only its client observed: the (broker, role) dials it makes."""
    cluster = kafka_cluster
    cluster.create_topic_with_leaders("observed", LEADERS)
    group = cluster.group_for_coordinator(COORDINATOR, prefix="observed")
    listeners = cluster.listeners()

    async def main() -> tuple[Any, Any, list[TopicPartition], list[bytes]]:
        producer = observed_producer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            await _produce(producer, "observed", "o")
            await averify_against_kernel(producer.ledger, listeners)
        finally:
            await producer.stop()
        await averify_against_kernel(producer.ledger, listeners)
        consumer = observed_consumer(
            "observed",
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got = await _consume(consumer, RECORDS)
            tps = list(consumer._subscription.subscription.assignment.tps)
            await averify_against_kernel(consumer.ledger, listeners)
        finally:
            await consumer.stop()
        await averify_against_kernel(consumer.ledger, listeners)
        return producer, consumer, tps, got

    producer, consumer, tps, got = asyncio.run(main())
    for name, client in (("producer", producer), ("consumer", consumer)):
        print(f"\nstock {name} dials: {_short(client.observer.sequence(resolve_bootstrap=True))}")
        print(f"stock {name} choices: {client.choices}")
        print(
            f"stock {name} summary: opened {client.ledger.opened_count}, "
            f"peak {client.ledger.peak}, open at end {len(client.ledger.open_now())}"
        )
    _assert_exactly_once(got, "o")
    assert producer.ledger.sequence() == expected_stock_sequence(producer.choices, LEADERS)
    fetch_order = [LEADERS[tp.partition] for tp in tps]
    assert consumer.ledger.sequence() == expected_stock_sequence(
        consumer.choices, fetch_order, coordinator=COORDINATOR
    )
    assert producer.ledger.open_now() == [] and consumer.ledger.open_now() == []


# -- the drop-in clients ------------------------------------------------------------------------


def test_proposed_clients_lose_nothing_and_hold_the_expected_sockets(
    kafka_cluster: KafkaCluster,
) -> None:
    cluster = kafka_cluster
    cluster.create_topic_with_leaders("proposed", LEADERS)
    group = cluster.group_for_coordinator(COORDINATOR, prefix="proposed")
    listeners = cluster.listeners()
    # One bootstrap server, broker 1, a leader of both clients' topic. A 4.4 broker confirms
    # its id when asked (KIP-1242): the proposed policy adopts the socket as broker 1's and
    # dials the others. An older broker cannot be asked: the socket carries the first
    # any-node requests and closes before the first broker dial, one dial more.
    bootstrap = _first_server(cluster)
    low, high = cluster.api_versions(1)[API_VERSIONS_KEY]
    bootstrap_dial = 0 if low <= CHECK_VERSION <= high else 1

    async def main() -> dict[str, Any]:
        producer = ProposedProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            await _produce(producer, "proposed", "p")
            producer_held = _held(producer.ledger)
            await averify_against_kernel(producer.ledger, listeners)
        finally:
            await producer.stop()
        await averify_against_kernel(producer.ledger, listeners)
        consumer = ProposedConsumer(
            "proposed",
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        t = time.monotonic()
        await consumer.start()
        try:
            joined, got, committed = await _join_consume_commit(consumer, "proposed", t)
            consumer_held = _held(consumer.ledger)
            await averify_against_kernel(consumer.ledger, listeners)
            live = kernel_connections(listeners.values()).total()
        finally:
            await consumer.stop()
        await averify_against_kernel(consumer.ledger, listeners)
        return {
            "producer": producer,
            "consumer": consumer,
            "producer_held": producer_held,
            "consumer_held": consumer_held,
            "got": got,
            "committed": committed,
            "joined": joined,
            "live": live,
        }

    r = asyncio.run(main())
    producer: ProposedProducer = r["producer"]
    consumer: ProposedConsumer = r["consumer"]
    for name, client, held in (
        ("producer", producer, r["producer_held"]),
        ("consumer", consumer, r["consumer_held"]),
    ):
        ledger = client.ledger
        print(f"\nproposed {name} dials: {ledger.dials()}")
        print(f"proposed {name} held while running: {sorted(_short(list(held)), key=str)}")
        summary = ledger.summary()
        roles = {
            role: counts
            for role, counts in summary["by_role"].items()
            if counts["opened"] or counts["handshakes_avoided"]
        }
        print(
            f"proposed {name} summary: opened {summary['opened']}, peak {summary['peak']}, "
            f"steady {summary['steady']}, by role {roles}"
        )
    print(f"proposed consumer joined its group in {r['joined']:.2f}s")
    _assert_exactly_once(r["got"], "p")
    assert r["committed"] == [RECORDS // 3] * 3
    assert r["producer_held"] == {(1, Role.DATA), (2, Role.DATA), (3, Role.DATA)}
    assert producer.ledger.opened_count == 3 + bootstrap_dial and producer.ledger.peak == 3
    assert producer.ledger.count(ConnEvent.ADOPTED) == 1 - bootstrap_dial
    # The coordinator (3) on its own socket, data connections to the three leaders: 4
    # sockets held; 5 dials if the bootstrap socket closed first.
    assert r["consumer_held"] == {
        (1, Role.DATA),
        (2, Role.DATA),
        (3, Role.DATA),
        (3, Role.COORDINATION),
    }
    assert consumer.ledger.opened_count == 4 + bootstrap_dial and consumer.ledger.peak == 4
    assert consumer.ledger.count(ConnEvent.ADOPTED) == 1 - bootstrap_dial
    assert r["live"] == 4
    assert producer.ledger.open_now() == [] and consumer.ledger.open_now() == []


# -- what needs no cluster ----------------------------------------------------------------------


def test_java_string_hash_and_offsets_partition() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("g-0") == 100426
    assert java_string_hash("\N{GRINNING FACE}") == 0xD83D * 31 + 0xDE00  # two UTF-16 units
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE; Kafka's Utils.abs makes that 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert offsets_partition_for("polygenelubricants", 7) == 0
    assert java_string_hash("zzzzzzzzzz") < 0  # overflows to negative, as in Java
    assert offsets_partition_for("zzzzzzzzzz", 50) == abs(java_string_hash("zzzzzzzzzz")) % 50


def test_missing_maven_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no cached classpath to fall back on
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingTool, match=r"`mvn` is not on PATH: install Apache Maven"):
        resolve_broker_classpath()
    with pytest.raises(MissingTool, match=r"`java` is not on PATH: install a Java 17\+"):
        KafkaCluster(1).start()


def _pom(
    tmp_path: Path, version: str, packaging: str = "pom", log4j: str = LOG4J_VERSIONS[KAFKA_VERSION]
) -> Path:
    pom = tmp_path / "pom.xml"
    pom.write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>t</groupId><artifactId>t</artifactId><version>1</version>"
        f"<packaging>{packaging}</packaging>"
        f"<properties><kafka.version>{version}</kafka.version>"
        f"<log4j.version>{log4j}</log4j.version></properties></project>",
        encoding="utf-8",
    )
    return pom


def test_maven_failure_and_version_mismatch_are_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(RealKafkaError, match=r"pins kafka\.version='0\.1' but"):
        resolve_broker_classpath(pom=_pom(tmp_path, "0.1"))
    # The pom pins the default release's own log4j, so Maven run on it by hand binds right.
    needs = rf"pins log4j\.version='2\.0' but Kafka {re.escape(KAFKA_VERSION)} needs"
    with pytest.raises(RealKafkaError, match=needs):
        resolve_broker_classpath(pom=_pom(tmp_path, KAFKA_VERSION, log4j="2.0"))
    # An unknown packaging fails inside Maven at once, without touching the network.
    with pytest.raises(RealKafkaError, match=r"Maven failed \(exit 1\)(.|\n)*bogus"):
        resolve_broker_classpath(pom=_pom(tmp_path, KAFKA_VERSION, packaging="bogus"))


def test_classpath_is_cached_by_pom_hash() -> None:
    t = time.monotonic()
    first = resolve_broker_classpath()
    cached = time.monotonic() - t
    print(f"\ncached classpath read in {cached * 1000:.1f}ms ({len(first)} jars)")
    assert Path(first[0]).name == f"kafka_2.13-{kafka_version()}.jar"
    assert resolve_broker_classpath() == first
    assert any(Path(e).name.startswith("log4j-slf4j-impl") for e in first)
    assert cached < 1.0  # read from the cache: no Maven run


# -- failures of a node, and the CLI ------------------------------------------------------------


def test_a_port_taken_twice_is_reported_with_the_node_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node that cannot bind dies during start; start retries with fresh ports, then, after
    :data:`START_ATTEMPTS` starts, reports it."""
    import socket

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        attempts: list[list[int]] = []
        original = process.reserve_ports

        def reserve(count: int) -> list[int]:
            ports = [*original(count - 1), taken]  # the last node's controller port
            attempts.append(ports)
            return ports

        monkeypatch.setattr(cluster_module, "reserve_ports", reserve)
        cluster = KafkaCluster(1)
        t = time.monotonic()
        with pytest.raises(
            RealKafkaError, match=f"could not bind 127.0.0.1:{taken}: address already in use"
        ) as caught:
            cluster.start(timeout_s=60)
        print(f"\nport clash reported after {time.monotonic() - t:.2f}s, {len(attempts)} attempts")
    assert len(attempts) == cluster_module.START_ATTEMPTS == 4
    assert "server.log" in str(caught.value) or "stdout.log" in str(caught.value)
    assert cluster.workdir is None
    assert not set(cluster.pids().values()) & {p.pid for p in java_children()}
    cluster.stop()  # idempotent after a failed start


def test_a_start_timeout_is_reported_and_cleaned_up() -> None:
    cluster = KafkaCluster(1)
    # No JVM formats and starts a broker in a second: one of the two deadlines must trip.
    with pytest.raises(RealKafkaError, match=r"timed out waiting|took over"):
        cluster.start(timeout_s=1.0)
    assert cluster.workdir is None
    assert not set(cluster.pids().values()) & {p.pid for p in java_children()}
    assert "state=failed" in repr(cluster)


_CHILD = """
import json, os, sys
from connmgr_evidence.realkafka import KafkaCluster
cluster = KafkaCluster(1).start()
print(json.dumps({"pids": list(cluster.pids().values()), "workdir": str(cluster.workdir)}))
sys.stdout.flush()
if sys.argv[1] == "crash":
    os._exit(0)  # no atexit, no finalizers: the broker is orphaned
"""


def _child_cluster(mode: str) -> tuple[list[psutil.Process], Path]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    started = json.loads(done.stdout.strip().splitlines()[-1])
    processes = []
    for pid in started["pids"]:
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            if process.status() != psutil.STATUS_ZOMBIE:
                processes.append(process)
    return processes, Path(started["workdir"])


def test_interpreter_exit_stops_a_cluster_nobody_stopped() -> None:
    alive, workdir = _child_cluster("exit")
    assert alive == []
    assert not workdir.exists()


def test_the_next_start_reaps_a_cluster_whose_owner_died() -> None:
    alive, workdir = _child_cluster("crash")
    try:
        assert len(alive) == 1 and workdir.is_dir()  # orphaned, still running
        assert any(str(workdir) in part for part in alive[0].cmdline())
    finally:
        # What KafkaCluster.start() runs first; called directly to spare a start-up.
        reaped = process.reap_orphans(workdir.parent)
    assert workdir in reaped
    assert not workdir.exists()
    with contextlib.suppress(psutil.NoSuchProcess):
        assert alive[0].status() == psutil.STATUS_ZOMBIE  # dead, awaiting its new parent


def test_cli_starts_creates_topics_and_tears_down(capsys: pytest.CaptureFixture[str]) -> None:
    t = time.monotonic()
    assert cluster_command(["--brokers", "1", "--topic", "t=1,1", "--hold", "0"]) == 0
    out = capsys.readouterr().out
    print(f"\n{out}cli round trip {time.monotonic() - t:.2f}s")
    assert "bootstrap servers: 127.0.0.1:" in out
    assert f"started 1 Kafka {kafka_version()} brokers in" in out
    assert "topic t: partition leaders {0: 1, 1: 1}" in out
    assert "stopped in" in out


def test_cli_usage_errors_return_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cluster_command(["--topic", "t=1,9"]) == 2
    assert capsys.readouterr().err == (
        "connmgr: error: --topic 't=1,9': no broker 9; the brokers are [1, 2, 3]\n"
    )
    assert cluster_command(["--brokers", "0"]) == 2
    assert "brokers must be an int in 1..9" in capsys.readouterr().err
    assert cluster_command(["--hold", "x"]) == 2
    assert capsys.readouterr().err.startswith("connmgr: error: argument --hold")
    assert cluster_command(["--broker-config", "num.partitions"]) == 2
    assert capsys.readouterr().err == (
        "connmgr: error: --broker-config 'num.partitions': expected KEY=VALUE, "
        "e.g. auto.create.topics.enable=true\n"
    )
    assert cluster_command(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert "--topic NAME=LEADER,LEADER,..." in help_text
    assert "--broker-config KEY=VALUE" in help_text
    assert "--kafka-version X.Y.Z" in help_text


def test_broker_config_reaches_every_nodes_properties() -> None:
    properties = parse_broker_config(
        ["num.partitions=1", "auto.create.topics.enable = true", "num.partitions=2"]
    )
    assert properties == {"num.partitions": "2", "auto.create.topics.enable": "true"}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_broker_config(["=2"])
    cluster = KafkaCluster(1, properties=properties)
    node = process.Node(node_id=1, port=1, controller_port=2, directory=Path("/nonexistent"))
    cluster._nodes = [node]
    lines = cluster._server_properties(node).splitlines()
    assert "num.partitions=2" in lines and "num.partitions=1" not in lines
    assert "auto.create.topics.enable=true" in lines
    assert "auto.create.topics.enable=false" not in lines


# -- tear-down ----------------------------------------------------------------------------------


def test_stop_leaves_no_java_process_no_socket_and_no_temp_dir() -> None:
    """On a cluster of its own: the session's shared cluster stays up for the other tests."""
    cluster = KafkaCluster(brokers=1).start(timeout_s=120)
    workdir = cluster.workdir
    assert workdir is not None and workdir.is_dir()
    listeners = cluster.listeners()
    pids = set(cluster.pids().values())
    cluster.stop()
    print(f"\nstop took {cluster.stop_seconds:.2f}s, SIGKILLed: {cluster.killed}")
    assert not pids & {p.pid for p in java_children()}
    assert not workdir.exists()
    assert kernel_connections(listeners.values()).total() == 0
    cluster.stop()  # idempotent
    assert "stopped" in repr(cluster)
    with pytest.raises(RealKafkaError, match="not running"):
        cluster.create_topic_with_leaders("late", [1])
