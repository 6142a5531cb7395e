"""The comparison's aggregation, in Spark: pairs, medians, ratios, regression flags, and
the summaries the report is made of.

Pairing: a ``proposed`` row is paired with every other policy's row of the same
``(kind, point, repeat)``, and the subject of each of
:data:`~connmgr_evidence.bench.report.metrics.PAIRS`
(the patched kafka-clients) with its baseline's row. Each pair gives ratios subject /
baseline (0/0 = 1; x/0 = inf, worse); each ``(kind, point, subject, baseline)`` gets, over
its pairs, the median of every metric on both sides, the median ratio and the ratio's min
and max, and the flags of the regression rules (:mod:`connmgr_evidence.bench.report.metrics`).

Only aggregated rows come back to the driver (no pandas), as the typed values of
:mod:`connmgr_evidence.bench.report.summaries`; the sweep's per-point comparisons, which can be
many, are
streamed to Parquet instead (:func:`write_sweep_points`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from connmgr_evidence.bench.report.metrics import (
    LIFE_METRICS,
    METRICS,
    MIN_TIMED_PAIRS,
    PAIRS,
    PROPOSED,
    SAME_RUNTIME,
    SOCKET_GATED,
    SOCKET_METRICS,
    THROUGHPUT_METRICS,
    TIMED_EVERY_PAIR,
    TIMING_METRICS,
    TIMING_SLACK_MS,
)
from connmgr_evidence.bench.report.summaries import (
    Aggregates,
    BaselineHeadline,
    BrokerSockets,
    ClientTimings,
    KindSummary,
    PairSummary,
    RoleSockets,
    SweepSaving,
)
from connmgr_evidence.bench.report.table import arrow_schema
from connmgr_evidence.bench.report.tables import COMPARISON_COLUMNS
from connmgr_evidence.bench.results import schema
from connmgr_evidence.bench.results.schema import PAIR_KEYS, POINT_PARAMS

T = TypeVar("T")


def _ratio(p: Any, b: Any) -> Any:
    """proposed / baseline; 0/0 = 1 and x/0 = inf (worse); null if either is null."""
    from pyspark.sql import functions as F

    return (
        F.when(p.isNull() | b.isNull(), F.lit(None).cast("double"))
        .when(b == 0, F.when(p == 0, F.lit(1.0)).otherwise(F.lit(math.inf)))
        .otherwise(p / b)
    )


def _either(pairs: Any, subject: Any, baseline: Any) -> Any:
    """A Spark condition: (``subject``, ``baseline``) is one of ``pairs``."""
    from pyspark.sql import functions as F

    found = F.lit(False)
    for s, b in pairs:
        found = found | ((subject == s) & (baseline == b))
    return found


def pair_summary(df: Any, tolerance: float) -> Any:
    """Per (kind, point, subject, baseline): the point's parameters, ``repeats`` (pairs),
    and for every metric ``m``: ``m_proposed``, ``m_baseline`` (medians over the pairs where
    both are set; ``_proposed`` is the subject's side, the proposal or a subject of
    :data:`PAIRS`), ``m_ratio`` (median ratio), ``m_ratio_min``, ``m_ratio_max``; then the
    flags ``worse_<m>`` of the regression rules and ``regressed`` (any of them)."""
    from pyspark.sql import functions as F

    keys = PAIR_KEYS
    subjects = [PROPOSED, *(s for s, _ in PAIRS)]
    prop = df.where(F.col("policy").isin(subjects)).select(
        *keys,
        F.col("policy").alias("subject"),
        *POINT_PARAMS,
        *(F.col(m).cast("double").alias(f"p_{m}") for m in METRICS),
    )
    base = df.select(
        *keys,
        F.col("policy").alias("baseline"),
        *(F.col(m).cast("double").alias(f"b_{m}") for m in METRICS),
    )
    subject, baseline = F.col("subject"), F.col("baseline")
    wanted = ((subject == PROPOSED) & (baseline != PROPOSED)) | _either(PAIRS, subject, baseline)
    pairs = prop.join(base, list(keys)).where(wanted)
    # A time is compared as a ratio only within a pair timed the same way (SAME_RUNTIME);
    # another client's time is kept as measured, for context.
    comparable = _either(SAME_RUNTIME, subject, baseline)
    timed = (*TIMING_METRICS, *THROUGHPUT_METRICS)
    pairs = pairs.select(
        "*",
        *(
            F.when(comparable, _ratio(F.col(f"p_{m}"), F.col(f"b_{m}"))).alias(f"r_{m}")
            if m in timed
            else _ratio(F.col(f"p_{m}"), F.col(f"b_{m}")).alias(f"r_{m}")
            for m in METRICS
        ),
    )
    aggs = [F.first(c).alias(c) for c in POINT_PARAMS] + [F.count(F.lit(1)).alias("repeats")]
    for m in METRICS:
        both = F.col(f"p_{m}").isNotNull() & F.col(f"b_{m}").isNotNull()
        aggs += [
            F.median(F.when(both, F.col(f"p_{m}"))).alias(f"{m}_proposed"),
            F.median(F.when(both, F.col(f"b_{m}"))).alias(f"{m}_baseline"),
            F.median(f"r_{m}").alias(f"{m}_ratio"),
            F.min(f"r_{m}").alias(f"{m}_ratio_min"),
            F.max(f"r_{m}").alias(f"{m}_ratio_max"),
        ]
    summary = pairs.groupBy("kind", "point", "subject", "baseline").agg(*aggs)
    # A time is judged only over enough pairs (MIN_TIMED_PAIRS); the sockets of a gated
    # subject (SOCKET_GATED) always, those of the Java pair never (its counts differ by a
    # telemetry dial from run to run).
    judged = F.col("repeats") >= MIN_TIMED_PAIRS
    gated = F.col("subject").isin(list(SOCKET_GATED))
    # The median ratio, or for a subject of TIMED_EVERY_PAIR (a cold JVM's time) the least.
    every = F.col("subject").isin(list(TIMED_EVERY_PAIR))
    flags = {
        **{m: gated & (F.col(f"{m}_proposed") > F.col(f"{m}_baseline")) for m in SOCKET_METRICS},
        **{
            m: judged
            & (
                F.when(every, F.col(f"{m}_ratio_min")).otherwise(F.col(f"{m}_ratio"))
                > 1 + tolerance
            )
            & (F.col(f"{m}_proposed") - F.col(f"{m}_baseline") > TIMING_SLACK_MS)
            for m in TIMING_METRICS
        },
        **{m: judged & (F.col(f"{m}_ratio") < 1 - tolerance) for m in THROUGHPUT_METRICS},
    }
    summary = summary.select(
        "*", *(F.coalesce(c, F.lit(False)).alias(f"worse_{m}") for m, c in flags.items())
    )
    regressed = F.lit(False)
    for m in flags:
        regressed = regressed | F.col(f"worse_{m}")
    return summary.withColumn("regressed", regressed)


def _collect(build: Callable[[Mapping[str, Any]], T], frame: Any) -> tuple[T, ...]:
    """``frame``'s rows, collected to the driver, each built into a typed value."""
    return tuple(build(r.asDict()) for r in frame.collect())


