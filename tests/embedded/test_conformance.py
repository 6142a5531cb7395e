"""The drop-in clients behave as aiokafka's: the same assertions, on the embedded cluster,
against stock ``AIOKafkaProducer`` / ``AIOKafkaConsumer`` and against ``ProposedProducer`` /
``ProposedConsumer``, for what an aiokafka user relies on: the exceptions after ``stop()`` and
before ``start()``, an unknown topic, idempotent produce, a group rebalance, seek and commit,
the three ways to read, aiokafka's overridable metadata seams, and the errors of a bootstrap
that gets no metadata. An assertion that holds for stock but not for ours is a drop-in bug.

What stock aiokafka 0.14 does where it is not obvious (measured here, pinned by these tests):
its producer waits forever for a topic missing from metadata before ``start()`` and after
``stop()``; its consumer fails with ``AttributeError`` before ``start()``; the librdkafka mock
creates any topic a Metadata request names (aiokafka always allows auto-creation), so an
unknown topic is made by giving an existing one the broker error UNKNOWN_TOPIC_OR_PART.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any
from unittest import mock

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]
from aiokafka.client import AIOKafkaClient  # type: ignore[import-untyped]
from aiokafka.conn import AIOKafkaConnection  # type: ignore[import-untyped]
from aiokafka.errors import (  # type: ignore[import-untyped]
    ConsumerStoppedError,
    KafkaConnectionError,
    KafkaError,
    ProducerClosed,
    UnknownTopicOrPartitionError,
)
from aiokafka.protocol.metadata import MetadataRequest  # type: ignore[import-untyped]
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.errors import ClientStopped, ConsumerNotStarted, ConsumerStopped, ProducerStopped
from connmgr.embedded import MockCluster
from connmgr.errors import ClientMisuse

pytestmark = pytest.mark.embedded

TOPIC = "t"
ALL = frozenset(TopicPartition(TOPIC, p) for p in range(3))
UNKNOWN_TOPIC_OR_PART = 3  # rd_kafka_resp_err_t / Kafka error code


@dataclass(frozen=True)
class Clients:
    """A producer and a consumer class to run the same assertions against."""

    producer: Callable[..., Any]
    consumer: Callable[..., Any]
    proposed: bool


STOCK = Clients(AIOKafkaProducer, AIOKafkaConsumer, proposed=False)
PROPOSED = Clients(ProposedProducer, ProposedConsumer, proposed=True)
# Ours bootstrapping in start(), as stock does (by default ours dials at the first send).
PROPOSED_WARM = Clients(
    partial(ProposedProducer, warm_up=True), partial(ProposedConsumer, warm_up=True), True
)


@pytest.fixture(params=[STOCK, PROPOSED], ids=["stock", "proposed"])
def clients(request: pytest.FixtureRequest) -> Clients:
    chosen: Clients = request.param
    return chosen


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, group_initial_rebalance_delay_ms=0) as mc:
        mc.create_topic_with_leaders(TOPIC, [3, 1, 2])
        yield mc


def server(mc: MockCluster) -> str:
    return mc.bootstrap_servers.split(",")[0]


def run(main: Coroutine[Any, Any, None], timeout_s: float = 30.0) -> None:
    """Run ``main``; a hang fails the test instead of stalling the suite."""

    async def bounded() -> None:
        await asyncio.wait_for(main, timeout_s)

    asyncio.run(bounded())


async def produce(mc: MockCluster, clients: Clients, n: int, **options: Any) -> None:
    """``n`` records ``r0``.. to partitions ``i % 3`` of ``TOPIC``, every one acked."""
    producer = clients.producer(bootstrap_servers=server(mc), acks="all", **options)
    await producer.start()
    try:
        futures = [await producer.send(TOPIC, f"r{i}".encode(), partition=i % 3) for i in range(n)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def until(condition: Callable[[], bool], poll: Callable[[], Awaitable[Any]]) -> None:
    """Call ``poll`` until ``condition`` holds (the caller's ``run`` timeout bounds it)."""
    while not condition():
        await poll()


def set_topic_error(mc: MockCluster, topic: str, code: int) -> None:
    """Make the mock answer Metadata for ``topic`` with broker error ``code`` (MockCluster has
    no method for it; the library call is rd_kafka_mock_topic_set_error)."""
    lib = ctypes.CDLL(mc.library.path)  # the process's already-loaded copy
    set_error = lib.rd_kafka_mock_topic_set_error
    set_error.restype = None
    set_error.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int)
    with mc._live() as mcluster:  # holds MockCluster's lock across the C call
        set_error(mcluster, topic.encode(), code)


