"""A real run's retriable failure is retried within its stage, or recorded as that run's
failure with its reason; never the job's abort (``connmgr_evidence.bench.attempts`` and its use by
the life and real stages). The probes are fakes: one that fails once, one that fails always."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from connmgr.errors import ConnMgrError
from connmgr.ledger import Life
from connmgr_evidence.bench.attempts import attempt
from connmgr_evidence.bench.grid import RealPoint, load_grid, real_jobs
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.stages import life, real
from connmgr_evidence.bench.stages.life import LifeRun, failures_section, medians, run_one

EPOCH = (
    "java probe exited 1: KafkaException: Unexpected error in commit: The leader epoch in "
    "the request is older than the epoch on the broker"
)


@dataclass
class FlakyProbe:
    """Fails its first ``failures`` calls with ``error`` (``None``: forever), then returns
    ``result()``."""

    result: Callable[[], Any]
    failures: int | None
    error: BaseException = field(default_factory=lambda: ConnMgrError(EPOCH))
    calls: int = 0

    def __call__(self, *_args: Any) -> Any:
        self.calls += 1
        if self.failures is None or self.calls <= self.failures:
            raise self.error
        return self.result()


def test_attempt_retries_then_succeeds() -> None:
    probe = FlakyProbe(lambda: "done", 1)
    logged: list[str] = []
    got = attempt(probe, 3, label="life x", log=logged.append)
    assert (got.ok, got.get(), got.attempts, got.failures) == (True, "done", 2, (EPOCH,))
    assert logged == [f"life x: attempt 1 of 3 failed ({EPOCH}); trying again"]


def test_attempt_gives_up_with_the_reason() -> None:
    probe = FlakyProbe(lambda: "never", None, TimeoutError())
    logged: list[str] = []
    got = attempt(probe, 2, log=logged.append, timeout_s=300.0)
    assert (got.ok, got.attempts, probe.calls) == (False, 2, 2)
    assert got.reason == "no result within 300 s"
    assert logged[-1].endswith("giving up")
    with pytest.raises(ValueError, match="every attempt failed"):
        got.get()


def test_a_bug_is_not_retried() -> None:
    probe = FlakyProbe(lambda: "never", None, KeyError("bug"))
    with pytest.raises(KeyError):
        attempt(probe, 3)
    assert probe.calls == 1


def _real_run() -> Any:
    life_ = Life(60.0, {"data": 120.0}, {"data": 2})
    return SimpleNamespace(
        seed=7,
        wall_s=60.0,
        represented=life_.scaled(60),
        steady_summary={"opened": 2, "steady": 1},
        client_config={},
        restarts=[],
        commit_failures=0,
        records_sent=0,
        records_consumed=20,
    )


RUN = LifeRun(
    "big-consumer brokers=3 rolling_restart=1",
    "java-4.4.0",
    {"life_s": "60", "time_scale": "60", "records": "20", "seed": "7"},
    0,
)


def test_life_failing_once_is_measured_and_counts_the_retry() -> None:
    probe = FlakyProbe(_real_run, 1)
    row = run_one(RUN, probe)
    assert probe.calls == 2
    assert "failed" not in row
    assert (row["attempts"], row["retried"], row["opened"]) == (2, EPOCH, 2)


def test_life_failing_always_is_that_runs_failure() -> None:
    probe = FlakyProbe(_real_run, None)
    row = run_one(RUN, probe)
    assert probe.calls == life.ATTEMPTS
    assert (row["failed"], row["attempts"], row["repeat"]) == (EPOCH, life.ATTEMPTS, 0)
    ok = run_one(LifeRun(RUN.entry, "proposed", RUN.settings, 0), FlakyProbe(_real_run, 0))
    settings = {"scenarios": [RUN.entry], "clients": ["proposed", "java-4.4.0"]}
    found = {"settings": settings, "runs": [ok, row]}
    # The failed life is left out of the medians and listed with its reason.
    assert list(medians(found)) == [(RUN.entry, "proposed")]
    section = failures_section(found)
    assert section is not None
    assert section[0] == "Real lives that failed"
    assert f"{RUN.entry}, java-4.4.0, repeat 0: {EPOCH} (3 attempts)" in section[1]
    assert failures_section({"settings": settings, "runs": [ok]}) is None


def test_real_stage_retries_then_records_the_failure() -> None:
    grid = load_grid(quick=True)
    jobs = real_jobs(grid)
    doomed = (jobs[0][0].point, jobs[0][1])
    calls: dict[tuple[str, str, str], int] = {}

    def run_once(point: RealPoint, client: str, settings: dict[str, str]) -> Any:
        key = (point.point, client, settings["seed"])
        calls[key] = calls.get(key, 0) + 1
        if (point.point, client) == doomed:
            raise ConnMgrError(EPOCH)
        if calls[key] == 1:
            raise TimeoutError()
        raise RuntimeError("stop: the row is not built from a fake")

    retried: list[str] = []
    failed: list[str] = []
    with pytest.raises(RuntimeError, match="stop"):
        real.real_rows(
            grid, new_meta("t"), show=False, retried=retried, failed=failed, run_once=run_once
        )
    # The first job failed both attempts and the stage went on to the second job, which
    # failed once (a deadline) and was tried again.
    first = f"{jobs[0][0].point} {jobs[0][1]} repeat {jobs[0][2]}"
    assert failed == [f"{first}: {EPOCH} ({real.ATTEMPTS} attempts)"]
    assert retried == [f"{first}: {EPOCH}"] * real.ATTEMPTS
    second = (jobs[1][0].point, jobs[1][1], str(grid.get("real", "seed") + jobs[1][2]))
    assert calls[second] == 2
