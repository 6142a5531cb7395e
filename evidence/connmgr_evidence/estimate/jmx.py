"""``connmgr estimate jmx FILE``: the brokers' own connection counts over time -- the peak,
the storms, and what the proposal's model predicts for the same client mix.

FILE is an export in :mod:`.jmx_export`'s format (CSV or JSON; ``docs/estimate.md``
maps the ``kafka.server:type=socket-server-metrics`` attributes to its columns), or, with
``--live``, the brokers' remote JMX polled for ``--duration`` seconds through the project's
``BrokerJmx`` reader (:mod:`connmgr_evidence.java.jmx`, as the long run reads it).

**A storm**, precisely: at one broker, a maximal run of consecutive readable samples whose
connection creation rate is at least ``max(--storm-min-rate, --storm-factor x that broker's
median rate over the export)`` (defaults 10/s and 5x). It is reported with its first and
last sample, its peak rate, the connections it created (each sample's rate times the seconds
it covers) and the nearest **restart** it meets: a broker that could not be read (``up``
false) or whose creation total went down (a new JVM) -- outages of one broker at most 10 s
apart are one restart, as a broker shutting down or starting answers on and off -- from its
first unreadable sample to
``--storm-window`` seconds after its first readable one; a storm meets it when their spans
overlap (the fail-over storm while the broker is down, the return storm when it is back).

Exit codes: 0 printed; 2 a bad command line, file or fleet description (the message names the
file, line and field); 3 the live JMX polling could not start or failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from .jmx_export import COLUMNS, ExportError, Row, Sample, read_export, samples

EXIT_OK, EXIT_USAGE, EXIT_LIVE = 0, 2, 3
STORM_MIN_RATE: Final = 10.0
STORM_FACTOR: Final = 5.0
STORM_WINDOW_S: Final = 120.0


@dataclass(frozen=True)
class Restart:
    broker: int
    down_s: float
    """Its first unreadable sample (or, for a counter reset seen between two readable
    samples, the earlier of them)."""
    back_s: float
    """Its first readable sample after."""


@dataclass(frozen=True)
class Storm:
    broker: int
    start_s: float
    end_s: float
    samples: int
    peak_rate: float
    created: float
    threshold: float
    restart: Restart | None


RESTART_MERGE_S: Final = 10.0
"""Two outages of one broker this close (back, then down again) are one restart: a broker
going through a controlled shutdown or starting answers JMX on and off."""


def restarts(series: dict[int, list[Sample]], merge_s: float = RESTART_MERGE_S) -> list[Restart]:
    """Every broker restart the samples show, in time order (outages of one broker at most
    ``merge_s`` apart joined)."""
    found: list[Restart] = []
    for broker, ss in series.items():
        down_at: float | None = None
        last: Sample | None = None
        for s in ss:
            if not s.up:
                down_at = s.t_s if down_at is None else down_at
                continue
            reset = (
                last is not None
                and last.creation_total is not None
                and s.creation_total is not None
                and s.creation_total < last.creation_total
            )
            if down_at is not None:
                found.append(Restart(broker, down_at, s.t_s))
            elif reset and last is not None:
                found.append(Restart(broker, last.t_s, s.t_s))
            down_at, last = None, s
    merged: list[Restart] = []
    for r in sorted(found, key=lambda r: (r.broker, r.down_s)):
        if merged and merged[-1].broker == r.broker and r.down_s - merged[-1].back_s <= merge_s:
            merged[-1] = Restart(r.broker, merged[-1].down_s, r.back_s)
        else:
            merged.append(r)
    return sorted(merged, key=lambda r: (r.down_s, r.broker))


def storms(
    series: dict[int, list[Sample]],
    *,
    min_rate: float = STORM_MIN_RATE,
    factor: float = STORM_FACTOR,
    window_s: float = STORM_WINDOW_S,
) -> list[Storm]:
    """The storms (see the module doc) of every broker, in time order."""
    known = restarts(series)
    found: list[Storm] = []
    for broker, ss in series.items():
        rates = [s.creation_rate for s in ss if s.up and s.creation_rate is not None]
        if not rates:
            continue
        threshold = max(min_rate, factor * statistics.median(rates))
        run: list[tuple[Sample, float]] = []
        before: Sample | None = None
        for s in [*ss, None]:
            hot = s is not None and s.up and (s.creation_rate or 0.0) >= threshold
            if hot and s is not None:
                covered = 0.0 if before is None else s.t_s - before.t_s
                run.append((s, covered))
            elif run:
                found.append(_storm(broker, run, threshold, known, window_s))
                run = []
            if s is not None:
                before = s
    return sorted(found, key=lambda st: (st.start_s, st.broker))


def _storm(
    broker: int,
    run: list[tuple[Sample, float]],
    threshold: float,
    known: list[Restart],
    window_s: float,
) -> Storm:
    start, end = run[0][0].t_s, run[-1][0].t_s
    near = [r for r in known if start <= r.back_s + window_s and end >= r.down_s]
    nearest = min(near, key=lambda r: abs(start - r.down_s), default=None)
    return Storm(
        broker,
        start,
        end,
        len(run),
        max(s.creation_rate or 0.0 for s, _ in run),
        sum((s.creation_rate or 0.0) * covered for s, covered in run),
        threshold,
        nearest,
    )


def peaks(series: dict[int, list[Sample]]) -> dict[str, Any]:
    """Each broker's peak connections (and when), and the cluster's: at each scrape, every
    broker's latest count summed (a broker that could not be read counts 0)."""
    per_broker = {}
    for b, ss in series.items():
        top = max((s for s in ss if s.up), key=lambda s: s.connections, default=None)
        per_broker[b] = {
            "peak_connections": 0 if top is None else top.connections,
            "at": None if top is None else top.t_s,
            "peak_creation_rate": max(
                (s.creation_rate for s in ss if s.up and s.creation_rate is not None),
                default=None,
            ),
        }
    times = sorted({s.t_s for ss in series.values() for s in ss})
    latest: dict[int, float] = {}
    events = sorted(
        (s.t_s, s.broker, s.connections if s.up else 0.0) for ss in series.values() for s in ss
    )
    best, best_t, i = 0.0, None, 0
    for t in times:
        while i < len(events) and events[i][0] <= t:
            latest[events[i][1]] = events[i][2]
            i += 1
        total = sum(latest.values())
        if total > best:
            best, best_t = total, t
    return {"brokers": per_broker, "cluster": {"peak_connections": best, "at": best_t}}


