"""Adoption on confirmation, measured on the real tier: what KIP-1242 lets a client save.

A client start of the two seed scenarios (``seed-producer``: one partition led by each of
three brokers, one record to each; ``seed-consumer``: a fresh group, coordinated by the
third broker, reads the records of those partitions) against a ``security=True`` cluster,
over one listener (PLAINTEXT or SASL_SSL) at an injected RTT, by:

* ``aiokafka`` -- stock aiokafka;
* ``proposed`` -- the drop-in, which confirms its bootstrap connection's broker with
  ``ApiVersions`` v5 once metadata names the node at that host:port and adopts it;
* ``java`` -- kafka-clients :data:`JAVA_VERSION` through the Java probe (context only: a JVM's
  start is no same-runtime comparison), its NetworkClient log kept to show which of its
  ``ApiVersions`` requests carried a cluster id and node id.

Measured per start, outside the client: **opened** -- the connections the cluster's
forwarders accepted from it (every TCP connection a client makes to a listener goes through
one; see :mod:`connmgr_evidence.realkafka.delay`), **steady** -- the sockets the client holds once
its
records are through (kernel), **first** -- ms from just before ``start()`` to the first
acknowledged record (producer) or the first record consumed (consumer); for the drop-in also
its ledger's dials (which must equal ``opened``), adoptions and rejected checks. Python
starts alternate which client goes first (A B, B A, ...) so neither always meets a warmer
cluster. The **lower bound** is the number of (broker, purpose) connections the scenario
needs: 3 leaders for the producer; 3 leaders and the coordinator's own connection for the
drop-in consumer (4; 3 with ``share_coordinator``).
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from connmgr.aio.dropin import ProposedConsumer, ProposedProducer
from connmgr.kernel import kernel_connections
from connmgr.ledger import ConnEvent
from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.handshakes import await_sockets_closed, producer_start
from connmgr_evidence.realkafka.security import ListenerAccess
from connmgr_evidence.realrun.workloads import elapsed_ms

__all__ = [
    "CLIENTS",
    "JAVA_VERSION",
    "LOWER_BOUND",
    "SCENARIOS",
    "IdentityCensus",
    "Start",
    "identity_census",
    "measure",
    "pairs_faster",
]

JAVA_VERSION: Final = "4.4.0"
CLIENTS: Final = ("aiokafka", "proposed", "java")
SCENARIOS: Final = ("seed-producer", "seed-consumer")
LOWER_BOUND: Final = {"seed-producer": 3, "seed-consumer": 4}
"""Connections the drop-in's rules need in each scenario (see the module docstring)."""
RECORDS_PER_PARTITION: Final = 10
"""The consumer's fixture: records it must read from each partition, all of them."""
_LEADER_ORDER: Final = (3, 1, 2)
"""The seed topic's partition leaders (the recorded 2019 logs' order, on ids 1-3)."""
_COORDINATOR: Final = 3
"""The seed group's coordinator: the seed's broker 2, the third broker."""


@dataclass(frozen=True, slots=True)
class Start:
    """One client start (see the module docstring for each measure)."""

    protocol: str
    rtt_ms: float
    scenario: str
    client: str
    round: int
    opened: int
    steady: int
    first_ms: float | None
    records: int
    """Records the start had to get through: sent (producer) or in the fixture (consumer)."""
    through: int
    """Of those, acknowledged (producer) or read, each once (consumer)."""
    dials: int | None = None
    """The drop-in's ledger: dials it made (None for the other clients)."""
    adopted: int | None = None
    rejected: int | None = None

    @property
    def lost(self) -> int:
        return self.records - self.through


@dataclass(frozen=True, slots=True)
class IdentityCensus:
    """The ``ApiVersions`` requests one Java client logged: to which node, and whether each
    carried a cluster id and node id (KIP-1242's check) or not."""

    client: str
    checked: tuple[str, ...]
    """Connection ids (NetworkClient's node strings: ``2``, ``+3`` for a coordinator
    connection) of the requests that carried both fields."""
    unchecked: tuple[str, ...]
    """Those of the requests that carried neither (``clusterId=null, nodeId=-1``): ``-1``,
    ``-2``, ... are bootstrap connections."""


