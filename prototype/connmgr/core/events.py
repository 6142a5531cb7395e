"""Events: what a driver (simulator or real client) tells a policy.

Every event is an immutable value. Request ids are chosen by the driver and are unique per
client; connection ids are chosen by the policy (in its ``Connect`` actions) and echoed back.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from connmgr.core.api import Api as Api  # re-exported: events name their request type
from connmgr.core.coordinator import ANY_GROUP, CoordinatorRef
from connmgr.core.metadata import ClusterMetadata, TopicPartition
from connmgr.errors import PolicyMisuse


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
    """A request for coordinator ``coordinator``, which the client found on ``broker_id``.

    The request also tells the policy where that coordinator is now (its placement replaces
    any earlier one for the same coordinator; other coordinators are untouched).
    """

    request_id: int
    api: Api
    broker_id: int
    coordinator: CoordinatorRef = ANY_GROUP


@dataclass(frozen=True, slots=True)
class CoordinatorLost:
    """The client no longer knows where ``coordinator`` is (NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE, or it is looking it up again): its placement is void until the
    next request for it names a broker. Other coordinators are untouched."""

    coordinator: CoordinatorRef


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
    address: str | None = None
    """The resolved address the socket reached (its peer IP), or None when the driver does
    not resolve names (the host is a literal, or the driver leaves resolution to the OS)."""
    checks_identity: bool = False
    """The broker answers KIP-1242's identity check (``ApiVersions`` v5, Kafka 4.4+) on this
    connection, which is authenticated: a policy may send it ``CheckIdentity``."""


class IdentityAnswer(Enum):
    """How a broker answered an identity check (KIP-1242)."""

    CONFIRMED = "confirmed"
    """Error 0: the broker is that node of that cluster."""
    REJECTED = "rejected"
    """Error 129 ``REBOOTSTRAP_REQUIRED``: it is another node, or another cluster's."""
    FAILED = "failed"
    """Another error, or no answer: nothing was confirmed."""


@dataclass(frozen=True, slots=True)
class IdentityChecked:
    """The answer to ``CheckIdentity(conn_id, broker_id, ...)``."""

    conn_id: int
    broker_id: int
    answer: IdentityAnswer


class LookupOutcome(Enum):
    """How one lookup of a host name ended. Only :attr:`ANSWERED` says where the name
    points; every other outcome is a failed lookup, which says nothing about any connection
    (a DNS outage is not a broker moving)."""

    ANSWERED = "answered"
    """A successful answer naming at least one address."""
    EMPTY = "empty"
    """An answer with no address in it (the name exists but has no address record)."""
    NO_SUCH_NAME = "no_such_name"
    """NXDOMAIN: the name does not exist (a record removed, or a resolver gone astray)."""
    SERVER_FAILURE = "server_failure"
    """SERVFAIL, a temporary failure (``EAI_AGAIN``), or any other resolver error."""
    TIMEOUT = "timeout"
    """No answer within the driver's lookup timeout."""


@dataclass(frozen=True, slots=True)
class AddressesResolved:
    """The driver looked up host name ``host`` (an :class:`~connmgr.core.endpoint.Endpoint`'s
    host) and the lookup ended with ``outcome``: :attr:`LookupOutcome.ANSWERED` with the
    (non-empty) ``addresses`` the name names now, or a failure with ``addresses`` empty.
    A driver that resolves names reports every lookup it makes, failed or not, changed or
    not (see :mod:`connmgr.core.driver`).

    A connection established to an address a successful answer leaves out may reach a
    machine the name no longer names (a Kubernetes pod restarted under its DNS name with a
    new IP): what a policy does about it is its own (the proposed policy's rule (h2);
    today's clients never re-check a live connection's address). Raises
    :class:`~connmgr.errors.PolicyMisuse` for an answer without addresses or a failure
    with some: an empty answer is :attr:`LookupOutcome.EMPTY`, never a successful one."""

    host: str
    addresses: frozenset[str]
    outcome: LookupOutcome = LookupOutcome.ANSWERED

    def __post_init__(self) -> None:
        if (self.outcome is LookupOutcome.ANSWERED) != bool(self.addresses):
            raise PolicyMisuse(
                f"lookup of {self.host!r}: outcome {self.outcome.value} with "
                f"{len(self.addresses)} addresses (only a non-empty answer is 'answered')"
            )

    @classmethod
    def failed(cls, host: str, outcome: LookupOutcome) -> AddressesResolved:
        """The report of a lookup of ``host`` that failed with ``outcome``."""
        return cls(host, frozenset(), outcome)

    @property
    def answered(self) -> bool:
        """Whether the lookup succeeded (with at least one address)."""
        return self.outcome is LookupOutcome.ANSWERED


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
    """Request ``request_id`` was answered (any answer but a metadata one, see
    MetadataReceived): the connection it was leased did its job."""

    request_id: int


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """Leased request ``request_id`` ended without an answer: it timed out, or its write or
    read failed. Its connection, if broken, is reported separately (ConnectionClosedByPeer);
    the caller retries with a new request id, so the policy forgets this one."""

    request_id: int


@dataclass(frozen=True, slots=True)
class RequestWithdrawn:
    """The caller no longer wants request ``request_id``: it gave up waiting for a
    connection, was cancelled, or took a lease only to probe readiness. Sent or not, the
    policy forgets it and does not place it again."""

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
    | CoordinatorLost
    | InterestChanged
    | ConnectionEstablished
    | IdentityChecked
    | AddressesResolved
    | ConnectionFailed
    | ConnectionClosedByPeer
    | ResponseReceived
    | RequestFailed
    | RequestWithdrawn
    | TimePassed
    | ClientClosed
)
