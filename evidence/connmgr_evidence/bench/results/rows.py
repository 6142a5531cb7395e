"""Rows of the results schema (:mod:`connmgr_evidence.bench.results.schema`) from runs, with run
metadata.

A row carries who produced it (git commit, versions, machine) so that a figure in a report
can be traced back to the code and the machine that measured it.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from connmgr.core.config import ClientKind
from connmgr.ledger import Life
from connmgr.sim.result import RunResult
from connmgr.sim.scenarios import ScenarioSpec
from connmgr_evidence.bench.results.schema import (
    LIFE_COLUMNS,
    ROLES,
    SCHEMA_VERSION,
    Kind,
    check_row,
    json_text,
)

_PACKAGES = ("kafka-connmgr", "aiokafka", "confluent-kafka", "pyspark", "pyarrow", "hypothesis")


@dataclass(frozen=True)
class RunMeta:
    """What every row of one main-job run shares."""

    run_id: str
    git_commit: str
    versions: str
    machine: str
    created_at: str

    def columns(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "git_commit": self.git_commit,
            "versions": self.versions,
            "machine": self.machine,
            "created_at": self.created_at,
        }


@cache
def git_commit(where: Path | None = None) -> str:
    """The commit checked out at ``where`` (this package's tree), with ``+dirty`` if the
    tree has changes, or "unknown" outside git."""
    cwd = where or Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def versions(extra: Mapping[str, str] | None = None) -> str:
    """JSON of the versions that shape the figures."""
    found: dict[str, str] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    found.update(extra or {})
    return json_text(found)


def machine() -> str:
    return json_text(
        {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count() or 0,
            "python": sys.implementation.name,
        }
    )


def new_meta(run_id: str, extra_versions: Mapping[str, str] | None = None) -> RunMeta:
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    return RunMeta(run_id, git_commit(), versions(extra_versions), machine(), now.isoformat())


def spec_columns(spec: ScenarioSpec) -> dict[str, Any]:
    """The grid-describing columns of a built scenario."""
    leaders = {
        tp_leader for topic in spec.topics for tp_leader in spec.cluster.topics.get(topic, [])
    }
    coordinator = spec.cluster.coordinator(spec.group) if spec.group is not None else None
    rtt = max((b.rtt_ms for b in spec.cluster.brokers.values()), default=0.0)
    return {
        "client": spec.client.value,
        "brokers": len(spec.cluster.brokers),
        "bootstrap_size": len(spec.bootstrap),
        "leaders": len(leaders),
        "coordinator_shared": coordinator is not None and coordinator in leaders,
        "rtt_ms": float(rtt),
    }


def counting_columns(summary: Mapping[str, Any]) -> dict[str, Any]:
    """opened / failed / peak / steady (total and by role) and handshakes, from a run
    summary (a simulated :meth:`RunResult.summary` or a real run's ledger summary)."""
    by_role = summary["by_role"]
    cols: dict[str, Any] = {
        "opened": int(summary["opened"]),
        "failed": int(summary["failed"]),
        "peak": int(summary["peak"]),
        "steady": int(summary["steady"]),
        "handshakes": int(summary["opened"]) - int(summary["failed"]),
        "handshakes_avoided": sum(int(r.get("handshakes_avoided", 0)) for r in by_role.values()),
    }
    for role in ROLES:
        r = by_role.get(role, {})
        cols[f"opened_{role}"] = int(r.get("opened", 0))
        cols[f"steady_{role}"] = int(r.get("open_at_end", 0))
    cols.update(life_columns(summary.get("life")))
    return cols


def life_columns(life: Mapping[str, Any] | None) -> dict[str, Any]:
    """The life columns from a summary's ``life`` (:meth:`connmgr.ledger.Life.as_json`):
    per client-hour, total and by role; all null for a run that did not measure it."""
    if life is None:
        return dict.fromkeys(LIFE_COLUMNS)
    measured = Life.from_json(dict(life))
    seconds = measured.per_hour(measured.socket_seconds)
    shakes = measured.per_hour(measured.handshakes)
    cols: dict[str, Any] = {
        "horizon_s": measured.horizon_s,
        "socket_s_per_h": sum(seconds.values()),
        "handshakes_per_h": sum(shakes.values()),
    }
    for role in ROLES:
        cols[f"socket_s_per_h_{role}"] = seconds.get(role, 0.0)
        cols[f"handshakes_per_h_{role}"] = shakes.get(role, 0.0)
    return cols


def point_text(scenario: str, params: Mapping[str, Any]) -> str:
    """The canonical pairing key of a grid point: the scenario and its parameters, sorted,
    without the seed (repeats of a point differ only in seed)."""
    shown = ",".join(f"{k}={params[k]}" for k in sorted(params) if k != "seed")
    return f"{scenario}[{shown}]"


def sim_row(
    result: RunResult,
    spec: ScenarioSpec,
    *,
    meta: RunMeta,
    point: str,
    repeat: int,
    kind: Kind = Kind.SIM,
    idle_disabled: bool,
) -> dict[str, Any]:
    """One row for a simulated run of ``result.policy`` through ``spec``."""
    row: dict[str, Any] = {
        **meta.columns(),
        "kind": kind.value,
        "point": point,
        "scenario": result.scenario,
        "policy": result.policy,
        **spec_columns(spec),
        "idle_disabled": idle_disabled,
        "duration_ms": float(result.duration_ms),
        "repeat": repeat,
        "seed": int(result.seed),
        **counting_columns(result.summary()),
        "misrouted": int(result.misrouted),
        "records": None,
        "ttfa_ms": None,
        "ttfc_ms": None,
        "throughput_rps": None,
        "events": int(result.events),
        "wall_s": float(result.wall_s),
    }
    check_row(row, f"{point} {result.policy} repeat {repeat}")
    return row


def client_kind(value: str) -> ClientKind:
    return ClientKind(value)
