"""Quick start: aiokafka's producer and consumer with the proposed connection policy.

Starts a 3-broker embedded cluster (librdkafka's mock cluster, no JVM), sends a few records
with :class:`~connmgr.aio.ProposedProducer`, reads them back in a consumer group with
:class:`~connmgr.aio.ProposedConsumer`, and prints how many sockets each client opened, by
role, from its connection ledger. Run it from the repository root::

    python examples/quickstart.py

The two classes take aiokafka's arguments (``help(ProposedProducer)``); swapping them for
``AIOKafkaProducer`` and ``AIOKafkaConsumer`` is the whole change to an application. It takes
a few seconds; ``tests/test_examples.py`` runs it.
"""

from __future__ import annotations

import asyncio

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.embedded import MockCluster
from connmgr.ledger import ConnectionLedger

TOPIC = "quickstart"
GROUP = "quickstart"
RECORDS = 6


async def send_and_read(bootstrap_servers: str) -> dict[str, ConnectionLedger]:
    """Send :data:`RECORDS` records to :data:`TOPIC`, one per partition in turn, and read them
    all back in group :data:`GROUP`; the producer's and the consumer's connection ledgers,
    once both are stopped."""
    producer = ProposedProducer(bootstrap_servers=bootstrap_servers, acks="all")
    await producer.start()  # opens no socket: the first send dials
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(TOPIC, f"record {i}".encode(), partition=i % 3)
    finally:
        await producer.stop()

    consumer = ProposedConsumer(
        TOPIC, bootstrap_servers=bootstrap_servers, group_id=GROUP, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        read: list[bytes] = []
        async with asyncio.timeout(20):
            while len(read) < RECORDS:
                batches = await consumer.getmany(timeout_ms=500)
                read += [r.value for records in batches.values() for r in records]
    finally:
        await consumer.stop()
    print(f"sent {RECORDS} records, read {len(read)} back")
    return {"producer": producer.ledger, "consumer": consumer.ledger}


def socket_counts(name: str, ledger: ConnectionLedger) -> str:
    """One line: the sockets ``name``'s ledger records, in total and by role."""
    counts = ledger.counts()
    roles = ", ".join(f"{role} {c['opened']}" for role, c in counts.by_role.items())
    return (
        f"{name}: {counts.opened} sockets opened ({roles}), {counts.failed} failed, "
        f"at most {counts.peak} open at once, {counts.steady} open after stop()"
    )


def main() -> dict[str, ConnectionLedger]:
    """Run the quick start and print its socket counts; the ledgers they were read from."""
    with MockCluster(3, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic_with_leaders(TOPIC, leaders=[1, 2, 3])
        cluster.set_coordinator("group", GROUP, 2)
        ledgers = asyncio.run(send_and_read(cluster.bootstrap_servers))
    for name, ledger in ledgers.items():
        print(socket_counts(name, ledger))
    return ledgers


if __name__ == "__main__":
    main()
