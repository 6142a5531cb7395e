"""The benchmark grid file: read, checked, expanded; bad grids fail naming file and key."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.bench.grid import DEFAULT_GRID, GridError, java_version, load_grid
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.results.schema import NAMES, check_row
from connmgr_evidence.bench.stages import stages
from connmgr_evidence.bench.stages.simulate import sim_rows
from connmgr_evidence.cli import main

SMALL = """
[sim]
scenarios = ["big-producer"]
policies = ["proposed", "java-today"]
brokers = [3, 30]
bootstrap_size = [1]
leaders = [3]
partitions = [0]
topics = [1]
coordinator = ["separate", "shared"]
idle = ["default"]
duration_ms = 60000
repeats = 2
seed = 5
named = ["seed-producer"]
workers = 2

[real]
scenarios = ["big-producer"]
clients = ["proposed", "aiokafka"]
brokers = [3]
coordinator = ["auto"]
rtt_ms = [0]
records = 10
repeats = 1
seed = 0

[throughput]
brokers = 3
records = 100
rounds = 1
rtt_ms = [0]
linger_ms = 5

[micro]
rounds = 1

[sweep]
sizes = [10]
seed = 0

[linger]
scenarios = ["seed-producer"]
values_ms = [0, 3000]
baselines = ["java-today"]
duration_ms = 60000
repeats = 1
seed = 0

[fleet]
clients = 10
brokers = 5
restarts = 1
down_ms = 30000
bucket_ms = 60000
seed = 0

[tls]
brokers = 3
rtt_ms = [0, 20]
connections = 2
starts = 1
java = 0

[life]
scenarios = ["big-producer brokers=3"]
clients = ["proposed", "aiokafka"]
life_s = 10
time_scale = 60
records = 10
repeats = 1
concurrency = 2
seed = 0

[properties]
baselines = ["java-today"]
examples = 5
steps = 5
mutants = ["NeverClose"]
mutant_examples = 100
shrink = "until readable"
workers = 1

[quick]
"sim.brokers" = [3]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_the_shipped_grid_covers_what_the_issue_asks() -> None:
    grid = load_grid()
    brokers = {p.params.get("brokers") for p in grid.sim_points}
    assert {"3", "10000"} <= brokers
    assert max(int(p.params["brokers"]) for p in grid.real_points) == 1000
    # Issue 18's 30-minute full job: two RTTs (the latency table's 0 and 20 ms) and two
    # sizes for the real clients; the simulated grid covers every size.
    assert {p.rtt_ms for p in grid.real_points} == {0.0, 20.0}
    assert {"2.1.0", "4.4.0"} <= {java_version(c) for c in grid.clients}
    assert {p.params.get("client_idle_disabled") for p in grid.sim_points} >= {"0", "1"}
    assert {p.params.get("coordinator") for p in grid.sim_points} >= {"shared", "separate"}
    # Issue 18: every sweep run is a simulated hour and the full job fits 30 minutes on 2
    # cores beside the fleet, life and TLS stages, so the largest sweep is 10,000 points
    # (issue 6's 100,000 took 19 minutes of two cores at that horizon, 20,000 about 9; a
    # grid with a bigger size still runs it).
    assert max(grid.get("sweep", "sizes")) >= 10_000
    # The property stage searches more than the default suite and at the deep profile's
    # step count; the deep profile's 1,000 examples run on their own (docs/property-suite.md).
    from hypothesis import settings

    deep = settings.get_profile("deep")
    assert grid.get("properties", "steps") == deep.stateful_step_count
    assert 100 <= grid.get("properties", "examples") <= deep.max_examples
    from connmgr.testing.evidence import BASELINES, MUTANTS

    assert grid.get("properties", "baselines") == list(BASELINES)
    assert sorted(grid.get("properties", "mutants")) == sorted(MUTANTS)
    quick = load_grid(quick=True)
    assert len(quick.sim_points) < len(grid.sim_points)
    assert quick.get("sweep", "sizes") != grid.get("sweep", "sizes")


def test_the_shipped_grid_runs_the_java_pair_in_full_and_quick() -> None:
    """The patched kafka-clients and the release it patches are real clients of both grids,
    the pair compared run by run (a patched client without its release is refused)."""
    for quick in (False, True):
        grid = load_grid(quick=quick)
        assert {"4.3.1", "4.3.1-patched"} <= {java_version(c) for c in grid.clients}


