"""The serverless class on the real secure tier: short-lived producers, each of which starts,
sends a few records and closes, one after the other, by four clients.

* ``aiokafka`` -- stock aiokafka (``AIOKafkaProducer``);
* ``proposed`` -- the drop-in (:class:`~connmgr.aio.dropin.ProposedProducer`), its defaults:
  the bootstrap connection's broker is confirmed with ``ApiVersions`` v5 (KIP-1242) once
  metadata names the node at that host:port, and adopted;
* ``java-4.4.0`` -- kafka-clients 4.4.0;
* ``java-4.3.1-patched`` -- kafka-clients 4.3.1 with the project's patch, its switches on
  (:data:`connmgr_evidence.java.patched.SWITCHES`).

Each Python start is one ``asyncio.run``: a new event loop, a new producer, ``start()``, one
record to each partition of the variant's topic (acks=all, each leader a different broker),
the acks, ``stop()``, and a wait until the process holds no socket to the listener. The Java
starts run in one long-lived probe JVM, a new ``KafkaProducer`` per start
(:mod:`connmgr_evidence.java.serverless`): a JVM per start would time the JVM's start. Variants run
one after another, each its starts back to back, so each one's per-second figures are its own.

Counted at the cluster's forwarders (:mod:`connmgr_evidence.realkafka.delay`: every TCP connection a
client makes to the listener is accepted by one, per broker), from their log of accept and
close instants: the **attempts** of each start -- connections accepted between just before
the producer was built and the end of its close -- per broker. Cross-checks, per start: the
forwarders' own counters (``counted``, must equal the sum of the attempts), the client's own
count where it keeps one (``own``: the drop-in's ledger dials, kafka-clients'
``connection-creation-total`` read after the close; both must equal the attempts), and, once
every record is acknowledged, the client's live sockets to the listener in the kernel's
socket table (``held``) beside the forwarders' open relays (``relayed``) at that moment.

Records: each record's value names its variant, start and number; after a variant's starts
its topic is read back whole from the beginning (over the cluster's direct PLAINTEXT
listener, not through the forwarders, so the read is not counted), and every value a start
sent must be there exactly once.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from connmgr.aio.dropin import ProposedProducer
from connmgr.kernel import kernel_sockets
from connmgr_evidence.realkafka.adoption import _ledger_counts
from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.delay import RelayedConnection
from connmgr_evidence.realkafka.handshakes import await_sockets_closed
from connmgr_evidence.realkafka.security import ListenerAccess, Protocol
from connmgr_evidence.realrun.workloads import AckClock, elapsed_ms

__all__ = [
    "JAVA_VERSIONS",
    "LABELS",
    "VARIANTS",
    "ServerlessRun",
    "ServerlessStart",
    "VariantRun",
    "measure",
    "record_value",
]

VARIANTS: Final = ("aiokafka", "proposed", "java-4.4.0", "java-4.3.1-patched")
JAVA_VERSIONS: Final = {"java-4.4.0": "4.4.0", "java-4.3.1-patched": "4.3.1-patched"}
"""The Java variants' kafka-clients versions, as :func:`connmgr_evidence.java.build_probe` names
them."""
LABELS: Final = {
    "aiokafka": "stock aiokafka",
    "proposed": "drop-in (adoption)",
    "java-4.4.0": "kafka-clients 4.4.0",
    "java-4.3.1-patched": "kafka-clients 4.3.1-patched",
}
START_TIMEOUT_S: Final = 60.0
"""Bound on one start (a Python start's ``asyncio.run``; each Java probe line)."""
_CLOSE_WAIT_S: Final = 5.0
"""After a variant's last start: how long the forwarders may take to see its last sockets close."""


def record_value(variant: str, start: int, number: int) -> bytes:
    """The value of record ``number`` of ``start`` of ``variant``: unique in the run (the Java
    probe writes the same ``<prefix>:<start>:<number>``, with the variant as its prefix)."""
    return f"{variant}:{start}:{number}".encode()


@dataclass(frozen=True, slots=True)
class ServerlessStart:
    """One short-lived producer (see the module docstring for each measure). Instants are
    seconds since the run's origin (:attr:`ServerlessRun.origin`)."""

    variant: str
    index: int
    began_s: float
    """Just before the producer was built (Java: before the start was asked of the probe)."""
    ended_s: float
    """After its close (Python: and its sockets gone from the kernel's table)."""
    attempts: tuple[int, ...]
    """Connections the forwarders accepted in [began_s, ended_s], per broker (the run's
    :attr:`ServerlessRun.brokers` order)."""
    counted: int
    """The forwarders' accept counters over the same span (a check on the log)."""
    own: int | None
    """The client's own count of its connections: the drop-in's ledger dials, kafka-clients'
    ``connection-creation-total``; None for stock aiokafka (it keeps none)."""
    held: int
    """The client's live sockets to the listener (kernel) once every record was acked."""
    relayed: int
    """The forwarders' relays open at that moment (on the listener's ports)."""
    adopted: int | None
    """Bootstrap connections the drop-in adopted after its broker confirmed (drop-in only)."""
    sent: int
    acked: int
    first_ms: float | None
    """From just before the producer was built to its first ack."""

    @property
    def total(self) -> int:
        """Connection attempts of the start, all brokers."""
        return sum(self.attempts)


@dataclass(frozen=True, slots=True)
class VariantRun:
    """One variant's starts, the forwarders' log over them, and its records read back."""

    variant: str
    client: str
    """The client and its version, e.g. ``aiokafka 0.14.0``, ``kafka-clients 4.4.0``."""
    topic: str
    began_s: float
    """The first start's :attr:`ServerlessStart.began_s`."""
    ended_s: float
    """The last start's :attr:`ServerlessStart.ended_s`."""
    starts: tuple[ServerlessStart, ...]
    connections: tuple[tuple[tuple[float, float | None], ...], ...]
    """Per broker (run order): (accepted, closed) instants of every connection its forwarder
    accepted in [began_s, ended_s], in accept order; closed is None if it was still open
    :data:`_CLOSE_WAIT_S` after the last start."""
    read_back: int
    """Distinct values of this variant's starts found in its topic."""
    duplicated: int
    """Extra copies: records read beyond the first of each value."""
    unexpected: int
    """Records read whose value no start of the variant sent."""
    in_topic: int
    """Records in the topic by its offsets (sum over partitions of end - beginning)."""

    @property
    def sent(self) -> int:
        return sum(s.sent for s in self.starts)

    @property
    def acked(self) -> int:
        return sum(s.acked for s in self.starts)

    @property
    def lost(self) -> int:
        """Records a start sent that are not in the topic."""
        return self.sent - self.read_back


@dataclass(frozen=True, slots=True)
class ServerlessRun:
    """Everything :func:`measure` measured."""

    protocol: str
    rtt_ms: float
    kafka: str
    brokers: tuple[int, ...]
    records_per_start: int
    origin: float
    """:func:`time.monotonic` at the run's origin (instants here are seconds after it)."""
    variants: tuple[VariantRun, ...] = field(default=())


# --- one Python start ---------------------------------------------------------------------------


async def _python_start(
    variant: str,
    index: int,
    access: ListenerAccess,
    topic: str,
    records: int,
    partitions: int,
    sample: Callable[[], tuple[int, int]],
) -> tuple[float | None, int, int, int, Any]:
    """(ms to first ack, held, relayed, acked, the stopped producer) of one start."""
    factory = ProposedProducer if variant == "proposed" else AIOKafkaProducer
    producer = factory(
        bootstrap_servers=access.bootstrap_servers, acks="all", **access.aiokafka_kwargs()
    )
    clock = AckClock()
    began = time.perf_counter()
    async with asyncio.timeout(START_TIMEOUT_S):
        await producer.start()
        try:
            futures = [
                clock.watch(
                    await producer.send(
                        topic, record_value(variant, index, i), partition=i % partitions
                    )
                )
                for i in range(records)
            ]
            await asyncio.gather(*futures, return_exceptions=True)
            held, relayed = sample()
        finally:
            await producer.stop()
            # The start ends when its sockets are gone, so the next one never overlaps it.
            await await_sockets_closed(access.addresses())
    return elapsed_ms(began, clock.first), held, relayed, clock.acked, producer


# --- the measurement ----------------------------------------------------------------------------


class _Tier:
    """The listener's forwarders, seen from the run: counters, log, open relays, kernel."""

    def __init__(self, cluster: KafkaCluster, access: ListenerAccess, origin: float) -> None:
        self.cluster = cluster
        self.access = access
        self.origin = origin
        self.brokers = tuple(broker for broker, _ in access.endpoints)

    def now(self) -> float:
        return time.monotonic() - self.origin

    def counted(self) -> int:
        return self.cluster.secure.accepted(self.access)

    def log(self) -> dict[int, tuple[RelayedConnection, ...]]:
        return self.cluster.secure.connections(self.access)

    def relayed(self) -> int:
        return sum(1 for log in self.log().values() for c in log if c.closed_at is None)

    def sample(self, pid: int) -> tuple[int, int]:
        """(the process's live sockets to the listener, the forwarders' open relays)."""
        return kernel_sockets(pid, self.access.addresses()).count, self.relayed()


def _attribute(
    tier: _Tier, spans: Sequence[tuple[float, float]]
) -> tuple[list[tuple[int, ...]], tuple[tuple[tuple[float, float | None], ...], ...]]:
    """Each span's accepts per broker, and the block's connections per broker (instants
    relative to the origin), from the forwarders' log."""
    began, ended = spans[0][0], spans[-1][1]
    log = tier.log()
    block: list[tuple[tuple[float, float | None], ...]] = []
    for broker in tier.brokers:
        rows = []
        for c in log[broker]:
            at = c.accepted_at - tier.origin
            if began <= at <= ended:
                closed = None if c.closed_at is None else c.closed_at - tier.origin
                rows.append((at, closed))
        block.append(tuple(rows))
    per_start = [
        tuple(sum(1 for at, _ in rows if b <= at <= e) for rows in block) for b, e in spans
    ]
    return per_start, tuple(block)


def _await_relays_closed(tier: _Tier) -> None:
    deadline = time.monotonic() + _CLOSE_WAIT_S
    while tier.relayed() and time.monotonic() < deadline:
        time.sleep(0.01)


@dataclass(frozen=True, slots=True)
class _Raw:
    """A start before its attempts are known (they are read from the log after the block)."""

    index: int
    began_s: float
    ended_s: float
    counted: int
    own: int | None
    held: int
    relayed: int
    adopted: int | None
    sent: int
    acked: int
    first_ms: float | None


def _python_starts(
    tier: _Tier, variant: str, topic: str, starts: int, records: int, progress: Callable[[], None]
) -> list[_Raw]:
    raws = []
    partitions = len(tier.brokers)
    for index in range(starts):
        before, began = tier.counted(), tier.now()
        first, held, relayed, acked, producer = asyncio.run(
            _python_start(
                variant,
                index,
                tier.access,
                topic,
                records,
                partitions,
                lambda: tier.sample(os.getpid()),
            )
        )
        ended = tier.now()
        own = adopted = None
        if variant == "proposed":
            own, adopted, _ = _ledger_counts(producer)
        raws.append(
            _Raw(
                index,
                began,
                ended,
                tier.counted() - before,
                own,
                held,
                relayed,
                adopted,
                records,
                acked,
                first,
            )
        )
        progress()
    return raws


def _java_starts(
    tier: _Tier,
    variant: str,
    topic: str,
    starts: int,
    records: int,
    logs: Path,
    progress: Callable[[], None],
) -> tuple[list[_Raw], str]:
    from connmgr_evidence.java import build_probe
    from connmgr_evidence.java.serverless import ServerlessProbe

    build = build_probe(JAVA_VERSIONS[variant])
    raws = []
    with ServerlessProbe(
        build,
        bootstrap=tier.access.bootstrap_servers,
        topic=topic,
        partitions=len(tier.brokers),
        records=records,
        value_prefix=variant,
        extra=tier.access.java_properties(),
        log_path=logs / f"{variant}.log",
        timeout_s=START_TIMEOUT_S,
    ) as probe:
        for index in range(starts):
            before, began = tier.counted(), tier.now()
            report, (held, relayed) = probe.run_start(index, tier.sample)
            ended = tier.now()
            raws.append(
                _Raw(
                    index,
                    began,
                    ended,
                    tier.counted() - before,
                    report.created,
                    held,
                    relayed,
                    None,
                    report.sent,
                    report.acked,
                    report.first_ms,
                )
            )
            progress()
        version = probe.version or JAVA_VERSIONS[variant]
    patched = " (patched, switches on)" if variant.endswith("-patched") else ""
    return raws, f"kafka-clients {version}{patched}"


async def _read_back(
    access: ListenerAccess, topic: str, partitions: int
) -> tuple[Counter[bytes], int]:
    """Every record of ``topic`` from the beginning (values counted) and the number of records
    its offsets say it holds."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=access.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **access.aiokafka_kwargs(),
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    seen: Counter[bytes] = Counter()
    async with asyncio.timeout(120.0):
        await consumer.start()
        try:
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            first = await consumer.beginning_offsets(tps)
            end = await consumer.end_offsets(tps)
            while [tp for tp in tps if await consumer.position(tp) < end[tp]]:
                batches = await consumer.getmany(timeout_ms=500)
                for batch in batches.values():
                    seen.update(record.value for record in batch if record.value is not None)
        finally:
            await consumer.stop()
    return seen, sum(end[tp] - first[tp] for tp in tps)


def measure(
    cluster: KafkaCluster,
    *,
    variants: Sequence[str] = VARIANTS,
    starts: int = 200,
    records_per_start: int = 3,
    protocol: Protocol = "SASL_SSL",
    rtt_ms: float = 0.0,
    logs: Path,
    progress: Callable[[str], None] = lambda variant: None,
) -> ServerlessRun:
    """Run ``starts`` short-lived producers of each of ``variants``, in that order, on a
    running ``security=True`` ``cluster`` over ``protocol`` at ``rtt_ms`` injected RTT, each
    sending ``records_per_start`` records round-robin over a topic of its own with one
    partition led by each broker; read each topic back. ``progress(variant)`` is called after
    every start. Leaves the RTT at 0. Synchronous: call it from a thread, not a running loop.
    """
    if starts < 1 or records_per_start < 1:
        raise ValueError(
            f"starts and records_per_start must be >= 1, got {starts}, {records_per_start}"
        )
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    access = cluster.secure.access(protocol)
    direct = cluster.access("PLAINTEXT")
    tier = _Tier(cluster, access, time.monotonic())
    stamp = time.time_ns()  # names of their own: a cluster may be measured twice
    runs: list[VariantRun] = []
    cluster.set_rtt(rtt_ms)
    try:
        for variant in variants:
            topic = f"serverless-{variant.replace('.', '-')}-{stamp}"
            cluster.create_topic_with_leaders(topic, list(tier.brokers))
            bump = functools.partial(progress, variant)
            if variant in JAVA_VERSIONS:
                raws, client = _java_starts(
                    tier, variant, topic, starts, records_per_start, logs, bump
                )
            else:
                import aiokafka

                raws = _python_starts(tier, variant, topic, starts, records_per_start, bump)
                client = f"aiokafka {aiokafka.__version__}" + (
                    " + connmgr drop-in" if variant == "proposed" else ""
                )
            _await_relays_closed(tier)
            per_start, block = _attribute(tier, [(r.began_s, r.ended_s) for r in raws])
            seen, in_topic = asyncio.run(_read_back(direct, topic, len(tier.brokers)))
            expected = {record_value(variant, r.index, i) for r in raws for i in range(r.sent)}
            runs.append(
                VariantRun(
                    variant=variant,
                    client=client,
                    topic=topic,
                    began_s=raws[0].began_s,
                    ended_s=raws[-1].ended_s,
                    starts=tuple(
                        ServerlessStart(
                            variant,
                            r.index,
                            r.began_s,
                            r.ended_s,
                            attempts,
                            r.counted,
                            r.own,
                            r.held,
                            r.relayed,
                            r.adopted,
                            r.sent,
                            r.acked,
                            r.first_ms,
                        )
                        for r, attempts in zip(raws, per_start, strict=True)
                    ),
                    connections=block,
                    read_back=sum(1 for v in expected if seen[v]),
                    duplicated=sum(n - 1 for v, n in seen.items() if v in expected and n > 1),
                    unexpected=sum(n for v, n in seen.items() if v not in expected),
                    in_topic=in_topic,
                )
            )
    finally:
        cluster.set_rtt(0.0)
    return ServerlessRun(
        protocol=protocol,
        rtt_ms=rtt_ms,
        kafka=cluster.version,
        brokers=tier.brokers,
        records_per_start=records_per_start,
        origin=tier.origin,
        variants=tuple(runs),
    )
