"""The proposed policy driven directly, event by event, without the simulator."""

from __future__ import annotations

import random

import pytest

from connmgr.core import (
    AnyNodeRequestNeeded,
    Api,
    BootstrapRequested,
    BrokerInfo,
    BrokerRequestNeeded,
    CheckIdentity,
    ClientClosed,
    ClientKind,
    Close,
    CloseReason,
    ClusterMetadata,
    Connect,
    ConnectionEstablished,
    ConnectionFailed,
    CoordinatorKind,
    CoordinatorRef,
    CoordinatorRequestNeeded,
    Endpoint,
    IdentityAnswer,
    IdentityChecked,
    InterestChanged,
    Lease,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    WakeAt,
    parse_bootstrap,
)
from connmgr.core.actions import Action, Adopt
from connmgr.core.identity import BootstrapNode, BrokerNode, Purpose
from connmgr.errors import ConfigError, PolicyMisuse
from connmgr.policies import ProposedPolicy
from connmgr.sim import simulate

EP = {i: Endpoint("localhost", 9090 + i) for i in range(1, 6)}


def metadata(cluster_id: str = "c1", leaders: dict[int, int] | None = None) -> ClusterMetadata:
    brokers = [BrokerInfo(i, ep) for i, ep in EP.items()]
    tps = {TopicPartition("t", p): b for p, b in (leaders or {0: 2, 1: 3}).items()}
    return ClusterMetadata.build(cluster_id, brokers, tps)


def policy(servers: str = "localhost:9091", **options: object) -> ProposedPolicy:
    options = {"bootstrap_offset": 0, **options}
    config = PolicyConfig(bootstrap=parse_bootstrap(servers), **options)  # type: ignore[arg-type]
    return ProposedPolicy(config, random.Random(1))


def of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def test_nothing_is_dialled_before_a_request() -> None:
    p = policy()
    assert p.handle(TimePassed(), 0) == []
    assert p.socket_count() == 0


def test_one_bootstrap_attempt_at_a_time_with_failover() -> None:
    p = policy("localhost:9091,localhost:9092,localhost:9093")
    first = of(p.handle(BootstrapRequested(1), 0), Connect)
    assert [c.key.node for c in first] == [BootstrapNode(0)]
    # A second any-node request waits for the dial under way instead of dialling again.
    assert of(p.handle(AnyNodeRequestNeeded(2, Api.FIND_COORDINATOR), 1), Connect) == []
    second = of(p.handle(ConnectionFailed(first[0].conn_id), 2), Connect)
    assert [c.key.node for c in second] == [BootstrapNode(1)]
    actions = p.handle(ConnectionEstablished(second[0].conn_id), 3)
    assert {s.request_id for s in of(actions, Lease)} == {1, 2}
    assert p.socket_count() == 1


LEADS = {0: 1, 1: 3}
"""Partition 0 led by broker 1, the broker at the bootstrap socket's host:port (:9091)."""


def checked_bootstrap(p: ProposedPolicy, md: ClusterMetadata | None = None) -> int:
    """Bootstrap ``p`` on a broker that answers KIP-1242's check; metadata arrives. Returns
    the bootstrap connection's id, its check asked and in flight."""
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, checks_identity=True), 1)
    actions = p.handle(MetadataReceived(1, md or metadata(leaders=LEADS)), 2)
    # Broker 1 is the one broker metadata places at the socket's host:port (:9091).
    assert of(actions, CheckIdentity) == [CheckIdentity(conn.conn_id, 1, "c1")]
    assert of(actions, Adopt) == [] and of(actions, Close) == []
    return conn.conn_id


