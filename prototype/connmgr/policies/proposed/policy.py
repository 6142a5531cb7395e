"""The proposed policy's placement (rules a, b, d, e and h) and its assembly of the rules
that live in their own modules; see :mod:`connmgr.policies.proposed`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from connmgr.core.actions import CloseReason
from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection, first_ready
from connmgr.core.decisions import (
    NO_DECISIONS,
    WAIT,
    CloseNow,
    Decision,
    DialDecision,
    OpenFor,
    Placement,
    SendOn,
    retire,
)
from connmgr.core.events import AddressesResolved, IdentityAnswer
from connmgr.core.identity import BootstrapNode, BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.core.state import ConnState
from connmgr.policies.proposed.adoption import Adoption
from connmgr.policies.proposed.budget import SocketBudget
from connmgr.policies.proposed.coordinators import coordinator_purpose, leaders_in_use
from connmgr.policies.proposed.prompt_close import PromptClose
from connmgr.policies.proposed.stale_address import StaleAddresses


class ProposedPolicy(Policy):
    name: ClassVar[str] = "proposed"
    extra_options: ClassVar[frozenset[str]] = frozenset(
        {"bootstrap_offset", "warm_up", "share_coordinator", "connection_linger_ms"}
        | {"max_connections", "expected_cluster_id", "adopt_unverified"}
    )
    summary: ClassVar[str] = "(host, port, id) keys, deferred, adopt-or-close, prompt close"
    checks_dialled_identity: ClassVar[bool] = True

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(config, rng)
        n = len(config.bootstrap)
        start = config.bootstrap_offset
        self._boot_cursor = start if start is not None else rng.randrange(n)
        self.adoption = Adoption(self)
        self.prompt_close = PromptClose(self, self.adoption)
        self.budget = SocketBudget(self)
        self.stale_addresses = StaleAddresses(self)

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        """a. Deferred: nothing is dialled until a request needs it (``warm_up`` bootstraps
        at start)."""
        return self.config.warm_up

    # --- placement -----------------------------------------------------------------------

    def place(self, request: Request) -> Placement:
        """e. Data requests go to the leader's data connection, dialled on first need.
        Coordinator requests go to their broker's connection of the coordinator's purpose
        (rule f); any-node requests as rule (d) says."""
        target = request.target
        md = self.metadata
        if isinstance(target, ToBootstrap | ToAnyNode):
            return self._any_node()
        if md is None:
            return WAIT
        if isinstance(target, ToBroker):
            broker_id, purpose = target.broker_id, Purpose.DATA
        else:
            assert isinstance(target, ToCoordinator)
            broker_id = target.broker_id
            purpose = coordinator_purpose(self.config, target.coordinator.kind)
        endpoint = md.endpoint_of(broker_id)
        if endpoint is None:
            return WAIT  # not in metadata: the client refreshes it and asks again
        if self.adoption.awaiting_answer(broker_id):
            return WAIT  # the bootstrap socket may be this broker's: wait for its answer
        return OpenFor(ConnectionKey(endpoint, BrokerNode(broker_id), purpose))

    def _any_node(self) -> Placement:
        """d. Any-node requests (Metadata, FindCoordinator, InitProducerId) go to the
        least-loaded READY connection; a dial happens only when none is ready or connecting.

        Broker connections first: a kept bootstrap connection is only a stand-in (rule c),
        and using it would keep resetting its linger."""
        records = self.table.records()
        general = [c for c in records if c.role is not Role.COORDINATION]
        brokers = [c for c in general if c.role is not Role.BOOTSTRAP]
        ready = first_ready(brokers) or self.adoption.stand_in(records) or first_ready(records)
        if ready is not None:
            return SendOn(ready)
        for conn in general:
            if conn.state in (ConnState.CONNECTING, ConnState.DEFERRED):
                return SendOn(conn)  # one dial at a time: wait for it
        if self.metadata is None or not self.metadata.brokers:
            return self._dial_next_bootstrap()
        return self._dial_some_broker()

    def _dial_next_bootstrap(self) -> Placement:
        """b. One bootstrap attempt at a time, failing over through the list from a random
        start (the one under way is waited for: :meth:`_any_node`)."""
        servers = self.config.bootstrap
        for step in range(len(servers)):
            index = (self._boot_cursor + step) % len(servers)
            key = ConnectionKey(servers[index], BootstrapNode(index), Purpose.DATA)
            if not self.table.in_backoff(key, self.now_ms):
                self._boot_cursor = index
                return OpenFor(key)
        return WAIT

    def _dial_some_broker(self) -> Placement:
        """A broker for an any-node request: a leader in use first (its connection will be
        needed anyway), else a random broker; none backing off."""
        md = self.metadata
        assert md is not None
        leaders = sorted(leaders_in_use(self))
        others = [b.broker_id for b in md.brokers if b.broker_id not in leaders]
        offset = self.rng.randrange(len(others)) if others else 0
        for broker_id in leaders + others[offset:] + others[:offset]:
            endpoint = md.endpoint_of(broker_id)
            if endpoint is None:
                continue
            key = ConnectionKey(endpoint, BrokerNode(broker_id), Purpose.DATA)
            if not self.table.in_backoff(key, self.now_ms) and self.table.live(key) is None:
                return OpenFor(key)
        return WAIT

    def before_dial(self, conn: Connection) -> DialDecision:
        """Rule (c)'s stand-ins close before a broker dial; rule (i) says whether it dials."""
        return self.budget.admit(conn, self.adoption.closed_before_dial(conn))

    # --- events --------------------------------------------------------------------------

    def on_metadata(
        self, old: ClusterMetadata | None, via: Connection | None
    ) -> Iterator[Decision]:
        yield from self.retire_moved()
        yield from self.adoption.on_metadata(old)

    def retire_moved(self) -> Iterator[Decision]:
        """h. Endpoint change: when metadata moves a node id to a new host:port, connections
        to the old one drain and close; new requests dial the new endpoint (the key
        differs)."""
        md = self.metadata
        assert md is not None
        for conn in self.table.records():
            broker_id = conn.key.broker_id
            if broker_id is None:
                continue
            endpoint = md.endpoint_of(broker_id)
            if endpoint is not None and endpoint != conn.key.endpoint:
                decision = retire(conn, CloseReason.ENDPOINT_CHANGED)
                if decision is not None:
                    yield decision

    def on_identity_checked(
        self, conn: Connection, broker_id: int, answer: IdentityAnswer
    ) -> Iterator[Decision]:
        return self.adoption.on_answer(conn, broker_id, answer)

    def on_addresses_resolved(self, lookup: AddressesResolved) -> Iterator[Decision]:
        """Rule (h2); a connection it closes is lost to rule (g) as one reset by its peer."""
        for decision in self.stale_addresses.on_lookup(lookup):
            if isinstance(decision, CloseNow):
                self.prompt_close.lost(decision.conn)
            yield decision

    def on_connection_lost(self, conn: Connection) -> Iterator[Decision]:
        self.prompt_close.lost(conn)
        return iter(())

    # --- what is needed, and prompt close ------------------------------------------------

    def needed_connections(self) -> frozenset[int]:
        """Ids of the READY connections the policy keeps open now: a leader in use, a
        coordinator, or the last one left for any-node requests; plus any that are busy."""
        kept, busy = self.prompt_close.needs()
        return kept | busy

    def review(self) -> Iterator[Decision]:
        """Rule (g) when something changed or a linger ran out, then rule (i)'s deferred
        dials; rule (i) alone otherwise (a deferred dial waits for a quiet socket, and
        sockets go quiet on responses, which are no change: look every time one waits)."""
        # Not a generator itself: after most events (a request on a warm connection, its
        # response) there is nothing to review, and a generator would be built for nothing.
        if self.prompt_close.due() or not self.derived.done("review"):
            return self._review_all()
        if self.budget.waiting:
            return self.budget.dial_deferred()
        return NO_DECISIONS

    def _review_all(self) -> Iterator[Decision]:
        yield from self.prompt_close.review()
        yield from self.budget.dial_deferred()
        self.derived.mark("review")

    def next_deadline(self) -> float | None:
        return self.prompt_close.next_deadline()
