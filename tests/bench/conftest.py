"""Fixtures for the comparison job's tests: one SparkSession for the whole session, and
hand-built rows of the results schema.

Spark starts once (about 10 s) and is shared; never use pytest-xdist here (every worker
would start its own JVM).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.bench.results import schema

RowFactory = Callable[..., dict[str, Any]]
ResultsWriter = Callable[..., Path]


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that uses the session's Spark (directly or through another fixture) is
    marked ``spark``: ``-m "not spark"`` leaves out what starts a JVM for Spark. Tests that
    start Spark another way (a subprocess, a standalone cluster) carry the mark themselves."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from connmgr_evidence.bench.runtime.spark import spark_session

    session = spark_session("local[2]", app="connmgr-bench-tests")
    yield session
    session.stop()


def build_row(**values: Any) -> dict[str, Any]:
    """A complete, valid results row; ``values`` override any column. Role columns default
    to the totals on the data role."""
    row: dict[str, Any] = {
        "schema_version": schema.SCHEMA_VERSION,
        "run_id": "test-run",
        "kind": "sim",
        "point": "big-producer[brokers=3]",
        "scenario": "big-producer",
        "policy": "proposed",
        "client": "producer",
        "brokers": 3,
        "bootstrap_size": 1,
        "leaders": 1,
        "coordinator_shared": False,
        "idle_disabled": False,
        "rtt_ms": 0.0,
        "duration_ms": 1000.0,
        "repeat": 0,
        "seed": 0,
        "opened": 2,
        "failed": 0,
        "peak": 2,
        "steady": 1,
        "handshakes_avoided": 0,
        "misrouted": 0,
        "records": None,
        "ttfa_ms": None,
        "ttfc_ms": None,
        "throughput_rps": None,
        "events": 100,
        "wall_s": 0.01,
        "git_commit": "0123abcd",
        "versions": schema.json_text({"python": "3.11", "kafka-connmgr": "0.1.0"}),
        "machine": schema.json_text({"platform": "test", "cpus": 2}),
        "created_at": "2026-11-23T00:00:00+00:00",
    }
    row.update(values)
    if row["kind"] == "real":
        row.setdefault("records", 10)
        row["misrouted"] = values.get("misrouted")
        row["events"] = values.get("events")
    for r in schema.ROLES:
        row.setdefault(f"opened_{r}", row["opened"] if r == "data" else 0)
        row.setdefault(f"steady_{r}", row["steady"] if r == "data" else 0)
    row.setdefault("handshakes", row["opened"] - row["failed"])
    # Life: the steady sockets held for the whole run, every handshake in it (throughput
    # rows and v1 rows have none: pass the columns as None).
    row.setdefault("horizon_s", row["duration_ms"] / 1000.0)
    hours = row["horizon_s"] / 3600.0 if row["horizon_s"] else None
    row.setdefault("socket_s_per_h", None if hours is None else float(row["steady"]) * 3600.0)
    row.setdefault("handshakes_per_h", None if hours is None else row["handshakes"] / hours)
    for r in schema.ROLES:
        for what in ("socket_s_per_h", "handshakes_per_h"):
            total = row[what]
            row.setdefault(f"{what}_{r}", total if r == "data" or total is None else 0.0)
    return row


@pytest.fixture(scope="session")
def make_row() -> RowFactory:
    return build_row


def write_results(run_dir: Path, name: str, rows: Sequence[dict[str, Any]]) -> Path:
    """Write ``rows`` to ``run_dir/results/<name>.parquet``."""
    return schema.write_parquet(rows, run_dir / "results" / f"{name}.parquet")


@pytest.fixture(scope="session")
def results_writer() -> ResultsWriter:
    return write_results


def benchmark_json(benchmarks: Sequence[dict[str, Any]]) -> str:
    """A minimal pytest-benchmark JSON document."""
    return json.dumps(
        {
            "machine_info": {
                "node": "test",
                "system": "Linux",
                "python_implementation": "CPython",
                "python_version": "3.11.7",
                "cpu": {"brand_raw": "Test CPU", "count": 2},
            },
            "commit_info": {"id": "0123abcd", "dirty": False},
            "benchmarks": list(benchmarks),
            "datetime": "2026-11-23T00:00:00+00:00",
            "version": "5.3.1",
        }
    )


def micro_benchmark(
    name: str, group: str, mean: float, *, params: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    """One benchmark entry of pytest-benchmark's JSON, its stats derived from ``mean``."""
    return {
        "group": group,
        "name": name,
        "fullname": f"tests/bench/test_micro.py::{name}",
        "params": params,
        "param": None if params is None else next(iter(params.values())),
        "extra_info": extra,
        "stats": {
            "min": mean * 0.9,
            "max": mean * 1.5,
            "mean": mean,
            "stddev": mean * 0.1,
            "rounds": 20,
            "median": mean * 0.95,
            "iqr": mean * 0.05,
            "ops": 1 / mean if mean else 0.0,
        },
    }


@pytest.fixture(scope="session")
def micro_entry() -> Callable[..., dict[str, Any]]:
    return micro_benchmark


@pytest.fixture(scope="session")
def micro_writer() -> Callable[[Path, str, Sequence[dict[str, Any]]], Path]:
    def write(run_dir: Path, name: str, benchmarks: Sequence[dict[str, Any]]) -> Path:
        path = run_dir / "micro" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(benchmark_json(benchmarks))
        return path

    return write
