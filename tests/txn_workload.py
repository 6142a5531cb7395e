"""Transactions with aiokafka's clients, the same on the embedded and the real cluster (issue 16).

``tests/embedded/test_transactions.py`` and ``tests/real_kafka/test_transactions.py`` run these
scenarios for stock aiokafka and for the drop-in clients (:data:`PAIRS`) and make the same
assertions on what they return, so the workload lives here once. Stock aiokafka runs as
:class:`~connmgr.aio.observe.ObservedAIOKafkaProducer` / ``...Consumer``: aiokafka's own classes
whose client only records its connections (see ``connmgr.aio.observe``), so both pairs keep a
:class:`~connmgr.ledger.ConnectionLedger` counted the same way.

Importable from both tiers because ``tests/`` is on ``sys.path`` (pytest's default ``prepend``
import mode puts the root ``conftest.py``'s directory there; ``tests/test_fixtures.py`` relies on
the same).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.client import CoordinationType

from connmgr.aio import ProposedConsumer, ProposedProducer
from connmgr.aio.kernel import kernel_connections
from connmgr.aio.observe import ObservedAIOKafkaConsumer, ObservedAIOKafkaProducer
from connmgr.core.identity import Role
from connmgr.ledger import ConnectionLedger

Address = tuple[str, int]

START_TIMEOUT_S = 60.0
"""A hung ``start()`` (the bug issue 16 was about) fails the test after this instead of
blocking the run; generous because the real tier shares 2 slow cores with other JVMs."""


@dataclass(frozen=True)
class ClientPair:
    """A producer class and a consumer class that are used together, under one name."""

    name: str
    producer: type[AIOKafkaProducer]
    consumer: type[AIOKafkaConsumer]


STOCK = ClientPair("stock-aiokafka", ObservedAIOKafkaProducer, ObservedAIOKafkaConsumer)
PROPOSED = ClientPair("proposed", ProposedProducer, ProposedConsumer)
PAIRS = (STOCK, PROPOSED)


@dataclass(frozen=True)
class Sockets:
    """One client's connection counts from its ledger: ``peak`` over its run, ``steady``
    held once its work is done (before ``stop()``; see :func:`transform_loop` for when),
    ``opened`` dials in all, and per role (bootstrap, data, coordination)."""

    opened: int
    peak: int
    steady: int
    by_role: Mapping[str, Mapping[str, int]]

    @classmethod
    def of(cls, ledger: ConnectionLedger) -> Sockets:
        summary = ledger.summary()
        return cls(
            opened=summary["opened"],
            peak=summary["peak"],
            steady=summary["steady"],
            by_role={
                role: {key: counts[key] for key in ("opened", "peak", "open_at_end")}
                for role, counts in summary["by_role"].items()
                if counts["opened"]
            },
        )

    def line(self) -> str:
        roles = ", ".join(
            f"{role} {c['opened']}/{c['peak']}/{c['open_at_end']}"
            for role, c in self.by_role.items()
        )
        return (
            f"opened {self.opened}, peak {self.peak}, steady {self.steady} "
            f"(role opened/peak/at end: {roles})"
        )


def ledger_of(client: AIOKafkaProducer | AIOKafkaConsumer) -> ConnectionLedger:
    """The connection ledger both pairs' clients keep (``ledger`` on either class)."""
    ledger: ConnectionLedger = client.ledger
    return ledger


def describe(client: AIOKafkaProducer | AIOKafkaConsumer) -> str:
    """What a failure report needs: the policy inside a drop-in client (nothing for stock)
    and the ledger's summary and dials."""
    ledger = ledger_of(client)
    inner = getattr(client, "client", None) or getattr(client, "_client", None)
    policy = getattr(inner, "policy", None)
    head = f"policy {policy!r}\n" if policy is not None else ""
    return f"{head}ledger {ledger.summary()}\ndials {ledger.dials()}"


async def start_within(client: AIOKafkaProducer | AIOKafkaConsumer) -> None:
    """``start()``, failing (not hanging) after :data:`START_TIMEOUT_S`, saying what it held."""
    try:
        await asyncio.wait_for(client.start(), START_TIMEOUT_S)
    except TimeoutError:
        raise AssertionError(
            f"{type(client).__name__}.start() did not return within {START_TIMEOUT_S:.0f}s\n"
            + describe(client)
        ) from None


@contextlib.contextmanager
def noting(*clients: AIOKafkaProducer | AIOKafkaConsumer) -> Iterator[None]:
    """If the block fails, the exception carries what each client held (and the policy
    inside a drop-in client), so that a failure report says what the clients were doing."""
    try:
        yield
    except BaseException as exc:
        for client in clients:
            exc.add_note(f"{type(client).__name__}: {describe(client)}")
        raise


