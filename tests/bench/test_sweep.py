"""The sweep: the simulator in Spark tasks over a random grid.

One small sweep runs in Spark (the shared session); its rows must be rows of the results
schema, three per point, equal to the same points run here without Spark, route every
request right, and keep the RFC's promise: the proposed policy ends with no more sockets
than java-today on every point.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from connmgr.sim.run import prepare
from connmgr_evidence.bench.report.compare import result_files
from connmgr_evidence.bench.results import schema
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.stages import sweep

POINTS = 200
SEED = 23
"""Its first 200 points draw one parameter set twice (index 92 repeats an earlier point),
so the Spark path numbers a repeat."""

META = RunMeta(
    run_id="test-sweep",
    git_commit="0123abcd",
    versions=schema.json_text({"python": "3.11"}),
    machine=schema.json_text({"platform": "test", "cpus": 2}),
    created_at="2026-11-23T00:00:00+00:00",
)

Key = tuple[str, int, str]


def keyed(rows: Sequence[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out = {(r["point"], r["repeat"], r["policy"]): r for r in rows}
    assert len(out) == len(rows), "(point, repeat, policy) must be unique"
    return out


@pytest.fixture(scope="module")
def swept(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[sweep.SweepOutcome, Path, list[tuple[int, int]]]:
    run_dir = tmp_path_factory.mktemp("run")
    calls: list[tuple[int, int]] = []
    outcome = sweep.run_sweep(
        spark,
        POINTS,
        run_dir / "results" / "sweep.parquet",
        meta=META,
        seed=SEED,
        progress=lambda done, total: calls.append((done, total)),
    )
    return outcome, run_dir, calls


@pytest.fixture(scope="module")
def spark_rows(
    swept: tuple[sweep.SweepOutcome, Path, list[tuple[int, int]]],
) -> list[dict[str, Any]]:
    return schema.read_parquet(swept[0].path)  # checks every row against the schema


@pytest.fixture(scope="module")
def by_point(spark_rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    points: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
    for r in spark_rows:
        points[(r["point"], r["repeat"])][r["policy"]] = r
    return points


# --------------------------------------------------------------------------- the points


def test_points_depend_on_index_and_seed_only() -> None:
    points = sweep.sweep_points(50, SEED)
    assert [p.index for p in points] == list(range(50))
    assert [sweep.draw_point(i, SEED) for i in (0, 17, 49)] == [
        sweep.SweepPoint(p.index, p.scenario, p.params) for p in (points[0], points[17], points[49])
    ]
    # The sweep of size n is the start of every bigger one.
    assert sweep.sweep_points(500, SEED)[:50] == points
    assert sweep.sweep_points(50, SEED + 1) != points


def test_parameters_in_range_and_accepted_by_the_scenarios() -> None:
    points = sweep.sweep_points(400, 0)
    for p in points:
        brokers, leaders = int(p.params["brokers"]), int(p.params["leaders"])
        assert sweep.MIN_BROKERS <= brokers <= sweep.MAX_BROKERS
        assert 1 <= leaders <= min(brokers, sweep.MAX_LEADERS)
        assert leaders <= int(p.params["partitions"]) <= 3 * leaders
        assert 1 <= int(p.params["topics"]) <= 3
        assert 1 <= int(p.params["bootstrap_size"]) <= 3
        assert p.params["client_idle_disabled"] in ("0", "1")
        assert p.params["duration_ms"] == str(sweep.DURATION_MS)
        if p.scenario == "big-consumer":
            assert p.params["coordinator"] in ("auto", "shared", "separate")
        else:
            assert p.scenario == "big-producer" and "coordinator" not in p.params
    for p in points[:40]:
        prepare(p.scenario, p.params)  # every name is a parameter; "separate" is possible
    sizes = [int(p.params["brokers"]) for p in points]
    # log-uniform: about as many points below 100 brokers as above.
    assert 0.3 < sum(b < 100 for b in sizes) / len(sizes) < 0.7
    assert {p.scenario for p in points} == set(sweep.SWEEP_SCENARIOS)


def test_repeats_count_earlier_draws_of_the_same_point() -> None:
    points = sweep.sweep_points(3000, 0)
    seen: dict[str, list[sweep.SweepPoint]] = defaultdict(list)
    for p in points:
        assert p.repeat == len(seen[p.point])
        seen[p.point].append(p)
    repeated = [ps for ps in seen.values() if len(ps) > 1]
    assert repeated, "3,000 draws should hit some small-cluster point twice"
    for ps in repeated:
        assert len({p.params["seed"] for p in ps}) == len(ps)  # repeats differ in seed


# --------------------------------------------------------------------------- the sweep in Spark


def test_outcome(swept: tuple[sweep.SweepOutcome, Path, list[tuple[int, int]]]) -> None:
    outcome, run_dir, calls = swept
    assert outcome.points == POINTS
    assert outcome.simulations == POINTS * len(sweep.SWEEP_POLICIES)
    assert outcome.wall_s > 0
    assert outcome.sims_per_s == pytest.approx(outcome.simulations / outcome.wall_s)
    assert outcome.path == run_dir / "results" / "sweep.parquet"
    assert calls and calls[-1][0] == calls[-1][1] > 0  # progress ends with every task done
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(calls))


def test_layout_is_what_the_comparison_job_reads(
    swept: tuple[sweep.SweepOutcome, Path, list[tuple[int, int]]],
) -> None:
    outcome, run_dir, _ = swept
    parts = result_files(run_dir)  # also checks every part file's columns and types
    assert parts and all(p.parent == outcome.path for p in parts)
    assert all(p.name.startswith("part-") and p.suffix == ".parquet" for p in parts)


def test_three_rows_per_point_of_the_sweep_kind(
    spark_rows: list[dict[str, Any]], by_point: dict[tuple[str, int], dict[str, Any]]
) -> None:
    assert len(spark_rows) == POINTS * len(sweep.SWEEP_POLICIES)
    assert len(by_point) == POINTS
    assert all(set(policies) == set(sweep.SWEEP_POLICIES) for policies in by_point.values())
    assert {r["kind"] for r in spark_rows} == {schema.Kind.SWEEP.value}
    assert {r["run_id"] for r in spark_rows} == {META.run_id}
    assert max(r["repeat"] for r in spark_rows) == 1  # index 92 (see SEED)
    expected = {(p.point, p.repeat) for p in sweep.sweep_points(POINTS, SEED)}
    assert set(by_point) == expected


def test_spark_rows_equal_local_rows(spark_rows: list[dict[str, Any]]) -> None:
    local = keyed(sweep.run_local(POINTS, META, seed=SEED))
    remote = keyed(spark_rows)
    assert remote.keys() == local.keys()
    for key, row in local.items():
        schema.check_row(row, str(key))
        got = remote[key]
        differing = {
            n: (row[n], got[n]) for n in schema.NAMES if n != "wall_s" and not _same(row[n], got[n])
        }
        assert not differing, f"{key}: Spark and local rows differ: {differing}"


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and bool(a == b)


def test_every_request_routed_right(spark_rows: list[dict[str, Any]]) -> None:
    wrong = [(r["point"], r["policy"], r["misrouted"]) for r in spark_rows if r["misrouted"]]
    assert not wrong


def test_proposed_steady_at_most_java_today(
    by_point: dict[tuple[str, int], dict[str, Any]],
) -> None:
    worse = [
        (point, repeat, runs["proposed"]["steady"], runs["java-today"]["steady"])
        for (point, repeat), runs in by_point.items()
        if runs["proposed"]["steady"] > runs["java-today"]["steady"]
    ]
    assert not worse, f"proposed holds more sockets than java-today at the end: {worse}"


def test_scaling_runs_each_size(spark: Any, tmp_path: Path) -> None:
    outcomes = sweep.sweep_scaling(
        spark, [12, 6], tmp_path / "results" / "sweep.parquet", tmp_path / "scaling", meta=META
    )
    assert [o.points for o in outcomes] == [6, 12]
    assert outcomes[0].path == tmp_path / "scaling" / "sweep-6.parquet"
    assert outcomes[1].path == tmp_path / "results" / "sweep.parquet"
    small = keyed(schema.read_parquet(outcomes[0].path))
    big = keyed(schema.read_parquet(outcomes[1].path))
    assert len(big) == 12 * len(sweep.SWEEP_POLICIES)
    assert small.keys() <= big.keys()  # the smaller sweep is the start of the bigger one


def test_the_sweep_cadence_counts_what_the_default_cadence_counts() -> None:
    """SWEEP_TIMINGS (a request every 30 s) gives the same opened / peak / steady sockets and
    the same client-hour (handshakes and socket-seconds by role) as the real clients'
    cadence, for every policy, on the first points of the sweep with at most 100 brokers (a
    default-cadence hour costs 0.1-0.3 s a run; the docstring gives the 300-point figure)."""
    import dataclasses

    from connmgr.sim.clients import ClientTimings
    from connmgr.sim.run import run_spec

    assert ClientTimings() != sweep.SWEEP_TIMINGS
    points = [p for p in (sweep.draw_point(i, 0) for i in range(40))]
    small = [p for p in points if int(p.params["brokers"]) <= 100][:3]
    assert {p.scenario for p in small} == set(sweep.SWEEP_SCENARIOS)
    for point in small:
        spec, settings, seed = prepare(point.scenario, point.params)
        for policy in sweep.SWEEP_POLICIES:
            default = run_spec(spec, policy, settings, seed).counts
            coarse = run_spec(
                dataclasses.replace(spec, timings=sweep.SWEEP_TIMINGS), policy, settings, seed
            ).counts
            got = [(c.opened, c.peak, c.steady, c.by_role) for c in (default, coarse)]
            assert got[0] == got[1], (point.point, policy)
            assert default.life.handshakes == coarse.life.handshakes
            for role, seconds in default.life.socket_seconds.items():
                assert coarse.life.socket_seconds[role] == pytest.approx(seconds, abs=1.0)
