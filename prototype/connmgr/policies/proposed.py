"""``proposed``: the connection manager this project proposes.

Connections are keyed by (host, port, node id) plus purpose, and the policy holds exactly the
sockets the client needs:

a. Deferred: nothing is dialled until a request needs it (``warm_up`` bootstraps at start).
b. One bootstrap attempt at a time, failing over through the list from a random start.
c. Confirm, then adopt or close: when metadata arrives and places exactly one broker X at a
   READY bootstrap connection's host:port, the client needs X (a leader in use, a coordinator)
   and the cluster id agrees, the client asks the broker on that very socket whether it is node
   X of that cluster -- KIP-1242's check, ``ApiVersions`` v5 with ``ClusterId`` and ``NodeId``
   (Kafka 4.4+; on SASL listeners sent only after authentication, before which a broker does
   not check it). Requests for X wait for the answer instead of dialling X. Confirmed, the
   socket becomes X's data connection (or its coordination connection, if X is only the
   consumer's group coordinator): no second dial. Rejected (``REBOOTSTRAP_REQUIRED``), it
   drains and closes, counted as such; unanswered (another error, a timeout), it closes as one
   never asked; either way X is dialled. A broker without the check (before 4.4) keeps the rule
   below; so does a host:port metadata gives to several brokers (a proxy: no one node to ask
   about). ``adopt_unverified`` adopts a socket whose broker cannot be asked when metadata
   gives the host:port to exactly one broker (unsafe: see the safety note).
   A connection not adopted carries no broker request: if the cluster id agrees it serves
   any-node requests until the first broker dial, which closes it first (so the stand-in
   never adds to the peak; one still busy then closes as soon as a broker connection is
   ready, without a linger); if not, it drains and closes at once. It is never left as an
   orphan. Dials to known brokers carry the same check in their own handshake, so a
   host:port that now leads to another broker fails the dial instead of misrouting requests.
d. Any-node requests (Metadata, FindCoordinator, InitProducerId) go to the least-loaded READY
   connection; a dial happens only when none is ready or connecting.
e. Data requests go to the leader's data connection, dialled on first need.
f. Coordinators are plural (a group coordinator, a transaction coordinator, ...), each with its
   own placement and its own entry among the needed connections. A consumer's group coordinator gets
   its own coordination connection (group requests must not queue behind long-poll fetches),
   or shares the data connection with ``share_coordinator``; a producer's coordinator
   requests go on the data connection to its broker (see :meth:`_coordinator_purpose`).
g. Prompt close: a connection nothing needs (not a leader in use, not the coordinator, not
   the last connection left for any-node requests, nothing in flight) closes after
   ``connection_linger_ms``, whatever ``connections.max.idle.ms`` says.
h. Endpoint change: when metadata moves a node id to a new host:port, connections to the old
   one drain and close; new requests dial the new endpoint (the key differs).
h2. Stale address (decided in :meth:`ProposedPolicy.on_addresses_resolved`): a connection
   to a host name is retired only when DNS says, twice, that its address is no longer the
   name's. A lookup that failed -- timed out, SERVFAIL, NXDOMAIN, or an answer with no
   address -- changes nothing: an established TCP connection does not depend on DNS (a
   reused IP cannot take it over: the new host answers RST), so a DNS outage closes no
   working connection, as with today's clients. A successful answer that leaves out the
   address a connection reached marks it; the next successful answer for that name (the
   driver's next refresh, one TTL later; failed lookups between them neither count nor
   clear the mark) confirms it if it leaves the address out too, and then the connection
   closes at once, busy or not, and its in-flight requests go back to be placed again, as
   when a connection is lost: the next request for the broker dials anew instead of
   waiting out ``request_timeout_ms`` on an address that may never answer (a pod restarted
   under its DNS name with a new IP). An answer that includes the address clears the mark.
i. Socket budget: with ``max_connections``, a dial at the cap first closes the least recently
   used quiet connection, unneeded ones first; with none quiet, the dial is DEFERRED and its
   requests wait for the next socket to go quiet. The cap is never exceeded. Needed-but-quiet
   connections may be closed too: otherwise a budget below the number of needed connections
   (a consumer's fetch and coordinator sockets with a budget of 1) would starve a request
   forever instead of slowing it down.
j. Metrics by role, including the handshakes adoption saved.

Safety note on (c). A bootstrap socket reached *some* broker behind the bootstrap host:port.
Inferring which from metadata ("exactly one broker is advertised at this host:port") looks
safe but is not: the property suite (tests/properties) found a proxy that led the address to
broker 3 when the socket was dialled and to broker 4 only when the metadata answer arrived,
so the socket was adopted as broker 4's and every request for 4 reached 3. Hence adoption
needs the broker's own word on the socket: asked "are you 4?", broker 3 answers
``REBOOTSTRAP_REQUIRED`` and the socket is closed, nothing misrouted. The inference alone is
an opt-in (``adopt_unverified``) for clusters known to have no remapping proxy in front.
:attr:`PolicyConfig.expected_cluster_id` adds what a client can check without the broker: a
different cluster is never adopted.
"""

