"""A stage's results as one JSON file under ``raw/``: the property, linger and fleet stages'.

Written whole when the stage ends and read back by the comparison (``--report-only``
included), so a report can be rebuilt from ``raw/`` alone.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from connmgr_evidence.bench.results.schema import ResultsError


def write_stage(raw: Path, name: str, data: Mapping[str, Any]) -> Path:
    """``raw/<name>`` written as indented JSON (``raw`` created if needed)."""
    raw.mkdir(parents=True, exist_ok=True)
    path = raw / name
    path.write_text(json.dumps(data, indent=1))
    return path


def read_stage(raw: Path, name: str, keys: Collection[str], what: str) -> dict[str, Any] | None:
    """``raw/<name>``, or None if the run had no such stage. A :class:`ResultsError` naming
    the file if it is unreadable or lacks one of ``keys`` (then it is "not a ``what`` file")."""
    path = raw / name
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ResultsError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: not a {what} file (not a JSON object)")
    missing = [k for k in keys if k not in data]
    if missing:
        raise ResultsError(f"{path}: missing {missing[0]!r}; not a {what} file")
    found: dict[str, Any] = data
    return found
