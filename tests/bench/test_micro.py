"""The micro-benchmark suites (benchmarks/micro) run, with one round each, and write the
pytest-benchmark JSON the comparison job reads: every policy in each group, with positive
statistics and the extra_info fields the report divides by."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from connmgr.policies import POLICIES
from connmgr_evidence.bench.report.compare import load_micro

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "micro"


def run_suite(out: Path, rounds: str) -> subprocess.CompletedProcess[str]:
    # As run_micro: no xdist worker's variables, no checkout addopts (nothing is timed
    # under xdist).
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["CONNMGR_MICRO_ROUNDS"] = rounds
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(SUITE),
            f"--benchmark-json={out}",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            "-q",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def micro_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "micro" / "micro.json"
    out.parent.mkdir()
    done = run_suite(out, "1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def benchmarks(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    found: list[dict[str, Any]] = doc["benchmarks"]
    return found


GROUPS = ("decision", "decision-roundtrip", "simulator")


@pytest.mark.parametrize("group", GROUPS)
def test_every_policy_in_each_group(micro_json: Path, group: str) -> None:
    got = sorted(b["params"]["policy"] for b in benchmarks(micro_json) if b["group"] == group)
    assert got == sorted(POLICIES)


def test_statistics_positive_and_rounds_bounded(micro_json: Path) -> None:
    for b in benchmarks(micro_json):
        stats = b["stats"]
        assert stats["rounds"] == 1, b["name"]
        assert len(stats["data"]) == 1, b["name"]  # the JSON stays small
        for key in ("min", "max", "mean", "median", "ops"):
            assert stats[key] > 0, (b["name"], key)


def test_extra_info(micro_json: Path) -> None:
    for b in benchmarks(micro_json):
        extra = b["extra_info"]
        assert extra["policy"] == b["params"]["policy"]
        if b["group"] == "decision":
            assert extra["decisions"] == extra["decisions_per_round"] > 0
            per = b["stats"]["mean"] / extra["decisions"] * 1e6
            assert extra["per_decision_us"] == pytest.approx(per)
        elif b["group"] == "decision-roundtrip":
            assert extra["pairs"] > 0
            per = b["stats"]["mean"] / extra["pairs"] * 1e6
            assert extra["per_pair_us"] == pytest.approx(per)
        else:
            assert isinstance(extra["events"], int) and extra["events"] > 0
            assert extra["events_per_s"] == pytest.approx(extra["events"] / b["stats"]["mean"])


def test_comparison_job_reads_it(micro_json: Path) -> None:
    (micro,) = load_micro(micro_json.parent.parent)
    assert {(b.group, b.policy) for b in micro.benchmarks} == {
        (g, p) for g in GROUPS for p in POLICIES
    }


def test_bad_rounds_stop_the_run(tmp_path: Path) -> None:
    done = run_suite(tmp_path / "micro.json", "0")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "CONNMGR_MICRO_ROUNDS='0'" in done.stderr
    assert not (tmp_path / "micro.json").exists()
