"""What the deep profile found that the `ci` profile does not meet, kept as regressions.

The main job's property stage (random examples, up to 50 steps) found *never more sockets*
failing against `java-described` and `aiokafka-today` in run 20261124T055851Z (report
`property-runs` table). Both stories have one shape: the group coordinator moves while the
two clients are at different points of their exchange, and moves back. In the story below
the proposed policy sends the bootstrap exchange's any-node requests one after another on
its one bootstrap connection (Metadata, Metadata, FindCoordinator at 0.1, 0.2, 0.3 ms)
where `java-described` sends them together at 0.1 ms, so it learns the coordinator after
the move: it dials broker 6, and dials broker 1 when the coordinator returns. The baseline
asked before the move, never saw it, and its one coordinator socket is right again. The
candidate's extra socket is not idle waste -- it followed the cluster -- and it closes
within its linger (*tight* holds), but the comparison in
:func:`connmgr.testing.machines.check_fewer_sockets` has no allowance for a placement one
client saw and the other did not, so it fails. Pinned as a strict xfail until that
allowance (which needs the simulator to record each client's view of the
placements) is written and argued; see the RFC's Costs section.
"""

from __future__ import annotations

import pytest
from connmgr.core.config import ClientKind
from connmgr.core.identity import Purpose
from connmgr.sim.simulator import Simulator
from connmgr.testing.machines import Step, World, check_fewer_sockets

WORLD = World(
    brokers=5,
    client=ClientKind.CONSUMER,
    leaders=(5, 1, 1),
    coordinator=1,
    shared=False,
    idle_disabled=False,
    max_connections=None,
    confirms_identity=False,
    bootstrap_count=1,
    bootstrap_offset=0,
    seed=0,
)
STEPS = (
    Step("add_broker", 6),
    Step("add_broker", 7),
    Step("broker_down", 4),
    Step("broker_down", 7),
    Step("wait", ms=0.2),
    Step("move_coordinator", 6),
    Step("wait", ms=0.2),
    Step("restore_preferred"),  # the coordinator goes back to broker 1
    Step("wait", ms=50.0),
)


def _coordinators_dialled(sim: Simulator) -> list[int | None]:
    return [
        e.key.broker_id
        for e in sim.timeline
        if e.kind == "connect" and e.key.purpose is Purpose.COORDINATION
    ]


def _replay() -> tuple[Simulator, Simulator]:
    candidate = WORLD.simulator("proposed", candidate=True)
    baseline = WORLD.simulator("java-described", candidate=False)
    for step in STEPS:
        step.apply(candidate)
        step.apply(baseline)
    return candidate, baseline


def test_the_story_is_a_coordinator_only_the_candidate_saw() -> None:
    # Why the count differs: the proposal followed the coordinator to broker 6 and back to
    # broker 1; the baseline found broker 1 before the move and stayed.
    candidate, baseline = _replay()
    assert _coordinators_dialled(candidate) == [6, 1]
    assert _coordinators_dialled(baseline) == [1]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="never more sockets has no allowance for a coordinator placement only the "
    "candidate saw (it opens 5, java-described 4): found by the deep profile",
)
def test_a_coordinator_that_moves_and_returns_costs_no_extra_socket() -> None:
    candidate, baseline = _replay()
    check_fewer_sockets(candidate, baseline)
