"""A run's results, read and checked before anything is compared.

Input: ``RUN_DIR/results/*.parquet``, rows of the results schema
(:mod:`connmgr_evidence.bench.results.schema`), as files or as Spark-written dataset directories.
Broken input raises
:class:`~connmgr_evidence.bench.results.schema.ResultsError` naming the file and the problem: no
results, an
unreadable file, a file of another schema, an impossible value, a duplicated row, a result
with nothing to pair with (a ``proposed`` row is paired with every other policy's row of the
same ``(kind, point, repeat)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from connmgr_evidence.bench.report.metrics import PROPOSED
from connmgr_evidence.bench.results import schema
from connmgr_evidence.bench.results.schema import PAIR_KEYS, POINT_PARAMS, ResultsError

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
        schema.check_columns(found.names, str(f), schema.file_version(found, str(f)))
        for name in found.names:
            have, want = found.field(name).type, expected.field(name).type
            if have != want:
                raise ResultsError(
                    f"{f}: column {name} is {have}, results schema "
                    f"v{schema.SCHEMA_VERSION} says {want}"
                )
    return files


def _file_path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _driver_table(files: Sequence[Path]) -> Any:
    """Every file's rows as one Arrow table of the schema plus ``_file`` (its path)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # Every column nullable, as Spark reads them: a null where the schema forbids one is
    # found and reported by the row checks, with its file.
    expected = pa.schema([f.with_nullable(True) for f in schema.arrow_schema()])
    tables = []
    for f in files:
        try:
            table = pq.read_table(f, schema=expected)
        except (pa.ArrowException, OSError) as e:
            raise ResultsError(f"{f}: Spark could not read the results ({e})") from e
        path = pa.array([str(f.resolve().as_uri())] * table.num_rows, type=pa.string())
        tables.append(table.append_column("_file", path))
    return pa.concat_tables(tables)


def load_results(spark: Any, files: Sequence[Path]) -> Any:
    """All results rows as one DataFrame of the schema, plus ``_file`` (the path each row
    came from), cached. Checks every row (nulls, kinds, impossible values) and the pairing;
    raises :class:`ResultsError` naming the files at fault."""
    # Read here, on the driver, and hand Spark the rows: the executors of a cluster need
    # not see this machine's files (--out on a disk the workers do not share).
    df = spark.createDataFrame(_driver_table(files)).cache()
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
        (
            f"schema_version other than 1 to {schema.SCHEMA_VERSION}",
            ~F.col("schema_version").isin(list(range(1, schema.SCHEMA_VERSION + 1))),
        )
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
    per_repeat = df.groupBy(*PAIR_KEYS).agg(
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