# --- errors after stop() and before start() --------------------------------------------------


def test_producer_refuses_records_after_stop(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster), request_timeout_ms=2000)
        await producer.start()
        await producer.send_and_wait(TOPIC, b"before", partition=0)
        await producer.stop()
        with pytest.raises(ProducerClosed) as sent:
            await producer.send(TOPIC, b"x")
        with pytest.raises(ProducerClosed):
            await producer.send_and_wait(TOPIC, b"x", partition=1)
        batch = producer.create_batch()  # still works after stop(), as in aiokafka
        batch.append(key=None, value=b"x", timestamp=None)
        with pytest.raises(ProducerClosed) as batched:
            await producer.send_batch(batch, TOPIC, partition=0)
        assert isinstance(sent.value, KafkaError) and isinstance(batched.value, KafkaError)
        # Known metadata still answers, and flush/stop are no-ops.
        assert await producer.partitions_for(TOPIC) == {0, 1, 2}
        await producer.flush()
        await producer.stop()

    run(main())


def test_consumer_refuses_to_read_after_stop(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        consumer = clients.consumer(TOPIC, bootstrap_servers=server(cluster), group_id="g")
        await consumer.start()
        await consumer.getmany(timeout_ms=100)
        await consumer.stop()
        with pytest.raises(ConsumerStoppedError) as one:
            await consumer.getone()
        with pytest.raises(ConsumerStoppedError) as many:
            await consumer.getmany(timeout_ms=10)
        # ConsumerStoppedError is no KafkaError: `except KafkaError` lets it through.
        assert not isinstance(one.value, KafkaError) and not isinstance(many.value, KafkaError)
        with pytest.raises(ConsumerStoppedError):
            async for _ in consumer:
                pass
        with pytest.raises(StopAsyncIteration):
            await consumer.__anext__()
        await consumer.stop()

    run(main())


def test_stop_between_records_ends_async_for(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        await produce(cluster, clients, 3)
        consumer = clients.consumer(bootstrap_servers=server(cluster), auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign(sorted(ALL))
        seen = 0
        async for _ in consumer:  # ends quietly once the consumer is stopped
            seen += 1
            await consumer.stop()
        assert seen == 1

    run(main())


def test_consumer_before_start_fails_as_aiokafka(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        consumer = clients.consumer(TOPIC, bootstrap_servers=server(cluster), group_id="g")
        with pytest.raises(AttributeError):
            await consumer.getone()
        with pytest.raises(AttributeError):
            await consumer.getmany(timeout_ms=10)
        with pytest.raises(AttributeError):
            async for _ in consumer:
                pass
        # Before start() there is no broker to ask, so no topic list either.
        with pytest.raises(KafkaError, match="Unable to get cluster metadata"):
            await consumer.topics()
        await consumer.start()
        try:
            with pytest.raises(AssertionError):
                await consumer.start()
        finally:
            await consumer.stop()

    run(main())


def test_send_before_start_stock_waits_forever_ours_says_why(
    clients: Clients, cluster: MockCluster
) -> None:
    """Not a conformance assertion but the decision it documents (docs/drop-in-clients.md):
    stock aiokafka raises nothing, it waits for metadata that nothing fetches before
    ``start()``; ours raises ClientMisuse at once."""

    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster))
        try:
            expected = ClientMisuse if clients.proposed else TimeoutError
            with pytest.raises(expected):
                await asyncio.wait_for(producer.send(TOPIC, b"x"), 0.5)
        finally:
            await producer.stop()

    run(main())


def test_ours_say_what_to_do(cluster: MockCluster) -> None:
    """Ours add a message and stay catchable as ClientMisuse, which aiokafka's cannot."""

    async def main() -> None:
        consumer = ProposedConsumer(TOPIC, bootstrap_servers=server(cluster), group_id="g")
        with pytest.raises(ConsumerNotStarted, match=r"getone\(\) before start"):
            await consumer.getone()
        await consumer.start()
        await consumer.stop()
        with pytest.raises(ConsumerStopped, match=r"getmany\(\) after stop"):
            await consumer.getmany()
        producer = ProposedProducer(bootstrap_servers=server(cluster))
        await producer.start()
        await producer.send_and_wait(TOPIC, b"x", partition=0)
        await producer.stop()
        with pytest.raises(ProducerStopped, match=r"send\(\) after stop"):
            await producer.send(TOPIC, b"x")  # a known topic: aiokafka's accumulator refuses
        with pytest.raises(ProducerStopped, match="after stop"):
            await producer.send("never-seen", b"x")  # stock would wait forever
        for error in (ConsumerNotStarted, ConsumerStopped, ProducerStopped):
            assert issubclass(error, ClientMisuse)

    run(main())


# --- topics ------------------------------------------------------------------------------


def test_a_topic_missing_from_the_cluster_is_created(
    clients: Clients, cluster: MockCluster
) -> None:
    """The mock creates any topic a Metadata request names and aiokafka always allows it."""

    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster))
        await producer.start()
        try:
            assert await producer.partitions_for("fresh") == {0, 1, 2, 3}  # mock default: 4
            sent = await producer.send_and_wait("fresh", b"x", partition=3)
            assert (sent.topic, sent.partition, sent.offset) == ("fresh", 3, 0)
        finally:
            await producer.stop()

    run(main())


