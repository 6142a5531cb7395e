"""The fleet stage's raw files and what the report shows of them.

:func:`write_fleet` writes the :class:`~connmgr_evidence.bench.stages.fleetview.FleetView` under
``raw/``:

* ``fleet.json``: the run's meta, the settings, the restart schedule and its window, the
  stage's wall and CPU time, and per policy the fleet's handshakes in each second of the hour and
  the dials refused per broker;
* ``fleet.parquet``: one row per policy, broker and time bucket (every broker, every
  bucket): ``sockets_avg`` (time-average open), ``sockets_max`` (most open at once) and
  ``handshakes`` there.

:func:`read_fleet` reads them back into the same view, so ``--report-only`` rebuilds the
``fleet`` and ``fleet-restarts`` tables (:func:`fleet_tables`) and the ``fleet`` plot
(:func:`fleet_over_time`, from :func:`fleet_buckets`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.fleetplan import (
    ELECTION_MS,
    RESTART_INTERVAL_MS,
    FleetSettings,
    Restart,
    restart_schedule,
    restart_window,
)
from connmgr_evidence.bench.report import plots
from connmgr_evidence.bench.report.plots import ExtraPlot
from connmgr_evidence.bench.report.table import Table, arrow_schema, make_table
from connmgr_evidence.bench.results.record import Count, MaybeReal, Real, Record, Text
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.results.schema import ResultsError
from connmgr_evidence.bench.results.stagefile import read_stage, write_stage
from connmgr_evidence.bench.stages import Phase, Setting, Stage, StageContext, StageReport
from connmgr_evidence.bench.stages.fleet import START_SPREAD_MS
from connmgr_evidence.bench.stages.fleetview import BrokerSeries, FleetView

FLEET_FILE = "fleet.json"
FLEET_CELLS = "fleet.parquet"
"""Under ``raw/``: the fleet stage's settings and series, and its per-broker buckets."""


@dataclass(frozen=True, slots=True)
class FleetCell(Record):
    """A row of ``raw/fleet.parquet``: one broker's bucket under one policy."""

    policy: Text
    broker: Count
    bucket: Count
    t_s: Real
    sockets_avg: Real
    sockets_max: Count
    handshakes: Count


_CELLS = FleetCell.columns()
_CELL_COLUMNS = tuple(name for name, _ in _CELLS)