def _int_sum(col: str) -> Any:
    from pyspark.sql import functions as F

    return F.sum(F.col(col).cast("int"))


def gather(df: Any, summary: Any) -> Aggregates:
    """Every aggregate the report needs, collected to the driver (all small): ``df`` is
    :func:`~connmgr_evidence.bench.report.load.load_results`'s, ``summary``
    :func:`pair_summary`'s."""
    from pyspark.sql import functions as F

    not_sweep = F.col("kind") != schema.Kind.SWEEP.value
    meta = _collect(
        KindSummary.from_record,
        df.groupBy("kind").agg(
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
        ),
    )
    comparison = _collect(PairSummary.from_record, summary.where(not_sweep))
    has_sweep = any(m.kind == schema.Kind.SWEEP.value for m in meta)
    if has_sweep:
        regressed = _collect(PairSummary.from_record, summary.where("regressed"))
    else:  # every comparison is already here: spare Spark a job
        regressed = tuple(r for r in comparison if r.regressed)
    # The headline is the proposal's; the Java pair is in the comparison and latency tables.
    headline = _collect(
        BaselineHeadline.from_record,
        summary.where(F.col("subject") == PROPOSED)
        .groupBy("kind", "baseline")
        .agg(
            F.count(F.lit(1)).alias("points"),
            F.median("opened_ratio").alias("opened_ratio"),
            F.median("peak_ratio").alias("peak_ratio"),
            F.max("peak_ratio").alias("peak_ratio_worst"),
            F.median("steady_ratio").alias("steady_ratio"),
            F.max("steady_ratio").alias("steady_ratio_worst"),
            *(
                F.median(f"{m}_ratio").alias(f"{m}_ratio")
                for m in (*TIMING_METRICS, *THROUGHPUT_METRICS, *LIFE_METRICS)
            ),
            _int_sum("regressed").alias("regressed_points"),
        ),
    )
    role_cols = [f"{w}_{role}" for role in schema.ROLES for w in ("opened", "steady")]
    role_cols += list(schema.LIFE_COLUMNS)
    roles = _collect(
        RoleSockets.from_record,
        df.where(not_sweep)
        .groupBy("kind", "scenario", "point", "policy")
        .agg(
            F.first("brokers").alias("brokers"),
            F.count(F.lit(1)).alias("repeats"),
            *(F.median(c).alias(c) for c in role_cols),
        ),
    )
    # The sweep draws thousands of distinct broker counts: binned, as in sweep-savings.
    binned = F.when(
        F.col("kind") == schema.Kind.SWEEP.value, _broker_bin(F.col("brokers"))
    ).otherwise(F.col("brokers"))
    brokers = _collect(
        BrokerSockets.from_record,
        df.withColumn("brokers", binned)
        .groupBy("kind", "scenario", "policy", "brokers")
        .agg(
            F.count_distinct("point").alias("points"),
            F.count(F.lit(1)).alias("runs"),
            *(F.median(m).alias(m) for m in SOCKET_METRICS),
        ),
    )
    timings = _collect(
        ClientTimings.from_record,
        df.where(
            F.col("ttfa_ms").isNotNull()
            | F.col("ttfc_ms").isNotNull()
            | F.col("throughput_rps").isNotNull()
        ).select(
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
        ),
    )
    sweep: tuple[SweepSaving, ...] = ()
    if has_sweep:
        sweep = _collect(
            SweepSaving.from_record,
            summary.where(F.col("kind") == schema.Kind.SWEEP.value)
            .withColumn("brokers", _broker_bin(F.col("brokers")))
            .groupBy("baseline", "brokers")
            .agg(
                F.count(F.lit(1)).alias("points"),
                *((1 - F.median(f"{m}_ratio")).alias(f"{m}_saving") for m in SOCKET_METRICS),
                F.median("peak_proposed").alias("peak_proposed"),
                F.median("peak_baseline").alias("peak_baseline"),
                _int_sum("regressed").alias("regressed_points"),
            ),
        )
    return Aggregates(meta, comparison, regressed, headline, roles, brokers, timings, sweep)


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


def write_sweep_points(summary: Any, path: Path) -> int:
    """Stream the sweep's per-point comparisons into one Parquet file (it can be large:
    rows come back a partition at a time, never all at once). Returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    cols = COMPARISON_COLUMNS
    arrow = arrow_schema(cols)
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
