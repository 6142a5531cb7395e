"""The TLS/SASL stage: what a handshake costs on a real secured cluster, and the price of the
handshakes the simulated clients make.

The grid's ``[tls]`` section starts a real KRaft cluster of ``brokers`` nodes with SSL and
SASL_SSL (SCRAM-SHA-512) listeners behind user-space delay forwarders
(:class:`~connmgr_evidence.realkafka.KafkaCluster` with ``security=True``, certificates made at
start)
and measures it with :func:`~connmgr_evidence.realkafka.handshakes.measure_tls`: ``connections``
handshakes per protocol and injected RTT, the brokers' CPU per handshake, and time to first
ack over SASL_SSL for stock aiokafka and the drop-in producer (``starts`` each per RTT,
alternating which goes first) and, with ``java``, kafka-clients 4.4.0 once per RTT. The fit
``time = fixed_ms + round_trips * rtt`` per protocol (:class:`~connmgr_evidence.handshake_cost.
HandshakeCost`) is the simulator's handshake cost: the ``handshake-price`` table multiplies
the simulated clients' handshakes per client-hour by it.

Written as ``raw/tls.json``; the report's tables ``tls-handshakes``, ``tls-cost``,
``tls-first-ack`` and ``handshake-price`` come from it (:func:`tls_tables`).
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.report.table import Table, make_table
from connmgr_evidence.bench.results.record import Count, MaybeReal, Record, Text
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.results.stagefile import read_stage, write_stage
from connmgr_evidence.bench.stages import Phase, Setting, Stage, StageContext, StageReport
from connmgr_evidence.handshake_cost import HandshakeCost

TLS_FILE = "tls.json"
"""Under ``raw/``: the TLS stage's measurements."""

PRICED = "SASL_SSL"
"""The protocol whose cost prices the simulated handshakes: the most a handshake costs here,
and what a platform that authenticates its clients pays."""

PRICE_RTT_MS = 20.0
"""The RTT at which a handshake's client-side time is priced (the real grid's larger RTT)."""


def run_tls(values: Mapping[str, Any], meta: RunMeta, raw: Path) -> Path:
    """Start the secured cluster, measure it, stop it; ``raw/tls.json``. Synchronous: call
    it outside a running event loop."""
    from connmgr_evidence.realkafka import KafkaCluster
    from connmgr_evidence.realkafka.handshakes import measure_tls

    began = time.monotonic()
    with KafkaCluster(brokers=values["brokers"], security=True) as cluster:
        start_s = time.monotonic() - began
        report = measure_tls(
            cluster,
            rtts_ms=tuple(float(r) for r in values["rtt_ms"]),
            connections=values["connections"],
            java=bool(values["java"]),
            starts=values["starts"],
        )
    data = {
        "meta": meta.columns(),
        "settings": dict(values),
        "report": report.to_dict(),
        "start_s": start_s,
        "wall_s": time.monotonic() - began,
    }
    return write_stage(raw, TLS_FILE, data)


def read_tls(raw: Path) -> dict[str, Any] | None:
    """``raw/tls.json``, or None if the run had no TLS stage (a broken file is an error)."""
    return read_stage(raw, TLS_FILE, ("report", "settings", "wall_s"), "TLS-stage")


def calibration(found: Mapping[str, Any]) -> dict[str, HandshakeCost]:
    """The fitted cost per protocol."""
    return {c["protocol"]: HandshakeCost.from_dict(c) for c in found["report"]["calibration"]}


def tls_tables(found: Mapping[str, Any], results: Path) -> list[Table]:
    """The stage's report tables; ``results`` is the run's ``raw/results`` directory, whose
    simulated and sweep rows the ``handshake-price`` table prices."""
    report, s = found["report"], found["settings"]
    where = (
        f"A real {s['brokers']}-node KRaft cluster (SSL and SASL_SSL with SCRAM-SHA-512, "
        "certificates made at the stage's start) with the RTT injected by user-space "
        "forwarders (each chunk held rtt/2 per direction; the TCP handshake itself is not "
        f"delayed); the stage took {found['wall_s']:.0f} s, cluster start "
        f"{found['start_s']:.0f} s included."
    )
    return [
        _handshakes_table(report, where),
        _cost_table(report, where),
        _first_ack_table(report, where),
        price_table(calibration(found), results),
    ]


@dataclass(frozen=True, slots=True)
class TlsHandshakes(Record):
    """A row of the ``tls-handshakes`` table: one protocol at one RTT."""

    protocol: Text
    rtt_ms: MaybeReal
    median_ms: MaybeReal
    p90_ms: MaybeReal