Scenario = Callable[[ClientPair], Coroutine[Any, Any, Any]]


@dataclass
class _Outcome:
    result: Any = None
    error: BaseException | None = None


class Runs:
    """Runs each (scenario, pair) once, when a test first asks for it; a failed run fails
    every test that reads it (with the run's own exception). The per-pair tests and the
    socket comparison read the same runs, so the comparison costs no second run."""

    def __init__(self, scenarios: Mapping[str, Scenario]) -> None:
        self._scenarios = scenarios
        self._done: dict[tuple[str, str], _Outcome] = {}

    def get(self, scenario: str, pair: ClientPair) -> Any:
        key = (scenario, pair.name)
        if key not in self._done:
            outcome = _Outcome()
            try:
                outcome.result = asyncio.run(self._scenarios[scenario](pair))
            except Exception as exc:
                outcome.error = exc
            self._done[key] = outcome
        outcome = self._done[key]
        if outcome.error is not None:
            raise outcome.error
        return outcome.result


# -- scenario a: commit one transaction, abort another ------------------------------------------


@dataclass
class CommitAbortRun:
    """What :func:`commit_and_abort` saw."""

    committed: list[bytes]
    aborted: list[bytes]
    offsets: list[int]
    """Offsets the brokers gave the committed records (the aborted ones are never acked
    individually: ``abort_transaction`` discards their futures' outcome)."""
    start_s: float
    producer: Sockets
    kernel_sockets: int
    """The process's sockets to the brokers when ``producer`` was counted (see :func:`count`)."""


async def commit_and_abort(
    pair: ClientPair,
    bootstrap_servers: str,
    transactional_id: str,
    topic: str,
    partitions: int,
    *,
    listeners: Iterable[Address],
    records: int = 30,
) -> CommitAbortRun:
    """A transactional producer with default options starts, commits ``records`` records in
    one transaction and aborts ``records`` more in a second. ``listeners``: the brokers'
    (host, port), for the kernel's count."""
    producer = pair.producer(bootstrap_servers=bootstrap_servers, transactional_id=transactional_id)
    began = time.monotonic()
    await start_within(producer)
    start_s = time.monotonic() - began
    try:
        committed = [f"commit-{i}".encode() for i in range(records)]
        aborted = [f"abort-{i}".encode() for i in range(records)]
        with noting(producer):
            async with producer.transaction():
                futures = [
                    await producer.send(topic, value, partition=i % partitions)
                    for i, value in enumerate(committed)
                ]
            acked = await asyncio.gather(*futures)
            await producer.begin_transaction()
            for i, value in enumerate(aborted):
                await producer.send(topic, value, partition=i % partitions)
            await producer.abort_transaction()
        (sockets,), kernel = await count([producer], listeners)
    finally:
        await producer.stop()
    return CommitAbortRun(committed, aborted, [m.offset for m in acked], start_s, sockets, kernel)


async def count(
    clients: Sequence[AIOKafkaProducer | AIOKafkaConsumer], listeners: Iterable[Address]
) -> tuple[list[Sockets], int]:
    """Each client's :class:`Sockets`, and the kernel's count of this process's sockets to
    ``listeners`` at the same moment. Retried for up to a second until the kernel agrees
    with the ledgers' ``steady`` sum, since a close may be on its way through the loop; the
    caller asserts the agreement (these clients are the only ones open in the process)."""
    addresses = list(listeners)
    deadline = time.monotonic() + 1.0
    while True:
        sockets = [Sockets.of(ledger_of(c)) for c in clients]
        kernel = kernel_connections(addresses).total()
        if kernel == sum(s.steady for s in sockets) or time.monotonic() >= deadline:
            return sockets, kernel
        await asyncio.sleep(0.05)


# -- scenario b/c: consume, transform, produce ---------------------------------------------------


def input_values(n: int) -> list[bytes]:
    return [f"in-{i}".encode() for i in range(n)]


def transform(value: bytes) -> bytes:
    """The loop's transformation: the output record says which input it came from."""
    return b"out:" + value