def test_the_java_pair_runs_one_after_the_other_each_taking_turns_first() -> None:
    from connmgr_evidence.bench.grid import real_jobs

    grid = load_grid()
    jobs = real_jobs(grid)
    repeats = grid.get("real", "repeats")
    assert repeats >= 2
    assert len(jobs) == len(grid.real_points) * repeats * len(grid.clients)
    stock, patched = "java-4.3.1", "java-4.3.1-patched"
    for point in grid.real_points:
        for r in range(repeats):
            order = [c for p, c, rep in jobs if (p, rep) == (point, r)]
            assert sorted(order) == sorted(grid.clients)
            i, j = order.index(stock), order.index(patched)
            assert abs(i - j) == 1
            assert (i < j) == (r % 2 == 0), (point.point, r, order)
            # Every other client keeps its place in the grid's order.
            others = [c for c in order if c not in (stock, patched)]
            assert others == [c for c in grid.clients if c not in (stock, patched)]


def test_the_shipped_grid_runs_librdkafka_in_full_and_quick() -> None:
    """librdkafka (confluent-kafka) is a real baseline at every real point of both grids."""
    for quick in (False, True):
        grid = load_grid(quick=quick)
        assert "librdkafka" in grid.clients and java_version("librdkafka") is None


def test_axes_expand_to_their_cross_product_and_impossible_points_are_listed(
    tmp_path: Path,
) -> None:
    grid = load_grid(write(tmp_path, SMALL))
    # 2 broker counts x 2 placements, minus "separate" on 3 brokers that all lead, + 1 named.
    assert len(grid.sim_points) == 4
    assert len(grid.skipped) == 1 and "separate is impossible" in grid.skipped[0]
    assert len({p.point for p in grid.sim_points}) == 4
    quick = load_grid(write(tmp_path, SMALL), quick=True)
    assert {p.params.get("brokers") for p in quick.sim_points} == {"3", None}


def test_sim_rows_follow_the_schema_pair_by_point_and_vary_the_seed(tmp_path: Path) -> None:
    grid = load_grid(write(tmp_path, SMALL))
    rows = sim_rows(grid, new_meta("t"), show=False)
    assert len(rows) == len(grid.sim_points) * 2 * 2
    for row in rows:
        check_row(row)
        assert set(row) == set(NAMES)
    assert {r["seed"] for r in rows} == {5, 6}
    points = {(r["point"], r["repeat"]) for r in rows}
    for point, repeat in points:
        policies = sorted(r["policy"] for r in rows if (r["point"], r["repeat"]) == (point, repeat))
        assert policies == ["java-today", "proposed"]


