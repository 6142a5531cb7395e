"""A rolling restart of the real KRaft cluster under stock aiokafka and the drop-in clients.

Every broker in turn: a controlled shutdown (SIGTERM; its leadership moves to another
replica), a second with its JVM gone, the same node started again, and a preferred-leader
election giving its partition back -- while a stock producer and a drop-in producer each
send a record every 150 ms and a stock and a drop-in consumer (assigned every partition, no
group) read them. The cluster is this module's own, so the session cluster the other tests
share is never restarted. ``pytest -s`` prints what each client dialled and closed.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import psutil
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.kernel import averify_against_kernel
from connmgr.aio.observe import observed_consumer, observed_producer
from connmgr.core.identity import Role
from connmgr.ledger import GONE, ConnectionLedger, ConnEvent
from connmgr_evidence.realkafka import KafkaCluster

pytestmark = pytest.mark.real_kafka

TOPIC = "churn"
LEADERS = [1, 2, 3]  # partition i is led by LEADERS[i]: every restart moves one partition
PERIOD_S = 0.15
DOWN_S = 1.0
WAIT_S = 120.0
"""Bound on each wait for the cluster or a client to get somewhere (a failure, not a
measurement)."""


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    """A cluster of this module's own: restarting the session cluster's brokers could
    disturb the tests sharing it."""
    cluster = KafkaCluster(brokers=3)
    cluster.start(timeout_s=180)
    pids: set[int] = set()
    try:
        yield cluster
    finally:
        pids.update(cluster.pids().values())
        cluster.stop()
    # Every JVM it ran -- the restarted nodes' too -- is gone.
    assert [p for p in pids if psutil.pid_exists(p) and _alive(p)] == []


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# -- the clients --------------------------------------------------------------------------------


@dataclasses.dataclass
class Clients:
    """The four clients, by name, and what the producers sent."""

    producers: dict[str, AIOKafkaProducer]
    consumers: dict[str, AIOKafkaConsumer]

    @property
    def all(self) -> dict[str, Any]:
        return {**self.producers, **self.consumers}

    def ledgers(self) -> dict[str, ConnectionLedger]:
        return {name: client.ledger for name, client in self.all.items()}


def _clients(bootstrap: str) -> Clients:
    producer: dict[str, Any] = {"acks": "all", "enable_idempotence": True}
    consumer: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        # aiokafka 0.14 fetches with Fetch v11, whose client metadata lets a follower serve a
        # consumer (KIP-392): after the election the consumer goes on reading the restarted
        # broker's partition from the stand-in, now a follower, with no error to make it
        # look again, until its next metadata refresh (5 min by default). A 2 s refresh
        # brings both consumers back to the restarted leader within the test.
        "metadata_max_age_ms": 2000,
    }
    return Clients(
        producers={
            "stock producer": observed_producer(bootstrap_servers=bootstrap, **producer),
            "drop-in producer": ProposedProducer(bootstrap_servers=bootstrap, **producer),
        },
        consumers={
            "stock consumer": observed_consumer(bootstrap_servers=bootstrap, **consumer),
            "drop-in consumer": ProposedConsumer(bootstrap_servers=bootstrap, **consumer),
        },
    )


async def _produce(producer: AIOKafkaProducer, tag: str, stop: asyncio.Event) -> int:
    """Send ``tag0, tag1, ...`` (record i to partition i mod 3) every ``PERIOD_S`` until
    ``stop``; the count, once every record is acknowledged (a failed one raises)."""
    futures = []
    while not stop.is_set():
        i = len(futures)
        futures.append(await producer.send(TOPIC, f"{tag}{i}".encode(), partition=i % 3))
        await asyncio.sleep(PERIOD_S)
    acked = await asyncio.gather(*futures)
    assert all(m.offset >= 0 for m in acked)
    return len(futures)


async def _consume(consumer: AIOKafkaConsumer, got: dict[int, list[bytes]]) -> None:
    """Append every record read to ``got[partition]``, until cancelled."""
    while True:
        batch = await consumer.getmany(timeout_ms=200)
        for tp, records in batch.items():
            got[tp.partition] += [r.value for r in records]


def _expected(sent: Mapping[str, int]) -> dict[int, list[bytes]]:
    """Partition -> the values it must hold, per producer in send order."""
    want: dict[int, list[bytes]] = collections.defaultdict(list)
    for tag, n in sent.items():
        for i in range(n):
            want[i % 3].append(f"{tag}{i}".encode())
    return want


def _per_producer(got: list[bytes], tag: str) -> list[bytes]:
    return [v for v in got if v.startswith(tag.encode())]


# -- the ledgers --------------------------------------------------------------------------------


def _holds_new(ledger: ConnectionLedger, broker: int, since: int) -> bool:
    """Whether ``ledger`` holds a data socket to ``broker`` dialled at entry ``since`` or
    later, or a bootstrap socket adopted as ``broker``'s since then (a 4.4 broker confirmed
    it: the drop-in's rule (c))."""
    fresh = {
        e.conn_id
        for e in ledger.entries[since:]
        if e.kind in (ConnEvent.DIAL, ConnEvent.ADOPTED)
        and e.broker == broker
        and e.role is Role.DATA
    }
    return any(e.conn_id in fresh for e in ledger.open_now())


