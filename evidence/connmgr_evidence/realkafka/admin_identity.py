"""The admin client does not send its cluster id, reproduced on the real tier: the
``ApiVersions`` requests kafka-clients 4.4.0's ``Admin`` and, for comparison, its producer send
to nodes they know from metadata, read off the wire.

KIP-1242 (Kafka 4.4): a client that knows the cluster id sends ``ClusterId`` and ``NodeId`` in
``ApiVersions`` v5 on a connection to a known node, and the broker answers
``REBOOTSTRAP_REQUIRED`` if it is not that node of that cluster. Each start here is counted at
the cluster's forwarders on its PLAINTEXT client listener and decoded
(:mod:`~connmgr_evidence.realkafka.wire`); its connections split into bootstrap and known-node ones
at
its first ``Metadata`` answer (:func:`~connmgr_evidence.realkafka.wire.split_at_first_metadata`).
For
every connection: the broker whose forwarder accepted it, the ``ApiVersions`` version, and the
``ClusterId`` / ``NodeId`` it carried. A second witness, the client's own: its NetworkClient
log at DEBUG (``Sending API_VERSIONS request ... to node N``,
:func:`~connmgr_evidence.realkafka.adoption.identity_census`).

The admin client is one probe JVM per start (``describeCluster`` and ``listTopics``, then a
short settle); the producer is a new ``KafkaProducer`` per start in one probe JVM (one record to
each of three partitions led by brokers 1, 2 and 3).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from connmgr_evidence.realkafka.adoption import IdentityCensus, identity_census
from connmgr_evidence.realkafka.bootstrap_dials import recorder_ports
from connmgr_evidence.realkafka.cluster import KafkaCluster
from connmgr_evidence.realkafka.security import ListenerAccess
from connmgr_evidence.realkafka.wire import (
    ConnectionTrace,
    WireRecorder,
    recording,
    split_at_first_metadata,
)

__all__ = ["JAVA_VERSION", "IdentityStart", "WireConnection", "measure"]

JAVA_VERSION: Final = "4.4.0"
START_TIMEOUT_S: Final = 60.0
_LEADERS: Final = (1, 2, 3)
IdentityClient = Literal["admin", "producer"]


@dataclass(frozen=True, slots=True)
class WireConnection:
    """One connection of a start: ``broker`` (whose forwarder accepted it), ``known`` (dialled
    after the start's first ``Metadata`` answer), and its first ``ApiVersions`` request's
    version and identity fields (version -1: it sent none)."""

    broker: int
    known: bool
    api_version: int
    cluster_id: str | None
    node_id: int

    @property
    def carries_identity(self) -> bool:
        return self.cluster_id is not None and self.node_id >= 0


@dataclass(frozen=True, slots=True)
class IdentityStart:
    """One client start: its connections as the wire showed them, and its own log's census."""

    client: IdentityClient
    index: int
    connections: tuple[WireConnection, ...]
    census: IdentityCensus

    @property
    def known(self) -> tuple[WireConnection, ...]:
        return tuple(c for c in self.connections if c.known)

    @property
    def bootstrap(self) -> tuple[WireConnection, ...]:
        return tuple(c for c in self.connections if not c.known)


def wire_connections(traces: Sequence[ConnectionTrace]) -> tuple[WireConnection, ...]:
    """Each traced connection of a start as a :class:`WireConnection`, in accept order."""
    bootstrap, _ = split_at_first_metadata(list(traces))
    out = []
    for t in traces:
        asked = t.api_versions()
        first = asked[0] if asked else None
        out.append(
            WireConnection(
                broker=t.broker,
                known=t not in bootstrap,
                api_version=-1 if first is None else first.api_version,
                cluster_id=None if first is None else first.cluster_id,
                node_id=-1 if first is None else first.node_id,
            )
        )
    return tuple(out)


def _admin_start(
    index: int,
    access: ListenerAccess,
    recorder: WireRecorder,
    logs: Path,
) -> IdentityStart:
    from connmgr_evidence.java import build_probe, run_probe

    log = logs / f"admin-{index}.log"
    began = time.monotonic()
    run_probe(
        build_probe(JAVA_VERSION),
        client="admin",
        bootstrap=access.bootstrap_servers,
        topic="unused",
        partitions=1,
        records=0,
        settle_ms=500,
        extra=access.java_properties(),
        sample=lambda pid: None,
        log_path=log,
        log_level="DEBUG",
        timeout_s=START_TIMEOUT_S,
    )
    traces = recorder.traces(since=began, until=time.monotonic())
    return IdentityStart(
        "admin", index, wire_connections(traces), identity_census(f"admin {index}", log)
    )


def _producer_starts(
    access: ListenerAccess,
    recorder: WireRecorder,
    topic: str,
    starts: int,
    logs: Path,
    progress: Callable[[IdentityStart], None],
) -> list[IdentityStart]:
    from connmgr_evidence.java import build_probe
    from connmgr_evidence.java.serverless import ServerlessProbe

    log = logs / "producer.log"
    out = []
    with ServerlessProbe(
        build_probe(JAVA_VERSION),
        bootstrap=access.bootstrap_servers,
        topic=topic,
        partitions=len(_LEADERS),
        records=len(_LEADERS),
        value_prefix="identity",
        extra=access.java_properties(),
        log_path=log,
        log_level="DEBUG",
        timeout_s=START_TIMEOUT_S,
    ) as probe:
        for index in range(starts):
            began = time.monotonic()
            probe.run_start(index, lambda pid: None)
            traces = recorder.traces(since=began, until=time.monotonic())
            out.append(IdentityStart("producer", index, wire_connections(traces), _EMPTY))
            progress(out[-1])
    # One JVM logs every producer: each start's census is its client id's lines.
    return [IdentityStart(s.client, s.index, s.connections, _census_of(log, s.index)) for s in out]


_EMPTY: Final = IdentityCensus("", (), ())


def _census_of(log: Path, index: int) -> IdentityCensus:
    """The census of the serverless probe's producer number ``index`` (the JVM's
    ``index + 1``-th producer, client id ``producer-<index + 1>``)."""
    tag = f"clientId=producer-{index + 1}]"
    lines = [line for line in log.read_text(errors="replace").splitlines() if tag in line]
    part = log.with_name(f"{log.stem}-{index}.census.log")
    part.write_text("\n".join(lines) + "\n")
    return identity_census(f"producer {index}", part)


def measure(
    cluster: KafkaCluster,
    *,
    starts: int = 5,
    clients: Sequence[IdentityClient] = ("admin", "producer"),
    logs: Path,
    progress: Callable[[IdentityStart], None] = lambda start: None,
) -> list[IdentityStart]:
    """``starts`` starts of each of ``clients`` (kafka-clients :data:`JAVA_VERSION`) on a
    running ``security=True`` ``cluster`` of three brokers, over its traced PLAINTEXT client
    listener. Synchronous. Raises ValueError for ``starts < 1`` or an unknown client."""
    if starts < 1 or not set(clients) <= {"admin", "producer"}:
        raise ValueError(f"starts must be >= 1 and clients admin/producer, got {starts}, {clients}")
    logs.mkdir(parents=True, exist_ok=True)
    access = cluster.secure.access("PLAINTEXT")
    topic = f"identity-{time.time_ns()}"
    cluster.create_topic_with_leaders(topic, list(_LEADERS))
    out: list[IdentityStart] = []
    with recording(cluster.secure.network, recorder_ports(access)) as recorder:
        for client in clients:
            if client == "admin":
                for index in range(starts):
                    out.append(_admin_start(index, access, recorder, logs))
                    progress(out[-1])
            else:
                out += _producer_starts(access, recorder, topic, starts, logs, progress)
    return out