from __future__ import annotations

from typing import ClassVar

from connmgr.core.actions import CloseReason
from connmgr.core.config import ClientKind, PolicyConfig
from connmgr.core.connections import Connection, first_ready
from connmgr.core.coordinator import CoordinatorKind
from connmgr.core.events import AddressesResolved, IdentityAnswer
from connmgr.core.identity import BootstrapNode, BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.core.state import ConnState


class ProposedPolicy(Policy):
    name: ClassVar[str] = "proposed"
    summary: ClassVar[str] = "(host, port, id) keys, deferred, adopt-or-close, prompt close"
    library: ClassVar[str] = "aiokafka"
    find_coordinator_with_first_metadata: ClassVar[bool] = True
    """The client sends its bootstrap exchange together: the coordinator lookup goes out with
    the first metadata request, on the same connection (the drop-in client prefetches it;
    aiokafka alone would wait for the metadata answer first)."""

    checks_dialled_identity: ClassVar[bool] = True

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(config, rng)
        n = len(config.bootstrap)
        start = config.bootstrap_offset
        self._boot_cursor = start if start is not None else rng.randrange(n)
        self._lingering: list[Connection] = []
        self._deferred: list[Connection] = []
        self._reviewed = -1
        self._leaders_cache: tuple[object, object, frozenset[int]] = (None, None, frozenset())
        self._coordinator_needs: tuple[int, dict[Purpose, frozenset[int]]] = (-1, {})
        self._stale_marks: set[int] = set()
        """Connections a successful answer for their name left out once (rule h2)."""
        self._checks: dict[int, Connection] = {}
        """Broker id -> the bootstrap connection whose broker is being asked whether it is
        that broker (rule c); requests for it wait for the answer."""

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        return self.config.warm_up

    # --- placement -----------------------------------------------------------------------

    def place(self, request: Request) -> Connection | None:
        target = request.target
        md = self.metadata
        if isinstance(target, ToBootstrap | ToAnyNode):
            return self._any_node()
        if md is None:
            return None
        if isinstance(target, ToBroker):
            broker_id, purpose = target.broker_id, Purpose.DATA
        else:
            assert isinstance(target, ToCoordinator)
            broker_id = target.broker_id
            purpose = self._coordinator_purpose(target.coordinator.kind)
        endpoint = md.endpoint_of(broker_id)
        if endpoint is None:
            return None  # not in metadata: the client refreshes it and asks again
        if self._checks and self._check_in_flight(broker_id):
            return None  # the bootstrap socket may be this broker's: wait for its answer
        return self.get_or_dial(ConnectionKey(endpoint, BrokerNode(broker_id), purpose))

    def _coordinator_purpose(self, kind: CoordinatorKind) -> Purpose:
        """Group requests get a coordination connection of their own (a JoinGroup may wait a
        whole rebalance on the broker, and a broker serves one request per connection at a
        time) unless ``share_coordinator``. A transaction coordinator's requests are short
        and its producer's data connections carry only Produce, so they ride the data
        connection to that broker -- as the Java client's transaction manager does -- which
        exists anyway when the broker leads a partition the producer writes. A producer's
        group requests (``TxnOffsetCommit`` in a consume-transform-produce loop) are as short
        and wait behind no long poll, so they ride the data connection too: with both
        coordinators on one broker the producer holds one socket there, not two."""
        if (
            kind is CoordinatorKind.GROUP
            and self.config.client is ClientKind.CONSUMER
            and not self.config.share_coordinator
        ):
            return Purpose.COORDINATION
        return Purpose.DATA

    def _any_node(self) -> Connection | None:
        general = [c for c in self.table.records() if c.role is not Role.COORDINATION]
        # Broker connections first: a kept bootstrap connection is only a stand-in, and
        # using it would keep resetting its linger.
        brokers = [c for c in general if c.role is not Role.BOOTSTRAP]
        ready = first_ready(brokers) or first_ready(general) or first_ready(self.table.records())
        if ready is not None:
            return ready
        for conn in general:
            if conn.state in (ConnState.CONNECTING, ConnState.DEFERRED):
                return conn  # one dial at a time: wait for it
        if self.metadata is None or not self.metadata.brokers:
            return self._dial_next_bootstrap()
        return self._dial_some_broker()

    def _dial_next_bootstrap(self) -> Connection | None:
        servers = self.config.bootstrap
        for step in range(len(servers)):
            index = (self._boot_cursor + step) % len(servers)
            key = ConnectionKey(servers[index], BootstrapNode(index), Purpose.DATA)
            if not self.in_backoff(key):
                self._boot_cursor = index
                return self.get_or_dial(key)
        return None

    def _dial_some_broker(self) -> Connection | None:
        """A broker for an any-node request: a leader in use first (its connection will be
        needed anyway), else a random broker; none backing off."""
        md = self.metadata
        assert md is not None
        leaders = sorted(self._leaders_in_use())
        others = [b.broker_id for b in md.brokers if b.broker_id not in leaders]
        offset = self.rng.randrange(len(others)) if others else 0
        for broker_id in leaders + others[offset:] + others[:offset]:
            endpoint = md.endpoint_of(broker_id)
            if endpoint is None:
                continue
            key = ConnectionKey(endpoint, BrokerNode(broker_id), Purpose.DATA)
            if not self.in_backoff(key) and self.table.live(key) is None:
                return self.get_or_dial(key)
        return None

    # --- metadata: endpoint changes and adoption -----------------------------------------

    def on_metadata(self, old: ClusterMetadata | None, via: Connection | None) -> None:
        md = self.metadata
        assert md is not None
        for conn in self.table.records():
            broker_id = conn.key.broker_id
            if broker_id is None:
                continue
            endpoint = md.endpoint_of(broker_id)
            if endpoint is not None and endpoint != conn.key.endpoint:
                self._retire_connection(conn, CloseReason.ENDPOINT_CHANGED)
        expected = self.config.expected_cluster_id or (old.cluster_id if old else None)
        cluster_agrees = expected is None or md.cluster_id == expected
        for conn in self.table.records():
            if conn.role is not Role.BOOTSTRAP or conn.checking is not None:
                continue  # not a bootstrap connection, or its broker's answer is on its way
            candidate = self._candidate(conn, md) if cluster_agrees else None
            if conn.state is ConnState.READY and candidate is not None and md.cluster_id:
                self._checks[candidate] = conn
                self.check_identity(conn, candidate, md.cluster_id)
                continue
            broker_id = self._identity(conn, md) if cluster_agrees else None
            if conn.state is ConnState.READY and broker_id is not None:
                new_key = ConnectionKey(conn.key.endpoint, BrokerNode(broker_id), Purpose.DATA)
                if self.table.live(new_key) is None:
                    self.adopt(conn, new_key)
                    continue
            if conn.state is ConnState.READY and cluster_agrees:
                # Otherwise not adoptable (its host:port is shared, unlisted, or already has
                # its own connection, or its broker cannot be asked) but it reached a broker
                # of this cluster, which is all an any-node request needs: it serves those
                # until a broker connection can, and is closed as soon as it is quiet and not
                # needed (before a broker dial, so it never adds to the peak). Closing it now
                # would cost a dial for the very next Metadata request.
                continue
            self._retire_connection(conn, CloseReason.NOT_ADOPTED)

    def _candidate(self, conn: Connection, md: ClusterMetadata) -> int | None:
        """The broker to ask a bootstrap connection's peer about: the one broker metadata
        places at its host:port, if its broker answers the check, the client needs that
        broker (a leader in use, a coordinator) and it has no connection of its own yet. A
        broker nothing needs is not asked: adopted, its socket would linger where the
        stand-in closes at the first broker dial (a bootstrap entry of a big cluster is
        rarely a client's leader, and would hold every starting client's socket)."""
        ids = md.ids_at(conn.key.endpoint)
        if not conn.checks_identity or md.cluster_id is None or len(ids) != 1:
            return None
        (only,) = ids
        if not self._wanted(only):
            return None
        if self.table.live_for_node(BrokerNode(only), Purpose.DATA) is not None:
            return None
        return only

    def _wanted(self, broker_id: int) -> bool:
        """Whether a role needs a connection to ``broker_id``: a leader in use, or a
        coordinator."""
        if broker_id in self._leaders_in_use():
            return True
        return any(broker_id in ids for ids in self._coordinators_by_purpose().values())

    def _check_in_flight(self, broker_id: int) -> bool:
        conn = self._checks.get(broker_id)
        if conn is not None and conn.checking == broker_id and conn.state is ConnState.READY:
            return True
        self._checks.pop(broker_id, None)
        return False

    def on_identity_checked(self, conn: Connection, broker_id: int, answer: IdentityAnswer) -> None:
        """Rule (c), the answer: adopt the socket as the broker's if it confirmed, metadata
        still places the broker there alone and the client still needs it (if not, the
        stand-in closes as an unadopted one does); close it if the broker said no."""
        self._checks.pop(broker_id, None)
        md = self.metadata
        if (
            answer is IdentityAnswer.CONFIRMED
            and conn.state is ConnState.READY
            and md is not None
            and md.ids_at(conn.key.endpoint) == frozenset({broker_id})
            and self._wanted(broker_id)
        ):
            purpose = self._adopted_purpose(broker_id)
            new_key = ConnectionKey(conn.key.endpoint, BrokerNode(broker_id), purpose)
            if self.table.live(new_key) is None:
                self.adopt(conn, new_key)
                return
        if answer is IdentityAnswer.REJECTED:
            self._retire_connection(conn, CloseReason.IDENTITY_REJECTED)
        elif answer is IdentityAnswer.FAILED:
            self._retire_connection(conn, CloseReason.NOT_ADOPTED)  # nothing was said

    def _adopted_purpose(self, broker_id: int) -> Purpose:
        """A confirmed bootstrap socket becomes the broker's data connection, or its
        coordination connection when the broker is only the consumer's group coordinator."""
        wanted = self._coordinators_by_purpose()
        if broker_id in wanted[Purpose.COORDINATION] and broker_id not in self._leaders_in_use():
            return Purpose.COORDINATION
        return Purpose.DATA

    def on_addresses_resolved(self, lookup: AddressesResolved) -> None:
        """Rule (h2): a failed or empty lookup changes nothing; a READY or DRAINING
        connection to ``lookup.host`` whose address two consecutive successful answers for
        the name leave out closes at once, busy or not, and its in-flight requests are
        placed again -- the path of a lost connection (:meth:`close`).

        Why two: one answer may be a resolver's mistake (a stale or split-horizon view, a
        half-updated record set); the same answer on the driver's next refresh, a TTL later,
        is the name's. Why at once then: that address no longer belongs to this broker (a
        dark pod never answers, a reused IP is another host), so waiting for its replies only
        waits out ``request_timeout_ms``; today's clients close the connection and retry its
        requests after that timeout, so no delivery guarantee changes, only when the retry
        happens. A connection whose address the driver never said (None) is left alone:
        nothing says it is stale."""
        if not lookup.answered:
            return  # a DNS outage is not a broker moving: the marks stand, nothing closes
        marked, self._stale_marks = self._stale_marks, set()
        for conn in self.table.records():
            if conn.key.endpoint.host != lookup.host:
                if conn.conn_id in marked:
                    self._stale_marks.add(conn.conn_id)  # another name's mark: untouched
            elif (
                conn.state in (ConnState.READY, ConnState.DRAINING)
                and conn.address is not None
                and conn.address not in lookup.addresses
            ):
                if conn.conn_id in marked:
                    self.close(conn, CloseReason.STALE_ADDRESS)
                else:
                    self._stale_marks.add(conn.conn_id)

    def _identity(self, conn: Connection, md: ClusterMetadata) -> int | None:
        """The broker a bootstrap connection that cannot be asked may be adopted as: only with
        ``adopt_unverified``, the one broker metadata places at its host:port -- which a
        proxy that remapped the address since the dial defeats (see the safety note)."""
        ids = md.ids_at(conn.key.endpoint)
        if self.config.adopt_unverified and len(ids) == 1:
            (only,) = ids
            return only
        return None

    def _retire_connection(self, conn: Connection, reason: CloseReason) -> None:
        if conn.state is ConnState.READY:
            self.drain(conn, reason)
        elif conn.state is not ConnState.DRAINING:
            self.close(conn, reason)

    # --- what is needed, and prompt close ------------------------------------------------

    def _leaders_in_use(self) -> frozenset[int]:
        md, interest = self.metadata, self.interest
        cached_md, cached_interest, leaders = self._leaders_cache
        if cached_md is md and cached_interest is interest:
            return leaders
        if md is None:
            leaders = frozenset()
        elif interest is None:
            leaders = md.leader_ids
        else:
            leaders = md.leaders_for(interest)
        self._leaders_cache = (md, interest, leaders)
        return leaders

    def _needed(self, conn: Connection, leaders: frozenset[int]) -> bool:
        """Whether the connection's role keeps it open (busy connections are never closed
        either, but a busy connection whose role is over still lingers)."""
        if conn.role is Role.BOOTSTRAP:
            return self.metadata is None or conn.checking is not None
        broker_id = conn.key.broker_id
        assert broker_id is not None
        version, wanted = self._coordinator_needs
        if version != self.version:
            wanted = self._coordinators_by_purpose()
            self._coordinator_needs = (self.version, wanted)
        return broker_id in wanted[conn.key.purpose] or (
            conn.key.purpose is Purpose.DATA and broker_id in leaders
        )

    def _coordinators_by_purpose(self) -> dict[Purpose, frozenset[int]]:
        """For each purpose, the brokers whose connection of that purpose a known
        coordinator needs (cached per ``version``, which every placement change bumps)."""
        by_purpose: dict[Purpose, set[int]] = {p: set() for p in Purpose}
        for ref, broker_id in self.coordinators.items():
            by_purpose[self._coordinator_purpose(ref.kind)].add(broker_id)
        return {p: frozenset(ids) for p, ids in by_purpose.items()}

    def needed_connections(self) -> frozenset[int]:
        """Ids of the READY connections the policy keeps open now: a leader in use, a
        coordinator, or the last one left for any-node requests; plus any that are busy."""
        kept, busy = self._needs()
        return kept | busy

    def _needs(self) -> tuple[frozenset[int], frozenset[int]]:
        """(kept for their role, busy): the READY connections a role keeps (with the
        any-node anchor), and those only a request in flight or queued keeps."""
        leaders = self._leaders_in_use()
        ready = [c for c in self.table.records() if c.state is ConnState.READY]
        kept = {c.conn_id for c in ready if self._needed(c, leaders)}
        busy = {c.conn_id for c in ready if c.busy and c.conn_id not in kept}
        general = [c for c in ready if c.role is not Role.COORDINATION]
        if general and not any(c.conn_id in kept or c.conn_id in busy for c in general):
            anchor = max(
                general, key=lambda c: (c.role is not Role.BOOTSTRAP, c.last_used_ms, c.conn_id)
            )
            kept.add(anchor.conn_id)
        return frozenset(kept), frozenset(busy)

    def _linger_deadline(self, conn: Connection) -> float:
        assert conn.unneeded_since_ms is not None
        return max(conn.unneeded_since_ms, conn.last_used_ms) + self.config.connection_linger_ms

    def maintain(self) -> None:
        # A review is needed only when something structural changed or a linger ran out:
        # requests and responses alone cannot make a connection unneeded (a busy connection
        # is kept, and the linger counts from its last use).
        self.expire_idle()
        lingering = self._lingering
        due = bool(lingering) and any(self._linger_deadline(c) <= self.now_ms for c in lingering)
        if due or self.version != self._reviewed:
            self._review()
        elif self._deferred:
            # A deferred dial waits for a quiet socket; sockets go quiet on responses, which
            # are not structural changes, so look every time while something waits.
            self._dial_deferred()

    def _review(self) -> None:
        kept, _ = self._needs()
        self._lingering = []
        for conn in self.table.records():
            if conn.state is not ConnState.READY or conn.conn_id in kept:
                conn.unneeded_since_ms = None
                continue
            # Unneeded by its role. A busy one is not closed, but it lingers from now: its
            # last response is not a structural change that would bring a review, so it
            # must already be on the lingering list when that response comes (found by the
            # deep profile: a coordinator lost while two of its requests were in flight).
            if conn.unneeded_since_ms is None:
                conn.unneeded_since_ms = self.now_ms
            if conn.role is Role.BOOTSTRAP and not conn.busy:
                # A kept bootstrap connection goes as soon as a broker connection can take
                # its any-node requests: no linger, it has no broker of its own to return to.
                self.close(conn, CloseReason.NOT_ADOPTED)
            elif not conn.busy and self._linger_deadline(conn) <= self.now_ms:
                self.close(conn, CloseReason.UNNEEDED)
            else:
                self._lingering.append(conn)
        self._dial_deferred()
        self._reviewed = self.version

    def next_deadline(self) -> float | None:
        if not self._lingering:
            return None
        return min(self._linger_deadline(c) for c in self._lingering)

    # --- socket budget -------------------------------------------------------------------

    def admit_dial(self, conn: Connection) -> bool:
        """A new record dials when a socket is free under ``max_connections`` (or one can be
        made free); else it waits DEFERRED for one (:meth:`_review` starts it)."""
        if conn.key.broker_id is not None and self.metadata is not None:
            # A broker dial retires a quiet kept bootstrap connection first, so that the
            # stand-in never adds to the peak; a busy one goes once a broker connection is
            # ready to take over (see _review).
            for other in self.table.records():
                if (
                    other.role is Role.BOOTSTRAP
                    and other.state is ConnState.READY
                    and not other.busy
                    and other.checking is None
                ):
                    self.close(other, CloseReason.NOT_ADOPTED)
        if self._has_room() or self._make_room():
            return True
        self._deferred.append(conn)  # requests wait on it until a socket is free
        return False

    def _has_room(self) -> bool:
        cap = self.config.max_connections
        return cap is None or self.socket_count() < cap

    def _make_room(self) -> bool:
        needed = self.needed_connections()
        quiet = [c for c in self.table.records() if c.state is ConnState.READY and not c.busy]
        if not quiet:
            return False
        victim = min(quiet, key=lambda c: (c.conn_id in needed, c.last_used_ms, c.conn_id))
        self.close(victim, CloseReason.BUDGET)
        return True

    def _dial_deferred(self) -> None:
        waiting, self._deferred = self._deferred, []
        for conn in waiting:
            if conn.state is not ConnState.DEFERRED:
                continue  # closed meanwhile
            if self._has_room() or self._make_room():
                self.start_dial(conn)
            else:
                self._deferred.append(conn)
