"""The double bootstrap, reproduced on the real tier: how many bootstrap servers a plain
kafka-clients producer and group consumer dial per start, by version and configuration.

Each start is counted at the cluster's forwarders on its PLAINTEXT client listener
(``cluster.secure.access("PLAINTEXT")``; every connection a client opens there, bootstrap or
broker, is accepted by one forwarder per broker) and its requests are read off the wire
(:mod:`~connmgr_evidence.realkafka.wire`). A start's connections split at the first ``Metadata``
response relayed back to it (:func:`~connmgr_evidence.realkafka.wire.split_at_first_metadata`):
dialled
before it, a **bootstrap** connection (the client knows no node id yet); after it, a
**known**-node connection (a leader, the group coordinator's). For kafka-clients 4.4.0 the
split is checked by KIP-1242: its ``ApiVersions`` v5 carries ``ClusterId`` and ``NodeId`` on
connections to known nodes only, so ``checked`` must equal ``known`` and no bootstrap
connection may carry them.

Clients (:data:`VARIANTS`): the producer (idempotent, the default; one record to each of the
topic's three partitions, led by brokers 1, 2 and 3, acks=all) runs in one long-lived probe JVM,
a new ``KafkaProducer`` per start (:mod:`connmgr_evidence.java.serverless`); the group consumer
(classic
protocol, a new group per start, reads three records and commits) is one probe JVM per start
(:func:`connmgr_evidence.java.run_probe`). Each variant's starts run back to back, one at a time.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from aiokafka import AIOKafkaProducer

from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.security import ListenerAccess
from connmgr_evidence.realkafka.wire import (
    ConnectionTrace,
    WireRecorder,
    recording,
    split_at_first_metadata,
)

__all__ = [
    "VARIANTS",
    "BootstrapVariant",
    "StartCount",
    "measure",
    "medians",
    "recorder_ports",
]

ClientKind = Literal["producer", "consumer"]
START_TIMEOUT_S: Final = 60.0
_LEADERS: Final = (1, 2, 3)
_IDEMPOTENCE_OFF: Final = (("enable.idempotence", "false"),)
_PUSH_OFF: Final = (("enable.metrics.push", "false"),)


@dataclass(frozen=True, slots=True)
class BootstrapVariant:
    """One client, release and configuration. ``version`` as
    :func:`connmgr_evidence.java.build_probe`
    names it (``4.3.1-patched``: the project's patch, its switches on); ``settings`` are added
    to the client's configuration."""

    name: str
    client: ClientKind
    version: str
    settings: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        extra = " ".join(f"{k}={v}" for k, v in self.settings) or "defaults"
        return f"{self.client} {self.version} ({extra})"


def _variants() -> tuple[BootstrapVariant, ...]:
    out = []
    for version in ("4.4.0", "4.3.1"):
        v = version.replace(".", "")
        out += [
            BootstrapVariant(f"producer-{v}", "producer", version),
            BootstrapVariant(f"producer-{v}-idem-off", "producer", version, _IDEMPOTENCE_OFF),
            BootstrapVariant(f"producer-{v}-push-off", "producer", version, _PUSH_OFF),
            BootstrapVariant(
                f"producer-{v}-both-off", "producer", version, _IDEMPOTENCE_OFF + _PUSH_OFF
            ),
        ]
    out.append(BootstrapVariant("producer-431-patched", "producer", "4.3.1-patched"))
    for version in ("4.4.0", "4.3.1"):
        v = version.replace(".", "")
        out += [
            BootstrapVariant(f"consumer-{v}", "consumer", version),
            BootstrapVariant(f"consumer-{v}-push-off", "consumer", version, _PUSH_OFF),
        ]
    out.append(BootstrapVariant("consumer-431-patched", "consumer", "4.3.1-patched"))
    return tuple(out)


VARIANTS: Final = {v.name: v for v in _variants()}
"""Every variant the reproducer knows, by name, in the order it runs them."""


@dataclass(frozen=True, slots=True)
class StartCount:
    """One client start, as the forwarders saw it (see the module docstring)."""

    variant: str
    index: int
    per_broker: tuple[int, ...]
    """Connections accepted per broker (ids 1, 2, 3)."""
    bootstrap: int
    """Connections accepted before the start's first ``Metadata`` answer."""
    bootstrap_brokers: tuple[int, ...]
    """The brokers (forwarders) those bootstrap connections went to, in accept order."""
    known: int
    """Connections accepted after it."""
    checked: int
    """Known-node connections whose ``ApiVersions`` carried ``ClusterId`` and ``NodeId``."""
    bootstrap_checked: int
    """Bootstrap connections that carried them (a wrong split if not 0)."""
    api_versions: tuple[int, ...]
    """The ``ApiVersions`` versions sent (one per connection that sent one)."""
    own: int
    """The client's own ``connection-creation-total`` after its close."""
    undecoded: int
    """Connections some of whose bytes did not parse as Kafka (0 on PLAINTEXT)."""

    @property
    def total(self) -> int:
        return sum(self.per_broker)


def recorder_ports(access: ListenerAccess) -> dict[int, int]:
    """Forwarder port -> broker id, for :func:`~connmgr_evidence.realkafka.wire.recording`."""
    return {port: broker for broker, (_, port) in access.endpoints}


def count_start(
    variant: str,
    index: int,
    traces: Sequence[ConnectionTrace],
    brokers: Sequence[int],
    own: int,
) -> StartCount:
    """One start's :class:`StartCount` from the traces of the connections it opened."""
    bootstrap, known = split_at_first_metadata(list(traces))

    def carried(t: ConnectionTrace) -> bool:
        return any(r.carries_identity for r in t.api_versions())

    return StartCount(
        variant=variant,
        index=index,
        per_broker=tuple(sum(1 for t in traces if t.broker == b) for b in brokers),
        bootstrap=len(bootstrap),
        bootstrap_brokers=tuple(t.broker for t in bootstrap),
        known=len(known),
        checked=sum(1 for t in known if carried(t)),
        bootstrap_checked=sum(1 for t in bootstrap if carried(t)),
        api_versions=tuple(a[0].api_version for t in traces if (a := t.api_versions())),
        own=own,
        undecoded=sum(1 for t in traces if t.broken),
    )


def fill(access: ListenerAccess, topic: str, partitions: int) -> None:
    """One record in each partition of ``topic`` (for the consumers to read), written over
    ``access`` -- the cluster's direct listener, so it is neither counted nor traced."""

    async def produce() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=access.bootstrap_servers, acks="all")
        await producer.start()
        try:
            futures = [await producer.send(topic, b"fill", partition=p) for p in range(partitions)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(produce())


def _producer_starts(
    variant: BootstrapVariant,
    access: ListenerAccess,
    recorder: WireRecorder,
    topic: str,
    starts: int,
    logs: Path,
    progress: Callable[[StartCount], None],
) -> list[StartCount]:
    from connmgr_evidence.java import build_probe
    from connmgr_evidence.java.serverless import ServerlessProbe

    out = []
    brokers = [b for b, _ in access.endpoints]
    with ServerlessProbe(
        build_probe(variant.version),
        bootstrap=access.bootstrap_servers,
        topic=topic,
        partitions=len(brokers),
        records=len(brokers),
        value_prefix=variant.name,
        extra={**access.java_properties(), **dict(variant.settings)},
        log_path=logs / f"{variant.name}.log",
        timeout_s=START_TIMEOUT_S,
    ) as probe:
        for index in range(starts):
            began = time.monotonic()
            report, _ = probe.run_start(index, lambda pid: None)
            ended = time.monotonic()
            traces = recorder.traces(since=began, until=ended)
            out.append(count_start(variant.name, index, traces, brokers, report.created))
            progress(out[-1])
    return out


def _consumer_starts(
    variant: BootstrapVariant,
    cluster: KafkaCluster,
    access: ListenerAccess,
    recorder: WireRecorder,
    topic: str,
    starts: int,
    logs: Path,
    progress: Callable[[StartCount], None],
) -> list[StartCount]:
    from connmgr_evidence.java import build_probe, default_extra, run_probe

    build = build_probe(variant.version)
    brokers = [b for b, _ in access.endpoints]
    out = []
    for index in range(starts):
        group = f"{topic}-{variant.name}-{index}"
        began = time.monotonic()
        run = run_probe(
            build,
            client="consumer",
            bootstrap=access.bootstrap_servers,
            topic=topic,
            partitions=len(brokers),
            records=len(brokers),
            group=group,
            settle_ms=0,
            extra={
                **default_extra(variant.version, "consumer"),
                **access.java_properties(),
                **dict(variant.settings),
            },
            sample=lambda pid: None,
            log_path=logs / f"{variant.name}-{index}.log",
            log_level="INFO",
            timeout_s=START_TIMEOUT_S * 2,
        )
        ended = time.monotonic()
        traces = recorder.traces(since=began, until=ended)
        count = count_start(
            variant.name, index, traces, brokers, run.closed.connection_creation_total
        )
        out.append(count)
        progress(count)
    return out


def measure(
    cluster: KafkaCluster,
    *,
    variants: Iterable[str] = tuple(VARIANTS),
    starts: int = 5,
    logs: Path,
    progress: Callable[[StartCount], None] = lambda count: None,
) -> list[StartCount]:
    """``starts`` starts of each of ``variants`` (names of :data:`VARIANTS`) on a running
    ``security=True`` ``cluster`` with three brokers, over its traced PLAINTEXT client
    listener, on a new topic whose partitions are led by brokers 1, 2 and 3. The clients'
    logs go to ``logs``. Synchronous: call it from a thread, not a running loop. Raises
    ValueError for an unknown variant or ``starts < 1``."""
    chosen = [VARIANTS[name] for name in variants if name in VARIANTS]
    unknown = [name for name in variants if name not in VARIANTS]
    if unknown or starts < 1:
        raise ValueError(
            f"unknown variants {unknown} (known: {', '.join(VARIANTS)}) or starts {starts} < 1"
        )
    logs.mkdir(parents=True, exist_ok=True)
    access = cluster.secure.access("PLAINTEXT")
    topic = f"double-bootstrap-{time.time_ns()}"
    cluster.create_topic_with_leaders(topic, list(_LEADERS))
    if any(v.client == "consumer" for v in chosen):
        fill(cluster.access("PLAINTEXT"), topic, len(_LEADERS))
    out: list[StartCount] = []
    with recording(cluster.secure.network, recorder_ports(access)) as recorder:
        for variant in chosen:
            if variant.client == "producer":
                out += _producer_starts(variant, access, recorder, topic, starts, logs, progress)
            else:
                out += _consumer_starts(
                    variant, cluster, access, recorder, topic, starts, logs, progress
                )
    return out


def medians(counts: Sequence[StartCount]) -> Mapping[str, tuple[float, float]]:
    """Variant -> (median total connections, median bootstrap connections) per start."""
    by: dict[str, list[StartCount]] = {}
    for c in counts:
        by.setdefault(c.variant, []).append(c)
    return {
        name: (
            statistics.median(c.total for c in group),
            statistics.median(c.bootstrap for c in group),
        )
        for name, group in by.items()
    }
