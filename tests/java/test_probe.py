"""The real Java Kafka client (kafka-clients 2.1.0 and 4.4.0) against the embedded mock cluster.

Nothing is mocked on the client side: the probe in ``benchmarks/java-probe`` is built with Maven
and runs the real client in a JVM, whose ``NetworkClient`` log, own metrics and kernel sockets
are reconciled by :func:`connmgr_evidence.java.cross_check`. Build times and the observed connection
sequences are printed (``pytest -s`` shows them).

The librdkafka mock speaks the request versions librdkafka itself uses. kafka-clients 2.1.0
asks for nothing newer, so it runs against the mock as it is. kafka-clients 4.4.0 does not:
three malformed exchanges (pinned by the ``test_mock_breaks_4x_*`` tests below, each with the
exact request) stop it. The 4.4.0 scenario runs therefore go through :class:`MockCompatShim`, a
byte-level TCP proxy in front of each mock broker that touches ApiVersions *responses* only:
it re-encodes the mock's malformed "unsupported version" reply the way KIP-511 specifies, and
lowers the advertised maximum of the three group APIs whose newest versions the mock misparses
to the highest version it parses. The client then negotiates those versions by itself, exactly
as it would with an older broker; every other byte passes through untouched, and each client
connection is exactly one proxied connection, so connection accounting is unaffected.
"""

from __future__ import annotations

import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from connmgr.core.identity import Role
from connmgr.embedded import ApiKey, MockCluster
from connmgr.embedded.compat import MOCK_PARSE_CAPS, MockCompatShim
from connmgr.javalog import parse_connection_events, parse_connections
from connmgr.ledger import ConnEvent
from connmgr_evidence.java import (
    JavaAccountingMismatch,
    JavaProbeError,
    JavaRun,
    KernelSample,
    ProbeBuild,
    build_ledger,
    build_probe,
    cross_check,
    default_extra,
    find_tools,
    kernel_sampler,
    run_probe,
)
from connmgr_evidence.java.build import default_probe_dir

pytestmark = pytest.mark.java

OLD, NEW = "2.1.0", "4.4.0"
VERSIONS = (OLD, NEW)
TOPIC, GROUP, RECORDS, PARTITIONS = "t", "g", 30, 3
LEADERS = [3, 1, 2]  # partition i's leader
COORDINATOR = 3
Address = tuple[str, int]


# The compatibility proxy lives in connmgr.embedded.compat.


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def builds() -> dict[str, ProbeBuild]:
    """Both probe builds, from the per-user cache when up to date."""
    find_tools()  # raises JavaToolError naming what to install: a failure, never a skip
    result = {}
    for version in VERSIONS:
        result[version] = build_probe(version)
        b = result[version]
        print(f"\nprobe {version}: {'built' if b.built else 'cached'} in {b.seconds:.2f}s")
    return result


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, group_initial_rebalance_delay_ms=0) as mock:
        mock.create_topic_with_leaders(TOPIC, LEADERS)
        mock.set_coordinator("group", GROUP, COORDINATOR)
        yield mock


def _endpoints(cluster: MockCluster, version: str) -> Iterator[dict[int, Address]]:
    """The broker endpoints ``version`` must be pointed at: the mock's own for 2.1.0, the
    compatibility shim's for 4.x."""
    if version == OLD:
        yield cluster.listeners()
        return
    shim = MockCompatShim(cluster, MOCK_PARSE_CAPS)
    try:
        yield shim.endpoints
    finally:
        shim.close()


def _bootstrap(endpoints: Mapping[int, Address], which: str) -> str:
    ids = [1] if which == "broker1" else sorted(endpoints)
    return ",".join(f"{endpoints[i][0]}:{endpoints[i][1]}" for i in ids)


