"""The comparison's stated costs: the regressions that the proposal's stated costs
(:data:`connmgr.costs.STATED_COSTS`) explain, kept apart from the ones nothing explains.

A regression (:class:`~connmgr_evidence.bench.report.summaries.Regression`) is a stated cost when a
stated
cost covers it: same kind (``sim``), point (the named scenario at its defaults), baseline and
metric, and the proposal's median no more than the stated excess above the baseline's
(:meth:`connmgr.costs.StatedCost.covers`). Those are shown under "Stated costs" with their
reason; every other regression, one unit beyond a stated excess included, stays a
regression and fails ``connmgr bench``.

The ``stated-costs`` table has one row per stated cost, measured from the comparison's rows
(the ``comparison`` table's records or :meth:`PairSummary.record`): the report builds it
from its aggregates, the RFC from a report's ``comparison`` table
(:mod:`connmgr_evidence.bench.rfc`),
so a report written before the table existed still gives it. Nothing here needs Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from connmgr.costs import KIND, STATED_COSTS, StatedCost, covering
from connmgr_evidence.bench.report.metrics import PROPOSED
from connmgr_evidence.bench.report.summaries import BaselineHeadline, Regression
from connmgr_evidence.bench.report.table import Table, make_table, markdown_table
from connmgr_evidence.bench.results.record import Count, MaybeReal, Record, Text


@dataclass(frozen=True, slots=True)
class StatedCostRow(Record):
    """A row of the ``stated-costs`` table: one stated cost as this run measured it."""

    kind: Text
    scenario: Text
    point: Text
    baseline: Text
    metric: Text
    stated_excess: Count
    proposed: MaybeReal
    baseline_value: MaybeReal
    excess: MaybeReal
    status: Text
    reason: Text


STATED_COLUMNS = StatedCostRow.columns()

AS_STATED = "as stated"
BELOW = "below the stated excess"
ABOVE = "above the stated excess: a regression"
NOT_RUN = "not in this run"
STATUSES = (AS_STATED, BELOW, ABOVE, NOT_RUN)
"""A stated cost's ``status`` in a run: measured at its excess, under it (the scenario
tests, which hold it exactly, would fail), over it (listed under "Regressions" too), or its
point not run (``--quick`` runs fewer named scenarios)."""


def cost_of(
    regression: Regression, costs: Iterable[StatedCost] = STATED_COSTS
) -> StatedCost | None:
    """The stated cost that covers ``regression``, or None: it is a regression. Costs are
    the proposal's: another subject's regression
    (:data:`~connmgr_evidence.bench.report.metrics.PAIRS`) is
    never covered."""
    r = regression
    if r.subject != PROPOSED:
        return None
    return covering(r.kind, r.point, r.baseline, r.metric, r.proposed, r.baseline_value, costs)


def split(
    regressions: Iterable[Regression], costs: Sequence[StatedCost] = STATED_COSTS
) -> tuple[tuple[Regression, ...], tuple[Regression, ...]]:
    """(stated, regressions): those a stated cost covers and the rest, each in the order
    given."""
    stated: list[Regression] = []
    rest: list[Regression] = []
    for r in regressions:
        (stated if cost_of(r, costs) is not None else rest).append(r)
    return tuple(stated), tuple(rest)


def headline_without_stated(
    headline: Iterable[BaselineHeadline],
    flagged: Iterable[Regression],
    regressions: Iterable[Regression],
) -> list[BaselineHeadline]:
    """``headline`` with each (kind, baseline)'s ``regressed_points`` counting only the points
    with a regression (``regressions``), not those whose every flag (``flagged``) is a stated
    cost."""
    # The headline is the proposal's alone.
    left = {(r.kind, r.point, r.baseline) for r in regressions if r.subject == PROPOSED}
    stated_only = {(r.kind, r.point, r.baseline) for r in flagged if r.subject == PROPOSED}
    stated_only -= left
    out = []
    for h in headline:
        excused = sum(1 for k, _, b in stated_only if (k, b) == (h.kind, h.baseline))
        out.append(replace(h, regressed_points=h.regressed_points - excused) if excused else h)
    return out


def stated_rows(
    comparison: Iterable[Mapping[str, Any]], costs: Iterable[StatedCost] = STATED_COSTS
) -> list[dict[str, Any]]:
    """One row per stated cost, in the list's order, measured from ``comparison`` (records
    with ``kind``, ``point``, ``baseline`` and ``<metric>_proposed`` / ``_baseline``; those
    with a ``subject`` other than the proposal are left out, and a record without one, from
    a report written before the column, is the proposal's)."""
    by_pair = {
        (r["kind"], r["point"], r["baseline"]): r
        for r in comparison
        if r.get("subject", PROPOSED) == PROPOSED
    }
    rows = []
    for cost in costs:
        found = by_pair.get((KIND, cost.point, cost.baseline))
        mine = None if found is None else found.get(f"{cost.metric}_proposed")
        theirs = None if found is None else found.get(f"{cost.metric}_baseline")
        excess = None if mine is None or theirs is None else mine - theirs
        if excess is None:
            status = NOT_RUN
        elif excess > cost.excess:
            status = ABOVE
        elif excess < cost.excess:
            status = BELOW
        else:
            status = AS_STATED
        rows.append(
            {
                "kind": KIND,
                "scenario": cost.scenario,
                "point": cost.point,
                "baseline": cost.baseline,
                "metric": cost.metric,
                "stated_excess": cost.excess,
                "proposed": mine,
                "baseline_value": theirs,
                "excess": excess,
                "status": status,
                "reason": cost.reason,
            }
        )
    return rows


def stated_costs_table(comparison: Iterable[Mapping[str, Any]]) -> Table:
    """The ``stated-costs`` table (:func:`stated_rows`)."""
    return make_table(
        "stated-costs",
        "Stated costs",
        "Every stated cost of the proposal (connmgr.costs.STATED_COSTS: a named scenario at "
        "its defaults, one baseline, one metric), measured in this run: the medians, the "
        "`excess` proposed - baseline against `stated_excess`, and a `status` (as stated; "
        "below the stated excess; above it, which is a regression; not in this run). A "
        "regression a stated cost covers does not fail the job.",
        STATED_COLUMNS,
        stated_rows(comparison),
    )


def stated_markdown(table: Table, stated: Sequence[Regression]) -> str:
    """The "Stated costs" section: how many regressions they cover, then the table."""
    head = (
        f"**{len(stated)} flagged difference(s) are stated costs** within their stated excess "
        "(listed here, not under Regressions; they do not fail the job)."
        if stated
        else "No flagged difference is a stated cost in this run."
    )
    return f"{head} The stated costs, as measured in this run:\n\n{markdown_table(table)}"
