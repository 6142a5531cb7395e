"""What TLS and SASL cost a new connection on the real cluster: handshake time per protocol
and injected RTT, broker CPU per handshake, time to first ack per client, sockets held, and
the calibration (:class:`~connmgr_evidence.handshake_cost.HandshakeCost`) fitted from them.

Needs a cluster started with ``security=True``. Every connection measured here goes through
the cluster's delay forwarders (:mod:`~connmgr_evidence.realkafka.delay`), PLAINTEXT included (the
``CLIENT`` listener's), so the three protocols are measured alike; the forwarders add the
same small relay cost to each at RTT 0.

* **Handshake time** -- aiokafka's own dialler, ``aiokafka.conn.create_conn``, timed on
  ``time.perf_counter`` from just before the call to its return: TCP connect (not delayed, see
  :mod:`~connmgr_evidence.realkafka.delay`), the TLS handshake (SSL, SASL_SSL), ApiVersions, and for
  SASL_SSL the SaslHandshake and SCRAM-SHA-512's two SaslAuthenticate exchanges. Connections
  are opened one at a time, round-robin over the brokers, each closed before the next.
* **Broker CPU** -- user+system CPU of the node JVMs (``psutil``), summed over nodes, across
  the RTT-0 connections, minus the background CPU at the rate of an idle window (>= 1 s);
  divided by the number of connections. The broker's side of the close is included.
* **Time to first ack** -- over SASL_SSL, from just before ``start()`` (the Java probe: just
  before the client is constructed) to the first acknowledged record, producing one record to
  each partition of a topic led by every broker in turn; then the client's live sockets to the
  SASL_SSL endpoints are counted (kernel, after every ack).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

import psutil
from aiokafka import AIOKafkaProducer
from aiokafka.conn import create_conn

from connmgr.aio.dropin import ProposedProducer
from connmgr.kernel import kernel_connections
from connmgr_evidence.handshake_cost import HandshakeCost, fit_handshake_cost
from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.errors import RealKafkaError
from connmgr_evidence.realkafka.security import PROTOCOLS, ListenerAccess, Protocol
from connmgr_evidence.realrun.workloads import AckClock, elapsed_ms

__all__ = [
    "BrokerCpu",
    "FirstAck",
    "HandshakeTimes",
    "TlsReport",
    "await_sockets_closed",
    "broker_cpu_seconds",
    "dial_times",
    "first_ack",
    "measure_tls",
    "producer_start",
]

JAVA_VERSION: Final = "4.4.0"
"""The kafka-clients version of the Java probe's TTFA (absolute context, never a ratio)."""
IDLE_WINDOW_S: Final = 1.0


@dataclass(frozen=True, slots=True)
class HandshakeTimes:
    """``connections`` connection times (ms) for ``protocol`` at ``rtt_ms`` injected RTT."""

    protocol: str
    rtt_ms: float
    samples_ms: tuple[float, ...]
    median_ms: float
    p90_ms: float

    @classmethod
    def of(cls, protocol: str, rtt_ms: float, samples_ms: Sequence[float]) -> HandshakeTimes:
        samples = tuple(samples_ms)
        # "inclusive" interpolates between ranks; one sample is its own p90.
        p90 = (
            statistics.quantiles(samples, n=10, method="inclusive")[8]
            if len(samples) > 1
            else samples[0]
        )
        return cls(protocol, rtt_ms, samples, statistics.median(samples), p90)


@dataclass(frozen=True, slots=True)
class BrokerCpu:
    """Broker CPU (all nodes) over ``connections`` connections of ``protocol`` at RTT 0,
    which took ``window_s``: ``busy_ms`` during them, ``idle_ms`` the background CPU of an
    idle window scaled to ``window_s``, and their difference per connection (noisy with few
    connections: the clock ticks 10 ms; it can come out negative for cheap ones)."""

    protocol: str
    connections: int
    window_s: float
    busy_ms: float
    idle_ms: float
    per_connection_ms: float


@dataclass(frozen=True, slots=True)
class FirstAck:
    """One producer start over SASL_SSL at ``rtt_ms``: ``client`` ("aiokafka", "proposed",
    "java"), time to its first ack (None if none came), and the live sockets it held to the
    SASL_SSL endpoints once every record was acknowledged."""

    client: str
    rtt_ms: float
    ttfa_ms: float | None
    sockets: int


