"""The life stage's report side (``connmgr_evidence.bench.stages.life``): medians, the ``real-life``
table,
the headline's real-life ratios and the life-costs rows, from a ``raw/life.json``; and the
grid's ``[life]`` section checked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.bench.grid import DEFAULT_GRID, GridError, load_grid
from connmgr_evidence.bench.report.page import headline_markdown
from connmgr_evidence.bench.report.tables import decision_table, headline_table, simulator_table
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.stages.life import (
    life_costs,
    life_headlines,
    plan,
    read_life,
    real_life_table,
    write_life,
)

SETTINGS = {
    "scenarios": ["big-producer brokers=3", "big-consumer brokers=3 rolling_restart=1"],
    "clients": ["proposed", "aiokafka"],
    "life_s": 60,
    "time_scale": 60,
    "records": 20,
    "repeats": 2,
    "concurrency": 4,
    "seed": 0,
}


def _run(scenario: str, client: str, repeat: int, sockets: float, shakes: float) -> dict[str, Any]:
    by_role = {"bootstrap": 0.0, "data": sockets, "coordination": 0.0}
    return {
        "scenario": scenario,
        "client": client,
        "repeat": repeat,
        "socket_s_per_h": sockets,
        "handshakes_per_h": shakes,
        **{f"socket_s_per_h_{r}": v for r, v in by_role.items()},
        **{f"handshakes_per_h_{r}": (shakes if r == "data" else 0.0) for r in by_role},
        "opened": 3,
        "steady": 3,
        "commit_failures": 0,
    }


@pytest.fixture
def found(tmp_path: Path) -> dict[str, Any]:
    p, c = SETTINGS["scenarios"]
    runs = [
        _run(p, "proposed", 0, 9000.0, 20.0),
        _run(p, "proposed", 1, 11000.0, 40.0),
        _run(p, "aiokafka", 0, 15000.0, 30.0),
        _run(p, "aiokafka", 1, 15000.0, 30.0),
        _run(c, "proposed", 0, 12000.0, 60.0),
        _run(c, "proposed", 1, 12000.0, 60.0),
        _run(c, "aiokafka", 0, 12000.0, 40.0),
        _run(c, "aiokafka", 1, 12000.0, 40.0),
    ]
    write_life(SETTINGS, new_meta("t"), runs, tmp_path)
    got = read_life(tmp_path)
    assert got is not None
    return got


def test_the_plan_runs_every_client_through_every_scenario_with_the_life_settings() -> None:
    runs = plan(SETTINGS)
    assert len(runs) == 2 * 2 * 2
    assert runs[-1].settings == {
        "brokers": "3",
        "rolling_restart": "1",
        "life_s": "60",
        "time_scale": "60",
        "records": "20",
        "seed": "1",
    }


def test_the_table_shows_medians_and_ratios_per_scenario_and_client(found: dict[str, Any]) -> None:
    rows = {(r["scenario"], r["client"]): r for r in real_life_table(found).records()}
    producer = rows[("big-producer brokers=3", "aiokafka")]
    assert producer["socket_s_per_h_ratio"] == pytest.approx(10000.0 / 15000.0)
    assert producer["handshakes_per_h_ratio"] == pytest.approx(30.0 / 30.0)
    assert rows[("big-producer brokers=3", "proposed")]["socket_s_per_h"] == 10000.0


def test_the_headline_has_the_median_ratio_over_scenarios_per_client(
    found: dict[str, Any],
) -> None:
    (row,) = life_headlines(found)
    assert (row.kind, row.baseline, row.points) == ("real-life", "aiokafka", 2)
    assert row.socket_s_per_h_ratio == pytest.approx((10000 / 15000 + 1.0) / 2)
    assert row.handshakes_per_h_ratio == pytest.approx((1.0 + 1.5) / 2)
    text = headline_markdown(headline_table([row]), decision_table(()), simulator_table(()))
    # The headline sentence carries the two ratios (and no socket counts: a life run's
    # horizon is seconds of start-up), the table row the same numbers.
    assert text.split("\n")[0] == (
        "- **real-life, against aiokafka** (2 points), median ratios proposed / baseline: "
        "socket-seconds per client-hour 0.8333, handshakes per client-hour 1.25; "
        "no regressed point(s)."
    )
    assert text.endswith("| real-life | aiokafka | 2 |" + " — |" * 8 + " 0.8333 | 1.25 | 0 |")


def test_life_costs_list_where_the_proposal_spends_more_with_the_roles(
    found: dict[str, Any],
) -> None:
    (cost,) = life_costs(found)
    assert cost["kind"] == "real-life"
    assert cost["scenario"] == "big-consumer brokers=3 rolling_restart=1"
    assert (cost["metric"], cost["excess"]) == ("handshakes_per_h", 20.0)
    assert cost["where"] == "data +20"


def _grid_with(tmp_path: Path, old: str, new: str) -> Path:
    text = DEFAULT_GRID.read_text()
    assert old in text
    path = tmp_path / "grid.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            'clients = ["proposed", "aiokafka", "java-4.4.0"',
            'clients = ["aiokafka"',
            "life.clients",
        ),
        ("life_s = 60", "life_s = 10", "more than half the life"),
        (
            '"big-producer brokers=3", "big-consumer',
            '"big-producer bogus=1", "big-consumer',
            "life",
        ),
    ],
)
def test_a_bad_life_section_is_a_grid_error(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(GridError, match=message):
        load_grid(_grid_with(tmp_path, old, new))


def test_the_shipped_life_section_runs_every_client_the_issue_names() -> None:
    for quick in (False, True):
        life = load_grid(quick=quick).values["life"]
        assert {"proposed", "aiokafka", "java-4.4.0", "librdkafka"} <= set(life["clients"])
        assert any("rolling_restart=1" in s for s in life["scenarios"])
        assert life["time_scale"] == 60