def predict(
    measured_cluster_peak: float,
    brokers: int,
    fleet_file: Path | None,
    today: str,
) -> dict[str, Any]:
    """What the model predicts for the export's client mix: the ``--fleet`` description's,
    or, without one, inferred as the workload stage's steady mix (long-lived producers and
    group consumers, half each) sized so that ``today``'s modelled cluster peak is the
    measured one."""
    from .fleet import estimate
    from .fleet_model import PROPOSAL
    from .fleet_spec import load_fleet, parse_fleet

    models = [today, *(m for m in PROPOSAL if m != today)]
    if fleet_file is not None:
        spec = load_fleet(fleet_file)
        mix, scale = f"from {fleet_file}", 1.0
    else:
        spec = parse_fleet(
            f'[cluster]\nbrokers = {max(brokers, 2)}\n[provider]\nname = "msk-iam"\n'
            f'[[clients]]\nname = "steady"\nkind = "mixed"\ncount = 10000\n',
            "<inferred steady mix>",
        )
        mix, scale = "inferred: the workload stage's steady mix", 1.0
    out = estimate(spec, models, engine="numpy")
    if fleet_file is None:
        modelled = out["models"][today]["cluster"]["peak_connections"]
        scale = measured_cluster_peak / modelled if modelled else 0.0
    clients = round(spec.fleet_size * scale)
    return {
        "mix": mix,
        "clients": clients,
        "models": {
            m: {
                "cluster_peak_connections": round(
                    out["models"][m]["cluster"]["peak_connections"] * scale
                ),
                "busiest_peak_connections": round(
                    out["models"][m]["busiest"]["peak_connections"] * scale
                ),
                "busiest_peak_attempts_per_s": round(
                    out["models"][m]["busiest"]["peak_attempts_per_s"] * scale
                ),
            }
            for m in models
        },
    }


def analyse(
    rows: Sequence[Row],
    *,
    listener: str | None = None,
    min_rate: float = STORM_MIN_RATE,
    factor: float = STORM_FACTOR,
    window_s: float = STORM_WINDOW_S,
) -> dict[str, Any]:
    """Peaks, restarts and storms of an export's rows (the ``--json`` output less the
    prediction)."""
    series = samples(rows, listener)
    return {
        "listener": listener,
        "samples": sum(len(s) for s in series.values()),
        "series": {
            b: [[s.t_s, s.connections if s.up else None] for s in ss] for b, ss in series.items()
        },
        **peaks(series),
        "restarts": [asdict(r) for r in restarts(series)],
        "storms": [
            asdict(s) for s in storms(series, min_rate=min_rate, factor=factor, window_s=window_s)
        ],
        "storm_rule": {"min_rate": min_rate, "factor": factor, "window_s": window_s},
    }