@dataclass(frozen=True, slots=True)
class TlsReport:
    """Everything :func:`measure_tls` measured, and the calibration fitted from it."""

    connections: int
    handshakes: tuple[HandshakeTimes, ...]
    cpu: tuple[BrokerCpu, ...]
    calibration: tuple[HandshakeCost, ...]
    first_acks: tuple[FirstAck, ...]
    seconds: float

    def cost(self, protocol: str) -> HandshakeCost:
        return next(c for c in self.calibration if c.protocol == protocol)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (the calibration as :meth:`HandshakeCost.to_dict` writes it)."""
        return asdict(self)


# -- measuring ----------------------------------------------------------------------------------


async def dial_times(access: ListenerAccess, count: int) -> list[float]:
    """``count`` connection times (ms) through ``access``, one connection at a time,
    round-robin over its endpoints, each closed before the next is opened."""
    addresses = access.addresses()
    kwargs = access.aiokafka_kwargs()
    times: list[float] = []
    for i in range(count):
        host, port = addresses[i % len(addresses)]
        began = time.perf_counter()
        conn = await create_conn(host, port, **kwargs)
        times.append((time.perf_counter() - began) * 1000.0)
        # Wait until the socket is really closed (after TLS's close_notify), so none is left
        # for the loop's end to find open.
        await conn.close()
    return times


async def await_sockets_closed(addresses: Sequence[tuple[str, int]], timeout_s: float = 5.0) -> int:
    """Wait (at most ``timeout_s``) until this process holds no live socket to ``addresses``;
    returns how many are left. aiokafka closes some connections without waiting for the TLS
    close to finish (its bootstrap connection, a failed dial): called before the loop ends, so
    those sockets close on the loop instead of being found open by the garbage collector."""
    deadline = time.monotonic() + timeout_s
    while (left := sum(kernel_connections(addresses).values())) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return left


def broker_cpu_seconds(pids: Sequence[int]) -> float:
    """User+system CPU seconds the processes ``pids`` have used so far, summed."""
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def _measure_protocol(
    cluster: KafkaCluster, protocol: Protocol, rtts_ms: Sequence[float], connections: int
) -> tuple[list[HandshakeTimes], BrokerCpu]:
    access = cluster.secure.access(protocol)
    pids = list(cluster.pids().values())
    # Warm-up: the JVM's first handshakes on a listener run cold code (C1 compiles them).
    cluster.set_rtt(0.0)
    asyncio.run(dial_times(access, min(connections, 5)))
    times: list[HandshakeTimes] = []
    cpu: BrokerCpu | None = None
    for rtt in rtts_ms:
        cluster.set_rtt(rtt)
        cpu_before, began = broker_cpu_seconds(pids), time.monotonic()
        samples = asyncio.run(dial_times(access, connections))
        window, busy = time.monotonic() - began, broker_cpu_seconds(pids) - cpu_before
        times.append(HandshakeTimes.of(protocol, rtt, samples))
        if cpu is None and rtt == 0:
            # The brokers' background CPU (heartbeats, Raft) is not what the connections
            # cost: its rate, over an idle window at least IDLE_WINDOW_S long (CPU times
            # tick in 10 ms steps), is subtracted for the connections' window.
            idle_window = max(window, IDLE_WINDOW_S)
            idle_before = broker_cpu_seconds(pids)
            time.sleep(idle_window)
            idle = (broker_cpu_seconds(pids) - idle_before) * window / idle_window
            cpu = BrokerCpu(
                protocol,
                connections,
                window,
                busy * 1000.0,
                idle * 1000.0,
                (busy - idle) * 1000.0 / connections,
            )
    cluster.set_rtt(0.0)
    if cpu is None:
        raise ValueError(f"rtts_ms must include 0 to measure broker CPU, got {list(rtts_ms)}")
    return times, cpu


@dataclass(frozen=True, slots=True)
class ProducerStart:
    """One producer start: ms from just before ``start()`` to the first ack (None if none),
    the live sockets to the listener once every send ended, records sent and acknowledged,
    and the (stopped) producer itself, for its ledger."""

    first_ms: float | None
    sockets: int
    sent: int
    acked: int
    producer: Any


async def producer_start(
    factory: Callable[..., Any], access: ListenerAccess, topic: str, partitions: int
) -> ProducerStart:
    """Start a producer made by ``factory(**kwargs)`` over ``access``, send one record to each
    of ``partitions`` partitions of ``topic`` (acks=all), count its sockets, stop it."""
    producer = factory(
        bootstrap_servers=access.bootstrap_servers, acks="all", **access.aiokafka_kwargs()
    )
    clock = AckClock()
    started = time.perf_counter()
    await producer.start()
    try:
        futures = [
            clock.watch(await producer.send(topic, b"first", partition=p))
            for p in range(partitions)
        ]
        await asyncio.gather(*futures, return_exceptions=True)
        sockets = sum(kernel_connections(access.addresses()).values())
    finally:
        await producer.stop()
        await await_sockets_closed(access.addresses())
    return ProducerStart(
        elapsed_ms(started, clock.first), sockets, partitions, clock.acked, producer
    )


async def first_ack(
    factory: Callable[..., Any], access: ListenerAccess, topic: str, partitions: int
) -> tuple[float | None, int]:
    """:func:`producer_start`'s (ms to the first ack, live sockets after every ack); raises
    :class:`RealKafkaError` if a record was not acknowledged."""
    start = await producer_start(factory, access, topic, partitions)
    if start.acked != start.sent:
        raise RealKafkaError(f"{start.sent - start.acked} of {start.sent} records not acknowledged")
    return start.first_ms, start.sockets


def _java_first_ack(
    access: ListenerAccess, topic: str, partitions: int
) -> tuple[float | None, int]:
    from connmgr_evidence.java import build_probe, kernel_sampler, run_probe

    build = build_probe(JAVA_VERSION)
    run = run_probe(
        build,
        client="producer",
        bootstrap=access.bootstrap_servers,
        topic=topic,
        partitions=partitions,
        records=partitions,
        settle_ms=0,
        extra=access.java_properties(),
        sample=kernel_sampler(access.addresses()),
        log_level="INFO",
    )
    value = run.steady.raw.get("ttfa_ms")
    return (None if value is None else float(value)), run.sample.count


def measure_tls(
    cluster: KafkaCluster,
    *,
    rtts_ms: Sequence[float] = (0.0, 5.0, 20.0),
    connections: int = 30,
    ttfa: bool = True,
    java: bool = False,
    topic: str = "connmgr-tls-ttfa",
    starts: int = 1,
) -> TlsReport:
    """Measure a running ``security=True`` cluster (see the module docstring) and fit one
    :class:`HandshakeCost` per protocol from the median handshake times.

    ``rtts_ms`` must include 0 (broker CPU is measured there). With ``ttfa``, ``topic`` is
    created (one partition led by each broker) unless it exists, and stock aiokafka and the
    drop-in :class:`~connmgr.aio.dropin.ProposedProducer` start ``starts`` times per RTT,
    alternating which goes first (A B, B A, ...), after one unmeasured start that warms the
    brokers' produce path; with ``java``, kafka-clients :data:`JAVA_VERSION` through the Java
    probe starts once per RTT (context, never a ratio). Leaves the RTT at 0.
    Synchronous: call it from a thread, not from a running loop.
    """
    began = time.monotonic()
    handshakes: list[HandshakeTimes] = []
    cpu: list[BrokerCpu] = []
    for protocol in PROTOCOLS:
        times, used = _measure_protocol(cluster, protocol, rtts_ms, connections)
        handshakes += times
        cpu.append(used)
    calibration = tuple(
        fit_handshake_cost(
            used.protocol,
            {t.rtt_ms: t.median_ms for t in handshakes if t.protocol == used.protocol},
            used.per_connection_ms,
        )
        for used in cpu
    )
    acks: list[FirstAck] = []
    if ttfa:
        acks = _measure_first_acks(cluster, rtts_ms, java, topic, starts)
    return TlsReport(
        connections,
        tuple(handshakes),
        tuple(cpu),
        calibration,
        tuple(acks),
        time.monotonic() - began,
    )


def _measure_first_acks(
    cluster: KafkaCluster, rtts_ms: Sequence[float], java: bool, topic: str, starts: int
) -> list[FirstAck]:
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    access = cluster.access("SASL_SSL")
    brokers = list(cluster.broker_ids)
    if not cluster.leaders(topic):
        cluster.create_topic_with_leaders(topic, brokers)
    clients: dict[str, Callable[[], tuple[float | None, int]]] = {
        "aiokafka": lambda: asyncio.run(first_ack(AIOKafkaProducer, access, topic, len(brokers))),
        "proposed": lambda: asyncio.run(first_ack(ProposedProducer, access, topic, len(brokers))),
    }
    # The first produce to a new topic pays the brokers' cold path (seen: 398 ms against
    # ~90 ms after it); one start before the measured ones keeps that out of either client.
    clients["aiokafka"]()
    acks: list[FirstAck] = []
    try:
        for rtt in rtts_ms:
            cluster.set_rtt(rtt)
            for start in range(starts):
                names = list(clients) if start % 2 == 0 else list(reversed(clients))
                for name in names:
                    ttfa_ms, sockets = clients[name]()
                    acks.append(FirstAck(name, rtt, ttfa_ms, sockets))
            if java:
                ttfa_ms, sockets = _java_first_ack(access, topic, len(brokers))
                acks.append(FirstAck("java", rtt, ttfa_ms, sockets))
    finally:
        cluster.set_rtt(0.0)
    return acks
