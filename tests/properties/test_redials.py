"""The cost of prompt close is counted, not excused: a connection the proposal closed as
unneeded and dialled again when its broker was needed again is allowed by *never more
sockets* -- once per return of that leader in the story, never more -- and reported by the
property stage as ``redials`` (:class:`connmgr.testing.evidence.AgreementRun`)."""

from __future__ import annotations

from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.testing.invariants import allowances
from connmgr.testing.machines import Step, Story, World, check_fewer_sockets, redialled

WORLD = World(
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


def test_a_leader_that_leaves_and_returns_after_the_linger_is_redialled() -> None:
    candidate = WORLD.simulator("proposed", candidate=True)
    baseline = WORLD.simulator("java-today", candidate=False)
    story = (
        Step("wait", ms=50.0),
        Step("move_leader", 3, other=0),  # broker 1 leads nothing now (seen at the next send)
        Step("wait", ms=15_000.0),  # past the 3 s linger: its socket is closed
        Step("move_leader", 1, other=0),  # and needed again
        Step("wait", ms=20_000.0),
    )
    told = Story.told(WORLD, story, candidate, baseline)
    assert redialled(candidate) == 1
    assert redialled(baseline) == 0  # java-today keeps its idle socket for 9 minutes
    assert told.returns(1, Purpose.DATA) == 1  # broker 1 led again: the story's cause
    assert allowances(candidate, baseline, told).returned == 1
    check_fewer_sockets(candidate, baseline, told)  # allowed, and counted above
