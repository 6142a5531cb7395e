"""The comparison job: a run directory's results in, a report and its regressions out.

Input (``RUN_DIR``):

- ``results/*.parquet``: rows of the results schema (:mod:`connmgr.bench.schema`), as files
  or as Spark-written dataset directories;
- ``micro/*.json`` (optional): pytest-benchmark ``--benchmark-json`` files.

Everything is checked before anything is compared. Broken input raises
:class:`~connmgr.bench.schema.ResultsError` naming the file and the problem: no results, an
unreadable file, a file of another schema, an impossible value, a duplicated row, a result
with nothing to pair with.

Pairing: a ``proposed`` row is paired with every other policy's row of the same
``(kind, point, repeat)``. Each pair gives ratios proposed / baseline (0/0 = 1; x/0 = inf,
worse); each ``(kind, point, baseline)`` gets, over its pairs, the median of every metric on
both sides, the median ratio and the ratio's min and max.

Regressions: a ``(kind, point, baseline)`` regresses when the proposal's median ``opened``,
``peak`` or ``steady`` is above the baseline's (sockets are exact: no tolerance), when its
median time-to-first-ack or -consume ratio is above ``1 + tolerance`` and the medians differ
by more than :data:`TIMING_SLACK_MS` (on loopback a millisecond is noise, and a ratio of two
4-ms figures swings by a third), or when its median throughput ratio is below
``1 - tolerance``.

The aggregation runs in Spark; only aggregated rows come back to the driver (no pandas).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import unquote, urlparse

from connmgr.bench import plots, report, schema
from connmgr.bench.report import (
    METRICS,
    PROPOSED,
    SOCKET_METRICS,
    THROUGHPUT_METRICS,
    TIMING_METRICS,
    MicroBenchmark,
    MicroFile,
    Regression,
    TableFiles,
)
from connmgr.bench.schema import ResultsError
from connmgr.errors import ConfigError

POINT_PARAMS = (
    "scenario",
    "client",
    "brokers",
    "bootstrap_size",
    "leaders",
    "coordinator_shared",
    "idle_disabled",
    "rtt_ms",
)
"""Columns every row of one (kind, point) must agree on."""

NON_NEGATIVE = (
    "repeat",
    "leaders",
    "rtt_ms",
    "wall_s",
    "opened",
    "failed",
    "peak",
    "steady",
    *(f"{what}_{role}" for role in schema.ROLES for what in ("opened", "steady")),
    "handshakes",
    "handshakes_avoided",
    "misrouted",
    "records",
    "events",
)
POSITIVE = ("brokers", "bootstrap_size", "duration_ms", "ttfa_ms", "ttfc_ms", "throughput_rps")
"""A zero here is impossible: a cluster has a broker, the first ack takes time, and a turn
that acknowledged nothing has no throughput (the runner must fail instead)."""


@dataclass(frozen=True)
class Comparison:
    """What :func:`run_comparison` wrote and found."""

    run_dir: Path
    out: Path
    index: Path
    tolerance: float
    rows: Mapping[str, int]
    """Result rows per kind."""
    regressions: tuple[Regression, ...]
    tables: Mapping[str, TableFiles]
    plots: Mapping[str, Path]
    micro: tuple[MicroBenchmark, ...]

    @property
    def ok(self) -> bool:
        """No regression."""
        return not self.regressions


# --------------------------------------------------------------------------- input files


def result_files(run_dir: Path) -> list[Path]:
    """The Parquet files under ``run_dir/results``, each checked against the schema's
    columns and types (from its footer, without reading the data)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    where = run_dir / "results"
    if not where.is_dir():
        raise ResultsError(f"{where}: no results directory (the run wrote no results)")
    files: list[Path] = []
    for entry in sorted(where.glob("*.parquet")):
        if entry.is_dir():  # a dataset Spark wrote: its part files
            files += sorted(
                p for p in entry.rglob("*.parquet") if not p.name.startswith(("_", "."))
            )
        else:
            files.append(entry)
    if not files:
        raise ResultsError(f"{where}: no *.parquet results files (empty grid)")
    expected = schema.arrow_schema()
    for f in files:
        try:
            found = pq.read_schema(f)
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{f}: not a readable Parquet file ({e})") from e
        schema.check_columns(found.names, str(f))
        for name in found.names:
            have, want = found.field(name).type, expected.field(name).type
            if have != want:
                raise ResultsError(
                    f"{f}: column {name} is {have}, results schema "
                    f"v{schema.SCHEMA_VERSION} says {want}"
                )
    return files


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


