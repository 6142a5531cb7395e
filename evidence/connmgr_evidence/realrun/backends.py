"""Clusters a real run can use: the embedded mock (fresh per run) or a real Kafka cluster
(started once, shared by many runs). One small interface over both."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol

from connmgr.embedded import MockCluster

_RUN_NUMBERS = itertools.count(1)


class ClusterBackend(Protocol):
    """What a real run needs from a cluster."""

    shared: bool
    """True if other runs use the cluster too: topic and group names must then be unique."""

    def endpoints(self) -> dict[int, tuple[str, int]]: ...

    def listeners(self) -> dict[int, tuple[str, int]]: ...

    def create_topic_with_leaders(self, name: str, leaders: Sequence[int]) -> None: ...

    def group_coordinated_by(self, group: str, broker_id: int) -> str:
        """A group name (``group`` if possible) whose coordinator is ``broker_id``."""
        ...

    def transaction_coordinated_by(self, transactional_id: str, broker_id: int) -> str:
        """A transactional id (``transactional_id`` if possible) whose transaction
        coordinator is ``broker_id``."""
        ...

    def set_rtt(self, rtt_ms: float) -> None: ...

    def clear_requests(self) -> None: ...

    def requests(self) -> list[dict[str, Any]]:
        """Requests the brokers received since clear_requests(), if the cluster tracks them."""
        ...


class MockBackend:
    """The embedded librdkafka mock cluster: coordinators are placed, requests tracked."""

    shared = False

    def __init__(self, cluster: MockCluster) -> None:
        self.cluster = cluster

    def endpoints(self) -> dict[int, tuple[str, int]]:
        return self.cluster.endpoints()

    def listeners(self) -> dict[int, tuple[str, int]]:
        return self.cluster.listeners()

    def create_topic_with_leaders(self, name: str, leaders: Sequence[int]) -> None:
        self.cluster.create_topic_with_leaders(name, leaders)

    def group_coordinated_by(self, group: str, broker_id: int) -> str:
        self.cluster.set_coordinator("group", group, broker_id)
        return group

    def transaction_coordinated_by(self, transactional_id: str, broker_id: int) -> str:
        self.cluster.set_coordinator("transaction", transactional_id, broker_id)
        return transactional_id

    def set_rtt(self, rtt_ms: float) -> None:
        self.cluster.set_rtt_all(int(rtt_ms))

    def clear_requests(self) -> None:
        self.cluster.clear_requests()

    def requests(self) -> list[dict[str, Any]]:
        return [
            {"t_us": r.timestamp_us, "broker": r.broker_id, "api": r.api_name}
            for r in self.cluster.requests()
        ]


def unique_name(base: str) -> str:
    """``base`` made unique within this process, for clusters shared between runs."""
    return f"{base}-r{next(_RUN_NUMBERS)}"


class KafkaBackend:
    """A real Apache Kafka cluster (``connmgr_evidence.realkafka.KafkaCluster``), shared by runs:
    groups cannot be placed, so a group name whose coordinator is the wanted broker is
    searched for; RTT cannot be injected; requests are not tracked."""

    shared = True

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster

    def endpoints(self) -> dict[int, tuple[str, int]]:
        endpoints: dict[int, tuple[str, int]] = self.cluster.endpoints()
        return endpoints

    def listeners(self) -> dict[int, tuple[str, int]]:
        listeners: dict[int, tuple[str, int]] = self.cluster.listeners()
        return listeners

    def create_topic_with_leaders(self, name: str, leaders: Sequence[int]) -> None:
        self.cluster.create_topic_with_leaders(name, leaders)

    def group_coordinated_by(self, group: str, broker_id: int) -> str:
        name: str = self.cluster.group_for_coordinator(broker_id, prefix=group)
        return name

    def transaction_coordinated_by(self, transactional_id: str, broker_id: int) -> str:
        from connmgr.errors import ConfigError

        # A transactional id's coordinator is the leader of its __transaction_state
        # partition; connmgr_evidence.realkafka has no search for such an id (yet).
        raise ConfigError(
            "transactional scenarios cannot be placed on a real Kafka cluster yet; "
            "use the embedded cluster"
        )

    def set_rtt(self, rtt_ms: float) -> None:
        from connmgr.errors import ConfigError

        raise ConfigError("a real Kafka cluster cannot inject RTT; use the embedded cluster")

    def clear_requests(self) -> None:
        pass

    def requests(self) -> list[dict[str, Any]]:
        return []
