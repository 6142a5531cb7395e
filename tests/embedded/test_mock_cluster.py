"""End-to-end tests of :class:`connmgr.embedded.MockCluster` against the real librdkafka mock.

Nothing here is mocked: brokers are real loopback listeners inside librdkafka, clients are raw
sockets speaking the Kafka wire protocol or the real aiokafka 0.14. Timing assertions only use
generous lower bounds; measurements are printed (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # type: ignore[import-untyped]
from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped]

from connmgr.embedded import (
    ApiKey,
    EmbeddedClusterError,
    LibRdKafka,
    MockCluster,
    MockRequest,
    load_librdkafka,
)

pytestmark = pytest.mark.embedded

LOOPBACK = "127.0.0.1"


# -- a minimal Kafka wire client: ApiVersions v0 is the one request every broker must answer ---


def _api_versions_v0(correlation_id: int) -> bytes:
    client_id = b"connmgr-test"
    # Request header v1: api_key, api_version, correlation_id, client_id; ApiVersions v0 has
    # an empty body.
    body = struct.pack(">hhih", ApiKey.API_VERSIONS, 0, correlation_id, len(client_id))
    body += client_id
    return struct.pack(">i", len(body)) + body


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def _api_versions_roundtrip(sock: socket.socket, correlation_id: int) -> float:
    """Send ApiVersions v0, check the response's correlation id; return seconds taken."""
    start = time.perf_counter()
    sock.sendall(_api_versions_v0(correlation_id))
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    payload = _recv_exactly(sock, size)
    elapsed = time.perf_counter() - start
    (echoed,) = struct.unpack(">i", payload[:4])
    assert echoed == correlation_id
    (error_code,) = struct.unpack(">h", payload[4:6])
    assert error_code == 0
    return elapsed


def _connect(endpoint: tuple[str, int]) -> socket.socket:
    return socket.create_connection(endpoint, timeout=5)


def _unused_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


# -- 1. lifecycle and endpoints -------------------------------------------------------------


def test_three_brokers_listen_on_distinct_loopback_ports_and_stop_on_close() -> None:
    cluster = MockCluster(3)
    endpoints = cluster.endpoints()
    assert sorted(endpoints) == [1, 2, 3]
    assert cluster.broker_ids == (1, 2, 3)
    assert {host for host, _ in endpoints.values()} == {LOOPBACK}
    assert len({port for _, port in endpoints.values()}) == 3
    assert cluster.listeners() == endpoints
    assert cluster.bootstrap_servers == ",".join(f"{h}:{p}" for h, p in endpoints.values())

    for broker_id, endpoint in endpoints.items():
        with _connect(endpoint) as sock:
            _api_versions_roundtrip(sock, broker_id)

    assert "open" in repr(cluster) and "brokers=3" in repr(cluster)
    cluster.close()
    cluster.close()  # idempotent
    assert cluster.closed
    assert "closed" in repr(cluster)

    for endpoint in endpoints.values():
        with pytest.raises(ConnectionRefusedError):
            _connect(endpoint).close()
    with pytest.raises(EmbeddedClusterError, match="closed"):
        cluster.endpoints()
    with pytest.raises(EmbeddedClusterError, match="closed"):
        cluster.broker_down(1)
    with pytest.raises(EmbeddedClusterError, match="closed"):
        _ = cluster.bootstrap_servers


def test_context_manager_and_start_classmethod() -> None:
    with MockCluster.start(2, track_requests=False) as cluster:
        endpoint = cluster.endpoints()[2]
        with _connect(endpoint):
            pass
    assert cluster.closed
    with pytest.raises(ConnectionRefusedError):
        _connect(endpoint).close()


def test_metadata_ids_match_bootstrap_order() -> None:
    """The id -> endpoint map parsed from ``bootstraps`` agrees with the brokers' Metadata."""

    async def scenario(cluster: MockCluster) -> dict[int, tuple[str, int]]:
        client = AIOKafkaClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            await client.bootstrap()
            return {b.nodeId: (b.host, b.port) for b in client.cluster.brokers()}
        finally:
            await client.close()

    with MockCluster(5, track_requests=False) as cluster:
        assert asyncio.run(scenario(cluster)) == cluster.endpoints()


# -- 2. scale ---------------------------------------------------------------------------------