# --------------------------------------------------------------------------- Spark job


def _file_path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def load_results(spark: Any, files: Sequence[Path]) -> Any:
    """All results rows as one DataFrame of the schema, plus ``_file`` (the path each row
    came from), cached. Checks every row (nulls, kinds, impossible values) and the pairing;
    raises :class:`ResultsError` naming the files at fault."""
    from pyspark.sql import functions as F

    df = (
        spark.read.schema(schema.spark_ddl())
        .parquet(*(str(f) for f in files))
        .withColumn("_file", F.col("_metadata.file_path"))
        .cache()
    )
    try:
        _check_rows(df, files)
        _check_pairing(df)
    except ResultsError:
        df.unpersist()
        raise
    except Exception as e:  # py4j carries Spark's errors; only a file read failure is ours
        df.unpersist()
        text = str(e)
        named = [str(f) for f in files if str(f) in text or f.as_uri() in text]
        if not named:
            raise
        why = next((line for line in text.splitlines() if "FAILED_READ_FILE" in line), "")
        raise ResultsError(
            f"{', '.join(named)}: Spark could not read the results ({why.strip()[:300]})"
        ) from e
    return df


def _check_rows(df: Any, files: Sequence[Path]) -> None:
    from pyspark.sql import functions as F

    checks: list[tuple[str, Any]] = []
    for c in schema.COLUMNS:
        if not c.nullable:
            checks.append((f"{c.name} null (the schema requires a value)", F.col(c.name).isNull()))
        if c.type is schema.ColumnType.DOUBLE:
            checks.append((f"{c.name} NaN", F.isnan(c.name)))
    checks.append(
        (f"schema_version other than {schema.SCHEMA_VERSION}", F.col("schema_version") != 1)
    )
    kinds = [k.value for k in schema.Kind]
    checks.append((f"kind not one of {', '.join(kinds)}", ~F.col("kind").isin(kinds)))
    checks += [(f"{n} < 0", F.col(n) < 0) for n in NON_NEGATIVE]
    checks += [(f"{n} <= 0 (it must be positive)", F.col(n) <= 0) for n in POSITIVE]
    counted = (
        df.groupBy("_file")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            *(
                F.sum(F.when(cond, 1).otherwise(0)).alias(f"c{i}")
                for i, (_, cond) in enumerate(checks)
            ),
        )
        .collect()
    )
    problems = [
        f"{_file_path(r['_file'])}: {r[f'c{i}']} row(s) with {text}"
        for r in sorted(counted, key=lambda r: str(r["_file"]))
        for i, (text, _) in enumerate(checks)
        if r[f"c{i}"]
    ]
    _raise_if(problems)
    if sum(r["rows"] for r in counted) == 0:
        where = ", ".join(str(f) for f in files)
        raise ResultsError(f"{where}: the results files hold no rows (empty grid)")


def _check_pairing(df: Any) -> None:
    from pyspark.sql import functions as F

    is_proposed = F.when(F.col("policy") == PROPOSED, 1).otherwise(0)
    files = F.array_sort(F.collect_set("_file")).alias("files")
    policies = F.array_join(F.array_sort(F.collect_set("policy")), ", ").alias("policy")
    cols = ("problem", "kind", "point", "policy", "repeat", "files", "n")
    duplicate = (
        df.groupBy("kind", "point", "policy", "repeat")
        .agg(F.count(F.lit(1)).alias("n"), files)
        .where("n > 1")
        .withColumn("problem", F.lit("duplicate"))
    )
    per_repeat = df.groupBy("kind", "point", "repeat").agg(
        F.sum(is_proposed).alias("np"), F.count(F.lit(1)).alias("n"), files, policies
    )
    unpaired = per_repeat.where("np > 0 AND n = np").withColumn("problem", F.lit("unpaired"))
    per_point = df.groupBy("kind", "point").agg(
        F.sum(is_proposed).alias("np"),
        F.count_distinct(F.struct(*POINT_PARAMS)).alias("n"),
        files,
        policies,
    )
    orphan = (
        per_point.where("np = 0")
        .withColumn("problem", F.lit("orphan"))
        .withColumn("repeat", F.lit(None).cast("bigint"))
    )
    mixed = (
        per_point.where("n > 1")
        .withColumn("problem", F.lit("mixed"))
        .withColumn("repeat", F.lit(None).cast("bigint"))
    )
    found = (
        duplicate.select(*cols)
        .unionByName(unpaired.select(*cols))
        .unionByName(orphan.select(*cols))
        .unionByName(mixed.select(*cols))
        .orderBy("problem", "kind", "point", "repeat")
        .limit(20)
        .collect()
    )
    problems = []
    for r in found:
        where = ", ".join(_file_path(f) for f in r["files"])
        at = f"kind={r['kind']} point={r['point']!r}"
        problems.append(
            {
                "duplicate": f"{where}: {r['n']} rows of policy {r['policy']} at {at} "
                f"repeat={r['repeat']} (each must appear once)",
                "unpaired": f"{where}: proposed row at {at} repeat={r['repeat']} has no "
                "baseline to pair with (no other policy ran that point and repeat)",
                "orphan": f"{where}: rows of {r['policy']} at {at} have no proposed row at "
                "that point to compare with",
                "mixed": f"{where}: rows at {at} disagree on the point's parameters "
                f"({', '.join(POINT_PARAMS)})",
            }[r["problem"]]
        )
    _raise_if(problems)