def test_adopt_when_the_broker_confirms_it_is_the_node_metadata_places_there() -> None:
    p = policy()
    conn_id = checked_bootstrap(p)
    adopted = of(p.handle(IdentityChecked(conn_id, 1, IdentityAnswer.CONFIRMED), 3), Adopt)
    assert [(a.conn_id, a.new_key.node) for a in adopted] == [(conn_id, BrokerNode(1))]
    assert p.metrics.by_role[adopted[0].new_key.role].handshakes_avoided == 1
    # The adopted socket moved from one role to the other: each role held it once.
    counts = p.metrics.as_dict()
    assert [counts[r]["peak"] for r in ("bootstrap", "data")] == [1, 1]
    assert [counts[r]["open_now"] for r in ("bootstrap", "data")] == [0, 1]
    assert p.metrics.peak == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (IdentityAnswer.REJECTED, CloseReason.IDENTITY_REJECTED),  # the broker said no
        (IdentityAnswer.FAILED, CloseReason.NOT_ADOPTED),  # nothing was said
    ],
)
def test_a_socket_whose_broker_does_not_confirm_is_closed(
    answer: IdentityAnswer, reason: CloseReason
) -> None:
    p = policy()
    conn_id = checked_bootstrap(p)
    actions = p.handle(IdentityChecked(conn_id, 1, answer), 3)
    assert of(actions, Adopt) == []
    assert of(actions, Close) == [Close(conn_id, reason)]
    assert p.socket_count() == 0


def test_a_request_for_the_broker_being_asked_about_waits_for_the_answer() -> None:
    p = policy()
    conn_id = checked_bootstrap(p)
    assert of(p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 1), 3), Connect) == []
    actions = p.handle(IdentityChecked(conn_id, 1, IdentityAnswer.CONFIRMED), 4)
    assert [type(a) for a in actions if not isinstance(a, WakeAt)] == [Adopt, Lease]
    assert of(actions, Lease) == [Lease(conn_id, 2)]


def test_when_the_answer_is_no_the_waiting_request_dials_its_broker() -> None:
    p = policy()
    conn_id = checked_bootstrap(p)
    p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 1), 3)
    actions = p.handle(IdentityChecked(conn_id, 1, IdentityAnswer.REJECTED), 4)
    assert [(c.key.node, c.key.endpoint) for c in of(actions, Connect)] == [(BrokerNode(1), EP[1])]
    assert of(actions, Close) == [Close(conn_id, CloseReason.IDENTITY_REJECTED)]


def test_a_dial_to_another_broker_keeps_the_socket_being_checked() -> None:
    p = policy()
    conn_id = checked_bootstrap(p)
    actions = p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 2), 3)
    assert [c.key.node for c in of(actions, Connect)] == [BrokerNode(2)]
    assert of(actions, Close) == []  # a plain stand-in would be closed before this dial
    assert conn_id in p.needed_connections()


def test_a_broker_without_the_check_is_not_asked() -> None:
    p = policy()
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id), 1)
    actions = p.handle(MetadataReceived(1, metadata()), 2)
    assert of(actions, CheckIdentity) == [] and of(actions, Adopt) == []
    assert of(actions, Close) == [] and p.socket_count() == 1  # today's stand-in


def test_a_host_port_several_brokers_share_is_not_asked_about() -> None:
    p = policy()
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, checks_identity=True), 1)
    shared = [BrokerInfo(i, EP[1]) for i in (1, 2, 3)]  # a proxy in front of three brokers
    md = ClusterMetadata.build("c1", shared, {TopicPartition("t", 0): 2})
    assert of(p.handle(MetadataReceived(1, md), 2), CheckIdentity) == []


def test_a_broker_nothing_needs_is_not_asked_about() -> None:
    """Broker 1 leads nothing the producer writes: adopted, its socket would linger where the
    stand-in closes at the first broker dial."""
    p = policy()
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, checks_identity=True), 1)
    assert of(p.handle(MetadataReceived(1, metadata()), 2), CheckIdentity) == []  # leaders 2, 3
    closes = of(p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 2), 3), Close)
    assert closes == [Close(conn.conn_id, CloseReason.NOT_ADOPTED)]


