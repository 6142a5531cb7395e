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
* Decide, then do. Bookkeeping and every change to a connection live here once; decisions
  live in the subclasses. A subclass says where a request goes (:meth:`Policy.place`),
  whether a new record dials (:meth:`Policy.before_dial`) and what to do on a few events
  (the ``on_*`` hooks, :meth:`Policy.review`); its hooks return decisions
  (:mod:`connmgr.core.decisions`) and :meth:`Executor.carry_out
  <connmgr.core.execution.Executor.carry_out>` performs them: the one place that closes, dials,
  adopts or asks, and emits the action that says so.

Theory of operation: a request enters as *pending*. After every event the base class offers
each pending request to :meth:`place`, which decides where it goes (a
:data:`~connmgr.core.decisions.Placement`) and dials nothing; the base dials what it names. A
request on a READY connection is sent now, on a CONNECTING or DEFERRED one queued until it is
READY; with none it stays pending until the next event. When a connection fails or the peer
closes it, what it held goes back to pending and is placed again: no request is ever lost by
the policy (:mod:`connmgr.core.book`).

The hot path. When :meth:`place` puts a broker request on a READY connection without changing
anything, the base class remembers that route (:attr:`Derived.routes`); the next request for
the same broker, with nothing else pending, is sent on it while nothing changed and the
connection is READY (see :attr:`Policy.stable_broker_routes`; tests/test_hot_path.py compares
every scenario with the hot path and the caches off).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from typing import ClassVar

from connmgr.core.actions import Action, RefreshMetadata, Reject, RejectReason, WakeAt
from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection, ConnectionView
from connmgr.core.coordinator import CoordinatorTable
from connmgr.core.decisions import (
    NO_DECISIONS,
    Decision,
    Dial,
    DialDecision,
    OpenThenPlace,
    Placement,
)
from connmgr.core.derived import Derived
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
from connmgr.core.execution import Executor
from connmgr.core.facts import ClientFacts
from connmgr.core.identity import ConnectionKey
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.core.state import SOCKET_STATES, ConnState
from connmgr.errors import PolicyMisuse


