"""The one results schema of the main job: every benchmark run is one row of it.

A row is one run of one policy or client through one grid point, for one repeat. The
simulator, the real-client runs and the Spark sweep all write rows of this schema, the
comparison job reads nothing else (apart from pytest-benchmark's JSON), and
``docs/results-schema.md`` documents it column by column (a test keeps the two in step).

The schema is declared once, here, as :data:`COLUMNS`; the pyarrow schema (for writing
Parquet without a JVM) and the Spark DDL (for reading it) are both derived from it, so
they cannot drift.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.core.identity import Role
from connmgr.docblocks import refresh
from connmgr.errors import ConfigError

SCHEMA_VERSION = 2
"""Bumped whenever a column is added, removed, renamed or retyped. v2 added the life
columns (``horizon_s``, ``socket_s_per_h``, ``handshakes_per_h`` and their roles); a v1
file is still read, its rows with those columns null."""


class Kind(enum.Enum):
    """Where a row's numbers come from."""

    SIM = "sim"
    """The simulator, driving the policy code on a modelled cluster."""
    REAL = "real"
    """A real client (stock aiokafka, the proposed aiokafka client, the real Java client,
    librdkafka) on the embedded cluster."""
    SWEEP = "sweep"
    """The simulator run inside Spark tasks over the large grid."""


class ColumnType(enum.Enum):
    STRING = "string"
    LONG = "bigint"
    DOUBLE = "double"
    BOOL = "boolean"


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    nullable: bool
    doc: str
    since: int = 1
    """The schema version that added the column: a file of an earlier version lacks it and
    is read with it null (such a column is nullable)."""
    pair: bool = False
    """A key rows pair on: a ``proposed`` row is compared with every other policy's row of the
    same values (:data:`PAIR_KEYS`)."""
    point: bool = False
    """A parameter of the grid point: every row of one ``(kind, point)`` agrees on it
    (:data:`POINT_PARAMS`)."""


ROLES = tuple(r.value for r in Role)

STRING, LONG, DOUBLE, BOOL = ColumnType.STRING, ColumnType.LONG, ColumnType.DOUBLE, ColumnType.BOOL
"""The column types by the short names the tables' declarations use."""

