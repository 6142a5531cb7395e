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
    ClientClosed,
    Close,
    CloseReason,
    ClusterMetadata,
    Connect,
    ConnectionEstablished,
    ConnectionFailed,
    Endpoint,
    Lease,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action, Adopt
from connmgr.core.identity import BootstrapNode, BrokerNode
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


def test_adopt_when_the_broker_confirms_its_id_at_that_endpoint() -> None:
    p = policy()
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, node_id=1), 1)
    adopted = of(p.handle(MetadataReceived(1, metadata()), 2), Adopt)
    assert len(adopted) == 1 and adopted[0].new_key.node == BrokerNode(1)
    assert p.metrics.by_role[adopted[0].new_key.role].handshakes_avoided == 1
    # The adopted socket moved from one role to the other: each role held it once.
    counts = p.metrics.as_dict()
    assert [counts[r]["peak"] for r in ("bootstrap", "data")] == [1, 1]
    assert [counts[r]["open_now"] for r in ("bootstrap", "data")] == [0, 1]
    assert p.metrics.peak == 1


def test_a_confirmed_id_advertised_elsewhere_is_not_adopted() -> None:
    p = policy()
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, node_id=2), 1)  # broker 2 is at :9093
    assert of(p.handle(MetadataReceived(1, metadata()), 2), Adopt) == []


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
    conn = of(p.handle(BootstrapRequested(1), 0), Connect)[0]
    p.handle(ConnectionEstablished(conn.conn_id, node_id=1), 1)
    p.handle(MetadataReceived(1, metadata()), 2)  # adopted as broker 1, not a leader
    dials = of(p.handle(BrokerRequestNeeded(2, Api.PRODUCE, 2), 3), Connect)
    assert [d.key.node for d in dials] == [BrokerNode(2)]
    p.handle(ConnectionEstablished(dials[0].conn_id), 4)
    p.handle(ResponseReceived(2), 5)
    assert p.socket_count() == 2  # broker 1 lingers
    closes = of(p.handle(TimePassed(), 5 + 1000), Close)
    assert [(c.conn_id, c.reason) for c in closes] == [(conn.conn_id, CloseReason.UNNEEDED)]


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