def render(out: dict[str, Any]) -> str:
    """The readable tables of :func:`analyse`'s result (and the prediction's)."""
    origin = min((t for ss in out["series"].values() for t, _ in ss), default=0.0)
    lines = [f"{out['samples']} samples, listener {out['listener'] or 'all'}", ""]
    lines.append(f"{'broker':<8}{'peak connections':>18}{'at (s)':>10}{'peak creation/s':>17}")
    for b, p in out["brokers"].items():
        rate = "-" if p["peak_creation_rate"] is None else f"{p['peak_creation_rate']:.1f}"
        at = "-" if p["at"] is None else f"{p['at'] - origin:.0f}"
        lines.append(f"{b!s:<8}{p['peak_connections']:>18,.0f}{at:>10}{rate:>17}")
    c = out["cluster"]
    at = "-" if c["at"] is None else f"{c['at'] - origin:.0f}"
    lines.append(f"{'cluster':<8}{c['peak_connections']:>18,.0f}{at:>10}")
    lines += ["", f"restarts: {len(out['restarts'])}"]
    for r in out["restarts"]:
        lines.append(
            f"  broker {r['broker']}: down at {r['down_s'] - origin:.0f} s, "
            f"back at {r['back_s'] - origin:.0f} s"
        )
    rule = out["storm_rule"]
    lines += [
        "",
        f"storms (rate >= max({rule['min_rate']:g}/s, {rule['factor']:g} x the broker's "
        f"median)): {len(out['storms'])}",
    ]
    for s in out["storms"]:
        near = s["restart"]
        why = (
            "no restart near"
            if near is None
            else f"broker {near['broker']} restarted at {near['down_s'] - origin:.0f} s"
        )
        lines.append(
            f"  broker {s['broker']}: {s['start_s'] - origin:.0f}-{s['end_s'] - origin:.0f} s, "
            f"peak {s['peak_rate']:.1f}/s, {s['created']:,.0f} created; {why}"
        )
    if "prediction" in out:
        p = out["prediction"]
        lines += ["", f"the model for this mix ({p['mix']}; {p['clients']:,} clients):"]
        lines.append(f"{'client':<16}{'cluster peak conns':>20}{'busiest broker':>16}")
        lines.append(
            f"{'measured':<16}{out['cluster']['peak_connections']:>20,.0f}"
            f"{max((b['peak_connections'] for b in out['brokers'].values()), default=0):>16,.0f}"
        )
        for m, v in p["models"].items():
            lines.append(
                f"{m:<16}{v['cluster_peak_connections']:>20,}{v['busiest_peak_connections']:>16,}"
            )
    return "\n".join(lines) + "\n"


def rows_from_readings(readings: Iterable[Any]) -> list[Row]:
    """Export rows from :class:`connmgr_evidence.java.jmx.BrokerReading` values: one per broker and
    listener (summed over its network processors, as the reader sums them), or one ``up``
    false row for a broker that could not be read or had no socket-server metrics yet."""
    rows: list[Row] = []
    for r in readings:
        t = r.t_ms / 1000.0
        if not any("connection-count" in v for v in r.listeners.values()):
            # Unreadable, or its JVM answers before its socket server has registered its
            # metrics (starting): either way it serves no connection.
            rows.append(Row(0, t, r.broker, "", "", None, None, None, False))
            continue
        for listener in sorted(r.listeners):
            rows.append(
                Row(
                    0,
                    t,
                    r.broker,
                    listener,
                    "",
                    r.value(listener, "connection-count"),
                    None,
                    r.value(listener, "connection-creation-total"),
                    True,
                )
            )
    return rows


