"""The broker-side export ``estimate jmx`` reads: one row per (time, broker, listener,
network processor), as CSV or JSON, with errors that name the file, line and field.

Columns (CSV header names; the same keys in JSON objects)::

    time                       ISO-8601 (2026-11-29T05:00:00Z) or Unix seconds
    broker                     the broker id
    listener                   the listener name; empty: a broker-wide total
    network_processor          the processor id; empty: already summed over processors
    connection_count           kafka.server:type=socket-server-metrics,listener=L,
                               networkProcessor=N  attribute connection-count
    connection_creation_rate   ... attribute connection-creation-rate (per second), optional
    connection_creation_total  ... attribute connection-creation-total, optional
    up                         optional: false when the broker could not be scraped

JSON is ``{"samples": [{...}, ...]}`` or a bare list of such objects. Per (time, broker) the
reader sums a listener's per-processor rows, or takes its summed row where it has no
per-processor rows; a broker-wide row (empty listener) counts only when the broker has no
listener rows at that time, so nothing is counted twice. A creation rate missing from the
export is derived from the totals: (total now - total before) / seconds between (a total
that went down was reset by a broker restart: the new total is what it created since).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

COLUMNS: Final = (
    "time",
    "broker",
    "listener",
    "network_processor",
    "connection_count",
    "connection_creation_rate",
    "connection_creation_total",
    "up",
)
REQUIRED: Final = ("time", "broker", "connection_count")


class ExportError(ValueError):
    """An export that cannot be read; the message names the file, line and field."""


@dataclass(frozen=True, slots=True)
class Row:
    line: int
    t_s: float
    broker: int
    listener: str
    processor: str
    count: float | None
    rate: float | None
    total: float | None
    up: bool


@dataclass(frozen=True, slots=True)
class Sample:
    """One broker at one scrape, summed over its listeners (and their processors)."""

    t_s: float
    broker: int
    up: bool
    connections: float
    creation_rate: float | None
    """Connections created per second: the export's rate, or derived from its totals (None
    for the broker's first sample when only totals are given)."""
    creation_total: float | None