def test_sim_rows_are_the_same_on_one_process_and_on_two(tmp_path: Path) -> None:
    # The pool changes where a run executes, never its row: seeded, virtual time, in order.
    two = load_grid(write(tmp_path, SMALL))
    one = load_grid(write(tmp_path, SMALL.replace("workers = 2", "workers = 1")))
    assert two.get("sim", "workers") == 2 and one.get("sim", "workers") == 1
    meta = new_meta("t")

    def counted(grid: Any) -> list[dict[str, Any]]:
        # wall_s is the one measured column (the simulator's own run time).
        return [
            {k: v for k, v in r.items() if k != "wall_s"} for r in sim_rows(grid, meta, show=False)
        ]

    assert counted(two) == counted(one)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda t: t.replace("brokers = [3, 30]", "brokers = []"),
            r"sim\.brokers must be a non-empty list",
        ),
        (
            lambda t: t.replace("brokers = [3, 30]", 'brokers = [3, "x"]'),
            r"sim\.brokers = 'x' is not int",
        ),
        (
            lambda t: t.replace("brokers = [3, 30]", "brokers = [0]"),
            r"sim\.brokers = \[0\] must be >= 1",
        ),
        (
            lambda t: t.replace('"java-today"]', '"java-yesterday"]'),
            r"sim\.policies has unknown \['java-yesterday'\]",
        ),
        (
            lambda t: t.replace('clients = ["proposed", "aiokafka"]', 'clients = ["aiokafka"]'),
            r"must include proposed",
        ),
        (
            lambda t: t.replace(
                'clients = ["proposed", "aiokafka"]', 'clients = ["proposed", "java-latest"]'
            ),
            r"real\.clients has unknown",
        ),
        (
            lambda t: t.replace(
                'clients = ["proposed", "aiokafka"]',
                'clients = ["proposed", "java-4.4.0-patched"]',
            ),
            r"real\.clients has unknown \['java-4\.4\.0-patched'\]",
        ),
        (
            lambda t: t.replace(
                'clients = ["proposed", "aiokafka"]',
                'clients = ["proposed", "java-4.3.1-patched"]',
            ),
            r"real\.clients has java-4\.3\.1-patched without java-4\.3\.1",
        ),
        (lambda t: t.replace("[micro]\nrounds = 1\n", ""), r"missing section \[micro\]"),
        (lambda t: t + "\n[extra]\nx = 1\n", r"unknown sections \['extra'\]"),
        (
            lambda t: t.replace("repeats = 2", "repeats = 2\nrepeat = 3"),
            r"\[sim\] has unknown keys \['repeat'\]",
        ),
        (
            lambda t: t.replace('"sim.brokers"', '"sim.nodes"'),
            r"\[quick\] overrides unknown key 'sim.nodes'",
        ),
        (lambda t: t.replace("[sim]", "[sim"), r"not valid TOML"),
        (
            lambda t: t.replace("rtt_ms = [0, 20]\nconnections", "rtt_ms = [5, 20]\nconnections"),
            r"tls\.rtt_ms must include 0 and one more RTT",
        ),
        (lambda t: t.replace("java = 0", "java = 2"), r"tls\.java must be 0 or 1"),
        (
            lambda t: t.replace("rtt_ms = [0]\nrecords", "rtt_ms = [0, 0]\nrecords"),
            r"repeats a value",
        ),
        (
            lambda t: t.replace('mutants = ["NeverClose"]', 'mutants = ["NeverOpen"]'),
            r"properties\.mutants has unknown \['NeverOpen'\]",
        ),
        (
            lambda t: t.replace(
                '[properties]\nbaselines = ["java-today"]', '[properties]\nbaselines = ["proposed"]'
            ),
            r"properties\.baselines has unknown \['proposed'\]",
        ),
        (
            lambda t: t.replace("workers = 1", "workers = 0"),
            r"properties\.workers = 0 must be >= 1",
        ),
        (
            lambda t: t.replace('shrink = "until readable"', 'shrink = "some"'),
            r"properties\.shrink has unknown \['some'\]; "
            r"choose from \['full', 'until readable', 'none'\]",
        ),
    ],
)
def test_bad_grids_fail_naming_the_file_and_the_key(
    tmp_path: Path, edit: Callable[[str], str], message: str
) -> None:
    path = write(tmp_path, edit(SMALL))
    with pytest.raises(GridError, match=message) as caught:
        load_grid(path, quick=True)
    assert str(path) in str(caught.value)


def test_a_grid_whose_every_point_is_impossible_is_an_empty_grid_error(tmp_path: Path) -> None:
    text = SMALL.replace('coordinator = ["separate", "shared"]', 'coordinator = ["separate"]')
    text = text.replace("brokers = [3, 30]", "brokers = [3]").replace(
        'named = ["seed-producer"]', "named = []"
    )
    text = text.replace('coordinator = ["auto"]', 'coordinator = ["separate"]')
    with pytest.raises(GridError, match="the grid is empty"):
        load_grid(write(tmp_path, text))


def test_cli_lists_the_grid_and_reports_a_missing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--list", "--grid", str(write(tmp_path, SMALL))]) == 0
    out = capsys.readouterr().out
    assert re.search(r"4 simulated points x 2 policies x 2 repeats = 16 simulations", out)
    assert out.count("\nsim  ") == 4 and "skip sim big-producer" in out
    first = out.splitlines()[0]
    assert first.startswith("stages: ")
    listed = [name.split(" (")[0] for name in first.removeprefix("stages: ").split(" → ")]
    listed[-1] = listed[-1].split(",")[0]
    assert listed == [s.name for s in stages()]
    assert main(["bench", "--list", "--grid", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml: no such grid file" in capsys.readouterr().err


def test_default_grid_is_the_checkout_file() -> None:
    assert DEFAULT_GRID.name == "grid.toml" and DEFAULT_GRID.exists()


def test_a_report_names_the_checkout_grid_by_a_relative_path(tmp_path: Path) -> None:
    # A committed report must not carry the path of the machine it ran on; a grid outside
    # the checkout is named as given.
    assert load_grid().describe().startswith("grid benchmarks/grid.toml: ")
    outside = write(tmp_path, SMALL)
    assert load_grid(outside).describe().startswith(f"grid {outside}: ")