def _handshakes_table(report: Mapping[str, Any], where: str) -> Table:
    return make_table(
        "tls-handshakes",
        "TLS and SASL: the time a new connection takes",
        f"{where} Each row: {report['connections']} connections opened one at a time with "
        "aiokafka's own dialler (TCP, the TLS handshake, ApiVersions, and for SASL_SSL the "
        "SaslHandshake and SCRAM-SHA-512's two exchanges), median and p90 in ms.",
        TlsHandshakes.columns(),
        report["handshakes"],
    )


@dataclass(frozen=True, slots=True)
class TlsCost(Record):
    """A row of the ``tls-cost`` table: one protocol's fitted handshake cost."""

    protocol: Text
    round_trips: MaybeReal
    fixed_ms: MaybeReal
    broker_cpu_ms: MaybeReal
    cpu_connections: Count
    setup_ms_at_20: MaybeReal


def _cost_table(report: Mapping[str, Any], where: str) -> Table:
    cpu = {c["protocol"]: c for c in report["cpu"]}
    rows = []
    for c in report["calibration"]:
        cost = HandshakeCost.from_dict(c)
        rows.append(
            {
                **c,
                "cpu_connections": cpu[cost.protocol]["connections"],
                "setup_ms_at_20": cost.time_ms(PRICE_RTT_MS, include_tcp=True),
            }
        )
    return make_table(
        "tls-cost",
        "TLS and SASL: the cost of one handshake (the simulator's calibration)",
        f"{where} `round_trips` and `fixed_ms`: the least-squares line through the median "
        "handshake times against the injected RTT; `broker_cpu_ms`: the brokers' user+system "
        "CPU per connection over `cpu_connections` connections at RTT 0, less the idle rate "
        "(the CPU clock ticks 10 ms, so cheap handshakes are noisy); `setup_ms_at_20`: the "
        f"fitted time at {PRICE_RTT_MS:g} ms RTT plus the TCP handshake's round trip.",
        TlsCost.columns(),
        rows,
    )


