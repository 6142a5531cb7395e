"""The long run's report: ``index.md`` (what ran, the phases, the figures per variant, per
client and per broker, and what was and was not measured), the time series as CSV
(``sockets.csv``: the kernel; ``brokers.csv``: the brokers' JMX; ``events.csv``: the
phases), every figure as ``summary.json``, and the plots under ``plots/``."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from connmgr_evidence.bench.longrun import plots
from connmgr_evidence.bench.longrun.drive import LongRunResult
from connmgr_evidence.bench.longrun.figures import RunFigures, figures
from connmgr_evidence.bench.longrun.records import RecordCheck
from connmgr_evidence.bench.longrun.summary import BURST_TAIL_S, ROLES, broker_series, jmx_series
from connmgr_evidence.java.jmx import ATTRIBUTES
from connmgr_evidence.java.patched import SWITCHES

__all__ = ["write_report"]


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.1f}"
        if isinstance(v, int) and not isinstance(v, bool):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def _csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_report(result: LongRunResult, out: Path) -> Path:
    """Write the report of ``result`` into ``out`` (created); the path of ``index.md``."""
    out.mkdir(parents=True, exist_ok=True)
    figs = figures(result)
    _csv(
        out / "sockets.csv",
        ("t_s", "variant", "client", "broker", "port", "sockets"),
        (
            (round(r.t_s, 3), r.variant, r.client, r.broker, r.port, r.sockets)
            for r in result.sockets
        ),
    )
    _csv(
        out / "brokers.csv",
        ("t_s", "broker", "up", "listener", *ATTRIBUTES),
        (
            (
                round(r.t_ms / 1000 - result.origin, 3),
                r.broker,
                r.up,
                listener,
                *(values.get(a) for a in ATTRIBUTES),
            )
            for r in result.brokers
            for listener, values in (sorted(r.listeners.items()) or [("", {})])
        ),
    )
    _csv(
        out / "events.csv",
        ("t_s", "what", "broker", "detail"),
        ((round(e.t_s, 3), e.what, e.broker or "", e.detail) for e in result.events),
    )
    (out / "summary.json").write_text(
        json.dumps(_summary(result, figs), indent=2) + "\n", encoding="utf-8"
    )
    _plots(result, out / "plots")
    index = out / "index.md"
    index.write_text("\n".join(_page(result, figs)) + "\n", encoding="utf-8")
    return index


def _summary(result: LongRunResult, figs: RunFigures) -> dict[str, Any]:
    s = result.settings
    return {
        "started_at": result.started_at.isoformat(timespec="seconds"),
        "finished_at": result.finished_at.isoformat(timespec="seconds"),
        "minutes": s.minutes,
        "start_s": s.start_s,
        "overtime_s": s.overtime_s,
        "rtt_ms": s.rtt_ms,
        "kafka": result.kafka_version,
        "events": [asdict(e) for e in result.events],
        "variants": [v.as_json() for v in figs.variants],
        "clients": [c.as_json() for c in figs.clients],
        "ledgers": {
            c.spec.label: c.run.ledger.summary() for c in result.clients if c.run is not None
        },
        "records": [r.as_json() for r in result.records],
        "brokers": {
            "jmx_peak_connections": figs.broker_jmx_peak,
            "jmx_handshakes": figs.broker_handshakes,
            "kernel_vs_jmx": figs.crosscheck,
        },
        "problems": result.problems,
    }


def _plots(result: LongRunResult, where: Path) -> None:
    variants = [v.slug for v in result.settings.variants]
    per_broker = {v: broker_series(result.sockets, v) for v in variants}
    counts = jmx_series(result.brokers, result.origin, "SASL_SSL", "connection-count")
    plots.sockets_by_broker(per_broker, counts, result.events, where / "sockets-by-broker.png")
    kinds: dict[str, dict[str, dict[float, int]]] = {
        v: defaultdict(lambda: defaultdict(int)) for v in variants
    }
    for r in result.sockets:
        kinds[r.variant][r.client.split("-")[0]][r.t_s] += r.sockets
    by_kind = {v: {k: sorted(per.items()) for k, per in ks.items()} for v, ks in kinds.items()}
    plots.sockets_by_client(by_kind, result.events, where / "sockets-by-client.png")
    ready = {
        v: [
            c.ready_s
            for o in result.clients
            if o.spec.variant.slug == v
            for c in o.lives
            if c.ready_s is not None
        ]
        for v in variants
    }
    until = (result.finished_at - result.started_at).total_seconds()
    plots.handshakes_over_time(ready, result.events, where / "handshakes.png", until)


def _records_rows(records: Sequence[RecordCheck]) -> list[tuple[object, ...]]:
    return [
        (r.topic, r.sent, r.acked, r.read, len(r.lost), len(r.duplicated), r.unexpected)
        for r in records
    ]


def _page(result: LongRunResult, figs: RunFigures) -> list[str]:
    s = result.settings
    took = result.finished_at - result.started_at
    v = figs.variants
    names = [f"{x.variant} ({x.version})" for x in v]
    lines = [
        "# The long run: stock and patched kafka-clients side by side",
        "",
        f"Run from {result.started_at:%Y-%m-%d %H:%M:%S} to {result.finished_at:%H:%M:%S} "
        f"local time ({took.total_seconds() / 60:.1f} min of client life and close; the "
        f"cluster started in {result.cluster_start_s:.0f} s before that). Command: "
        "`python -m connmgr_evidence.bench.longrun "
        f"--minutes {s.minutes:g} --start-s {s.start_s:g} --rtt-ms {s.rtt_ms:g} "
        f"--sample-s {s.sample_s:g}"
        + (f" --overtime-s {s.overtime_s:g}" if s.overtime_s else "")
        + f"`. Every client lived until {s.start_s:g} s + "
        f"{s.minutes:g} min after the launch, whenever its JVM had started"
        + (
            f" (or, with overtime, until every variant had dialled the moved broker at its "
            f"new port, {s.overtime_s:g} s later at the latest)."
            if s.overtime_s
            else "."
        ),
        "",
        "## What ran",
        "",
        f"- A 3-node Kafka {result.kafka_version} KRaft cluster on loopback (combined "
        "broker+controller nodes), clients on SASL_SSL (SCRAM-SHA-512 over TLS) through "
        f"user-space delay forwarders adding {s.rtt_ms:g} ms of round trip.",
        "- Per variant, seven Java clients, each its own JVM, all given the three brokers' "
        "SASL_SSL addresses as `bootstrap.servers`: an idempotent `acks=all` producer sending "
        f"a numbered record every {s.record_every_ms} ms; a classic consumer group of two and "
        f"a KIP-848 (`group.protocol=consumer`) group of two on its topic, each committing every "
        f"{s.commit_every_ms} ms; an admin client asking describeCluster and listTopics every "
        f"{s.admin_every_ms} ms; a transactional producer committing a one-record transaction "
        f"every {s.txn_every_ms} ms on a topic of its own. The variants have their own topics, "
        "groups and transactional ids, and share the brokers.",
        f"- Variants: {', '.join(names)}; the patched client runs with "
        f"{', '.join(f'`{k}={v}`' for k, v in SWITCHES.items())}.",
        f"- Once every client was past its bootstrap, at {s.restart_at:.0%} of the lives' time "
        "left a rolling restart: brokers "
        f"{', '.join(map(str, s.restart))} in turn, each a controlled shutdown, the same "
        "node started again, preferred leaders restored."
        f" At {s.move_at:.0%} (or when the restart was over) broker {s.move} moved: "
        "stopped, its client listeners given new ports (its old SASL_SSL forwarder closed), "
        "started again, preferred leaders restored.",
        f"- Every {s.sample_s:g} s: each client JVM's live sockets to each broker (the kernel's "
        "socket table) and each broker's socket-server metrics over JMX.",
        "",
        "## Phases",
        "",
        *_table(
            ("t (s)", "what", "broker", "detail"),
            ((round(e.t_s, 1), e.what, e.broker or "", e.detail) for e in result.events),
        ),
        "",
        "## Per variant",
        "",
        "Sockets from the kernel (sampled); dials, TCP connects, handshakes, closes and "
        "socket-seconds from each client's `NetworkClient` log (exact).",
        "",
        *_table(("", *names), _variant_rows(figs)),
        "",
        f"The restart window runs from its first broker's stop to {BURST_TAIL_S:g} s after the "
        "last broker's leaders were restored; the quiet window is as long, just before it.",
        "",
        "### Connections closed before their handshake",
        "",
        "TCP connects that never became a handshake, by role and the reason the client's log "
        "gives for the close (`bootstrap replaced`: the patch; `socket connection setup "
        "timeout`: TLS and SASL not done within `socket.connection.setup.timeout.ms`, 10 s, "
        "which a loaded machine's cold JVMs can miss; `disconnected`: the other side closed, "
        "e.g. a stopped broker's forwarder).",
        "",
        *_table(("role: reason", *names), _unready_rows(figs)),
        "",
        "### Records",
        "",
        "Every topic read back at the end by a fresh reader (read_committed for the "
        "transactional topics): lost = acknowledged (committed) but absent, duplicated = "
        "present more than once, unexpected = present but never acknowledged.",
        "",
        *_table(
            ("topic", "sent", "acked", "read", "lost", "duplicated", "unexpected"),
            _records_rows(result.records),
        ),
        "",
        "## Per client",
        "",
        *_table(
            (
                "client",
                "dials",
                "TCP",
                "handshakes",
                "closes",
                "peak",
                "steady (kernel)",
                "socket-s",
                "bootstrap open before restart",
            ),
            _client_rows(result, figs),
        ),
        "",
        "## The brokers' view",
        "",
        "Each broker's own SASL_SSL listener (JMX, both variants together: they share it).",
        "",
        *_table(
            (
                "broker",
                "peak connections",
                "handshakes (auth total)",
                "samples compared",
                "equal to kernel",
                "median diff",
                "max diff",
            ),
            _broker_rows(figs),
        ),
        "",
        "Compared: each kernel sample with the same broker's JMX reading nearest to it (within "
        "half a sample period); diff = the broker's count minus the sockets every client JVM "
        "held to it. The two are read apart, so they differ while connections come and go. "
        f"In all the brokers counted {sum(figs.broker_handshakes.values()):,.0f} SASL "
        f"authentications; the clients' logs count {sum(x.handshakes for x in figs.variants):,} "
        "handshakes.",
        "",
        "## Plots",
        "",
        "![sockets at each broker](plots/sockets-by-broker.png)",
        "",
        "![sockets per client kind](plots/sockets-by-client.png)",
        "",
        "![handshakes so far](plots/handshakes.png)",
        "",
        "## What was measured, and what was not",
        "",
        *_caveats(result),
    ]
    if result.problems:
        lines += ["", "## Problems", "", *(f"- {p}" for p in result.problems)]
    return lines


def _variant_rows(figs: RunFigures) -> list[tuple[object, ...]]:
    v = figs.variants
    rows: list[tuple[object, ...]] = [
        ("clients (failed)", *(f"{x.clients} ({x.failed_clients})" for x in v)),
        ("sockets opened (dials)", *(x.dials for x in v)),
        ("TCP connects", *(x.tcp for x in v)),
        ("TLS+SASL handshakes", *(x.handshakes for x in v)),
        *((f"  of them {r}", *(int(x.by_role[r].get("handshakes", 0)) for x in v)) for r in ROLES),
        ("closes during the life", *(x.closes for x in v)),
        ("peak sockets held (kernel)", *(x.peak for x in v)),
        ("steady sockets at the end (kernel)", *(x.steady for x in v)),
        ("socket-seconds (logs)", *(x.socket_seconds for x in v)),
        *((f"  of them {r}", *(x.by_role[r].get("socket_seconds", 0.0) for x in v)) for r in ROLES),
        ("socket-seconds (kernel, sampled)", *(x.kernel_socket_seconds for x in v)),
        ("bootstrap sockets open just before the restart", *(x.bootstrap_open for x in v)),
        (
            "last bootstrap socket closed (s)",
            *("at client close" if x.bootstrap_gone_s is None else x.bootstrap_gone_s for x in v),
        ),
    ]
    for w in figs.windows:
        rows.append(
            (
                f"handshakes in the {w.name} window ({w.end_s - w.start_s:.0f} s)",
                *(x.windows[w.name]["handshakes"] for x in v),
            )
        )
        rows.append(
            (f"TCP connects in the {w.name} window", *(x.windows[w.name]["tcp"] for x in v))
        )
    rows.append(
        (
            "dials of the moved broker's old port from the move on",
            *(x.dials_after_move["old"] for x in v),
        )
    )
    rows.append(("dials of its new port from the move on", *(x.dials_after_move["new"] for x in v)))
    brokers = sorted({b for x in v for b in x.broker_peaks})
    rows += [
        (f"peak sockets at broker {b} (kernel)", *(x.broker_peaks.get(b, 0) for x in v))
        for b in brokers
    ]
    return rows


def _unready_rows(figs: RunFigures) -> list[tuple[object, ...]]:
    keys = sorted({k for x in figs.variants for k in x.unready})
    return [(k, *(x.unready.get(k, 0) for x in figs.variants)) for k in keys] or [
        ("none", *(0 for _ in figs.variants))
    ]


def _client_rows(result: LongRunResult, figs: RunFigures) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for outcome, c in zip(result.clients, figs.clients, strict=True):
        closes = int(sum(c.by_role[r]["closes"] for r in ROLES))
        steady = "failed" if outcome.run is None else outcome.run.sample.count
        rows.append(
            (
                outcome.spec.label,
                c.dials,
                c.tcp,
                c.handshakes,
                closes,
                c.peak,
                steady,
                c.socket_seconds,
                c.bootstrap_open,
            )
        )
    return rows


def _broker_rows(figs: RunFigures) -> list[tuple[object, ...]]:
    return [
        (
            b,
            figs.broker_jmx_peak.get(b, 0.0),
            figs.broker_handshakes.get(b, 0.0),
            int(figs.crosscheck.get(b, {}).get("pairs", 0)),
            int(figs.crosscheck.get(b, {}).get("equal", 0)),
            figs.crosscheck.get(b, {}).get("median_diff", 0.0),
            figs.crosscheck.get(b, {}).get("max_diff", 0.0),
        )
        for b in sorted(figs.broker_jmx_peak)
    ]


def _caveats(result: LongRunResult) -> list[str]:
    s = result.settings
    return [
        "- Measured: each client JVM's live sockets to each broker, from the kernel every "
        f"{s.sample_s:g} s (a socket that lived less than a sample apart can be missed); every "
        "dial, TCP connect, handshake and close from the clients' own logs, exact to the "
        "millisecond; each broker's connection count and completed authentications on its "
        "SASL_SSL listener over JMX (both variants together: the broker cannot tell them "
        "apart, so per-variant figures come from the clients' side); every record read back.",
        "- A *handshake* is a connection whose TLS and SASL exchanges completed (the client "
        "began fetching its API versions on it); a *TCP connect* is one whose TCP connect "
        "completed. A connection closed in between is a TCP connect and no handshake (see "
        "the table of them above). The clients reach the brokers through delay forwarders, "
        "which accept a connection at once and only then dial the broker: a dial of a stopped "
        "broker completes a TCP connect to its forwarder and is closed, where a real network "
        "would refuse it, so TCP connects overstate real ones while a broker is down; "
        "handshakes do not.",
        "- Not measured: CPU and memory of clients or brokers, latency and throughput (the "
        "rates are low and fixed), the network between machines (everything is on loopback, "
        f"{s.rtt_ms:g} ms of injected round trip), clients of other languages, brokers other "
        "than this one Kafka release on one machine.",
        "- One run, not repeated: the figures are what happened once; timings of reconnects "
        "depend on the machine's load (all brokers and clients share it).",
        "- The moved broker's old address is refused after the move; each client also had the "
        "other two brokers' addresses in `bootstrap.servers`, so none needed to rebootstrap: "
        "each learnt the new port from Metadata (the dials of the old port from the move on "
        "above are what it cost).",
    ]