async def seed(bootstrap_servers: str, topic: str, n: int, partitions: int) -> None:
    """Write the loop's input, ``in-i`` to partition ``i % partitions``, with a plain stock
    producer (set-up, not under test), every record acked."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    await producer.start()
    try:
        futures = [
            await producer.send(topic, value, partition=i % partitions)
            for i, value in enumerate(input_values(n))
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


def known_coordinators(
    producer: AIOKafkaProducer, consumer: AIOKafkaConsumer
) -> dict[str, int | None]:
    """The coordinators each client currently believes in (None: none known).

    Read from aiokafka's own state -- the sender's coordinator cache and the consumer's group
    coordinator -- which the drop-in classes keep too (they reuse aiokafka's sender and group
    coordinator), so the same reading holds for both pairs.
    """
    cache = producer._sender._coordinators
    return {
        "consumer group": consumer._coordinator.coordinator_id,
        "producer group": cache.get(CoordinationType.GROUP),
        "producer transaction": cache.get(CoordinationType.TRANSACTION),
    }


@dataclass(frozen=True)
class Progress:
    """Passed to a loop's hook after every committed transaction."""

    transactions: int
    moved: int
    """Input records whose output is committed so far."""
    producer: AIOKafkaProducer
    consumer: AIOKafkaConsumer

    async def consumer_follows(self, coordinator: int, timeout_s: float) -> bool:
        """Wait until the consumer's group coordinator is ``coordinator`` (it learns of a move
        from its next heartbeat, every 3 s by default); whether it did within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.consumer._coordinator.coordinator_id != coordinator:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True


@dataclass
class LoopRun:
    """What :func:`transform_loop` saw; its consumer's and producer's sockets."""

    produced: list[bytes]
    """Values of the output records in committed transactions, in commit order."""
    output_partitions: list[tuple[bytes, int, int]]
    """(input value, partition its output was sent to, partition the ack names) for each."""
    transactions: int
    output_records: list[bytes]
    """Every data record in the output topic after the loop, read uncommitted: what the
    brokers hold, whatever the loop believes it sent."""
    extra_after_end: list[bytes]
    """Input records delivered after all ``n`` had been moved (a duplicate delivery)."""
    settled_s: float
    """How long the consumer took after the work to fetch from every input leader again."""
    offsets_sent: dict[int, int]
    """Per input partition, the last offset the loop handed ``send_offsets_to_transaction``
    in a committed transaction: what the group's offset must be."""
    committed: dict[int, int | None]
    """The group's committed offset per input partition, read back after the loop."""
    input_end: dict[int, int]
    """The input's end offsets (read_committed: the last stable offset) after the loop."""
    coordinators: dict[str, int | None]
    """:func:`known_coordinators` at the end of the work."""
    seconds: float
    producer: Sockets
    consumer: Sockets
    kernel_sockets: int
    """The process's sockets to the brokers when the two were counted (see :func:`count`)."""
    events: list[str] = field(default_factory=list)
    """What the hook did to the cluster, for the report."""

    def report(self) -> str:
        """A few lines for ``pytest -s``: the run, then each client's sockets."""
        events = f"; {self.events}" if self.events else ""
        return (
            f"{len(self.produced)} records in {self.transactions} transactions, "
            f"{self.seconds:.2f}s (settled in {self.settled_s:.2f}s){events}\n"
            f"  producer {self.producer.line()}\n  consumer {self.consumer.line()}"
        )


Hook = Callable[[Progress], Awaitable[None]]


