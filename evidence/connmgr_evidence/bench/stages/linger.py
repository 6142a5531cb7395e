"""The linger trade-off: the proposal's ``connection_linger_ms`` swept per scenario, over a
client-hour (the stage's results name it ``linger_ms``).

Prompt close trades sockets held against handshakes: a connection nothing needs any more is
closed after ``connection_linger_ms`` of quiet, so a short linger holds fewer socket-seconds
and, when the need comes back (a leader that moves away and back, a coordinator that moves,
the next transaction's coordinator), pays a new handshake. The grid's ``[linger]`` section names the
scenarios (``name`` or ``name key=value ...``: a scenario of ``connmgr scenarios`` with
``--set`` parameters) and the values; each scenario runs the proposal at every value and the
section's baselines once, ``repeats`` times (seeds ``seed``, ``seed + 1``, ...), each over
``duration_ms`` of simulated time.

Every run's socket-seconds and handshakes are the ledger's (:class:`connmgr.ledger.Life`)
scaled to one client-hour. The results are written as ``raw/linger.json`` and become the
``linger`` table (median per scenario and setting, :func:`linger_table`) and the
``linger`` plot (socket-seconds and handshakes against the linger per scenario, the
proposal's curve through its values and each baseline a horizontal line).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError, UnknownName
from connmgr.policies import POLICIES
from connmgr.sim.run import prepare, run_spec
from connmgr.sim.scenarios import get_scenario
from connmgr_evidence.bench.gridfile import check_known, parse_entry
from connmgr_evidence.bench.report import plots
from connmgr_evidence.bench.report.plots import ExtraPlot
from connmgr_evidence.bench.report.table import Table, make_table
from connmgr_evidence.bench.results.record import Count, MaybeReal, Record, Text
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.results.stagefile import read_stage, write_stage
from connmgr_evidence.bench.runtime.pool import pooled
from connmgr_evidence.bench.stages import Phase, Setting, Stage, StageContext, StageReport

LINGER_FILE = "linger.json"
"""Under ``raw/``: the linger stage's runs."""

PROPOSED = "proposed"


@dataclass(frozen=True)
class LingerRun:
    """One simulated client-hour of the linger stage: ``policy`` through ``scenario`` (with
    ``params``), at ``linger_ms`` (the proposal) or as is (a baseline: ``linger_ms`` None)."""

    entry: str
    """The grid's text for the scenario (``name`` or ``name key=value ...``)."""
    scenario: str
    params: Mapping[str, str]
    policy: str
    linger_ms: int | None
    repeat: int
    seed: int


def plan(values: Mapping[str, Any]) -> list[LingerRun]:
    """Every run of the ``[linger]`` section ``values``, in the order they are run."""
    runs = []
    for entry in values["scenarios"]:
        scenario, params = parse_entry(entry)
        params = {**params, "duration_ms": str(values["duration_ms"])}
        for repeat in range(values["repeats"]):
            seed = values["seed"] + repeat
            settings: list[tuple[str, int | None]] = [(PROPOSED, v) for v in values["values_ms"]]
            settings += [(b, None) for b in values["baselines"]]
            for policy, linger in settings:
                runs.append(LingerRun(entry, scenario, params, policy, linger, repeat, seed))
    return runs


def run_one(run: LingerRun) -> dict[str, Any]:
    """The raw result of one run: its key and the client-hour's counts."""
    settings = {**run.params, "seed": str(run.seed)}
    if run.linger_ms is not None:
        settings["connection_linger_ms"] = str(run.linger_ms)
    spec, policy_settings, seed = prepare(run.scenario, settings)
    result = run_spec(spec, run.policy, policy_settings, seed)
    counts = result.counts
    life = counts.life
    return {
        "scenario": run.entry,
        "policy": run.policy,
        "linger_ms": run.linger_ms,
        "repeat": run.repeat,
        "seed": run.seed,
        "horizon_s": life.horizon_s,
        "opened": counts.opened,
        "steady": counts.steady,
        "peak": counts.peak,
        "misrouted": int(result.misrouted),
        # Only where the cluster has DNS names (ip-change): ms requests waited on a socket
        # to an address the broker had left, until its timeout or the policy's retirement.
        "stale_wait_ms": result.stale_wait_ms,
        "socket_s_per_h": sum(life.per_hour(life.socket_seconds).values()),
        "handshakes_per_h": sum(life.per_hour(life.handshakes).values()),
    }


