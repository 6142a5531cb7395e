"""*Never more sockets* excuses nothing by the candidate's own behaviour: every allowance is
bounded by a cause in the story (:mod:`connmgr.testing.story`) and is zero without it.

Each test replays a story in which the real policy uses an allowance, then takes the
allowance's cause out of the story (the steps or the truth) and shows the allowance drop to
zero -- and, where the allowance was what let the run pass, the check fail. The thrashing
mutant, which re-dials at every request, is caught wherever the budget is not below the
work, even in a story whose leader does return.
"""

from __future__ import annotations

import dataclasses

import pytest

from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.sim.simulator import Simulator
from connmgr.testing.invariants import (
    Allowances,
    allowances,
    broker_requests,
    check_fewer_sockets,
    established,
)
from connmgr.testing.machines import PolicyRef, Step, Story, World
from connmgr.testing.mutants import Thrashing
from connmgr.testing.story import FAILURES, Truth

from .test_deep_findings import (
    REFRESH_STEPS,
    REFRESH_WORLD,
    STALE_LEADER_STEPS,
    STALE_LEADER_WORLD,
    STALE_LOOKUP,
    STALE_LOOKUP_STEPS,
)

NEVER_MORE = r"^never more sockets"

PRODUCER = World(
    brokers=3,
    client=ClientKind.PRODUCER,
    leaders=(1, 3),
    coordinator=1,
    shared=False,
    idle_disabled=False,
    max_connections=None,
    confirms_identity=False,
    bootstrap_count=1,
    bootstrap_offset=0,
    seed=0,
)
CONSUMER = dataclasses.replace(PRODUCER, client=ClientKind.CONSUMER, leaders=(1,), coordinator=2)

RETURN_STEPS = (
    Step("wait", ms=50.0),
    Step("move_leader", 3, other=0),  # broker 1 leads nothing now (seen at the next send)
    Step("wait", ms=15_000.0),  # past the 3 s linger: its socket is closed
    Step("move_leader", 1, other=0),  # and needed again: the cause
    Step("wait", ms=20_000.0),
)


def _told(
    world: World, steps: tuple[Step, ...], baseline: str, candidate: PolicyRef = "proposed"
) -> tuple[Simulator, Simulator, Story]:
    c = world.simulator(candidate, candidate=True)
    b = world.simulator(baseline, candidate=False)
    return c, b, Story.told(world, steps, c, b)


def _flat(story: Story) -> Story:
    """The story with its truth frozen as it started: no leader or coordinator ever moves."""
    return dataclasses.replace(story, truths=(story.truths[0],) * len(story.truths))


def _without(story: Story, kinds: frozenset[str]) -> Story:
    """The story with its steps of ``kinds`` told as zero waits (the truth as it was)."""
    steps = tuple(Step("wait") if s.kind in kinds else s for s in story.steps)
    return dataclasses.replace(story, steps=steps)


def _only(allowed: Allowances, *names: str) -> bool:
    """Whether every allowance but ``names`` is zero."""
    return all(
        getattr(allowed, f.name) == 0 for f in dataclasses.fields(Allowances) if f.name not in names
    )


def test_a_redial_is_allowed_only_for_a_leader_that_returned() -> None:
    candidate, baseline, story = _told(PRODUCER, RETURN_STEPS, "java-today")
    assert story.returns(1, Purpose.DATA) == 1
    assert allowances(candidate, baseline, story) == Allowances(returned=1)
    check_fewer_sockets(candidate, baseline, story)
    flat = _flat(story)  # the same run, in a story where broker 1 never stopped leading
    assert flat.returns(1, Purpose.DATA) == 0
    assert allowances(candidate, baseline, flat) == Allowances()
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate opened 4, baseline 3$"):
        check_fewer_sockets(candidate, baseline, flat)


