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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from connmgr.bench.report.metrics import PROPOSED
from connmgr.bench.report.summaries import BrokerSockets, ClientTimings, RoleSockets, SweepSaving
from connmgr.bench.results.schema import ROLES

ExtraPlot = tuple[str, str, str, Callable[[Path], Path | None]]
"""(name, title, caption, draw): a plot a stage contributes to the report; ``draw`` writes
``plots/<name>.png`` at the path it is given, or returns None with nothing to draw."""

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


def figure(panels: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    """A figure of ``panels`` axes, three to a row (the unused ones hidden)."""
    from matplotlib.figure import Figure

    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols, height * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return fig, axes[:panels]


def save(fig: Any, path: Path) -> Path:
    """Write ``fig`` to ``path`` as every report plot is written (tests catch figures here)."""
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
    fig, axes = figure(len(panels))
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
    return save(fig, path)


def sockets_by_role(rows: Sequence[RoleSockets], path: Path) -> Path | None:
    """Stacked bars: sockets opened by role, per policy, one panel per (kind, scenario) (mean
    over the scenario's points of the median). Rows: the ``sockets-by-role`` table."""
    measured = [r for r in rows if any(r.opened[role] is not None for role in ROLES)]
    if not measured:
        return None
    rows = measured
    panels = _panels(rows, several_sizes=False)
    fig, axes = figure(len(panels))
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
    return save(fig, path)


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
    fig, axes = figure(len(metrics), width=6.5)
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
    return save(fig, path)


def throughput(rows: Sequence[ClientTimings], path: Path) -> Path | None:
    """Bars of median throughput per client with the min-max over repeats, one group per
    point. Rows: the result rows that have a timing or a throughput."""
    mine = [r for r in rows if r.throughput_rps is not None]
    if not mine:
        return None
    points = sorted({str(r.point) for r in mine})
    policies = _policies(r.policy for r in mine)
    fig, (ax,) = figure(1, width=max(6.0, 1.8 * len(points) * max(1, len(policies)) / 2))
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
    ax.set_xticks(range(len(points)), [short(p) for p in points], fontsize=7)
    ax.set_ylabel("records acknowledged per second")
    ax.legend(fontsize=7)
    fig.suptitle("Throughput A/B (median, min-max over repeats)")
    return save(fig, path)


def sweep_savings(rows: Sequence[SweepSaving], path: Path) -> Path | None:
    """Share of peak (solid) and steady (dashed) sockets saved against each baseline, by
    broker count (log x). Rows: the sweep's savings per baseline and broker bin."""
    if not rows:
        return None
    baselines = _policies(r.baseline for r in rows)
    fig, (ax,) = figure(1, width=7.0, height=4.2)
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
    return save(fig, path)


def _mean(values: Iterable[float | None]) -> float:
    """The mean of the measured values (a role not measured counts for nothing)."""
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else 0.0


def _pct(x: float | None) -> float:
    return math.nan if x is None or math.isinf(x) else 100.0 * x


def short(text: str, limit: int = 28) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