def _raise_if(problems: Sequence[str]) -> None:
    if problems:
        more = f" (and more; first {len(problems)} shown)" if len(problems) >= 20 else ""
        raise ResultsError("; ".join(problems) + more)


def _ratio(p: Any, b: Any) -> Any:
    """proposed / baseline; 0/0 = 1 and x/0 = inf (worse); null if either is null."""
    from pyspark.sql import functions as F

    return (
        F.when(p.isNull() | b.isNull(), F.lit(None).cast("double"))
        .when(b == 0, F.when(p == 0, F.lit(1.0)).otherwise(F.lit(math.inf)))
        .otherwise(p / b)
    )


TIMING_SLACK_MS = 5.0
"""A time-to-first-ack/consume regression must also be this many ms slower (medians)."""


def pair_summary(df: Any, tolerance: float) -> Any:
    """Per (kind, point, baseline): the point's parameters, ``repeats`` (pairs), and for
    every metric ``m``: ``m_proposed``, ``m_baseline`` (medians over the pairs where both
    are set), ``m_ratio`` (median ratio), ``m_ratio_min``, ``m_ratio_max``; then the flags
    ``worse_<m>`` of the regression rules and ``regressed`` (any of them)."""
    from pyspark.sql import functions as F

    keys = ("kind", "point", "repeat")
    prop = df.where(F.col("policy") == PROPOSED).select(
        *keys, *POINT_PARAMS, *(F.col(m).cast("double").alias(f"p_{m}") for m in METRICS)
    )
    base = df.where(F.col("policy") != PROPOSED).select(
        *keys,
        F.col("policy").alias("baseline"),
        *(F.col(m).cast("double").alias(f"b_{m}") for m in METRICS),
    )
    pairs = prop.join(base, list(keys))
    pairs = pairs.select(
        "*", *(_ratio(F.col(f"p_{m}"), F.col(f"b_{m}")).alias(f"r_{m}") for m in METRICS)
    )
    aggs = [F.first(c).alias(c) for c in POINT_PARAMS] + [F.count(F.lit(1)).alias("repeats")]
    for m in METRICS:
        both = F.col(f"r_{m}").isNotNull()
        aggs += [
            F.median(F.when(both, F.col(f"p_{m}"))).alias(f"{m}_proposed"),
            F.median(F.when(both, F.col(f"b_{m}"))).alias(f"{m}_baseline"),
            F.median(f"r_{m}").alias(f"{m}_ratio"),
            F.min(f"r_{m}").alias(f"{m}_ratio_min"),
            F.max(f"r_{m}").alias(f"{m}_ratio_max"),
        ]
    summary = pairs.groupBy("kind", "point", "baseline").agg(*aggs)
    flags = {
        **{m: F.col(f"{m}_proposed") > F.col(f"{m}_baseline") for m in SOCKET_METRICS},
        **{
            m: (F.col(f"{m}_ratio") > 1 + tolerance)
            & (F.col(f"{m}_proposed") - F.col(f"{m}_baseline") > TIMING_SLACK_MS)
            for m in TIMING_METRICS
        },
        **{m: F.col(f"{m}_ratio") < 1 - tolerance for m in THROUGHPUT_METRICS},
    }
    summary = summary.select(
        "*", *(F.coalesce(c, F.lit(False)).alias(f"worse_{m}") for m, c in flags.items())
    )
    regressed = F.lit(False)
    for m in flags:
        regressed = regressed | F.col(f"worse_{m}")
    return summary.withColumn("regressed", regressed)


