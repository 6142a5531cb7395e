"""The one list of the proposal's stated costs (``connmgr.costs.STATED_COSTS``): well formed,
measured by the benchmark grid, matched exactly by the comparison (up to the stated excess,
on its scenario, baseline and metric only), and the README's sentence on where the proposal
opens more is the list's. The scenario tests hold each excess exactly
(``tests/test_scenarios.py``); ``tests/bench/test_stated_costs.py`` runs the comparison."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from connmgr.costs import (
    KIND,
    STATED_COSTS,
    StatedCost,
    covering,
    opens_more_sentence,
    stated_excess,
)
from connmgr.policies import BASELINES
from connmgr.sim import SCENARIOS
from connmgr_evidence.bench.grid import DEFAULT_GRID, load_grid
from connmgr_evidence.bench.report import stated
from connmgr_evidence.bench.report.metrics import METRICS, RULED_METRICS
from connmgr_evidence.bench.report.summaries import BaselineHeadline, Regression
from connmgr_evidence.bench.results.rows import point_text
from connmgr_evidence.bench.results.schema import Kind
from connmgr_evidence.cli import bench_status as _bench_status

README = Path(__file__).resolve().parents[1] / "README.md"
REBALANCE = next(c for c in STATED_COSTS if (c.scenario, c.metric) == ("rebalance", "opened"))


def regression(
    point: str = "rebalance[]",
    baseline: str = "java-today",
    metric: str = "opened",
    proposed: float = 13.0,
    baseline_value: float = 12.0,
    kind: str = "sim",
) -> Regression:
    return Regression(
        kind,
        point.split("[")[0],
        point,
        baseline,
        metric,
        proposed,
        baseline_value,
        proposed / baseline_value,
        "proposed median above baseline median (sockets: exact)",
    )


def test_every_stated_cost_names_a_scenario_baseline_and_metric_that_exist_once() -> None:
    keys = [(c.scenario, c.baseline, c.metric) for c in STATED_COSTS]
    assert len(keys) == len(set(keys))
    for cost in STATED_COSTS:
        assert cost.scenario in SCENARIOS, cost
        assert cost.baseline in BASELINES, cost
        assert cost.metric in METRICS, cost
        assert cost.point == point_text(cost.scenario, {})
        assert cost.reason.strip(), cost
    assert Kind.SIM.value == KIND


def test_the_full_grid_measures_every_stated_cost() -> None:
    # A cost stated where the benchmark never looks could go stale unseen.
    grid = load_grid(DEFAULT_GRID)
    points = {point_text(p.scenario, p.params) for p in grid.sim_points}
    assert {c.point for c in STATED_COSTS} <= points
    assert {c.baseline for c in STATED_COSTS} <= set(grid.policies)


def test_a_stated_cost_must_be_a_cost_on_a_known_metric() -> None:
    with pytest.raises(ValueError, match="no cost"):
        StatedCost("rebalance", "java-today", "opened", 0, "none")
    with pytest.raises(ValueError, match="stated on one of"):
        StatedCost("rebalance", "java-today", "peak", 1, "not a metric a cost is stated on")


def test_a_stated_cost_covers_its_point_baseline_and_metric_up_to_its_excess() -> None:
    cost = REBALANCE
    assert cost.excess == 1
    assert covering("sim", "rebalance[]", "java-today", "opened", 13, 12) == cost
    assert covering("sim", "rebalance[]", "java-today", "opened", 12.5, 12) == cost
    # One more than stated, another baseline, metric, kind or point: not covered.
    assert covering("sim", "rebalance[]", "java-today", "opened", 14, 12) is None
    assert covering("sim", "rebalance[]", "aiokafka-today", "opened", 13, 12) is None
    assert covering("sim", "rebalance[]", "java-today", "peak", 13, 12) is None
    assert covering("real", "rebalance[]", "java-today", "opened", 13, 12) is None
    assert covering("sim", "rebalance[brokers=3]", "java-today", "opened", 13, 12) is None
    assert covering("sim", "reassignment[]", "java-today", "opened", 13, 12) is None
    assert stated_excess("rebalance", "java-today", "opened") == 1
    assert stated_excess("rebalance", "aiokafka-today", "opened") == 0


def test_the_comparison_sets_stated_costs_apart_and_only_the_rest_fail_the_job() -> None:
    within = regression()
    beyond = regression(point="ip-change[]", proposed=24.0, baseline_value=16.0)
    unnamed = regression(baseline="java-described")
    excused, rest = stated.split([within, beyond, unnamed])
    assert excused == (within,)
    assert rest == (beyond, unnamed)
    assert _bench_status(stated.split([within])[1], []) == 0
    assert _bench_status(rest, []) == 1
    assert _bench_status((), ["a mutant was not caught"]) == 1


def test_the_headline_counts_only_points_with_a_regression() -> None:
    def headline(kind: str, baseline: str, regressed: int) -> BaselineHeadline:
        none = dict.fromkeys(
            ("opened_ratio", "peak_ratio", "peak_ratio_worst", "steady_ratio"), None
        )
        return BaselineHeadline(
            kind=kind,
            baseline=baseline,
            points=9,
            **none,
            steady_ratio_worst=None,
            ttfa_ms_ratio=None,
            ttfc_ms_ratio=None,
            throughput_rps_ratio=None,
            socket_s_per_h_ratio=None,
            handshakes_per_h_ratio=None,
            regressed_points=regressed,
        )

    # rebalance[] against java-today: one stated flag, and one flag beyond any statement.
    stated_only = regression()
    mixed = [
        regression(point="seed-consumer[]"),
        regression(point="seed-consumer[]", metric="peak"),
    ]
    flagged = [stated_only, *mixed]
    _, rest = stated.split(flagged)
    got = stated.headline_without_stated(
        [headline("sim", "java-today", 2), headline("sim", "aiokafka-today", 0)], flagged, rest
    )
    assert [h.regressed_points for h in got] == [1, 0]


def test_the_stated_costs_table_measures_each_cost_and_says_where_it_stands() -> None:
    def pair(baseline: str, opened: tuple[float, float], shakes: tuple[float, float]) -> dict:
        return {
            "kind": "sim",
            "point": "rebalance[]",
            "baseline": baseline,
            "opened_proposed": opened[0],
            "opened_baseline": opened[1],
            "handshakes_per_h_proposed": shakes[0],
            "handshakes_per_h_baseline": shakes[1],
        }

    rows = stated.stated_rows([pair("java-today", (14, 12), (12, 12))])
    assert [(r["scenario"], r["baseline"], r["metric"]) for r in rows] == [
        (c.scenario, c.baseline, c.metric) for c in STATED_COSTS
    ]
    by = {(r["scenario"], r["metric"]): r for r in rows if r["baseline"] == "java-today"}
    assert by[("rebalance", "opened")]["status"] == stated.ABOVE
    assert by[("rebalance", "opened")]["excess"] == 2
    assert by[("rebalance", "handshakes_per_h")]["status"] == stated.BELOW
    # A cost stated on a point the comparison does not hold is shown as not run.
    elsewhere = StatedCost("reassignment", "java-today", "opened", 1, "a point not run here")
    unrun = stated.stated_rows([pair("java-today", (14, 12), (12, 12))], (elsewhere,))
    assert [r["status"] for r in unrun] == [stated.NOT_RUN]
    again = stated.stated_rows([pair("java-today", (13, 12), (13, 12))])
    assert {r["status"] for r in again if r["scenario"] == "rebalance"} == {stated.AS_STATED}
    assert {r["status"] for r in rows} <= set(stated.STATUSES)
    # Only a ruled metric can be a flagged difference; the others are shown, never excused.
    assert {c.metric for c in STATED_COSTS} - set(RULED_METRICS) == {"handshakes_per_h"}


def test_the_readme_names_the_scenarios_of_the_list() -> None:
    text = README.read_text()
    match = re.search(r"<!-- stated-costs -->(.*?)<!-- /stated-costs -->", text, re.S)
    assert match is not None, "README.md: no <!-- stated-costs --> sentence"
    named = set(re.findall(r"`([\w-]+)`", match.group(1)))
    assert named == {c.scenario for c in STATED_COSTS if c.metric == "opened"}
    assert match.group(1) == opens_more_sentence(), (
        "README.md's stated-costs sentence differs from connmgr.costs.opens_more_sentence()"
    )