def _lacking(
    ledgers: Mapping[str, ConnectionLedger], broker: int, marks: Mapping[str, int]
) -> list[str]:
    """The clients holding no data socket to ``broker`` dialled since their mark."""
    return [name for name, ledger in ledgers.items() if not _holds_new(ledger, broker, marks[name])]


def _closed_then_dialled(ledger: ConnectionLedger, broker: int, since: int) -> bool:
    """Whether, from entry ``since`` on, a socket to ``broker`` dialled *before* ``since``
    ended and a new one was dialled to it after that."""
    window = ledger.entries[since:]
    # A dial inside the window that failed (the broker still down) is not the old socket.
    new = {e.conn_id for e in window if e.kind is ConnEvent.DIAL and e.broker == broker}
    ends = [
        i
        for i, e in enumerate(window)
        if e.kind in GONE and e.broker == broker and e.conn_id not in new
    ]
    return bool(ends) and any(
        e.kind is ConnEvent.DIAL and e.broker == broker for e in window[ends[0] :]
    )


def _merged(ledgers: list[ConnectionLedger]) -> ConnectionLedger:
    """One ledger replaying several (connection ids kept apart), for one kernel check of
    all the clients this process runs."""
    merged = ConnectionLedger()
    for k, ledger in enumerate(ledgers):
        for entry in ledger.entries:
            merged.record(dataclasses.replace(entry, conn_id=entry.conn_id * len(ledgers) + k))
    return merged