def test_a_consumers_socket_confirmed_for_its_coordinator_alone_coordinates() -> None:
    p = policy(client=ClientKind.CONSUMER)
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, checks_identity=True), 1)
    ref = CoordinatorRef(CoordinatorKind.GROUP, "g")
    # The coordinator lookup rode the bootstrap exchange: broker 1 coordinates, leads nothing.
    p.handle(CoordinatorRequestNeeded(2, Api.JOIN_GROUP, 1, ref), 1.5)
    actions = p.handle(MetadataReceived(1, metadata()), 2)
    assert of(actions, CheckIdentity) == [CheckIdentity(conn.conn_id, 1, "c1")]
    assert of(actions, Connect) == []  # the JoinGroup waits for the answer
    actions = p.handle(IdentityChecked(conn.conn_id, 1, IdentityAnswer.CONFIRMED), 4)
    adopted = of(actions, Adopt)
    assert [(a.new_key.node, a.new_key.purpose) for a in adopted] == [
        (BrokerNode(1), Purpose.COORDINATION)
    ]
    assert of(actions, Lease) == [Lease(conn.conn_id, 2)]


def test_unverified_adoption_is_opt_in() -> None:
    for trust, adopts in ((False, 0), (True, 1)):
        p = policy(adopt_unverified=trust)
        conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
        p.handle(ConnectionEstablished(conn.conn_id), 1)
        actions = p.handle(MetadataReceived(1, metadata()), 2)
        assert len(of(actions, Adopt)) == adopts
        # Not adopted, it stays as the stand-in for any-node requests.
        assert of(actions, Close) == [] and p.socket_count() == 1


def test_no_adoption_when_the_cluster_id_differs() -> None:
    p = policy(expected_cluster_id="prod")
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id), 1)
    actions = p.handle(MetadataReceived(1, metadata("staging")), 2)
    assert of(actions, Adopt) == []
    assert [c.reason for c in of(actions, Close)] == [CloseReason.NOT_ADOPTED]


def test_data_requests_go_to_the_leader_and_unneeded_closes_after_linger() -> None:
    p = policy(connection_linger_ms=1000)
    conn_id = checked_bootstrap(p, metadata(leaders={0: 1, 1: 2}))
    p.handle(IdentityChecked(conn_id, 1, IdentityAnswer.CONFIRMED), 2)  # adopted as broker 1
    dials = of(p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 2), 3), Connect)
    assert [d.key.node for d in dials] == [BrokerNode(2)]
    p.handle(ConnectionEstablished(dials[0].conn_id), 4)
    p.handle(ResponseReceived(2), 5)
    p.handle(InterestChanged(frozenset({TopicPartition("t", 1)})), 5)  # broker 1 leads none
    assert p.socket_count() == 2  # broker 1 lingers
    closes = of(p.handle(TimePassed(), 5 + 1000), Close)
    assert [(c.conn_id, c.reason) for c in closes] == [(conn_id, CloseReason.UNNEEDED)]


def test_budget_is_never_exceeded_and_work_still_flows() -> None:
    for budget in (1, 2, 3):
        result = simulate(
            "big-consumer",
            "proposed",
            {"brokers": "40", "max_connections": str(budget), "duration_ms": "120000"},
        )
        assert result.peak <= budget
        apis = {r.api for r in result.requests}
        assert {Api.FETCH, Api.HEARTBEAT, Api.OFFSET_COMMIT} <= apis


def test_misuse_is_reported_clearly() -> None:
    p = policy()
    p.handle(TimePassed(), 10)
    with pytest.raises(PolicyMisuse, match="time went backwards"):
        p.handle(TimePassed(), 5)
    with pytest.raises(PolicyMisuse, match="never dialled"):
        p.handle(ConnectionEstablished(99), 10)
    p.handle(BootstrapRequested(1), 10)
    with pytest.raises(PolicyMisuse, match="already in use"):
        p.handle(AnyNodeRequestNeeded(1, Api.METADATA), 10)
    p.handle(ClientClosed(), 11)
    with pytest.raises(PolicyMisuse, match="closed"):
        p.handle(BootstrapRequested(2), 12)
    assert "closed" in repr(p)


def test_impossible_configs() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        policy(max_connections=-2)
    with pytest.raises(ConfigError, match="-1 to disable"):
        policy(connections_max_idle_ms=0)
    with pytest.raises(ConfigError, match="bootstrap_offset"):
        policy(bootstrap_offset=3)
    with pytest.raises(ConfigError, match="linger"):
        policy(connection_linger_ms=-1)
