"""The drop-in ProposedProducer / ProposedConsumer on the embedded cluster: records, sockets,
failures and misuse."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import aiokafka.errors as kafka_errors  # type: ignore[import-untyped]
import pytest
from aiokafka.structs import TopicPartition  # type: ignore[import-untyped]

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.kernel import averify_against_kernel, kernel_connections
from connmgr.core.identity import Role
from connmgr.embedded import MockCluster
from connmgr.errors import ClientMisuse, ConfigError

pytestmark = pytest.mark.embedded
LEADERS = [3, 1, 2]


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, group_initial_rebalance_delay_ms=0) as mc:
        mc.create_topic_with_leaders("t", LEADERS)
        mc.set_coordinator("group", "g", 3)
        yield mc


def first_server(mc: MockCluster) -> str:
    return mc.bootstrap_servers.split(",")[0]


async def produce(mc: MockCluster, n: int, **options: object) -> ProposedProducer:
    producer = ProposedProducer(bootstrap_servers=first_server(mc), acks="all", **options)
    await producer.start()
    try:
        futures = [await producer.send("t", f"m{i}".encode(), partition=i % 3) for i in range(n)]
        metadata = await asyncio.gather(*futures)
        assert len(metadata) == n and all(m.offset >= 0 for m in metadata)
    finally:
        await producer.stop()
    return producer


async def consume_all(consumer: ProposedConsumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    async with asyncio.timeout(30):
        while len(got) < n:
            batch = await consumer.getmany(timeout_ms=500)
            got += [m.value for messages in batch.values() for m in messages]
    return got


def test_produce_acks_all_and_consume_with_a_group_exactly_once(cluster: MockCluster) -> None:
    async def main() -> None:
        producer = await produce(cluster, 90)
        assert producer.ledger.open_now() == []
        consumer = ProposedConsumer(
            "t",
            bootstrap_servers=first_server(cluster),
            group_id="g",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            got = await consume_all(consumer, 90)
            await consumer.commit()
            committed = await consumer.committed(TopicPartition("t", 0))
            held = {(e.broker, e.role) for e in consumer.ledger.open_now()}
        finally:
            await consumer.stop()
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(90))
        assert committed == 30
        # The bootstrap socket (not adopted: no broker confirms its id today) closed before
        # the first broker dial; the coordinator 3 has its own socket.
        assert held == {(1, Role.DATA), (2, Role.DATA), (3, Role.DATA), (3, Role.COORDINATION)}
        assert consumer.ledger.opened_count == 5 and consumer.ledger.peak == 4

    asyncio.run(main())


def test_idempotent_producer_and_manual_assignment(cluster: MockCluster) -> None:
    async def main() -> None:
        await produce(cluster, 60, enable_idempotence=True)
        consumer = ProposedConsumer(
            bootstrap_servers=first_server(cluster), auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition("t", 1)])
            got = await consume_all(consumer, 20)
            roles = {e.role for e in consumer.ledger.open_now()}
        finally:
            await consumer.stop()
        assert sorted(got) == sorted(f"m{i}".encode() for i in range(1, 60, 3))
        assert Role.COORDINATION not in roles

    asyncio.run(main())


def test_broker_down_and_back_mid_run_loses_nothing(cluster: MockCluster) -> None:
    async def main() -> None:
        producer = ProposedProducer(
            bootstrap_servers=first_server(cluster),
            acks="all",
            request_timeout_ms=20_000,
            retry_backoff_ms=50,
        )
        await producer.start()
        futures = []
        try:
            for i in range(120):
                if i == 40:
                    cluster.broker_down(2)
                if i == 80:
                    await asyncio.sleep(1.0)
                    cluster.broker_up(2)
                futures.append(await producer.send("t", f"d{i}".encode(), partition=i % 3))
                await asyncio.sleep(0.01)
            results = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        assert len(results) == 120
        consumer = ProposedConsumer(
            "t",
            bootstrap_servers=first_server(cluster),
            group_id="g2",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got = await consume_all(consumer, 120)
        finally:
            await consumer.stop()
        assert sorted(got) == sorted(f"d{i}".encode() for i in range(120))

    asyncio.run(main())


def test_no_socket_left_after_stop_and_kernel_agrees(cluster: MockCluster) -> None:
    async def main() -> None:
        consumer = ProposedConsumer("t", bootstrap_servers=first_server(cluster), group_id="g")
        await consumer.start()
        await consumer.getmany(timeout_ms=300)
        await averify_against_kernel(consumer.ledger, cluster.listeners())
        assert kernel_connections(cluster.listeners().values()).total() >= 3
        await consumer.stop()
        await averify_against_kernel(consumer.ledger, cluster.listeners())
        assert consumer.ledger.open_now() == []

    asyncio.run(main())


def test_two_hundred_start_stop_cycles_leave_the_fd_count(cluster: MockCluster) -> None:
    async def cycle() -> None:
        producer = ProposedProducer(bootstrap_servers=first_server(cluster), warm_up=True)
        await producer.start()
        await producer.stop()

    async def main() -> tuple[int, int, int, int]:
        await cycle()  # warm caches before the baseline
        await asyncio.sleep(0.1)
        fds, tasks = len(os.listdir("/proc/self/fd")), len(asyncio.all_tasks())
        for _ in range(200):
            await cycle()
        await asyncio.sleep(0.2)
        return fds, len(os.listdir("/proc/self/fd")), tasks, len(asyncio.all_tasks())

    before, after, tasks_before, tasks_after = asyncio.run(main())
    print(f"fds {before} -> {after}, tasks {tasks_before} -> {tasks_after} over 200 cycles")
    assert after <= before, f"fd count grew from {before} to {after}"
    assert tasks_after <= tasks_before, f"tasks grew from {tasks_before} to {tasks_after}"
    assert kernel_connections(cluster.listeners().values()).total() == 0


def test_misuse_is_reported(cluster: MockCluster) -> None:
    async def main() -> None:
        producer = ProposedProducer(bootstrap_servers=first_server(cluster))
        with pytest.raises(ClientMisuse, match="before start"):
            await producer.send("t", b"x")
        await producer.start()
        with pytest.raises(ClientMisuse, match="called twice"):
            await producer.start()
        await producer.stop()
        with pytest.raises(ClientMisuse, match="after stop"):
            await producer.send("t", b"x")

    asyncio.run(main())


def test_unreachable_bootstrap_fails_within_the_timeout(cluster: MockCluster) -> None:
    host, port = cluster.listeners()[1]
    cluster.broker_down(1)  # refuses connections on its port

    async def main() -> None:
        warm = ProposedProducer(
            bootstrap_servers=f"{host}:{port}", warm_up=True, request_timeout_ms=1500
        )
        with pytest.raises(kafka_errors.KafkaConnectionError, match="Unable to bootstrap"):
            await warm.start()
        lazy = ProposedProducer(bootstrap_servers=f"{host}:{port}", request_timeout_ms=1500)
        await lazy.start()
        try:
            with pytest.raises(kafka_errors.KafkaConnectionError, match="Unable to bootstrap"):
                await lazy.send_and_wait("t", b"x")
        finally:
            await lazy.stop()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("connection_linger_ms", "5", "expected int"),
        ("connection_linger_ms", True, "expected int"),
        ("warm_up", 1, "expected bool"),
        ("max_connections", 2.5, "expected int or None"),
        ("connection_policy", "nope", "known policies"),
    ],
)
def test_wrong_option_types_are_named(option: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProposedProducer(bootstrap_servers="127.0.0.1:1", **{option: value})