async def transform_loop(
    pair: ClientPair,
    bootstrap_servers: str,
    *,
    input_topic: str,
    output_topic: str,
    partitions: int,
    group: str,
    transactional_id: str,
    n: int,
    batch: int = 20,
    after_commit: Hook | None = None,
    timeout_s: float = 60.0,
    leaders: Sequence[int] = (),
    listeners: Iterable[Address],
    output_check_crcs: bool = True,
) -> LoopRun:
    """Move ``n`` input records to ``output_topic`` exactly once.

    A ``read_committed`` consumer in ``group`` reads at most ``batch`` records at a time; per
    batch a transactional producer (default options) writes each record transformed to
    ``output_topic``, spread over its partitions by position in the batch (so that every
    transaction of ``partitions`` records or more writes to every partition, and a broker
    that comes back is needed again at once), adds the batch's next offsets with
    ``send_offsets_to_transaction`` and commits. The consumer never commits itself: the
    group's offsets move only inside the producer's transactions. ``after_commit`` runs after
    every commit (a test moves coordinators there). ``leaders`` are the input's partition
    leaders: the sockets are counted once the consumer holds a data connection to each
    (see :func:`_settle`), and the kernel's count with them (``listeners``: the brokers'
    (host, port)). After both stopped, every record of the output is read back
    uncommitted by a plain stock consumer (``output_check_crcs=False`` where the cluster's
    commit markers fail aiokafka's CRC check: librdkafka's mock).
    """
    consumer = pair.consumer(
        input_topic,
        bootstrap_servers=bootstrap_servers,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    producer = pair.producer(bootstrap_servers=bootstrap_servers, transactional_id=transactional_id)
    began = time.monotonic()
    await start_within(producer)
    try:
        await start_within(consumer)
        try:
            produced: list[bytes] = []
            placed: list[tuple[bytes, int, int]] = []
            offsets_sent: dict[int, int] = {}
            transactions = 0
            with noting(producer, consumer):
                async with asyncio.timeout(timeout_s):
                    while len(produced) < n:
                        records = await consumer.getmany(timeout_ms=200, max_records=batch)
                        if not records:
                            continue
                        values: list[bytes] = []
                        targets: list[int] = []
                        futures = []
                        offsets: dict[TopicPartition, int] = {}
                        async with producer.transaction():
                            for tp, messages in sorted(records.items()):
                                for message in messages:
                                    target = len(values) % partitions
                                    values.append(message.value)
                                    targets.append(target)
                                    futures.append(
                                        await producer.send(
                                            output_topic, transform(message.value), partition=target
                                        )
                                    )
                                offsets[tp] = messages[-1].offset + 1
                            await producer.send_offsets_to_transaction(offsets, group)
                        acked = await asyncio.gather(*futures)
                        transactions += 1
                        produced += [transform(v) for v in values]
                        offsets_sent.update({tp.partition: o for tp, o in offsets.items()})
                        placed += [
                            (v, t, m.partition)
                            for v, t, m in zip(values, targets, acked, strict=True)
                        ]
                        if after_commit is not None:
                            await after_commit(
                                Progress(transactions, len(produced), producer, consumer)
                            )
            seconds = time.monotonic() - began
            # Settle, then count: the consumer keeps polling (a record delivered now would be
            # a duplicate) until it fetches from every input leader again -- after a broker
            # came back, when each client redials it depends on timing, and a count taken
            # before both did would compare moments, not clients.
            settling = time.monotonic()
            extra = await _settle(consumer, leaders)
            settled_s = time.monotonic() - settling
            (producer_sockets, consumer_sockets), kernel = await count(
                [producer, consumer], listeners
            )
            coordinators = known_coordinators(producer, consumer)
            tps = [TopicPartition(input_topic, p) for p in range(partitions)]
            committed = {tp.partition: await consumer.committed(tp) for tp in tps}
            ends = await consumer.end_offsets(tps)
        finally:
            await consumer.stop()
    finally:
        await producer.stop()
    return LoopRun(
        produced=produced,
        output_partitions=placed,
        transactions=transactions,
        output_records=await read_uncommitted(
            bootstrap_servers, output_topic, partitions, check_crcs=output_check_crcs
        ),
        extra_after_end=extra,
        settled_s=settled_s,
        offsets_sent=offsets_sent,
        committed=committed,
        input_end={tp.partition: offset for tp, offset in ends.items()},
        coordinators=coordinators,
        seconds=seconds,
        producer=producer_sockets,
        consumer=consumer_sockets,
        kernel_sockets=kernel,
    )


async def read_uncommitted(
    bootstrap_servers: str, topic: str, partitions: int, *, check_crcs: bool = True
) -> list[bytes]:
    """Every data record of ``topic`` (control records are never returned), aborted ones
    included, as a plain stock consumer reads them: a check, not a client under test."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest", check_crcs=check_crcs
    )
    await consumer.start()
    try:
        return await _read_to_end(consumer, topic, partitions, 0)
    finally:
        await consumer.stop()


async def _read_to_end(
    consumer: AIOKafkaConsumer, topic: str, partitions: int, n: int
) -> list[bytes]:
    """Assign all of ``topic``; read until ``n`` records arrived and every position reached
    the end offsets, then poll once more so that a record after them would show."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    got: list[bytes] = []
    async with asyncio.timeout(60):
        ends = await consumer.end_offsets(tps)
        while len(got) < n or any(await _behind(consumer, ends)):
            records = await consumer.getmany(timeout_ms=300)
            got += [m.value for messages in records.values() for m in messages]
        records = await consumer.getmany(timeout_ms=300)
        got += [m.value for messages in records.values() for m in messages]
    return got


SETTLE_TIMEOUT_S = 15.0


async def _settle(consumer: AIOKafkaConsumer, leaders: Sequence[int]) -> list[bytes]:
    """Poll for at least 0.5 s and until the consumer holds a data connection to each of
    ``leaders`` (at most :data:`SETTLE_TIMEOUT_S`; a client that never gets there is caught
    by the socket counts or the coordinator checks, not here); the records delivered
    meanwhile."""
    deadline = time.monotonic() + SETTLE_TIMEOUT_S
    least = time.monotonic() + 0.5
    extra: list[bytes] = []
    while True:
        late = await consumer.getmany(timeout_ms=100)
        extra += [m.value for messages in late.values() for m in messages]
        held = {e.broker for e in ledger_of(consumer).open_now() if e.role is Role.DATA}
        now = time.monotonic()
        if now >= deadline or (now >= least and set(leaders) <= held):
            return extra


async def read_committed(
    pair: ClientPair, bootstrap_servers: str, topic: str, partitions: int, n: int
) -> list[bytes]:
    """Every record of ``topic`` a ``read_committed`` consumer of ``pair`` (no group, all
    partitions assigned) returns: until ``n`` arrived and the end offsets are reached, then
    one more poll so that a duplicate or an aborted record after them would show."""
    consumer = pair.consumer(
        bootstrap_servers=bootstrap_servers,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await start_within(consumer)
    try:
        return await _read_to_end(consumer, topic, partitions, n)
    finally:
        await consumer.stop()


async def _behind(consumer: AIOKafkaConsumer, ends: Mapping[TopicPartition, int]) -> list[bool]:
    return [await consumer.position(tp) < end for tp, end in ends.items()]


def duplicates(values: Sequence[bytes]) -> list[bytes]:
    return sorted(v for v, count in collections.Counter(values).items() if count > 1)


def assert_moved_exactly_once(
    run: LoopRun, n: int, partitions: int, *, broker_keeps_offsets: bool = True
) -> None:
    """No loss and no duplicate, in what the loop committed and in what the output topic
    holds; every record acked on the partition it was sent to; the offsets committed with
    the transactions at the input's end -- and, where the broker keeps transactional offset
    commits (``broker_keeps_offsets``; librdkafka's mock does not), the group's offsets as
    read back from the broker too."""
    # Plain asserts with messages: this module is not rewritten by pytest.
    dup = duplicates(run.produced)
    assert dup == [], f"output records committed twice: {dup}"
    want = {transform(v) for v in input_values(n)}
    lost = sorted(want - set(run.produced))
    assert not lost and len(run.produced) == n, f"lost {len(lost)}: {lost[:10]}"
    assert run.extra_after_end == [], f"delivered again after the end: {run.extra_after_end}"
    # What the brokers hold, not what the loop believes it sent: a record written twice (a
    # retried produce that was not deduplicated) shows here. Not end offsets: a transaction
    # coordinator that moves re-sends the commit markers of a transaction it finds
    # prepared, so the number of control records is not fixed.
    held = collections.Counter(run.output_records)
    want_held = collections.Counter(transform(v) for v in input_values(n))
    assert held == want_held, (
        f"the output holds {sum(held.values())} records: twice {duplicates(run.output_records)}"
        f", missing {sorted(want_held - held)[:10]}, unexpected {sorted(held - want_held)[:10]}"
    )
    misplaced = [(v, sent, acked) for v, sent, acked in run.output_partitions if sent != acked]
    assert misplaced == [], f"acked on another partition than sent to: {misplaced}"
    assert {sent for _v, sent, _a in run.output_partitions} == set(range(partitions))
    assert sum(run.input_end.values()) == n, f"input end offsets {run.input_end}, not {n}"
    assert run.offsets_sent == run.input_end, (
        f"offsets sent in transactions {run.offsets_sent} != input end {run.input_end}"
    )
    if broker_keeps_offsets:
        assert run.committed == run.input_end, (
            f"group offsets {run.committed} != input end offsets {run.input_end}"
        )


def assert_kernel_agrees(run: CommitAbortRun | LoopRun) -> None:
    """The ledgers' open connections are the process's sockets to the brokers: the counts
    compared below are real sockets, for stock aiokafka's observer and the policy alike."""
    held = run.producer.steady + (run.consumer.steady if isinstance(run, LoopRun) else 0)
    assert run.kernel_sockets == held, (
        f"kernel: {run.kernel_sockets} sockets to the brokers, ledgers: {held} open"
    )


def assert_no_more_sockets(ours: Sockets, stock: Sockets, what: str) -> None:
    """The drop-in client never held more sockets than stock aiokafka in the same run."""
    message = f"{what}: proposed {ours.line()} vs stock {stock.line()}"
    assert ours.peak <= stock.peak, message
    assert ours.steady <= stock.steady, message