async def _until(what: str, missing: Callable[[], object]) -> None:
    """Wait (polling) until ``missing()`` is empty or false; fail naming ``what`` and what
    is still missing after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while lack := missing():
        assert time.monotonic() < deadline, f"still waiting for {what} after {WAIT_S}s: {lack}"
        await asyncio.sleep(0.1)


async def _stand_in(cluster: KafkaCluster, broker: int) -> int:
    """The leader of ``broker``'s partition while it is down, read for ``DOWN_S`` at most:
    the controlled shutdown moved it before the JVM exited, so it shows at once (the
    controller's own fencing of a dead broker would take its 9 s session timeout). Returns
    after ``DOWN_S`` in all, the broker's time with its JVM gone before its start."""
    began = time.monotonic()
    leader = broker
    while time.monotonic() - began < DOWN_S:
        leader = (await asyncio.to_thread(cluster.leaders, TOPIC))[broker - 1]
        if leader not in (broker, -1):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(max(0.0, DOWN_S - (time.monotonic() - began)))
    return leader


# -- the test -----------------------------------------------------------------------------------


def test_rolling_restart_loses_nothing_and_the_drop_in_holds_no_more(
    cluster: KafkaCluster,
) -> None:
    cluster.create_topic_with_leaders(TOPIC, LEADERS)
    listeners = cluster.listeners()

    async def main() -> dict[str, Any]:
        clients = _clients(cluster.bootstrap_servers)
        tags = {"stock producer": "s", "drop-in producer": "d"}
        for consumer in clients.consumers.values():
            consumer.assign([TopicPartition(TOPIC, p) for p in range(len(LEADERS))])
        for client in clients.all.values():
            await client.start()
        stop = asyncio.Event()
        got = {name: collections.defaultdict(list) for name in clients.consumers}
        producing = {
            name: asyncio.create_task(_produce(p, tags[name], stop))
            for name, p in clients.producers.items()
        }
        consuming = [
            asyncio.create_task(_consume(c, got[name])) for name, c in clients.consumers.items()
        ]
        events: list[dict[str, Any]] = []
        stopped: set[str] = set()
        try:
            ledgers = clients.ledgers()
            await _until(
                "every client to hold a socket to every broker",
                lambda: [b for b in LEADERS if _lacking(ledgers, b, dict.fromkeys(ledgers, 0))],
            )
            for broker in cluster.broker_ids:
                marks = {name: len(lg.entries) for name, lg in ledgers.items()}
                pid = cluster.pids()[broker]
                stop_s = await asyncio.to_thread(cluster.stop_broker, broker)
                stand_in = await _stand_in(cluster, broker)
                start_s = await asyncio.to_thread(cluster.start_broker, broker)
                elections = await asyncio.to_thread(cluster.restore_preferred_leaders)
                await _until(
                    f"every client to dial broker {broker} again",
                    functools.partial(_lacking, ledgers, broker, marks),
                )
                leaders = await asyncio.to_thread(cluster.leaders, TOPIC)
                events.append(
                    {
                        "broker": broker,
                        "old_pid": pid,
                        "new_pid": cluster.pids()[broker],
                        "stand_in": stand_in,
                        "stop_s": stop_s,
                        "start_s": start_s,
                        "elections": elections,
                        "leaders": leaders,
                        "churned": {
                            name: _closed_then_dialled(lg, broker, marks[name])
                            for name, lg in ledgers.items()
                        },
                    }
                )
            stop.set()
            sent = {tags[name]: await task for name, task in producing.items()}
            want = _expected(sent)
            total = sum(sent.values())
            await _until(
                "every consumer to read every record",
                lambda: [n for n, g in got.items() if sum(map(len, g.values())) < total],
            )
            # Half a second more of polling, so a duplicate delivered late would be seen.
            await asyncio.sleep(0.5)
            for task in consuming:
                task.cancel()
            # The quiet point: every broker back and leading its partition, nothing sent.
            held = {name: len(lg.open_now()) for name, lg in ledgers.items()}
            # The kernel agrees with the four ledgers together, then with what is left as
            # each client stops: so each client's ledger is its own sockets' count.
            order = ["stock consumer", "stock producer", "drop-in consumer", "drop-in producer"]
            for k in range(len(order) + 1):
                alive = [ledgers[name] for name in order[k:]]
                await averify_against_kernel(_merged(alive), listeners)
                if k < len(order):
                    await clients.all[order[k]].stop()
                    stopped.add(order[k])
        finally:
            stop.set()
            for task in consuming:
                task.cancel()
            await asyncio.gather(*producing.values(), *consuming, return_exceptions=True)
            for name, client in clients.all.items():
                if name not in stopped:
                    await client.stop()
        return {
            "events": events,
            "sent": sent,
            "want": want,
            "got": got,
            "held": held,
            "ledgers": ledgers,
        }

    r = asyncio.run(main())
    ledgers: dict[str, ConnectionLedger] = r["ledgers"]
    for e in r["events"]:
        print(
            f"\nbroker {e['broker']}: pid {e['old_pid']} -> {e['new_pid']}, led by "
            f"{e['stand_in']} while down, controlled shutdown {e['stop_s']:.1f}s, back in "
            f"{e['start_s']:.1f}s, {e['elections']} election request(s), leaders {e['leaders']}"
        )
    for name, ledger in ledgers.items():
        ends = collections.Counter(e.kind.value for e in ledger.entries if e.kind in GONE)
        print(
            f"{name}: {ledger.opened_count} dials, ends {dict(ends)}, peak {ledger.peak}, "
            f"held at the quiet point {r['held'][name]}"
        )
    print(f"records sent: {r['sent']}")

    # The restarts were real: a new JVM each, leadership away while down and back after.
    assert [e["broker"] for e in r["events"]] == list(cluster.broker_ids)
    for e in r["events"]:
        assert e["new_pid"] != e["old_pid"] and not _alive(e["old_pid"])
        assert e["stand_in"] not in (e["broker"], -1)
        assert e["leaders"] == dict(enumerate(LEADERS))
        # Each client saw its socket to the broker end and dialled it again.
        assert e["churned"] == dict.fromkeys(ledgers, True)
    # Nothing lost, nothing twice, each producer's records in send order per partition.
    assert min(r["sent"].values()) > 0
    for name, got in r["got"].items():
        for partition in range(len(LEADERS)):
            for tag in r["sent"]:
                assert _per_producer(got[partition], tag) == _per_producer(
                    r["want"][partition], tag
                ), (name, partition, tag)
    # The drop-in held no more sockets than stock aiokafka at the quiet point.
    held = r["held"]
    assert held["drop-in producer"] <= held["stock producer"]
    assert held["drop-in consumer"] <= held["stock consumer"]
    assert all(lg.open_now() == [] for lg in ledgers.values())