def _run(
    build: ProbeBuild,
    client: str,
    bootstrap: str,
    endpoints: Mapping[int, Address],
    tmp_path: Path,
    **kwargs: Any,
) -> JavaRun[KernelSample]:
    extra = {**default_extra(build.version, "consumer" if client == "consumer" else "producer")}
    extra.update(kwargs.pop("extra", {}))
    return run_probe(
        build,
        client="consumer" if client == "consumer" else "producer",
        bootstrap=bootstrap,
        topic=TOPIC,
        partitions=PARTITIONS,
        records=kwargs.pop("records", RECORDS),
        group=GROUP,
        settle_ms=kwargs.pop("settle_ms", 1000),
        extra=extra,
        sample=kernel_sampler(endpoints),
        log_path=tmp_path / f"{build.version}-{client}.log",
        **kwargs,
    )


def _describe(run: JavaRun[Any], endpoints: Mapping[int, Address]) -> str:
    where = {f"{h}:{p}": b for b, (h, p) in endpoints.items()}
    dials = ", ".join(
        f"{node}@{addr}(b{where.get(addr, '?')}) {role.value}" for node, addr, role in run.dials()
    )
    return (
        f"{run.version} {run.client}: dials [{dials}]; logged closes {run.closes() or 'none'}; "
        f"steady metrics creation={run.steady.connection_creation_total} "
        f"close={run.steady.connection_close_total} count={run.steady.connection_count}; "
        f"closed metrics creation={run.closed.connection_creation_total} "
        f"close={run.closed.connection_close_total} count={run.closed.connection_count}; "
        f"kernel {run.kernel_count}; {run.seconds:.2f}s"
    )


# -- builds -----------------------------------------------------------------------------------


def test_build_cold_then_cached(
    builds: dict[str, ProbeBuild], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build in an empty cache runs Maven; the next call reuses it in milliseconds; a change
    to a source file builds again. Both versions' classpaths name their own kafka-clients."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for version in VERSIONS:
        cold = build_probe(version)
        cached = build_probe(version)
        print(f"\n{version}: cold {cold.seconds:.2f}s, cached {cached.seconds:.3f}s")
        assert cold.built and not cached.built
        assert cached.classpath == cold.classpath
        assert cold.build_dir.is_relative_to(tmp_path / "cache")
        assert any(p.name == f"kafka-clients-{version}.jar" for p in cold.classpath)
        assert not any("kafka-clients" in p.name and version not in p.name for p in cold.classpath)
    # Nothing was written into the source tree.
    assert sorted(p.name for p in default_probe_dir().iterdir()) == ["pom.xml", "src"]

    probe_dir = tmp_path / "probe"
    shutil.copytree(default_probe_dir(), probe_dir)
    before = build_probe(OLD, probe_dir=probe_dir)
    java = probe_dir / "src/main/java/connmgr/probe/Probe.java"
    java.write_text(java.read_text(encoding="utf-8") + "\n// changed\n", encoding="utf-8")
    after = build_probe(OLD, probe_dir=probe_dir)
    assert after.built and after.fingerprint != before.fingerprint


def test_concurrent_builds_build_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(build_probe, [OLD, OLD]))
    assert sorted(r.built for r in results) == [False, True]
    assert results[0].classpath == results[1].classpath


# -- the scenario on a 3-broker cluster -------------------------------------------------------