COLUMNS: tuple[Column, ...] = (
    Column("schema_version", LONG, False, f"this schema's version ({SCHEMA_VERSION})"),
    Column("run_id", STRING, False, "the main-job run that wrote the row (also reports/<run-id>/)"),
    Column("kind", STRING, False, "sim, real or sweep (where the numbers come from)", pair=True),
    Column(
        "point",
        STRING,
        False,
        "the grid point: scenario and parameters as canonical text; rows pair on "
        "(kind, point, repeat)",
        pair=True,
    ),
    Column("scenario", STRING, False, "the scenario name (see `connmgr scenarios`)", point=True),
    Column(
        "policy",
        STRING,
        False,
        "sim/sweep: the policy (proposed, java-described, java-today, aiokafka-today); real: "
        "the client (proposed, aiokafka, librdkafka, java-<kafka-clients version>)",
    ),
    Column("client", STRING, False, "producer or consumer", point=True),
    Column("brokers", LONG, False, "brokers in the cluster", point=True),
    Column("bootstrap_size", LONG, False, "entries in bootstrap.servers", point=True),
    Column(
        "leaders", LONG, False, "distinct leader brokers of the workload's partitions", point=True
    ),
    Column(
        "coordinator_shared",
        BOOL,
        False,
        "the group coordinator is also a partition leader",
        point=True,
    ),
    Column("idle_disabled", BOOL, False, "connections.max.idle.ms = -1 on the client", point=True),
    Column("rtt_ms", DOUBLE, False, "RTT injected on every broker", point=True),
    Column("duration_ms", DOUBLE, False, "simulated duration (sim/sweep) or wall time (real)"),
    Column("repeat", LONG, False, "repeat number, from 0", pair=True),
    Column("seed", LONG, False, "the seed of the run (policy and client randomness)"),
    Column("opened", LONG, False, "sockets opened (dials that connected or failed)"),
    Column("failed", LONG, False, "dials that failed"),
    Column("peak", LONG, False, "most sockets open at once"),
    Column("steady", LONG, False, "sockets open at the steady state (end of the run)"),
    *(
        Column(f"{what}_{role}", LONG, True, f"{text} with role {role} (null: not measured)")
        for role in ROLES
        for what, text in (("opened", "sockets opened"), ("steady", "sockets open at the end"))
    ),
    Column(
        "handshakes",
        LONG,
        False,
        "connection set-ups completed (TCP + ApiVersions): opened - failed",
    ),
    Column(
        "handshakes_avoided", LONG, False, "bootstrap connections adopted instead of re-dialled"
    ),
    Column(
        "horizon_s",
        DOUBLE,
        True,
        "the span the life columns cover, s: from the client's start to the steady instant "
        "(sim/sweep: the simulated duration; null: not measured or a v1 row)",
        since=2,
    ),
    Column(
        "socket_s_per_h",
        DOUBLE,
        True,
        "socket-seconds per client-hour: the time-integral of open sockets (dial to close) "
        "over the horizon, scaled to one hour (= mean open sockets x 3600)",
        since=2,
    ),
    Column(
        "handshakes_per_h",
        DOUBLE,
        True,
        "connections established (TCP + ApiVersions; on a secured listener also its TLS/SASL "
        "exchange) per client-hour over the horizon",
        since=2,
    ),
    *(
        Column(f"{what}_{role}", DOUBLE, True, f"{text} with role {role}", since=2)
        for role in ROLES
        for what, text in (
            ("socket_s_per_h", "socket-seconds per client-hour"),
            ("handshakes_per_h", "handshakes per client-hour"),
        )
    ),
    Column("misrouted", LONG, True, "sim/sweep: requests that reached another broker than aimed"),
    Column("records", LONG, True, "real: records produced or consumed"),
    Column("ttfa_ms", DOUBLE, True, "real producer: start to first acknowledged record, ms"),
    Column("ttfc_ms", DOUBLE, True, "real consumer: start to first consumed record, ms"),
    Column(
        "throughput_rps",
        DOUBLE,
        True,
        "real A/B throughput rows: records acknowledged per second in this client's turn",
    ),
    Column("events", LONG, True, "sim/sweep: simulator events processed"),
    Column("wall_s", DOUBLE, False, "wall time of the run, s"),
    Column(
        "git_commit",
        STRING,
        False,
        "commit of the code that produced the row ('unknown' outside git)",
    ),
    Column(
        "versions", STRING, False, "JSON: versions of connmgr, Python, aiokafka, librdkafka, ..."
    ),
    Column("machine", STRING, False, "JSON: host platform, CPU count"),
    Column("created_at", STRING, False, "UTC ISO-8601 time the row was written"),
)

NAMES = tuple(c.name for c in COLUMNS)
PAIR_KEYS = tuple(c.name for c in COLUMNS if c.pair)
"""The columns rows pair on: (kind, point, repeat)."""
POINT_PARAMS = tuple(c.name for c in COLUMNS if c.point)
"""Columns every row of one (kind, point) must agree on: the point's parameters, which the
comparison carries into each (kind, point, subject, baseline)."""
LIFE_COLUMNS = tuple(c.name for c in COLUMNS if c.since == 2)
"""The life columns (schema v2): horizon, socket-seconds and handshakes per client-hour."""
BY_NAME = {c.name: c for c in COLUMNS}


class ResultsError(ConfigError):
    """A results file is missing, unreadable, or not of this schema. The message names the
    file and the problem."""


def spark_ddl() -> str:
    """The schema as a Spark DDL string (``name type, ...``)."""
    return ", ".join(f"`{c.name}` {c.type.value}" for c in COLUMNS)


def arrow_schema() -> Any:
    """The schema as a ``pyarrow.Schema``."""
    import pyarrow as pa

    types = {
        ColumnType.STRING: pa.string(),
        ColumnType.LONG: pa.int64(),
        ColumnType.DOUBLE: pa.float64(),
        ColumnType.BOOL: pa.bool_(),
    }
    return pa.schema(
        [pa.field(c.name, types[c.type], nullable=c.nullable) for c in COLUMNS],
        metadata={"connmgr.schema_version": str(SCHEMA_VERSION)},
    )


