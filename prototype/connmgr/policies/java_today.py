"""``java-today``: the Java client's NetworkClient as trunk behaves (B2 in baseline-behaviour).

* Connections are found by node id alone (``ClusterConnectionStates`` is keyed by id), so an
  open connection keeps serving its node id even after metadata moves that id elsewhere.
* Bootstrap servers get negative ids (-1, -2, ...) and are never merged with brokers nor closed
  on purpose: they go by idle expiry like any other connection.
* Any-node requests (Metadata, FindCoordinator, InitProducerId) go to ``leastLoadedNode``: a
  scan from a random offset that prefers a READY node (fewest in-flight requests), then one
  already CONNECTING, then one it could dial. While one dial is under way it starts no other.
* The group coordinator is a separate node ``2147483647 - brokerId`` with its own socket.
* A producer fetches metadata right after construction (since 2.2); a consumer on first poll.
  A consumer looks the coordinator up after its first metadata response (measured with
  kafka-clients 4.4.0: by then the bootstrap node is out of the scanned list, so a random broker
  is dialled for FindCoordinator).
* Callers that pick a node and dial it on the next poll loop (the producer's transaction
  manager for InitProducerId, the consumer's coordinator lookup) do not see each other's
  picks: two picks made before any dial can open two bootstrap connections (measured with
  4.4.0: InitProducerId and the first metadata request on -2 and -3). The metadata updater
  dials its pick at once.
* ``replay_choices``: the node ids a recorded run's ``leastLoadedNode`` returned "with no
  active connection" (TRACE log), replayed in order instead of the random offset.
"""

from __future__ import annotations

from typing import ClassVar

from connmgr.core.config import PolicyConfig
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
from connmgr.core.policy import (
    Connection,
    Policy,
    RandomSource,
    Request,
    ToAnyNode,
    ToBootstrap,
    ToBroker,
    ToCoordinator,
)
from connmgr.core.state import ConnState

POLL_LOOP_MS = 0.01
"""How soon the next poll loop runs, for picks dialled there (any positive value will do)."""


class JavaTodayPolicy(Policy):
    name: ClassVar[str] = "java-today"
    summary: ClassVar[str] = "Java kafka-clients today (trunk): leastLoadedNode, node-id keys"
    library: ClassVar[str] = "java"

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(config, rng)
        self._pinned_offset = self.config.bootstrap_offset
        self._replayed = 0
        self._picked: dict[int, tuple[NodeIdentity, Endpoint, float]] = {}
        """Requests whose node was picked at a time and is dialled on the next poll loop: at
        the next instant, after every pick of this instant was made."""

    def bootstraps_at_start(self, client_is_producer: bool) -> bool:
        return client_is_producer

    # --- node choice ---------------------------------------------------------------------

    def java_nodes(self) -> list[tuple[NodeIdentity, Endpoint]]:
        """The nodes the client knows, in metadata order: bootstrap nodes until metadata."""
        if self.metadata is None or not self.metadata.brokers:
            return [(BootstrapNode(i), ep) for i, ep in enumerate(self.config.bootstrap)]
        return [(BrokerNode(b.broker_id), b.endpoint) for b in self.metadata.brokers]

    def random_offset(self, n: int) -> int:
        if self._pinned_offset is not None and self.metadata is None:
            return self._pinned_offset % n
        return self.rng.randrange(n)

    def least_loaded_node(self) -> tuple[NodeIdentity, Endpoint] | None:
        """Java's ``leastLoadedNode``: READY with fewest in flight > CONNECTING > dialable."""
        nodes = self.java_nodes()
        offset = self.random_offset(len(nodes))
        best: tuple[NodeIdentity, Endpoint] | None = None
        best_load = -1
        connecting: tuple[NodeIdentity, Endpoint] | None = None
        dialable: tuple[NodeIdentity, Endpoint] | None = None
        for i in range(len(nodes)):
            node, endpoint = nodes[(offset + i) % len(nodes)]
            conn = self.live_for_node(node, Purpose.DATA)
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
        if best is None and connecting is None and dialable is not None:
            dialable = self._replayed_pick(nodes) or dialable
        return best or connecting or dialable

    def _replayed_pick(
        self, nodes: list[tuple[NodeIdentity, Endpoint]]
    ) -> tuple[NodeIdentity, Endpoint] | None:
        replay = self.config.replay_choices
        while self._replayed < len(replay):
            wanted = replay[self._replayed]
            self._replayed += 1
            for node, endpoint in nodes:
                if node.java_id == wanted:
                    return node, endpoint
        return None

    def next_deadline(self) -> float | None:
        if not self._picked:
            return None
        return min(at for _, _, at in self._picked.values()) + POLL_LOOP_MS

    def connection_for(
        self, node: NodeIdentity, endpoint: Endpoint, purpose: Purpose
    ) -> Connection | None:
        """The node's connection found by id, else a new dial to its current endpoint."""
        conn = self.live_for_node(node, purpose)
        if conn is not None:
            return conn
        return self.get_or_dial(ConnectionKey(endpoint, node, purpose))

    # --- placement -----------------------------------------------------------------------

    def place(self, request: Request) -> Connection | None:
        target = request.target
        if isinstance(target, ToBootstrap | ToAnyNode):
            picked = self._picked.get(request.request_id)
            if picked is not None:
                if picked[2] >= self.now_ms:
                    return None
                del self._picked[request.request_id]
                return self.connection_for(picked[0], picked[1], Purpose.DATA)
            choice = self.least_loaded_node()
            if choice is None:
                return None
            needs_dial = self.live_for_node(choice[0], Purpose.DATA) is None
            if needs_dial and request.api is not Api.METADATA:
                self._picked[request.request_id] = (*choice, self.now_ms)
                return None
            return self.connection_for(choice[0], choice[1], Purpose.DATA)
        if self.metadata is None:
            return None
        if isinstance(target, ToBroker):
            endpoint = self.metadata.endpoint_of(target.broker_id)
            if endpoint is None:
                return None
            return self.connection_for(BrokerNode(target.broker_id), endpoint, Purpose.DATA)
        assert isinstance(target, ToCoordinator)
        endpoint = self.metadata.endpoint_of(target.broker_id)
        if endpoint is None:
            return None
        return self.connection_for(
            CoordinatorNode(target.broker_id), endpoint, Purpose.COORDINATION
        )