@pytest.mark.parametrize("baseline", ["java-described", "java-today", "aiokafka-today"])
def test_thrashing_is_caught_even_in_a_story_where_a_leader_returns(baseline: str) -> None:
    candidate, base, story = _told(PRODUCER, RETURN_STEPS, baseline, Thrashing)
    allowed = allowances(candidate, base, story)
    assert allowed.returned == 1  # the one return is allowed; the thrash is not
    assert established(candidate) > established(base) + allowed.opened + 1
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate opened"):
        check_fewer_sockets(candidate, base, story)


def test_no_returns_in_a_story_without_a_leader_or_coordinator_coming_back() -> None:
    truths = (Truth((1, 2), 3), Truth((2, 2), 3), Truth((2, 2), 1), Truth((1, 2), 1))
    steps = (
        Step("move_leader", 2, other=0),
        Step("wait", ms=700_000.0),
        Step("move_coordinator", 1),
        Step("restore_preferred"),
    )
    truths = (truths[0], truths[1], truths[1], truths[2], truths[3])
    story = Story(ClientKind.CONSUMER, False, 4, truths, steps)
    # broker 1 leaves partition 0 and leads it again: one data return; broker 3 loses the
    # coordinator for good: none; broker 1 becomes the coordinator for the first time: none.
    assert story.returns(1, Purpose.DATA) == 1
    assert story.returns(1, Purpose.COORDINATION) == 0
    assert story.returns(3, Purpose.COORDINATION) == 0
    assert story.ex_leaders == {1, 2}  # partition 0 left 1, then left 2
    assert story.ex_coordinators == {3}
    # Within 330 s of the end: data to brokers 2 and 1, and coordination to 3 (its socket
    # may still be busy) and to 1 -- four; in the first 330 s, three.
    assert story.times == (0.0, 0.0, 700_000.0, 700_000.0, 700_000.0)
    assert (story.peak_need, story.budget_binds) == (4, False)
    assert dataclasses.replace(story, budget=3).budget_binds
    assert _flat(story).returns(1, Purpose.DATA) == 0
    assert _flat(story).ex_leaders == _flat(story).ex_coordinators == frozenset()


def test_a_leader_returning_to_the_coordinator_is_a_return_for_data() -> None:
    # Broker 1 stays the coordinator while partition 0 leaves it and comes back: its
    # coordination connection stays needed, its data connection does not.
    truths = (Truth((1,), 1), Truth((2,), 1), Truth((1,), 1))
    steps = (Step("move_leader", 2, other=0), Step("restore_preferred"))
    story = Story(ClientKind.CONSUMER, False, None, truths, steps)
    assert story.returns(1, Purpose.DATA) == 1
    assert story.returns(1, Purpose.COORDINATION) == 0


def test_a_stale_coordinator_is_allowed_only_where_the_coordinator_moved_away() -> None:
    candidate, baseline, story = _told(STALE_LOOKUP, STALE_LOOKUP_STEPS, "java-today")
    assert allowances(candidate, baseline, story) == Allowances(stale_coordinators=1)
    check_fewer_sockets(candidate, baseline, story)
    assert allowances(candidate, baseline, _flat(story)) == Allowances()
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate opened 4, baseline 3$"):
        check_fewer_sockets(candidate, baseline, _flat(story))


def test_a_stale_leader_is_allowed_only_where_a_leader_moved_away() -> None:
    candidate, baseline, story = _told(STALE_LEADER_WORLD, STALE_LEADER_STEPS, "aiokafka-today")
    assert allowances(candidate, baseline, story) == Allowances(stale_held=1, stale_leaders=1)
    check_fewer_sockets(candidate, baseline, story)
    assert allowances(candidate, baseline, _flat(story)) == Allowances()
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate holds 2, baseline 1$"):
        check_fewer_sockets(candidate, baseline, _flat(story))


