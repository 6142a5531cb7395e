"""The benchmark report as the RFC reads it: :class:`Report` (a report directory's tables,
its stage files and ``index.md`` sections) and where the checkout keeps the RFC and reports
(:mod:`connmgr_evidence.bench.rfc` fills the RFC from it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.report.table import format_cell
from connmgr_evidence.bench.results.schema import ColumnType, ResultsError
from connmgr_evidence.bench.results.stagefile import read_stage

ROOT = Path(__file__).resolve().parents[4]
RFC = ROOT / "proposal" / "rfc.md"
REPORTS = ROOT / "reports"
_RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-z]+")


class RfcError(ConfigError):
    """The RFC or its report cannot be put together; the message says which and why."""


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class Report:
    """A report directory's tables, read lazily by name."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    def _read(self, table: str, read: Callable[[Path], Any]) -> Any:
        """``read`` applied to ``tables/<table>.parquet``; a missing or corrupt file is an
        error that names it."""
        file = self.path / "tables" / f"{table}.parquet"
        try:
            return read(file)
        except FileNotFoundError:
            raise RfcError(f"{file}: no such table in the report") from None
        except Exception as e:  # pyarrow raises its own types for a corrupt file
            raise ResultsError(f"{file}: not a readable Parquet table ({e})") from e

    def rows(self, table: str) -> list[dict[str, Any]]:
        import pyarrow.parquet as pq

        found: list[dict[str, Any]] = self._read(table, lambda f: pq.read_table(f).to_pylist())
        return found

    def types(self, table: str) -> dict[str, ColumnType]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = self._read(table, pq.read_schema)
        kinds: dict[str, ColumnType] = {}
        for field in schema:
            if pa.types.is_integer(field.type):
                kinds[field.name] = ColumnType.LONG
            elif pa.types.is_floating(field.type):
                kinds[field.name] = ColumnType.DOUBLE
            elif pa.types.is_boolean(field.type):
                kinds[field.name] = ColumnType.BOOL
            else:
                kinds[field.name] = ColumnType.STRING
        return kinds

    def one(self, table: str, **where: Any) -> dict[str, Any]:
        """The single row of ``table`` whose columns equal ``where``."""
        found = [r for r in self.rows(table) if all(r.get(k) == v for k, v in where.items())]
        if len(found) != 1:
            raise RfcError(
                f"{self.path}/tables/{table}: {len(found)} rows where {where}, expected one"
            )
        return found[0]

    def value(self, table: str, column: str, **where: Any) -> str:
        """One cell, formatted as the report's Markdown tables format it."""
        return format_cell(self.one(table, **where)[column], self.types(table)[column])

    def stage(self, name: str) -> dict[str, Any]:
        """A stage's raw JSON (``raw/<name>.json``, e.g. the fleet view's settings), read
        as the comparison reads it
        (:func:`~connmgr_evidence.bench.results.stagefile.read_stage`)."""
        found = read_stage(self.path / "raw", f"{name}.json", ("settings",), f"{name}-stage")
        if found is None:
            raise RfcError(f"{self.path / 'raw' / name}.json: no such stage file in the report")
        return found

    def section(self, title: str) -> str:
        """The body of ``index.md``'s section ``## title``."""
        text = (self.path / "index.md").read_text()
        match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        if match is None:
            raise RfcError(f"{self.path}/index.md: no section {title!r}")
        return match.group(1).strip()


def latest_report(reports: Path = REPORTS) -> Path:
    """The newest run under ``reports`` that has a report (run ids sort by time)."""
    runs = sorted(
        p for p in reports.glob("*") if _RUN_ID.fullmatch(p.name) and (p / "index.md").exists()
    )
    if not runs:
        raise RfcError(f"{reports}: no report; run `connmgr bench` first")
    return runs[-1]
