"""The proposal's figures for one logged client: the ``proposed`` policy itself, driven by the
requests the client's log shows.

Nothing here decides where a request goes or when a connection opens or closes: the policy
(:class:`~connmgr.policies.proposed.policy.ProposedPolicy`) does, through the driver contract
(:mod:`connmgr.core.driver`). :class:`LogReplay` is a driver whose world is the log:

* **Requests.** Each logged request (time, API, the connection id it was sent to) becomes the
  event a client feeds for it: ``AnyNodeRequestNeeded`` for the any-node APIs
  (:data:`ANY_NODE_APIS`) and anything sent to a bootstrap connection (the first one
  ``BootstrapRequested``, preceded by one if the log starts with another request);
  ``CoordinatorRequestNeeded`` for a request to a coordinator id (``2147483647 - B``, 4.4's
  ``+B``: the group's coordinator on B) or for a coordinator API sent to a broker id (a
  producer's transaction or group coordinator); ``BrokerRequestNeeded`` for the rest.
* **Answers.** A leased request is answered at once (the log has no answer times): a metadata
  request with the metadata the log implies (:func:`log_metadata`), any other with
  ``ResponseReceived``. Dials succeed at once; a broker asked KIP-1242's identity check
  confirms it when the log shows it at that host:port (``brokers_check_identity``, the
  default: brokers of Kafka 4.4+).
* **Time.** The clock jumps from request to request; a wake-up the policy asked for fires at
  its own time when it falls strictly before the next request (or the log's end).

What the replay counts is what the driver was told to do: each ``Connect`` opens a
connection (by the role of its key), each ``Close`` ends one, an ``Adopt`` keeps the socket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from connmgr.core.actions import CloseReason, RejectReason
from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.coordinator import GROUP_APIS, TRANSACTION_APIS, CoordinatorRef
from connmgr.core.driver import EventPump
from connmgr.core.endpoint import Endpoint
from connmgr.core.events import (
    AnyNodeRequestNeeded,
    Api,
    BootstrapRequested,
    BrokerRequestNeeded,
    ConnectionEstablished,
    CoordinatorRequestNeeded,
    Event,
    IdentityAnswer,
    IdentityChecked,
    MetadataReceived,
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import COORDINATOR_ID_BASE, ConnectionKey, Role
from connmgr.core.metadata import BrokerInfo, ClusterMetadata, TopicPartition
from connmgr.policies.proposed import ProposedPolicy
from connmgr.seeding import derive_rng

ROLES: Final = ("bootstrap", "coordinator", "broker")
ROLE_NAMES: Final = {
    Role.BOOTSTRAP: "bootstrap",
    Role.COORDINATION: "coordinator",
    Role.DATA: "broker",
}
"""The estimate's name of each role a connection key has."""
ANY_NODE_APIS: Final = frozenset(
    {
        "METADATA",
        "FIND_COORDINATOR",
        "INIT_PRODUCER_ID",
        "DESCRIBE_CLUSTER",
        "GET_TELEMETRY_SUBSCRIPTIONS",
        "PUSH_TELEMETRY",
        "LIST_GROUPS",
        "DESCRIBE_CONFIGS",
        "CREATE_TOPICS",
        "DELETE_TOPICS",
        "CREATE_PARTITIONS",
    }
)
"""Requests a client may send to any node: they need no connection of their own. The admin
client's controller-bound requests are among them: it sends them to the least-loaded node."""
COORDINATOR_FLOOR: Final = 2**30
"""Printed ids at or above this are ``2147483647 - B`` coordinator ids (a broker id is far
smaller)."""
CLUSTER_ID: Final = "logged-cluster"
"""The cluster id of the metadata the replay answers with (a log does not show it; one id
for every answer, so the cluster never changes)."""
TOPIC: Final = "logged"
"""The topic of the replay's metadata: partition B led by broker B, for each broker the log
sent partition requests to."""
SEED: Final = 0
"""The seed of the policy's random source (the bootstrap server it starts with is pinned to
the logged one; its other draws, a broker for an any-node request when nothing is open,
replay from this)."""
PLACEHOLDER_PORT: Final = 9092


def broker_of(node_id: int) -> int:
    """The broker a connection id reaches (a coordinator id's ``B``); bootstrap ids as is."""
    return COORDINATOR_ID_BASE - node_id if node_id >= COORDINATOR_FLOOR else node_id


def _placeholder(name: str) -> Endpoint:
    """An endpoint for a node the log names but whose address it does not show."""
    return Endpoint(f"{name}.unlogged.invalid", PLACEHOLDER_PORT)