def write_linger(values: Mapping[str, Any], meta: RunMeta, rows: Sequence[Any], raw: Path) -> Path:
    """``raw/linger.json``: the section's settings, the run's meta and every run's result."""
    data = {"meta": meta.columns(), "settings": dict(values), "runs": list(rows)}
    return write_stage(raw, LINGER_FILE, data)


def read_linger(raw: Path) -> dict[str, Any] | None:
    """``raw/linger.json``, or None if the run had no linger stage. Raises
    :class:`~connmgr_evidence.bench.results.schema.ResultsError` naming the file if it is there but
    broken."""
    return read_stage(raw, LINGER_FILE, ("runs", "settings"), "linger-stage")


@dataclass(frozen=True)
class LingerPoint:
    """One setting of one scenario, its medians over the repeats: what the table shows and
    the plot draws."""

    scenario: str
    policy: str
    linger_ms: int | None
    socket_s_per_h: float
    handshakes_per_h: float
    opened: float
    steady: float
    misrouted: int
    repeats: int
    stale_wait_ms: float | None = None
    """Median ms requests waited on sockets to a stale address (None: no DNS names)."""

    @property
    def setting(self) -> str:
        """``proposed@3000ms`` for the proposal at one linger, the baseline's name else."""
        return self.policy if self.linger_ms is None else f"{self.policy}@{self.linger_ms}ms"


def linger_points(found: Mapping[str, Any]) -> list[LingerPoint]:
    """The medians of ``raw/linger.json``'s runs per (scenario, policy, linger), in the
    grid's scenario order, the proposal's values first (ascending), then the baselines."""
    groups: dict[tuple[str, str, int | None], list[Mapping[str, Any]]] = defaultdict(list)
    for run in found["runs"]:
        groups[(run["scenario"], run["policy"], run["linger_ms"])].append(run)
    order = {s: i for i, s in enumerate(found["settings"]["scenarios"])}

    def key(k: tuple[str, str, int | None]) -> tuple[int, bool, int, str]:
        scenario, policy, linger = k
        return (order.get(scenario, len(order)), policy != PROPOSED, linger or 0, policy)

    points = []
    for k in sorted(groups, key=key):
        runs = groups[k]
        points.append(
            LingerPoint(
                k[0],
                k[1],
                k[2],
                statistics.median(r["socket_s_per_h"] for r in runs),
                statistics.median(r["handshakes_per_h"] for r in runs),
                statistics.median(r["opened"] for r in runs),
                statistics.median(r["steady"] for r in runs),
                sum(r["misrouted"] for r in runs),
                len(runs),
                _median_or_none([r.get("stale_wait_ms") for r in runs]),
            )
        )
    return points


