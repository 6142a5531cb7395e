"""librdkafka (confluent-kafka 2.16.1, librdkafka 2.16.0) as a real client of real runs, on
the embedded cluster, accounted from its own ``debug=broker`` log and checked against its
statistics and the kernel.

What librdkafka does, measured here (and at 100 and 1,000 brokers by hand, see
``docs/benchmarks.md``) and read in its source: ``INTRODUCTION.md`` ("Sparse connections",
"Random broker selection"), ``CHANGELOG.md`` (2.10.0, "Upgrade considerations"), the hidden
property ``enable.sparse.connections`` (``src/rdkafka_conf.c``, default true since v1.0.0,
commit 2aa591f, #825) and ``src/rdkafka_broker.c``:

* **bootstrap** -- one connection, to one entry of ``bootstrap.servers`` picked at random
  ("Selected for cluster connection: bootstrap servers added"). It answers the first
  Metadata; since 2.10 brokers absent from a Metadata answer are removed with their
  threads, which the bootstrap handles always are, so the connection is closed a few ms
  after it opened ("Decommissioning this broker ... (_DESTROY_BROKER)").
* **data** -- only to the brokers librdkafka needs: the leaders of the partitions produced
  to or fetched from, plus, whenever a request for "any broker" (Metadata, FindCoordinator,
  InitProducerId) finds no connection up, one broker picked at random. On 3 brokers all
  three lead, so that one is a leader too: 3 data connections. On more, it is a leader only
  by chance (leaders / brokers): the consumer asks for its subscribed topic's metadata after
  the bootstrap connection has gone, so it holds one data connection more than it has
  leaders unless the pick was a leader; the producer does too when its first ``produce()``
  came after the bootstrap connection was up (its first Metadata then asks for brokers
  only): a race, both outcomes seen at 100 and at 1,000 brokers.
* **coordination** -- the group coordinator is a *logical* broker handle
  (``GroupCoordinator``) delegated to the coordinating broker, with a socket of its own:
  the consumer holds two sockets to the coordinator's broker when it also leads a
  partition (on 3 brokers: always), and the kernel sees both. ``TxnCoordinator`` is the
  same for a transactional producer (checked directly below; ``run_real`` does not run
  transactional scenarios with librdkafka).

Connections are held until the client closes (``connections.max.idle.ms`` defaults to 0 in
librdkafka, and the mock never reaps): steady = opened - 1, the bootstrap connection.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Producer

from connmgr.aio.kernel import AccountingMismatch
from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.core.identity import Role
from connmgr.embedded import MockCluster
from connmgr.errors import ConfigError
from connmgr.ledger import ConnectionLedger, ConnEvent
from connmgr_evidence.cli import main
from connmgr_evidence.realrun import RealRun, run_real
from connmgr_evidence.realrun.librdkafka import (
    LogAccount,
    stats_problems,
    verify_with_kernel,
)
from connmgr_evidence.realrun.librdkafka.handle import silence_before_close
from connmgr_evidence.realrun.librdkafka.log import (
    BrokerKind,
    LineKind,
    parse_broker_name,
    parse_line,
)
from connmgr_evidence.realrun.librdkafka.workload import ClientSink, client_config, new_sink

pytestmark = pytest.mark.embedded
RECORDS = 40
SETTINGS = {"records": str(RECORDS), "settle_ms": "500"}


@functools.cache
def real(scenario: str, brokers: int = 3) -> RealRun:
    return asyncio.run(run_real(scenario, "librdkafka", {**SETTINGS, "brokers": str(brokers)}))


def open_at_end(run: RealRun) -> dict[str, int]:
    return {role: c["open_at_end"] for role, c in run.steady_summary["by_role"].items()}


def data_brokers(run: RealRun) -> list[int | None]:
    return [e.broker for e in run.ledger.dial_entries() if e.role is Role.DATA]


def leaders(run: RealRun) -> set[int]:
    cluster = run.spec.cluster
    return {cluster.leader(tp) for tp in cluster.partitions(run.spec.topics)}


# --------------------------------------------------------------------------- the log, alone


def line(name: str, text: str, facility: str = "CONNECT") -> tuple[str, str]:
    return facility, f"[thrd:{name}]: {name}: {text}"


def test_broker_names_parse_into_their_kinds() -> None:
    boot = parse_broker_name("127.0.0.1:9092/bootstrap")
    assert boot is not None and boot.kind is BrokerKind.BOOTSTRAP
    assert boot.endpoint == Endpoint("127.0.0.1", 9092)
    learned = parse_broker_name("[::1]:9093/7")
    assert learned is not None and learned.kind is BrokerKind.LEARNED
    assert (learned.endpoint, learned.node) == (Endpoint("::1", 9093), 7)
    # A logical broker's two spellings are one handle, the one its statistics entry names.
    bare, delegated = parse_broker_name("GroupCoordinator"), parse_broker_name("TxnCoordinator/3")
    assert bare is not None and delegated is not None
    assert (bare.handle, bare.kind, bare.node) == ("GroupCoordinator", BrokerKind.LOGICAL, None)
    assert (delegated.handle, delegated.node) == ("TxnCoordinator", 3)
    internal = parse_broker_name(":0/internal")
    assert internal is not None and internal.kind is BrokerKind.INTERNAL
    assert parse_broker_name("127.0.0.1:9092/leader") is None
    # A line of the main thread about no handle in particular names none.
    assert parse_line("CONNECT", "[thrd:main]: Not selecting any broker: suppressed") is None


def test_the_lines_that_matter_are_recognised() -> None:
    name = "127.0.0.1:9092/2"
    kinds = [
        parse_line(*line(name, "broker in state TRY_CONNECT connecting")),
        parse_line(*line(name, "Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 17")),
        parse_line(*line(name, "Connected to ipv4#127.0.0.1:9092")),
        parse_line(*line(name, "Broker changed state APIVERSION_QUERY -> UP", "STATE")),
        parse_line(*line(name, "Disconnected (after 12ms in state UP)", "FAIL")),
        parse_line(
            *line("GroupCoordinator", 'Broker nodename changed from "" to "h:1"', "NODENAME")
        ),
        parse_line(*line("GroupCoordinator", "broker has no address yet: postponing connect")),
        parse_line(*line(name, "Enter main broker thread", "BRKMAIN")),
    ]
    assert [k.kind if k else None for k in kinds] == [
        LineKind.ATTEMPT,
        LineKind.DIAL,
        LineKind.CONNECTED,
        LineKind.STATE,
        LineKind.FAIL,
        LineKind.NODENAME,
        LineKind.POSTPONED,
        None,
    ]
    dial = kinds[1]
    assert dial is not None and dial.address == Endpoint("127.0.0.1", 9092)


def replay(*lines: tuple[str, str]) -> LogAccount:
    account = LogAccount(parse_bootstrap("127.0.0.1:9092,127.0.0.1:9093"), lambda: 0.0)
    for t_ms, (facility, message) in enumerate(lines):
        parsed = parse_line(facility, message)
        assert parsed is not None, message
        account.apply(float(t_ms), parsed)
    return account


def test_a_replayed_log_writes_dials_ends_and_the_statistics_counters() -> None:
    boot, data, coord = "127.0.0.1:9093/bootstrap", "127.0.0.1:9092/1", "GroupCoordinator"
    account = replay(
        line(boot, "broker in state TRY_CONNECT connecting"),
        line(boot, "Connecting to ipv4#127.0.0.1:9093 (plaintext) with socket 5"),
        line(boot, "Connected to ipv4#127.0.0.1:9093"),
        line(boot, "Broker changed state APIVERSION_QUERY -> UP", "STATE"),
        line(boot, "Decommissioning this broker (after 2ms in state UP)", "FAIL"),
        line(boot, "Broker changed state UP -> DOWN", "STATE"),
        # A dial refused before it connected: a failed dial, not a disconnect.
        line(data, "broker in state TRY_CONNECT connecting"),
        line(data, "Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 6"),
        line(data, "Connect to ipv4#127.0.0.1:9092 failed: Connection refused", "FAIL"),
        line(data, "Broker changed state CONNECT -> DOWN", "STATE"),
        line(coord, "broker in state TRY_CONNECT connecting"),
        line(coord, "broker has no address yet: postponing connect"),
        line(coord, 'Broker nodename changed from "" to "127.0.0.1:9092"', "NODENAME"),
        line(coord, "broker in state TRY_CONNECT connecting"),
        line(f"{coord}/1", "Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 7"),
        line(f"{coord}/1", "Connected to ipv4#127.0.0.1:9092"),
    )
    assert account.problems == []
    ledger = account.ledger
    assert [(e.kind, e.role, e.broker) for e in ledger.entries] == [
        (ConnEvent.DIAL, Role.BOOTSTRAP, None),
        (ConnEvent.ESTABLISHED, Role.BOOTSTRAP, None),
        (ConnEvent.CLOSED, Role.BOOTSTRAP, None),
        (ConnEvent.DIAL, Role.DATA, 1),
        (ConnEvent.FAILED, Role.DATA, 1),
        (ConnEvent.DIAL, Role.COORDINATION, 1),
        (ConnEvent.ESTABLISHED, Role.COORDINATION, 1),
    ]
    assert ledger.entries[0].key.node.java_id == -2  # the second bootstrap entry
    assert ledger.entries[2].reason.startswith("Decommissioning this broker")
    boot_tally, data_tally = account.handles[boot], account.handles[data]
    assert (boot_tally.dials, boot_tally.disconnects, boot_tally.open_conn) == (1, 1, None)
    assert (data_tally.dials, data_tally.disconnects) == (1, 0)
    coord_tally = account.handles[coord]
    assert (coord_tally.attempts, coord_tally.dials, coord_tally.no_socket) == (2, 1, 1)
    account.close_all(99.0, "client close")
    assert ledger.open_now() == []
    assert ledger.entries[-1].reason == "client close"


def test_a_coordinator_dial_is_placed_by_its_address_whatever_name_it_is_logged_under() -> None:
    """librdkafka changes a logical handle's address before its log name: the dial may be
    logged under the bare name or the previous delegate's."""
    coord = "GroupCoordinator"
    for dial_name in (coord, f"{coord}/2"):
        account = replay(
            line("127.0.0.1:9092/1", "Added new broker with NodeId 1", "BROKER"),
            line("127.0.0.1:9093/2", "Added new broker with NodeId 2", "BROKER"),
            line(coord, 'Broker nodename changed from "" to "127.0.0.1:9092"', "NODENAME"),
            line(dial_name, "Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 6"),
        )
        assert account.problems == []
        [dial] = account.ledger.entries
        assert (dial.role, dial.broker, dial.port) == (Role.COORDINATION, 1, 9092)