def _endpoint(address: tuple[str, int] | None, name: str) -> Endpoint:
    return _placeholder(name) if address is None else Endpoint(address[0], address[1])


def log_metadata(
    needs: Sequence[tuple[datetime, str, int]], addresses: Mapping[int, tuple[str, int]]
) -> ClusterMetadata:
    """The metadata a logged client's requests imply: every broker the log names (by a
    connection or a request), at the host:port its connection shows (a coordinator
    connection's for a broker seen only as a coordinator), and as leaders in use the brokers
    it sent partition requests to (one partition each). One snapshot for the whole log: until
    a client says which partitions it uses, every leader in metadata counts as in use."""
    endpoints: dict[int, tuple[str, int]] = {}
    for node_id, address in sorted(addresses.items()):
        if node_id >= COORDINATOR_FLOOR:
            endpoints.setdefault(broker_of(node_id), address)
    for node_id, address in addresses.items():
        if 0 <= node_id < COORDINATOR_FLOOR:
            endpoints[node_id] = address  # a broker's own connection says where it is
    brokers = {broker_of(n) for _, _, n in needs if n >= 0} | set(endpoints)
    leaders = {broker_of(n) for _, api, n in needs if _kind_of(api, n) == "broker"}
    return ClusterMetadata.build(
        CLUSTER_ID,
        [BrokerInfo(b, _endpoint(endpoints.get(b), f"broker-{b}")) for b in sorted(brokers)],
        [(TopicPartition(TOPIC, b), b) for b in sorted(leaders)],
    )


def _kind_of(api: str, node_id: int) -> str:
    """How a logged request reaches the policy: ``any``, ``group`` (a coordinator id),
    ``coordinator`` (a coordinator API to a broker id) or ``broker``."""
    if api in ANY_NODE_APIS or node_id < 0:
        return "any"
    if node_id >= COORDINATOR_FLOOR:
        return "group"
    if Api.__members__.get(api) in TRANSACTION_APIS | GROUP_APIS:
        return "coordinator"
    return "broker"


def _bootstrap(
    needs: Sequence[tuple[datetime, str, int]], addresses: Mapping[int, tuple[str, int]]
) -> tuple[tuple[Endpoint, ...], int]:
    """The client's bootstrap list as its log shows it (entry ``i`` is connection id
    ``-(i + 1)``; entries it never dialled are placeholders) and the entry the policy starts
    with: the one the client's first request went to. A log that starts after the client's
    bootstrap starts with the address its first request went to."""
    shown = {-n - 1: a for n, a in addresses.items() if n < 0}
    servers = [_endpoint(shown.get(i), f"bootstrap-{i}") for i in range(max(shown, default=-1) + 1)]
    first = needs[0][2]
    if first < 0 and -first - 1 < len(servers):
        return tuple(servers), -first - 1
    servers.append(_endpoint(addresses.get(first), f"node-{first}"))
    return tuple(servers), len(servers) - 1


