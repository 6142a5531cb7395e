"""Observing stock aiokafka 0.14 against a real in-process mock cluster.

The producer and consumer are aiokafka's own classes; only their client object has been
turned into an :class:`ObservedAIOKafkaClient`. Every test checks the ledger against the
kernel's socket table as well, and prints the (broker, role) sequences and the random choices
it observed (``pytest -s`` shows them).
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterator
from typing import Any

import aiokafka.client
import aiokafka.conn
import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.client import AIOKafkaClient

from connmgr.aio import observe
from connmgr.aio.kernel import averify_against_kernel
from connmgr.aio.observe import (
    ObservationError,
    ObservedAIOKafkaClient,
    ObservedAIOKafkaConsumer,
    ObservedAIOKafkaProducer,
    expected_stock_sequence,
    observe_client,
    observed_consumer,
    observed_producer,
)
from connmgr.core.identity import Role
from connmgr.embedded import MockCluster
from connmgr.ledger import ConnectionLedger, ConnEntry, ConnEvent

pytestmark = pytest.mark.embedded

TOPIC = "observed"
LEADERS = [2, 3, 1]  # partition i is led by LEADERS[i]
GROUP = "g"
COORDINATOR = 3
RECORDS = 30


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as mock:
        mock.create_topic_with_leaders(TOPIC, LEADERS)
        mock.set_coordinator("group", GROUP, COORDINATOR)
        mock.set_group_initial_rebalance_delay(0)
        yield mock


def _short(sequence: list[tuple[int | None, Role]]) -> list[tuple[int | None, str]]:
    return [(broker, role.value) for broker, role in sequence]


def _opens(ledger: ConnectionLedger) -> list[ConnEntry]:
    return [e for e in ledger.entries if e.kind is ConnEvent.DIAL]


def _events(ledger: ConnectionLedger, conn_id: int) -> list[ConnEntry]:
    return [e for e in ledger.entries if e.conn_id == conn_id]


def _bootstrap_endpoint(cluster: MockCluster, index: int) -> tuple[str, int]:
    host, _, port = cluster.bootstrap_servers.split(",")[index].rpartition(":")
    return host, int(port)


async def _produce(producer: AIOKafkaProducer) -> None:
    futures = [
        await producer.send(TOPIC, f"{n}".encode(), partition=n % len(LEADERS))
        for n in range(RECORDS)
    ]
    for metadata in await asyncio.gather(*futures):
        assert metadata.topic == TOPIC


def _check_bootstrap_first(
    cluster: MockCluster, client: ObservedAIOKafkaClient
) -> tuple[int, ConnEntry]:
    """The first dial is one bootstrap connection, to the entry chosen, closed before data."""
    ledger, choices = client.ledger, client.choices
    purpose, index = choices[0]
    assert purpose == "bootstrap"
    # aiokafka shuffles bootstrap_servers (collect_hosts(randomize=True)): the entry is random.
    first = ledger.entries[0]
    assert (first.kind, first.role, first.broker) == (ConnEvent.DIAL, Role.BOOTSTRAP, None)
    assert (first.host, first.port) == _bootstrap_endpoint(cluster, index)
    # The mock lists its brokers in id order, so entry i is broker i + 1.
    assert client.bootstrap_brokers == {first.conn_id: index + 1}
    events = _events(ledger, first.conn_id)
    assert [e.kind for e in events] == [ConnEvent.DIAL, ConnEvent.ESTABLISHED, ConnEvent.CLOSED]
    closed_at = ledger.entries.index(events[-1])
    later_opens = [e for e in _opens(ledger) if e is not first]
    assert all(ledger.entries.index(e) > closed_at for e in later_opens)
    assert [e.role for e in _opens(ledger)].count(Role.BOOTSTRAP) == 1
    return index, first


def test_producer_connects_bootstrap_then_metadata_node_then_leaders(
    cluster: MockCluster,
) -> None:
    listeners = cluster.listeners()

    async def scenario() -> ObservedAIOKafkaProducer:
        producer = observed_producer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        # The stock constructor's own client object was converted: the sender (built inside
        # AIOKafkaProducer.__init__) holds the very same, observed object.
        assert type(producer.client) is ObservedAIOKafkaClient
        assert producer._sender.client is producer.client
        await producer.start()
        try:
            await _produce(producer)
            assert len(producer.ledger.open_now()) == len(set(LEADERS))
            await averify_against_kernel(producer.ledger, listeners)
        finally:
            await producer.stop()
        await averify_against_kernel(producer.ledger, listeners)
        return producer

    producer = asyncio.run(scenario())
    ledger, choices = producer.ledger, producer.choices
    sequence = ledger.sequence()
    print(f"\nproducer sequence: {_short(sequence)}")
    print(f"producer resolved: {_short(producer.observer.sequence(resolve_bootstrap=True))}")
    print(f"producer choices:  {choices}")

    _check_bootstrap_first(cluster, producer.observer)
    assert [purpose for purpose, _ in choices] == ["bootstrap", "metadata"]
    metadata_node = choices[1][1]
    data = [e for e in _opens(ledger) if e.role is Role.DATA]
    assert data[0].broker == metadata_node  # the node the Metadata request went to
    assert {e.broker for e in data} == set(LEADERS)
    assert len(data) == len(set(LEADERS))  # one per broker, never re-dialled
    for entry in data:
        assert entry.broker is not None
        assert (entry.host, entry.port) == cluster.endpoints()[entry.broker]
    assert ledger.open_now() == []
    closes = [e for e in ledger.entries if e.kind is ConnEvent.CLOSED and e.role is Role.DATA]
    assert {e.reason for e in closes} == {"SHUTDOWN"}
    assert sequence == expected_stock_sequence(choices, LEADERS)


def test_group_consumer_has_one_coordination_connection_to_the_coordinator(
    cluster: MockCluster,
) -> None:
    listeners = cluster.listeners()

    async def scenario() -> tuple[ObservedAIOKafkaConsumer, list[TopicPartition], list[Any]]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
        await producer.start()
        try:
            await _produce(producer)
        finally:
            await producer.stop()

        consumer = observed_consumer(
            TOPIC,
            bootstrap_servers=cluster.bootstrap_servers,
            group_id=GROUP,
            auto_offset_reset="earliest",
        )
        assert type(consumer._client) is ObservedAIOKafkaClient
        received: list[Any] = []
        await consumer.start()
        try:
            # The fetcher and coordinator are built in start(), from the same client object.
            assert consumer._fetcher._client is consumer._client
            assert consumer._coordinator._client is consumer._client
            deadline = time.monotonic() + 30
            while len(received) < RECORDS and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    received.extend((r.partition, r.offset, r.value) for r in records)
            # The order the fetcher walks partitions in (a frozenset: string-hash order).
            tps = list(consumer._subscription.subscription.assignment.tps)
            await averify_against_kernel(consumer.ledger, listeners)
        finally:
            await consumer.stop()
        await averify_against_kernel(consumer.ledger, listeners)
        return consumer, tps, received

    consumer, tps, received = asyncio.run(scenario())
    ledger, choices = consumer.ledger, consumer.choices
    sequence = ledger.sequence()
    leaders_in_fetch_order = [LEADERS[tp.partition] for tp in tps]
    print(f"\nconsumer sequence: {_short(sequence)}")
    print(f"consumer resolved: {_short(consumer.observer.sequence(resolve_bootstrap=True))}")
    print(f"consumer choices:  {choices}")
    print(f"consumer partitions in fetch order: {[tp.partition for tp in tps]}")

    values = [value for _, _, value in received]
    assert sorted(values) == sorted(f"{n}".encode() for n in range(RECORDS))
    assert [k for k, n in collections.Counter(values).items() if n > 1] == []

    _check_bootstrap_first(cluster, consumer.observer)
    coordination = [e for e in _opens(ledger) if e.role is Role.COORDINATION]
    assert [(e.broker, e.host, e.port) for e in coordination] == [
        (COORDINATOR, *cluster.endpoints()[COORDINATOR])
    ]
    # Metadata (awaited by start()) always precedes the group's FindCoordinator.
    assert [purpose for purpose, _ in choices] == ["bootstrap", "metadata", "find_coordinator"]
    data_brokers = [e.broker for e in _opens(ledger) if e.role is Role.DATA]
    assert collections.Counter(data_brokers) == collections.Counter(set(LEADERS))
    assert ledger.open_now() == []
    assert sequence == expected_stock_sequence(
        choices, leaders_in_fetch_order, coordinator=COORDINATOR
    )


def test_idempotent_producer_records_init_producer_id_choice(cluster: MockCluster) -> None:
    async def scenario() -> ObservedAIOKafkaProducer:
        producer = observed_producer(
            bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True
        )
        await producer.start()
        try:
            await _produce(producer)
        finally:
            await producer.stop()
        await averify_against_kernel(producer.ledger, cluster.listeners())
        return producer

    producer = asyncio.run(scenario())
    print(f"\nidempotent producer: {_short(producer.ledger.sequence())} {producer.choices}")
    # InitProducerId goes to a random node during start(), before any Metadata for the topic.
    assert [p for p, _ in producer.choices] == ["bootstrap", "init_producer_id", "metadata"]
    assert producer.ledger.sequence() == expected_stock_sequence(producer.choices, LEADERS)


def test_idle_close_is_recorded_and_other_clients_are_not(cluster: MockCluster) -> None:
    listeners = cluster.listeners()

    async def scenario() -> ConnectionLedger:
        observed = ObservedAIOKafkaClient(
            bootstrap_servers=cluster.bootstrap_servers, connections_max_idle_ms=100
        )
        stock = AIOKafkaClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            # Same loop, concurrently: the stock client's dials must not leak into the ledger.
            await asyncio.gather(observed.bootstrap(), stock.bootstrap())
            assert await observed.ready(1)
            assert await stock.ready(2)
            assert [e.broker for e in observed.ledger.open_now()] == [1]
            await asyncio.sleep(0.4)  # idle close after 100 ms
            # Only broker 1's listener: the stock client legitimately holds one to broker 2.
            await averify_against_kernel(observed.ledger, [listeners[1], listeners[3]])
            return observed.ledger
        finally:
            await observed.close()
            await stock.close()

    ledger = asyncio.run(scenario())
    print(f"\nidle: {ledger.timeline()}")
    assert [
        (e.kind, e.broker, e.role) for e in ledger.entries if e.kind is not ConnEvent.ESTABLISHED
    ] == [
        (ConnEvent.DIAL, None, Role.BOOTSTRAP),
        (ConnEvent.CLOSED, None, Role.BOOTSTRAP),
        (ConnEvent.DIAL, 1, Role.DATA),
        (ConnEvent.CLOSED, 1, Role.DATA),
    ]
    assert ledger.entries[-1].reason == "IDLE_DROP"
    assert ledger.entries[1].reason == ""  # established carries no reason
    assert ledger.entries[2].reason == "UNSPECIFIED"  # bootstrap's close() passes none


def test_failed_dial_is_recorded_as_failed(cluster: MockCluster) -> None:
    async def scenario() -> ConnectionLedger:
        client = ObservedAIOKafkaClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            await client.bootstrap()
            cluster.broker_down(2)
            assert not await client.ready(2)  # refused: logged and swallowed by aiokafka
            return client.ledger
        finally:
            cluster.broker_up(2)
            await client.close()

    ledger = asyncio.run(scenario())
    failed = [e for e in ledger.entries if e.kind is ConnEvent.FAILED]
    print(f"\nfailed: {failed}")
    assert [(e.broker, e.role) for e in failed] == [(2, Role.DATA)]
    assert "Error" in failed[0].reason
    assert ledger.open_now() == []


def test_observe_client_refuses_what_it_could_not_see() -> None:
    async def scenario() -> None:
        fresh = AIOKafkaClient(bootstrap_servers="127.0.0.1:1")
        observed = observe_client(fresh, t0=0.0)
        assert observed is fresh and observed.t0 == 0.0
        with pytest.raises(ObservationError, match="already observed"):
            observe_client(fresh)

        class Custom(AIOKafkaClient):  # type: ignore[misc]
            pass

        with pytest.raises(ObservationError, match="stock AIOKafkaClient"):
            observe_client(Custom(bootstrap_servers="127.0.0.1:1"))
        used = AIOKafkaClient(bootstrap_servers="127.0.0.1:1")
        used._conns[(1, 0)] = object()
        with pytest.raises(ObservationError, match="before start"):
            observe_client(used)

    asyncio.run(scenario())


def test_create_conn_wrapper_is_installed_once() -> None:
    observe._install()
    observe._install()
    wrapper = aiokafka.client.create_conn
    assert getattr(wrapper, "__connmgr_observer__", False)
    assert wrapper.__wrapped__ is aiokafka.conn.create_conn


def test_expected_stock_sequence_model() -> None:
    d, c, b = Role.DATA, Role.COORDINATION, Role.BOOTSTRAP
    assert expected_stock_sequence([("bootstrap", 0), ("metadata", 2)], [2, 3, 1]) == [
        (None, b),
        (2, d),
        (3, d),
        (1, d),
    ]
    assert expected_stock_sequence(
        [("bootstrap", 2), ("metadata", 1), ("find_coordinator", 2)], [1, 3, 2], coordinator=3
    ) == [(None, b), (1, d), (2, d), (3, c), (3, d)]
    assert expected_stock_sequence(
        [("bootstrap", 0), ("bootstrap_retry", 1), ("metadata", -1), ("metadata", 1)], [1]
    ) == [(None, b), (None, b), (1, d)]
