"""Cluster metadata as the client sees it: brokers with endpoints, partition leaders.

Metadata objects are immutable snapshots. Lookup tables are built lazily, once per snapshot,
so a 10,000-broker snapshot shared by many events costs its indexing only once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from connmgr.core.endpoint import Endpoint


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True, order=True)
class BrokerInfo:
    """A broker as a metadata response lists it."""

    broker_id: int
    endpoint: Endpoint
    rack: str | None = None


@dataclass(frozen=True)
class ClusterMetadata:
    """One metadata response: cluster id, live brokers, and the leaders of the partitions the
    client asked about (in partition order, which is the order clients walk them)."""

    cluster_id: str | None
    brokers: tuple[BrokerInfo, ...]
    leaders: tuple[tuple[TopicPartition, int], ...] = field(default=())

    @classmethod
    def build(
        cls,
        cluster_id: str | None,
        brokers: Iterable[BrokerInfo],
        leaders: Mapping[TopicPartition, int] | Iterable[tuple[TopicPartition, int]] = (),
    ) -> ClusterMetadata:
        items = leaders.items() if isinstance(leaders, Mapping) else leaders
        return cls(cluster_id, tuple(brokers), tuple(sorted(items)))

    @cached_property
    def by_id(self) -> Mapping[int, BrokerInfo]:
        return {b.broker_id: b for b in self.brokers}

    @cached_property
    def ids_by_endpoint(self) -> Mapping[Endpoint, frozenset[int]]:
        """Every broker id listed at each endpoint; more than one id means a shared endpoint."""
        grouped: dict[Endpoint, set[int]] = {}
        for b in self.brokers:
            grouped.setdefault(b.endpoint, set()).add(b.broker_id)
        return {ep: frozenset(ids) for ep, ids in grouped.items()}

    def ids_at(self, endpoint: Endpoint) -> frozenset[int]:
        """The broker ids listed at ``endpoint`` (a scan: a client asks this for its one
        bootstrap connection, and grouping a thousand brokers would cost more)."""
        if "ids_by_endpoint" in self.__dict__:
            return self.ids_by_endpoint.get(endpoint, frozenset())
        return frozenset(b.broker_id for b in self.brokers if b.endpoint == endpoint)

    @cached_property
    def leader_of(self) -> Mapping[TopicPartition, int]:
        return dict(self.leaders)

    @cached_property
    def leader_ids(self) -> frozenset[int]:
        return frozenset(leader for _, leader in self.leaders)

    def endpoint_of(self, broker_id: int) -> Endpoint | None:
        info = self.by_id.get(broker_id)
        return info.endpoint if info is not None else None

    def leaders_for(self, partitions: Iterable[TopicPartition]) -> frozenset[int]:
        """The leader ids of those of ``partitions`` this snapshot knows."""
        table = self.leader_of
        return frozenset(table[tp] for tp in partitions if tp in table)