def write_fleet(view: FleetView, meta: RunMeta, raw: Path) -> Path:
    """``raw/fleet.json`` and ``raw/fleet.parquet``; returns the JSON's path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    s = view.settings
    width = s.bucket_ms / 1000.0
    columns: dict[str, list[Any]] = {c: [] for c in _CELL_COLUMNS}
    for b in view.series:
        columns["policy"] += [b.policy] * s.buckets
        columns["broker"] += [b.broker] * s.buckets
        columns["bucket"] += range(s.buckets)
        columns["t_s"] += (k * width for k in range(s.buckets))
        columns["sockets_avg"] += b.sockets_avg
        columns["sockets_max"] += b.sockets_max
        columns["handshakes"] += b.handshakes
    raw.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns, schema=arrow_schema(_CELLS)), raw / FLEET_CELLS)
    data = {
        "meta": meta.columns(),
        "settings": asdict(s),
        "policies": list(view.policies),
        "restarts": [asdict(r) for r in restart_schedule(s)],
        "window_ms": list(restart_window(s)),
        "wall_s": view.wall_s,
        "cpu_s": view.cpu_s,
        "per_second": {p: list(v) for p, v in view.per_second.items()},
        "refused": {
            p: {str(b.broker): b.refused for b in view.series if b.policy == p and b.refused}
            for p in view.policies
        },
    }
    return write_stage(raw, FLEET_FILE, data)


def read_fleet(raw: Path) -> FleetView | None:
    """The view :func:`write_fleet` wrote under ``raw``, or None if the run had no fleet
    stage. A :class:`ResultsError` naming the file if one is there but broken."""
    import pyarrow.parquet as pq

    keys = ("settings", "policies", "per_second", "wall_s", "cpu_s")
    data = read_stage(raw, FLEET_FILE, keys, "fleet-stage")
    if data is None:
        return None
    try:
        settings = FleetSettings(**data["settings"])
    except (TypeError, ValueError) as e:  # a missing or unknown key, a bad value
        raise ResultsError(f"{raw / FLEET_FILE}: not a fleet's settings ({e})") from e
    path = raw / FLEET_CELLS
    try:
        cells = pq.read_table(path, columns=list(_CELL_COLUMNS)).to_pydict()
    except (OSError, ValueError) as e:  # pyarrow's errors are these
        raise ResultsError(f"{path}: not the fleet stage's buckets ({e})") from e
    policies = tuple(data["policies"])
    refused = data.get("refused", {})
    n = settings.buckets
    if len(cells["policy"]) != len(policies) * settings.brokers * n:
        raise ResultsError(f"{path}: {len(cells['policy'])} rows, not every broker's buckets")
    series = []
    for start in range(0, len(cells["policy"]), n):
        policy, broker = cells["policy"][start], cells["broker"][start]
        series.append(
            BrokerSeries(
                policy,
                broker,
                tuple(cells["sockets_avg"][start : start + n]),
                tuple(cells["sockets_max"][start : start + n]),
                tuple(cells["handshakes"][start : start + n]),
                int(refused.get(policy, {}).get(str(broker), 0)),
            )
        )
    per_second = {p: tuple(v) for p, v in data["per_second"].items()}
    return FleetView(
        settings, policies, tuple(series), per_second, float(data["wall_s"]), float(data["cpu_s"])
    )


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile of the ascending ``ordered`` by nearest rank (an observed value:
    p99 of 1,000 brokers is the 990th)."""
    if not ordered:
        raise ValueError("no values")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class FleetBucket:
    """One time bucket of one policy, across the brokers: what the plot draws."""

    policy: str
    t_s: float
    p50: float
    p99: float
    max: float
    """Of the brokers' most-open-at-once in the bucket."""
    handshakes: int


def fleet_buckets(view: FleetView) -> list[FleetBucket]:
    """Per policy and bucket: p50 / p99 / max over the brokers of ``sockets_max``."""
    s = view.settings
    out = []
    for policy in view.policies:
        mine = [b for b in view.series if b.policy == policy]
        for k in range(s.buckets):
            values = sorted(b.sockets_max[k] for b in mine)
            out.append(
                FleetBucket(
                    policy,
                    k * s.bucket_ms / 1000.0,
                    nearest_rank(values, 0.5),
                    nearest_rank(values, 0.99),
                    values[-1],
                    sum(b.handshakes[k] for b in mine),
                )
            )
    return out


