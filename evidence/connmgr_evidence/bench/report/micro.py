"""The micro-benchmarks of a run: pytest-benchmark ``--benchmark-json`` files, read and
checked.

Broken input raises :class:`~connmgr_evidence.bench.results.schema.ResultsError` naming the file and
the
benchmark at fault. A benchmark's policy is ``params['policy']``, else its single string
parameter, else the ``[...]`` of its name.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from connmgr_evidence.bench.results.schema import ResultsError


@dataclass(frozen=True)
class MicroBenchmark:
    """One benchmark of a pytest-benchmark JSON file; times in seconds per round."""

    file: Path
    name: str
    group: str | None
    policy: str | None
    rounds: int
    mean_s: float
    median_s: float
    stddev_s: float
    min_s: float
    max_s: float
    extra_info: Mapping[str, Any]


@dataclass(frozen=True)
class MicroFile:
    """One pytest-benchmark JSON file."""

    path: Path
    machine: str
    commit: str
    datetime: str
    benchmarks: tuple[MicroBenchmark, ...]


def load_micro(run_dir: Path) -> tuple[MicroFile, ...]:
    """The pytest-benchmark JSON files under ``run_dir/micro`` (none if it is absent)."""
    where = run_dir / "micro"
    if not where.is_dir():
        return ()
    return tuple(_micro_file(f) for f in sorted(where.glob("*.json")))


def _micro_file(path: Path) -> MicroFile:
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsError(f"{path}: not a readable JSON file ({e})") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        raise ResultsError(
            f"{path}: not pytest-benchmark JSON (expected an object with a 'benchmarks' list)"
        )
    benchmarks = tuple(_benchmark(path, i, b) for i, b in enumerate(doc["benchmarks"]))
    machine = _object(doc.get("machine_info"))
    cpu = _object(machine.get("cpu"))
    commit = _object(doc.get("commit_info"))
    described = ", ".join(
        str(x)
        for x in (
            cpu.get("brand_raw"),
            f"{cpu['count']} CPUs" if "count" in cpu else None,
            machine.get("system"),
            machine.get("python_implementation"),
            machine.get("python_version"),
        )
        if x
    )
    commit_id = str(commit.get("id", "unknown")) + (" (dirty)" if commit.get("dirty") else "")
    return MicroFile(path, described, commit_id, str(doc.get("datetime", "")), benchmarks)


def _benchmark(path: Path, index: int, b: Any) -> MicroBenchmark:
    where = f"{path}: benchmarks[{index}]"
    if not isinstance(b, dict) or not isinstance(b.get("name"), str):
        raise ResultsError(f"{where}: not a benchmark (expected an object with a 'name')")
    where = f"{path}: benchmark {b['name']!r}"
    stats = b.get("stats")
    if not isinstance(stats, dict):
        raise ResultsError(f"{where}: no 'stats' object")
    values: dict[str, float] = {}
    for key in ("mean", "median", "stddev", "min", "max"):
        v = stats.get(key)
        if not _is_number(v):
            raise ResultsError(f"{where}: stats.{key}={v!r} is not a number")
        values[key] = float(v)
        if key != "stddev" and not values[key] > 0:
            raise ResultsError(f"{where}: stats.{key}={v!r} is not positive")
    if values["stddev"] < 0:
        raise ResultsError(f"{where}: stats.stddev={values['stddev']!r} is negative")
    rounds = stats.get("rounds")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ResultsError(f"{where}: stats.rounds={rounds!r} is not a positive integer")
    group = b.get("group")
    if group is not None and not isinstance(group, str):
        raise ResultsError(f"{where}: group={group!r} is not a string")
    extra = b.get("extra_info", {})
    if not isinstance(extra, dict):
        raise ResultsError(f"{where}: extra_info={extra!r} is not an object")
    for key in ("events", "decisions"):
        if key in extra and not (_is_int(extra[key]) and extra[key] > 0):
            raise ResultsError(f"{where}: extra_info.{key}={extra[key]!r} is not a positive int")
    if group == "simulator" and "events" not in extra:
        raise ResultsError(f"{where}: a simulator benchmark needs extra_info.events")
    params = b.get("params")
    if params is not None and not isinstance(params, dict):
        raise ResultsError(f"{where}: params={params!r} is not an object")
    return MicroBenchmark(
        path,
        b["name"],
        group,
        _policy_of(b["name"], params),
        rounds,
        values["mean"],
        values["median"],
        values["stddev"],
        values["min"],
        values["max"],
        extra,
    )


def _policy_of(name: str, params: Mapping[str, Any] | None) -> str | None:
    """``params['policy']``, else a single string parameter, else the ``[...]`` of the name."""
    if params:
        if isinstance(params.get("policy"), str):
            return str(params["policy"])
        strings = [v for v in params.values() if isinstance(v, str)]
        if len(strings) == 1:
            return strings[0]
    m = re.search(r"\[(.+)\]$", name)
    return m.group(1) if m else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _is_number(v: Any) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