def check_row(row: Mapping[str, Any], where: str = "row") -> None:
    """Raise :class:`ResultsError` unless ``row`` has exactly the schema's columns, with
    values of the right types and no null in a non-nullable column."""
    missing = [n for n in NAMES if n not in row]
    extra = [n for n in row if n not in BY_NAME]
    if missing or extra:
        raise ResultsError(f"{where}: columns missing {missing}, unexpected {extra}")
    for c in COLUMNS:
        value = row[c.name]
        if value is None:
            if not c.nullable:
                raise ResultsError(f"{where}: {c.name} is null but the schema requires a value")
            continue
        ok = {
            ColumnType.STRING: isinstance(value, str),
            ColumnType.LONG: isinstance(value, int) and not isinstance(value, bool),
            ColumnType.DOUBLE: isinstance(value, int | float) and not isinstance(value, bool),
            ColumnType.BOOL: isinstance(value, bool),
        }[c.type]
        if not ok:
            raise ResultsError(f"{where}: {c.name}={value!r} is not a {c.type.value}")
    if row["kind"] not in {k.value for k in Kind}:
        raise ResultsError(f"{where}: kind={row['kind']!r} is not one of sim, real, sweep")


def write_parquet(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Check every row and write them to ``path`` as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for i, row in enumerate(rows):
        check_row(row, f"{path} row {i}")
    table = pa.Table.from_pylist(
        [{n: _coerce(BY_NAME[n], r[n]) for n in NAMES} for r in rows], schema=arrow_schema()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """The rows of one results file, checked against the schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.exists():
        raise ResultsError(f"{path}: no such results file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise ResultsError(f"{path}: not a readable Parquet file ({e})") from e
    check_columns(table.schema.names, str(path), file_version(table.schema, str(path)))
    rows: list[dict[str, Any]] = [{n: r.get(n) for n in NAMES} for r in table.to_pylist()]
    for i, row in enumerate(rows):
        check_row(row, f"{path} row {i}")
    return rows


def file_version(found: Any, where: str) -> int:
    """The schema version a Parquet file's schema (``pyarrow.Schema``) says it was written
    with (files without the marker are of v1, the first)."""
    raw = (found.metadata or {}).get(b"connmgr.schema_version", b"1")
    try:
        return int(raw)
    except ValueError as e:
        raise ResultsError(f"{where}: schema version {raw!r} is not a number") from e


def check_columns(names: Iterable[str], where: str, version: int = SCHEMA_VERSION) -> None:
    """Raise :class:`ResultsError` unless ``names`` are exactly the schema's columns as of
    schema ``version`` (a file of an older version lacks the columns added since)."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise ResultsError(
            f"{where}: results schema v{version}; this code reads v1 to v{SCHEMA_VERSION}"
        )
    have = list(names)
    missing = [n for n in NAMES if n not in have and BY_NAME[n].since <= version]
    extra = [n for n in have if n not in BY_NAME]
    if missing or extra:
        raise ResultsError(
            f"{where}: does not match results schema v{SCHEMA_VERSION}: "
            f"missing columns {missing}, unexpected columns {extra}"
        )


def _coerce(column: Column, value: Any) -> Any:
    if value is not None and column.type is ColumnType.DOUBLE:
        return float(value)
    return value


def json_text(value: Mapping[str, Any]) -> str:
    """Canonical JSON for the schema's JSON-valued string columns."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def columns_markdown() -> str:
    """The results schema as a Markdown table, for ``docs/results-schema.md`` (a test keeps
    the doc's copy equal to this)."""
    lines = ["| column | type | nullable | meaning |", "|---|---|---|---|"]
    for c in COLUMNS:
        doc = c.doc.replace("|", "\\|")
        lines.append(f"| `{c.name}` | {c.type.value} | {'yes' if c.nullable else 'no'} | {doc} |")
    return "\n".join(lines)


def update_columns_doc(path: Path) -> bool:
    """Rewrite the ``columns`` block of ``path`` (:mod:`connmgr.docblocks`) with
    :func:`columns_markdown`; True if it changed."""
    return refresh(path, {"columns": columns_markdown()})
