"""``java-today``: the Java client's NetworkClient as trunk behaves (B2 in baseline-behaviour).

* Connections are found by node id alone (``ClusterConnectionStates`` is keyed by id), so an
  open connection keeps serving its node id even after metadata moves that id elsewhere.
* Bootstrap servers get negative ids (-1, -2, ...) and are never merged with brokers nor closed
  on purpose: they go by idle expiry like any other connection.
* Any-node requests (Metadata, FindCoordinator, InitProducerId) go to ``leastLoadedNode``: a
  scan from a random offset that prefers a READY node (fewest in-flight requests), then one
  already CONNECTING, then one it could dial. While one dial is under way it starts no other.
* The consumer's group coordinator is a separate node ``2147483647 - brokerId`` with its own
  socket; the producer's ``TransactionManager`` keeps the node FindCoordinator returned with
  its real id, for the transaction coordinator and for the group coordinator of
  ``sendOffsetsToTransaction`` alike, so its transactional requests and its TxnOffsetCommit
  share that broker's ordinary connection.
* A producer fetches metadata right after construction (since 2.2); a consumer on first poll.
  A consumer looks the coordinator up after its first metadata response (measured with
  kafka-clients 4.4.0: by then the bootstrap node is out of the scanned list, so a random broker
  is dialled for FindCoordinator).
* Callers that pick a node and dial it on the next poll loop (the producer's transaction
  manager for InitProducerId, the consumer's coordinator lookup) do not see each other's
  picks: two picks made before any dial can open two bootstrap connections (measured with
  4.4.0: InitProducerId and the first metadata request on -2 and -3). The metadata updater
  dials its pick at once.
* The producer's transaction manager (InitProducerId) and the KIP-714 telemetry sender
  (GetTelemetrySubscriptions, sent right after the first metadata request) re-pick
  ``leastLoadedNode`` on every poll loop until their node is READY. Measured with 4.4.0: in
  about half the runs the telemetry sender's loop finds no node able to take a request just
  after metadata arrives and dials a random broker, one more socket that nothing else uses.
* ``replay_choices``: the node ids a recorded run's ``leastLoadedNode`` returned "with no
  active connection" (TRACE log), replayed in order: they stand for the random offset and
  for picks that depend on timing the simulator does not have (a node whose previous
  request is still being written is neither ready nor connecting to ``leastLoadedNode``).
  ``replay_telemetry``: the node the recorded telemetry request went to. ``replay_lookups``:
  the nodes the recorded FindCoordinator requests went to; a lookup whose recorded node is one
  the model holds a READY connection to goes there (``leastLoadedNode`` returned a node with
  an active connection, which the TRACE log does not show as a pick: measured with 4.4.0, a
  consumer whose lookup ran before its first metadata response was applied sent
  FindCoordinator on its bootstrap connection instead of dialling a broker).
"""

from __future__ import annotations

import math
from typing import ClassVar

from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection
from connmgr.core.coordinator import CoordinatorKind
from connmgr.core.decisions import WAIT, OpenFor, Placement, SendOn, Wait
from connmgr.core.endpoint import Endpoint
from connmgr.core.events import Api
from connmgr.core.identity import (
    BootstrapNode,
    BrokerNode,
    ConnectionKey,
    CoordinatorNode,
    NodeIdentity,
    Purpose,
)
from connmgr.core.policy import Policy
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.core.state import ConnState
from connmgr.policies.recorded import NOTHING_RECORDED, RecordedChoices

POLL_LOOP_APIS = frozenset({Api.INIT_PRODUCER_ID, Api.GET_TELEMETRY_SUBSCRIPTIONS})
"""Any-node requests whose caller re-picks a node on every poll loop until it can send."""

TXN_MANAGER_APIS = frozenset({Api.TXN_OFFSET_COMMIT})
"""Group-coordinator requests the producer's TransactionManager sends, not the consumer's
coordinator: they go to the node FindCoordinator named, by its real id (TransactionManager
``FindCoordinatorHandler``: ``consumerGroupCoordinator = new Node(nodeId, host, port)``;
measured with kafka-clients 4.4.0: TxnOffsetCommit on the group coordinator's broker
connection, no ``2147483647 - id`` node)."""

POLL_LOOP_MS = 0.01
"""How soon the next poll loop runs, for picks dialled there (any positive value will do)."""