# --------------------------------------------------------------------------- the job


def _records(rows: Sequence[Any]) -> list[dict[str, Any]]:
    return [r.asDict() for r in rows]


def _int_sum(col: str) -> Any:
    from pyspark.sql import functions as F

    return F.sum(F.col(col).cast("int"))


def _gather(df: Any, summary: Any) -> dict[str, list[dict[str, Any]]]:
    """Every aggregate the report needs, collected to the driver (all small)."""
    from pyspark.sql import functions as F

    not_sweep = F.col("kind") != schema.Kind.SWEEP.value
    got: dict[str, list[dict[str, Any]]] = {}
    got["meta"] = _records(
        df.groupBy("kind")
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.count_distinct("point").alias("points"),
            F.array_join(F.array_sort(F.collect_set("policy")), ", ").alias("policies"),
            F.count_distinct("repeat").alias("repeats"),
            F.sum("wall_s").alias("wall_s"),
            F.collect_set("run_id").alias("run_ids"),
            F.collect_set("git_commit").alias("git_commits"),
            F.collect_set("versions").alias("versions"),
            F.collect_set("machine").alias("machines"),
            F.min("created_at").alias("first"),
            F.max("created_at").alias("last"),
        )
        .collect()
    )
    got["comparison"] = _records(summary.where(not_sweep).collect())
    has_sweep = any(m["kind"] == schema.Kind.SWEEP.value for m in got["meta"])
    if has_sweep:
        got["regressed"] = _records(summary.where("regressed").collect())
    else:  # every comparison is already here: spare Spark a job
        got["regressed"] = [r for r in got["comparison"] if r["regressed"]]
    got["headline"] = _records(
        summary.groupBy("kind", "baseline")
        .agg(
            F.count(F.lit(1)).alias("points"),
            F.median("opened_ratio").alias("opened_ratio"),
            F.median("peak_ratio").alias("peak_ratio"),
            F.max("peak_ratio").alias("peak_ratio_worst"),
            F.median("steady_ratio").alias("steady_ratio"),
            F.max("steady_ratio").alias("steady_ratio_worst"),
            *(
                F.median(f"{m}_ratio").alias(f"{m}_ratio")
                for m in (*TIMING_METRICS, *THROUGHPUT_METRICS)
            ),
            _int_sum("regressed").alias("regressed_points"),
        )
        .collect()
    )
    role_cols = [f"{w}_{role}" for role in schema.ROLES for w in ("opened", "steady")]
    got["roles"] = _records(
        df.where(not_sweep)
        .groupBy("kind", "scenario", "point", "policy")
        .agg(
            F.first("brokers").alias("brokers"),
            F.count(F.lit(1)).alias("repeats"),
            *(F.median(c).alias(c) for c in role_cols),
        )
        .collect()
    )
    # The sweep draws thousands of distinct broker counts: binned, as in sweep-savings.
    binned = F.when(
        F.col("kind") == schema.Kind.SWEEP.value, _broker_bin(F.col("brokers"))
    ).otherwise(F.col("brokers"))
    got["brokers"] = _records(
        df.withColumn("brokers", binned)
        .groupBy("kind", "scenario", "policy", "brokers")
        .agg(
            F.count_distinct("point").alias("points"),
            F.count(F.lit(1)).alias("runs"),
            *(F.median(m).alias(m) for m in SOCKET_METRICS),
        )
        .collect()
    )
    got["raw"] = _records(
        df.where(
            F.col("ttfa_ms").isNotNull()
            | F.col("ttfc_ms").isNotNull()
            | F.col("throughput_rps").isNotNull()
        )
        .select(
            "kind",
            "scenario",
            "client",
            "rtt_ms",
            "point",
            "policy",
            "repeat",
            "ttfa_ms",
            "ttfc_ms",
            "throughput_rps",
        )
        .collect()
    )
    got["sweep"] = []
    if has_sweep:
        got["sweep"] = _records(
            summary.where(F.col("kind") == schema.Kind.SWEEP.value)
            .withColumn("brokers", _broker_bin(F.col("brokers")))
            .groupBy("baseline", "brokers")
            .agg(
                F.count(F.lit(1)).alias("points"),
                *((1 - F.median(f"{m}_ratio")).alias(f"{m}_saving") for m in SOCKET_METRICS),
                F.median("peak_proposed").alias("peak_proposed"),
                F.median("peak_baseline").alias("peak_baseline"),
                _int_sum("regressed").alias("regressed_points"),
            )
            .collect()
        )
    return got