def _summary(view: FleetView, policy: str) -> dict[str, Any]:
    s = view.settings
    mine = [b for b in view.series if b.policy == policy]
    peaks = sorted(max(b.sockets_max) for b in mine)
    total = sum(sum(b.sockets_avg) for b in mine) / s.buckets
    start, end = restart_window(s)
    seconds = view.per_second[policy]
    storm = seconds[start // 1000 : end // 1000]
    calm = [*seconds[START_SPREAD_MS // 1000 : start // 1000], *seconds[end // 1000 :]]
    return {
        "policy": policy,
        "sockets_mean": total / s.brokers,
        "sockets_p50": nearest_rank(peaks, 0.5),
        "sockets_p99": nearest_rank(peaks, 0.99),
        "sockets_max": peaks[-1],
        "fleet_sockets_mean": total,
        "handshakes": sum(seconds),
        "handshakes_restart": sum(storm),
        "peak_per_s_restart": max(storm, default=0),
        "calm_per_s": sum(calm) / len(calm) if calm else 0.0,
        "peak_per_s": max(seconds),
        "refused": sum(b.refused for b in mine),
    }


def _restart_rows(view: FleetView, policy: str) -> list[dict[str, Any]]:
    s = view.settings
    by_broker = {b.broker: b for b in view.series if b.policy == policy}
    seconds = view.per_second[policy]
    rows = []
    for r in restart_schedule(s):
        lo, hi = r.down_at_ms // 1000, (r.down_at_ms + RESTART_INTERVAL_MS) // 1000
        # Clients learn the leader is back at their next request to the stand-in, which
        # the cadence puts up to one interval after the election.
        back = range(
            r.up_at_ms // s.bucket_ms, (r.elected_at_ms + RESTART_INTERVAL_MS) // s.bucket_ms
        )
        b = by_broker[r.broker]
        rows.append(
            {
                "policy": policy,
                "broker": r.broker,
                "down_at_s": r.down_at_ms / 1000.0,
                "sockets_before": b.sockets_max[r.down_at_ms // s.bucket_ms - 1],
                "handshakes": sum(seconds[lo:hi]),
                "peak_per_s": max(seconds[lo:hi]),
                "handshakes_on_return": sum(b.handshakes[k] for k in back),
            }
        )
    return rows


@dataclass(frozen=True, slots=True)
class FleetRow(Record):
    """A row of the ``fleet`` table: one policy over the fleet's hour."""

    policy: Text
    sockets_mean: MaybeReal
    sockets_p50: Count
    sockets_p99: Count
    sockets_max: Count
    fleet_sockets_mean: MaybeReal
    handshakes: Count
    handshakes_restart: Count
    peak_per_s_restart: Count
    calm_per_s: MaybeReal
    peak_per_s: Count
    refused: Count


FLEET_COLUMNS = FleetRow.columns()


@dataclass(frozen=True, slots=True)
class FleetRestart(Record):
    """A row of the ``fleet-restarts`` table: one restarted broker under one policy."""

    policy: Text
    broker: Count
    down_at_s: MaybeReal
    sockets_before: Count
    handshakes: Count
    peak_per_s: Count
    handshakes_on_return: Count


RESTART_COLUMNS = FleetRestart.columns()


def fleet_tables(view: FleetView) -> list[Table]:
    """The ``fleet`` table (one row per policy) and ``fleet-restarts`` (per policy and
    restarted broker)."""
    s = view.settings
    start, end = restart_window(s)
    scale = (
        f"{s.clients:,} clients (40 % long-lived producers, 40 % group consumers, 20 % "
        f"short-lived producers; seed {s.seed}) over {s.brokers:,} brokers for one simulated "
        f"hour, each client simulated alone under each policy at the sweep's request "
        f"cadence (every 2 minutes) and the brokers' sockets added up over the clients"
    )
    fleet = make_table(
        "fleet",
        "The fleet view: broker-side sockets and handshakes across every client",
        f"{scale}; {s.restarts} brokers restarted one at a time from minute "
        f"{start / 60_000:g}, each down {s.down_ms / 1000:g} s (the restart window: "
        f"{start / 1000:g}-{end / 1000:g} s). `sockets_mean`: sockets open at a broker, "
        "time-averaged over the hour and the brokers; `sockets_p50` / `_p99` / `_max`: over "
        "the brokers, each broker's most sockets open at once in the hour; "
        "`fleet_sockets_mean`: all brokers together (time-average); `handshakes`: "
        f"connections established in the hour (the fleet's start, its first "
        f"{START_SPREAD_MS // 60_000} minutes, included); `handshakes_restart` and "
        "`peak_per_s_restart`: in the restart window, and its busiest second; `calm_per_s`: "
        "the mean per second outside the start and the restart window; `peak_per_s`: the "
        "hour's busiest second (in the start); "
        "`refused`: dials that reached a broker that was down. In the model every client "
        "reacts to a restart at the same instant (no reconnect jitter), so a second's "
        "count is an upper bound of what real clients would bunch into it; the cadence "
        "spreads the reactions that wait for a request over up to 2 minutes. The stage "
        f"took {view.wall_s:.0f} s ({view.cpu_s:.0f} s of CPU in its Spark tasks).",
        FLEET_COLUMNS,
        [_summary(view, p) for p in view.policies],
    )
    restarts = make_table(
        "fleet-restarts",
        "The fleet view: each restart's connection storm",
        f"{scale}. One row per policy and restarted broker, over the {RESTART_INTERVAL_MS // 1000} "
        "s from its going down to the next broker's: `sockets_before` (the most open at the "
        "broker in the bucket before it went down), the fleet's `handshakes` and busiest "
        "second (`peak_per_s`), and `handshakes_on_return`: connections established at the "
        "restarted broker itself from its return to 2 minutes after the election "
        f"{ELECTION_MS // 1000} s later (clients learn their leader is back at their next "
        "request, up to one cadence interval after it).",
        RESTART_COLUMNS,
        [row for p in view.policies for row in _restart_rows(view, p)],
    )
    return [fleet, restarts]


def fleet_over_time(
    buckets: Sequence[FleetBucket],
    per_second: Mapping[str, Sequence[int]],
    restarts: Sequence[Restart],
    path: Path,
) -> Path | None:
    """The fleet over its hour, a line per policy: above, the brokers' sockets per time
    bucket (of each broker's most open at once: max solid, p99 dashed, p50 dotted; log y);
    below, the fleet's busiest second of handshakes in each minute (log y; policies equal
    second by second drawn once, the others dodged and dashed apart; the hour's mean in the
    legend). Each restarted broker's time down is shaded, its election a dotted
    line. Rows: :func:`connmgr_evidence.bench.stages.fleetreport.fleet_buckets` and the view's
    ``per_second``."""
    if not buckets:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11.0, 7.5))
    top, bottom = fig.subplots(2, 1, sharex=True)
    policies = list(dict.fromkeys(b.policy for b in buckets))
    for rank, policy in enumerate(policies):
        mine = [b for b in buckets if b.policy == policy]
        minutes = [b.t_s / 60.0 for b in mine]
        # The first policy (the proposal) on top: baselines often draw the same line.
        line = {"where": "post", "color": plots.colour(policy), "zorder": len(policies) - rank}
        top.step(minutes, [b.max for b in mine], "-", label=policy, **line)
        top.step(minutes, [b.p99 for b in mine], "--", alpha=0.8, **line)
        top.step(minutes, [b.p50 for b in mine], ":", alpha=0.8, **line)
    series = handshake_series(per_second, policies)
    for rank, (names, busiest, mean) in enumerate(series):
        # Policies whose handshakes are the same second by second are one series with one
        # label ("a = b"); the others are dodged sideways by a fraction of a minute, each
        # with its own dash and marker, so that equal minutes do not hide each other.
        dodge = (rank - (len(series) - 1) / 2) * 0.12
        bottom.step(
            [m + dodge for m in range(len(busiest))],
            busiest,
            where="post",
            color=plots.colour(names[0]),
            linestyle=_SERIES_STYLES[rank % len(_SERIES_STYLES)],
            marker=_SERIES_MARKERS[rank % len(_SERIES_MARKERS)],
            markevery=(rank, len(series) + 2),
            markersize=4,
            linewidth=1.1,
            label=f"{' = '.join(names)} (mean {mean:.2f}/s)",
        )
    for ax in (top, bottom):
        for r in restarts:
            ax.axvspan(r.down_at_ms / 60_000, r.up_at_ms / 60_000, color="tab:red", alpha=0.12)
            ax.axvline(r.elected_at_ms / 60_000, color="tab:red", linewidth=0.6, linestyle=":")
        ax.set_yscale("log")
    top.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    top.set_ylabel("sockets at a broker:\nmax (—), p99 (--), p50 (··)")
    bottom.set_ylabel("fleet handshakes per second:\nbusiest second of each minute")
    bottom.set_xlabel("minute of the hour (shaded: a broker down; dotted: its election)")
    fig.suptitle("The fleet: each broker's most sockets at once per bucket; handshakes")
    fig.subplots_adjust(right=0.78)
    return plots.save(fig, path)


_SERIES_STYLES = ("-", "--", "-.", ":")
_SERIES_MARKERS = ("o", "s", "^", "v", "D", "x")


def handshake_series(
    per_second: Mapping[str, Sequence[int]], policies: Sequence[str]
) -> list[tuple[tuple[str, ...], list[float], float]]:
    """The lower panel's series: per minute, the busiest second's handshakes (at least
    0.5/s: on a log axis a minute without a handshake is drawn below every real value), and
    the hour's mean per second; one series per group of policies whose seconds are all
    equal, named in ``policies`` order."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for policy in policies:
        groups.setdefault(tuple(per_second.get(policy, ())), []).append(policy)
    out = []
    for seconds, names in groups.items():
        spans = [seconds[m : m + 60] for m in range(0, len(seconds), 60)]
        busiest = [max(max(s), 0.5) for s in spans]
        out.append((tuple(names), busiest, sum(seconds) / max(len(seconds), 1)))
    return out


SETTINGS: Mapping[str, Setting] = {
    "clients": Setting(int),
    "brokers": Setting(int),
    "restarts": Setting(int),
    "down_ms": Setting(int),
    "bucket_ms": Setting(int),
    "seed": Setting(int),
}
"""``[fleet]``: the fleet's clients and brokers, the brokers restarted and how long each is
down, the buckets of its series and the seed the clients are drawn from."""


class FleetStage:
    name = "fleet"
    phase = Phase.SPARK
    order = 2
    shown = 5
    timed = True
    says = None
    what = (
        "the fleet view, on the sweep's Spark session: `[fleet] clients` clients (40 % long-lived "
        "producers and 40 % group consumers started within the first 5 minutes, 20 % short-lived "
        "producers starting any time; each drawn from the seed and its index, its topic led by "
        "1-12 random brokers) over one cluster of `brokers` brokers for a simulated hour, "
        "`restarts` brokers restarted one at a time from minute 10 (each down `down_ms`, its "
        "partitions and coordinators moving to the next live broker and back at an election 30 s "
        "after its return: `rolling-restart`'s changes). Each client runs alone under `proposed`, "
        "`java-today`, `aiokafka-today`, `java-patched` (today's Java client with KIP (b0)'s "
        "bootstrap close alone) and `proposed-4.4` (the proposal on brokers that answer KIP-1242's"
        " identity check: it confirms and adopts a bootstrap socket whose broker it needs) at the "
        "sweep's cadence; a broker's sockets and handshakes are the sum of the clients' there "
        "(from their ledgers: each socket from its dial to its end, at the broker it reached), per"
        " `bucket_ms` (time-average and most open at once) and per second. 10,000 clients x 1,000 "
        "brokers took 416 s on `local[2]` with the two cores shared with another job (397 s of CPU"
        " in its tasks: about 3.5 minutes on two idle cores)"
    )
    writes = "`raw/fleet.json`, `raw/fleet.parquet`; tables `fleet`, `fleet-restarts`, plot `fleet`"
    section = "fleet"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        """The section describes a fleet that can run (restarts fit the hour ...)."""
        try:
            FleetSettings.from_values(values)
        except ConfigError as e:
            raise ConfigError(f"[fleet] {e}") from e

    def run(self, ctx: StageContext) -> None:
        """The ``[fleet]`` section's clients simulated in Spark tasks and added up per broker
        (:mod:`connmgr_evidence.bench.stages.fleetview`); the bar counts the Spark job's tasks."""
        from tqdm import tqdm

        from connmgr_evidence.bench.stages.fleetview import run_fleet

        settings = FleetSettings.from_values(ctx.grid.values["fleet"])
        with tqdm(desc="fleet", unit="task", disable=not ctx.show, leave=True) as bar:

            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.n = done
                bar.refresh()

            view = run_fleet(ctx.spark, settings, progress=progress)
        write_fleet(view, ctx.meta, ctx.raw)

    def read(self, raw: Path) -> FleetView | None:
        return read_fleet(raw)

    def report(self, found: FleetView, raw: Path) -> StageReport:
        buckets, per_second = fleet_buckets(found), found.per_second
        restarts = restart_schedule(found.settings)
        plot: ExtraPlot = (
            "fleet",
            "The fleet view",
            f"{found.settings.clients:,} clients over {found.settings.brokers:,} brokers "
            "for one simulated hour, through a rolling restart of "
            f"{found.settings.restarts} brokers: above, the brokers' sockets (each "
            "broker's most open at once per bucket: max, p99, p50 over the brokers); "
            "below, the fleet's handshakes per second (each minute's busiest second and "
            "mean). Shaded: a broker down; dotted: its election.",
            lambda path: fleet_over_time(buckets, per_second, restarts, path),
        )
        return StageReport(tables=fleet_tables(found), plots=[plot])


STAGE: Stage[FleetView] = FleetStage()