def test_a_topic_the_broker_reports_unknown(clients: Clients, cluster: MockCluster) -> None:
    cluster.create_topic("gone", 2)
    set_topic_error(cluster, "gone", UNKNOWN_TOPIC_OR_PART)

    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster), request_timeout_ms=400)
        await producer.start()
        try:
            started = time.monotonic()
            with pytest.raises(UnknownTopicOrPartitionError):
                await producer.send_and_wait("gone", b"x")
            assert time.monotonic() - started >= 0.4  # aiokafka retries for request_timeout_ms
            await producer.send_and_wait(TOPIC, b"x", partition=0)  # other topics still work
        finally:
            await producer.stop()
        consumer = clients.consumer(
            "gone", bootstrap_servers=server(cluster), group_id="g", request_timeout_ms=400
        )
        try:
            with pytest.raises(UnknownTopicOrPartitionError):
                await consumer.start()
        finally:
            await consumer.stop()

    run(main())


# --- producing and consuming ---------------------------------------------------------------


def test_idempotent_producer_writes_each_record_once(
    clients: Clients, cluster: MockCluster
) -> None:
    async def main() -> None:
        await produce(cluster, clients, 30, enable_idempotence=True)
        consumer = clients.consumer(bootstrap_servers=server(cluster), auto_offset_reset="earliest")
        await consumer.start()
        records: list[Any] = []
        try:
            consumer.assign(sorted(ALL))
            await until(
                lambda: len(records) >= 30,
                lambda: read_into(records, consumer.getmany(timeout_ms=200)),
            )
            await read_into(records, consumer.getmany(timeout_ms=300))  # anything extra?
        finally:
            await consumer.stop()
        assert sorted(r.value for r in records) == sorted(f"r{i}".encode() for i in range(30))
        for p in range(3):
            assert [r.offset for r in records if r.partition == p] == list(range(10))

    run(main())


