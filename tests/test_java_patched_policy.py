"""java-patched's rule 6 (``connections.linger.ms``) driven event by event, without the simulator.

The model of the patched kafka-clients (:mod:`connmgr.policies.java_patched`) against the patch's
rule: what a producer and a consumer publish as needed, the linger from the last use, a
request keeping its connection, the any-node anchor, nothing closed before the client publishes.
The same model against the real patched client: ``tests/java/test_java_patched_vs_real.py``.
"""

from __future__ import annotations

import random

from connmgr.core import (
    Api,
    BootstrapRequested,
    BrokerInfo,
    BrokerRequestNeeded,
    Close,
    CloseReason,
    ClusterMetadata,
    Connect,
    ConnectionEstablished,
    Endpoint,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action
from connmgr.core.config import ClientKind
from connmgr.core.coordinator import CoordinatorRef
from connmgr.core.events import ConnectionClosedByPeer, CoordinatorRequestNeeded, InterestChanged
from connmgr.core.identity import BrokerNode, CoordinatorNode, NodeIdentity
from connmgr.policies import JavaPatchedPolicy
from connmgr.policies.java_patched import LOST_ROLE_WAIT_MS

EP = {i: Endpoint("localhost", 9090 + i) for i in range(1, 6)}
LINGER_MS = 1_000
T0 = TopicPartition("t", 0)


class Client:
    """A JavaPatchedPolicy and the connections it dialled, driven like the simulator does."""

    def __init__(self, kind: ClientKind, leaders: dict[int, int], idle_ms: int = 540_000) -> None:
        config = PolicyConfig(
            bootstrap=parse_bootstrap("localhost:9091"),
            client=kind,
            connection_linger_ms=LINGER_MS,
            bootstrap_offset=0,
            connections_max_idle_ms=idle_ms,
        )
        self.policy = JavaPatchedPolicy(config, random.Random(1))
        self.conns: dict[NodeIdentity, int] = {}
        self.closes: list[tuple[NodeIdentity, CloseReason, float]] = []
        self._next_id = 100
        md = ClusterMetadata.build(
            "c1",
            [BrokerInfo(i, ep) for i, ep in EP.items()],
            {TopicPartition("t", p): b for p, b in leaders.items()},
        )
        self.handle(BootstrapRequested(1), 0)
        self.handle(MetadataReceived(1, md), 1)

    def handle(self, event: object, now: float) -> list[Action]:
        actions = self.policy.handle(event, now)  # type: ignore[arg-type]
        for action in actions:
            if isinstance(action, Connect):
                self.conns[action.key.node] = action.conn_id
                actions += self.policy.handle(ConnectionEstablished(action.conn_id), now)
            elif isinstance(action, Close):
                node = next(n for n, c in self.conns.items() if c == action.conn_id)
                self.closes.append((node, action.reason, now))
        return actions

    def use(self, node: NodeIdentity, start: float, answered: float) -> None:
        """One request to ``node`` sent at ``start`` and answered at ``answered``."""
        self._next_id += 1
        rid = self._next_id
        if isinstance(node, CoordinatorNode):
            event: object = CoordinatorRequestNeeded(
                rid, Api.HEARTBEAT, node.broker_id, CoordinatorRef.group("g")
            )
        else:
            assert isinstance(node, BrokerNode)
            event = BrokerRequestNeeded(rid, Api.LIST_OFFSETS, node.broker_id)
        self.handle(event, start)
        self.handle(ResponseReceived(rid), answered)

    def run_until(self, end: float) -> None:
        """Time passes to ``end``, with a wake-up at every deadline the policy asks for (as the
        simulator delivers them)."""
        woken: set[float] = set()
        while (deadline := self.policy.next_deadline()) is not None and deadline <= end:
            assert deadline not in woken, f"asked to be woken at {deadline} again"
            woken.add(deadline)
            self.handle(TimePassed(), deadline)
        self.handle(TimePassed(), end)

    def open(self, node: NodeIdentity) -> bool:
        return node in self.conns and not any(n == node for n, _, _ in self.closes)

    def unneeded(self) -> list[tuple[NodeIdentity, float]]:
        return [(n, t) for n, reason, t in self.closes if reason is CloseReason.UNNEEDED]


def test_a_producer_closes_a_broker_that_leads_nothing_one_linger_after_its_answer() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.use(BrokerNode(4), 5, 10)  # in flight from 5 to 10: the linger starts at the answer
    assert c.policy.next_deadline() == 10 + LINGER_MS
    c.run_until(10 + LINGER_MS - 1)
    assert c.open(BrokerNode(4)), "kept until the linger has run out"
    c.run_until(10 + LINGER_MS)
    assert c.unneeded() == [(BrokerNode(4), 10 + LINGER_MS)]
    c.run_until(100 * LINGER_MS)
    assert c.open(BrokerNode(2)), "the leader of the producer's topic is kept"


def test_a_request_in_flight_keeps_its_connection_through_many_lingers() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.handle(BrokerRequestNeeded(50, Api.LIST_OFFSETS, 4), 5)
    c.run_until(5 * LINGER_MS)
    assert c.open(BrokerNode(4)), "in flight through five lingers"
    c.handle(ResponseReceived(50), 5 * LINGER_MS)
    c.run_until(7 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(4), 6 * LINGER_MS)]


