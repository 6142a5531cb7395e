"""A broker whose IP changes under a stable host name (issue 18, item 2).

The rule (proposed policy, rule h2): when the driver reports that a name no longer resolves to
the address a connection reached, that connection takes no new request; an idle one closes at
once, a busy one drains apart and the next request for the broker dials anew. Today's clients
never re-check a live connection's address: the baselines ignore the report.
"""

from __future__ import annotations

import random
from functools import cache

import pytest
from connmgr.core import (
    AddressesResolved,
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
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action
from connmgr.core.policy import Policy
from connmgr.policies import POLICIES, ProposedPolicy
from connmgr.sim import simulate
from connmgr.sim.result import RunResult

HOST = "kafka-1.kafka"
EP = Endpoint(HOST, 9092)
OLD, NEW = "10.0.0.1", "10.0.1.1"
BASELINES = ("java-today", "aiokafka-today", "java-described")


class DeafProposed(ProposedPolicy):
    """The mutant: the proposed policy with the stale-address rule switched off."""

    name = "proposed-deaf"

    def on_addresses_resolved(self, host: str, addresses: frozenset[str]) -> None:
        pass


def of(actions: list[Action], kind: type) -> list:  # type: ignore[type-arg]
    return [a for a in actions if isinstance(a, kind)]


def ready_broker_connection(policy: type[Policy]) -> tuple[Policy, int, float]:
    """A policy with a READY data connection to broker 1 (at ``OLD``) that has carried one
    request; returns it, that connection's id and the time."""
    config = PolicyConfig(bootstrap=parse_bootstrap(f"{HOST}:9092"), bootstrap_offset=0)
    p = policy(config, random.Random(1))
    md = ClusterMetadata.build("c", [BrokerInfo(1, EP)], {TopicPartition("t", 0): 1})
    t = 0.0
    actions = p.handle(BootstrapRequested(1), t)
    for c in of(actions, Connect):
        t += 1
        p.handle(ConnectionEstablished(c.conn_id, address=OLD), t)
    t += 1
    actions = p.handle(MetadataReceived(1, md), t)
    rid = 2
    t += 1
    actions += p.handle(BrokerRequestNeeded(rid, Api.PRODUCE, 1), t)
    for c in of(actions, Connect):
        t += 1
        actions += p.handle(ConnectionEstablished(c.conn_id, address=OLD), t)
    lease = [a for a in of(actions, Lease) if a.request_id == rid]
    assert len(lease) == 1
    t += 1
    p.handle(ResponseReceived(rid), t)
    return p, lease[0].conn_id, t


def next_request_dials_anew(p: Policy, stale: int, t: float) -> None:
    """After a resolution that drops ``OLD``, the next broker-1 request does not go on
    ``stale``: it dials a new connection to the same host:port."""
    actions = p.handle(AddressesResolved(HOST, frozenset({NEW})), t)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (stale, CloseReason.STALE_ADDRESS)
    ]
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert of(actions, Lease) == []
    (dial,) = of(actions, Connect)
    assert dial.conn_id != stale and dial.key.endpoint == EP
    actions = p.handle(ConnectionEstablished(dial.conn_id, address=NEW), t + 2)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(dial.conn_id, 10)]


def test_proposed_closes_an_idle_stale_connection_and_dials_the_new_address() -> None:
    p, stale, t = ready_broker_connection(ProposedPolicy)
    next_request_dials_anew(p, stale, t)


def test_the_mutant_without_the_rule_keeps_using_the_stale_connection() -> None:
    """The check above can fail: with the rule off, the request goes on the stale socket."""
    p, stale, t = ready_broker_connection(DeafProposed)
    with pytest.raises(AssertionError):
        next_request_dials_anew(p, stale, t)


def test_a_busy_stale_connection_drains_apart() -> None:
    """A stale connection with a request in flight takes no new one: the next request dials
    anew at once (no waiting for the drain), and the old socket closes when its request
    ends."""
    p, stale, t = ready_broker_connection(ProposedPolicy)
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(stale, 10)]
    assert of(p.handle(AddressesResolved(HOST, frozenset({NEW})), t + 2), Close) == []
    actions = p.handle(BrokerRequestNeeded(11, Api.PRODUCE, 1), t + 3)
    (dial,) = of(actions, Connect)
    assert dial.conn_id != stale and of(actions, Lease) == []
    actions = p.handle(ResponseReceived(10), t + 4)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (stale, CloseReason.STALE_ADDRESS)
    ]


@pytest.mark.parametrize("name", ["proposed", *BASELINES])
def test_the_same_address_set_changes_nothing(name: str) -> None:
    p, conn, t = ready_broker_connection(POLICIES[name])
    for addresses in ({OLD}, {OLD, NEW}):
        assert p.handle(AddressesResolved(HOST, frozenset(addresses)), t) == []
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(conn, 10)]


@pytest.mark.parametrize("name", BASELINES)
def test_the_baselines_ignore_the_resolution(name: str) -> None:
    """Today's clients never re-check a live connection's address: the next request goes
    on the stale socket (and waits out its request timeout)."""
    p, conn, t = ready_broker_connection(POLICIES[name])
    assert p.handle(AddressesResolved(HOST, frozenset({NEW})), t) == []
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(conn, 10)]


# --- the ip-change scenario --------------------------------------------------------------


@cache
def run(policy: str, client: str) -> RunResult:
    return simulate("ip-change", policy, {"client": client})


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_ip_change_proposed_never_above_java_today(client: str) -> None:
    """In the ip-change scenario (seed 0, one client-hour; deterministic) the proposal's
    peak is at most java-today's (8 vs 9 consumer, 6 vs 7 producer). Its stale waits are not
    lower: the rule never fires there before the request timeout (docs/churn-scenarios.md),
    so they are the requests in flight at each restart -- 9 vs 9 (consumer) and 7 vs 6
    (producer: its metadata request took the same socket at that instant)."""
    proposed, java = run("proposed", client), run("java-today", client)
    assert proposed.peak <= java.peak
    assert proposed.stale_waits is not None and java.stale_waits is not None
    assert proposed.stale_wait_ms is not None and java.stale_wait_ms is not None
    assert proposed.stale_waits <= java.stale_waits + 1
    assert proposed.misrouted == 0 and proposed.leaked == 0


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_ip_change_requests_wait_out_the_timeout_on_a_dark_socket(client: str) -> None:
    """Every policy has requests stuck on a socket to a replaced pod's address: nothing
    answers there, and each waits at most ``request_timeout_ms`` (30 s)."""
    for name in ("proposed", *BASELINES):
        result = run(name, client)
        assert result.stale_waits and result.stale_wait_ms
        assert result.stale_wait_ms <= 30_000 * result.stale_waits
        assert result.summary()["stale_waits"] == result.stale_waits
