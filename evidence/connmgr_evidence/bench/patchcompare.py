"""Patched against stock kafka-clients 4.3.1, measured like every other real client.

Each of :data:`SCENARIOS` runs with the released client (``4.3.1``) and the project's patched
one (``4.3.1-patched``, its switches on), interleaved stock, patched, patched, stock, ... so
that a slow moment of the machine falls on both, on two tiers: the embedded cluster (the
scenarios' own sizes: big-producer and big-consumer at 1,000 brokers) and a real 3-broker
KRaft cluster (every scenario at 3 brokers). Every run is kernel-checked (its NetworkClient
log, its own connection metrics and the kernel's socket table agree, or the run fails), and
compared with its model: java-today for stock, java-patched for patched
(:mod:`connmgr.policies.java_patched`).

Time to first ack / consume is a same-runtime ratio here: both are the same JVM probe, timed
by the probe from just before it builds its client. The ratio is taken per interleaved pair
and summarised by its median and spread.

CLI: ``python -m connmgr_evidence.bench.patchcompare [--repeats 5] [--tiers embedded,kraft]
[--out reports/java-patch]``: writes ``results.json`` (one row per run) and ``index.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.results.rows import git_commit
from connmgr_evidence.java.patched import KAFKA_VERSION, PATCHED_SUFFIX, SETTLE_MS, SWITCHES

__all__ = ["SCENARIOS", "Row", "main", "render", "run_rows", "summarise"]

SCENARIOS: Final = ("seed-producer", "seed-consumer", "big-producer", "big-consumer")
STOCK: Final = KAFKA_VERSION
PATCHED: Final = KAFKA_VERSION + PATCHED_SUFFIX
MODEL: Final[Mapping[str, str]] = {STOCK: "java-today", PATCHED: "java-patched"}
TIERS: Final = ("embedded", "kraft")
RECORDS: Final = 60


@dataclass(frozen=True, slots=True)
class Row:
    """One kernel-checked run of one variant."""

    tier: str
    scenario: str
    variant: str
    repeat: int
    brokers: int
    opened: int
    peak: int
    steady: int
    bootstrap_closed: int
    """Bootstrap connections the client closed (rule (b0))."""
    linger_closed: int
    """Other connections the client closed itself (rule 6's linger; stock closes none here)."""
    socket_s: float
    handshakes: int
    first_ms: float | None
    """Time to first ack (producer) or first consumed record (consumer)."""
    records_ok: bool
    model_sequence: bool
    """The model's dial batches equal the client's (:func:`sequence_differences`)."""
    model_counts: bool
    """The model's steady count and per-role opened/closed/open-at-end equal the client's."""


def _roles(by_role: Mapping[str, Mapping[str, int]]) -> dict[str, tuple[int, int, int]]:
    return {r: (c["opened"], c["closed"], c["open_at_end"]) for r, c in by_role.items()}


def _order(repeats: int) -> Iterator[tuple[int, str]]:
    """Stock, patched, patched, stock, ...: each variant first in half the pairs."""
    for repeat in range(repeats):
        pair = (STOCK, PATCHED) if repeat % 2 == 0 else (PATCHED, STOCK)
        for variant in pair:
            yield repeat, variant


def _one(tier: str, scenario: str, variant: str, repeat: int, cluster: Any) -> Row:
    from connmgr_evidence.realrun import run_real, sequence_differences
    from connmgr_evidence.realrun.backends import KafkaBackend

    settings = {"records": str(RECORDS), "settle_ms": str(SETTLE_MS), "seed": str(repeat)}
    if cluster is not None and scenario.startswith("big-"):
        settings["brokers"] = "3"
    backend = None if cluster is None else KafkaBackend(cluster)
    run = asyncio.run(run_real(scenario, "java", settings, cluster=backend, kafka_clients=variant))
    model = run.simulate(MODEL[variant], run.model_settings())
    summary = run.steady_summary
    life = summary["life"]
    producer = run.spec.client.value == "producer"
    return Row(
        tier=tier,
        scenario=scenario,
        variant=variant,
        repeat=repeat,
        brokers=len(run.spec.cluster.brokers),
        opened=summary["opened"],
        peak=summary["peak"],
        steady=summary["steady"],
        bootstrap_closed=summary["by_role"]["bootstrap"]["closed"],
        linger_closed=sum(
            c["closed"] for role, c in summary["by_role"].items() if role != "bootstrap"
        ),
        socket_s=round(sum(life["socket_seconds"].values()), 3),
        handshakes=sum(life["handshakes"].values()),
        first_ms=run.ttfa_ms if producer else run.ttfc_ms,
        records_ok=(
            run.records_acked == run.records_sent == RECORDS
            if producer
            else run.records_consumed == RECORDS
        ),
        model_sequence=sequence_differences(run.ledger.dials(), model) == [],
        model_counts=(
            summary["steady"] == model.steady
            and _roles(summary["by_role"]) == _roles(model.by_role)
        ),
    )


def run_rows(tiers: Sequence[str], repeats: int, *, show: bool = True) -> list[Row]:
    """Every scenario, both variants interleaved, ``repeats`` pairs each, on each tier."""
    from tqdm import tqdm

    from connmgr_evidence.realkafka import KafkaCluster

    rows: list[Row] = []
    total = len(tiers) * len(SCENARIOS) * repeats * 2
    with tqdm(total=total, desc="patched vs stock", unit="run", disable=not show) as bar:
        for tier in tiers:
            cluster = KafkaCluster(brokers=3).start(timeout_s=180) if tier == "kraft" else None
            try:
                for scenario in SCENARIOS:
                    for repeat, variant in _order(repeats):
                        rows.append(_one(tier, scenario, variant, repeat, cluster))
                        bar.update()
            finally:
                if cluster is not None:
                    cluster.stop()
    return rows


_SOCKET_COLUMNS: Final = (
    ("opened", 0),
    ("peak", 0),
    ("steady", 0),
    ("bootstrap_closed", 0),
    ("linger_closed", 0),
    ("socket_s", 2),
    ("handshakes", 0),
)
"""The sockets table's metrics, with their decimals."""


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def summarise(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Per (tier, scenario): each variant's medians and the patched / stock ratio of the time
    to first ack or consume, per repeat (median, min, max). Rows whose pair is incomplete
    (a variant without the other at that repeat) give no ratio."""
    out: list[dict[str, Any]] = []
    keys = sorted({(r.tier, r.scenario) for r in rows}, key=lambda k: (k[0], SCENARIOS.index(k[1])))
    for tier, scenario in keys:
        mine = [r for r in rows if (r.tier, r.scenario) == (tier, scenario)]
        line: dict[str, Any] = {"tier": tier, "scenario": scenario, "brokers": mine[0].brokers}
        for variant, side in ((STOCK, "stock"), (PATCHED, "patched")):
            runs = [r for r in mine if r.variant == variant]
            for metric, _ in _SOCKET_COLUMNS:
                values = [getattr(r, metric) for r in runs]
                line[f"{metric}_{side}"] = _median(values)
                line[f"{metric}_{side}_range"] = (min(values), max(values))
            times = [r.first_ms for r in runs if r.first_ms is not None]
            line[f"first_ms_{side}"] = _median(times) if times else None
            line[f"runs_{side}"] = len(runs)
            line[f"model_{side}"] = (
                f"{sum(r.model_sequence for r in runs)}/{len(runs)} sequence, "
                f"{sum(r.model_counts for r in runs)}/{len(runs)} counts"
            )
            line[f"records_ok_{side}"] = all(r.records_ok for r in runs)
        by_repeat = {(r.variant, r.repeat): r.first_ms for r in mine}
        ratios = [
            p / s
            for (variant, repeat), p in by_repeat.items()
            if variant == PATCHED
            and p is not None
            and (s := by_repeat.get((STOCK, repeat))) is not None
            and s > 0
        ]
        line["first_ratio"] = _median(ratios) if ratios else None
        line["first_ratio_min"] = min(ratios) if ratios else None
        line["first_ratio_max"] = max(ratios) if ratios else None
        line["pairs"] = len(ratios)
        out.append(line)
    return out


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _spread(line: Mapping[str, Any], key: str, digits: int) -> str:
    """The median, and the range over the runs when it is not one value (counts only)."""
    low, high = line[f"{key}_range"]
    text = _num(line[key], digits)
    return text if digits or low == high else f"{text} ({low}-{high})"


def render(summary: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> str:
    """The report's Markdown: what ran, the sockets table and the timing table."""
    switches = ", ".join(f"`{k}={v}`" for k, v in SWITCHES.items())
    lines = [
        f"# Patched against stock kafka-clients {KAFKA_VERSION}",
        "",
        f"Generated by `python -m connmgr_evidence.bench.patchcompare` at {meta['generated']} "
        f"({meta['repeats']} interleaved pairs per scenario and tier, {meta['seconds']:.0f} s; "
        f"commit `{meta['commit']}`). Patched: the project's patch "
        f"(`benchmarks/kafka-clients-patch`), run with {switches}. Every run kernel-checked "
        "(its log, its connection metrics and the kernel's socket table agree). Embedded: "
        "librdkafka's mock cluster at the scenario's size; kraft: a real 3-broker KRaft "
        "cluster (PLAINTEXT, loopback, no injected RTT). Medians over the runs, with the "
        "range where the runs differ: a Java producer's telemetry sender dials one more "
        "broker in some runs (a race with its own first connection, replayed by both models).",
        "",
        "## Sockets",
        "",
        "| tier | scenario | brokers | opened stock / patched | peak | steady "
        "| closed: bootstrap (b0) | closed: linger (rule 6) "
        "| socket-s | handshakes | model (stock: java-today, patched: java-patched) "
        "| records |",
        "|---|---|---:|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        pair = [
            f"{_spread(s, f'{m}_stock', d)} / {_spread(s, f'{m}_patched', d)}"
            for m, d in _SOCKET_COLUMNS
        ]
        records = "all" if s["records_ok_stock"] and s["records_ok_patched"] else "MISSING"
        lines.append(
            f"| {s['tier']} | {s['scenario']} | {s['brokers']:,} | "
            + " | ".join(pair)
            + f" | {s['model_stock']} / {s['model_patched']} | {records} |"
        )
    lines += [
        "",
        "## Time to first ack / consume",
        "",
        "Same runtime: both variants are the same probe JVM, timed from just before it builds "
        "its client. Ratio patched / stock per interleaved pair: median (min-max).",
        "",
        "| tier | scenario | stock ms | patched ms | ratio | pairs |",
        "|---|---|---:|---:|---|---:|",
    ]
    for s in summary:
        ratio = (
            "-"
            if s["first_ratio"] is None
            else f"{s['first_ratio']:.2f} ({s['first_ratio_min']:.2f}-{s['first_ratio_max']:.2f})"
        )
        lines.append(
            f"| {s['tier']} | {s['scenario']} | {_num(s['first_ms_stock'], 1)} | "
            f"{_num(s['first_ms_patched'], 1)} | {ratio} | {s['pairs']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: run, write ``results.json`` and ``index.md`` into ``--out``; exit 1 if a record
    went missing in any run (a failed kernel check raises before anything is written)."""
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.patchcompare",
        description=(
            f"Run kafka-clients {STOCK} and the project's patched {PATCHED} through "
            f"{', '.join(SCENARIOS)}, interleaved, on the embedded cluster and a real KRaft "
            "cluster; write a report."
        ),
    )
    parser.add_argument("--repeats", type=int, default=5, help="pairs per scenario (default 5)")
    parser.add_argument(
        "--tiers", default=",".join(TIERS), help="comma-separated: embedded, kraft (default both)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("reports/java-patch"), help="report directory"
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="write index.md again from --out's results.json, running nothing",
    )
    args = parser.parse_args(argv)
    if args.report_only:
        try:
            data = json.loads((args.out / "results.json").read_text())
        except (OSError, ValueError) as e:
            parser.error(f"--report-only needs {args.out / 'results.json'}: {e}")
        rows = [Row(**r) for r in data["rows"]]
        (args.out / "index.md").write_text(render(summarise(rows), data["meta"]))
        print(f"wrote {args.out / 'index.md'}")
        return 0 if all(r.records_ok for r in rows) else 1
    tiers = [t for t in args.tiers.split(",") if t]
    if not tiers or set(tiers) - set(TIERS) or args.repeats < 1:
        parser.error(f"--tiers takes {', '.join(TIERS)}; --repeats at least 1")
    started = time.monotonic()
    rows = run_rows(tiers, args.repeats)
    meta = {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "repeats": args.repeats,
        "seconds": time.monotonic() - started,
        "commit": git_commit(),
    }
    summary = summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )
    (args.out / "index.md").write_text(render(summary, meta))
    print(f"wrote {args.out / 'index.md'}")
    return 0 if all(r.records_ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
