"""The discrete-event simulator: one client, one policy, one simulated cluster, a virtual
clock. It carries out the policy's actions the way a network would, and records every
connection and which broker every request actually reached.

Deterministic: the policy, the cluster and nothing else draw randomness, each from its own
``random.Random`` seeded from the run's seed.
"""

from __future__ import annotations

import functools
import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from connmgr.core.actions import CloseReason, RejectReason
from connmgr.core.config import ClientKind
from connmgr.core.coordinator import CoordinatorRef
from connmgr.core.driver import EventPump
from connmgr.core.events import (
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
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import ConnectionKey, Purpose
from connmgr.core.metadata import TopicPartition
from connmgr.core.policy import Policy
from connmgr.errors import PolicyMisuse
from connmgr.ledger import ConnectionLedger
from connmgr.sim.clients import ClientModel
from connmgr.sim.cluster import ClusterModel
from connmgr.sim.library import library_of
from connmgr.sim.request import SimRequest
from connmgr.sim.result import ConnRecord, RequestRecord, RunResult

MIN_LATENCY_MS = 0.1
"""Even on loopback nothing is instantaneous; keeps causally ordered events apart."""


@dataclass(slots=True)
class SimConn:
    conn_id: int
    key: ConnectionKey
    backend: int | None
    record: ConnRecord
    ready: bool = False
    open: bool = True
    last_active: float = 0.0
    in_flight: set[int] = field(default_factory=set)
    address: str | None = None
    """The address the dial resolved the host to (None: a literal host)."""
    unanswered: dict[int, float] = field(default_factory=dict)
    """Request id -> when it was sent, for requests its dark address will never answer."""


class Simulator:
    """Run one client life. Build with a policy, a cluster and a client factory; call run().

    A driver of the contract in :mod:`connmgr.core.driver`: events go through its
    :class:`~connmgr.core.driver.EventPump`, and the operations below carry out the actions
    the way a network would; every connection's life goes into :attr:`ledger`."""

    def __init__(
        self,
        policy: Policy,
        cluster: ClusterModel,
        make_client: Callable[[Simulator], ClientModel],
        *,
        client_kind: ClientKind,
        duration_ms: float,
        changes: list[tuple[float, Callable[[Simulator], None]]] | None = None,
    ) -> None:
        self.policy = policy
        self.library = library_of(policy)
        self.cluster = cluster
        self.client_kind = client_kind
        self.duration_ms = duration_ms
        self.now = 0.0
        self.records_acked = 0
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._next_request = 1
        self._wake_at: float | None = None
        self._conns: dict[int, SimConn] = {}
        self._severed: dict[int, SimConn] = {}
        """Connections reset by the peer that the policy has not yet been told about."""
        self._requests: dict[int, SimRequest] = {}
        self.ledger = ConnectionLedger(counts_reached=True)
        self.request_log: list[RequestRecord] = []
        self.conn_records: list[ConnRecord] = []
        self._pump = EventPump(policy, self, lambda: self.now)
        self.misrouted = 0
        self.identity_rejected = 0
        """Identity checks a broker answered "not me" (KIP-1242): dials and bootstrap sockets."""
        self._metadata_answers = 0
        self.client_closed = False
        """The client closed before the run's end (a short-lived client)."""
        self.stale_waits = 0
        """Requests that waited on a socket to an address that stopped answering."""
        self.stale_wait_ms = 0.0
        """The ms they waited there, until their request timeout or the socket's close."""
        self._refreshed: set[str] = set()
        """Names the client looks up again every TTL (it holds a fresh answer for them)."""
        for at, change in changes or []:
            self.at(at, functools.partial(change, self))
        self.client = make_client(self)

    # --- scheduling ----------------------------------------------------------------------

    def at(self, when: float, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn))

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        self.at(self.now + delay, fn)

    # --- the client's requests -----------------------------------------------------------

    def _new_request(self, req: SimRequest) -> int:
        self._requests[req.request_id] = req
        return req.request_id

    def _rid(self) -> int:
        rid = self._next_request
        self._next_request += 1
        return rid

    def send_metadata(self, topics: tuple[str, ...], *, bootstrap: bool) -> None:
        rid = self._rid()
        self._new_request(
            SimRequest(rid, Api.METADATA, None, Purpose.DATA, topics=topics, bootstrap=bootstrap)
        )
        self.deliver(
            BootstrapRequested(rid) if bootstrap else AnyNodeRequestNeeded(rid, Api.METADATA)
        )

    def send_any(self, api: Api) -> int:
        """An any-node request; returns its request id (a client waiting for several
        FindCoordinator answers tells them apart by it)."""
        rid = self._rid()
        self._new_request(SimRequest(rid, api, None, Purpose.DATA))
        self.deliver(AnyNodeRequestNeeded(rid, api))
        return rid

    def send_broker(self, api: Api, broker_id: int, partitions: tuple[TopicPartition, ...]) -> None:
        rid = self._rid()
        self._new_request(
            SimRequest(rid, api, broker_id, Purpose.DATA, partitions, target=str(broker_id))
        )
        self.deliver(BrokerRequestNeeded(rid, api, broker_id))

    def send_coordinator(self, api: Api, broker_id: int, coordinator: CoordinatorRef) -> int:
        """A request for ``coordinator``, which the client found on ``broker_id``; returns its
        request id. ``Api.OTHER`` is a readiness probe (aiokafka's ``client.ready(node,
        group=COORDINATION)``)."""
        rid = self._rid()
        self._new_request(
            SimRequest(
                rid,
                api,
                broker_id,
                Purpose.COORDINATION,
                target=f"coordinator:{broker_id}",
                coordinator=coordinator,
            )
        )
        self.deliver(CoordinatorRequestNeeded(rid, api, broker_id, coordinator))
        return rid

    def request_open(self, request_id: int) -> bool:
        """Whether request ``request_id`` is still waiting for its answer (or its rejection)."""
        return request_id in self._requests

    def coordinator_lost(self, coordinator: CoordinatorRef) -> None:
        self.deliver(CoordinatorLost(coordinator))

    def interest(self, partitions: frozenset[TopicPartition]) -> None:
        self.deliver(InterestChanged(partitions))

    def close_client(self) -> None:
        """The application closed the client now: ``ClientClosed`` is the policy's last
        event (no wake-up follows it), and the run goes on to its end with nothing open."""
        if not self.client_closed:
            self.client_closed = True
            self.deliver(ClientClosed())

    # --- the policy ----------------------------------------------------------------------

    @property
    def events(self) -> int:
        """Events fed to the policy so far."""
        return self._pump.events

    def deliver(self, event: Event) -> None:
        """Hand ``event`` to the policy now and carry out its actions."""
        self._pump.feed(event)

    # --- the driver contract's operations ---------------------------------------------------

    # connect, lease, close and adopt are below, with the network they model.

    def wake_at(self, at_ms: float) -> None:
        if at_ms != self._wake_at:
            self._wake_at = at_ms
            self.at(at_ms, functools.partial(self._wake, at_ms))

    # The two below call back into the client, which may feed new events: done after the
    # actions of this event, as a real client's next loop turn would.

    def reject(self, request_id: int, reason: RejectReason) -> None:
        self.at(self.now, functools.partial(self._do_reject, request_id))

    def refresh_metadata(self) -> None:
        self.at(self.now, functools.partial(self._refresh_metadata, self._metadata_answers))

    def _refresh_metadata(self, answers_when_asked: int) -> None:
        """The policy asked for metadata; an answer that arrived since satisfies it."""
        if self._metadata_answers == answers_when_asked:
            self.client.metadata_wanted()

    def _do_reject(self, rid: int) -> None:
        """The policy handed a request back unsent: the client re-targets it, as after a
        NOT_LEADER or NOT_COORDINATOR answer."""
        req = self._requests.pop(rid)
        self.client.on_response(req, False)

    def _wake(self, at: float) -> None:
        if at == self._wake_at and not self.client_closed:
            self._wake_at = None
            self.deliver(TimePassed())

    def _re_resolve(self, host: str) -> None:
        """The TTL of ``host``'s last answer ran out: look it up again and report the lookup
        (failed or not, changed or not), and again one TTL later, for as long as the client
        lives."""
        ttl = self.cluster.dns_ttl_ms
        if self.client_closed or ttl is None:
            return
        lookup = self.cluster.lookup(host)
        if lookup is not None:
            self.deliver(lookup)
        self.after(ttl, functools.partial(self._re_resolve, host))

    def connect(self, conn_id: int, key: ConnectionKey) -> None:
        backend = self.cluster.resolve(key)
        host = key.endpoint.host
        # The dial resolves the name itself (asyncio's create_connection does). The client
        # reports a lookup of its own only when it holds no fresh answer for the name, as
        # the aio driver's resolver does: at the first dial of a name it then refreshes
        # every TTL, at every dial with no TTL.
        lookup = self.cluster.lookup(host)
        if lookup is not None and host not in self._refreshed:
            self.deliver(lookup)
            ttl = self.cluster.dns_ttl_ms
            if ttl is not None:
                # The cached answer expires at the name's phase, then every TTL.
                self._refreshed.add(host)
                left = ttl - (self.now - self.cluster.dns_phase_ms.get(host, 0.0)) % ttl
                self.after(left, functools.partial(self._re_resolve, host))
        if lookup is not None and not lookup.answered:
            backend = None  # the name resolves to nothing, or not at all: the dial fails
        bid = key.broker_id
        placed = (
            None
            if bid is None or bid not in self.cluster.brokers
            else self.cluster.brokers[bid].endpoint
        )
        record = ConnRecord(conn_id, key, backend, self.now, dialled_at=placed)
        self.conn_records.append(record)
        conn = SimConn(conn_id, key, backend, record, last_active=self.now)
        if lookup is not None and lookup.answered:
            conn.address = min(lookup.addresses)
        self._conns[conn_id] = conn
        self.ledger.opened(self.now, conn_id, key, backend)
        if backend is None:
            self.at(self.now + MIN_LATENCY_MS, lambda: self._connect_result(conn, ok=False))
        else:
            # TCP handshake plus the ApiVersions exchange: two round trips.
            delay = max(MIN_LATENCY_MS, 2 * self.cluster.rtt(backend))
            self.at(self.now + delay, lambda: self._connect_result(conn, ok=True))

    def _connect_result(self, conn: SimConn, *, ok: bool) -> None:
        if not conn.open:
            return
        if ok and conn.backend is not None and self.cluster.brokers[conn.backend].up:
            checks = self.cluster.confirms_identity
            asked = conn.key.broker_id if self.policy.checks_dialled_identity else None
            if checks and asked is not None and asked != conn.backend:
                # The dial's own handshake asked "are you `asked`?": another broker said no.
                self.identity_rejected += 1
                self._connect_failed(conn, CloseReason.IDENTITY_REJECTED.value)
                return
            conn.ready = True
            conn.last_active = self.now
            self.ledger.established(self.now, conn.conn_id)
            self._schedule_reap(conn)
            confirmed = asked if checks else None
            self.deliver(ConnectionEstablished(conn.conn_id, confirmed, conn.address, checks))
        else:
            self._connect_failed(conn, "")

    def _connect_failed(self, conn: SimConn, reason: str) -> None:
        conn.open = False
        conn.record.closed_ms = self.now
        self.ledger.failed(self.now, conn.conn_id, reason)
        self.deliver(ConnectionFailed(conn.conn_id))
        self.client.metadata_stale()

    def check_identity(self, conn_id: int, broker_id: int, cluster_id: str) -> None:
        """The broker on ``conn_id`` answers whether it is ``broker_id`` of ``cluster_id``
        after one round trip (``ApiVersions`` v5 on a ready connection)."""
        conn = self._conns[conn_id]
        backend = conn.backend
        assert backend is not None
        same = backend == broker_id and cluster_id == self.cluster.cluster_id
        answer = IdentityAnswer.CONFIRMED if same else IdentityAnswer.REJECTED
        delay = max(MIN_LATENCY_MS, self.cluster.rtt(backend))
        self.at(self.now + delay, lambda: self._identity_answer(conn, broker_id, answer))

    def _identity_answer(self, conn: SimConn, broker_id: int, answer: IdentityAnswer) -> None:
        if not conn.open or conn.conn_id in self._severed:
            return  # the connection went away first: the policy heard of that instead
        if answer is IdentityAnswer.REJECTED:
            self.identity_rejected += 1
        self.deliver(IdentityChecked(conn.conn_id, broker_id, answer))

    def lease(self, conn_id: int, request_id: int) -> None:
        rid = request_id
        if conn_id in self._severed:
            return  # lost on a socket already reset; the policy hears of it next
        conn = self._conns[conn_id]
        if not (conn.open and conn.ready):
            raise PolicyMisuse(f"{self.policy.name} sent request {rid} on unusable {conn}")
        req = self._requests[rid]
        conn.in_flight.add(rid)
        conn.last_active = self.now
        backend = conn.backend
        assert backend is not None
        ok = True
        if req.broker_id is not None and backend != req.broker_id:
            ok = False
            self.misrouted += 1
        md = self.policy.metadata
        known = md.endpoint_of(req.broker_id) if md and req.broker_id is not None else None
        true = None if req.broker_id is None else self.cluster.brokers[req.broker_id].endpoint
        self.request_log.append(
            RequestRecord(
                self.now,
                rid,
                req.api,
                req.target,
                backend,
                conn_id,
                conn.key,
                ok,
                known,
                true,
                req.partitions,
            )
        )
        delay = max(MIN_LATENCY_MS, self.cluster.rtt(backend))
        if req.api is Api.FETCH:
            delay += self.client.timings.fetch_max_wait_ms
        sent = self.now
        self.at(self.now + delay, lambda: self._respond(conn, rid, ok, sent))

    def _respond(self, conn: SimConn, rid: int, routed_ok: bool, sent: float) -> None:
        if not conn.open or rid not in conn.in_flight:
            return  # the connection went away: the policy re-sends the request
        if conn.address is not None and conn.address in self.cluster.dark:
            # Nobody answers at that address any more: the request waits out its timeout.
            conn.unanswered[rid] = sent
            timeout = self.client.timings.request_timeout_ms
            self.at(sent + timeout, lambda: self._timed_out(conn, rid))
            return
        conn.in_flight.discard(rid)
        conn.last_active = self.now
        req = self._requests.pop(rid)
        backend = conn.backend
        assert backend is not None
        if req.api is Api.METADATA:
            md = self.cluster.metadata(req.topics)
            self._metadata_answers += 1
            self.deliver(MetadataReceived(rid, md))
            self.client.on_metadata(md, had_topics=bool(req.topics))
            return
        self.deliver(ResponseReceived(rid))
        self.client.on_response(req, routed_ok and self._still_right(req, backend))

    def _still_right(self, req: SimRequest, backend: int) -> bool:
        """Whether the broker that answered is still the right one (leader, coordinator)."""
        if req.coordinator is not None:
            return self.cluster.coordinator_of(req.coordinator) == backend
        return all(self.cluster.leader(tp) == backend for tp in req.partitions)

    def _timed_out(self, conn: SimConn, rid: int) -> None:
        """Request ``rid`` got no answer within ``request_timeout_ms``: the client drops
        the connection (Java's NetworkClient and aiokafka both do), failing whatever it
        held; the policy hears it as a closed connection and re-sends those requests."""
        if conn.open and rid in conn.in_flight:
            self._end_unanswered(conn)
            self.peer_close(conn, "request_timeout")

    def _end_unanswered(self, conn: SimConn) -> None:
        """The requests waiting on ``conn`` for an answer that never comes stop waiting (one
        whose answer was not yet due has not waited for nothing: it is not counted)."""
        for sent in conn.unanswered.values():
            self.stale_waits += 1
            self.stale_wait_ms += self.now - sent
        conn.unanswered.clear()

    def close(self, conn_id: int, reason: CloseReason) -> None:
        if conn_id in self._severed:
            return  # already reset by the peer; the policy hears of it next
        conn = self._conns.pop(conn_id)
        if conn.unanswered:
            self._end_unanswered(conn)
        conn.open = False
        conn.record.closed_ms = self.now
        conn.record.close_reason = reason.value
        self.ledger.closed(self.now, conn_id, reason.value)

    def adopt(self, conn_id: int, old_key: ConnectionKey, new_key: ConnectionKey) -> None:
        conn = self._conns.get(conn_id) or self._severed[conn_id]
        conn.key = new_key
        conn.record.adopted_as = new_key
        self.ledger.adopted(self.now, conn_id, new_key)

    def peer_close(self, conn: SimConn, reason: str) -> None:
        """The broker side closes ``conn`` (broker down, broker idle reaping)."""
        self.peer_close_all([conn], reason)

    def peer_close_all(self, conns: list[SimConn], reason: str) -> None:
        """The broker side closes ``conns`` at one instant (a broker dies, a link drops).

        Every socket is reset before the policy hears of the first: a request it sends
        meanwhile on another of them is lost (as on a real reset socket), and the policy
        re-sends it when it hears that one closed too.
        """
        severed = [c for c in conns if c.open]
        for conn in severed:
            conn.open = False
            self._conns.pop(conn.conn_id, None)
            self._severed[conn.conn_id] = conn
            conn.record.closed_ms = self.now
            conn.record.close_reason = reason
            self.ledger.peer_closed(self.now, conn.conn_id, reason)
        for conn in severed:
            del self._severed[conn.conn_id]
            if conn.ready:
                self.deliver(ConnectionClosedByPeer(conn.conn_id))
            else:
                self.deliver(ConnectionFailed(conn.conn_id))
            self.client.metadata_stale()

    def _schedule_reap(self, conn: SimConn) -> None:
        idle = self.cluster.broker_idle_ms
        if idle is not None:
            self.at(conn.last_active + idle, lambda: self._reap(conn))

    def _reap(self, conn: SimConn) -> None:
        idle = self.cluster.broker_idle_ms
        if not conn.open or idle is None or conn.address in self.cluster.dark:
            return  # (a replaced pod's socket: nobody is left to reap it)
        if conn.in_flight:
            self.at(self.now + idle, lambda: self._reap(conn))
            return
        if conn.last_active + idle > self.now:
            self.at(conn.last_active + idle, lambda: self._reap(conn))
            return
        self.peer_close(conn, "broker_idle")

    # --- cluster changes -----------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        self.cluster.set_down(broker_id)
        self.peer_close_all(
            [c for c in self._conns.values() if c.backend == broker_id], "broker_down"
        )

    def open_connections(self) -> list[SimConn]:
        return [c for c in self._conns.values() if c.open]

    # --- the run -------------------------------------------------------------------------

    def run(self) -> RunResult:
        started = time.perf_counter()
        self.start()
        self.advance_to(self.duration_ms)
        return self.finish(started)

    # Stepping: run() is start(), advance_to(duration), finish(). A driver that interleaves
    # its own changes (a property test feeding two simulators the same events) calls them
    # itself, changing the cluster only between advances.

    def start(self) -> None:
        """Start the client (its first requests go out at time 0)."""
        self.client.start(self.policy.bootstraps_at_start(self.client_kind is ClientKind.PRODUCER))

    def advance_to(self, end: float) -> None:
        """Carry out everything scheduled up to and including ``end``; the clock ends there."""
        heap = self._heap
        while heap and heap[0][0] <= end:
            when, _, fn = heapq.heappop(heap)
            self.now = when
            fn()
        self.now = max(self.now, end)

    def finish(self, started: float | None = None) -> RunResult:
        """End the run at the current time: the steady state, then the client closes."""
        started = time.perf_counter() if started is None else started
        if not self.client_closed:
            self.deliver(TimePassed())
        steady = self.open_connections()
        steady_keys = [c.key for c in steady]
        counts = self.ledger.counts(self.now)
        needed = self.policy.needed_connections()
        needed_ids = None if needed is None else sorted(needed)
        self.close_client()
        leaked = self.open_connections()
        result = RunResult.build(
            self,
            counts=counts,
            steady=steady_keys,
            needed_conn_ids=needed_ids,
            steady_conn_ids=[c.conn_id for c in steady],
            leaked=len(leaked),
            wall_s=time.perf_counter() - started,
        )
        if self.cluster.dns:
            result.stale_waits = self.stale_waits
            result.stale_wait_ms = self.stale_wait_ms
        return result