async def read_into(records: list[Any], batch: Awaitable[dict[Any, list[Any]]]) -> None:
    for messages in (await batch).values():
        records.extend(messages)


def test_group_rebalance_splits_then_hands_over(clients: Clients, cluster: MockCluster) -> None:
    """Two consumers in one group split the partitions; when one leaves, the other gets all.

    The second member also subscribes to ``t2``. Why: the librdkafka mock finishes a sync
    as soon as the leader's SyncGroup has assigned every member, and answers a follower's
    SyncGroup that arrives later with INVALID_REQUEST, which aiokafka 0.14 treats as fatal.
    A topic new to the leader makes it refresh metadata before it assigns, so the follower's
    SyncGroup arrives first, as it usually does against a real broker's longer round trip."""
    cluster.create_topic("t2", 1)

    async def main() -> None:
        options = {
            "bootstrap_servers": server(cluster),
            "group_id": "rg",
            "enable_auto_commit": False,
            "heartbeat_interval_ms": 100,  # a rebalance is noticed at the next heartbeat
            # The mock waits session_timeout_ms - 1 s for members to rejoin.
            "session_timeout_ms": 2000,
        }
        first = clients.consumer(TOPIC, **options)
        second = clients.consumer(TOPIC, "t2", **options)
        await first.start()  # with a group, start() returns once partitions are assigned
        try:
            assert first.assignment() == ALL
            await second.start()
            try:

                def split() -> bool:
                    a, b = first.assignment(), second.assignment() - {TopicPartition("t2", 0)}
                    return bool(a) and bool(b) and not a & b and a | b == ALL

                await until(split, partial(first.getmany, timeout_ms=50))
            finally:
                await second.stop()  # leaves the group
            await until(lambda: first.assignment() == ALL, partial(first.getmany, timeout_ms=50))
        finally:
            await first.stop()

    run(main())