def first_ack_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per RTT and client: the starts, the median / min / max time to first ack and the most
    sockets held; ``ratio``: the drop-in's median over stock aiokafka's at that RTT (the two
    clients share a runtime and a clock; Java's time is context, never a ratio)."""
    groups: dict[tuple[float, str], list[Mapping[str, Any]]] = defaultdict(list)
    for ack in report["first_acks"]:
        groups[(ack["rtt_ms"], ack["client"])].append(ack)
    rows: list[dict[str, Any]] = []
    for (rtt, client), acks in groups.items():
        times = [a["ttfa_ms"] for a in acks if a["ttfa_ms"] is not None]
        rows.append(
            {
                "rtt_ms": rtt,
                "client": client,
                "starts": len(acks),
                "acked": len(times),
                "ttfa_ms": statistics.median(times) if times else None,
                "ttfa_ms_min": min(times, default=None),
                "ttfa_ms_max": max(times, default=None),
                "sockets": max(a["sockets"] for a in acks),
            }
        )
    medians = {(r["rtt_ms"], r["client"]): r["ttfa_ms"] for r in rows}
    for row in rows:
        stock = medians.get((row["rtt_ms"], "aiokafka"))
        ok = row["client"] == "proposed" and stock and row["ttfa_ms"] is not None
        row["ratio"] = row["ttfa_ms"] / stock if ok else None
    return rows


@dataclass(frozen=True, slots=True)
class TlsFirstAck(Record):
    """A row of the ``tls-first-ack`` table: one client at one RTT over SASL_SSL."""

    rtt_ms: MaybeReal
    client: Text
    starts: Count
    acked: Count
    ttfa_ms: MaybeReal
    ttfa_ms_min: MaybeReal
    ttfa_ms_max: MaybeReal
    sockets: Count
    ratio: MaybeReal


def _first_ack_table(report: Mapping[str, Any], where: str) -> Table:
    return make_table(
        "tls-first-ack",
        "TLS and SASL: time to first ack over SASL_SSL",
        f"{where} From just before `start()` (Java: just before its client is constructed, "
        "a cold JVM included, so context only) to the first acknowledged record, one record "
        "to each partition of a topic led by every broker; `sockets`: the most the client "
        "held to the SASL_SSL listeners once every record was acknowledged; `ratio`: the "
        "drop-in's median over stock aiokafka's at the same RTT (same runtime, same clock).",
        TlsFirstAck.columns(),
        first_ack_rows(report),
    )


def price_rows(
    costs: Mapping[str, HandshakeCost], rows: Sequence[Mapping[str, Any]], kind: str
) -> list[dict[str, Any]]:
    """Per policy: the mean handshakes per client-hour over ``rows`` (one client each) and
    their price at the :data:`PRICED` protocol's cost -- broker CPU ms and client set-up ms
    (at :data:`PRICE_RTT_MS`) per client-hour."""
    cost = costs[PRICED]
    by_policy: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_policy[row["policy"]].append(float(row["handshakes_per_h"]))
    out = []
    for policy in sorted(by_policy):
        mean = statistics.fmean(by_policy[policy])
        cpu = cost.broker_cpu_ms
        out.append(
            {
                "kind": kind,
                "policy": policy,
                "runs": len(by_policy[policy]),
                "handshakes_per_h": mean,
                "broker_cpu_ms_per_h": None if cpu is None else mean * cpu,
                "setup_ms_per_h": mean * cost.time_ms(PRICE_RTT_MS, include_tcp=True),
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class HandshakePrice(Record):
    """A row of the ``handshake-price`` table: one kind and policy's handshakes, priced."""

    kind: Text
    policy: Text
    runs: Count
    handshakes_per_h: MaybeReal
    broker_cpu_ms_per_h: MaybeReal
    setup_ms_per_h: MaybeReal


def price_table(costs: Mapping[str, HandshakeCost], results: Path) -> Table:
    """``handshake-price``: the simulated and sweep clients' handshakes, priced."""
    import pyarrow.parquet as pq

    rows: list[dict[str, Any]] = []
    for kind in ("sim", "sweep"):
        path = results / f"{kind}.parquet"
        if path.exists():
            found = pq.read_table(path, columns=["policy", "handshakes_per_h"]).to_pylist()
            rows += price_rows(costs, found, kind)
    cost = costs[PRICED]
    return make_table(
        "handshake-price",
        "The simulated clients' handshakes, priced at the measured SASL_SSL cost",
        "Per kind and policy, the mean over the runs (each one client over its simulated "
        "horizon, scaled to an hour) of the handshakes per client-hour, and their price at "
        "the TLS stage's "
        f"{PRICED} calibration: `broker_cpu_ms_per_h` at {cost.broker_cpu_ms or 0:.1f} ms of "
        "broker CPU a handshake, `setup_ms_per_h` at "
        f"{cost.time_ms(PRICE_RTT_MS, include_tcp=True):.1f} ms of client time a handshake "
        f"at {PRICE_RTT_MS:g} ms RTT (TCP's round trip included).",
        HandshakePrice.columns(),
        rows,
    )


SETTINGS: Mapping[str, Setting] = {
    "brokers": Setting(int),
    "rtt_ms": Setting(float, True),
    "connections": Setting(int),
    "starts": Setting(int),
    "java": Setting(int),
}
"""``[tls]``: the secure cluster's brokers, the RTTs, the handshakes per protocol and RTT,
the first-ack starts per RTT, and whether kafka-clients 4.4.0 runs (1) or not (0)."""


class TlsStage:
    name = "tls"
    phase = Phase.TIMED
    order = 3
    shown = 3
    timed = True
    says = "TLS and SASL on a real KRaft cluster ..."
    what = (
        "TLS and SASL on a real 3-node KRaft cluster (`[tls]`; how the tier is built: "
        "[tls.md](tls.md)): SSL and SASL_SSL (SCRAM-SHA-512) listeners with certificates made at "
        "the stage's start, behind user-space forwarders that inject 0 / 5 / 20 ms RTT; "
        "`connections` handshakes per protocol and RTT with aiokafka's own dialler (median, p90), "
        "the brokers' CPU per handshake (JVM user+system time less the idle rate), time to first "
        "ack over SASL_SSL for stock aiokafka and the drop-in (`starts` each per RTT, alternating,"
        " after one warm-up start; the only ratio) and kafka-clients 4.4.0 once per RTT (context)."
        " The fit `time = fixed_ms + round_trips x RTT` per protocol is the simulator's handshake "
        "cost: `handshake-price` multiplies the simulated and sweep handshakes per client-hour by "
        "it"
    )
    writes = (
        "`raw/tls.json`; tables `tls-handshakes`, `tls-cost`, `tls-first-ack`, `handshake-price`"
    )

    section = "tls"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        # The brokers' CPU per handshake is measured at RTT 0, and the cost is a line through
        # the medians at two RTTs at least.
        if 0 not in values["rtt_ms"] or len(values["rtt_ms"]) < 2:
            raise ConfigError(f"tls.rtt_ms must include 0 and one more RTT, got {values['rtt_ms']}")
        if values["java"] not in (0, 1):
            raise ConfigError(f"tls.java must be 0 or 1, got {values['java']!r}")
        for key in ("brokers", "connections", "starts"):
            if values[key] < 1:
                raise ConfigError(f"tls.{key} must be >= 1, got {values[key]!r}")

    def run(self, ctx: StageContext) -> None:
        run_tls(ctx.grid.values["tls"], ctx.meta, ctx.raw)

    def read(self, raw: Path) -> dict[str, Any] | None:
        return read_tls(raw)

    def report(self, found: dict[str, Any], raw: Path) -> StageReport:
        return StageReport(tables=tls_tables(found, raw / "results"))


STAGE: Stage[dict[str, Any]] = TlsStage()
