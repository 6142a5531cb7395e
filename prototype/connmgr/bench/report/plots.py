"""The report's plots, drawn headless (matplotlib's Agg canvas, no pyplot state).

Each function takes rows already aggregated by the Spark job (the typed values of
:mod:`connmgr.bench.report.summaries`), writes one PNG
and returns its path, or returns None when the rows hold nothing to draw. Colours are fixed
per policy across plots: the proposal is always the first colour.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from connmgr.bench.report.metrics import PROPOSED
from connmgr.bench.report.summaries import BrokerSockets, ClientTimings, RoleSockets, SweepSaving
from connmgr.bench.results.schema import ROLES
from connmgr.bench.stages.fleet import Restart
from connmgr.bench.stages.fleetreport import FleetBucket
from connmgr.bench.stages.linger import LingerPoint

MAX_PANELS = 9
_KNOWN_COLOURS = {
    PROPOSED: "tab:green",
    "proposed-4.4": "darkgreen",
    "java-described": "tab:purple",
    "java-today": "tab:brown",
    "java-patched": "tab:olive",
    "aiokafka-today": "tab:blue",
    "aiokafka": "tab:cyan",
    "java-2.1.0": "tab:pink",
    "java-4.4.0": "tab:orange",
    # The Java pair (the release the patch applies to, and the patch), apart at a glance.
    "java-4.3.1": "firebrick",
    "java-4.3.1-patched": "olivedrab",
    "librdkafka": "goldenrod",
}
_OTHER_COLOURS = ("tab:gray", "tab:red", "black")
_ROLE_COLOURS = {"bootstrap": "tab:gray", "data": "tab:blue", "coordination": "tab:orange"}


def colour(policy: str) -> str:
    """The colour of a policy or client, the same in every plot of every report."""
    known = _KNOWN_COLOURS.get(policy)
    if known is not None:
        return known
    return _OTHER_COLOURS[zlib.crc32(policy.encode()) % len(_OTHER_COLOURS)]


class _Panelled(Protocol):
    """A row that belongs to a (kind, scenario) panel at a broker count."""

    @property
    def kind(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def brokers(self) -> int: ...


def _policies(names: Iterable[str]) -> list[str]:
    """The distinct policies (or baselines), the proposal first."""
    return sorted(set(names), key=lambda p: (p != PROPOSED, p))


def _figure(panels: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    from matplotlib.figure import Figure

    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols, height * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # tight_layout once is several times cheaper than a constrained layout engine.
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def _panels(rows: Sequence[_Panelled], *, several_sizes: bool) -> list[tuple[str, str]]:
    """(kind, scenario) panels, those with the most broker counts first, at most
    :data:`MAX_PANELS`; with ``several_sizes``, only those with more than one broker count
    (unless none has)."""
    sizes: dict[tuple[str, str], set[Any]] = {}
    for r in rows:
        sizes.setdefault((r.kind, r.scenario), set()).add(r.brokers)
    ranked = sorted(sizes, key=lambda k: (-len(sizes[k]), k))
    if several_sizes and len(sizes[ranked[0]]) > 1:
        ranked = [k for k in ranked if len(sizes[k]) > 1]
    return ranked[:MAX_PANELS]


def sockets_vs_brokers(rows: Sequence[BrokerSockets], path: Path) -> Path | None:
    """Median peak (solid) and steady (dashed) sockets against broker count (log x), one line
    per policy, one panel per (kind, scenario). Rows: the ``sockets-by-brokers`` table."""
    if not rows:
        return None
    panels = _panels(rows, several_sizes=True)
    fig, axes = _figure(len(panels))
    for ax, (kind, scenario) in zip(axes, panels, strict=True):
        mine = [r for r in rows if (r.kind, r.scenario) == (kind, scenario)]
        for policy in _policies(r.policy for r in mine):
            pts = sorted((r.brokers, r.peak, r.steady) for r in mine if r.policy == policy)
            xs = [p[0] for p in pts]
            ax.plot(xs, [p[1] for p in pts], "o-", color=colour(policy), label=policy)
            ax.plot(xs, [p[2] for p in pts], "x--", color=colour(policy), alpha=0.6)
        ax.set_xscale("log")
        ax.set_title(f"{scenario} ({kind})", fontsize=10)
        ax.set_xlabel("brokers")
        ax.set_ylabel("sockets: peak (—), steady (--)")
        ax.legend(fontsize=7)
    fig.suptitle("Sockets against cluster size (medians)")
    return _save(fig, path)


def sockets_by_role(rows: Sequence[RoleSockets], path: Path) -> Path | None:
    """Stacked bars: sockets opened by role, per policy, one panel per (kind, scenario) (mean
    over the scenario's points of the median). Rows: the ``sockets-by-role`` table."""
    measured = [r for r in rows if any(r.opened[role] is not None for role in ROLES)]
    if not measured:
        return None
    rows = measured
    panels = _panels(rows, several_sizes=False)
    fig, axes = _figure(len(panels))
    for ax, (kind, scenario) in zip(axes, panels, strict=True):
        mine = [r for r in rows if (r.kind, r.scenario) == (kind, scenario)]
        policies = _policies(r.policy for r in mine)
        bottom = [0.0] * len(policies)
        for role in ROLES:
            heights = [_mean(r.opened[role] for r in mine if r.policy == p) for p in policies]
            ax.bar(policies, heights, bottom=bottom, label=role, color=_ROLE_COLOURS[role])
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_title(f"{scenario} ({kind})", fontsize=10)
        ax.set_ylabel("sockets opened (mean over points)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        ax.legend(fontsize=7)
    fig.suptitle("Sockets opened, by role")
    return _save(fig, path)


def latency(rows: Sequence[ClientTimings], path: Path) -> Path | None:
    """Box plots of time to first ack (producers) and first consume (consumers) per client,
    grouped by RTT. Rows: the result rows that have a timing."""
    metrics = [
        (m, label)
        for m, label in (
            ("ttfa_ms", "time to first ack, ms"),
            ("ttfc_ms", "time to first consume, ms"),
        )
        if any(r.timing(m) is not None for r in rows)
    ]
    if not metrics:
        return None
    fig, axes = _figure(len(metrics), width=6.5)
    for ax, (m, label) in zip(axes, metrics, strict=True):
        mine = [r for r in rows if r.timing(m) is not None]
        rtts = sorted({float(r.rtt_ms) for r in mine})
        policies = _policies(r.policy for r in mine)
        width = 0.8 / len(policies)
        for j, policy in enumerate(policies):
            data, positions = [], []
            for i, rtt in enumerate(rtts):
                values = [
                    r.timing(m) for r in mine if r.policy == policy and float(r.rtt_ms) == rtt
                ]
                if values:
                    data.append(values)
                    positions.append(i - 0.4 + width * (j + 0.5))
            if not data:
                continue
            box = ax.boxplot(
                data,
                positions=positions,
                widths=width * 0.9,
                patch_artist=True,
                medianprops={"color": "black"},
            )
            for patch in box["boxes"]:
                patch.set_facecolor(colour(policy))
            ax.plot([], [], "s", color=colour(policy), label=policy)
        ax.set_xticks(range(len(rtts)), [f"{rtt:g}" for rtt in rtts])
        ax.set_xlabel("RTT, ms")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.suptitle("Time to first ack / consume, per client and RTT")
    return _save(fig, path)


def throughput(rows: Sequence[ClientTimings], path: Path) -> Path | None:
    """Bars of median throughput per client with the min-max over repeats, one group per
    point. Rows: the result rows that have a timing or a throughput."""
    mine = [r for r in rows if r.throughput_rps is not None]
    if not mine:
        return None
    points = sorted({str(r.point) for r in mine})
    policies = _policies(r.policy for r in mine)
    fig, (ax,) = _figure(1, width=max(6.0, 1.8 * len(points) * max(1, len(policies)) / 2))
    width = 0.8 / len(policies)
    for j, policy in enumerate(policies):
        xs, ys, lo, hi = [], [], [], []
        for i, point in enumerate(points):
            values = [
                r.throughput_rps
                for r in mine
                if r.throughput_rps is not None and r.policy == policy and r.point == point
            ]
            if values:
                med = statistics.median(values)
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(med)
                lo.append(med - min(values))
                hi.append(max(values) - med)
        ax.bar(
            xs, ys, width=width * 0.9, yerr=[lo, hi], capsize=3, color=colour(policy), label=policy
        )
    ax.set_xticks(range(len(points)), [_short(p) for p in points], fontsize=7)
    ax.set_ylabel("records acknowledged per second")
    ax.legend(fontsize=7)
    fig.suptitle("Throughput A/B (median, min-max over repeats)")
    return _save(fig, path)


def sweep_savings(rows: Sequence[SweepSaving], path: Path) -> Path | None:
    """Share of peak (solid) and steady (dashed) sockets saved against each baseline, by
    broker count (log x). Rows: the sweep's savings per baseline and broker bin."""
    if not rows:
        return None
    baselines = _policies(r.baseline for r in rows)
    fig, (ax,) = _figure(1, width=7.0, height=4.2)
    for b in baselines:
        pts = sorted((r.brokers, r.peak_saving, r.steady_saving) for r in rows if r.baseline == b)
        xs = [p[0] for p in pts]
        ax.plot(xs, [_pct(p[1]) for p in pts], "o-", color=colour(b), label=f"vs {b}")
        ax.plot(xs, [_pct(p[2]) for p in pts], "x--", color=colour(b), alpha=0.6)
    ax.set_xscale("log")
    ax.set_xlabel("brokers")
    ax.set_ylabel("sockets saved, %: peak (—), steady (--)")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.legend(fontsize=8)
    fig.suptitle("Sweep: sockets the proposal saves, by cluster size")
    return _save(fig, path)


def linger_tradeoff(points: Sequence[LingerPoint], path: Path) -> Path | None:
    """Socket-seconds against handshakes per client-hour, one panel per scenario: the
    proposal's curve through its linger values (each labelled), each baseline one marker.
    Rows: the ``linger`` table's points."""
    if not points:
        return None
    scenarios = list(dict.fromkeys(p.scenario for p in points))[:MAX_PANELS]
    fig, axes = _figure(len(scenarios))
    for ax, scenario in zip(axes, scenarios, strict=True):
        mine = [p for p in points if p.scenario == scenario]
        curve = [p for p in mine if p.linger_ms is not None]
        ax.plot(
            [p.handshakes_per_h for p in curve],
            [p.socket_s_per_h for p in curve],
            "o-",
            color=colour(PROPOSED),
            label=PROPOSED,
        )
        for p in curve:
            ax.annotate(
                _linger_label(p.linger_ms or 0),
                (p.handshakes_per_h, p.socket_s_per_h),
                fontsize=6,
                textcoords="offset points",
                xytext=(3, 3),
            )
        for p in mine:
            if p.linger_ms is None:
                ax.plot(
                    p.handshakes_per_h,
                    p.socket_s_per_h,
                    "s",
                    color=colour(p.policy),
                    label=p.policy,
                )
        ax.set_title(_short(scenario, 40), fontsize=9)
        ax.set_xlabel("handshakes per client-hour")
        ax.set_ylabel("socket-seconds per client-hour")
        ax.legend(fontsize=7)
    fig.suptitle("The linger trade-off (medians; labels: linger_ms)")
    return _save(fig, path)


def fleet_over_time(
    buckets: Sequence[FleetBucket],
    per_second: Mapping[str, Sequence[int]],
    restarts: Sequence[Restart],
    path: Path,
) -> Path | None:
    """The fleet over its hour, a line per policy: above, the brokers' sockets per time
    bucket (of each broker's most open at once: max solid, p99 dashed, p50 dotted; log y);
    below, the fleet's handshakes per second in each minute (its busiest second solid, its
    mean dashed; log y). Each restarted broker's time down is shaded, its election a dotted
    line. Rows: :func:`connmgr.bench.stages.fleetreport.fleet_buckets` and the view's
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
        line = {"where": "post", "color": colour(policy), "zorder": len(policies) - rank}
        top.step(minutes, [b.max for b in mine], "-", label=policy, **line)
        top.step(minutes, [b.p99 for b in mine], "--", alpha=0.8, **line)
        top.step(minutes, [b.p50 for b in mine], ":", alpha=0.8, **line)
        seconds = per_second.get(policy, ())
        spans = [seconds[m : m + 60] for m in range(0, len(seconds), 60)]
        # Log y: a minute without a handshake is drawn at 0.5/s, below every real value.
        busiest = [max(max(s), 0.5) for s in spans]
        mean = [max(sum(s) / len(s), 0.5) for s in spans]
        at = list(range(len(spans)))
        bottom.step(at, busiest, "-", linewidth=0.9, label=policy, **line)
        bottom.step(at, mean, "--", linewidth=0.9, alpha=0.8, **line)
    for ax in (top, bottom):
        for r in restarts:
            ax.axvspan(r.down_at_ms / 60_000, r.up_at_ms / 60_000, color="tab:red", alpha=0.12)
            ax.axvline(r.elected_at_ms / 60_000, color="tab:red", linewidth=0.6, linestyle=":")
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    top.set_ylabel("sockets at a broker:\nmax (—), p99 (--), p50 (··)")
    bottom.set_ylabel("fleet handshakes per second:\nbusiest second (—), mean (--)")
    bottom.set_xlabel("minute of the hour (shaded: a broker down; dotted: its election)")
    fig.suptitle("The fleet: each broker's most sockets at once per bucket; handshakes")
    return _save(fig, path)


def _linger_label(ms: int) -> str:
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms}ms"


def _mean(values: Iterable[float | None]) -> float:
    """The mean of the measured values (a role not measured counts for nothing)."""
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else 0.0


def _pct(x: float | None) -> float:
    return math.nan if x is None or math.isinf(x) else 100.0 * x


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