_API_VERSIONS: Final = re.compile(
    r"Sending API_VERSIONS request .* to node ([+-]?\d+): .*clusterId=([^,)]*), nodeId=(-?\d+)"
)


def identity_census(client: str, log: Path) -> IdentityCensus:
    """What a Java client's NetworkClient log (DEBUG or finer) says of its ``ApiVersions``
    requests: the nodes asked with a cluster id and node id, and those asked without."""
    checked: list[str] = []
    unchecked: list[str] = []
    for line in log.read_text(errors="replace").splitlines():
        match = _API_VERSIONS.search(line)
        if match is None:
            continue
        node, cluster_id, node_id = match[1], match[2], int(match[3])
        (unchecked if cluster_id == "null" and node_id == -1 else checked).append(node)
    return IdentityCensus(client, tuple(checked), tuple(unchecked))


# --- one start ------------------------------------------------------------------------------


def _ledger_counts(client: Any) -> tuple[int, int, int]:
    """(dials, adoptions, rejected identity checks) from a drop-in's ledger."""
    ledger = client.client.ledger
    rejected = sum(
        1
        for e in ledger.entries
        if e.reason in ("identity_rejected", "IdentityRejected")
        and e.kind in (ConnEvent.CLOSED, ConnEvent.FAILED)
    )
    return ledger.count(ConnEvent.DIAL), ledger.count(ConnEvent.ADOPTED), rejected


async def _producer_start(
    client: str, access: ListenerAccess, topic: str
) -> tuple[float | None, int, int, int, Any]:
    factory = ProposedProducer if client == "proposed" else AIOKafkaProducer
    start = await producer_start(factory, access, topic, len(_LEADER_ORDER))
    return start.first_ms, start.sockets, start.sent, start.acked, start.producer


async def _consumer_start(
    client: str, access: ListenerAccess, topic: str, group: str, timeout_s: float
) -> tuple[float | None, int, int, int, Any]:
    factory = ProposedConsumer if client == "proposed" else AIOKafkaConsumer
    consumer = factory(
        topic,
        group_id=group,
        bootstrap_servers=access.bootstrap_servers,
        auto_offset_reset="earliest",
        **access.aiokafka_kwargs(),
    )
    wanted = RECORDS_PER_PARTITION * len(_LEADER_ORDER)
    seen: set[tuple[int, int]] = set()
    first: float | None = None
    started = time.perf_counter()
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while len(seen) < wanted and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for record in records:
                    if first is None:
                        first = time.perf_counter()
                    seen.add((record.partition, record.offset))
        steady = sum(kernel_connections(access.addresses()).values())
    finally:
        await consumer.stop()
        await await_sockets_closed(access.addresses())
    return elapsed_ms(started, first), steady, wanted, len(seen), consumer


# --- the measurement ------------------------------------------------------------------------


def _admin_census(access: ListenerAccess, logs: Path) -> IdentityCensus:
    """Which ``ApiVersions`` requests kafka-clients' admin client sends with a cluster id and
    node id: it asks describeCluster and listTopics of a broker it learnt from metadata."""
    from connmgr_evidence.java import build_probe, kernel_sampler, run_probe

    log = logs / f"java-admin-{access.protocol}.log"
    run_probe(
        build_probe(JAVA_VERSION),
        client="admin",
        bootstrap=access.bootstrap_servers,
        topic="unused",
        partitions=1,
        records=0,
        settle_ms=1000,
        life_every_ms=200,
        extra=access.java_properties(),
        sample=kernel_sampler(access.addresses()),
        log_path=log,
        log_level="DEBUG",
    )
    return identity_census(f"java admin ({access.protocol})", log)


