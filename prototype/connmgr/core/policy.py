"""The policy interface and the bookkeeping every policy shares.

Rules of this module (and of all of :mod:`connmgr.core`):

* It is sans-IO. It imports no asyncio, socket, time or random, and nothing from aiokafka.
  Time arrives as ``now_ms`` with each event; randomness as a :class:`RandomSource` given at
  construction (a seeded ``random.Random`` in practice). The same events, times and seed give
  the same actions, always.
* A policy decides, the driver acts. :meth:`Policy.handle` takes one event and returns the
  actions (``Connect``, ``Lease``, ``Close``, ``Adopt``, ``CheckIdentity``, ``Reject``,
  ``RefreshMetadata``, ``WakeAt``) the driver must carry out, in order (the driver contract,
  :mod:`connmgr.core.driver`). Creating a connection record does not dial; a ``Connect``
  action does.
* Bookkeeping lives here once; decisions live in the subclasses. A subclass says where a
  request goes (:meth:`Policy.place`) and reacts to lifecycle hooks; it never edits connection
  states directly but calls the helpers below, which go through the state table.

Theory of operation: a request enters as *pending*. After every event the base class offers
each pending request to :meth:`place`, which returns a connection (READY: sent now;
CONNECTING or DEFERRED: queued on it until it is READY) or None (stay pending, try again after
the next event). When a connection fails or the peer closes it, whatever it held goes back to
pending and is placed again, so no request is ever lost by the policy.

The hot path. When :meth:`place` puts a broker request on a READY connection without changing
:attr:`Policy.version`, the base class remembers that route; the next request for the same
broker, with nothing else pending, is sent on it while ``version`` is unchanged and the
connection READY, skipping only a ``place`` whose answer cannot have changed (see
:attr:`Policy.stable_broker_routes`; tests/test_hot_path.py compares every scenario with the
hot path off).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from typing import ClassVar

from connmgr.core.actions import (
    Action,
    Adopt,
    CheckIdentity,
    Close,
    CloseReason,
    Connect,
    Lease,
    RefreshMetadata,
    Reject,
    RejectReason,
    WakeAt,
)
from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection, ConnectionTable, ConnectionView, IdleTimers
from connmgr.core.coordinator import CoordinatorRef, CoordinatorTable
from connmgr.core.events import (
    AddressesResolved,
    AnyNodeRequestNeeded,
    Api,
    BootstrapRequested,
    BrokerRequestNeeded,
    ClientClosed,
    ConnectionClosedByPeer,
    ConnectionEstablished,
    ConnectionFailed,
    CoordinatorLost,
    CoordinatorRequestNeeded,
    Event,
    IdentityAnswer,
    IdentityChecked,
    InterestChanged,
    MetadataReceived,
    RequestFailed,
    RequestWithdrawn,
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import ConnectionKey
from connmgr.core.metadata import ClusterMetadata, TopicPartition
from connmgr.core.metrics import Metrics
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.core.state import SOCKET_STATES, ConnState, Trigger
from connmgr.errors import PolicyMisuse

# --- the policy base class ---------------------------------------------------------------


class Policy(ABC):
    """One connection-management policy. Subclasses implement :meth:`place` and may override
    the ``on_*`` hooks and :meth:`maintain`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    library: ClassVar[str]
    """The client library whose request pattern hosts this policy: "java" or "aiokafka".
    The simulator uses it for behaviour that is the library's, not the connection policy's
    (aiokafka's bootstrap metadata request names no topics, so a second one follows)."""
    find_coordinator_with_first_metadata: ClassVar[bool] = False
    """Whether the hosting consumer sends FindCoordinator with its first metadata request
    (the 2019 Java consumer log), not after the answer (kafka-clients 4.x, aiokafka)."""
    pushes_telemetry: ClassVar[bool] = False
    """Whether the hosting client asks some node for its KIP-714 telemetry subscription when
    it starts (kafka-clients >= 3.7): one more any-node request."""
    checks_dialled_identity: ClassVar[bool] = False
    """Whether the hosting client's dials to known brokers carry KIP-1242's identity check
    (the drop-in; kafka-clients 4.4+), failing when the host:port reaches another broker."""
    stable_broker_routes: ClassVar[bool] = True
    """The contract behind the hot path (see the module docstring): when :meth:`place`
    returns a READY connection for a :class:`ToBroker` request and leaves ``version`` as it
    was, it returns that same connection, with no side effect, for every later request to
    that broker while ``version`` is unchanged and the connection is READY. True when the
    placement of broker requests reads only what bumps ``version`` (metadata, interest,
    coordinators, connection records and their states) and the connections' READY state. A
    subclass whose placement reads anything else (load, time, a random draw) sets False."""

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        self.config = config
        self.rng = rng
        self.metrics = Metrics()
        self.metadata: ClusterMetadata | None = None
        self.coordinators = CoordinatorTable()
        """Where each coordinator the client talks to is (group, transaction, ...)."""
        self.interest: frozenset[TopicPartition] | None = None
        self.closed = False
        self.table = ConnectionTable()
        """The connection records (bookkeeping only; the policy decides and acts)."""
        self._pending: list[Request] = []
        self._placed: dict[int, Connection] = {}
        self._idle = IdleTimers(config.idle_expiry_ms)
        self._now = 0.0
        self._out: list[Action] = []
        self._wake_at: float | None = None
        self._md_count = 0
        self._refresh_asked = False
        self.version = 0
        """Bumped whenever connections, metadata, interest or the coordinator change, so
        subclasses can skip work when nothing structural happened."""
        self._routes: dict[int, tuple[Connection, ToBroker]] = {}
        """Broker id -> the READY connection :meth:`place` chose for it at ``_routes_version``
        (and the target value, shared by the requests that take the route)."""
        self._routes_version = -1

    # --- the one entry point -------------------------------------------------------------

    def handle(self, event: Event, now_ms: float) -> list[Action]:
        """Apply ``event`` at time ``now_ms`` and return the actions to carry out, in order."""
        if now_ms < self._now:
            raise PolicyMisuse(f"time went backwards: {now_ms} < {self._now} ({self!r})")
        self._now = now_ms
        out: list[Action] = []
        self._out = out
        # The two events of the hot path by exact type, before the match in _dispatch: a
        # few tenths of a microsecond, which is a tenth of the whole decision.
        kind = type(event)
        if kind is ResponseReceived:
            assert isinstance(event, ResponseReceived)
            self._complete(event.request_id)
        elif kind is BrokerRequestNeeded:
            assert isinstance(event, BrokerRequestNeeded)
            self._broker_request(event)
        else:
            self._dispatch(event)
        if not self.closed:
            if self._pending:
                self._pump()
            self.maintain()
            if self._pending:
                self._pump()
        self._schedule_wake()
        return out

    def _dispatch(self, event: Event) -> None:
        match event:
            case TimePassed():
                pass
            case (
                ResponseReceived(request_id)
                | RequestFailed(request_id)
                | RequestWithdrawn(request_id)
            ):
                self._complete(request_id)
            case BrokerRequestNeeded():
                self._broker_request(event)
            case AnyNodeRequestNeeded(request_id, api):
                self._submit(Request(request_id, api, ToAnyNode()))
            case CoordinatorRequestNeeded(request_id, api, broker_id, ref):
                old = self.coordinators.place(ref, broker_id)
                if old != broker_id:
                    self.version += 1
                    self.on_coordinator_changed(ref, old)
                target = ToCoordinator(broker_id, ref)
                self._submit(Request(request_id, api, target, self._md_count))
            case CoordinatorLost(ref):
                old = self.coordinators.forget(ref)
                if old is not None:
                    self.version += 1
                    self.on_coordinator_changed(ref, old)
            case MetadataReceived(request_id, metadata):
                via = self._placed.get(request_id)
                self._complete(request_id)
                old_md, self.metadata = self.metadata, metadata
                self._md_count += 1
                self._refresh_asked = False
                self.version += 1
                self.on_metadata(old_md, via)
                self._unqueue_gone_brokers(metadata)
            case BootstrapRequested(request_id):
                self._submit(Request(request_id, Api.METADATA, ToBootstrap()))
                self.on_bootstrap()
            case InterestChanged(partitions):
                self.interest = partitions
                self.version += 1
            case ConnectionEstablished(conn_id, _, address, checks_identity):
                self._on_established(conn_id, address, checks_identity)
            case IdentityChecked(conn_id, broker_id, answer):
                if (conn := self._conn(conn_id)) is not None and conn.checking == broker_id:
                    conn.checking = None
                    self.version += 1
                    self.on_identity_checked(conn, broker_id, answer)
            case AddressesResolved():
                self.on_addresses_resolved(event)
            case ConnectionFailed(conn_id):
                self._on_failed(conn_id)
            case ConnectionClosedByPeer(conn_id):
                self._on_peer_closed(conn_id)
            case ClientClosed():
                self._shutdown()

    # --- what subclasses decide ----------------------------------------------------------

    @abstractmethod
    def place(self, request: Request) -> Connection | None:
        """The connection ``request`` goes on (dialling one if the policy wants), or None to
        leave it pending until a later event."""

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        """Whether the hosting client asks for metadata as soon as it starts (True) or only
        when the application first sends or polls (False)."""
        return True

    def on_bootstrap(self) -> None:
        """Hook: the client asked for its first metadata."""

    def on_metadata(self, old: ClusterMetadata | None, via: Connection | None) -> None:
        """Hook: ``self.metadata`` was replaced; ``via`` carried the response (if known)."""

    def on_coordinator_changed(self, ref: CoordinatorRef, old: int | None) -> None:
        """Hook: coordinator ``ref`` moved from broker ``old`` (None: newly known) to
        ``self.coordinators.broker_of(ref)`` (None: no longer known)."""

    def on_addresses_resolved(self, lookup: AddressesResolved) -> None:
        """Hook: the driver looked a host name up; failed or not (today's clients ignore it)."""

    def on_identity_checked(self, conn: Connection, broker_id: int, answer: IdentityAnswer) -> None:
        """Hook: the broker on ``conn`` answered whether it is ``broker_id`` (KIP-1242)."""

    def on_connection_lost(self, conn: Connection, *, failed: bool) -> None:
        """Hook: ``conn`` failed to dial (failed=True) or was closed by the peer."""

    def needed_connections(self) -> frozenset[int] | None:
        """Ids of the READY connections this policy keeps open now because something needs
        them (a leader in use, a coordinator, an any-node anchor, a request), or None for a
        policy with no notion of need -- today's clients keep whatever they opened until it
        idles out. The property suite's tightness checks and the simulator's steady state
        read it."""
        return None

    def maintain(self) -> None:
        """Hook run after every event: timers, closing what is no longer wanted."""
        self.expire_idle()

    def next_deadline(self) -> float | None:
        """Hook: the earliest time this policy wants a TimePassed, besides idle expiry."""
        return None

    # --- read-only views -----------------------------------------------------------------

    @property
    def now_ms(self) -> float:
        return self._now

    def connections(self) -> tuple[ConnectionView, ...]:
        """Every connection holding a socket, in dial order."""
        return tuple(
            ConnectionView(c.conn_id, c.key, c.state, len(c.in_flight), c.last_used_ms)
            for c in self.table.all()
            if c.state in SOCKET_STATES
        )

    def socket_count(self) -> int:
        return self.metrics.open_now

    @property
    def pending_requests(self) -> tuple[Request, ...]:
        return tuple(self._pending)

    def __repr__(self) -> str:
        states = Counter(c.state.value for c in self.table.all())
        summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
        brokers = len(self.metadata.brokers) if self.metadata else 0
        return (
            f"<{type(self).__name__} t={self._now:.0f}ms conns: {summary}; pending="
            f"{len(self._pending)} brokers={brokers} coordinators={self.coordinators!r}"
            f"{' closed' if self.closed else ''}>"
        )

    # --- the policy's actions on connections ----------------------------------------------
    #
    # Lookups are the table's (self.table.live, .live_for_node, .records, .in_backoff); what
    # changes a connection and tells the driver is here.

    def in_backoff(self, key: ConnectionKey) -> bool:
        """Whether ``key``'s last dial failed and its reconnect backoff still runs."""
        return self.table.in_backoff(key, self._now)

    def get_or_dial(self, key: ConnectionKey) -> Connection | None:
        """The usable connection for ``key``, or a new one if there is none (dialled now, or
        left DEFERRED if :meth:`admit_dial` says so). None while the key is draining (wait
        for it to close) or backing off after a failed dial."""
        conn = self.table.live(key)
        if conn is not None:
            return None if conn.state is ConnState.DRAINING else conn
        if self.in_backoff(key):
            return None
        conn = self.new_record(key)
        if self.admit_dial(conn):
            self.start_dial(conn)
        return conn

    def admit_dial(self, conn: Connection) -> bool:
        """Hook: whether a new record dials at once (True) or stays DEFERRED, its requests
        queued on it, until the policy starts the dial itself (the proposed policy's socket
        budget). It may close other connections first."""
        return True

    def new_record(self, key: ConnectionKey) -> Connection:
        """A DEFERRED record for ``key`` (no socket, no action yet)."""
        if self.table.live(key) is not None:
            raise PolicyMisuse(f"a live connection for {key} already exists ({self!r})")
        self.version += 1
        return self.table.create(key, self._now)

    def start_dial(self, conn: Connection) -> None:
        conn.move(Trigger.DIAL)
        self.version += 1
        conn.opened_ms = conn.last_used_ms = self._now
        self.metrics.on_dial(conn.role)
        self._out.append(Connect(conn.conn_id, conn.key))

    def send(self, conn: Connection, request: Request) -> None:
        conn.in_flight[request.request_id] = request
        conn.last_used_ms = self._now
        self._placed[request.request_id] = conn
        self._out.append(Lease(conn.conn_id, request.request_id))

    def close(self, conn: Connection, reason: CloseReason) -> None:
        """Close ``conn`` now; anything it still held goes back to pending."""
        had_socket = conn.state in SOCKET_STATES
        conn.move(Trigger.CLOSE)
        self._forget(conn)
        if had_socket:
            self.metrics.on_gone(conn.role, failed=False)
            self._out.append(Close(conn.conn_id, reason))
        self._requeue(conn)

    def drain(self, conn: Connection, reason: CloseReason) -> None:
        """Take no new requests on ``conn``; close it once its in-flight requests finish."""
        if conn.state is ConnState.READY and conn.in_flight:
            conn.move(Trigger.DRAIN)
            conn.drain_reason = reason
        else:
            self.close(conn, reason)

    def adopt(self, conn: Connection, new_key: ConnectionKey) -> None:
        """Give the socket of ``conn`` a new identity (no I/O)."""
        old_key = conn.key
        if self.table.live(new_key) is not None:
            raise PolicyMisuse(f"cannot adopt {old_key} as {new_key}: already live ({self!r})")
        self.version += 1
        self.table.rekey(conn, new_key)
        self.metrics.on_role_change(old_key.role, new_key.role)
        self._out.append(Adopt(conn.conn_id, old_key, new_key))

    def check_identity(self, conn: Connection, broker_id: int, cluster_id: str) -> None:
        """Ask the broker on READY ``conn`` whether it is ``broker_id`` of ``cluster_id``."""
        conn.checking = broker_id
        self.version += 1
        self._out.append(CheckIdentity(conn.conn_id, broker_id, cluster_id))

    def backoff_ms(self, failures: int) -> float:
        """Exponential reconnect backoff, no jitter (jitter would make runs differ by policy)."""
        base = self.config.reconnect_backoff_ms
        return float(min(self.config.reconnect_backoff_max_ms, base * 2 ** max(0, failures - 1)))

    def expire_idle(self) -> None:
        """Close READY connections quiet for ``connections_max_idle_ms`` and not awaiting a
        response (the rule of the Java client and aiokafka alike)."""
        for conn in list(self._idle.expired(self.table, self._now)):
            self.close(conn, CloseReason.IDLE)

    def retry_deadline(self) -> float | None:
        """When the earliest backoff ends, if requests are waiting for one."""
        if not self._pending:
            return None
        times = self.table.retry_times(self._now)
        return min(times) if times else None

    # --- internals -----------------------------------------------------------------------

    def _submit(self, request: Request) -> None:
        if self.closed:
            raise PolicyMisuse(
                f"the client is closed: request {request.request_id} ({request.api.name}) "
                "cannot be sent; start a new client"
            )
        if request.request_id in self._placed or any(
            r.request_id == request.request_id for r in self._pending
        ):
            raise PolicyMisuse(f"request id {request.request_id} is already in use ({self!r})")
        self._pending.append(request)

    def _broker_request(self, event: BrokerRequestNeeded) -> None:
        """Submit a broker request; on the hot path (see the module docstring), send it on
        the remembered route at once, exactly as :meth:`_pump` would have."""
        route = self._routes.get(event.broker_id)
        if (
            route is not None
            and self._routes_version == self.version
            and route[0].state is ConnState.READY
            and not self._pending
            and not self.closed
        ):
            conn, target = route
            if event.request_id in self._placed:
                raise PolicyMisuse(f"request id {event.request_id} is already in use ({self!r})")
            self.send(conn, Request(event.request_id, event.api, target, self._md_count))
            return
        target = route[1] if route is not None else ToBroker(event.broker_id)
        self._submit(Request(event.request_id, event.api, target, self._md_count))

    def _remember_route(self, broker_id: int, conn: Connection, target: ToBroker) -> None:
        if self._routes_version != self.version:
            self._routes = {}
            self._routes_version = self.version
        self._routes[broker_id] = (conn, target)

    def _pump(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        md = self.metadata
        for request in pending:
            target = request.target
            if isinstance(target, ToBroker | ToCoordinator) and (
                md is None or target.broker_id not in md.by_id
            ):
                # Nothing can place it without metadata that names its broker: ask for that
                # metadata, or, if metadata newer than the request already left the broker
                # out, hand the request back for the caller to re-target.
                if md is not None and self._md_count > request.since_md:
                    self._placed.pop(request.request_id, None)
                    self._out.append(Reject(request.request_id, RejectReason.BROKER_GONE))
                    continue
                self._pending.append(request)
                if not self._refresh_asked:
                    self._refresh_asked = True
                    self._out.append(RefreshMetadata())
                continue
            version = self.version
            conn = self.place(request)
            if conn is None:
                self._pending.append(request)
            elif conn.state is ConnState.READY:
                if (
                    type(target) is ToBroker
                    and version == self.version
                    and self.stable_broker_routes
                ):
                    self._remember_route(target.broker_id, conn, target)
                self.send(conn, request)
            elif conn.state in (ConnState.CONNECTING, ConnState.DEFERRED):
                conn.waiting.append(request)
                self._placed[request.request_id] = conn
            else:
                raise PolicyMisuse(f"place() returned {conn!r}, which cannot take requests")

    def _complete(self, request_id: int) -> None:
        """Request ``request_id`` is over: answered, failed or withdrawn."""
        conn = self._placed.pop(request_id, None)
        if conn is None:
            # Still pending: withdrawn before any connection took it, or over for a
            # driver that learnt first that its connection broke (the policy had put it
            # back to pending). Drop it.
            self._pending = [r for r in self._pending if r.request_id != request_id]
            return
        if conn.in_flight.pop(request_id, None) is None:
            # Queued on a connection still dialling, and withdrawn: unqueue it.
            conn.waiting = [r for r in conn.waiting if r.request_id != request_id]
        conn.last_used_ms = self._now
        if conn.state is ConnState.DRAINING and not conn.in_flight:
            self.close(conn, conn.drain_reason)

    def _conn(self, conn_id: int) -> Connection | None:
        conn = self.table.get(conn_id)
        if conn is None and not self.table.issued(conn_id):
            raise PolicyMisuse(f"event for connection {conn_id}, which was never dialled")
        return conn  # None: already closed by us; the driver's report crossed our Close

    def _on_established(self, conn_id: int, address: str | None, checks: bool) -> None:
        conn = self._conn(conn_id)
        if conn is None:
            return
        conn.address, conn.checks_identity = address, checks
        conn.move(Trigger.ESTABLISHED)
        self.version += 1
        conn.failures = 0
        conn.last_used_ms = self._now
        self._idle.start(conn_id, self._now)
        waiting, conn.waiting = conn.waiting, []
        for request in waiting:
            self.send(conn, request)

    def _on_failed(self, conn_id: int) -> None:
        conn = self._conn(conn_id)
        if conn is None:
            return
        conn.move(Trigger.FAIL)
        conn.failures += 1
        conn.retry_at_ms = self._now + self.backoff_ms(conn.failures)
        self.version += 1
        self.table.failed(conn)
        self.metrics.on_gone(conn.role, failed=True)
        self._requeue(conn)
        self.on_connection_lost(conn, failed=True)

    def _on_peer_closed(self, conn_id: int) -> None:
        conn = self._conn(conn_id)
        if conn is None:
            return
        conn.move(Trigger.PEER_CLOSED)
        self._forget(conn)
        self.metrics.on_gone(conn.role, failed=False)
        self._requeue(conn)
        self.on_connection_lost(conn, failed=False)

    def _unqueue_gone_brokers(self, md: ClusterMetadata) -> None:
        """Requests queued on a connection (not yet sent) to a broker the new metadata no
        longer lists go back to pending, where they are re-placed or rejected: a dial to a
        broker that left the cluster must not hold them until ``request_timeout_ms``."""
        for conn in self.table.all():
            broker_id = conn.key.broker_id
            if conn.waiting and broker_id is not None and broker_id not in md.by_id:
                waiting, conn.waiting = conn.waiting, []
                for request in waiting:
                    self._placed.pop(request.request_id, None)
                self._pending[:0] = waiting

    def _requeue(self, conn: Connection) -> None:
        held = list(conn.in_flight.values()) + conn.waiting
        conn.in_flight = {}
        conn.waiting = []
        for request in held:
            self._placed.pop(request.request_id, None)
        if not self.closed:
            self._pending[:0] = held

    def _forget(self, conn: Connection) -> None:
        self.version += 1
        self.table.forget(conn)

    def _shutdown(self) -> None:
        self.closed = True
        self._pending = []
        for conn in self.table.all():
            if conn.state is ConnState.FAILED:
                self.table.retire(conn)
            else:
                self.close(conn, CloseReason.SHUTDOWN)
        self.table.clear_failed()
        self._placed.clear()

    def _schedule_wake(self) -> None:
        # Deadlines at or before now were handled by maintain() just now; asking to be woken
        # for them again would loop.
        now = self._now
        at: float | None = None
        if not self.closed:
            first = self._idle.first
            if first is not None and first > now:
                at = first
            for deadline in (self.next_deadline(), self.retry_deadline()):
                if deadline is not None and deadline > now and (at is None or deadline < at):
                    at = deadline
        if at is None:
            self._wake_at = None
            return
        if at != self._wake_at:
            self._wake_at = at
            self._out.append(WakeAt(at))
