"""A broker whose IP changes under a stable host name (issue 18, item 2), and a resolver that
fails (issue 25).

The driver looks names up (the simulator: when it first dials one, and again every
``dns_ttl_ms``) and reports every lookup, failed or not; the policy learns the address each
socket reached. The rule (proposed policy, rule h2): a failed lookup -- timeout, SERVFAIL,
NXDOMAIN, an empty answer -- changes nothing; a connection whose address two consecutive
successful answers for its name leave out closes at once, busy or not, and its in-flight
requests are placed again (a lost connection's path). Today's clients never re-check a live
connection's address: the baselines ignore the reports and wait out ``request_timeout_ms``
(30 s) on the dark socket.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
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
    LookupOutcome,
    MetadataReceived,
    PolicyConfig,
    ResponseReceived,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.actions import Action
from connmgr.core.decisions import CloseNow, Decision
from connmgr.core.policy import Policy
from connmgr.core.state import ConnState
from connmgr.errors import PolicyMisuse
from connmgr.policies import POLICIES, ProposedPolicy
from connmgr.sim import simulate
from connmgr.sim.result import RunResult

HOST = "kafka-1.kafka"
EP = Endpoint(HOST, 9092)
OLD, NEW = "10.0.0.1", "10.0.1.1"
BASELINES = ("java-today", "aiokafka-today", "java-described")
FAILURES = [o for o in LookupOutcome if o is not LookupOutcome.ANSWERED]


class DeafProposed(ProposedPolicy):
    """The mutant: the proposed policy with the stale-address rule switched off."""

    name = "proposed-deaf"

    def on_addresses_resolved(self, lookup: AddressesResolved) -> Iterator[Decision]:
        return iter(())


class HastyProposed(ProposedPolicy):
    """The mutant: the rule as it was first written -- one lookup that leaves a connection's
    address out closes it, a failed lookup (no addresses) included."""

    name = "proposed-hasty"

    def on_addresses_resolved(self, lookup: AddressesResolved) -> Iterator[Decision]:
        for conn in self.table.records():
            if (
                conn.state in (ConnState.READY, ConnState.DRAINING)
                and conn.address is not None
                and conn.address not in lookup.addresses
                and conn.key.endpoint.host == lookup.host
            ):
                yield CloseNow(conn, CloseReason.STALE_ADDRESS)


def answer(*addresses: str) -> AddressesResolved:
    return AddressesResolved(HOST, frozenset(addresses))


def failed(outcome: LookupOutcome) -> AddressesResolved:
    return AddressesResolved.failed(HOST, outcome)


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


def still_used(p: Policy, conn: int, t: float, request_id: int = 10) -> None:
    """The next broker-1 request goes on ``conn``, nothing closed or dialled."""
    actions = p.handle(BrokerRequestNeeded(request_id, Api.PRODUCE, 1), t)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(conn, request_id)]
    assert of(actions, Close) == [] and of(actions, Connect) == []
    p.handle(ResponseReceived(request_id), t)


def next_request_dials_anew(p: Policy, stale: int, t: float) -> None:
    """Two answers in a row that drop ``OLD`` (a failed lookup between them neither counts
    nor clears the first): the first closes nothing, the second closes ``stale``, and the
    next broker-1 request dials a new connection to the same host:port."""
    assert of(p.handle(answer(NEW), t), Close) == []
    assert of(p.handle(failed(LookupOutcome.TIMEOUT), t + 1), Close) == []
    actions = p.handle(answer(NEW), t + 2)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (stale, CloseReason.STALE_ADDRESS)
    ]
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 3)
    assert of(actions, Lease) == []
    (dial,) = of(actions, Connect)
    assert dial.conn_id != stale and dial.key.endpoint == EP
    actions = p.handle(ConnectionEstablished(dial.conn_id, address=NEW), t + 4)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(dial.conn_id, 10)]


def test_proposed_closes_an_idle_stale_connection_on_the_second_answer() -> None:
    p, stale, t = ready_broker_connection(ProposedPolicy)
    next_request_dials_anew(p, stale, t)


def test_the_mutant_without_the_rule_keeps_using_the_stale_connection() -> None:
    """The check above can fail: with the rule off, the request goes on the stale socket."""
    p, stale, t = ready_broker_connection(DeafProposed)
    with pytest.raises(AssertionError):
        next_request_dials_anew(p, stale, t)


def test_the_hasty_mutant_closes_on_the_first_answer() -> None:
    """...and so can its first half: the rule as first written closes on one answer."""
    p, stale, t = ready_broker_connection(HastyProposed)
    with pytest.raises(AssertionError):
        next_request_dials_anew(p, stale, t)


def test_one_answer_that_drops_the_address_closes_nothing() -> None:
    p, conn, t = ready_broker_connection(ProposedPolicy)
    assert p.handle(answer(NEW), t) == []
    still_used(p, conn, t + 1)


def test_an_answer_with_the_address_again_clears_the_first() -> None:
    """NEW, OLD, NEW: never two answers in a row without ``OLD``; the next NEW makes two."""
    p, conn, t = ready_broker_connection(ProposedPolicy)
    for step, addresses in enumerate(([NEW], [OLD, NEW], [NEW])):
        assert of(p.handle(answer(*addresses), t + step), Close) == []
    still_used(p, conn, t + 3)
    actions = p.handle(answer(NEW), t + 4)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (conn, CloseReason.STALE_ADDRESS)
    ]


def test_another_names_answers_leave_the_connection_alone() -> None:
    p, conn, t = ready_broker_connection(ProposedPolicy)
    for step in range(3):
        other = AddressesResolved("kafka-2.kafka", frozenset({NEW}))
        assert p.handle(other, t + step) == []
    still_used(p, conn, t + 3)


@pytest.mark.parametrize("name", ["proposed", *BASELINES])
@pytest.mark.parametrize("outcome", FAILURES, ids=lambda o: o.value)
def test_a_failed_lookup_closes_nothing_however_often(name: str, outcome: LookupOutcome) -> None:
    """A DNS outage: the lookup times out, or the server fails, says NXDOMAIN or answers no
    address, on every refresh. Idle or busy, the connection stays and carries requests."""
    p, conn, t = ready_broker_connection(POLICIES[name])
    for step in range(5):
        assert p.handle(failed(outcome), t + step) == []
    still_used(p, conn, t + 5)
    actions = p.handle(BrokerRequestNeeded(11, Api.PRODUCE, 1), t + 6)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(conn, 11)]
    for step in range(5):
        assert p.handle(failed(outcome), t + 7 + step) == []
    assert of(p.handle(ResponseReceived(11), t + 12), Connect) == []


@pytest.mark.parametrize("outcome", FAILURES, ids=lambda o: o.value)
def test_the_hasty_mutant_closes_on_a_failed_lookup(outcome: LookupOutcome) -> None:
    """The check above can fail: the rule as first written closes on any failed lookup."""
    p, conn, t = ready_broker_connection(HastyProposed)
    assert [(c.conn_id, c.reason) for c in of(p.handle(failed(outcome), t), Close)] == [
        (conn, CloseReason.STALE_ADDRESS)
    ]


def test_a_lookup_says_what_happened() -> None:
    """Only a successful answer carries addresses, and it carries at least one: an empty
    answer is a failed lookup (``EMPTY``), never a successful one."""
    with pytest.raises(PolicyMisuse):
        AddressesResolved(HOST, frozenset())
    with pytest.raises(PolicyMisuse):
        AddressesResolved(HOST, frozenset({OLD}), LookupOutcome.TIMEOUT)
    assert answer(OLD).answered and not failed(LookupOutcome.EMPTY).answered


def busy_stale_connection_is_closed_and_its_request_re_sent(
    p: Policy, stale: int, t: float
) -> None:
    """With request 10 in flight on ``stale``, two answers without ``OLD`` close ``stale``
    at the second and re-send request 10 on a new dial."""
    actions = p.handle(BrokerRequestNeeded(10, Api.PRODUCE, 1), t + 1)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(stale, 10)]
    assert of(p.handle(answer(NEW), t + 2), Close) == []
    actions = p.handle(answer(NEW), t + 3)
    assert [(c.conn_id, c.reason) for c in of(actions, Close)] == [
        (stale, CloseReason.STALE_ADDRESS)
    ]
    (dial,) = of(actions, Connect)
    assert dial.conn_id != stale and dial.key.endpoint == EP and of(actions, Lease) == []
    actions = p.handle(ConnectionEstablished(dial.conn_id, address=NEW), t + 4)
    assert [(a.conn_id, a.request_id) for a in of(actions, Lease)] == [(dial.conn_id, 10)]
    # The old socket's answer can no longer arrive; the new one's completes the request.
    assert of(p.handle(ResponseReceived(10), t + 5), Close) == []
    assert p.pending_requests == ()


def test_a_busy_stale_connection_closes_at_once_and_its_requests_are_re_sent() -> None:
    p, stale, t = ready_broker_connection(ProposedPolicy)
    busy_stale_connection_is_closed_and_its_request_re_sent(p, stale, t)


def test_the_mutant_leaves_the_busy_request_on_the_stale_socket() -> None:
    p, stale, t = ready_broker_connection(DeafProposed)
    with pytest.raises(AssertionError):
        busy_stale_connection_is_closed_and_its_request_re_sent(p, stale, t)


@pytest.mark.parametrize("name", ["proposed", *BASELINES])
def test_the_same_address_set_changes_nothing(name: str) -> None:
    p, conn, t = ready_broker_connection(POLICIES[name])
    for addresses in ({OLD}, {OLD, NEW}, {OLD}, {OLD, NEW}):
        assert p.handle(answer(*addresses), t) == []
    still_used(p, conn, t + 1)


@pytest.mark.parametrize("name", BASELINES)
def test_the_baselines_ignore_the_resolution(name: str) -> None:
    """Today's clients never re-check a live connection's address: the next request goes
    on the stale socket (and waits out its request timeout)."""
    p, conn, t = ready_broker_connection(POLICIES[name])
    for step in range(3):
        assert p.handle(answer(NEW), t + step) == []
    still_used(p, conn, t + 3)


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
    its stale requests waits at most the pod's downtime (the name answers NXDOMAIN then,
    which closes nothing) plus the two refreshes that confirm the new address (a TTL each)
    plus the fetch wait it was sent with -- not the 30-s request timeout. Its dials never
    fail: it closes a stale socket only once the name answers with the new pod."""
    proposed = run("proposed", client)
    assert stale_closes(proposed) > 0
    for baseline in ("java-today", "aiokafka-today"):
        assert stale_ms(proposed) < stale_ms(run(baseline, client)), baseline
    assert proposed.peak <= run("java-today", client).peak
    assert proposed.stale_waits is not None
    assert stale_ms(proposed) <= proposed.stale_waits * (10_000 + 2 * 5_000 + 500)
    assert proposed.failed == 0
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