def _python_start(
    cluster: KafkaCluster,
    access: ListenerAccess,
    names: tuple[tuple[str, str], str],
    point: tuple[str, float, str, str, int],
) -> Start:
    protocol, rtt, scenario, client, round_ = point
    topics, group_prefix = names
    before = cluster.secure.accepted(access)
    if scenario == "seed-producer":
        outcome = asyncio.run(_producer_start(client, access, topics[0]))
    else:
        # A group of its own for every start: it reads the fixture from the start.
        prefix = f"{group_prefix}-{client}-{round_}"
        group = cluster.group_for_coordinator(_COORDINATOR, prefix=prefix)
        outcome = asyncio.run(_consumer_start(client, access, topics[1], group, 60.0))
    first, steady, records, through, handle = outcome
    dials = adopted = rejected = None
    if client == "proposed":
        dials, adopted, rejected = _ledger_counts(handle)
    opened = cluster.secure.accepted(access) - before
    return Start(
        protocol,
        rtt,
        scenario,
        client,
        round_,
        opened,
        steady,
        first,
        records,
        through,
        dials,
        adopted,
        rejected,
    )


def _java_start(
    cluster: KafkaCluster,
    access: ListenerAccess,
    names: tuple[tuple[str, str], str],
    point: tuple[str, float, str, str, int],
    logs: Path,
) -> tuple[Start, IdentityCensus]:
    from connmgr_evidence.java import build_probe, kernel_sampler, run_probe

    protocol, rtt, scenario, _, round_ = point
    topics, group_prefix = names
    producer = scenario == "seed-producer"
    topic = topics[0] if producer else topics[1]
    group = (
        None
        if producer
        else cluster.group_for_coordinator(_COORDINATOR, prefix=f"{group_prefix}-java-{round_}")
    )
    records = len(_LEADER_ORDER) if producer else RECORDS_PER_PARTITION * len(_LEADER_ORDER)
    log = logs / f"java-{scenario}-{protocol}-{rtt:g}ms-{round_}.log"
    before = cluster.secure.accepted(access)
    run = run_probe(
        build_probe(JAVA_VERSION),
        client="producer" if producer else "consumer",
        bootstrap=access.bootstrap_servers,
        topic=topic,
        partitions=len(_LEADER_ORDER),
        records=records,
        group=group,
        settle_ms=0,
        extra=access.java_properties(),
        sample=kernel_sampler(access.addresses()),
        log_path=log,
        log_level="DEBUG",
    )
    opened = cluster.secure.accepted(access) - before
    first = run.steady.raw.get("ttfa_ms" if producer else "ttfc_ms")
    start = Start(
        protocol,
        rtt,
        scenario,
        "java",
        round_,
        opened,
        run.sample.count,
        None if first is None else float(first),
        records,
        records,
    )
    return start, identity_census(f"java {scenario} ({protocol}, {rtt:g} ms)", log)


def measure(
    cluster: KafkaCluster,
    *,
    protocols: Sequence[str] = ("PLAINTEXT", "SASL_SSL"),
    rtts_ms: Sequence[float] = (0.0, 5.0, 20.0),
    scenarios: Sequence[str] = SCENARIOS,
    rounds: int = 10,
    java_rounds: int = 1,
    logs: Path,
    progress: Callable[[Start], None] = lambda start: None,
) -> tuple[list[Start], list[IdentityCensus]]:
    """Every start of the grid (see the module docstring) on a running ``security=True``
    ``cluster``: per (protocol, RTT, scenario), ``rounds`` pairs of Python starts, then the
    Java client ``java_rounds`` times. Leaves the RTT at 0. Synchronous: call it from a
    thread, not from a running loop."""
    if rounds < 1 or java_rounds < 0:
        raise ValueError(f"rounds must be >= 1 and java_rounds >= 0, got {rounds}, {java_rounds}")
    starts: list[Start] = []
    census: list[IdentityCensus] = []
    stamp = time.time_ns()  # names of their own: a cluster may be measured twice
    try:
        for protocol in protocols:
            access = cluster.secure.access(protocol)  # type: ignore[arg-type]
            # The producers' topic, and the consumers' (its fixture only, read by each).
            name = f"adopt-{protocol.lower().replace('_', '-')}-{stamp}"
            topics = (f"{name}-p", f"{name}-c")
            for topic in topics:
                cluster.create_topic_with_leaders(topic, list(_LEADER_ORDER))
            _fill(access, topics[1])
            if java_rounds:
                census.append(_admin_census(access, logs))
            for rtt in rtts_ms:
                cluster.set_rtt(rtt)
                for scenario in scenarios:
                    names = (topics, f"{name}-{rtt:g}")
                    for round_ in range(rounds):
                        pair = ("aiokafka", "proposed")
                        for client in pair if round_ % 2 == 0 else pair[::-1]:
                            point = (protocol, rtt, scenario, client, round_)
                            starts.append(_python_start(cluster, access, names, point))
                            progress(starts[-1])
                    for round_ in range(java_rounds):
                        point = (protocol, rtt, scenario, "java", round_)
                        start, seen = _java_start(cluster, access, names, point, logs)
                        starts.append(start)
                        census.append(seen)
                        progress(start)
    finally:
        cluster.set_rtt(0.0)
    return starts, census