class Policy(ClientFacts, ABC):
    """One connection-management policy. Subclasses implement :meth:`place` and may override
    :meth:`before_dial`, the ``on_*`` hooks and :meth:`review`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    checks_dialled_identity: ClassVar[bool] = False
    """Whether this policy's dials to known brokers carry KIP-1242's identity check (the
    drop-in does it; kafka-clients 4.4+), failing when the host:port reaches another broker."""
    stable_broker_routes: ClassVar[bool] = True
    """The contract behind the hot path (see the module docstring): when :meth:`place`
    returns a READY connection for a :class:`ToBroker` request and changes nothing, it
    returns that same connection, with no side effect, for every later request to that
    broker while nothing changes and the connection is READY. True when the placement of
    broker requests reads only what :meth:`Derived.changed` follows (metadata, interest,
    coordinators, connection records and their states) and the connections' READY state. A
    subclass whose placement reads anything else (load, time, a random draw) sets False."""
    derived_type: ClassVar[type[Derived]] = Derived
    """The derivations' store (tests use :class:`~connmgr.core.derived.Uncached`)."""

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        self.config = config
        self.rng = rng
        self.derived = self.derived_type()
        """What the policy's decisions derive from its state, dropped when it changes."""
        self._metadata = None
        self._interest = None
        self.coordinators = CoordinatorTable(self.derived.facts_changed)
        """Where each coordinator the client talks to is (group, transaction, ...)."""
        self._do = Executor(config, self.before_dial, self.__repr__, self.derived)
        self.table = self._do.table
        """The connection records (bookkeeping only: the policy decides, the executor acts)."""
        self.metrics = self._do.metrics
        self._book = self._do.book
        self.now_ms = 0.0
        """The time of the event being handled (the last one's, between events)."""
        self._wake_at: float | None = None
        self._md_count = 0
        self._refresh_asked = False

    # --- the one entry point -------------------------------------------------------------

    def handle(self, event: Event, now_ms: float) -> list[Action]:
        """Apply ``event`` at time ``now_ms`` and return the actions to carry out, in order."""
        if now_ms < self.now_ms:
            raise PolicyMisuse(f"time went backwards: {now_ms} < {self.now_ms} ({self!r})")
        self.now_ms = self._do.now_ms = now_ms
        out: list[Action] = []
        self._do.out = out
        # The two events of the hot path by exact type, before the match in _dispatch: a
        # few tenths of a microsecond, which is a tenth of the whole decision.
        kind = type(event)
        if kind is ResponseReceived:
            assert isinstance(event, ResponseReceived)
            self._do.complete(event.request_id)
        elif kind is BrokerRequestNeeded:
            assert isinstance(event, BrokerRequestNeeded)
            self._broker_request(event)
        else:
            self._dispatch(event)
        if not self._do.closed:
            if self._book.pending:
                self._pump()
            self._do.expire_idle()
            decisions = self.review()
            if decisions is not NO_DECISIONS:  # most events: skip the loop over nothing
                self._do.carry_out(decisions)
            if self._book.pending:
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
                self._do.complete(request_id)
            case BrokerRequestNeeded():
                self._broker_request(event)
            case AnyNodeRequestNeeded(request_id, api):
                self._submit(Request(request_id, api, ToAnyNode()))
            case CoordinatorRequestNeeded(request_id, api, broker_id, ref):
                self.coordinators.place(ref, broker_id)
                target = ToCoordinator(broker_id, ref)
                self._submit(Request(request_id, api, target, self._md_count))
            case CoordinatorLost(ref):
                self.coordinators.forget(ref)
            case MetadataReceived(request_id, metadata):
                via = self._book.placed.get(request_id)
                self._do.complete(request_id)
                old_md, self.metadata = self.metadata, metadata
                self._md_count += 1
                self._refresh_asked = False
                self._do.carry_out(self.on_metadata(old_md, via))
                self._book.unqueue_gone_brokers(self.table, metadata)
            case BootstrapRequested(request_id):
                self._submit(Request(request_id, Api.METADATA, ToBootstrap()))
                self._do.carry_out(self.on_bootstrap())
            case InterestChanged(partitions):
                self.interest = partitions
            case ConnectionEstablished(conn_id, _, address, checks_identity):
                self._do.established(conn_id, address, checks_identity)
            case IdentityChecked(conn_id, broker_id, answer):
                if (conn := self._do.known(conn_id)) is not None and conn.checking == broker_id:
                    conn.checking = None
                    self._do.carry_out(self.on_identity_checked(conn, broker_id, answer))
            case AddressesResolved():
                self._do.carry_out(self.on_addresses_resolved(event))
            case ConnectionFailed(conn_id):
                self._do.failed(conn_id)
            case ConnectionClosedByPeer(conn_id):
                lost = self._do.known(conn_id)
                self._do.peer_closed(conn_id)
                if lost is not None:
                    self._do.carry_out(self.on_connection_lost(lost))
            case ClientClosed():
                self._do.shutdown()

    # --- what subclasses decide ----------------------------------------------------------

    @abstractmethod
    def place(self, request: Request) -> Placement:
        """Where ``request`` goes (:data:`~connmgr.core.decisions.Placement`): on a
        connection the policy holds, on a key's connection (opened if there is none), or
        nowhere yet. It dials nothing: the base class carries the placement out."""

    def before_dial(self, conn: Connection) -> DialDecision:
        """Whether the new DEFERRED record ``conn`` dials now (:class:`Dial`) or waits
        (:class:`Defer`, its requests queued on it, until the policy decides
        :class:`StartDial`), and which connections close first."""
        return Dial()

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        """Whether the hosting client asks for metadata as soon as it starts (True) or only
        when the application first sends or polls (False)."""
        return True

    def on_bootstrap(self) -> Iterator[Decision]:
        """Hook: the client asked for its first metadata."""
        return iter(())

    def on_metadata(
        self, old: ClusterMetadata | None, via: Connection | None
    ) -> Iterator[Decision]:
        """Hook: ``self.metadata`` was replaced; ``via`` carried the response (if known)."""
        return iter(())

    def on_addresses_resolved(self, lookup: AddressesResolved) -> Iterator[Decision]:
        """Hook: the driver looked a host name up; failed or not (today's clients ignore it)."""
        return iter(())

    def on_identity_checked(
        self, conn: Connection, broker_id: int, answer: IdentityAnswer
    ) -> Iterator[Decision]:
        """Hook: the broker on ``conn`` answered whether it is ``broker_id`` (KIP-1242)."""
        return iter(())

    def on_connection_lost(self, conn: Connection) -> Iterator[Decision]:
        """Hook: the peer closed ``conn`` (a broker restarting, the network resetting it); the
        record is forgotten already and what it held went back to be placed again."""
        return iter(())

    def review(self) -> Iterator[Decision]:
        """Hook run after every event, once idle connections have expired: what to close or
        dial now that is not a reaction to one event (timers, connections no longer wanted).
        :data:`~connmgr.core.decisions.NO_DECISIONS` when there is nothing to decide."""
        return NO_DECISIONS

    def needed_connections(self) -> frozenset[int] | None:
        """Ids of the READY connections this policy keeps open now because something needs
        them (a leader in use, a coordinator, an any-node anchor, a request), or None for a
        policy with no notion of need -- today's clients keep whatever they opened until it
        idles out. The property suite's tightness checks and the simulator's steady state
        read it."""
        return None

    def next_deadline(self) -> float | None:
        """Hook: the earliest time this policy wants a TimePassed, besides idle expiry."""
        return None

    # --- read-only views -----------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether the client closed (every connection closed, no request taken)."""
        return self._do.closed

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
        return tuple(self._book.pending)

    def in_backoff(self, key: ConnectionKey) -> bool:
        """Whether ``key``'s last dial failed and its reconnect backoff still runs."""
        return self.table.in_backoff(key, self.now_ms)

    def __repr__(self) -> str:
        states = Counter(c.state.value for c in self.table.all())
        summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items())) or "none"
        brokers = len(self.metadata.brokers) if self.metadata else 0
        return (
            f"<{type(self).__name__} t={self.now_ms:.0f}ms conns: {summary}; pending="
            f"{len(self._book.pending)} brokers={brokers} coordinators={self.coordinators!r}"
            f"{' closed' if self.closed else ''}>"
        )

    # --- requests ------------------------------------------------------------------------

    def _submit(self, request: Request) -> None:
        if self.closed:
            raise PolicyMisuse(
                f"the client is closed: request {request.request_id} ({request.api.name}) "
                "cannot be sent; start a new client"
            )
        if self._book.knows(request.request_id):
            raise PolicyMisuse(f"request id {request.request_id} is already in use ({self!r})")
        self._book.pending.append(request)

    def _broker_request(self, event: BrokerRequestNeeded) -> None:
        """Submit a broker request; on the hot path (see the module docstring), send it on
        the remembered route at once, exactly as :meth:`_pump` would have."""
        route = self.derived.routes.get(event.broker_id)
        if (
            route is not None
            and route[0].state is ConnState.READY
            and not self._book.pending
            and not self._do.closed
        ):
            conn, target = route
            if event.request_id in self._book.placed:
                raise PolicyMisuse(f"request id {event.request_id} is already in use ({self!r})")
            self._do.send(conn, Request(event.request_id, event.api, target, self._md_count))
            return
        target = route[1] if route is not None else ToBroker(event.broker_id)
        self._submit(Request(event.request_id, event.api, target, self._md_count))

    def _pump(self) -> None:
        book = self._book
        pending, book.pending = book.pending, []
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
                    book.placed.pop(request.request_id, None)
                    self._do.out.append(Reject(request.request_id, RejectReason.BROKER_GONE))
                    continue
                book.pending.append(request)
                if not self._refresh_asked:
                    self._refresh_asked = True
                    self._do.out.append(RefreshMetadata())
                continue
            generation = self.derived.generation
            placement = self.place(request)
            while type(placement) is OpenThenPlace:
                self._do.take(placement)
                placement = self.place(request)
            conn = self._do.take(placement)
            if conn is None:
                book.pending.append(request)
            elif conn.state is ConnState.READY:
                if (
                    type(target) is ToBroker
                    and generation == self.derived.generation
                    and self.stable_broker_routes
                ):
                    self.derived.routes[target.broker_id] = (conn, target)
                self._do.send(conn, request)
            elif conn.state in (ConnState.CONNECTING, ConnState.DEFERRED):
                book.queue(conn, request)
            else:
                raise PolicyMisuse(f"place() returned {conn!r}, which cannot take requests")

    def _schedule_wake(self) -> None:
        # Deadlines at or before now were handled by review() just now; asking to be woken
        # for them again would loop.
        now = self.now_ms
        at: float | None = None
        if not self._do.closed:
            first = self._do.idle.first
            if first is not None and first > now:
                at = first
            retry = self._do.retry_deadline() if self._book.pending else None  # none waits
            for deadline in (self.next_deadline(), retry):
                if deadline is not None and deadline > now and (at is None or deadline < at):
                    at = deadline
        if at is None:
            self._wake_at = None
            return
        if at != self._wake_at:
            self._wake_at = at
            self._do.out.append(WakeAt(at))