@pytest.mark.parametrize("bootstrap", ["broker1", "all"])
@pytest.mark.parametrize("version", VERSIONS)
def test_producer_then_consumer_accounted(
    builds: dict[str, ProbeBuild],
    cluster: MockCluster,
    tmp_path: Path,
    version: str,
    bootstrap: str,
) -> None:
    """Every record is acked and read back, and every connection in the log agrees with the
    client's metrics and the kernel (``verify=True`` raises otherwise). The bootstrap
    connection stays open until the client closes, and nothing is closed before that."""
    for endpoints in _endpoints(cluster, version):
        boot = _bootstrap(endpoints, bootstrap)
        producer = _run(builds[version], "producer", boot, endpoints, tmp_path, verify=True)
        consumer = _run(builds[version], "consumer", boot, endpoints, tmp_path, verify=True)
        for run in (producer, consumer):
            print(f"\n[bootstrap={bootstrap}] {_describe(run, endpoints)}")
            assert run.version == version
            assert cross_check(run) == []
            assert run.closes() == []  # no close before the client's own close()
            roles = _role_brokers(run, endpoints)
            assert sorted(b for role, b in roles if role is Role.DATA) == [1, 2, 3]
            assert roles[0][0] is Role.BOOTSTRAP
            # The bootstrap connection is still open at the steady point.
            open_roles = [e.role for e in _ledger_at_steady(run).open_now()]
            assert Role.BOOTSTRAP in open_roles
        assert producer.closed.records_acked == RECORDS
        assert consumer.closed.records_consumed == RECORDS
        coordination = [
            b for role, b in _role_brokers(consumer, endpoints) if role is Role.COORDINATION
        ]
        assert coordination == [COORDINATOR]
        # One connection per broker for data (and one to the coordinator) plus every bootstrap
        # connection, none of which is closed before the client closes. 2.1.0 given all three
        # brokers dials more than one bootstrap entry before the first metadata arrives (it
        # does not wait for a dial in progress); how many depends on timing.
        for run, others in ((producer, 3), (consumer, 4)):
            bootstraps = sum(role is Role.BOOTSTRAP for _, _, role in run.dials())
            assert run.steady.connection_count == others + bootstraps
            if bootstrap == "broker1":
                assert bootstraps == 1
        # 4.4 names the coordinator connection "+B" (a GroupCoordinatorNode in its source), older
        # clients 2147483647 - B; parse_connections gives both as the classic id.
        coordinator_name = "+3" if version == NEW else "2147483644"
        assert (coordinator_name, Role.COORDINATION) in [(n, r) for n, _, r in consumer.dials()]
        assert len(consumer.connections) == len(consumer.dials())
        assert 2147483644 in [c.node_id for c in consumer.connections]


def _role_brokers(
    run: JavaRun[Any], endpoints: Mapping[int, Address]
) -> list[tuple[Role, int | None]]:
    """(role, broker reached) per dial; bootstrap dials are resolved by endpoint."""
    where = {f"{h}:{p}": b for b, (h, p) in endpoints.items()}
    result = []
    for e in run.ledger.entries:
        if e.kind is ConnEvent.DIAL:
            broker = e.broker if e.role is not Role.BOOTSTRAP else None
            result.append(
                (e.role, broker if broker is not None else where.get(f"{e.host}:{e.port}"))
            )
    return result


def _ledger_at_steady(run: JavaRun[Any]) -> Any:
    ledger, _ = build_ledger(run.events, t0=run.started_at, until=run.steady.log_time)
    return ledger


@pytest.mark.parametrize("version", VERSIONS)
def test_idle_bootstrap_connection_is_closed_and_logged(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path, version: str
) -> None:
    """With ``connections.max.idle.ms`` short, the idle bootstrap connection is closed before
    the steady point -- 2.1.0 logs it as "Node -1 disconnected.", 4.x as "Idle connection to
    node -1 disconnected." -- and the accounting (closes included) still agrees."""
    for endpoints in _endpoints(cluster, version):
        boot = _bootstrap(endpoints, "broker1")
        _run(builds[version], "producer", boot, endpoints, tmp_path, verify=True)
        # Heartbeats every 300 ms keep the coordinator connection busy; fetches keep the data
        # connections busy: only the bootstrap connection goes idle.
        run = _run(
            builds[version],
            "consumer",
            boot,
            endpoints,
            tmp_path,
            settle_ms=4000,
            extra={"connections.max.idle.ms": "1500", "heartbeat.interval.ms": "300"},
            verify=True,
        )
        print(f"\n{_describe(run, endpoints)}")
        expected_reason = "disconnected" if version == OLD else "idle"
        assert ("-1", expected_reason) in run.closes()
        assert run.steady.connection_close_total >= 1
        assert Role.BOOTSTRAP not in [e.role for e in _ledger_at_steady(run).open_now()]
        assert run.closed.records_consumed == RECORDS
        line = {OLD: "Node -1 disconnected.", NEW: "Idle connection to node -1 disconnected."}
        assert line[version] in run.log_path.read_text(encoding="utf-8")