def test_the_refresh_socket_and_lost_sockets_are_allowed_only_after_a_failure() -> None:
    candidate, baseline, story = _told(REFRESH_WORLD, REFRESH_STEPS, "java-today")
    allowed = allowances(candidate, baseline, story)
    assert allowed.refresh == 1 and allowed.lost > 0 and _only(allowed, "refresh", "lost")
    check_fewer_sockets(candidate, baseline, story)
    calm = _without(story, FAILURES)  # broker 1 never went down (told so; the truth stays)
    assert calm.failures == 0
    assert allowances(candidate, baseline, calm) == Allowances()
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate holds 3, baseline 2$"):
        check_fewer_sockets(candidate, baseline, calm)


def test_lost_sockets_are_bounded_by_the_failures() -> None:
    steps = (Step("wait", ms=50.0), Step("drop_connections", 1), Step("wait", ms=50.0))
    candidate, baseline, story = _told(CONSUMER, steps, "java-today")
    allowed = allowances(candidate, baseline, story)
    assert allowed.lost == 1  # the data socket to broker 1 (the coordinator is broker 2)
    assert allowances(candidate, baseline, _without(story, FAILURES)).lost == 0


def test_endpoint_changes_are_allowed_only_for_a_broker_that_moved() -> None:
    # The metadata refresh at 300 s tells the candidate of the move: its data socket to the
    # old address drains its held fetch, then closes, and broker 1 is dialled at its new one.
    moving = (Step("wait", ms=50.0), Step("move_endpoint", 1, other=1), Step("wait", ms=299_951.0))
    candidate, baseline, story = _told(CONSUMER, moving, "java-today")
    assert allowances(candidate, baseline, story) == Allowances(draining=1)
    assert allowances(candidate, baseline, _without(story, frozenset({"move_endpoint"}))) == (
        Allowances()
    )
    Step("wait", ms=100.0).apply(candidate)
    Step("wait", ms=100.0).apply(baseline)
    story = story.then(Step("wait", ms=100.0), candidate.cluster)
    assert allowances(candidate, baseline, story) == Allowances(moved=1)
    check_fewer_sockets(candidate, baseline, story)  # java-today keeps its old socket
    still = _without(story, frozenset({"move_endpoint"}))
    assert allowances(candidate, baseline, still) == Allowances()
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate opened 4, baseline 3$"):
        check_fewer_sockets(candidate, baseline, still)


def test_an_adopted_socket_is_allowed_only_where_brokers_confirm_their_id() -> None:
    world = dataclasses.replace(CONSUMER, confirms_identity=True)
    # 0.4 ms: the bootstrap exchange, then the identity check's round trip (0.1 ms a hop).
    candidate, baseline, story = _told(world, (Step("wait", ms=0.4),), "java-today")
    assert allowances(candidate, baseline, story) == Allowances(adopted=1)
    no_check = dataclasses.replace(story, adoption=False)
    assert allowances(candidate, baseline, no_check) == Allowances()


# --- budgets -----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [3, 6])
def test_thrashing_is_caught_under_a_budget_that_does_not_bind(budget: int) -> None:
    world = dataclasses.replace(CONSUMER, max_connections=budget)  # the work needs 2
    steps = (Step("wait", ms=30_000.0),)
    candidate, baseline, story = _told(world, steps, "java-today", Thrashing)
    assert not story.budget_binds
    with pytest.raises(AssertionError, match=NEVER_MORE + r": candidate opened"):
        check_fewer_sockets(candidate, baseline, story)
    candidate, baseline, story = _told(world, steps, "java-today")
    check_fewer_sockets(candidate, baseline, story)


def test_a_budget_below_the_work_is_held_to_one_handshake_per_request() -> None:
    world = dataclasses.replace(CONSUMER, leaders=(1, 3), max_connections=2)  # needs 3
    candidate, baseline, story = _told(world, (Step("wait", ms=30_000.0),), "java-today")
    assert story.budget_binds
    assert established(candidate) > 4 * established(baseline)  # it thrashes, as KIP (e) says
    assert established(candidate) <= established(baseline) + broker_requests(baseline)
    check_fewer_sockets(candidate, baseline, story)
