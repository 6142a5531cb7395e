"""A DNS outage closes no working connection (issue 25), in the simulator.

Scenario ``resolver-outage``: three brokers at DNS names, nothing restarted, a steady
consumer group member or producer for five minutes; from minute 1 every lookup fails for
60 s (timed out by default; SERVFAIL, NXDOMAIN or an empty answer with ``failure=``), from
minute 3 every answer is empty for 60 s. The brokers never move, so the run with the
outages must be the run without them (``outage_ms=0``): the same connections opened and
closed at the same instants, the same requests on the same sockets, the same records
acknowledged -- under the proposed policy (rule h2: a failed lookup changes nothing) and
under every baseline (which never look at lookups). The rule as first written, which took
a failed lookup for "the name resolves to nothing", fails it: that is the issue.
"""

from __future__ import annotations

from typing import Any

import pytest

from connmgr.core import AddressesResolved, LookupOutcome
from connmgr.ledger import ConnEvent
from connmgr.policies import POLICIES
from connmgr.sim.run import build_simulator, prepare
from connmgr.sim.scenarios import get_scenario
from connmgr.testing.replay import record
from test_ip_change import HastyProposed

ALL = list(POLICIES)
FAILURES = [o.value for o in LookupOutcome if o is not LookupOutcome.ANSWERED]


def run(policy: str | type[Any], client: str, **settings: str) -> dict[str, Any]:
    """One run of ``resolver-outage``: what it did, as plain values to compare, and the
    lookups the policy was told of (outcome -> count)."""
    spec, policy_settings, seed = prepare("resolver-outage", {"client": client, **settings})
    sim = build_simulator(spec, policy, policy_settings, seed)
    steps = record(sim.policy)
    result = sim.run()
    lookups: dict[LookupOutcome, int] = {}
    for _, event, _ in steps:
        if isinstance(event, AddressesResolved):
            lookups[event.outcome] = lookups.get(event.outcome, 0) + 1
    return {
        "timeline": [(e.t_ms, e.kind, e.conn_id, e.reason) for e in result.timeline],
        "requests": [(r.t_ms, r.api, r.conn_id, r.reached, r.routed_ok) for r in result.requests],
        "acked": sim.records_acked,
        "opened": result.opened,
        "failed": result.failed,
        "peak": result.peak,
        "stale_waits": result.stale_waits,
        "misrouted": result.misrouted,
        "leaked": result.leaked,
        "closes_before_end": sum(
            e.kind is ConnEvent.CLOSED and e.t_ms < spec.duration_ms for e in result.timeline
        ),
        "lookups": lookups,
    }


def same_run(with_outage: dict[str, Any], without: dict[str, Any]) -> None:
    """Everything the client did, bar the lookups, is what it did without the outages."""
    for key in without:
        if key != "lookups":
            assert with_outage[key] == without[key], key


@pytest.mark.parametrize("client", ["consumer", "producer", "transactional"])
@pytest.mark.parametrize("policy", ALL)
def test_the_outages_change_nothing(policy: str, client: str) -> None:
    outage, calm = run(policy, client), run(policy, client, outage_ms="0")
    # The outages happened: 12 refreshes of each of the three names failed in each window
    # (60 s at a 5-s TTL), and every other lookup answered.
    assert outage["lookups"][LookupOutcome.TIMEOUT] == 3 * 12
    assert outage["lookups"][LookupOutcome.EMPTY] == 3 * 12
    assert set(calm["lookups"]) == {LookupOutcome.ANSWERED}
    same_run(outage, calm)
    # Nothing lost: no dial failed, no request waited on a dead socket or went astray, and
    # the only connection closed before the end is the bootstrap one, as without outages.
    assert outage["failed"] == 0 and outage["stale_waits"] == 0
    assert outage["misrouted"] == 0 and outage["leaked"] == 0
    assert outage["closes_before_end"] <= 1
    if client != "consumer":
        assert outage["acked"] > 0


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_no_failure_kind_closes_anything(failure: str, client: str) -> None:
    """Timeout, SERVFAIL, NXDOMAIN or an empty answer in the first window: all the same."""
    outage = run("proposed", client, failure=failure)
    assert outage["lookups"][LookupOutcome(failure)] >= 3 * 12
    same_run(outage, run("proposed", client, outage_ms="0"))


@pytest.mark.parametrize("client", ["consumer", "producer"])
def test_the_rule_as_first_written_closes_every_connection(client: str) -> None:
    """The comparison can fail: the hasty rule (a failed lookup closes) closes the
    connections at the outage's first refresh, and every re-dial then fails (the dial's own
    lookup fails too) until the resolver is back -- hundreds of failed dials, and requests
    (records, for the producer) that never went out."""
    hasty, calm = run(HastyProposed, client), run("proposed", client, outage_ms="0")
    assert hasty["closes_before_end"] > calm["closes_before_end"]
    assert hasty["failed"] > 100
    assert len(hasty["requests"]) < len(calm["requests"])
    if client == "producer":
        assert hasty["acked"] < calm["acked"]
    with pytest.raises(AssertionError):
        same_run(hasty, calm)


def test_the_outage_windows_are_checked() -> None:
    scenario = get_scenario("resolver-outage")
    assert scenario.defaults["outage_ms"] == 60_000
    with pytest.raises(ValueError, match="must not overlap"):
        scenario.spec({"empty_at_ms": "90000"})
    with pytest.raises(ValueError, match="choose one of"):
        scenario.spec({"failure": "answered"})
