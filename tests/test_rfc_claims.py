"""Claims of proposal/rfc.md about the proposed policy that no other test pins: the opt-in
``share_coordinator``, the linger absorbing a leader that moves away and back, idle expiry of
needed connections, and dials deferred by the socket budget."""

from __future__ import annotations

import itertools
import random

import pytest

from connmgr.core import (
    AnyNodeRequestNeeded,
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
    Lease,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TimePassed,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action
from connmgr.core.events import CoordinatorRequestNeeded
from connmgr.core.identity import BrokerNode, Purpose, Role
from connmgr.core.state import ConnState
from connmgr.policies import ProposedPolicy
from connmgr.sim import RunResult, simulate

EP = {i: Endpoint("localhost", 9090 + i) for i in range(1, 6)}


def metadata(leaders: dict[int, int]) -> ClusterMetadata:
    brokers = [BrokerInfo(i, ep) for i, ep in EP.items()]
    tps = {TopicPartition("t", p): b for p, b in leaders.items()}
    return ClusterMetadata.build("c1", brokers, tps)


def policy(**options: object) -> ProposedPolicy:
    options = {"bootstrap_offset": 0, **options}
    config = PolicyConfig(bootstrap=parse_bootstrap("localhost:9091"), **options)  # type: ignore[arg-type]
    return ProposedPolicy(config, random.Random(1))


def of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


class Client:
    """Drives a proposed policy the way a client would: requests get ids, dials complete,
    responses come back at once."""

    def __init__(self, p: ProposedPolicy) -> None:
        self.p = p
        self.ids = itertools.count(1)
        self.now = 0.0

    def at(self, t_ms: float, event: object) -> list[Action]:
        self.now = t_ms
        return self.p.handle(event, t_ms)  # type: ignore[arg-type]

    def request(self, t_ms: float, event_type: type, *args: object) -> list[Action]:
        """Submit a request, complete any dial it causes, answer it; all the actions."""
        request_id = next(self.ids)
        actions = self.at(t_ms, event_type(request_id, *args))
        for dial in of(actions, Connect):
            actions += self.at(t_ms, ConnectionEstablished(dial.conn_id))
        return actions + self.at(t_ms, ResponseReceived(request_id))

    def refresh(self, t_ms: float, leaders: dict[int, int]) -> list[Action]:
        request_id = next(self.ids)
        actions = self.at(t_ms, AnyNodeRequestNeeded(request_id, Api.METADATA))
        return actions + self.at(t_ms, MetadataReceived(request_id, metadata(leaders)))

    def bootstrap(self, leaders: dict[int, int]) -> None:
        request_id = next(self.ids)
        dial = of(self.at(0, BootstrapRequested(request_id)), Connect)[0]
        self.at(1, ConnectionEstablished(dial.conn_id))
        self.at(2, MetadataReceived(request_id, metadata(leaders)))

    def live(self, broker: int, purpose: Purpose = Purpose.DATA) -> list[int]:
        return [
            c.conn_id
            for c in self.p.connections()
            if c.key.broker_id == broker and c.key.purpose is purpose and c.state is ConnState.READY
        ]


# --- rule 5: share_coordinator --------------------------------------------------------------


@pytest.mark.parametrize("placement", ["shared", "separate"])
@pytest.mark.parametrize("share", [False, True])
def test_share_coordinator_moves_group_requests_to_the_coordinators_data_connection(
    placement: str, share: bool
) -> None:
    settings = {"brokers": "5", "leaders": "2", "coordinator": placement, "duration_ms": "60000"}
    result: RunResult = simulate(
        "big-consumer", "proposed", {**settings, "share_coordinator": str(share).lower()}
    )
    group = [r for r in result.requests if r.target.startswith("coordinator")]
    assert group and {r.api for r in group} >= {Api.JOIN_GROUP, Api.HEARTBEAT}
    (coordinator,) = {r.reached for r in group}
    assert all(r.routed_ok and r.key.broker_id == coordinator for r in group)
    coordination = result.by_role[Role.COORDINATION.value]
    held = {(c["broker"], c["role"]) for c in result.steady_connections}
    if share:
        # Group requests go on the coordinator broker's data connection -- the very socket its
        # fetches use when it also leads a partition -- and no coordination connection opens.
        assert {r.key.purpose for r in group} == {Purpose.DATA}
        assert coordination["opened"] == 0
        assert (coordinator, "data") in held and (coordinator, "coordination") not in held
        fetch_conns = {r.conn_id for r in result.requests if r.api is Api.FETCH}
        group_conns = {r.conn_id for r in group}
        if placement == "shared":
            assert group_conns <= fetch_conns
        else:
            assert not group_conns & fetch_conns
    else:
        assert {r.key.purpose for r in group} == {Purpose.COORDINATION}
        assert coordination["opened"] == 1
        assert (coordinator, "coordination") in held
        if placement == "shared":
            assert (coordinator, "data") in held  # two sockets to the coordinator broker


def test_share_coordinator_at_policy_level_sends_group_requests_on_the_data_connection() -> None:
    for share in (False, True):
        c = Client(policy(share_coordinator=share))
        c.bootstrap({0: 2, 1: 3})
        c.request(3, BrokerRequestNeeded, Api.FETCH, 2)
        actions = c.request(4, CoordinatorRequestNeeded, Api.HEARTBEAT, 2)
        (send,) = of(actions, Lease)
        if share:
            assert of(actions, Connect) == []
            assert send.conn_id in c.live(2) and c.live(2, Purpose.COORDINATION) == []
        else:
            assert [d.key.purpose for d in of(actions, Connect)] == [Purpose.COORDINATION]
            assert send.conn_id in c.live(2, Purpose.COORDINATION)
            assert send.conn_id not in c.live(2)


# --- rule 6: the linger ---------------------------------------------------------------------


def test_linger_absorbs_a_leader_that_moves_away_and_back_within_it() -> None:
    c = Client(policy(connection_linger_ms=1000))
    c.bootstrap({0: 2, 1: 3})
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 2)
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 3)
    (conn,) = c.live(2)
    c.refresh(10, {0: 3, 1: 3})  # broker 2 leads nothing now: its connection lingers
    c.refresh(900, {0: 2, 1: 3})  # and leads again before the linger ran out
    assert of(c.at(5_000, TimePassed()), Close) == []
    actions = c.request(5_001, BrokerRequestNeeded, Api.PRODUCE, 2)
    assert of(actions, Connect) == []
    assert [s.conn_id for s in of(actions, Lease)] == [conn]