def _fix_after_refused_dial(
    cluster: MockCluster, log_path: Path, node: int, endpoint: Address, done: threading.Event
) -> None:
    """Gives broker ``node`` back ``endpoint`` once the probe's log shows a dial to it refused
    ("Node N disconnected."), or when ``done`` is set, or after 60 s (the test then fails on
    its count of failed dials, not by hanging)."""
    deadline = time.monotonic() + 60.0
    refused = f"Node {node} disconnected."
    while not done.is_set() and time.monotonic() < deadline:
        if log_path.is_file() and refused in log_path.read_text(encoding="utf-8", errors="replace"):
            break
        done.wait(0.05)
    cluster.set_host_port(node, *endpoint)


@pytest.mark.parametrize("version", VERSIONS)
def test_failed_dials_count_as_closes_not_creations(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path, version: str
) -> None:
    """Broker 3 is advertised at a port that refuses connections until the client's log shows
    a refused dial to it, then at its real endpoint. Each refused dial logs "Initiating
    connection" and "Node 3 disconnected." but no "Completed connection": the client counts
    it in connection-close-total and not in connection-creation-total, and so does the log
    accounting (``verify=True``). Every record is still acked once the address is fixed."""
    for endpoints in _endpoints(cluster, version):
        log_path = tmp_path / f"{version}-producer.log"
        log_path.unlink(missing_ok=True)
        with socket.socket() as dead:
            dead.bind(("127.0.0.1", 0))  # bound but not listening: connects are refused
            cluster.set_host_port(3, "127.0.0.1", dead.getsockname()[1])
            # Fixed on the client's own evidence, not after a set time: a JVM slow to start on a
            # loaded machine would otherwise dial only after the fix (seen in CI with 1.5 s).
            done = threading.Event()
            fix = threading.Thread(
                target=_fix_after_refused_dial,
                args=(cluster, log_path, 3, endpoints[3], done),
            )
            fix.start()
            try:
                run = _run(
                    builds[version],
                    "producer",
                    _bootstrap(endpoints, "broker1"),
                    endpoints,
                    tmp_path,
                    verify=True,
                )
            finally:
                done.set()
                fix.join()
        print(f"\n{_describe(run, endpoints)}")
        account = run.steady_account
        assert account.failed >= 1 and account.connect_errors == 0
        assert run.steady.connection_creation_total == account.opened - account.failed
        assert run.steady.connection_close_total == account.failed  # nothing else closed yet
        assert all(node == "3" and why == "disconnected" for node, why in run.closes())
        assert run.closed.records_acked == RECORDS


def test_old_client_only_warns_about_unknown_settings(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path
) -> None:
    """2.1.0 accepts ``group.protocol`` (a 3.7 setting) with a warning: passing it is harmless,
    though :func:`default_extra` does not."""
    endpoints = cluster.listeners()
    run = _run(
        builds[OLD],
        "producer",
        _bootstrap(endpoints, "broker1"),
        endpoints,
        tmp_path,
        records=3,
        settle_ms=0,
        extra={"group.protocol": "classic"},
        verify=True,
    )
    assert "The configuration 'group.protocol' was supplied but isn't a known config." in (
        run.log_path.read_text(encoding="utf-8")
    )
    assert default_extra(OLD, "consumer") == {}
    assert default_extra(NEW, "consumer") == {"group.protocol": "classic"}
    assert default_extra(NEW, "producer") == {}


