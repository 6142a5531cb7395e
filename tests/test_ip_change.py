"""A broker whose IP changes under a stable host name (issue 18, item 2).

The driver resolves names (the simulator: when it dials one, and again every ``dns_ttl_ms``,
reporting a changed answer); the policy learns the address each socket reached. The rule
(proposed policy, rule h2): when a name no longer resolves to the address a connection
reached -- another address, or nothing while the pod is gone -- that connection closes at
once, busy or not, and its in-flight requests are placed again (a lost connection's path).
Today's clients never re-check a live connection's address: the baselines ignore the report
and wait out ``request_timeout_ms`` (30 s) on the dark socket.
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


def busy_stale_connection_is_closed_and_its_request_re_sent(
    p: Policy, stale: int, t: float, addresses: frozenset[str]
) -> None:
    """With request 10 in flight on ``stale``, a resolution to ``addresses`` (``OLD`` not
    among them) closes ``stale`` at once and re-sends request 10 on a new dial."""
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(stale, 10)]
    actions = p.handle(AddressesResolved(HOST, addresses), t + 2)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (stale, CloseReason.STALE_ADDRESS)
    ]
    (dial,) = of(actions, Connect)
    assert dial.conn_id != stale and dial.key.endpoint == EP and of(actions, Lease) == []
    actions = p.handle(ConnectionEstablished(dial.conn_id, address=NEW), t + 3)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(dial.conn_id, 10)]
    # The old socket's answer can no longer arrive; the new one's completes the request.
    assert of(p.handle(ResponseReceived(10), t + 4), Close) == []
    assert p.pending_requests == ()


def test_a_busy_stale_connection_closes_at_once_and_its_requests_are_re_sent() -> None:
    p, stale, t = ready_broker_connection(ProposedPolicy)
    busy_stale_connection_is_closed_and_its_request_re_sent(p, stale, t, frozenset({NEW}))


def test_a_name_that_resolves_to_nothing_retires_the_old_address_too() -> None:
    """NXDOMAIN while the pod is gone (an empty answer): the old address is stale as well."""
    p, stale, t = ready_broker_connection(ProposedPolicy)
    busy_stale_connection_is_closed_and_its_request_re_sent(p, stale, t, frozenset())


def test_the_mutant_leaves_the_busy_request_on_the_stale_socket() -> None:
    p, stale, t = ready_broker_connection(DeafProposed)
    with pytest.raises(AssertionError):
        busy_stale_connection_is_closed_and_its_request_re_sent(p, stale, t, frozenset())


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
def run(policy: str | type[Policy], client: str, ttl_ms: int = 5_000) -> RunResult:
    return simulate("ip-change", policy, {"client": client, "dns_ttl_ms": str(ttl_ms)})


def stale_closes(result: RunResult) -> int:
    return sum(c.close_reason == CloseReason.STALE_ADDRESS.value for c in result.conn_records)


def stale_ms(result: RunResult) -> float:
    assert result.stale_waits is not None and result.stale_wait_ms is not None
    return result.stale_wait_ms


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_ip_change_proposed_waits_less_on_dark_sockets_than_today(client: str) -> None:
    """Side by side in the ip-change scenario (seed 0, one client-hour; deterministic): the
    proposal's requests wait less in all on replaced pods' dark sockets than java-today's
    and aiokafka-today's, it never holds more sockets at peak than java-today, and each of
    its stale requests waits at most about one TTL (plus the fetch wait it was sent with),
    not the 30-s request timeout."""
    proposed = run("proposed", client)
    assert stale_closes(proposed) > 0
    for baseline in ("java-today", "aiokafka-today"):
        assert stale_ms(proposed) < stale_ms(run(baseline, client)), baseline
    assert proposed.peak <= run("java-today", client).peak
    assert proposed.stale_waits is not None
    assert stale_ms(proposed) <= proposed.stale_waits * (5_000 + 500)
    assert proposed.misrouted == 0 and proposed.leaked == 0


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_ip_change_without_the_rule_the_proposal_waits_as_long_as_today(client: str) -> None:
    """The comparison above can fail: the mutant that ignores the resolutions gets no lower
    stale wait than the baselines (it waits out the request timeout like them)."""
    deaf = run(DeafProposed, client)
    assert stale_closes(deaf) == 0
    assert not all(
        stale_ms(deaf) < stale_ms(run(baseline, client))
        for baseline in ("java-today", "aiokafka-today")
    )


def test_ip_change_without_re_resolution_the_rule_has_nothing_to_act_on() -> None:
    """``dns_ttl_ms=0``: names resolved only when dialled. The proposal then learns of a
    replaced pod too late to spare a wait (its stale wait is java-today's to within one
    request's): the periodic re-resolution is what feeds the rule."""
    proposed, java = run("proposed", "consumer", 0), run("java-today", "consumer", 0)
    assert stale_ms(proposed) > 0.9 * stale_ms(java)


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_ip_change_requests_wait_out_the_timeout_on_a_dark_socket(client: str) -> None:
    """Every baseline has requests stuck on a socket to a replaced pod's address: nothing
    answers there, and each waits at most ``request_timeout_ms`` (30 s)."""
    for name in BASELINES:
        result = run(name, client)
        assert result.stale_waits and result.stale_wait_ms
        assert result.stale_wait_ms <= 30_000 * result.stale_waits
        assert stale_closes(result) == 0
        assert result.summary()["stale_waits"] == result.stale_waits
