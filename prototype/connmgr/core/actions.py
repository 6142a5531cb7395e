"""Actions: what a policy asks its driver to do. The driver performs them in order."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from connmgr.core.identity import ConnectionKey


class CloseReason(enum.Enum):
    IDLE = "idle"
    """No request for ``connections.max.idle.ms``."""
    UNNEEDED = "unneeded"
    """Nothing needs the connection any more and its linger ran out (proposed policy)."""
    NOT_ADOPTED = "not_adopted"
    """A bootstrap connection that could not safely become a broker connection."""
    BOOTSTRAP_DONE = "bootstrap_done"
    """aiokafka closes its bootstrap connection once metadata arrived."""
    IDENTITY_REJECTED = "identity_rejected"
    """The broker on a bootstrap connection answered KIP-1242's check with
    ``REBOOTSTRAP_REQUIRED``: it is not the node metadata places at the connection's
    host:port."""
    ENDPOINT_CHANGED = "endpoint_changed"
    """Metadata moved the node to another host:port."""
    STALE_ADDRESS = "stale_address"
    """The connection's host name no longer resolves to the address it reached (two
    successful answers in a row left it out; a failed lookup never closes)."""
    BUDGET = "budget"
    """Closed to make room under ``max_connections``."""
    SHUTDOWN = "shutdown"
    """The client was closed."""


@dataclass(frozen=True, slots=True)
class Connect:
    """Dial ``key.endpoint``; report back with ConnectionEstablished/Failed(conn_id)."""

    conn_id: int
    key: ConnectionKey


@dataclass(frozen=True, slots=True)
class Lease:
    """Lend READY connection ``conn_id`` to request ``request_id``: the caller writes the
    request there and reports how it ended (ResponseReceived or MetadataReceived,
    RequestFailed, RequestWithdrawn)."""

    conn_id: int
    request_id: int


@dataclass(frozen=True, slots=True)
class Close:
    conn_id: int
    reason: CloseReason


@dataclass(frozen=True, slots=True)
class Adopt:
    """The socket ``conn_id`` keeps running under a new identity: no I/O, only bookkeeping
    (a real client moves it in its connection table)."""

    conn_id: int
    old_key: ConnectionKey
    new_key: ConnectionKey


@dataclass(frozen=True, slots=True)
class CheckIdentity:
    """Ask the broker on READY connection ``conn_id`` whether it is broker ``broker_id`` of
    cluster ``cluster_id`` (KIP-1242: ``ApiVersions`` v5, Kafka 4.4+); feed
    ``IdentityChecked`` with its answer. The connection stays usable meanwhile."""

    conn_id: int
    broker_id: int
    cluster_id: str


class RejectReason(enum.Enum):
    BROKER_GONE = "broker_gone"
    """Metadata newer than the request no longer lists the broker it must reach: the caller
    re-targets it (a producer re-drains its batch to the new leader, a group member looks its
    coordinator up again), as it would after NOT_LEADER or NOT_COORDINATOR."""


@dataclass(frozen=True, slots=True)
class Reject:
    """Hand request ``request_id`` back to its caller unsent: the policy can never place it
    (see :class:`RejectReason`). The driver fails it at once with the client's own retriable
    error, instead of letting it wait out ``request_timeout_ms``."""

    request_id: int
    reason: RejectReason


@dataclass(frozen=True, slots=True)
class RefreshMetadata:
    """A request cannot be placed until metadata names its broker (there is none yet, or the
    broker is missing from it): fetch metadata now. The policy asks at most once per metadata
    response; the request stays pending and is placed, or rejected, when the answer comes."""


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Deliver a TimePassed event at ``at_ms`` (or later); replaces any earlier WakeAt."""

    at_ms: float


Action = Connect | Lease | Close | Adopt | CheckIdentity | Reject | RefreshMetadata | WakeAt