def test_a_dial_the_log_cannot_place_is_a_problem() -> None:
    account = replay(
        line(
            "127.0.0.1:9999/bootstrap",
            "Connecting to ipv4#127.0.0.1:9999 (plaintext) with socket 5",
        ),
        line("GroupCoordinator", "Connecting to ipv4#127.0.0.1:9092 (plaintext) with socket 6"),
    )
    assert len(account.problems) == 2
    assert account.ledger.entries == []
    assert "not an entry of bootstrap.servers" in account.problems[0]


# ------------------------------------------------------------------------- real runs, 3 brokers


def test_the_producer_has_every_record_acknowledged_and_times_its_first() -> None:
    run = real("big-producer")
    assert run.records_sent == run.records_acked == RECORDS
    assert run.ttfa_ms is not None and 0 < run.ttfa_ms <= run.wall_s * 1000
    data = run.as_json()
    assert data["client"] == "librdkafka" and data["ttfc_ms"] is None
    assert data["handshakes"] == data["opened"] - data["failed"]


def test_the_consumer_reads_exactly_its_records_once() -> None:
    run = real("big-consumer")
    assert run.records_consumed == RECORDS and run.duplicates == 0
    assert run.ttfc_ms is not None and 0 < run.ttfc_ms <= run.wall_s * 1000
    assert run.ttfa_ms is None


