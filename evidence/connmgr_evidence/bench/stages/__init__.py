"""The main job's stages as objects: each runs, reads back what it wrote and reports it.

A stage is a module of this package that defines ``STAGE``, an object of the :class:`Stage`
protocol; :func:`stages` finds every one (adding a stage is adding its module) and orders
them by :class:`Phase`, then by ``order``. A stage declares its own section of the grid
file (``section``, its keys and their types in ``settings``) and checks its values
(:meth:`Stage.check`); :func:`connmgr_evidence.bench.grid.load_grid` builds the grid's sections from
the stages, so the grid knows no stage by name. The job (:mod:`connmgr_evidence.bench.job`) runs
them in
that order, writes each one's results under ``raw/`` as it ends, and builds the report from
the raw results alone: the comparison reads ``raw/results/*.parquet`` and
``raw/micro/*.json``, and every stage with results of its own reads them back
(:meth:`Stage.read`) and contributes tables, plots and sections (:meth:`Stage.report`), in
``shown`` order. The other modules here are what the stages run.

The docs' list of stages (``docs/benchmarks.md``, ``docs/architecture.md``) is generated
from the stages (:func:`stages_markdown`, :func:`stage_names`; a test keeps it in step).
"""

from __future__ import annotations

import enum
import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from connmgr.errors import ConnMgrError
from connmgr_evidence.bench.gridfile import Setting as Setting

if TYPE_CHECKING:
    from connmgr_evidence.bench.gridfile import Grid
    from connmgr_evidence.bench.report.plots import ExtraPlot
    from connmgr_evidence.bench.report.summaries import BaselineHeadline
    from connmgr_evidence.bench.report.table import Table
    from connmgr_evidence.bench.results.rows import RunMeta

R = TypeVar("R")


class BenchError(ConnMgrError):
    """A stage of the main job failed; the message names the stage and the run."""


class Phase(enum.Enum):
    """When a stage runs; the phases run in this order."""

    TIMED = "timed"
    """One at a time, first, on an otherwise idle machine: what they time is not shared."""
    BESIDE = "beside"
    """In the background beside the CPU-bound stages: it waits most of its time and times
    nothing."""
    CPU = "cpu"
    """The CPU-bound simulated stages, one after another, each in worker processes at a
    lower priority (nice 10), so that a stage running beside gets the CPU when it needs it."""
    SPARK = "spark"
    """On the job's Spark session, once it has started."""


@dataclass
class StageContext:
    """What a running stage is given, and what it hands back to the job besides its files."""

    grid: Grid
    meta: RunMeta
    raw: Path
    """``OUT/<run-id>/raw``: everything a stage writes goes under it."""
    show: bool = True
    """Show progress bars."""
    say: Callable[[str], None] = print
    spark: Any = None
    """The job's Spark session, for the :attr:`Phase.SPARK` stages (None before)."""
    retried: list[str] = field(default_factory=list)
    """Runs that failed or hung once and were measured again (``job.json``'s ``retried``)."""
    failed: list[str] = field(default_factory=list)
    """Real runs that failed every attempt, with the reason (``job.json``'s ``failed``)."""
    sweep: list[tuple[int, float, int]] = field(default_factory=list)
    """(points, wall s, simulations) per sweep size (``job.json``'s ``sweep``)."""

    @property
    def results(self) -> Path:
        """``raw/results``: the Parquet files of the results schema."""
        return self.raw / "results"


@dataclass(frozen=True)
class StageReport:
    """What a stage adds to the report."""

    tables: Sequence[Table] = ()
    plots: Sequence[ExtraPlot] = ()
    sections: Sequence[tuple[str, str]] = ()
    """(title, Markdown): shown before the job's own sections."""
    headline: Sequence[BaselineHeadline] = ()
    life_costs: Sequence[Mapping[str, Any]] = ()
    """Rows of the ``life-costs`` table
    (:func:`connmgr_evidence.bench.report.tables.life_cost_rows`)."""
    problems: Sequence[str] = ()
    """What the stage found wrong: the job exits non-zero if any."""