def test_seek_position_and_commit(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        await produce(cluster, clients, 30)  # 10 records on each partition
        tp = TopicPartition(TOPIC, 0)
        consumer = clients.consumer(
            bootstrap_servers=server(cluster),
            group_id="sg",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            assert await consumer.committed(tp) is None
            await consumer.seek_to_beginning(tp)
            assert await consumer.position(tp) == 0
            assert (await consumer.getone(tp)).offset == 0
            consumer.seek(tp, 5)
            assert (await consumer.getone(tp)).offset == 5
            assert await consumer.position(tp) == 6
            await consumer.commit({tp: 7})
            assert await consumer.committed(tp) == 7
            await consumer.commit()  # the consumed position
            assert await consumer.committed(tp) == 6
            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 10
            await consumer.seek_to_committed(tp)
            assert await consumer.position(tp) == 6
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 10}
            with pytest.raises(ValueError):
                consumer.seek(tp, -1)
        finally:
            await consumer.stop()

    run(main())


def test_getone_getmany_and_async_for_read_the_same(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        await produce(cluster, clients, 9)

        async def read(how: str) -> list[tuple[int, int, bytes]]:
            consumer = clients.consumer(
                bootstrap_servers=server(cluster), auto_offset_reset="earliest"
            )
            await consumer.start()
            consumer.assign(sorted(ALL))
            records: list[Any] = []
            try:
                if how == "getone":
                    records = [await consumer.getone() for _ in range(9)]
                elif how == "getmany":
                    await until(
                        lambda: len(records) >= 9,
                        lambda: read_into(records, consumer.getmany(timeout_ms=200)),
                    )
                else:
                    async for record in consumer:
                        records.append(record)
                        if len(records) == 9:
                            break
            finally:
                await consumer.stop()
            return sorted((r.partition, r.offset, r.value) for r in records)

        expected = sorted((i % 3, i // 3, f"r{i}".encode()) for i in range(9))
        for how in ("getone", "getmany", "async for"):
            assert await read(how) == expected, how

    run(main())


# --- aiokafka's overridable seams ----------------------------------------------------------


def test_a_replaced_metadata_update_runs_for_both(clients: Clients, cluster: MockCluster) -> None:
    """aiokafka's own test_producer_notopic and test_metadata_synchronizer, on both clients."""

    async def no_metadata(*args: Any, **kwargs: Any) -> None:
        return None

    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster), request_timeout_ms=300)
        await producer.start()
        try:
            with mock.patch.object(AIOKafkaClient, "_metadata_update") as mocked:
                mocked.side_effect = no_metadata
                with pytest.raises(UnknownTopicOrPartitionError):
                    await producer.send_and_wait("some_topic", b"hello")
                assert mocked.call_count > 0
        finally:
            await producer.stop()
        producer = clients.producer(bootstrap_servers=server(cluster), metadata_max_age_ms=10)
        with mock.patch.object(AIOKafkaClient, "_metadata_update") as mocked:
            mocked.side_effect = no_metadata
            await producer.start()
            try:
                await asyncio.sleep(0.1)  # the synchronizer's 10 ms period, several times
                assert mocked.call_count > 0
            finally:
                await producer.stop()

    run(main())


def test_a_replaced_wait_on_metadata_runs_for_both(clients: Clients, cluster: MockCluster) -> None:
    async def main() -> None:
        producer = clients.producer(bootstrap_servers=server(cluster))
        await producer.start()
        try:
            await producer.send_and_wait(TOPIC, b"x", partition=0)  # metadata has the topic
            with mock.patch.object(AIOKafkaClient, "_wait_on_metadata") as mocked:
                mocked.side_effect = UnknownTopicOrPartitionError("replaced")
                with pytest.raises(UnknownTopicOrPartitionError, match="replaced"):
                    await producer.send(TOPIC, b"x")
                with pytest.raises(UnknownTopicOrPartitionError, match="replaced"):
                    await producer.partitions_for(TOPIC)
            await producer.send_and_wait(TOPIC, b"x", partition=0)  # restored
        finally:
            await producer.stop()

    run(main())


def test_patched_connection_and_instance_seams(clients: Clients, cluster: MockCluster) -> None:
    """aiokafka's test_metadata_update_fail (AIOKafkaConnection.send patched on the class) and
    an instance-level patch of _metadata_update, on both clients."""

    async def main() -> None:
        consumer = clients.consumer(bootstrap_servers=server(cluster))
        await consumer.start()
        try:
            assert await consumer._client.force_metadata_update()
            client = consumer._client
            with mock.patch.object(client, "_metadata_update", wraps=client._metadata_update) as m:
                assert await client.force_metadata_update()
                assert m.call_count == 1
            with mock.patch.object(AIOKafkaConnection, "send") as send:
                send.side_effect = KafkaError("mocked exception")
                assert await client.force_metadata_update() is False
                with pytest.raises(KafkaError):
                    await client.fetch_all_metadata()
            assert TOPIC in await consumer.topics()
        finally:
            await consumer.stop()

    run(main())


# --- a bootstrap that gets no metadata -----------------------------------------------------


def metadata_send(answer: Callable[[Callable[[], Awaitable[Any]]], Any]) -> Callable[..., Any]:
    """``AIOKafkaConnection.send`` whose Metadata requests return ``answer(send_it)`` (the
    way aiokafka's own tests inject failures); every other request is sent as usual."""
    original = AIOKafkaConnection.send

    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        send_it = partial(original, self, request, expect_response)
        return answer(send_it) if request.API_KEY == MetadataRequest.API_KEY else send_it()

    return send


def timed_out(send_it: Callable[[], Awaitable[Any]]) -> Any:
    raise TimeoutError  # what the connection raises after request_timeout_ms


def failed(send_it: Callable[[], Awaitable[Any]]) -> Any:
    raise KafkaError("injected")


async def without_brokers(send_it: Callable[[], Awaitable[Any]]) -> Any:
    response = await send_it()
    response.brokers = []
    return response


# cause -> (patched send or None for a refused connection, stock's error, ours' message)
CAUSES: dict[str, tuple[Callable[..., Any] | None, type[Exception], str]] = {
    "refused": (None, KafkaConnectionError, "no bootstrap server could be connected"),
    "timed-out": (
        metadata_send(timed_out),
        KafkaConnectionError,
        "did not answer the Metadata request within request_timeout_ms=400",
    ),
    "failed": (
        metadata_send(failed),
        KafkaConnectionError,
        r"the Metadata request to 127\.0\.0\.1:\d+ failed: KafkaError: injected",
    ),
    "no-brokers": (
        metadata_send(without_brokers),
        UnknownTopicOrPartitionError,
        "answered the Metadata request, but with no broker in it",
    ),
}


@pytest.mark.parametrize("cause", list(CAUSES))
@pytest.mark.parametrize(
    "bootstrapping", [STOCK, PROPOSED, PROPOSED_WARM], ids=["stock", "proposed", "proposed-warm"]
)
def test_bootstrap_without_metadata(
    bootstrapping: Clients, cause: str, cluster: MockCluster
) -> None:
    """Start and a first send raise stock's error type; ours' message says what happened."""
    patched, error, message = CAUSES[cause]
    if patched is None:
        cluster.broker_down(1)  # refuses connections on the one bootstrap server

    async def main() -> None:
        producer = bootstrapping.producer(bootstrap_servers=server(cluster), request_timeout_ms=400)
        with pytest.raises(error) as raised:
            try:
                await producer.start()
                await producer.send_and_wait(TOPIC, b"x")
            finally:
                await producer.stop()
        if error is KafkaConnectionError:
            assert "Unable to bootstrap from" in str(raised.value)
        if bootstrapping.proposed:
            assert raised.match(message)

    with (
        mock.patch.object(AIOKafkaConnection, "send", patched)
        if patched
        else contextlib.nullcontext()
    ):
        run(main())


# --- requests after stop(), and a handshake that times out ------------------------------------


def test_requests_after_stop_fail_at_once_with_a_kafka_error(cluster: MockCluster) -> None:
    # Stock aiokafka dials again after stop() and answers (a socket it never closes); ours
    # refuses with a non-retriable KafkaError -- a retriable one made commit() retry forever.
    async def main() -> None:
        tp = TopicPartition(TOPIC, 0)
        consumer = ProposedConsumer(
            bootstrap_servers=server(cluster), group_id="after-stop", enable_auto_commit=False
        )
        await consumer.start()
        consumer.assign([tp])
        await consumer.commit({tp: 1})
        await consumer.stop()
        calls = (
            consumer.commit({tp: 2}),
            consumer.committed(tp),
            consumer.end_offsets([tp]),
            consumer.beginning_offsets([tp]),
            consumer.offsets_for_times({tp: 0}),
            consumer.topics(),
        )
        for call in calls:
            with pytest.raises(KafkaError) as caught:
                await asyncio.wait_for(call, 10)
            assert isinstance(caught.value, ClientStopped) and not caught.value.retriable

    run(main())


def test_a_handshake_that_times_out_is_a_failed_dial_not_a_peer_close(
    cluster: MockCluster,
) -> None:
    # aiokafka closes a connection whose ApiVersions exchange timed out before returning it;
    # that close used to reach the policy as "closed by the peer" for a connection still
    # dialling, which its state table refuses (InvalidTransition).
    async def main() -> None:
        cluster.set_rtt_all(3_000)
        producer = ProposedProducer(
            bootstrap_servers=server(cluster), warm_up=True, request_timeout_ms=1_000
        )
        with pytest.raises(KafkaConnectionError, match="request_timeout_ms=1000"):
            await producer.start()
        assert producer.ledger.open_now() == []

    run(main())