def test_a_leader_away_longer_than_the_linger_is_closed_and_dialled_again() -> None:
    c = Client(policy(connection_linger_ms=1000))
    c.bootstrap({0: 2, 1: 3})
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 2)
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 3)
    (conn,) = c.live(2)
    c.refresh(10, {0: 3, 1: 3})
    closes = of(c.at(10 + 1000, TimePassed()), Close)
    assert [(x.conn_id, x.reason) for x in closes] == [(conn, CloseReason.UNNEEDED)]
    c.refresh(2_000, {0: 2, 1: 3})
    actions = c.request(2_001, BrokerRequestNeeded, Api.PRODUCE, 2)
    assert [d.key.node for d in of(actions, Connect)] == [BrokerNode(2)]


# --- rule 6: connections.max.idle.ms still applies to needed connections -------------------


def test_idle_expiry_still_closes_a_needed_connection() -> None:
    c = Client(policy(connections_max_idle_ms=10_000, connection_linger_ms=1000))
    c.bootstrap({0: 2})
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 2)
    (conn,) = c.live(2)
    assert c.p.needed_connections() == {conn}  # broker 2 leads a partition in use
    assert of(c.at(3 + 9_999, TimePassed()), Close) == []
    closes = of(c.at(3 + 10_000, TimePassed()), Close)
    assert [(x.conn_id, x.reason) for x in closes] == [(conn, CloseReason.IDLE)]


def test_without_idle_expiry_a_needed_connection_stays() -> None:
    c = Client(policy(connections_max_idle_ms=-1, connection_linger_ms=1000))
    c.bootstrap({0: 2})
    c.request(3, BrokerRequestNeeded, Api.PRODUCE, 2)
    (conn,) = c.live(2)
    assert of(c.at(3_600_000, TimePassed()), Close) == []
    assert c.live(2) == [conn]


# --- rule 8: a dial at a full budget waits as DEFERRED ---------------------------------------


def test_a_dial_at_a_full_budget_is_deferred_until_a_socket_goes_quiet() -> None:
    c = Client(policy(max_connections=1))
    c.bootstrap({0: 2})
    fetch = next(c.ids)
    dial = of(c.at(3, BrokerRequestNeeded(fetch, Api.FETCH, 2)), Connect)
    c.at(3, ConnectionEstablished(dial[0].conn_id))  # the fetch is now in flight
    heartbeat = next(c.ids)
    assert of(c.at(4, CoordinatorRequestNeeded(heartbeat, Api.HEARTBEAT, 3)), Connect) == []
    # Held as a DEFERRED record, not a socket: connections() lists sockets only.
    states = {(r.key.broker_id, r.key.purpose): r.state for r in c.p.table.records()}
    assert states[(3, Purpose.COORDINATION)] is ConnState.DEFERRED
    assert c.p.socket_count() == len(c.p.connections()) == 1
    actions = c.at(5, ResponseReceived(fetch))  # the fetch socket goes quiet: room is made
    assert [x.reason for x in of(actions, Close)] == [CloseReason.BUDGET]
    assert [d.key.purpose for d in of(actions, Connect)] == [Purpose.COORDINATION]


# --- rule 3: a kept bootstrap connection serves any-node requests only ----------------------


@pytest.mark.parametrize(
    ("scenario", "settings"),
    [
        ("seed-consumer", {}),
        ("seed-producer", {}),
        ("k8s-endpoint-change", {}),
        ("shared-endpoint", {}),
        ("big-consumer", {"brokers": "30", "duration_ms": "600000"}),
    ],
)
def test_a_bootstrap_connection_never_carries_a_broker_addressed_request(
    scenario: str, settings: dict[str, str]
) -> None:
    result = simulate(scenario, "proposed", settings)
    on_bootstrap = [r for r in result.requests if r.key.role is Role.BOOTSTRAP]
    assert on_bootstrap, "the scenario sent nothing on its bootstrap connection"
    assert {r.target for r in on_bootstrap} == {"any"}