def test_verify_raises_when_the_kernel_disagrees(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path
) -> None:
    """A sampler that sees one socket fewer than the log has open fails a verified run."""
    endpoints = cluster.listeners()

    def short_by_one(pid: int) -> int:
        return kernel_sampler(endpoints)(pid).count - 1

    with pytest.raises(JavaAccountingMismatch, match="kernel: 3 live sockets") as caught:
        run_probe(
            builds[OLD],
            client="producer",
            bootstrap=_bootstrap(endpoints, "broker1"),
            topic=TOPIC,
            partitions=PARTITIONS,
            records=RECORDS,
            settle_ms=200,
            sample=short_by_one,
            log_path=tmp_path / "p.log",
            verify=True,
        )
    assert caught.value.run.sample == 3


# -- what breaks kafka-clients 4.4.0 on the plain mock ----------------------------------------


def test_mock_breaks_4x_at_api_versions(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path
) -> None:
    """Plain mock: 4.4.0's first request, ApiVersions v5, gets the mock's malformed
    UNSUPPORTED_VERSION answer, which the client parses as v5 with throttle_time_ms 1179648
    (the bytes of the entry ApiVersions 0..2). It retries ApiVersions v0 successfully but keeps
    node -1 throttled for ~20 minutes, so no Metadata request is ever sent."""
    endpoints = cluster.listeners()
    with pytest.raises(JavaProbeError, match="not present in metadata"):
        _run(
            builds[NEW],
            "producer",
            _bootstrap(endpoints, "broker1"),
            endpoints,
            tmp_path,
            records=1,  # each send waits max.block.ms for the metadata that never comes
            extra={"max.block.ms": "3000"},
            timeout_s=30,
        )
    log = (tmp_path / f"{NEW}-producer.log").read_text(encoding="utf-8")
    assert re.search(r"Sending API_VERSIONS request with header .*apiVersion=5", log)
    assert re.search(
        r"Received API_VERSIONS response .*apiVersion=5.*errorCode=35, apiKeys=\[\]", log
    )
    assert "Connection to node -1 is throttled for 1179648 ms" in log
    assert "Sending metadata request" not in log
    apis = {r.api_name for r in cluster.requests()}
    assert "API_VERSIONS" in apis and "METADATA" not in apis


@pytest.mark.parametrize(
    ("api", "signature"),
    [
        (ApiKey.JOIN_GROUP, r"Sending JOIN_GROUP request with header .*apiVersion=6"),
        (ApiKey.SYNC_GROUP, r"Sending SYNC_GROUP request with header .*apiVersion=4"),
        (ApiKey.LEAVE_GROUP, r"Sending LEAVE_GROUP request with header .*apiVersion=4"),
    ],
)
def test_mock_breaks_4x_group_api(
    builds: dict[str, ProbeBuild],
    cluster: MockCluster,
    tmp_path: Path,
    api: ApiKey,
    signature: str,
) -> None:
    """With ApiVersions fixed but one group API left at the version 4.4.0 prefers, the consumer
    fails at that request: the mock drops the coordinator connection on JoinGroup v6 and
    SyncGroup v4 (parse errors), and answers LeaveGroup v4 with a response the client cannot
    decode (so close() fails)."""
    caps = {k: v for k, v in MOCK_PARSE_CAPS.items() if k != int(api)}
    full = MockCompatShim(cluster, MOCK_PARSE_CAPS)
    try:
        boot = _bootstrap(full.endpoints, "broker1")
        _run(builds[NEW], "producer", boot, full.endpoints, tmp_path, verify=True)
    finally:
        full.close()
    shim = MockCompatShim(cluster, caps)
    try:
        with pytest.raises(JavaProbeError) as caught:
            _run(
                builds[NEW],
                "consumer",
                _bootstrap(shim.endpoints, "broker1"),
                shim.endpoints,
                tmp_path,
                settle_ms=0,
                # JoinGroup and SyncGroup fail in a loop that only the timeout ends; LeaveGroup
                # comes at close, after a join, a sync and a fetch (3.4 s on a quiet machine; in
                # a CI run beside a Maven build its 15 s ran out before it).
                timeout_s=60 if api is ApiKey.LEAVE_GROUP else 15,
            )
    finally:
        shim.close()
    log = (tmp_path / f"{NEW}-consumer.log").read_text(encoding="utf-8")
    assert re.search(signature, log), f"no {signature!r} in the log; the run ended: {caught.value}"
    if api is ApiKey.LEAVE_GROUP:
        assert "non-nullable field members was serialized as null" in str(caught.value)
    else:
        # The request is followed by the mock dropping the coordinator connection, again and
        # again, and no record is ever read.
        # Lines of other connections may interleave, so look for the drop itself and check
        # that no response from the coordinator came before it.
        lines = log.splitlines()
        at = next(i for i, line in enumerate(lines) if re.search(signature, line))
        after = lines[at + 1 :]
        drop = next(i for i, line in enumerate(after) if "Node +3 disconnected." in line)
        assert not [line for line in after[:drop] if "Received" in line and "node +3" in line]
        assert "consumed 0 of" in str(caught.value)


