"""Kafka request types (API keys): the one table of them in this project."""

from __future__ import annotations

import enum


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