def test_the_producer_holds_one_data_connection_per_leader() -> None:
    """1 bootstrap connection (closed once metadata names the brokers), then one to each of
    the three leaders, held: see the module docstring."""
    run = real("big-producer")
    summary = run.steady_summary
    by_role = summary["by_role"]
    assert (by_role["bootstrap"]["opened"], by_role["bootstrap"]["closed"]) == (1, 1)
    assert by_role["data"]["opened"] == 3 and by_role["coordination"]["opened"] == 0
    assert open_at_end(run) == {"bootstrap": 0, "data": 3, "coordination": 0}
    assert sorted(b for b in data_brokers(run) if b is not None) == sorted(leaders(run))
    assert summary["failed"] == 0 and summary["steady"] == 3
    # The bootstrap socket may close before or after the leaders' dials start.
    assert summary["peak"] in (3, 4)
    boot = run.ledger.dial_entries()[0]
    assert boot.role is Role.BOOTSTRAP and boot.key.endpoint in run.spec.bootstrap


def test_the_consumer_adds_a_coordinator_socket_beside_the_leaders() -> None:
    """Three data connections (the leaders) and the GroupCoordinator handle's own socket to
    the coordinating broker, which also leads a partition: two sockets to that broker."""
    run = real("big-consumer")
    by_role = run.steady_summary["by_role"]
    assert (by_role["bootstrap"]["opened"], by_role["bootstrap"]["closed"]) == (1, 1)
    assert open_at_end(run) == {"bootstrap": 0, "data": 3, "coordination": 1}
    assert run.spec.group is not None
    coordinator = run.spec.cluster.coordinator(run.spec.group)
    [coord] = [e for e in run.ledger.dial_entries() if e.role is Role.COORDINATION]
    assert coord.broker == coordinator
    assert run.steady_summary["by_broker"][str(coordinator)]["open_at_end"] == 2
    assert run.steady_summary["steady"] == 4


