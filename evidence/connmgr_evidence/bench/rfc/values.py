"""The numbers the RFC's sentences cite (``<!--v:NAME-->``), by name: what report table,
column and row each one reads (:mod:`connmgr_evidence.bench.rfc` renders them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from connmgr.costs import STATED_COSTS, covering
from connmgr_evidence.bench.report.table import format_cell
from connmgr_evidence.bench.results.schema import ColumnType
from connmgr_evidence.bench.rfc.report import Report, RfcError
from connmgr_evidence.bench.stages.sweep import SWEEP_POLICIES

REAL_POINTS = (
    "big-producer[brokers=3,coordinator=auto,rtt_ms=0.0]",
    "big-consumer[brokers=3,coordinator=auto,rtt_ms=0.0]",
)
"""The real-client points the RFC's motivation shows: 3 brokers, no added RTT."""


def _sum(table: str, column: str) -> Callable[[Report], str]:
    return lambda r: format_cell(sum(row[column] for row in r.rows(table)), ColumnType.LONG)


def _point(scenario: str, rtt: str) -> str:
    return f"{scenario}[brokers=3,coordinator=auto,rtt_ms={rtt}]"


_P, _C = REAL_POINTS
_THROUGHPUT = "throughput-ab[brokers=3,records={records},rtt_ms={rtt}]"


def _throughput(rtt: str, column: str) -> Callable[[Report], str]:
    def get(r: Report) -> str:
        rows = [
            row
            for row in r.rows("throughput")
            if str(row["point"]).startswith("throughput-ab[brokers=3,")
            and str(row["point"]).endswith(f"rtt_ms={rtt}]")
        ]
        if len(rows) != 1:
            raise RfcError(f"{r.path}/tables/throughput: {len(rows)} rows at rtt {rtt}")
        return format_cell(rows[0][column], ColumnType.DOUBLE)

    return get


def _cell(table: str, column: str, **where: Any) -> Callable[[Report], str]:
    return lambda r: r.value(table, column, **where)


def is_stated(row: Mapping[str, Any]) -> bool:
    """Whether a row of a report's ``regressions`` table is a difference a stated cost
    covers (a report written before the comparison set those apart lists them there)."""
    found = covering(
        row["kind"],
        row["point"],
        row["baseline"],
        row["metric"],
        row["proposed"],
        row["baseline_value"],
    )
    return found is not None


def _fleet_setting(key: str) -> Callable[[Report], str]:
    return lambda r: format_cell(r.stage("fleet")["settings"][key], ColumnType.LONG)


