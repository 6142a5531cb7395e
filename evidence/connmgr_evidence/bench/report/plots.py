"""The report's plots, drawn headless (matplotlib's Agg canvas, no pyplot state).

Each function takes rows already aggregated by the Spark job (the typed values of
:mod:`connmgr_evidence.bench.report.summaries`), writes one PNG
and returns its path, or returns None when the rows hold nothing to draw. Colours are fixed
per policy across plots: the proposal is always the first colour.

Each plot is meant to be read at a glance: its key is one legend below the panels (never over
the data), a panel where one value dwarfs the rest draws them on a log axis or cuts the tall
bar off with its height printed on it, bars have :data:`HEADROOM` above them, and labels
name what tells their points apart.
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from connmgr_evidence.bench.report.metrics import PROPOSED
from connmgr_evidence.bench.report.summaries import (
    BrokerSockets,
    ClientTimings,
    RoleSockets,
    SweepSaving,
)
from connmgr_evidence.bench.results.schema import ROLES

ExtraPlot = tuple[str, str, str, Callable[[Path], Path | None]]
"""(name, title, caption, draw): a plot a stage contributes to the report; ``draw`` writes
``plots/<name>.png`` at the path it is given, or returns None with nothing to draw."""

MAX_PANELS = 9
HEADROOM = 1.15
"""The y axis of a bar plot reaches this many times its tallest bar (the one cut off aside)."""
DWARFS = 10.0
"""A panel value more than this many times the panel's low median dwarfs the rest: lines go
on a log y axis, a bar is cut off at the top of a panel scaled to the others."""
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
    """Write ``fig`` to ``path`` as every report plot is written (tests catch figures here).
    The panels are laid out above the figure's legend (:func:`legend_below`), if it has one;
    a figure made with ``layout="constrained"`` lays itself out as it is saved."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not _constrained(fig):
        # tight_layout once is several times cheaper than a constrained layout engine.
        fig.tight_layout(rect=(0.0, _legend_height(fig), 1.0, 1.0))
    fig.savefig(path, dpi=100)
    return path


def _constrained(fig: Any) -> bool:
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    return isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)


def _renderer(fig: Any) -> Any:
    """The Agg renderer of ``fig`` (what it is saved with), to measure text before saving."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    return fig.canvas.get_renderer()


def _legend_height(fig: Any) -> float:
    """The share of ``fig``'s height its legends below the panels take, with a margin."""
    if not fig.legends:
        return 0.0
    renderer = _renderer(fig)
    tallest = max(float(legend.get_window_extent(renderer).y1) for legend in fig.legends)
    return min(0.5, (tallest + 4.0) / float(fig.get_figheight() * fig.dpi))


def legend_below(fig: Any, entries: Sequence[tuple[Any, str]], fontsize: float = 8) -> None:
    """One legend for the whole figure, centred below its panels, in as many columns as its
    width allows: ``entries`` are (handle, label), a label shown once (the first wins)."""
    seen: dict[str, Any] = {}
    for handle, label in entries:
        seen.setdefault(label, handle)
    if not seen:
        return
    renderer = _renderer(fig)
    width = fig.get_figwidth() * fig.dpi
    # A constrained layout makes room for a legend placed "outside"; tight_layout does not
    # know figure legends: save() keeps its panels above it.
    place: dict[str, Any] = (
        {"loc": "outside lower center"}
        if _constrained(fig)
        else {"loc": "lower center", "bbox_to_anchor": (0.5, 0.0)}
    )
    for ncol in range(len(seen), 0, -1):
        legend = fig.legend(
            list(seen.values()),
            list(seen),
            **place,
            ncol=ncol,
            fontsize=fontsize,
            frameon=False,
        )
        if ncol == 1 or legend.get_window_extent(renderer).width <= 0.96 * width:
            return
        legend.remove()


def legend_entries(axes: Iterable[Any]) -> list[tuple[Any, str]]:
    """(handle, label) of every labelled artist of ``axes``, in order."""
    entries: list[tuple[Any, str]] = []
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        entries += zip(handles, labels, strict=True)
    return entries


def line_styles(solid: str, dashed: str) -> list[tuple[Any, str]]:
    """Legend entries that say what a solid and a dashed line of any colour stand for."""
    from matplotlib.lines import Line2D

    return [
        (Line2D([], [], color="black", marker="o", linestyle="-"), solid),
        (Line2D([], [], color="black", marker="x", linestyle="--", alpha=0.6), dashed),
    ]