class JavaTodayPolicy(Policy):
    name: ClassVar[str] = "java-today"
    extra_options: ClassVar[frozenset[str]] = frozenset({"bootstrap_offset"})
    summary: ClassVar[str] = "Java kafka-clients today (trunk): leastLoadedNode, node-id keys"

    def __init__(
        self, config: PolicyConfig, rng: RandomSource, recorded: RecordedChoices = NOTHING_RECORDED
    ) -> None:
        super().__init__(config, rng)
        self.recorded = recorded
        """What a recorded run chose, replayed (the ``replay_*`` of the module docstring)."""
        self._pinned_offset = self.config.bootstrap_offset
        self._replayed = 0
        self._picked: dict[int, tuple[NodeIdentity, Endpoint, float]] = {}
        """Requests whose node was picked at a time and is dialled on the next poll loop: at
        the next instant, after every pick of this instant was made."""
        self._looping: dict[int, float] = {}
        """Requests whose caller re-picks on every poll loop (:data:`POLL_LOOP_APIS`), with
        the time of their last loop."""
        self._lookups: dict[int, int | None] = {}
        """FindCoordinator requests already placed once -> their recorded node (Java id), or
        None when the record had none left: each lookup takes one, on its first placement."""

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        return client_is_producer

    # --- node choice ---------------------------------------------------------------------

    def java_nodes(self) -> list[tuple[NodeIdentity, Endpoint]]:
        """The nodes the client knows, in metadata order: bootstrap nodes until metadata.
        The list is built once per set of facts (:meth:`Derived.of_facts`): at 10,000
        brokers, building it on every pick was most of a simulated hour's CPU."""
        return self.derived.of_facts("java_nodes", self._java_nodes)

    def _java_nodes(self) -> list[tuple[NodeIdentity, Endpoint]]:
        md = self.metadata
        if md is None or not md.brokers:
            return [(BootstrapNode(i), ep) for i, ep in enumerate(self.config.bootstrap)]
        return [(BrokerNode(b.broker_id), b.endpoint) for b in md.brokers]

    def random_offset(self, n: int) -> int:
        if self._pinned_offset is not None and self.metadata is None:
            return self._pinned_offset % n
        return self.rng.randrange(n)

    def least_loaded_node(self) -> tuple[NodeIdentity, Endpoint] | None:
        """Java's ``leastLoadedNode``: READY with fewest in flight > CONNECTING > dialable.

        With ``replay_choices``, a pick that finds no idle READY node takes the next recorded
        "no active connection" pick instead (see :meth:`_replayed_pick`).
        """
        nodes = self.java_nodes()
        offset = self.random_offset(len(nodes))
        best: tuple[NodeIdentity, Endpoint] | None = None
        best_load = -1
        connecting: tuple[NodeIdentity, Endpoint] | None = None
        dialable: tuple[NodeIdentity, Endpoint] | None = None
        for i in range(len(nodes)):
            node, endpoint = nodes[(offset + i) % len(nodes)]
            conn = self.table.live_for_node(node, Purpose.DATA)
            if conn is not None and conn.state is ConnState.READY:
                load = len(conn.in_flight)
                if load == 0:
                    return node, endpoint
                if best is None or load < best_load:
                    best, best_load = (node, endpoint), load
            elif conn is not None and conn.state is ConnState.CONNECTING:
                connecting = connecting or (node, endpoint)
            elif (
                conn is None
                and dialable is None
                and not self.in_backoff(ConnectionKey(endpoint, node, Purpose.DATA))
            ):
                dialable = (node, endpoint)
        replayed = self._replayed_pick()
        if replayed is not None and self.table.live_for_node(replayed[0], Purpose.DATA) is None:
            return replayed
        return best or connecting or dialable

    def _replayed_pick(self) -> tuple[NodeIdentity, Endpoint] | None:
        """The next recorded pick, consumed; None when there is none for now.

        The real client makes these picks while a connection it just opened is still in its
        ApiVersions handshake (``CHECKING_API_VERSIONS``): such a node is neither ready nor
        connecting to ``leastLoadedNode``, so it dials another node, and it may still be
        scanning bootstrap nodes when the model already has metadata. The simulator has no
        handshake window, so the record, not the model's own view, says which node was dialled.
        A recorded node that the model already has a connection to was picked before its dial
        started: the pick is used up and the model's own choice stands.
        """
        replay = self.recorded.replay_choices
        if self._replayed >= len(replay):
            return None
        known = self._known_node(replay[self._replayed])
        if known is not None:
            self._replayed += 1
        # else a broker the model does not know yet: the pick belongs to a later moment.
        return known

    def _known_node(self, java_id: int) -> tuple[NodeIdentity, Endpoint] | None:
        """The node with Java id ``java_id`` among the scanned nodes or the bootstrap nodes."""
        for node, endpoint in self.java_nodes():
            if node.java_id == java_id:
                return node, endpoint
        if -len(self.config.bootstrap) <= java_id < 0:
            return BootstrapNode(-java_id - 1), self.config.bootstrap[-java_id - 1]
        return None

    def next_deadline(self) -> float | None:
        if not self._picked and not self._looping:
            return None  # the common case, on every event: skip building the lists
        times = [at for _, _, at in self._picked.values()]
        # A loop that found nothing to pick waits for the next event (a backoff ending).
        times.extend(t for t in self._looping.values() if t != -math.inf)
        return min(times) + POLL_LOOP_MS if times else None

    def connection_for(self, node: NodeIdentity, endpoint: Endpoint, purpose: Purpose) -> Placement:
        """The node's connection found by id, else a new dial to its current endpoint."""
        conn = self.table.live_for_node(node, purpose)
        if conn is not None:
            return SendOn(conn)
        return OpenFor(ConnectionKey(endpoint, node, purpose))

    def _poll_loop(self, request: Request) -> Placement:
        """One poll loop of a caller that re-picks its node until that node is READY.

        The producer's transaction manager (InitProducerId) and the telemetry sender
        (GetTelemetrySubscriptions) ask ``leastLoadedNode`` again on every loop, dial what
        they get, and send once that node is READY (measured with kafka-clients 4.4.0: a loop
        that runs while the first bootstrap connection cannot yet take a request dials a
        second one). With ``replay_telemetry`` the telemetry request goes to the recorded
        node as soon as the model may (:meth:`_telemetry_node`); until then it loops as the
        real one did.
        """
        choice: tuple[NodeIdentity, Endpoint] | None = None
        recorded = request.api is Api.GET_TELEMETRY_SUBSCRIPTIONS and self.recorded.replay_telemetry
        if recorded:
            choice = self._telemetry_node()
        may_send = choice is not None or not recorded
        if choice is None:
            choice = self.least_loaded_node()
        conn = None if choice is None else self.table.live_for_node(choice[0], Purpose.DATA)
        existed = conn is not None
        if may_send and conn is not None and conn.state is ConnState.READY:
            self._looping.pop(request.request_id, None)
            return SendOn(conn)
        detour: tuple[ConnectionKey, ...] = ()
        if recorded and may_send and existed:
            detour = self._telemetry_detour()  # a turn after the one that dialled its own node
        # With no node to pick (all in reconnect backoff) the real loop blocks in poll until
        # one is; so does this one: it re-picks at the next event rather than spinning.
        self._looping[request.request_id] = self.now_ms if choice is not None else -math.inf
        if choice is None or existed:
            return Wait(detour)
        # The loop dials its pick (never READY at once) and sends once it is.
        return Wait((ConnectionKey(choice[1], choice[0], Purpose.DATA),))

    def _telemetry_node(self) -> tuple[NodeIdentity, Endpoint] | None:
        """The recorded telemetry node, once the telemetry loop may dial or use it.

        A node among the recorded ``leastLoadedNode`` picks may be dialled by the loop as soon
        as the model knows it. One that never was a pick was never dialled by the loop: the
        request went on a connection something else opened (seen once with kafka-clients
        4.4.0, in a CI run of the transactional producer, not in 70 runs on a machine of its
        own: the loop dialled its pick 5, the sender dialled leader 6, and the request went
        to 6). Until the model holds a connection to such a node the loop picks as the real
        one did.
        """
        telemetry = self.recorded.replay_telemetry[0]
        known = self._known_node(telemetry)
        if known is None or telemetry in self.recorded.replay_choices:
            return known
        return known if self.table.live_for_node(known[0], Purpose.DATA) is not None else None

    def _telemetry_detour(self) -> tuple[ConnectionKey, ...]:
        """The telemetry sender's loop while its recorded node cannot take the request yet:
        the dial it makes meanwhile, if any.

        The real loop asks ``leastLoadedNode`` again on every turn; when its node is not
        sendable (still in its ApiVersions handshake, or writing another request) and no other
        node is, it dials the pick with no active connection -- measured with kafka-clients
        4.4.0 on the transactional producers: in about a third of the runs the loop dialled a
        random broker ("Initialize connection to node N for sending telemetry request") right
        after its own node had taken the InitProducerId request, and then sent on its own node
        anyway. The model has no write window, so the record says whether that happened: when
        the next recorded pick is the telemetry node itself (dialled by this loop) and the one
        after it a known node the model has no connection to, that one is dialled too. Before
        metadata, when the telemetry node is a bootstrap node the metadata updater dialled
        and it is still connecting, a next recorded pick of another bootstrap node is the
        loop's own dial (the second bootstrap connection of the module docstring; measured
        with 4.4.0: a consumer dialled -3 for metadata, then -2, and sent its telemetry
        request and FindCoordinator on -3).
        """
        replay = self.recorded.replay_choices
        at = self._replayed
        telemetry = self.recorded.replay_telemetry[0]
        if at < len(replay) and replay[at] != telemetry:
            own, detour = self._known_node(telemetry), self._known_node(replay[at])
            if own is None or detour is None or self.metadata is not None:
                return ()
            if not isinstance(own[0], BootstrapNode) or not isinstance(detour[0], BootstrapNode):
                return ()
            conn = self.table.live_for_node(own[0], Purpose.DATA)
            if conn is None or conn.state is ConnState.READY:
                return ()
            if self.table.live_for_node(detour[0], Purpose.DATA) is None:
                self._replayed += 1
                return (ConnectionKey(detour[1], detour[0], Purpose.DATA),)
            return ()
        if at + 1 >= len(replay) or replay[at] != telemetry:
            return ()
        own, detour = self._known_node(replay[at]), self._known_node(replay[at + 1])
        if own is None or self.table.live_for_node(own[0], Purpose.DATA) is None:
            return ()  # not this loop's dial (yet)
        if detour is None or self.table.live_for_node(detour[0], Purpose.DATA) is not None:
            return ()
        self._replayed += 2
        return (ConnectionKey(detour[1], detour[0], Purpose.DATA),)

    def _recorded_lookup(self, request: Request) -> Connection | None:
        """The connection a recorded FindCoordinator went on, if the model holds one (READY,
        or still connecting: the request waits for it, as in the client's unsent queue).

        Each FindCoordinator takes the next record on its first placement. A recorded node
        the model has no connection to was a "no active connection" pick, already in
        ``replay_choices``: the model's own scan (which replays it) decides.
        """
        if request.api is not Api.FIND_COORDINATOR or not self.recorded.replay_lookups:
            return None
        if request.request_id not in self._lookups:
            taken = len(self._lookups)
            replay = self.recorded.replay_lookups
            self._lookups[request.request_id] = replay[taken] if taken < len(replay) else None
        node = self._lookups[request.request_id]
        known = None if node is None else self._known_node(node)
        if known is None:
            return None
        conn = self.table.live_for_node(known[0], Purpose.DATA)
        if conn is None or conn.state not in (ConnState.READY, ConnState.CONNECTING):
            return None
        return conn

    # --- placement -----------------------------------------------------------------------

    def place(self, request: Request) -> Placement:
        target = request.target
        if isinstance(target, ToBootstrap | ToAnyNode):
            looped = self._looping.get(request.request_id)
            if looped is not None:
                return WAIT if looped >= self.now_ms else self._poll_loop(request)
            if request.api is Api.GET_TELEMETRY_SUBSCRIPTIONS:
                # The telemetry sender runs inside the network client's poll, like the
                # metadata updater: it dials its pick at once.
                return self._poll_loop(request)
            picked = self._picked.get(request.request_id)
            if picked is not None:
                if picked[2] >= self.now_ms:
                    return WAIT
                del self._picked[request.request_id]
                placement = self.connection_for(picked[0], picked[1], Purpose.DATA)
                if request.api is Api.INIT_PRODUCER_ID and not (
                    isinstance(placement, SendOn) and placement.conn.state is ConnState.READY
                ):
                    # The transaction manager dials its pick and loops until it is READY.
                    self._looping[request.request_id] = self.now_ms
                    return Wait((placement.key,)) if isinstance(placement, OpenFor) else WAIT
                # The consumer's coordinator lookup waits on the node it picked.
                return placement
            recorded = self._recorded_lookup(request)
            if recorded is not None:
                return SendOn(recorded)
            choice = self.least_loaded_node()
            if choice is None:
                return WAIT
            needs_dial = self.table.live_for_node(choice[0], Purpose.DATA) is None
            if needs_dial and request.api is not Api.METADATA:
                self._picked[request.request_id] = (*choice, self.now_ms)
                return WAIT
            return self.connection_for(choice[0], choice[1], Purpose.DATA)
        if self.metadata is None:
            return WAIT
        if isinstance(target, ToBroker):
            endpoint = self.metadata.endpoint_of(target.broker_id)
            if endpoint is None:
                return WAIT
            return self.connection_for(BrokerNode(target.broker_id), endpoint, Purpose.DATA)
        assert isinstance(target, ToCoordinator)
        endpoint = self.metadata.endpoint_of(target.broker_id)
        if endpoint is None:
            return WAIT
        if target.coordinator.kind is not CoordinatorKind.GROUP or request.api in TXN_MANAGER_APIS:
            # TransactionManager keeps the node FindCoordinator returned, with its real id,
            # for both kinds it looks up: transactional requests, and a producer's
            # TxnOffsetCommit to its group's coordinator, share the broker's ordinary
            # connection.
            return self.connection_for(BrokerNode(target.broker_id), endpoint, Purpose.DATA)
        return self.connection_for(
            CoordinatorNode(target.broker_id), endpoint, Purpose.COORDINATION
        )