def test_closing_the_client_closes_every_connection() -> None:
    for scenario in ("big-producer", "big-consumer"):
        ledger = real(scenario).ledger
        assert ledger.open_now() == []
        ends = [e for e in ledger.entries if e.kind is ConnEvent.CLOSED]
        assert [e.reason for e in ends][-1] == "client close"


# ---------------------------------------------------------------------- sparse, at 10 brokers


@pytest.mark.parametrize("scenario", ["big-producer", "big-consumer"])
def test_at_ten_brokers_it_connects_only_to_what_it_needs(scenario: str) -> None:
    """Never to all 10: the leaders, the coordinator (consumer) and at most one random broker
    for a request to "any broker" made after the bootstrap connection had gone -- which,
    if any, is the first data connection."""
    run = real(scenario, 10)
    data = data_brokers(run)
    extra = [b for b in data if b not in leaders(run)]
    assert set(data) >= leaders(run) and len(data) == len(set(data))
    assert len(extra) <= 1 and (not extra or data[0] == extra[0])
    roles = open_at_end(run)
    assert roles["data"] == len(data) and roles["bootstrap"] == 0
    assert roles["coordination"] == (1 if run.spec.group else 0)
    print(f"{scenario}: data to {data} (leaders {sorted(leaders(run))}), {roles}")


# ---------------------------------------------------------- the checks, against a live client