def test_a_later_request_starts_the_linger_again_from_its_answer() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.use(BrokerNode(4), 5, 10)
    c.use(BrokerNode(4), 500, 600)
    c.run_until(10 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(4), 600 + LINGER_MS)]


def test_the_any_node_anchor_keeps_the_last_used_when_nothing_needed_is_open() -> None:
    # Partition 0 is led by broker 5, which the client holds no connection to.
    c = Client(ClientKind.PRODUCER, {0: 5})
    c.use(BrokerNode(2), 2, 10)
    c.use(BrokerNode(3), 12, 20)
    c.run_until(20 + 10 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(2), 10 + LINGER_MS)]
    assert c.open(BrokerNode(3)), "the last used connection stays for any-node requests"


def test_a_producer_keeps_its_transaction_coordinators_broker_connection() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.handle(
        CoordinatorRequestNeeded(
            50, Api.ADD_PARTITIONS_TO_TXN, 4, CoordinatorRef.transaction("tx")
        ),
        5,
    )
    c.handle(ResponseReceived(50), 6)
    assert BrokerNode(4) in c.conns and CoordinatorNode(4) not in c.conns
    c.run_until(10 * LINGER_MS)
    assert c.unneeded() == []


def test_a_consumer_closes_nothing_before_it_publishes_then_lingers_from_then() -> None:
    c = Client(ClientKind.CONSUMER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.use(BrokerNode(4), 5, 10)
    c.run_until(5 * LINGER_MS)
    assert c.unneeded() == [], "no coordinator, no assignment: nothing published yet"
    c.handle(InterestChanged(frozenset({T0})), 5 * LINGER_MS)
    c.run_until(6 * LINGER_MS - 1)
    assert c.open(BrokerNode(4)), "its linger started when the consumer first published"
    c.run_until(6 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(4), 6 * LINGER_MS)]
    assert c.open(BrokerNode(2)), "the leader of an assigned partition is kept"


def test_a_consumer_needs_its_coordinator_connection_not_the_coordinators_broker() -> None:
    c = Client(ClientKind.CONSUMER, {0: 2})
    c.handle(InterestChanged(frozenset({T0})), 1)
    c.use(BrokerNode(2), 2, 3)
    c.use(BrokerNode(3), 4, 5)
    c.use(CoordinatorNode(3), 6, 7)
    c.run_until(10 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(3), 5 + LINGER_MS)]
    assert c.open(CoordinatorNode(3)) and c.open(BrokerNode(2))


def _leaders(c: Client, leaders: dict[int, int], now: float) -> None:
    """A metadata response that names these leaders of topic t."""
    md = ClusterMetadata.build(
        "c1",
        [BrokerInfo(i, ep) for i, ep in EP.items()],
        {TopicPartition("t", p): b for p, b in leaders.items()},
    )
    c.handle(MetadataReceived(None, md), now)


def _lose_the_leader_2_and_dial_it_again(c: Client) -> None:
    """A restart in small: the producer's leader 2 resets its connection, the leadership moves
    to broker 3, and a request dials broker 2 again (the patch's test does the same)."""
    c.use(BrokerNode(2), 2, 3)
    c.handle(ConnectionClosedByPeer(c.conns[BrokerNode(2)]), 10)
    _leaders(c, {0: 3}, 20)
    c.use(BrokerNode(3), 21, 22)
    c.use(BrokerNode(2), 30, 31)


def test_a_connection_to_a_broker_whose_role_was_lost_waits_for_the_role() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    _lose_the_leader_2_and_dial_it_again(c)
    c.run_until(31 + 10 * LINGER_MS)
    assert c.open(BrokerNode(2)), "unneeded for ten lingers, but its role is expected back"
    assert c.unneeded() == []
    back = 31 + 20 * LINGER_MS
    _leaders(c, {0: 2}, back)  # the preferred leader is back
    _leaders(c, {0: 3}, back + 1)  # and is let go for good later
    c.run_until(back + 1 + LINGER_MS)
    assert c.unneeded() == [(BrokerNode(2), back + 1 + LINGER_MS)]


def test_the_wait_for_a_lost_role_ends_nine_minutes_after_the_loss() -> None:
    # Idle expiry off: the wait is bounded all the same.
    c = Client(ClientKind.PRODUCER, {0: 2}, idle_ms=-1)
    _lose_the_leader_2_and_dial_it_again(c)
    c.run_until(10 + LOST_ROLE_WAIT_MS - 1)
    assert c.open(BrokerNode(2))
    c.run_until(10 + LOST_ROLE_WAIT_MS + LINGER_MS)
    assert c.unneeded() == [(BrokerNode(2), 10 + LOST_ROLE_WAIT_MS + LINGER_MS)]


def test_a_connection_lost_while_nothing_needed_it_lingers_out_as_before() -> None:
    c = Client(ClientKind.PRODUCER, {0: 2})
    c.use(BrokerNode(2), 2, 3)
    c.use(BrokerNode(4), 5, 6)
    c.handle(ConnectionClosedByPeer(c.conns[BrokerNode(4)]), 10)
    c.use(BrokerNode(4), 30, 31)
    c.run_until(31 + 10 * LINGER_MS)
    assert c.unneeded() == [(BrokerNode(4), 31 + LINGER_MS)]