def _fill(access: ListenerAccess, topic: str) -> None:
    """The consumer's fixture: :data:`RECORDS_PER_PARTITION` records in each partition."""

    async def produce() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=access.bootstrap_servers, acks="all", **access.aiokafka_kwargs()
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, f"r{i}".encode(), partition=p)
                for p in range(len(_LEADER_ORDER))
                for i in range(RECORDS_PER_PARTITION)
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
            await await_sockets_closed(access.addresses())

    asyncio.run(produce())


# --- summaries ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Point:
    """The starts of one client at one (protocol, RTT, scenario)."""

    protocol: str
    rtt_ms: float
    scenario: str
    client: str
    starts: int
    opened: tuple[int, ...]
    steady: tuple[int, ...]
    first_ms: float | None
    """Median time to the first record through."""
    lost: int
    adopted: int | None
    rejected: int | None


def points(starts: Sequence[Start]) -> list[Point]:
    """One :class:`Point` per (protocol, RTT, scenario, client), in the order first met."""
    groups: dict[tuple[str, float, str, str], list[Start]] = {}
    for s in starts:
        groups.setdefault((s.protocol, s.rtt_ms, s.scenario, s.client), []).append(s)
    out = []
    for (protocol, rtt, scenario, client), group in groups.items():
        firsts = [s.first_ms for s in group if s.first_ms is not None]
        out.append(
            Point(
                protocol,
                rtt,
                scenario,
                client,
                len(group),
                tuple(sorted(s.opened for s in group)),
                tuple(sorted(s.steady for s in group)),
                statistics.median(firsts) if firsts else None,
                sum(s.lost for s in group),
                None if client != "proposed" else sum(s.adopted or 0 for s in group),
                None if client != "proposed" else sum(s.rejected or 0 for s in group),
            )
        )
    return out


def first_ratio(starts: Sequence[Start], protocol: str, rtt: float, scenario: str) -> float | None:
    """Median time to first record, drop-in / stock aiokafka, at one point."""

    def median(client: str) -> float | None:
        values = [
            s.first_ms
            for s in starts
            if (s.protocol, s.rtt_ms, s.scenario, s.client) == (protocol, rtt, scenario, client)
            and s.first_ms is not None
        ]
        return statistics.median(values) if values else None

    ours, theirs = median("proposed"), median("aiokafka")
    return None if ours is None or not theirs else ours / theirs


def as_json(starts: Sequence[Start], census: Sequence[IdentityCensus]) -> dict[str, Any]:
    return {
        "starts": [asdict(s) for s in starts],
        "census": [asdict(c) for c in census],
    }


def pairs_faster(
    starts: Sequence[Start], protocol: str, rtt: float, scenario: str
) -> tuple[int, int]:
    """Of the rounds at one point where both Python clients got a first record through, how
    many the drop-in's start was faster in, and how many there were."""
    firsts: dict[int, dict[str, float]] = {}
    for s in starts:
        if (s.protocol, s.rtt_ms, s.scenario) == (protocol, rtt, scenario) and s.first_ms:
            firsts.setdefault(s.round, {})[s.client] = s.first_ms
    pairs = [r for r in firsts.values() if {"aiokafka", "proposed"} <= r.keys()]
    return sum(r["proposed"] < r["aiokafka"] for r in pairs), len(pairs)
