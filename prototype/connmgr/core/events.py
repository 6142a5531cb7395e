"""Events: what a driver (simulator or real client) tells a policy.

Every event is an immutable value. Request ids are chosen by the driver and are unique per
client; connection ids are chosen by the policy (in its ``Connect`` actions) and echoed back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from connmgr.core.metadata import ClusterMetadata, TopicPartition


class Api(enum.IntEnum):
    """Kafka request types; values are the protocol's API keys (the one table of them in
    this project: the embedded cluster's request tracking names requests with it too)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CONSUMER_GROUP_HEARTBEAT = 68
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    OTHER = -1
    """Any other request, or a readiness probe that only needs the connection."""

    @classmethod
    def from_key(cls, api_key: int) -> Api:
        try:
            return cls(api_key)
        except ValueError:
            return cls.OTHER


@dataclass(frozen=True, slots=True)
class BootstrapRequested:
    """The client needs its first metadata and knows only ``bootstrap.servers``.

    ``request_id`` is the metadata request the policy must place on a bootstrap connection.
    """

    request_id: int


@dataclass(frozen=True, slots=True)
class MetadataReceived:
    """The response to metadata request ``request_id`` arrived, carrying ``metadata``.

    It completes that request (no separate ResponseReceived follows).
    """

    request_id: int
    metadata: ClusterMetadata


@dataclass(frozen=True, slots=True)
class BrokerRequestNeeded:
    """A request that must reach broker ``broker_id`` (produce, fetch, list offsets)."""

    request_id: int
    api: Api
    broker_id: int


@dataclass(frozen=True, slots=True)
class AnyNodeRequestNeeded:
    """A request any live broker can answer (Metadata, FindCoordinator, ApiVersions, ...)."""

    request_id: int
    api: Api


@dataclass(frozen=True, slots=True)
class CoordinatorRequestNeeded:
    """A group request for the coordinator hosted by broker ``broker_id``."""

    request_id: int
    api: Api
    broker_id: int


@dataclass(frozen=True, slots=True)
class InterestChanged:
    """The partitions the client works with now (assignment, or topics produced to).

    Until a policy receives one, every partition in the latest metadata counts as in use.
    """

    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class ConnectionEstablished:
    conn_id: int
    node_id: int | None = None
    """The broker id the peer confirmed on this connection (an identity check the
    protocol lacks today), or None when the broker cannot say -- every Kafka release to date."""


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """A dial did not produce a usable connection (refused, timed out, handshake failed)."""

    conn_id: int


@dataclass(frozen=True, slots=True)
class ConnectionClosedByPeer:
    """An established connection was closed from the other side; its in-flight requests are
    lost and the policy re-routes them."""

    conn_id: int


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    request_id: int


@dataclass(frozen=True, slots=True)
class TimePassed:
    """Nothing happened but time: a wake-up the policy asked for, or a driver tick."""


@dataclass(frozen=True, slots=True)
class ClientClosed:
    """The application closed the client: every connection must go."""


Event = (
    BootstrapRequested
    | MetadataReceived
    | BrokerRequestNeeded
    | AnyNodeRequestNeeded
    | CoordinatorRequestNeeded
    | InterestChanged
    | ConnectionEstablished
    | ConnectionFailed
    | ConnectionClosedByPeer
    | ResponseReceived
    | TimePassed
    | ClientClosed
)