class Stage(Protocol[R]):
    """One stage of the main job, with the results ``R`` it reads back from ``raw/``."""

    @property
    def name(self) -> str:
        """Its name in the stage timings (``job.json``'s ``stage_seconds``) and the docs."""

    @property
    def phase(self) -> Phase: ...

    @property
    def order(self) -> int:
        """Its place within its phase."""

    @property
    def shown(self) -> int | None:
        """Its report's place among the stages' (None: it adds nothing beyond the results
        schema's rows, which the comparison reads)."""

    @property
    def timed(self) -> bool:
        """Whether its wall time is a stage timing (the sweep times each of its sizes)."""

    @property
    def says(self) -> str | None:
        """The line said when it starts (None: its progress bar says it)."""

    @property
    def section(self) -> str:
        """Its section of the grid file (``benchmarks/grid.toml``): ``[<section>]``."""

    @property
    def settings(self) -> Mapping[str, Setting]:
        """Its section's keys and their types: every one must be in the grid file, and no
        other (``[quick]`` overrides them as ``"<section>.<key>"``)."""

    def check(self, values: Mapping[str, Any]) -> None:
        """Raise :class:`~connmgr.errors.ConfigError` (a message starting with
        ``<section>.<key>``) if the section's ``values``, their types already checked, ask
        for what cannot run: an unknown name, a scenario that cannot be built."""

    @property
    def what(self) -> str:
        """What it runs, in Markdown (the docs' stage table)."""

    @property
    def writes(self) -> str:
        """What it writes, in Markdown (the docs' stage table)."""

    def run(self, ctx: StageContext) -> None:
        """Run the stage and write its results under ``ctx.raw``."""

    def read(self, raw: Path) -> R | None:
        """Its results under ``raw``, or None if the run has none of its own; raises
        :class:`~connmgr_evidence.bench.results.schema.ResultsError` on broken ones."""

    def report(self, found: R, raw: Path) -> StageReport:
        """What it adds to the report, from what :meth:`read` found."""


class RowsOnly:
    """The defaults of a stage whose results are only rows of the results schema (or
    micro-benchmark files), which the comparison reads itself."""

    shown: int | None = None
    timed = True
    says: str | None = None

    def check(self, values: Mapping[str, Any]) -> None:
        return None

    def read(self, raw: Path) -> None:
        return None

    def report(self, found: None, raw: Path) -> StageReport:
        return StageReport()


PHASES = tuple(Phase)


def stages() -> tuple[Stage[Any], ...]:
    """Every stage of this package (each module's ``STAGE``), in the order the job runs
    them; a clash of names or places is an error, raised at once."""
    found: list[Stage[Any]] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        stage = getattr(module, "STAGE", None)
        if stage is not None:
            found.append(stage)
    found.sort(key=lambda s: (PHASES.index(s.phase), s.order))
    for what, key in (
        ("name", lambda s: s.name),
        ("place", lambda s: (s.phase, s.order)),
        ("report place", lambda s: s.shown),
        ("grid section", lambda s: s.section),
    ):
        keys = [key(s) for s in found if key(s) is not None]
        if len(keys) != len(set(keys)):
            raise BenchError(f"two stages share a {what}: {sorted(map(str, keys))}")
    return tuple(found)


def shown(all_stages: Sequence[Stage[Any]]) -> list[Stage[Any]]:
    """The stages that add to the report, in their report order."""
    return sorted((s for s in all_stages if s.shown is not None), key=lambda s: s.shown or 0)


COMPARE = (
    "compare",
    "the PySpark job: pairs `proposed` with each baseline, and `java-4.3.1-patched` with "
    "`java-4.3.1`, per (kind, point, repeat), ratios with medians and spread over repeats, "
    "regressions, tables, plots, `index.md`",
    "`reports/<run-id>/`",
)
"""The last step, after every stage: the comparison, which writes the report."""


def stages_markdown(all_stages: Sequence[Stage[Any]] | None = None) -> str:
    """The docs' table of the stages, in run order, then the comparison."""
    lines = ["| stage | when | what | writes |", "|---|---|---|---|"]
    for s in stages() if all_stages is None else all_stages:
        lines.append(f"| {s.name} | {s.phase.value} | {s.what} | {s.writes} |")
    name, what, writes = COMPARE
    lines.append(f"| {name} | spark | {what} | {writes} |")
    return "\n".join(lines)


def stage_names(all_stages: Sequence[Stage[Any]] | None = None) -> str:
    """The stages' names in run order, one line (``docs/architecture.md``)."""
    names = [
        f"`{s.name}`" + (" (in the background)" if s.phase is Phase.BESIDE else "")
        for s in (stages() if all_stages is None else all_stages)
    ]
    return " → ".join(names) + ", then the comparison (`compare`)."