def _median_or_none(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


@dataclass(frozen=True, slots=True)
class LingerRow(Record):
    """A row of the ``linger`` table: one setting of one scenario, medians over repeats."""

    scenario: Text
    setting: Text
    linger_ms: Count
    socket_s_per_h: MaybeReal
    handshakes_per_h: MaybeReal
    opened: MaybeReal
    steady: MaybeReal
    misrouted: Count
    stale_wait_ms: MaybeReal
    repeats: Count


LINGER_COLUMNS = LingerRow.columns()


def linger_table(found: Mapping[str, Any]) -> Table:
    """The ``linger`` report table: one row per scenario and setting (medians)."""
    s = found["settings"]
    points = linger_points(found)
    return make_table(
        "linger",
        "The linger trade-off: socket-seconds against handshakes per client-hour",
        f"Each row: the median over {s['repeats']} seeded runs of {s['duration_ms'] / 3.6e6:g} "
        "simulated hour(s) of one scenario, for the proposal at one `linger_ms` "
        "(its `connection_linger_ms` option) "
        f"({', '.join(str(v) for v in s['values_ms'])} ms) or a baseline model as it is "
        "(`linger_ms` empty). `socket_s_per_h`: the time-integral of open sockets per "
        "client-hour, every role; `handshakes_per_h`: connections established per "
        "client-hour (each one TCP handshake, and a TLS/SASL exchange on a secured "
        "listener). Linger applies only to connections nothing needs any more (a leader "
        "that moved away, the bootstrap connection, a lookup's broker): where a scenario's "
        "rows do not move with it, nothing became unneeded there. `stale_wait_ms` (only where "
        "the cluster has DNS names, `ip-change`): ms requests waited on sockets to an address "
        "the broker had left, until a request timeout or the proposal's retirement of it.",
        LINGER_COLUMNS,
        [{**asdict(p), "setting": p.setting} for p in points],
    )


def linger_tradeoff(points: Sequence[LingerPoint], path: Path) -> Path | None:
    """The trade-off against the linger, per scenario: socket-seconds per client-hour above,
    handshakes per client-hour below, against ``connection_linger_ms`` on a log axis (0, which
    a log axis cannot place, a step before the smallest value: the axis is linear up to it).
    The proposal is a curve through its values, each baseline a horizontal line (it has no
    linger). Rows: the ``linger`` table's points."""
    if not points:
        return None
    from matplotlib.figure import Figure

    scenarios = list(dict.fromkeys(p.scenario for p in points))[: plots.MAX_PANELS]
    values = sorted({p.linger_ms for p in points if p.linger_ms is not None})
    cols = min(len(scenarios), 3)
    rows = -(-len(scenarios) // cols)
    # A constrained layout keeps a scenario's two panels together: the space between panels
    # is what their labels need, not the same everywhere as with tight_layout.
    fig = Figure(figsize=(5.0 * cols, 2 * PANEL_HEIGHT * rows), layout="constrained")
    grid = fig.subplots(2 * rows, cols, squeeze=False)
    for k in range(len(scenarios), rows * cols):
        for ax in (grid[2 * (k // cols)][k % cols], grid[2 * (k // cols) + 1][k % cols]):
            ax.set_visible(False)
    metrics = (("socket_s_per_h", "socket-seconds"), ("handshakes_per_h", "handshakes"))
    for k, scenario in enumerate(scenarios):
        top, bottom = grid[2 * (k // cols)][k % cols], grid[2 * (k // cols) + 1][k % cols]
        bottom.sharex(top)
        mine = [p for p in points if p.scenario == scenario]
        curve = sorted((p for p in mine if p.linger_ms is not None), key=lambda p: p.linger_ms or 0)
        for ax, (metric, what) in zip((top, bottom), metrics, strict=True):
            ax.plot(
                [float(p.linger_ms or 0) for p in curve],
                [getattr(p, metric) for p in curve],
                "o-",
                color=plots.colour(PROPOSED),
                label=PROPOSED,
                zorder=3,
            )
            baselines = [p for p in mine if p.linger_ms is None]
            for i, p in enumerate(baselines):
                # Dashes that interleave: baselines at the same value show both colours.
                ax.axhline(
                    getattr(p, metric),
                    color=plots.colour(p.policy),
                    linestyle=(DASH * i, (DASH, DASH * max(1, len(baselines) - 1))),
                    label=p.policy,
                    zorder=4,
                )
            ax.set_ylabel(f"{what} per client-hour", fontsize=8)
            plots.plain_numbers(ax)
            ax.tick_params(axis="y", labelsize=8)
        linger_axis(bottom, values)
        top.tick_params(axis="x", labelbottom=False)
        top.set_title(plots.short(scenario, 40), fontsize=9)
        bottom.set_xlabel("connection_linger_ms (log scale)", fontsize=8)
    plots.legend_below(fig, plots.legend_entries(fig.axes))
    fig.suptitle(
        "The linger trade-off (medians): socket-seconds and handshakes per client-hour, "
        "against the proposal's connection_linger_ms"
    )
    return plots.save(fig, path)


PANEL_HEIGHT = 2.8
"""Inches of one of a scenario's two panels of the linger plot."""
DASH = 4.0
"""Points of one dash of a baseline's line."""


def linger_axis(ax: Any, values: Sequence[int]) -> None:
    """``ax``'s x axis for linger values (ms): logarithmic above the smallest positive value
    and linear below it, so 0 sits a step to its left; a tick at each value, labelled."""
    from matplotlib.ticker import NullLocator

    positive = [v for v in values if v > 0]
    if positive:
        ax.set_xscale("symlog", linthresh=positive[0], linscale=0.5)
        ax.set_xlim(-0.25 * positive[0], 1.6 * positive[-1])
    ax.set_xticks([float(v) for v in values], [_linger_label(v) for v in values])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize=8)


def _linger_label(ms: int) -> str:
    if ms == 0:
        return "0"
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms} ms"


SETTINGS: Mapping[str, Setting] = {
    "scenarios": Setting(str, True),
    "values_ms": Setting(int, True),
    "baselines": Setting(str, True),
    "duration_ms": Setting(int),
    "repeats": Setting(int),
    "seed": Setting(int),
}
"""``[linger]``: the scenario entries, the proposal's linger values, the baselines, and each
run's simulated time, repeats and first seed."""


class LingerStage:
    name = "linger"
    phase = Phase.CPU
    order = 2
    shown = 2
    timed = True
    says = None
    what = (
        "the linger trade-off: the proposal at every `connection_linger_ms` of `[linger] "
        "values_ms` (0, 100 ms, 1 s, 3 s, 30 s, 540 s) and `java-today` / `aiokafka-today` as they"
        " are, through each scenario of `[linger] scenarios` (`name` or `name key=value ...`), "
        "each run one simulated client-hour, `repeats` seeds: socket-seconds and handshakes per "
        "client-hour (the ledger's `Life`)"
    )
    writes = "`raw/linger.json`; table and plot `linger`"
    section = "linger"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        """The baselines are policies other than the proposal; each scenario entry names a
        scenario and parameters it can be built with."""
        baselines = [p for p in POLICIES if p != "proposed"]
        check_known("linger.baselines", values["baselines"], baselines)
        for entry in values["scenarios"]:
            try:
                name, params = parse_entry(entry)
                get_scenario(name).spec(params)
            except (ConfigError, UnknownName) as e:
                raise ConfigError(f"linger.scenarios {entry!r}: {e}") from e

    def run(self, ctx: StageContext) -> None:
        """The proposal at every ``[linger]`` value and the baselines, per scenario, each a
        simulated client-hour, on the grid's ``[sim] workers`` processes."""
        values = ctx.grid.values["linger"]
        rows = pooled(run_one, plan(values), "linger", ctx.show, ctx.grid.get("sim", "workers"))
        write_linger(values, ctx.meta, rows, ctx.raw)

    def read(self, raw: Path) -> dict[str, Any] | None:
        return read_linger(raw)

    def report(self, found: dict[str, Any], raw: Path) -> StageReport:
        points = linger_points(found)
        plot: ExtraPlot = (
            "linger",
            "The linger trade-off",
            "Socket-seconds (above) and handshakes (below) per client-hour against "
            "connection_linger_ms (log scale, 0 at the left), per scenario: the proposal at "
            "each value, each baseline as it is (a dashed horizontal line).",
            lambda path: linger_tradeoff(points, path),
        )
        return StageReport(tables=[linger_table(found)], plots=[plot])


STAGE: Stage[dict[str, Any]] = LingerStage()