# -- the parsers on the two generations' wording ----------------------------------------------

P, C = "Producer clientId=producer-1", "Consumer clientId=c, groupId=g"
N0, N3, N7 = "127.0.0.1:9092", "127.0.0.1:9094", "127.0.0.1:9095"
CONNECT = "Initiating connection to node {} (id: {} rack: null{}) using address /127.0.0.1"
DONE = "Completed connection to node {}. Fetching API versions."


def _log(*lines: tuple[str, str, str]) -> list[str]:
    """Log lines in the probe's layout, 10 ms apart, from (level, log prefix, message)."""
    return [
        f"[2026-01-01 00:00:00,{10 * i:03d}] {level} [{who}] {message} "
        "(org.apache.kafka.clients.NetworkClient:1)"
        for i, (level, who, message) in enumerate(lines)
    ]


# 2.1.0's wording (from kafka-clients 2.1.0 sources and a real 2.1.0 run).
_LINES_2_1 = _log(
    ("DEBUG", P, CONNECT.format(N0, -1, "")),
    ("DEBUG", P, DONE.format(-1)),
    ("DEBUG", C, CONNECT.format(N3, 2147483644, "")),
    ("DEBUG", C, CONNECT.format(N7, 7, "")),
    ("DEBUG", C, "Node 7 disconnected."),
    ("WARN", C, "Connection to node 7 (/127.0.0.1:9095) could not be established. Broker..."),
    ("DEBUG", C, DONE.format(2147483644)),
    ("DEBUG", C, "Manually disconnected from 2147483644. Removed requests: ."),
    ("DEBUG", P, "Node -1 disconnected."),
)

# 4.4.0's wording (from kafka-clients 4.4.0 and real 4.4.0 runs).
_LINES_4_4 = _log(
    ("DEBUG", C, CONNECT.format(N0, -1, " isFenced: false")),
    ("DEBUG", C, DONE.format(-1)),
    ("DEBUG", C, CONNECT.format(N3, "+3", " isFenced: false")),
    ("DEBUG", C, DONE.format("+3")),
    ("INFO", C, "Node +3 disconnected."),
    (
        "DEBUG",
        C,
        "Cancelled in-flight JOIN_GROUP request with correlation id 5 due to node +3 "
        "being disconnected (elapsed time since creation: 29ms)",
    ),
    ("DEBUG", C, "Client requested disconnect from node +3, which is already disconnected"),
    ("DEBUG", C, "Idle connection to node -1 disconnected."),
    (
        "DEBUG",
        C,
        "Initiating connection to node bad.invalid:9 (id: 12 rack: r1 isFenced: true) "
        "using address null",
    ),
    ("WARN", C, "Error connecting to node bad.invalid:9 (id: 12 rack: r1 isFenced: true)"),
    ("INFO", C, "Disconnecting from node 12 due to request timeout."),
)


