"""The socket budget below the work thrashes (KIP (e), rejected): measured, stated exactly.

A consumer of ``big-consumer`` on 3 brokers needs 4 connections (3 leaders and its group
coordinator). With a budget of 4 or more nothing changes; one below, every dial at the cap
closes a quiet connection the work needs, which is dialled again at the next request: over
one simulated hour the handshakes go from 5 to thousands. The figures are pinned exactly, as
``connmgr.costs.STATED_COSTS`` pins the proposal's other costs (held by
``tests/test_scenarios.py``): the test fails if they change either way, and
proposal/kip-e-socket-budget.md cites them from here.
"""

from __future__ import annotations

import pytest

from connmgr.sim.run import prepare, run_spec

NEEDED = 4
"""big-consumer at 3 brokers: three leaders and the group coordinator."""

MEASURED = {None: (5, 4), 4: (5, 4), 3: (6719, 3), 2: (16075, 2)}
"""max_connections -> (handshakes in the hour, peak sockets), seed 0, one simulated hour."""


def _run(budget: int | None) -> tuple[int, int, float]:
    settings = {"brokers": "3", "seed": "0"}
    if budget is not None:
        settings["max_connections"] = str(budget)
    spec, policy_settings, seed = prepare("big-consumer", settings)
    result = run_spec(spec, "proposed", policy_settings, seed)
    life = result.counts.life
    return result.counts.opened, result.counts.peak, sum(life.per_hour(life.handshakes).values())


@pytest.mark.parametrize("budget", list(MEASURED), ids=lambda b: f"budget={b}")
def test_a_budget_below_the_work_thrashes_by_exactly_this_much(budget: int | None) -> None:
    opened, peak, per_hour = _run(budget)
    assert (opened, peak) == MEASURED[budget]
    assert per_hour == pytest.approx(opened)  # one simulated hour: per hour = counted
    # The budget always holds (the property suite's safety invariant says so everywhere).
    assert budget is None or peak <= budget
    if budget is None or budget >= NEEDED:
        assert opened == MEASURED[None][0]
    else:
        assert opened > 1000 * MEASURED[None][0]