def dwarfing(values: Iterable[float]) -> bool:
    """Whether one of ``values`` is more than :data:`DWARFS` times their low median (of the
    positive ones): drawn linearly, it would flatten the rest to the floor."""
    shown = sorted(v for v in values if v > 0 and math.isfinite(v))
    return bool(shown) and shown[-1] > DWARFS * shown[(len(shown) - 1) // 2]


def count_axis(ax: Any, values: Sequence[float]) -> None:
    """A y axis of counts: plain numbers; logarithmic when one value dwarfs the rest
    (symmetric-log, linear up to 1, if a value is 0)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if not dwarfing(values):
        plain_numbers(ax)
        return
    if min(values) <= 0:
        ax.set_yscale("symlog", linthresh=1.0, linscale=0.5)
    else:
        ax.set_yscale("log")
        positive = [v for v in values if v > 0]
        decades = math.log10(max(positive) / min(positive))
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if decades <= 2 else (1.0,)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number_text(v)))
    ax.yaxis.set_minor_formatter(NullFormatter())


def number_text(value: float) -> str:
    """A tick's number as the tables print it: 25,200, 12.5, 0."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,g}"


def plain_numbers(ax: Any) -> None:
    """``ax``'s y ticks as plain numbers (no offset, no scientific notation)."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number_text(v)))


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
    per policy, one panel per (kind, scenario); a panel where one policy's count dwarfs the
    others' has a log y axis. Rows: the ``sockets-by-brokers`` table."""
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
        count_axis(ax, [v for r in mine for v in (r.peak, r.steady)])
        ax.set_title(f"{scenario} ({kind})", fontsize=10)
        ax.set_xlabel("brokers")
        scale = ", log scale" if ax.get_yscale() != "linear" else ""
        ax.set_ylabel(f"sockets{scale}")
    entries = legend_entries(axes)
    entries.sort(key=lambda e: (e[1] != PROPOSED, e[1]))
    legend_below(fig, entries + line_styles("peak", "steady"))
    fig.suptitle("Sockets against cluster size (medians): peak (solid), steady (dashed)")
    return save(fig, path)


def sockets_by_role(rows: Sequence[RoleSockets], path: Path) -> Path | None:
    """Stacked bars: sockets opened by role, per policy, one panel per (kind, scenario) (mean
    over the scenario's points of the median). A bar that dwarfs the panel's others is cut off
    at the top of a panel scaled to them, its height printed on it. Rows: the
    ``sockets-by-role`` table."""
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
        _cut_off_dwarfing(ax, bottom)
        ax.set_title(f"{scenario} ({kind})", fontsize=10)
        ax.set_ylabel("sockets opened (mean over points)")
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")
            label.set_rotation_mode("anchor")
    legend_below(fig, legend_entries(axes[:1]))
    fig.suptitle("Sockets opened, by role")
    return save(fig, path)


def _cut_off_dwarfing(ax: Any, tops: Sequence[float]) -> None:
    """Scale ``ax`` to :data:`HEADROOM` above its bars (``tops``, in x order), leaving out
    those that dwarf the others (:func:`dwarfing`): each of those is cut off at the top of the
    panel, a white break across it and its height printed on it."""
    shown = sorted(t for t in tops if t > 0)
    if not shown:
        return
    low_median = shown[(len(shown) - 1) // 2]
    ordinary = [t for t in shown if t <= DWARFS * low_median]
    limit = HEADROOM * max(ordinary)
    ax.set_ylim(0, limit)
    for x, top in enumerate(tops):
        if top <= limit:
            continue
        for y in (0.9, 0.94):  # a break across the bar: it goes on far above the panel
            ax.plot(
                [x - 0.42, x + 0.42],
                [limit * (y - 0.015), limit * (y + 0.015)],
                color="white",
                linewidth=2.5,
            )
        ax.annotate(
            f"{top:,.0f}",
            (x, 0.84 * limit),
            ha="center",
            va="top",
            color="white",
            fontsize=8,
            fontweight="bold",
        )


def latency(rows: Sequence[ClientTimings], path: Path) -> Path | None:
    """Box plots of time to first ack (producers) and first consume (consumers) per client,
    grouped by RTT (a client's single value a diamond of its colour). Rows: the result rows
    that have a timing."""
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
            # A box of one value (a single repeat) is a flat line with no colour: mark it.
            single = [(x, d[0]) for x, d in zip(positions, data, strict=True) if len(set(d)) == 1]
            if single:
                ax.plot(
                    [x for x, _ in single],
                    [y for _, y in single],
                    "D",
                    color=colour(policy),
                    markeredgecolor="black",
                    markersize=6,
                )
            ax.plot([], [], "s", color=colour(policy), label=policy)
        ax.set_xticks(range(len(rtts)), [f"{rtt:g}" for rtt in rtts])
        ax.set_xlabel("RTT, ms")
        ax.set_ylabel(label)
    entries = legend_entries(axes)
    entries.sort(key=lambda e: (e[1] != PROPOSED, e[1]))
    legend_below(fig, entries)
    fig.suptitle("Time to first ack / consume, per client and RTT")
    return save(fig, path)


def throughput(rows: Sequence[ClientTimings], path: Path) -> Path | None:
    """Bars of median throughput per client with the min-max over repeats, one group per
    point, labelled by what sets it apart from the others (its RTT). Rows: the result rows
    that have a timing or a throughput."""
    mine = [r for r in rows if r.throughput_rps is not None]
    if not mine:
        return None
    points, labels, shared = point_labels({str(r.point) for r in mine})
    policies = _policies(r.policy for r in mine)
    fig, (ax,) = figure(1, width=max(6.0, 1.8 * len(points) * max(1, len(policies)) / 2))
    width = 0.8 / len(policies)
    highest = 0.0
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
                highest = max(highest, max(values))
        ax.bar(
            xs, ys, width=width * 0.9, yerr=[lo, hi], capsize=3, color=colour(policy), label=policy
        )
    if highest > 0:
        ax.set_ylim(0, HEADROOM * highest)
    ax.set_xticks(range(len(points)), labels, fontsize=8)
    ax.set_xlabel(shared)
    ax.set_ylabel("records acknowledged per second")
    plain_numbers(ax)
    legend_below(fig, legend_entries([ax]))
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
    ax.set_ylabel("sockets saved, %")
    ax.axhline(0, color="black", linewidth=0.8)
    legend_below(fig, legend_entries([ax]) + line_styles("peak", "steady"))
    fig.suptitle(
        "Sweep: sockets the proposal saves, by cluster size: peak (solid), steady (dashed)"
    )
    return save(fig, path)


def _mean(values: Iterable[float | None]) -> float:
    """The mean of the measured values (a role not measured counts for nothing)."""
    known = [v for v in values if v is not None]
    return statistics.fmean(known) if known else 0.0


def _pct(x: float | None) -> float:
    return math.nan if x is None or math.isinf(x) else 100.0 * x


def _parse_point(point: str) -> tuple[str, dict[str, str]]:
    """``scenario[k=v,...]`` (:func:`connmgr_evidence.bench.results.rows.point_text`) as (scenario,
    {k: v}); a text in another form is all scenario."""
    scenario, bracket, rest = point.partition("[")
    if not bracket or not rest.endswith("]"):
        return point, {}
    params = {}
    for item in rest[:-1].split(","):
        key, eq, value = item.partition("=")
        if not eq:
            return point, {}
        params[key] = value
    return scenario, params


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def _param_text(key: str, value: str) -> str:
    number = _number(value)
    shown = value if number is None else f"{number:g}"
    return f"RTT {shown} ms" if key == "rtt_ms" else f"{key}={shown}"


def point_labels(points: Iterable[str]) -> tuple[list[str], list[str], str]:
    """Grid points (``scenario[k=v,...]``) told apart: (the points in order, each one's label,
    what they all share). A label names only the scenario and the parameters that differ
    among the points (``RTT 20 ms`` for ``rtt_ms=20.0``); the points are ordered by those,
    numbers as numbers; the shared text is the common scenario and parameters
    (``throughput-ab: brokers=3, records=10000``). A single point's label is all its
    parameters."""
    parsed = {p: _parse_point(p) for p in set(points)}
    keys = sorted({k for _, params in parsed.values() for k in params})
    one = len(parsed) == 1
    scenarios = {scenario for scenario, _ in parsed.values()}
    differ = [k for k in keys if one or len({params.get(k) for _, params in parsed.values()}) > 1]

    def order(point: str) -> tuple[Any, ...]:
        scenario, params = parsed[point]
        values = []
        for k in differ:
            value = params.get(k, "")
            number = _number(value)
            values.append((number is None, number or 0.0, value))
        return (scenario, *values)

    ordered = sorted(parsed, key=order)
    labels = []
    for point in ordered:
        scenario, params = parsed[point]
        parts = [scenario] if len(scenarios) > 1 else []
        parts += [_param_text(k, params[k]) for k in differ if k in params]
        labels.append(", ".join(parts) or point)
    if len(set(labels)) < len(labels):
        labels = ordered
    common = [f"{k}={v}" for k, v in sorted(next(iter(parsed.values()))[1].items())]
    common = [] if one else [c for c in common if c.split("=", 1)[0] not in differ]
    scenario_text = next(iter(scenarios)) if len(scenarios) == 1 else ""
    shared = ", ".join(common)
    if scenario_text:
        shared = f"{scenario_text}: {shared}" if shared else scenario_text
    return ordered, labels, shared


def short(text: str, limit: int = 28) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