def test_event_parser_reads_both_generations() -> None:
    old = parse_connection_events(_LINES_2_1)
    assert [(e.kind, e.node, e.reason) for e in old] == [
        ("connect", "-1", ""),
        ("established", "-1", ""),
        ("connect", "2147483644", ""),
        ("connect", "7", ""),
        ("disconnect", "7", "disconnected"),
        ("unreachable", "7", ""),
        ("established", "2147483644", ""),
        ("disconnect", "2147483644", "client disconnect"),
        ("disconnect", "-1", "disconnected"),
    ]
    new = parse_connection_events(_LINES_4_4)
    assert [(e.kind, e.node, e.reason) for e in new] == [
        ("connect", "-1", ""),
        ("established", "-1", ""),
        ("connect", "+3", ""),
        ("established", "+3", ""),
        ("disconnect", "+3", "disconnected"),
        ("disconnect", "-1", "idle"),
        ("connect", "12", ""),
        ("connect_error", "12", "connect error"),
        ("disconnect", "12", "request timeout"),
    ]
    assert (new[2].host, new[2].port) == ("127.0.0.1", 9094)
    # parse_connections reads 4.4 too: "+3" is the classic coordinator id 2147483647 - 3.
    assert [c.node_id for c in parse_connections(_LINES_4_4)] == [-1, 2147483644, 12]

    t0 = old[0].timestamp
    ledger, account = build_ledger(old, t0=t0)
    assert (account.opened, account.established, account.closed, account.failed) == (3, 2, 2, 1)
    assert account.metric_closes == 3 and account.open == 0
    assert [(b, r) for b, r in ledger.sequence()] == [
        (None, Role.BOOTSTRAP),
        (3, Role.COORDINATION),
        (7, Role.DATA),
    ]
    ledger, account = build_ledger(new, t0=t0, client_closed_at=new[-1].timestamp)
    # "+3" closed by the peer, -1 idle-closed, 12 failed synchronously (no socket: not in
    # connection-close-total), the later timeout line for 12 matches nothing open.
    assert (account.closed, account.failed, account.connect_errors) == (2, 1, 1)
    assert account.metric_closes == 2
    assert [e.node for e in account.unmatched] == ["12"]
    assert [(b, r) for b, r in ledger.sequence()][1] == (3, Role.COORDINATION)


def test_sampler_exceptions_propagate_after_release(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path
) -> None:
    endpoints = cluster.listeners()

    def broken(pid: int) -> int:
        raise RuntimeError(f"sampler failed for {pid}")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="sampler failed"):
        run_probe(
            builds[OLD],
            client="producer",
            bootstrap=_bootstrap(endpoints, "broker1"),
            topic=TOPIC,
            partitions=PARTITIONS,
            records=1,
            settle_ms=0,
            sample=broken,
            log_path=tmp_path / "p.log",
        )
    assert time.monotonic() - started < 60


def test_a_settle_until_an_instant_ends_every_client_there(
    builds: dict[str, ProbeBuild], cluster: MockCluster, tmp_path: Path
) -> None:
    """Clients started seconds apart with the same ``settle_until`` end their settle at that
    instant, not ``settle_ms`` after their own start (how a long run ends every life
    together, however long each JVM took to start)."""
    for endpoints in _endpoints(cluster, NEW):
        boot = _bootstrap(endpoints, "all")
        until = time.time() + 15.0

        def live(
            client: str,
            delay_s: float,
            boot: str = boot,
            until: float = until,
            endpoints: Mapping[int, Address] = endpoints,
        ) -> JavaRun[KernelSample]:
            time.sleep(delay_s)
            return _run(
                builds[NEW],
                client,
                boot,
                endpoints,
                tmp_path,
                records=5 if client == "producer" else 0,
                settle_ms=600_000,
                settle_until=until,
                life_every_ms=500,
            )

        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(live, ("producer", "consumer"), (0.0, 4.0)))
        end = datetime.fromtimestamp(until)
        assert runs[1].started_at - runs[0].started_at > timedelta(seconds=3)
        for run in runs:
            # The steady line follows the settle's end: after it, within a life tick and a
            # flush (settle_ms alone would have kept both for ten minutes).
            assert end <= run.steady.log_time < end + timedelta(seconds=5), run.steady
