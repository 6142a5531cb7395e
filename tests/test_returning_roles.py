"""Rule (g)'s exception, driven event by event: a connection to a broker whose role was lost
with its connection (a restart) waits for the role to come back instead of closing after
the linger; nothing else is held longer, and the wait is bounded."""

from __future__ import annotations

import random

from connmgr.core import (
    Api,
    BootstrapRequested,
    BrokerInfo,
    BrokerRequestNeeded,
    ClientKind,
    Close,
    CloseReason,
    ClusterMetadata,
    Connect,
    ConnectionClosedByPeer,
    ConnectionEstablished,
    CoordinatorKind,
    CoordinatorLost,
    CoordinatorRef,
    CoordinatorRequestNeeded,
    Endpoint,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action
from connmgr.core.events import AddressesResolved
from connmgr.core.identity import BrokerNode, ConnectionKey, Purpose
from connmgr.policies import ProposedPolicy
from connmgr.policies.proposed.prompt_close import RETURN_WAIT_MS
from connmgr.sim import simulate

EP = {i: Endpoint(f"kafka-{i}", 9092) for i in range(1, 4)}
LINGER = 3_000
IDLE = 540_000


def metadata(leaders: dict[int, int]) -> ClusterMetadata:
    brokers = [BrokerInfo(i, ep) for i, ep in EP.items()]
    tps = {TopicPartition("t", p): b for p, b in leaders.items()}
    return ClusterMetadata.build("c1", brokers, tps)


AT_HOME = metadata({0: 1, 1: 2})
"""Partition 0 led by broker 1, partition 1 by broker 2."""
AWAY = metadata({0: 2, 1: 2})
"""Broker 1 down or back leading nothing: its partition went to broker 2."""


def of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


class Client:
    """A proposed policy on a clock, with the bookkeeping of request ids."""

    def __init__(self, **options: object) -> None:
        config = PolicyConfig(
            bootstrap=parse_bootstrap("kafka-3:9092"),
            bootstrap_offset=0,
            connection_linger_ms=LINGER,
            **options,  # type: ignore[arg-type]
        )
        self.policy = ProposedPolicy(config, random.Random(1))
        self.now = 0.0
        self.next_id = 1
        self.closed: list[tuple[int, CloseReason]] = []
        self.dialled: list[Connect] = []

    def feed(self, event: object, at: float | None = None) -> list[Action]:
        self.now = self.now + 1 if at is None else at
        actions = self.policy.handle(event, self.now)  # type: ignore[arg-type]
        self.closed += [(c.conn_id, c.reason) for c in of(actions, Close)]
        self.dialled += of(actions, Connect)
        return actions

    def request_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def start(self, md: ClusterMetadata = AT_HOME) -> None:
        boot = of(self.feed(BootstrapRequested(1)), Connect)[0]
        self.feed(ConnectionEstablished(boot.conn_id))
        self.feed(MetadataReceived(1, md))
        self.produce(2)  # broker 2's socket, needed throughout: never the last one left

    def produce(self, broker_id: int) -> int:
        """A request to ``broker_id``, answered; the id of the connection it went on (dialled
        and established if need be)."""
        rid = self.request_id()
        dials = of(self.feed(BrokerRequestNeeded(rid, Api.PRODUCE, broker_id)), Connect)
        for dial in dials:
            self.feed(ConnectionEstablished(dial.conn_id))
        conn = self.policy.table.live(self._key(broker_id, Purpose.DATA))
        assert conn is not None
        self.feed(ResponseReceived(rid))
        return conn.conn_id

    def metadata(self, md: ClusterMetadata) -> None:
        self.feed(MetadataReceived(self.request_id(), md))

    def wait_until(self, at: float) -> None:
        self.feed(TimePassed(), at)

    def live(self, conn_id: int) -> bool:
        return any(c.conn_id == conn_id for c in self.policy.connections())

    @staticmethod
    def _key(broker_id: int, purpose: Purpose) -> ConnectionKey:
        return ConnectionKey(EP[broker_id], BrokerNode(broker_id), purpose)


def restarted_leader(client: Client) -> int:
    """Broker 1, a leader in use, restarts: its socket is reset, the client's next request
    (its metadata still names broker 1) dials the new process, which leads nothing; the
    metadata refresh says so. Returns the new socket's id."""
    client.start()
    first = client.produce(1)
    client.feed(ConnectionClosedByPeer(first))
    again = client.produce(1)  # NOT_LEADER, in the real world
    assert again != first
    client.metadata(AWAY)
    return again


def test_a_restarted_leaders_socket_waits_for_its_partitions_to_come_back() -> None:
    client = Client()
    socket = restarted_leader(client)
    dials = len(client.dialled)
    client.wait_until(client.now + 30_000)  # ten lingers: the election has not run yet
    assert client.live(socket), client.closed
    assert socket in client.policy.needed_connections()
    client.metadata(AT_HOME)  # the preferred-leader election gives partition 0 back
    assert client.produce(1) == socket
    assert len(client.dialled) == dials, "the returning leader was dialled again"


def test_a_leader_moved_for_good_without_a_loss_closes_after_its_linger() -> None:
    client = Client()
    client.start()
    socket = client.produce(1)
    client.metadata(AWAY)  # a reassignment: no connection was lost
    moved = client.now
    client.wait_until(moved + LINGER - 1)
    assert client.live(socket)
    client.wait_until(moved + LINGER)
    assert (socket, CloseReason.UNNEEDED) in client.closed


def test_once_the_role_is_back_the_socket_lingers_as_any_other() -> None:
    client = Client()
    socket = restarted_leader(client)
    client.metadata(AT_HOME)
    assert client.produce(1) == socket
    client.metadata(AWAY)  # moved away again, with no loss this time
    moved = client.now
    client.wait_until(moved + LINGER)
    assert (socket, CloseReason.UNNEEDED) in client.closed


def test_the_wait_ends_connections_max_idle_ms_after_the_loss() -> None:
    # Idle expiry off: only the rule's own bound closes the socket, the Java client's
    # default connections.max.idle.ms after the loss, then the linger.
    client = Client(connections_max_idle_ms=-1)
    socket = restarted_leader(client)
    lost_at = client.now - 3  # the reset, before the re-dial's three events
    client.wait_until(lost_at + RETURN_WAIT_MS - 1)
    assert client.live(socket)
    client.wait_until(lost_at + RETURN_WAIT_MS)
    assert client.live(socket)  # no longer waited for: lingering
    client.wait_until(lost_at + RETURN_WAIT_MS + LINGER)
    assert (socket, CloseReason.UNNEEDED) in client.closed


def test_with_idle_expiry_the_socket_idles_out_as_today() -> None:
    client = Client(connections_max_idle_ms=IDLE)
    socket = restarted_leader(client)
    last_used = client.now - 1
    client.wait_until(last_used + IDLE + 1)
    assert (socket, CloseReason.IDLE) in client.closed


def test_a_broker_that_leaves_the_metadata_is_not_waited_for() -> None:
    client = Client()
    socket = restarted_leader(client)
    gone = ClusterMetadata.build(
        "c1", [BrokerInfo(i, EP[i]) for i in (2, 3)], {TopicPartition("t", 0): 2}
    )
    client.metadata(gone)
    client.wait_until(client.now + LINGER)
    assert not client.live(socket)


def test_a_restarted_coordinators_socket_waits_for_the_coordinator() -> None:
    client = Client(client=ClientKind.CONSUMER)
    client.start()
    group = CoordinatorRef(CoordinatorKind.GROUP, "app")

    def heartbeat() -> int:
        rid = client.request_id()
        actions = client.feed(CoordinatorRequestNeeded(rid, Api.HEARTBEAT, 1, group))
        for dial in of(actions, Connect):
            client.feed(ConnectionEstablished(dial.conn_id))
        client.feed(ResponseReceived(rid))
        conn = client.policy.table.live(client._key(1, Purpose.COORDINATION))
        assert conn is not None
        return conn.conn_id

    first = heartbeat()
    client.feed(ConnectionClosedByPeer(first))
    socket = heartbeat()  # NOT_COORDINATOR, in the real world
    client.feed(CoordinatorLost(group))
    client.wait_until(client.now + 10 * LINGER)
    assert client.live(socket)
    dials = len(client.dialled)
    assert heartbeat() == socket  # the coordinator is back on broker 1
    assert len(client.dialled) == dials


def test_a_socket_closed_for_a_stale_address_is_a_loss_too() -> None:
    client = Client()
    client.start()
    rid = client.request_id()
    dial = of(client.feed(BrokerRequestNeeded(rid, Api.PRODUCE, 1)), Connect)[0]
    client.feed(ConnectionEstablished(dial.conn_id, address="10.0.0.1"))
    client.feed(ResponseReceived(rid))
    for _ in range(2):  # two answers naming the new pod (rule h2)
        client.feed(AddressesResolved("kafka-1", ("10.0.0.2",)))
    assert (dial.conn_id, CloseReason.STALE_ADDRESS) in client.closed
    again = client.produce(1)
    client.metadata(AWAY)
    client.wait_until(client.now + 10 * LINGER)
    assert client.live(again)


def test_ip_change_opens_no_more_than_java_today() -> None:
    """The scenario the exception is for: every pod restarted under its name. The proposal
    dials each new pod once, as java-today does (before the rule, once more each: 23
    against 16)."""
    proposed = simulate("ip-change", "proposed", {})
    java = simulate("ip-change", "java-today", {})
    assert proposed.opened == java.opened == 16
    unneeded = [e for e in proposed.timeline if e.reason == CloseReason.UNNEEDED.value]
    assert [e.broker for e in unneeded] == [3]  # the coordinator's stand-in, not a lost role


def test_a_lost_role_keeps_only_a_connection_of_its_purpose() -> None:
    # Broker 1 restarts leading partition 0 and coordinating the group: the data socket
    # waits for the partition; the coordination socket, whose coordinator moved for good
    # before the restart, is not kept by the data role's loss.
    client = Client(client=ClientKind.CONSUMER)
    client.start()
    group = CoordinatorRef(CoordinatorKind.GROUP, "app")
    rid = client.request_id()
    dial = of(client.feed(CoordinatorRequestNeeded(rid, Api.HEARTBEAT, 1, group)), Connect)[0]
    client.feed(ConnectionEstablished(dial.conn_id))
    client.feed(ResponseReceived(rid))
    client.feed(CoordinatorLost(group))  # the coordinator moves elsewhere
    data = client.produce(1)
    client.feed(ConnectionClosedByPeer(data))
    client.produce(1)
    client.metadata(AWAY)
    client.wait_until(client.now + LINGER)
    assert (dial.conn_id, CloseReason.UNNEEDED) in client.closed
