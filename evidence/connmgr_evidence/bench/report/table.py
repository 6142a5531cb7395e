"""A report table: typed columns and plain rows, written as Parquet and as Markdown.

:func:`write_table` writes a :class:`Table` twice, as ``<name>.parquet`` for programs and
``<name>.md`` for people; both come from the same rows, and the Markdown header names the
Parquet columns, so one can be checked against the other. Markdown cells print floats to four
significant digits (whole numbers from 10,000 up), ``inf`` for an infinite ratio and ``—``
for a missing value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr_evidence.bench.results.schema import ColumnType

MISSING = "—"
"""How a Markdown cell shows a null."""


@dataclass(frozen=True)
class Table:
    """One report table: typed columns and rows of plain Python values."""

    name: str
    """File stem under ``tables/`` (``sockets`` → ``sockets.parquet``, ``sockets.md``)."""
    title: str
    description: str
    columns: tuple[tuple[str, ColumnType], ...]
    rows: tuple[tuple[Any, ...], ...]
    embed: bool = True
    """Shown inline in ``index.md`` (if not too long); otherwise linked."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.columns)

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.names, r, strict=True)) for r in self.rows]


@dataclass(frozen=True)
class TableFiles:
    """Where :func:`write_table` put a table."""

    parquet: Path
    markdown: Path | None
    """None for a table written as Parquet only (``sweep-points``)."""


def make_table(
    name: str,
    title: str,
    description: str,
    columns: Sequence[tuple[str, ColumnType]],
    records: Iterable[Mapping[str, Any]],
    *,
    embed: bool = True,
) -> Table:
    """A :class:`Table` whose rows are ``records`` picked by column name (extra keys are
    ignored; a missing key is an error)."""
    cols = tuple(columns)
    rows = tuple(tuple(_coerce(r[n], t) for n, t in cols) for r in records)
    return Table(name, title, description, cols, rows, embed)


def format_cell(value: Any, type_: ColumnType) -> str:
    """The Markdown text of one cell."""
    if value is None:
        return MISSING
    if type_ is ColumnType.BOOL:
        return "true" if value else "false"
    if type_ is ColumnType.LONG:
        return str(int(value))
    if type_ is ColumnType.DOUBLE:
        return format_number(float(value))
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def format_number(x: float) -> str:
    """A float as a Markdown cell shows it: four significant digits, whole numbers with
    thousands separators from 10,000 up, ``inf``/``-inf``/``nan`` spelled out."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if abs(x) >= 1e4:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def markdown_table(table: Table) -> str:
    """The table as GitHub-flavoured Markdown (header = the Parquet column names)."""
    numeric = (ColumnType.LONG, ColumnType.DOUBLE)
    aligns = ["---:" if t in numeric else "---" for _, t in table.columns]
    lines = ["| " + " | ".join(table.names) + " |", "|" + "|".join(aligns) + "|"]
    for row in table.rows:
        cells = (format_cell(v, t) for v, (_, t) in zip(row, table.columns, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def arrow_table(table: Table) -> Any:
    """The table as a ``pyarrow.Table`` with the declared column types."""
    import pyarrow as pa

    return pa.Table.from_pylist(table.records(), schema=arrow_schema(table.columns))


def arrow_schema(columns: Sequence[tuple[str, ColumnType]]) -> Any:
    import pyarrow as pa

    types = {
        ColumnType.STRING: pa.string(),
        ColumnType.LONG: pa.int64(),
        ColumnType.DOUBLE: pa.float64(),
        ColumnType.BOOL: pa.bool_(),
    }
    return pa.schema([pa.field(n, types[t]) for n, t in columns])


def write_table(table: Table, directory: Path) -> TableFiles:
    """Write ``<name>.parquet`` and ``<name>.md`` (title, description, table)."""
    import pyarrow.parquet as pq

    directory.mkdir(parents=True, exist_ok=True)
    parquet = directory / f"{table.name}.parquet"
    pq.write_table(arrow_table(table), parquet)
    markdown = directory / f"{table.name}.md"
    body = markdown_table(table) if table.rows else "(no rows)"
    markdown.write_text(f"# {table.title}\n\n{table.description}\n\n{body}\n")
    return TableFiles(parquet, markdown)


def _coerce(value: Any, type_: ColumnType) -> Any:
    if value is None:
        return None
    if type_ is ColumnType.DOUBLE:
        return float(value)
    if type_ is ColumnType.LONG:
        return int(value)
    if type_ is ColumnType.BOOL:
        return bool(value)
    return str(value)