def _time(text: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ExportError(
            f"{where}: time: expected ISO-8601 or Unix seconds, got {text!r}"
        ) from None


def _number(value: Any, field: str, where: str, *, required: bool = False) -> float | None:
    if value is None or value == "":
        if required:
            raise ExportError(f"{where}: {field}: missing")
        return None
    if isinstance(value, bool):
        raise ExportError(f"{where}: {field}: expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ExportError(f"{where}: {field}: expected a number, got {value!r}") from None
    if math.isnan(number) or number < 0:
        raise ExportError(f"{where}: {field}: expected a number >= 0, got {value!r}")
    return number


def _row(raw: Mapping[str, Any], where: str, line: int) -> Row:
    for field in REQUIRED:
        if field not in raw:
            raise ExportError(f"{where}: {field}: missing")
    up_raw = raw.get("up", True)
    if isinstance(up_raw, str):
        if up_raw.strip().lower() not in ("", "true", "false", "1", "0"):
            raise ExportError(f"{where}: up: expected true or false, got {up_raw!r}")
        up = up_raw.strip().lower() not in ("false", "0")
    elif isinstance(up_raw, bool):
        up = up_raw
    else:
        raise ExportError(f"{where}: up: expected true or false, got {up_raw!r}")
    try:
        broker = int(str(raw["broker"]))
    except ValueError:
        raise ExportError(f"{where}: broker: expected an integer, got {raw['broker']!r}") from None
    return Row(
        line,
        _time(str(raw["time"]), where),
        broker,
        str(raw.get("listener") or ""),
        str(raw.get("network_processor") if raw.get("network_processor") is not None else ""),
        _number(raw.get("connection_count"), "connection_count", where, required=up),
        _number(raw.get("connection_creation_rate"), "connection_creation_rate", where),
        _number(raw.get("connection_creation_total"), "connection_creation_total", where),
        up,
    )


def read_export(path: Path) -> list[Row]:
    """Every row of the export at ``path`` (``.json``: JSON; anything else: CSV)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError(f"{path}: cannot read: {exc}") from exc
    return parse_export(text, str(path), json_format=path.suffix.lower() == ".json")


def parse_export(text: str, name: str = "<export>", *, json_format: bool = False) -> list[Row]:
    """:func:`read_export` on ``text``."""
    rows: list[Row] = []
    if json_format:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ExportError(f"{name}:{exc.lineno}: not JSON: {exc.msg}") from None
        samples = data.get("samples") if isinstance(data, dict) else data
        if not isinstance(samples, list):
            raise ExportError(f'{name}: expected a list of samples or {{"samples": [...]}}')
        for i, raw in enumerate(samples):
            where = f"{name}: samples[{i}]"
            if not isinstance(raw, dict):
                raise ExportError(f"{where}: expected an object")
            rows.append(_row(raw, where, i))
        return rows
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None:
        raise ExportError(f"{name}:1: empty: expected a header with {', '.join(REQUIRED)}")
    unknown = [f for f in reader.fieldnames if f not in COLUMNS]
    if unknown:
        raise ExportError(f"{name}:1: unknown column {unknown[0]!r}; known: {', '.join(COLUMNS)}")
    for field in REQUIRED:
        if field not in reader.fieldnames:
            raise ExportError(f"{name}:1: {field}: missing column")
    for raw in reader:
        where = f"{name}:{reader.line_num}"
        if None in raw:
            raise ExportError(f"{where}: more fields than the header's")
        rows.append(_row(raw, where, reader.line_num))
    return rows


def samples(rows: Iterable[Row], listener: str | None = None) -> dict[int, list[Sample]]:
    """Broker -> its samples in time order (``listener``: that listener alone)."""
    grouped: dict[tuple[int, float], list[Row]] = defaultdict(list)
    for r in rows:
        if listener is None or r.listener == listener:
            grouped[(r.broker, r.t_s)].append(r)
    out: dict[int, list[Sample]] = defaultdict(list)
    for (broker, t), group in sorted(grouped.items()):
        up = all(r.up for r in group)
        if not up:
            out[broker].append(Sample(t, broker, False, 0.0, None, None))
            continue
        chosen = _counted(group)
        rates = [r.rate for r in chosen]
        totals = [r.total for r in chosen]
        out[broker].append(
            Sample(
                t,
                broker,
                True,
                sum(r.count or 0.0 for r in chosen),
                None if None in rates else sum(x or 0.0 for x in rates),
                None if None in totals else sum(x or 0.0 for x in totals),
            )
        )
    return {b: _with_rates(s) for b, s in sorted(out.items())}


def _counted(group: Sequence[Row]) -> list[Row]:
    """The rows that count, each connection once: per listener its per-processor rows, else
    its summed row; the broker-wide row only without listener rows."""
    by_listener: dict[str, list[Row]] = defaultdict(list)
    for r in group:
        by_listener[r.listener].append(r)
    named = {k: v for k, v in by_listener.items() if k}
    if not named:
        return list(by_listener.get("", []))
    chosen: list[Row] = []
    for rows in named.values():
        per_processor = [r for r in rows if r.processor]
        chosen += per_processor or rows
    return chosen


def _with_rates(series: list[Sample]) -> list[Sample]:
    """Fill in the creation rates the export left out, from the totals: since the broker's
    last readable sample; a broker that was down in between, or whose total went down, has
    restarted, and its new total is what it created since."""
    out: list[Sample] = []
    last_up: Sample | None = None
    down_since = False
    for s in series:
        rate = s.creation_rate
        if not s.up:
            down_since = True
        elif (
            rate is None
            and s.creation_total is not None
            and last_up is not None
            and last_up.creation_total is not None
            and s.t_s > last_up.t_s
        ):
            created = s.creation_total - last_up.creation_total
            if down_since or created < 0:
                created = s.creation_total
            rate = created / (s.t_s - last_up.t_s)
        out.append(Sample(s.t_s, s.broker, s.up, s.connections, rate, s.creation_total))
        if s.up:
            last_up, down_since = s, False
    return out