class LogReplay:
    """A driver (:class:`~connmgr.core.driver.DriverOps`) whose world is one client's log;
    see the module docstring. Feed the requests with :meth:`request`, then :meth:`finish`."""

    def __init__(
        self,
        config: PolicyConfig,
        metadata: ClusterMetadata,
        *,
        group: str,
        client_id: str,
        brokers_check_identity: bool = True,
    ) -> None:
        self.policy = ProposedPolicy(config, derive_rng(SEED, "policy"))
        self.metadata = metadata
        self.now = 0.0
        self.opened = dict.fromkeys(ROLES, 0)
        self.peak = 0
        self._group = CoordinatorRef.group(group)
        self._transaction = CoordinatorRef.transaction(client_id)
        self._checks = brokers_check_identity
        self._open: dict[int, ConnectionKey] = {}
        self._metadata_requests: set[int] = set()
        self._wake: float | None = None
        self._next_request = 1
        self._bootstrapped = False
        self._pump = EventPump(self.policy, self, lambda: self.now)

    # --- the log's requests --------------------------------------------------------------

    def request(self, at_ms: float, api: str, node_id: int) -> None:
        """The client sent ``api`` to connection id ``node_id`` at ``at_ms``."""
        self.advance(at_ms)
        kind = _kind_of(api, node_id)
        if not self._bootstrapped:
            self._bootstrapped = True
            rid = self._rid(metadata=True)
            self._pump.feed(BootstrapRequested(rid))
            if api == "METADATA":
                return
        known = Api.__members__.get(api, Api.OTHER)
        if kind == "any":
            self._pump.feed(AnyNodeRequestNeeded(self._rid(metadata=api == "METADATA"), known))
        elif kind == "broker":
            self._pump.feed(BrokerRequestNeeded(self._rid(), known, node_id))
        else:
            ref = self._coordinator(known, kind)
            self._pump.feed(CoordinatorRequestNeeded(self._rid(), known, broker_of(node_id), ref))

    def _coordinator(self, api: Api, kind: str) -> CoordinatorRef:
        if kind == "group" or api not in TRANSACTION_APIS:
            return self._group
        return self._transaction

    def _rid(self, *, metadata: bool = False) -> int:
        rid = self._next_request
        self._next_request += 1
        if metadata:
            self._metadata_requests.add(rid)
        return rid

    def advance(self, to_ms: float) -> None:
        """Move the clock to ``to_ms``, firing each wake-up due strictly before it at its own
        time."""
        while self._wake is not None and self._wake < to_ms:
            self.now = max(self.now, self._wake)
            self._wake = None
            self._pump.feed(TimePassed())
        self.now = max(self.now, to_ms)

    def finish(self, end_ms: float) -> dict[str, Any]:
        """The figures at the log's end (``end_ms``): opened by role, peak, open at the end."""
        self.advance(end_ms)
        return {"opened": dict(self.opened), "peak": self.peak, "open_at_end": len(self._open)}

    # --- the driver contract's operations ------------------------------------------------

    def connect(self, conn_id: int, key: ConnectionKey) -> None:
        self._open[conn_id] = key
        self.opened[ROLE_NAMES[key.role]] += 1
        self.peak = max(self.peak, len(self._open))
        self._pump.feed(ConnectionEstablished(conn_id, None, None, self._checks))

    def lease(self, conn_id: int, request_id: int) -> None:
        event: Event
        if request_id in self._metadata_requests:
            self._metadata_requests.discard(request_id)
            event = MetadataReceived(request_id, self.metadata)
        else:
            event = ResponseReceived(request_id)
        self._pump.feed(event)

    def close(self, conn_id: int, reason: CloseReason) -> None:
        self._open.pop(conn_id, None)

    def adopt(self, conn_id: int, old_key: ConnectionKey, new_key: ConnectionKey) -> None:
        self._open[conn_id] = new_key  # the same socket, serving the broker now

    def check_identity(self, conn_id: int, broker_id: int, cluster_id: str) -> None:
        key = self._open[conn_id]
        same = self.metadata.endpoint_of(broker_id) == key.endpoint and cluster_id == CLUSTER_ID
        answer = IdentityAnswer.CONFIRMED if same else IdentityAnswer.REJECTED
        self._pump.feed(IdentityChecked(conn_id, broker_id, answer))

    def reject(self, request_id: int, reason: RejectReason) -> None:
        """The log's next lines say where the client sent the request next."""

    def refresh_metadata(self) -> None:
        """The log shows the client's own metadata requests; nothing to add."""

    def wake_at(self, at_ms: float) -> None:
        self._wake = at_ms


def replay_log(
    kind: str,
    needs: Sequence[tuple[datetime, str, int]],
    addresses: Mapping[int, tuple[str, int]],
    end: datetime | None,
    *,
    group: str | None = None,
    client_id: str = "",
    settings: Mapping[str, str] | None = None,
    brokers_check_identity: bool = True,
) -> dict[str, Any]:
    """What the ``proposed`` policy opens and holds for ``needs`` ((time, API, connection id)
    of each request, in order), as the module docstring describes; ``addresses``: the
    host:port of each connection id the log shows; ``end``: the log's last instant;
    ``settings``: policy options (``--set`` strings) over the defaults."""
    if not needs:
        return {"opened": dict.fromkeys(ROLES, 0), "peak": 0, "open_at_end": 0}
    servers, first = _bootstrap(needs, addresses)
    config = PolicyConfig(
        bootstrap=servers,
        client=ClientKind.CONSUMER if "consumer" in kind else ClientKind.PRODUCER,
        bootstrap_offset=first,
    ).with_settings(settings or {})
    replay = LogReplay(
        config,
        log_metadata(needs, addresses),
        group=group or "",
        client_id=client_id,
        brokers_check_identity=brokers_check_identity,
    )
    start = needs[0][0]

    def ms(at: datetime) -> float:
        return (at - start).total_seconds() * 1000.0

    for at, api, node_id in needs:
        replay.request(ms(at), api, node_id)
    return replay.finish(ms(end) if end is not None else ms(needs[-1][0]))