@contextmanager
def live_producer(
    brokers: int, leaders: list[int], extra: dict[str, str] | None = None
) -> Iterator[tuple[MockCluster, ClientSink, Producer, list[str]]]:
    """A confluent-kafka producer accounted as in a run, its raw statistics kept."""
    with MockCluster(brokers, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic_with_leaders("t", leaders)
        bootstrap = cluster.bootstrap_servers
        sink = new_sink(parse_bootstrap(bootstrap), time.perf_counter())
        reports: list[str] = []
        config = client_config(sink, bootstrap, "connmgr-test")
        config["stats_cb"] = reports.append
        producer = Producer({**config, **(extra or {})})
        try:
            yield cluster, sink, producer, reports
        finally:
            silence_before_close(producer, sink.name)
            producer.close()


def serve_until_report(producer: Producer, reports: list[str]) -> dict[str, object]:
    seen = len(reports)
    deadline = time.monotonic() + 3
    while len(reports) == seen and time.monotonic() < deadline:
        producer.poll(0.05)
    assert len(reports) > seen, "no statistics report"
    report: dict[str, object] = json.loads(reports[-1])
    return report


def without(ledger: ConnectionLedger, conn_id: int) -> ConnectionLedger:
    copy = ConnectionLedger()
    for entry in ledger.entries:
        if entry.conn_id != conn_id:
            copy.record(entry)
    return copy


def test_the_kernel_and_statistics_checks_can_fail() -> None:
    with live_producer(3, [1, 2, 3]) as (cluster, sink, producer, reports):
        for i in range(9):
            producer.produce("t", b"x", partition=i % 3)
        assert producer.flush(10) == 0
        listeners = cluster.listeners()
        ledger = sink.account.ledger
        verify_with_kernel(ledger, listeners, producer.poll, phase="test")
        assert stats_problems(serve_until_report(producer, reports), sink.account) == []

        victim = ledger.open_now()[0]
        with pytest.raises(AccountingMismatch) as caught:
            verify_with_kernel(
                without(ledger, victim.conn_id),
                listeners,
                producer.poll,
                phase="test",
                settle_s=0.2,
            )
        assert sum(caught.value.phantom.values()) == 1 and not caught.value.missed
        assert "librdkafka test" in str(caught.value)

        report = serve_until_report(producer, reports)
        brokers = report["brokers"]
        assert isinstance(brokers, dict)
        learned = next(b for b in brokers.values() if b["source"] == "learned" and b["connects"])
        learned["connects"] += 1
        learned["state"] = "INIT"
        problems = stats_problems(report, sink.account)
        assert len(problems) == 2, problems
        assert "connects" in problems[0] and "state INIT" in problems[1]
        assert silence_before_close(producer, sink.name)


def test_a_transaction_coordinator_gets_a_socket_of_its_own() -> None:
    """The TxnCoordinator handle dials broker 1, which leads no partition: a socket of its
    own, which the kernel sees. Broker 1 has a data connection too only when it was the
    random broker of a request to "any broker"; then the kernel sees two sockets there."""
    with live_producer(3, [2, 3, 2], {"transactional.id": "tx"}) as (cluster, sink, p, _):
        cluster.set_coordinator("transaction", "tx", 1)
        p.init_transactions(10)
        p.begin_transaction()
        for i in range(6):
            p.produce("t", b"x", partition=i % 3)
        p.commit_transaction(10)
        verify_with_kernel(sink.account.ledger, cluster.listeners(), p.poll, phase="test")
        held = [(e.role, e.broker) for e in sink.account.ledger.open_now()]
        needed = {(Role.COORDINATION, 1), (Role.DATA, 2), (Role.DATA, 3)}
        assert len(held) == len(set(held)) and needed <= set(held)
        assert set(held) - needed <= {(Role.DATA, 1)}, held


def test_transactional_scenarios_are_refused_before_a_cluster_starts() -> None:
    with pytest.raises(ConfigError, match="not transactional"):
        asyncio.run(run_real("txn-producer", "librdkafka", SETTINGS))


def test_connmgr_run_takes_the_client(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", "big-producer", "--client", "librdkafka", "--json"]
    settings = ["brokers=3", "records=10", "settle_ms=200"]
    code = main([*argv, *(arg for s in settings for arg in ("--set", s))])
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert code == 0 and data["client"] == "librdkafka" and data["records_acked"] == 10
    assert data["steady"] == 3 and data["timeline"][0]["role"] == "bootstrap"
    assert main(["run", "txn-producer", "--client", "librdkafka"]) == 2
    assert "not transactional" in capsys.readouterr().err
