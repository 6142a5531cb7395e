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

from io import BytesIO
from typing import Any, ClassVar, Final

import aiokafka.errors as kafka_errors
from aiokafka.conn import AIOKafkaConnection
from aiokafka.protocol.api import Request, RequestStruct, Response, ResponseHeader_v0
from aiokafka.protocol.types import (
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from connmgr.core.events import IdentityAnswer

__all__ = [
    "API_VERSIONS_KEY",
    "CHECK_VERSION",
    "INVALID_REQUEST",
    "REBOOTSTRAP_REQUIRED",
    "CheckAnswer",
    "CheckedConnection",
    "IdentityCheckRequest",
    "IdentityRejected",
    "answers_identity_check",
    "check_identity",
    "confirmed_conn",
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
_UNSUPPORTED_VERSION: Final = 35


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

    @classmethod
    def decode(cls, data: BytesIO | bytes) -> Any:
        buffer = BytesIO(data) if isinstance(data, bytes) else data
        start = buffer.tell()
        if Int16.decode(buffer) == _UNSUPPORTED_VERSION:
            # A broker that does not know v5 answers in v0's layout: only its error counts.
            return cls(_UNSUPPORTED_VERSION, [], 0, {})
        buffer.seek(start)
        return super().decode(buffer)


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
    ALLOW_UNKNOWN_API_VERSION: ClassVar[bool] = True
    """Sendable as a connection's first request, before any version is known (the broker
    must then accept v5: :class:`CheckedConnection` sends it so only to a 4.4+ cluster)."""

    def __init__(self, cluster_id: str | None, node_id: int | None) -> None:
        self.cluster_id = cluster_id
        self.node_id = -1 if node_id is None else node_id

    def build(self, request_struct_class: type[ApiVersionsRequest_v5]) -> ApiVersionsRequest_v5:
        return request_struct_class(
            SOFTWARE_NAME, SOFTWARE_VERSION, self.cluster_id, self.node_id, {}
        )


CheckAnswer = IdentityAnswer
"""How a broker answered one identity check (the core's value: drivers feed it back)."""


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
    anything but error 0 or 129 is :attr:`CheckAnswer.FAILED`, and so is a broker that does
    not accept v5 (it is not asked: a lower version would drop the fields unchecked)."""
    if not answers_identity_check(conn):
        return CheckAnswer.FAILED
    try:
        response = await conn.send(IdentityCheckRequest(cluster_id, node_id))
    except (kafka_errors.KafkaError, OSError, TimeoutError):
        return CheckAnswer.FAILED
    if response.error_code == 0:
        return CheckAnswer.CONFIRMED
    if response.error_code == REBOOTSTRAP_REQUIRED:
        return CheckAnswer.REJECTED
    return CheckAnswer.FAILED


class CheckedConnection(AIOKafkaConnection):  # type: ignore[misc]
    """An aiokafka connection dialled for a known node ``node_id`` of cluster ``cluster_id``
    whose set-up confirms that the broker is that node (KIP-1242), as Java 4.4's
    ``NetworkClient`` does; ``connect()`` raises :class:`IdentityRejected` if it is not.

    Only for a cluster whose brokers accept ``ApiVersions`` v5 (seen on an earlier
    connection). Without SASL the handshake's own ``ApiVersions`` is the v5 check: no extra
    round trip. With SASL a pre-authentication ``ApiVersions`` is not checked by the broker,
    so aiokafka's handshake and authentication run unchanged and the check follows them: one
    more round trip, as Java's post-authentication ``ApiVersions`` costs."""

    def __init__(self, host: str, port: int, *, cluster_id: str, node_id: int, **kw: Any):
        super().__init__(host, port, **kw)
        self.identity = (cluster_id, node_id)

    @property
    def _sasl(self) -> bool:
        return str(self._security_protocol).startswith("SASL_")

    async def connect(self) -> Any:
        streams = await super().connect()
        if self._sasl:
            cluster_id, node_id = self.identity
            answer = await check_identity(self, cluster_id, node_id)
            if answer is not IdentityAnswer.CONFIRMED:
                self.close()
                raise IdentityRejected(f"{self._host}:{self._port} is not node {node_id}")
        return streams

    async def _do_version_lookup(self) -> None:
        if self._sasl:
            await super()._do_version_lookup()
            return
        cluster_id, node_id = self.identity
        response = await self.send(IdentityCheckRequest(cluster_id, node_id))
        if response.error_code == REBOOTSTRAP_REQUIRED:
            raise IdentityRejected(f"{self._host}:{self._port} is not node {node_id}")
        if response.error_code == _UNSUPPORTED_VERSION:
            await super()._do_version_lookup()  # the broker was downgraded since: ask plainly
            return
        if response.error_code != 0:
            raise kafka_errors.for_code(response.error_code)(
                f"ApiVersions v5 to {self._host}:{self._port}"
            )
        self._versions = {key: (low, high) for key, low, high, _ in response.api_keys}


async def confirmed_conn(
    host: str, port: int, cluster_id: str, node_id: int, **settings: Any
) -> CheckedConnection:
    """aiokafka's ``create_conn`` for a known node: connected, authenticated, and confirmed
    to be node ``node_id`` of ``cluster_id`` (:class:`IdentityRejected` otherwise)."""
    conn = CheckedConnection(host, port, cluster_id=cluster_id, node_id=node_id, **settings)
    await conn.connect()
    return conn
