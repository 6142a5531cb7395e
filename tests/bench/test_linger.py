"""The linger stage: its plan, its runs, the table built from them and the plot."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from connmgr.errors import ConfigError
from connmgr_evidence.bench.grid import DEFAULT_GRID, GridError, load_grid, parse_entry
from connmgr_evidence.bench.report.plots import colour
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.results.schema import ResultsError
from connmgr_evidence.bench.stages.linger import (
    LingerPoint,
    linger_points,
    linger_table,
    linger_tradeoff,
    plan,
    read_linger,
    run_one,
    write_linger,
)
from plotcheck import (
    check_png,
    figures_drawn,
    labelled,
    legends_over_data,
    overlapping_texts,
    repeated_labels,
    visible_axes,
)

SMALL: dict[str, Any] = {
    "scenarios": ["k8s-endpoint-change", "seed-producer bootstrap_offset=0"],
    "values_ms": [0, 3000, 540000],
    "baselines": ["java-today", "aiokafka-today"],
    "duration_ms": 3_600_000,
    "repeats": 2,
    "seed": 0,
}


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    raw = tmp_path_factory.mktemp("raw")
    rows = [run_one(run) for run in plan(SMALL)]
    write_linger(SMALL, new_meta("test"), rows, raw)
    data = read_linger(raw)
    assert data is not None
    return data


def test_the_plan_runs_every_value_and_baseline_per_scenario_and_repeat() -> None:
    runs = plan(SMALL)
    assert len(runs) == 2 * 2 * (3 + 2)
    assert {r.linger_ms for r in runs if r.policy == "proposed"} == {0, 3000, 540000}
    assert {r.linger_ms for r in runs if r.policy != "proposed"} == {None}
    assert {r.seed for r in runs} == {0, 1}
    assert all(r.params["duration_ms"] == "3600000" for r in runs)
    assert runs[-1].params["bootstrap_offset"] == "0"


def test_entries_are_a_scenario_and_key_value_words() -> None:
    assert parse_entry("big-producer brokers=100 leaders=4") == (
        "big-producer",
        {"brokers": "100", "leaders": "4"},
    )
    with pytest.raises(ConfigError, match="'brokers' is not key=value"):
        parse_entry("big-producer brokers")


def test_a_longer_linger_holds_the_moved_broker_longer(found: dict[str, Any]) -> None:
    """k8s-endpoint-change: while broker 2 restarts, the group coordinator moves to broker 3
    and the consumer dials 3 for it; when 2 is back the coordinator returns there and the
    connection to 3 is unneeded: it closes after linger_ms of quiet (at 540 s, the idle
    expiry of 9 minutes closes it first), so socket-seconds grow with the linger while no
    handshake is saved (the coordinator never moves to 3 again): one side of the trade-off
    only."""
    hour = {
        p.linger_ms: p
        for p in linger_points(found)
        if p.scenario == "k8s-endpoint-change" and p.policy == "proposed"
    }
    assert hour[0].socket_s_per_h < hour[3000].socket_s_per_h < hour[540000].socket_s_per_h
    assert hour[0].handshakes_per_h == hour[540000].handshakes_per_h
    assert all(p.misrouted == 0 for p in linger_points(found))


def test_the_table_holds_the_medians_of_the_runs(found: dict[str, Any]) -> None:
    table = linger_table(found)
    rows = table.records()
    assert len(rows) == 2 * (3 + 2)
    for row in rows:
        runs = [
            r
            for r in found["runs"]
            if (r["scenario"], r["linger_ms"]) == (row["scenario"], row["linger_ms"])
            and row["setting"].startswith(r["policy"])
        ]
        assert len(runs) == row["repeats"] == 2
        assert row["socket_s_per_h"] == statistics.median(r["socket_s_per_h"] for r in runs)
        assert row["handshakes_per_h"] == statistics.median(r["handshakes_per_h"] for r in runs)
    assert [r["setting"] for r in rows[:5]] == [
        "proposed@0ms",
        "proposed@3000ms",
        "proposed@540000ms",
        "aiokafka-today",
        "java-today",
    ]


def pairs(fig: Any) -> list[tuple[Any, Any]]:
    """The plot's (socket-seconds, handshakes) axes per scenario: the socket-seconds panels
    of a row of scenarios above their handshakes panels."""
    axes = visible_axes(fig)
    tops = [ax for ax in axes if ax.get_title()]
    bottoms = [ax for ax in axes if not ax.get_title()]
    assert len(tops) == len(bottoms)
    return list(zip(tops, bottoms, strict=True))


def test_the_plot_draws_a_pair_of_panels_per_scenario(
    found: dict[str, Any], tmp_path: Path
) -> None:
    with figures_drawn() as drawn:
        path = linger_tradeoff(linger_points(found), tmp_path / "linger.png")
    assert path is not None
    fig = drawn["linger"]
    panels = pairs(fig)
    assert [top.get_title() for top, _ in panels] == SMALL["scenarios"]
    rows = linger_table(found).records()
    for (top, bottom), scenario in zip(panels, SMALL["scenarios"], strict=True):
        # Against the linger: the proposal's curve through its values, each baseline a
        # horizontal line across the panel; socket-seconds above, handshakes below.
        mine = {r["setting"]: r for r in rows if r["scenario"] == scenario}
        for ax, metric in ((top, "socket_s_per_h"), (bottom, "handshakes_per_h")):
            lines = labelled(ax)
            assert list(lines) == ["proposed", "aiokafka-today", "java-today"]
            curve = [mine[f"proposed@{ms}ms"][metric] for ms in SMALL["values_ms"]]
            assert lines["proposed"] == (list(map(float, SMALL["values_ms"])), curve)
            for baseline in SMALL["baselines"]:
                value = mine[baseline][metric]
                assert lines[baseline] == ([0.0, 1.0], [value, value]), baseline
    # Two scenarios side by side; the proposal green, java-today brown, aiokafka-today blue.
    assert tuple(fig.get_size_inches()) == (10.0, 5.6)
    check_png(path, fig, [colour("proposed"), colour("java-today"), colour("aiokafka-today")])
    assert linger_tradeoff([], tmp_path / "none.png") is None


FULL_VALUES = [0, 100, 1000, 3000, 30000, 540000]

MEASURED = {
    # scenario: (the proposal's (socket-seconds, handshakes) at each of FULL_VALUES,
    #            aiokafka-today's, java-today's): a full run's medians.
    "rolling-restart": (
        [(24_833, 16), (24_833, 16), (24_834, 16), (24_836, 16), (24_863, 16), (24_893, 16)],
        (24_893, 16),
        (25_193, 16),
    ),
    "rolling-restart client=transactional": ([(21_240, 13)] * 6, (24_900, 16), (21_540, 13)),
    "rebalance": (
        [(17_401, 13), (17_402, 13), (17_409, 13), (17_425, 13), (17_641, 13), (23_041, 12)],
        (22_771, 14),
        (23_581, 12),
    ),
}
"""Three scenarios of a full run at the full grid's six values: where most values change
nothing, so that the old plot's labels of the curve's points printed over each other."""


def full_grid_points() -> list[LingerPoint]:
    points = []
    for scenario, (curve, aiokafka, java) in MEASURED.items():
        for ms, (socket_s, handshakes) in zip(FULL_VALUES, curve, strict=True):
            points.append(LingerPoint(scenario, "proposed", ms, socket_s, handshakes, 9, 4, 0, 2))
        for policy, (socket_s, handshakes) in (("aiokafka-today", aiokafka), ("java-today", java)):
            points.append(LingerPoint(scenario, policy, None, socket_s, handshakes, 9, 4, 0, 2))
    return points


def test_the_plot_is_legible_at_the_full_grids_values(tmp_path: Path) -> None:
    with figures_drawn() as drawn:
        path = linger_tradeoff(full_grid_points(), tmp_path / "linger.png")
    assert path is not None
    fig = drawn["linger"]
    # No text over another (the old plot labelled each point of the curve, and those of
    # values that change nothing printed over each other), the legend beside the panels.
    assert overlapping_texts(fig) == []
    assert legends_over_data(fig) == []
    assert repeated_labels(fig) == []
    for top, bottom in pairs(fig):
        for ax in (top, bottom):
            # The linger is logarithmic, with 0 placed a step before the smallest value.
            assert ax.get_xscale() == "symlog"
            assert ax.get_xlim()[0] < 0 < 100 < ax.get_xlim()[1]
        ticks = [t.get_text() for t in bottom.get_xticklabels()]
        assert ticks == ["0", "100 ms", "1 s", "3 s", "30 s", "540 s"]
        assert not any(t.get_visible() for t in top.get_xticklabels())
        _, aiokafka, java = MEASURED[top.get_title()]
        for baseline, (socket_s, handshakes) in {
            "aiokafka-today": aiokafka,
            "java-today": java,
        }.items():
            assert labelled(top)[baseline] == ([0.0, 1.0], [socket_s, socket_s])
            assert labelled(bottom)[baseline] == ([0.0, 1.0], [handshakes, handshakes])
    check_png(path, fig, [colour("proposed"), colour("java-today"), colour("aiokafka-today")])


def test_a_broken_file_is_named(tmp_path: Path) -> None:
    assert read_linger(tmp_path) is None
    (tmp_path / "linger.json").write_text('{"runs": []}')
    with pytest.raises(ResultsError, match=r"linger\.json: missing"):
        read_linger(tmp_path)


def test_the_grid_checks_its_linger_entries(tmp_path: Path) -> None:
    grid = load_grid()
    assert grid.get("linger", "duration_ms") >= 3_600_000
    assert 3000 in grid.get("linger", "values_ms")
    text = DEFAULT_GRID.read_text()
    bad = text.replace('"seed-producer", "seed-consumer", "txn', '"seed-producer nope", "txn')
    assert bad != text
    path = tmp_path / "grid.toml"
    path.write_text(bad)
    with pytest.raises(GridError, match=r"linger\.scenarios 'seed-producer nope'"):
        load_grid(path)
    path.write_text(text.replace('"seed-consumer", "txn', '"no-such", "txn'))
    with pytest.raises(GridError, match=r"linger\.scenarios 'no-such'"):
        load_grid(path)