BROKER_BUCKETS = (1, 3, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000)
"""The sweep's broker counts are summarised in these bins (1-2-5 steps, lower edges): a
100,000-point sweep draws thousands of distinct counts."""


def _broker_bin(brokers: Any) -> Any:
    """The :data:`BROKER_BUCKETS` lower edge at or below ``brokers`` (a Spark column)."""
    from pyspark.sql import functions as F

    binned = F.lit(BROKER_BUCKETS[0])
    for edge in BROKER_BUCKETS[1:]:
        binned = F.when(brokers >= edge, F.lit(edge)).otherwise(binned)
    return binned


def _write_sweep_points(summary: Any, path: Path) -> int:
    """Stream the sweep's per-point comparisons into one Parquet file (it can be large:
    rows come back a partition at a time, never all at once). Returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    cols = report.COMPARISON_COLUMNS
    arrow = report.arrow_schema(cols)
    rows = (
        summary.where(F.col("kind") == schema.Kind.SWEEP.value)
        .orderBy("brokers", "point", "baseline")
        .select(*(n for n, _ in cols))
        .toLocalIterator()
    )
    count = 0
    with pq.ParquetWriter(path, arrow) as writer:
        batch: list[dict[str, Any]] = []
        for row in rows:
            batch.append(row.asDict())
            if len(batch) == 10_000:
                writer.write_table(pa.Table.from_pylist(batch, schema=arrow))
                count, batch = count + len(batch), []
        writer.write_table(pa.Table.from_pylist(batch, schema=arrow))
        count += len(batch)
    return count


_PLOTS = (
    (
        "sockets-vs-brokers",
        "Sockets against cluster size",
        "Median peak and steady sockets per policy as the cluster grows (log scale).",
    ),
    (
        "sockets-by-role",
        "Sockets by role",
        "Sockets opened per policy, split by the role the connection played.",
    ),
    (
        "latency",
        "Time to first ack / consume",
        "Per real client and injected RTT, over repeats.",
    ),
    (
        "throughput",
        "Throughput A/B",
        "Median records per second per client, with the min-max over repeats.",
    ),
    (
        "sweep-savings",
        "Sweep savings",
        "Share of sockets the proposal saves against each baseline, by broker count.",
    ),
)


def run_comparison(
    spark: Any,
    run_dir: Path,
    out: Path,
    *,
    tolerance: float = 0.25,
    extra_sections: Sequence[tuple[str, str]] = (),
    extra_tables: Sequence[report.Table] = (),
    regenerate: str | None = None,
) -> Comparison:
    """Compare the proposal with every baseline over ``run_dir``'s results and write the
    report into ``out``: ``out/tables/*.parquet`` and ``*.md``, ``out/plots/*.png`` and
    ``out/index.md`` (``tables/`` and ``plots/`` are emptied first; nothing else in ``out``
    is touched).

    ``tolerance`` bounds the timing and throughput ratios (sockets have none).
    ``extra_sections`` are (title, Markdown) sections that ``index.md`` shows before "How to
    regenerate"; ``extra_tables`` are written and shown with the others (the property
    stage's); ``regenerate`` replaces that section's text. Raises :class:`ResultsError`
    on broken input, before writing anything; returns the :class:`Comparison`, whose
    ``regressions`` decide the exit status."""
    if not 0 <= tolerance < 1:
        raise ConfigError(f"tolerance={tolerance!r}: must be in [0, 1)")
    files = result_files(run_dir)
    micro_files = load_micro(run_dir)
    micro = tuple(b for f in micro_files for b in f.benchmarks)
    df = load_results(spark, files)
    tables_dir, plots_dir = out / "tables", out / "plots"
    try:
        summary = pair_summary(df, tolerance).cache()
        try:
            got = _gather(df, summary)
            for d in (tables_dir, plots_dir):
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
            sweep_points = None
            if got["sweep"]:
                sweep_points = tables_dir / "sweep-points.parquet"
                _write_sweep_points(summary, sweep_points)
        finally:
            summary.unpersist()
    finally:
        df.unpersist()

    regressed = sorted(
        got["regressed"], key=lambda r: (r["kind"], r["scenario"], r["point"], r["baseline"])
    )
    regressions = tuple(report.regressions_of(regressed, tolerance))
    headline = report.headline_table(got["headline"])
    runs = report.runs_table(got["meta"])
    regressions_t = report.regressions_table(regressions)
    decisions = report.decision_table(micro)
    simulator = report.simulator_table(micro)
    content = [
        report.sockets_table(got["comparison"]),
        report.roles_table(got["roles"]),
        report.brokers_table(got["brokers"]),
        report.latency_table(got["comparison"]),
        report.throughput_table(got["comparison"]),
        decisions,
        simulator,
    ]
    other = report.other_micro_table(micro)
    if other.rows:
        content.append(other)
    if got["sweep"]:
        content.append(report.sweep_savings_table(got["sweep"]))
    content.extend(extra_tables)
    content.append(report.comparison_table(got["comparison"]))
    written = {
        t.name: report.write_table(t, tables_dir) for t in (headline, runs, regressions_t, *content)
    }
    if sweep_points is not None:
        written["sweep-points"] = TableFiles(sweep_points, None)

    drawn: dict[str, Path] = {}
    sources = {
        "sockets-vs-brokers": (plots.sockets_vs_brokers, got["brokers"]),
        "sockets-by-role": (plots.sockets_by_role, got["roles"]),
        "latency": (plots.latency, got["raw"]),
        "throughput": (plots.throughput, got["raw"]),
        "sweep-savings": (plots.sweep_savings, report.sweep_savings_table(got["sweep"]).records()),
    }
    plot_entries: list[tuple[str, str, Path]] = []
    for name, title, caption in _PLOTS:
        draw, rows = sources[name]
        path = draw(rows, plots_dir / f"{name}.png")
        if path is not None:
            drawn[name] = path
            plot_entries.append((title, caption, path))

    counts = {str(m["kind"]): int(m["rows"]) for m in got["meta"]}
    run_ids = sorted({v for m in got["meta"] for v in m["run_ids"]})
    summary_text = (
        f"Compared from `{run_dir}`: {sum(counts.values())} result rows "
        f"({', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}) and {len(micro)} "
        f"micro-benchmarks. "
        + (
            f"**{len(regressions)} regression(s)**: see below."
            if regressions
            else "**No regressions.**"
        )
        + f" Sockets are compared exactly; timings and throughput within ±{tolerance:g}."
    )
    if sweep_points is not None:
        summary_text += (
            " The sweep's per-point comparisons are in `tables/sweep-points.parquet` "
            "(Parquet only: too many rows to read)."
        )
    page = report.Page(
        title=f"Benchmark report: {', '.join(run_ids)}",
        summary=summary_text,
        what_ran=report.what_ran_markdown(got["meta"], runs, micro_files)
        + _links(written["runs"], out),
        headline=report.headline_markdown(headline, decisions, simulator)
        + _links(written["headline"], out),
        regressions=report.regressions_markdown(regressions, tolerance, regressions_t)
        + _links(written["regressions"], out),
        tables=[(t, written[t.name]) for t in content],
        plots=plot_entries,
        extra_sections=tuple(extra_sections),
        regenerate=regenerate or _regenerate_text(run_dir, out, tolerance),
    )
    index = out / "index.md"
    index.write_text(report.render_index(page, out))
    return Comparison(
        run_dir=run_dir,
        out=out,
        index=index,
        tolerance=tolerance,
        rows=counts,
        regressions=regressions,
        tables=written,
        plots=drawn,
        micro=micro,
    )


def _links(files: TableFiles, out: Path) -> str:
    assert files.markdown is not None
    md, pq = (p.relative_to(out).as_posix() for p in (files.markdown, files.parquet))
    return f"\n\nThis table: [Markdown]({md}), [Parquet]({pq})."


def _regenerate_text(run_dir: Path, out: Path, tolerance: float) -> str:
    return (
        "The report is a function of the run directory alone (`results/*.parquet`, "
        "`micro/*.json`). To rebuild it:\n\n"
        "```python\n"
        "from pathlib import Path\n"
        "from connmgr.bench.compare import run_comparison\n"
        "from connmgr.bench.spark import spark_session\n\n"
        f'run_comparison(spark_session(), Path("{run_dir}"), Path("{out}"), '
        f"tolerance={tolerance!r})\n"
        "```"
    )