def test_thousand_brokers_start_and_close() -> None:
    start = time.perf_counter()
    cluster = MockCluster(1000, track_requests=False)
    started = time.perf_counter() - start
    try:
        endpoints = cluster.endpoints()
        assert len(endpoints) == 1000
        assert len({port for _, port in endpoints.values()}) == 1000
        for broker_id in (1, 500, 1000):
            with _connect(endpoints[broker_id]) as sock:
                _api_versions_roundtrip(sock, broker_id)
    finally:
        start = time.perf_counter()
        cluster.close()
        closed = time.perf_counter() - start
    print(
        f"\n1000-broker mock cluster: start {started * 1000:.1f} ms, close {closed * 1000:.1f} ms"
    )


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/fd")
def test_too_few_file_descriptors_is_an_error_not_an_abort() -> None:
    # librdkafka aborts the process if it runs out of descriptors while creating brokers;
    # the wrapper must refuse up front instead.
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 100, hard))
    try:
        with pytest.raises(EmbeddedClusterError, match="file descriptors"):
            MockCluster(1000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# -- 3. real clients: placement of leaders and coordinator, request tracking ------------------


def test_aiokafka_produce_consume_follows_leaders_and_coordinator() -> None:
    leaders = [2, 3, 1]
    per_partition = 20
    group = "connmgr-embedded-group"
    topic = "placement"
    # The mock's default coordinator is crc32(key) % brokers (as index into its broker list);
    # pick a different broker so the test proves set_coordinator took effect.
    hashed_default = zlib.crc32(group.encode()) % 3 + 1
    coordinator = next(b for b in (3, 2, 1) if b != hashed_default)

    async def scenario(cluster: MockCluster) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            for partition, leader in enumerate(leaders):
                cluster.clear_requests()
                for n in range(per_partition):
                    value = f"{partition}:{n}".encode()
                    metadata = await producer.send_and_wait(topic, value, partition=partition)
                    assert metadata.partition == partition
                produce_brokers = {
                    r.broker_id for r in cluster.requests() if r.api_key == ApiKey.PRODUCE
                }
                assert produce_brokers == {leader}, (partition, produce_brokers)
                assert (
                    producer.client.cluster.leader_for_partition(TopicPartition(topic, partition))
                    == leader
                )
        finally:
            await producer.stop()

        cluster.clear_requests()
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=group,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        received: list[tuple[int, bytes]] = []
        try:
            deadline = time.monotonic() + 30
            while len(received) < per_partition * len(leaders) and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for tp, records in batches.items():
                    received.extend((tp.partition, record.value) for record in records)
        finally:
            await consumer.stop()

        expected = {
            (p, f"{p}:{n}".encode()) for p in range(len(leaders)) for n in range(per_partition)
        }
        duplicates = [item for item, k in collections.Counter(received).items() if k > 1]
        assert duplicates == []
        assert set(received) == expected

        requests = cluster.requests()
        by_api = collections.defaultdict(set)
        for r in requests:
            by_api[r.api_key].add(r.broker_id)
        print(
            "\nrequests during consume:",
            dict(collections.Counter((r.api_name, r.broker_id) for r in requests)),
        )
        # FindCoordinator may go to any broker (aiokafka asks its least-loaded node); the
        # group's own requests must all land on the coordinator we placed.
        assert ApiKey.FIND_COORDINATOR in by_api
        assert by_api[ApiKey.JOIN_GROUP] == {coordinator}
        for api in (
            ApiKey.SYNC_GROUP,
            ApiKey.OFFSET_FETCH,
            ApiKey.OFFSET_COMMIT,
            ApiKey.HEARTBEAT,
            ApiKey.LEAVE_GROUP,
        ):
            assert by_api.get(api, {coordinator}) == {coordinator}, api
        # Each leader served fetches for its partition.
        assert by_api[ApiKey.FETCH] == set(leaders)

    with MockCluster(3, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic_with_leaders(topic, leaders)
        cluster.set_coordinator("group", group, coordinator)
        assert cluster.topics == {topic: 3}
        asyncio.run(scenario(cluster))


def test_request_tracking_records_broker_api_and_monotonic_time() -> None:
    with MockCluster(2) as cluster:
        assert cluster.requests() == []
        before_us = time.monotonic_ns() // 1000
        for broker_id, endpoint in cluster.listeners().items():
            with _connect(endpoint) as sock:
                _api_versions_roundtrip(sock, broker_id)
        after_us = time.monotonic_ns() // 1000
        requests = cluster.requests()
        assert [(r.broker_id, r.api_key) for r in requests] == [(1, 18), (2, 18)]
        assert all(isinstance(r, MockRequest) for r in requests)
        assert requests[0].api_name == "API_VERSIONS"
        assert MockRequest(1, 9999, 0).api_name == "ApiKey(9999)"
        if sys.platform == "linux":
            # rd_clock() and time.monotonic() are both CLOCK_MONOTONIC on Linux.
            assert all(before_us <= r.timestamp_us <= after_us for r in requests)
        assert cluster.requests() == requests  # reading does not drain
        cluster.clear_requests()
        assert cluster.requests() == []

    with (
        MockCluster(1, track_requests=False) as untracked,
        pytest.raises(EmbeddedClusterError, match="track_requests=False"),
    ):
        untracked.requests()


# -- 4. broker down / up ----------------------------------------------------------------------


async def _metadata_via(
    endpoint: tuple[str, int], topic: str, partition: int
) -> tuple[dict[int, tuple[str, int]], int | None]:
    """Bootstrap an aiokafka client from one broker; return its brokers and one leader."""
    client = AIOKafkaClient(bootstrap_servers=f"{endpoint[0]}:{endpoint[1]}")
    try:
        await client.bootstrap()
        metadata = await client.fetch_all_metadata()
        brokers = {b.nodeId: (b.host, b.port) for b in metadata.brokers()}
        leader: int | None = metadata.leader_for_partition(TopicPartition(topic, partition))
        return brokers, leader
    finally:
        await client.close()


def test_broker_down_closes_connections_and_refuses_new_ones_until_up() -> None:
    with MockCluster(3, track_requests=False) as cluster:
        cluster.create_topic_with_leaders("led-by-2", [2])
        endpoints = cluster.listeners()
        existing = _connect(endpoints[2])
        other = _connect(endpoints[1])
        try:
            _api_versions_roundtrip(existing, 1)

            cluster.broker_down(2)
            assert cluster.down_brokers == {2}
            assert "down=[2]" in repr(cluster)
            # The existing connection gets an orderly close (FIN, not RST): recv sees EOF.
            existing.settimeout(5)
            assert existing.recv(1) == b""
            # The port stays bound but not listening, so new connects are refused at once.
            with pytest.raises(ConnectionRefusedError):
                _connect(endpoints[2]).close()
            # Other brokers and their connections are untouched.
            _api_versions_roundtrip(other, 2)
            with _connect(endpoints[3]) as sock:
                _api_versions_roundtrip(sock, 3)

            # Metadata (asked of broker 1) drops broker 2 from the broker list, yet still names
            # it leader of the partition it leads: leadership does not move on its own.
            brokers, leader = asyncio.run(_metadata_via(endpoints[1], "led-by-2", 0))
            assert brokers == {1: endpoints[1], 3: endpoints[3]}
            assert leader == 2

            cluster.broker_down(2)  # already down: no change, no error
            cluster.broker_up(2)
            assert cluster.down_brokers == frozenset()
            assert cluster.listeners()[2] == endpoints[2]  # same port as before
            with _connect(endpoints[2]) as sock:
                _api_versions_roundtrip(sock, 4)
            brokers, leader = asyncio.run(_metadata_via(endpoints[1], "led-by-2", 0))
            assert brokers == endpoints
            assert leader == 2
            assert "down=[]" in repr(cluster)
        finally:
            existing.close()
            other.close()


# -- 5. latency -------------------------------------------------------------------------------


def test_set_rtt_delays_responses_of_that_broker_only() -> None:
    with MockCluster(2, track_requests=False) as cluster:
        cluster.set_rtt(2, 200)
        endpoints = cluster.listeners()
        timings: dict[int, float] = {}
        connects: dict[int, float] = {}
        for broker_id in (1, 2):
            start = time.perf_counter()
            sock = _connect(endpoints[broker_id])
            connects[broker_id] = time.perf_counter() - start
            with sock:
                _api_versions_roundtrip(sock, 0)  # warm up
                timings[broker_id] = min(_api_versions_roundtrip(sock, n) for n in range(1, 4))
        ratio = timings[2] / max(timings[1], 1e-6)
        print(
            f"\nrtt: broker1 {timings[1] * 1000:.2f} ms, broker2 (rtt 200) "
            f"{timings[2] * 1000:.2f} ms, ratio {ratio:.0f}x; connect "
            f"{connects[1] * 1000:.2f} / {connects[2] * 1000:.2f} ms"
        )
        assert timings[2] - timings[1] >= 0.150

        cluster.set_rtt(2, 0)
        with _connect(endpoints[2]) as sock:
            assert _api_versions_roundtrip(sock, 9) < 0.150


def test_set_rtt_all_delays_every_broker_in_one_command() -> None:
    with MockCluster(3, track_requests=False) as cluster:
        endpoints = cluster.listeners()

        def roundtrips() -> list[float]:
            found = []
            for broker_id in (1, 2, 3):
                with _connect(endpoints[broker_id]) as sock:
                    _api_versions_roundtrip(sock, 0)
                    found.append(min(_api_versions_roundtrip(sock, n) for n in range(1, 3)))
            return found

        cluster.set_rtt_all(200)
        slow = roundtrips()
        cluster.set_rtt_all(0)
        fast = roundtrips()
        # Side by side: each broker got slower by most of the 200 ms, and back.
        assert all(s - f >= 0.150 for s, f in zip(slow, fast, strict=True)), (slow, fast)
        with pytest.raises(EmbeddedClusterError, match="rtt_ms"):
            cluster.set_rtt_all(-1)


# -- 6. advertised endpoint -------------------------------------------------------------------


def test_set_host_port_changes_advertised_endpoint_in_metadata() -> None:
    async def scenario(cluster: MockCluster, new_port: int) -> None:
        client = AIOKafkaClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            await client.bootstrap()
            original = cluster.listeners()
            assert client.cluster.broker_metadata(2).host == LOOPBACK
            assert client.cluster.broker_metadata(2).port == original[2][1]

            cluster.set_host_port(2, "localhost", new_port)
            # fetch_all_metadata asks a broker over the connections the client already has
            # (its own view is not updated), so nothing dials the new endpoint.
            metadata = await client.fetch_all_metadata()
            advertised = {b.nodeId: (b.host, b.port) for b in metadata.brokers()}
            assert advertised[2] == ("localhost", new_port)
            assert advertised[1] == original[1]
            assert advertised[3] == original[3]
            assert advertised == cluster.endpoints()
        finally:
            await client.close()

        # A fresh client bootstrapping from the (unchanged) bootstrap list sees it too.
        fresh = AIOKafkaClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            await fresh.bootstrap()
            broker = fresh.cluster.broker_metadata(2)
            assert (broker.host, broker.port) == ("localhost", new_port)
        finally:
            await fresh.close()

    with MockCluster(3, track_requests=False) as cluster:
        listeners_before = cluster.listeners()
        bootstrap_before = cluster.bootstrap_servers
        new_port = _unused_loopback_port()
        asyncio.run(scenario(cluster, new_port))
        assert cluster.endpoints()[2] == ("localhost", new_port)
        # Only the advertisement moved: the broker still listens where it did.
        assert cluster.listeners() == listeners_before
        assert cluster.bootstrap_servers == bootstrap_before
        with _connect(listeners_before[2]) as sock:
            _api_versions_roundtrip(sock, 1)


# -- 7. errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 4, -1, True, "1", None])
def test_bad_broker_id_raises_readable_error(bad: Any) -> None:
    with MockCluster(3, track_requests=False) as cluster:
        with pytest.raises(EmbeddedClusterError, match="broker id") as info:
            cluster.broker_down(bad)
        if isinstance(bad, int) and not isinstance(bad, bool):
            assert str(info.value) == (
                f"unknown broker id {bad}: this mock cluster has brokers 1..3"
            )
        calls: list[Callable[[], object]] = [
            lambda: cluster.broker_up(bad),
            lambda: cluster.set_rtt(bad, 10),
            lambda: cluster.set_host_port(bad, "localhost", 1234),
            lambda: cluster.set_coordinator("group", "g", bad),
            lambda: cluster.create_topic_with_leaders("t", [1, bad]),
        ]
        for call in calls:
            with pytest.raises(EmbeddedClusterError, match="broker id"):
                call()
        assert cluster.endpoints() == cluster.listeners()  # set_host_port changed nothing


def test_input_validation_errors() -> None:
    bad_counts: list[Any] = [0, -3, True, 2.0]
    for brokers in bad_counts:
        with pytest.raises(EmbeddedClusterError, match="brokers must be"):
            MockCluster(brokers)

    with MockCluster(3, track_requests=False) as cluster:
        with pytest.raises(EmbeddedClusterError, match=r"leaders\[1\]: unknown broker id 7"):
            cluster.create_topic_with_leaders("t", [1, 7, 2])
        assert cluster.topics == {}  # nothing was created
        with pytest.raises(EmbeddedClusterError, match="non-empty sequence"):
            cluster.create_topic_with_leaders("t", [])

        cluster.create_topic("t", 2)
        with pytest.raises(EmbeddedClusterError, match=r"partition 2 does not exist.*0\.\.1"):
            cluster.set_partition_leader("t", 2, 1)
        with pytest.raises(EmbeddedClusterError, match="partition -1 does not exist"):
            cluster.set_partition_leader("t", -1, 1)
        with pytest.raises(EmbeddedClusterError, match="unknown topic 'nope'"):
            cluster.set_partition_leader("nope", 0, 1)
        with pytest.raises(EmbeddedClusterError, match=r"replication_factor must be in 1\.\.3"):
            cluster.create_topic("u", 1, replication_factor=4)
        bad_key_type: Any = "consumer"
        with pytest.raises(EmbeddedClusterError, match="key_type"):
            cluster.set_coordinator(bad_key_type, "g", 1)
        with pytest.raises(EmbeddedClusterError, match="rtt_ms"):
            cluster.set_rtt(1, -5)
        with pytest.raises(EmbeddedClusterError, match="port"):
            cluster.set_host_port(1, "localhost", 70000)
        with pytest.raises(EmbeddedClusterError, match="longer than 127 bytes"):
            cluster.set_host_port(1, "h" * 200, 1234)
        with pytest.raises(EmbeddedClusterError, match="NUL"):
            cluster.create_topic("bad\x00name", 1)

        # An error librdkafka itself reports comes back with rd_kafka_err2str text and code.
        with pytest.raises(EmbeddedClusterError, match="Topic already exists") as info:
            cluster.create_topic("t", 2)
        assert info.value.code == 36  # RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS
        assert "rd_kafka_mock_topic_create" in str(info.value)


def test_missing_library_path_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "librdkafka.so.1"
    with pytest.raises(EmbeddedClusterError, match="does not exist") as info:
        load_librdkafka(missing)
    assert str(missing) in str(info.value)
    with pytest.raises(EmbeddedClusterError, match="does not exist"):
        MockCluster(1, library=missing)


@pytest.mark.skipif(sys.platform != "linux", reason="uses glibc's soname")
def test_non_library_file_and_missing_symbol_are_named(tmp_path: Path) -> None:
    not_a_library = tmp_path / "librdkafka.so.1"
    not_a_library.write_text("not an ELF file\n")
    with pytest.raises(EmbeddedClusterError, match="cannot load") as info:
        load_librdkafka(not_a_library)
    assert str(not_a_library) in str(info.value)

    # The C library loads fine but is not librdkafka: the first missing symbol is named.
    libc = "libc.so.6"
    with pytest.raises(EmbeddedClusterError, match="required symbol 'rd_kafka_version_str'"):
        LibRdKafka(libc)


def test_default_library_is_the_bundled_one() -> None:
    lib = load_librdkafka()
    assert lib is load_librdkafka()  # cached
    assert lib.version.startswith("2.")
    assert "confluent_kafka" in lib.path
    assert lib.has_set_host_port
    assert lib.has_request_tracking
    print(f"\nloaded {lib!r}")


# -- exit safety ------------------------------------------------------------------------------


def test_unclosed_cluster_is_released_at_interpreter_exit_and_on_gc() -> None:
    code = textwrap.dedent(
        """
        import gc, socket
        from connmgr.embedded import MockCluster
        kept = MockCluster(3)
        dropped = MockCluster(2)
        endpoint = dropped.listeners()[1]
        del dropped
        gc.collect()
        try:
            socket.create_connection(endpoint, timeout=2).close()
        except ConnectionRefusedError:
            print("gc-released")
        print(kept)
        """
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "gc-released" in result.stdout
    assert "<MockCluster open brokers=3" in result.stdout