def write_csv(rows: Iterable[Row], path: Path) -> None:
    """``rows`` as an export CSV (the columns :mod:`.jmx_export` reads)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow(
                [
                    repr(r.t_s),
                    r.broker,
                    r.listener,
                    r.processor,
                    "" if r.count is None else repr(r.count),
                    "" if r.rate is None else repr(r.rate),
                    "" if r.total is None else repr(r.total),
                    "true" if r.up else "false",
                ]
            )


def poll_live(
    endpoints: dict[int, tuple[str, int]], every_s: float, duration_s: float, version: str
) -> list[Row]:
    """Poll the brokers' remote JMX (broker id -> (host, port)) every ``every_s`` for
    ``duration_s`` with the project's ``BrokerJmx`` reader (built against kafka-clients
    ``version``); the readings as export rows."""
    import tempfile

    from connmgr_evidence.java.build import build_probe
    from connmgr_evidence.java.jmx import BrokerJmxPoller

    build = build_probe(version)
    with tempfile.TemporaryDirectory(prefix="connmgr-jmx-") as scratch:
        poller = BrokerJmxPoller(build, endpoints, every_s, Path(scratch) / "jmx.stderr")
        with poller:
            time.sleep(duration_s)
        return rows_from_readings(poller.readings())


def _endpoints(text: str) -> dict[int, tuple[str, int]]:
    out: dict[int, tuple[str, int]] = {}
    for i, part in enumerate(p for p in text.split(",") if p):
        broker, _, address = part.rpartition("=")
        host, _, port = address.rpartition(":")
        try:
            out[int(broker) if broker else i + 1] = (host, int(port))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part!r}: expected HOST:PORT or ID=HOST:PORT"
            ) from None
        if not host:
            raise argparse.ArgumentTypeError(f"{part!r}: expected HOST:PORT or ID=HOST:PORT")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="connmgr estimate jmx",
        description="Read a broker-side export of connection-count and connection creation "
        "(rate or total) per listener and per broker over time (CSV or JSON; "
        "docs/estimate.md maps the kafka.server:type=socket-server-metrics "
        "attributes to its columns), or poll the brokers' remote JMX live, and report each "
        "broker's and the cluster's peak connections, the broker restarts, the connection "
        "storms (a broker's creation rate at or above max(min rate, factor x its median), "
        "run by run) and what the proposal's model predicts for the same client mix. "
        "Exit codes: 0 printed; 2 bad command line, file or fleet description; 3 live JMX "
        "failed.",
    )
    parser.add_argument("file", nargs="?", type=Path, metavar="FILE", help="the export")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--listener", help="count this listener alone (default: all)")
    parser.add_argument("--fleet", type=Path, help="the client mix: a fleet description (TOML)")
    parser.add_argument("--no-predict", action="store_true", help="leave the model out")
    parser.add_argument(
        "--today", default="java-4.4", help="the client model the brokers' clients are today"
    )
    parser.add_argument("--storm-min-rate", type=float, default=STORM_MIN_RATE)
    parser.add_argument("--storm-factor", type=float, default=STORM_FACTOR)
    parser.add_argument("--storm-window", type=float, default=STORM_WINDOW_S, help="seconds")
    parser.add_argument(
        "--live",
        type=_endpoints,
        metavar="HOST:PORT,...",
        help="poll these brokers' remote JMX (ID=HOST:PORT, or ids 1.. in order)",
    )
    parser.add_argument("--every", type=float, default=1.0, help="live: seconds per sample")
    parser.add_argument("--duration", type=float, default=60.0, help="live: seconds to poll")
    parser.add_argument("--save", type=Path, help="live: also write the export (CSV) here")
    parser.add_argument(
        "--probe-version", default="4.3.1", help="live: kafka-clients of the JMX reader's build"
    )
    args = parser.parse_args(argv)
    from .fleet_model import MODELS

    if args.today not in MODELS:
        parser.error(f"--today: unknown {args.today!r}; valid: {', '.join(MODELS)}")
    if (args.file is None) == (args.live is None):
        parser.error("give FILE or --live (exactly one)")
    try:
        if args.live is not None:
            try:
                rows = poll_live(args.live, args.every, args.duration, args.probe_version)
            except Exception as exc:
                print(f"connmgr estimate jmx: live JMX: {exc}", file=sys.stderr)
                return EXIT_LIVE
            if args.save:
                write_csv(rows, args.save)
        else:
            rows = read_export(args.file)
        out = analyse(
            rows,
            listener=args.listener,
            min_rate=args.storm_min_rate,
            factor=args.storm_factor,
            window_s=args.storm_window,
        )
        if not args.no_predict and out["brokers"]:
            out["prediction"] = predict(
                out["cluster"]["peak_connections"], len(out["brokers"]), args.fleet, args.today
            )
    except (ExportError, ValueError) as exc:
        print(f"connmgr estimate jmx: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(out, indent=1) if args.json else render(out), end="")
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
