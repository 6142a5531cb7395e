"""KIP-1242's identity check (Apache Kafka 4.4), spoken on aiokafka connections.

``ApiVersions`` v5 adds two fields after the ClientSoftware pair: ``ClusterId`` (nullable
compact string) and ``NodeId`` (int32). A 4.4 broker given both compares them with its own
cluster id and node id: equal, it answers error 0 and its API list; different, it answers
error 129 ``REBOOTSTRAP_REQUIRED`` with an empty list and **leaves the connection open** (the
client closes it). Only one of the two set is error 42 ``INVALID_REQUEST``; neither set is no
check at all. On a SASL listener an ``ApiVersions`` sent before authentication completes is
answered by the authenticator and never checked, so a check means something only once the
connection is authenticated (every use here is after aiokafka's ``connect()``, which
authenticates). Facts pinned on a real 4.4.0 broker by ``tests/real_kafka/test_kip1242.py``.

aiokafka 0.14 knows ``ApiVersions`` up to v2; v5 is declared here from the message's schema
(``ApiVersionsRequest.json``), on aiokafka's own protocol types.
"""

from __future__ import annotations

import enum
from io import BytesIO
from typing import Any, ClassVar, Final

import aiokafka.errors as kafka_errors
from aiokafka.protocol.api import Request, RequestStruct, Response, ResponseHeader_v0
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

__all__ = [
    "API_VERSIONS_KEY",
    "CHECK_VERSION",
    "INVALID_REQUEST",
    "REBOOTSTRAP_REQUIRED",
    "CheckAnswer",
    "IdentityCheckRequest",
    "IdentityRejected",
    "answers_identity_check",
    "check_identity",
]

API_VERSIONS_KEY: Final = 18
CHECK_VERSION: Final = 5
"""The first ``ApiVersions`` version that carries ``ClusterId`` and ``NodeId``."""
REBOOTSTRAP_REQUIRED: Final = 129
"""The broker is not node ``NodeId`` of cluster ``ClusterId``."""
INVALID_REQUEST: Final = 42
"""Only one of ``ClusterId`` and ``NodeId`` was set."""
SOFTWARE_NAME: Final = "connmgr"
SOFTWARE_VERSION: Final = "0.1.0"


class ApiVersionsResponse_v5(Response):  # type: ignore[misc]
    API_KEY = API_VERSIONS_KEY
    API_VERSION = CHECK_VERSION
    # The supported/finalized features are tagged fields, read past by TaggedFields.
    SCHEMA = Schema(
        ("error_code", Int16),
        (
            "api_keys",
            CompactArray(
                ("api_key", Int16),
                ("min_version", Int16),
                ("max_version", Int16),
                ("tags", TaggedFields),
            ),
        ),
        ("throttle_time_ms", Int32),
        ("tags", TaggedFields),
    )


class ApiVersionsRequest_v5(RequestStruct):  # type: ignore[misc]
    API_KEY = API_VERSIONS_KEY
    API_VERSION = CHECK_VERSION
    RESPONSE_TYPE = ApiVersionsResponse_v5
    FLEXIBLE_VERSION = True  # request header v2
    SCHEMA = Schema(
        ("client_software_name", CompactString("utf-8")),
        ("client_software_version", CompactString("utf-8")),
        ("cluster_id", CompactString("utf-8")),
        ("node_id", Int32),
        ("tags", TaggedFields),
    )

    def parse_response_header(self, read_buffer: BytesIO | bytes) -> Any:
        # ApiVersions answers always use response header v0, at every version, so that a
        # client that sent a version the broker does not know can still read the answer.
        return ResponseHeader_v0.decode(read_buffer)


class IdentityCheckRequest(Request[ApiVersionsRequest_v5]):  # type: ignore[misc]
    """``ApiVersions`` v5 asking the broker whether it is node ``node_id`` of cluster
    ``cluster_id`` (both None: an ordinary v5, no check)."""

    API_KEY: ClassVar[int] = API_VERSIONS_KEY

    def __init__(self, cluster_id: str | None, node_id: int | None) -> None:
        self.cluster_id = cluster_id
        self.node_id = -1 if node_id is None else node_id

    def build(self, request_struct_class: type[ApiVersionsRequest_v5]) -> ApiVersionsRequest_v5:
        return request_struct_class(
            SOFTWARE_NAME, SOFTWARE_VERSION, self.cluster_id, self.node_id, {}
        )


class CheckAnswer(enum.Enum):
    """How a broker answered one identity check."""

    CONFIRMED = "confirmed"
    """Error 0: the broker is that node of that cluster."""
    REJECTED = "rejected"
    """Error 129 ``REBOOTSTRAP_REQUIRED``: it is another node, or another cluster's."""
    FAILED = "failed"
    """Any other error, or no answer: nothing was confirmed."""


class IdentityRejected(kafka_errors.KafkaConnectionError):  # type: ignore[misc]
    """A new connection reached a broker that is not the node it was dialled for: the
    broker answered the dial's identity check with ``REBOOTSTRAP_REQUIRED``."""


def answers_identity_check(conn: Any) -> bool:
    """Whether the broker behind aiokafka connection ``conn`` accepts ``ApiVersions`` v5
    (Kafka 4.4 and newer), from the versions it listed in the connection's handshake."""
    versions: dict[int, tuple[int, int]] = getattr(conn, "_versions", {}) or {}
    span = versions.get(API_VERSIONS_KEY)
    return span is not None and span[0] <= CHECK_VERSION <= span[1]


async def check_identity(conn: Any, cluster_id: str, node_id: int) -> CheckAnswer:
    """Ask the broker on ``conn`` (connected, authenticated) whether it is node ``node_id``
    of cluster ``cluster_id``. Never raises for the broker's answer or a broken connection:
    anything but error 0 or 129 is :attr:`CheckAnswer.FAILED`."""
    try:
        response = await conn.send(IdentityCheckRequest(cluster_id, node_id))
    except (kafka_errors.KafkaError, OSError, TimeoutError):
        return CheckAnswer.FAILED
    if response.error_code == 0:
        return CheckAnswer.CONFIRMED
    if response.error_code == REBOOTSTRAP_REQUIRED:
        return CheckAnswer.REJECTED
    return CheckAnswer.FAILED