VALUES: dict[str, Callable[[Report], str]] = {
    "report.run_id": lambda r: r.run_id,
    **{
        f"real.{client}.{scenario}.peak": _cell(
            "sockets", "peak_baseline", point=p, baseline=client
        )
        for client in ("java-2.1.0", "java-4.4.0", "aiokafka")
        for scenario, p in (("big-producer", _P), ("big-consumer", _C))
    },
    "real.proposed.big-producer.peak": _cell(
        "sockets", "peak_proposed", point=_P, baseline="aiokafka"
    ),
    "real.proposed.big-consumer.peak": _cell(
        "sockets", "peak_proposed", point=_C, baseline="aiokafka"
    ),
    **{
        f"sim.big-producer.b1000.{policy}.opened": _cell(
            "sockets-by-brokers",
            "opened",
            kind="sim",
            scenario="big-producer",
            policy=policy,
            brokers=1000,
        )
        for policy in ("java-described", "proposed")
    },
    **{
        f"sim.idle-disabled.{side}.steady": _cell(
            "sockets", column, kind="sim", scenario="idle-disabled", baseline="java-described"
        )
        for side, column in (("java-described", "steady_baseline"), ("proposed", "steady_proposed"))
    },
    "throughput.rtt0.ratio": _throughput("0.0", "throughput_rps_ratio"),
    "throughput.rtt0.ratio_min": _throughput("0.0", "throughput_rps_ratio_min"),
    "throughput.rtt20.ratio": _throughput("20.0", "throughput_rps_ratio"),
    **{
        f"latency.big-producer.rtt{rtt[:-2]}.{baseline}.ratio": _cell(
            "latency",
            "ratio",
            metric="ttfa_ms",
            point=_point("big-producer", rtt),
            baseline=baseline,
        )
        for rtt, baseline in (("0.0", "aiokafka"), ("20.0", "aiokafka"))
    },
    **{
        f"latency.big-consumer.rtt{rtt[:-2]}.aiokafka.ratio": _cell(
            "latency",
            "ratio",
            metric="ttfc_ms",
            point=_point("big-consumer", rtt),
            baseline="aiokafka",
        )
        for rtt in ("0.0", "20.0")
    },
    # The Java client's times are context, not a ratio (its clock starts before a cold JVM).
    **{
        f"latency.big-producer.rtt20.{who}.ms": _cell(
            "latency",
            column,
            metric="ttfa_ms",
            point=_point("big-producer", "20.0"),
            baseline="java-4.4.0",
        )
        for who, column in (("proposed", "proposed_ms"), ("java-4.4.0", "baseline_ms"))
    },
    **{
        f"decision-cost.{policy}.mean_us": _cell("decision-cost", "mean_us", policy=policy)
        for policy in ("proposed", "java-today")
    },
    "simulator-speed.proposed.events_per_s": _cell(
        "simulator-speed", "events_per_s", policy="proposed"
    ),
    **{
        f"headline.{kind}.{baseline}.peak_ratio": _cell(
            "headline", "peak_ratio", kind=kind, baseline=baseline
        )
        for kind, baselines in (
            ("real", ("java-2.1.0", "java-4.4.0", "aiokafka")),
            ("sim", ("java-today", "aiokafka-today")),
            ("sweep", ("java-today", "aiokafka-today")),
        )
        for baseline in baselines
    },
    **{
        f"headline.{kind}.{baseline}.{metric}_ratio": _cell(
            "headline", f"{metric}_ratio", kind=kind, baseline=baseline
        )
        for kind in ("sim", "sweep")
        for baseline in ("java-today", "aiokafka-today")
        for metric in ("socket_s_per_h", "handshakes_per_h")
    },
    **{
        f"linger.rebalance.{setting}.{column}": _cell(
            "linger",
            column,
            scenario="rebalance",
            setting=f"proposed@{setting}ms" if setting.isdigit() else setting,
        )
        for setting in ("0", "3000", "30000", "540000", "java-today")
        for column in ("socket_s_per_h", "handshakes_per_h")
    },
    "life-costs.count": lambda r: str(len(r.rows("life-costs"))),
    **{
        f"tls-cost.{protocol}.{column}": _cell("tls-cost", column, protocol=protocol)
        for protocol in ("PLAINTEXT", "SSL", "SASL_SSL")
        for column in ("round_trips", "broker_cpu_ms")
    },
    "tls-cost.SASL_SSL.setup_ms_at_20": _cell("tls-cost", "setup_ms_at_20", protocol="SASL_SSL"),
    **{
        f"tls-first-ack.rtt{rtt[:-2]}.proposed.ratio": _cell(
            "tls-first-ack", "ratio", rtt_ms=float(rtt), client="proposed"
        )
        for rtt in ("0.0", "20.0")
    },
    **{
        f"handshake-price.{kind}.{policy}.broker_cpu_ms_per_h": _cell(
            "handshake-price", "broker_cpu_ms_per_h", kind=kind, policy=policy
        )
        for kind in ("sim", "sweep")
        for policy in ("proposed", "java-today", "aiokafka-today")
    },
    **{
        f"headline.real-life.{client}.{metric}_ratio": _cell(
            "headline", f"{metric}_ratio", kind="real-life", baseline=client
        )
        for client in ("aiokafka", "java-4.4.0", "librdkafka")
        for metric in ("socket_s_per_h", "handshakes_per_h")
    },
    **{
        f"linger.ip-change.{setting}.{column}": _cell(
            "linger",
            column,
            scenario="ip-change",
            setting=f"proposed@{setting}ms" if setting.isdigit() else setting,
        )
        for setting, columns in (
            ("3000", ("stale_wait_ms", "opened", "handshakes_per_h")),
            ("java-today", ("stale_wait_ms", "opened", "handshakes_per_h")),
            ("aiokafka-today", ("stale_wait_ms",)),
        )
        for column in columns
    },
    **{
        f"fleet.{policy}.{column}": _cell("fleet", column, policy=policy)
        for policy in SWEEP_POLICIES
        for column in (
            "sockets_p50",
            "sockets_p99",
            "sockets_max",
            "handshakes",
            "peak_per_s_restart",
            "peak_per_s",
            "refused",
        )
    },
    # The patched Java client's model: its busiest broker and its handshakes, beside today's.
    **{
        f"fleet.java-patched.{column}": _cell("fleet", column, policy="java-patched")
        for column in ("sockets_max", "handshakes")
    },
    # The proposal on brokers that answer KIP-1242's check: what confirming saves a fleet.
    **{
        f"fleet.proposed-4.4.{column}": _cell("fleet", column, policy="proposed-4.4")
        for column in ("sockets_max", "handshakes", "peak_per_s")
    },
    **{f"fleet.{key}": _fleet_setting(key) for key in ("clients", "brokers", "restarts")},
    "fleet.wall_s": lambda r: format_cell(round(r.stage("fleet")["wall_s"]), ColumnType.LONG),
    "sweep.points": _cell("runs", "points", kind="sweep"),
    "regressions.count": lambda r: str(
        sum(1 for row in r.rows("regressions") if not is_stated(row))
    ),
    "stated-costs.count": lambda _: str(len(STATED_COSTS)),
    "deep.examples": _sum("property-runs", "examples"),
    "deep.steps": _sum("property-runs", "steps"),
    "deep.failures": _sum("property-runs", "failures"),
    "properties.max_examples": lambda r: format_cell(
        r.rows("property-runs")[0]["max_examples"], ColumnType.LONG
    ),
    "properties.step_count": lambda r: format_cell(
        r.rows("property-runs")[0]["step_count"], ColumnType.LONG
    ),
    "mutants.caught": lambda r: str(sum(1 for m in r.rows("mutants") if m["invariant"])),
    "mutants.count": lambda r: str(len(r.rows("mutants"))),
}
