"""The main job's property stage: the property suite's figures, measured and reported.

For each baseline of the grid's ``[properties]`` section, the proposed-vs-baseline machine
runs to its example budget (:func:`connmgr.testing.evidence.run_agreement`), and each mutant
is searched for a counterexample (:func:`connmgr.testing.evidence.find_counterexample`).
The runs are independent, so they go to a process pool of ``workers``. The results are
written as ``raw/properties.json`` and become two report tables, ``property-runs`` and
``mutants`` (:func:`property_tables`); the RFC's *Evidence* figures are read from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from connmgr.testing.evidence import (
    BASELINES,
    MUTANT_BASELINE,
    MUTANTS,
    Counterexample,
    Shrinking,
    find_counterexample,
    run_agreement,
)
from connmgr_evidence.bench.gridfile import check_known
from connmgr_evidence.bench.report.table import Table, make_table
from connmgr_evidence.bench.results.record import Count, MaybeReal, Record, Text
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.results.stagefile import read_stage, write_stage
from connmgr_evidence.bench.runtime.pool import background_pool
from connmgr_evidence.bench.stages import Phase, Setting, Stage, StageContext, StageReport

PROPERTIES_FILE = "properties.json"
"""Under ``raw/``: the property stage's results."""


def _agreement(baseline: str, examples: int, steps: int) -> dict[str, Any]:
    run = run_agreement(baseline, max_examples=examples, step_count=steps)
    return {**asdict(run), "failures": run.failures}


def _mutant(name: str, examples: int, shrink: str) -> dict[str, Any]:
    case = MUTANTS[name]
    found: Counterexample | None = find_counterexample(
        case, max_examples=examples, shrink=Shrinking(shrink)
    )
    return {
        "mutant": name,
        "expected": " or ".join(case.expects),
        "baseline": MUTANT_BASELINE,
        "caught": found is not None,
        "invariant": found.invariant if found else None,
        "message": found.message.splitlines()[0] if found else None,
        "counterexample": list(found.notes) if found else [],
        "steps": found.steps if found else None,
        "examples": found.examples if found else None,
        "seconds": found.seconds if found else None,
    }


def property_results(
    values: Mapping[str, Any], meta: RunMeta, *, show: bool = True
) -> dict[str, Any]:
    """Run the ``[properties]`` section's machines and mutant searches; the raw results."""
    from tqdm import tqdm

    examples, steps = values["examples"], values["steps"]
    agreement: list[dict[str, Any]] = []
    mutants: list[dict[str, Any]] = []
    with background_pool(values["workers"]) as pool:
        # The long machine runs first, so that the short mutant searches fill in beside them.
        futures = {
            pool.submit(_agreement, b, examples, steps): agreement for b in values["baselines"]
        }
        futures |= {
            pool.submit(_mutant, m, values["mutant_examples"], values["shrink"]): mutants
            for m in values["mutants"]
        }
        for future in tqdm(
            as_completed(futures), total=len(futures), desc="properties", disable=not show
        ):
            futures[future].append(future.result())
    order = {b: i for i, b in enumerate(values["baselines"])}
    agreement.sort(key=lambda r: order[r["baseline"]])
    morder = {m: i for i, m in enumerate(values["mutants"])}
    mutants.sort(key=lambda r: morder[r["mutant"]])
    return {
        "meta": meta.columns(),
        "settings": dict(values),
        "agreement": agreement,
        "mutants": mutants,
    }


def write_properties(results: Mapping[str, Any], raw: Path) -> Path:
    return write_stage(raw, PROPERTIES_FILE, results)


def read_properties(raw: Path) -> dict[str, Any] | None:
    """``raw/properties.json``, or None if the run had no property stage. Raises
    :class:`~connmgr_evidence.bench.results.schema.ResultsError` naming the file if it is there but
    broken."""
    return read_stage(raw, PROPERTIES_FILE, ("agreement", "mutants", "settings"), "property-stage")


@dataclass(frozen=True, slots=True)
class PropertyRun(Record):
    """A row of the ``property-runs`` table: one proposed-vs-baseline machine's run."""

    baseline: Text
    max_examples: Count
    step_count: Count
    examples: Count
    steps: Count
    failures: Count
    redials: Count
    redial_examples: Count
    seconds: MaybeReal
    result: Text


AGREEMENT_COLUMNS = PropertyRun.columns()


@dataclass(frozen=True, slots=True)
class MutantSearch(Record):
    """A row of the ``mutants`` table: one mutant's search for a counterexample."""

    mutant: Text
    expected: Text
    invariant: Text
    steps: Count
    examples: Count
    seconds: MaybeReal
    counterexample: Text


MUTANT_COLUMNS = MutantSearch.columns()


def property_tables(results: Mapping[str, Any]) -> list[Table]:
    """The report tables of a property stage: ``property-runs`` and ``mutants``."""
    s = results["settings"]
    runs = [
        {
            # Files written before re-dials were counted say nothing of them: None, not 0.
            "redials": None,
            "redial_examples": None,
            **r,
            "result": "passed" if r["failure"] is None else r["failure"].splitlines()[0],
        }
        for r in results["agreement"]
    ]
    mutants = [
        {**r, "counterexample": "; ".join(r["counterexample"]) or "not caught"}
        for r in results["mutants"]
    ]
    return [
        make_table(
            "property-runs",
            "Property suite: the proposal against each baseline",
            f"Each row: the proposed-vs-baseline state machine (`connmgr.testing.machines`) "
            f"run to {s['examples']:,} examples of up to {s['steps']} steps, or to its first "
            "failure. `examples` counts every example run, including those run while "
            "shrinking; `steps` counts the cluster events fed to both policies. Invariants "
            "checked after every step: same routing, never more sockets, tight, safety, "
            "determinism (docs/property-suite.md). `redials`: connections the proposal "
            "dialled again after closing them as unneeded (summed over examples; "
            "`redial_examples` had at least one) -- allowed by *never more sockets* as the "
            "price of prompt close, and counted here as a cost.",
            AGREEMENT_COLUMNS,
            runs,
        ),
        make_table(
            "mutants",
            "Property suite: which invariant catches each broken policy",
            f"Each deliberately broken policy (`connmgr.testing.mutants`) against "
            f"{MUTANT_BASELINE}, searched derandomized for up to {s['mutant_examples']:,} "
            "examples: the invariant its counterexample fails, and that counterexample's "
            f"length in steps; {_SHRUNK[Shrinking(s.get('shrink', 'full'))]}",
            MUTANT_COLUMNS,
            mutants,
        ),
    ]


_SHRUNK = {
    Shrinking.FULL: (
        "each counterexample shrunk by Hypothesis until it stopped, then the steps the "
        "failure does not need deleted."
    ),
    Shrinking.UNTIL_READABLE: (
        "each counterexample the first failing story met, with the steps the failure does "
        "not need deleted (not shrunk by Hypothesis)."
    ),
    Shrinking.NONE: "each counterexample as first met, not shrunk.",
}
"""How the mutants table's caption says the stories were shortened (``shrink``; results
written before the key existed were shrunk fully)."""


def check_properties(results: Mapping[str, Any]) -> list[str]:
    """What the property stage found wrong: failing machines and mutants not caught by an
    invariant they were expected to break (empty = all as expected)."""
    problems = [
        f"property run vs {r['baseline']} failed: {r['failure'].splitlines()[0]}"
        for r in results["agreement"]
        if r["failure"] is not None
    ]
    for m in results["mutants"]:
        expects: Sequence[str] = tuple(m["expected"].split(" or "))
        if not m["caught"] or not (m["message"] or "").startswith(tuple(expects)):
            problems.append(f"mutant {m['mutant']} not caught by {m['expected']}")
    return problems


SETTINGS: Mapping[str, Setting] = {
    "baselines": Setting(str, True),
    "examples": Setting(int),
    "steps": Setting(int),
    "mutants": Setting(str, True),
    "mutant_examples": Setting(int),
    "shrink": Setting(str),
    "workers": Setting(int),
}
"""``[properties]``: the machines' baselines, examples and steps, the mutants searched, their
examples and shrinking, and the pool's processes."""


class PropertiesStage:
    name = "properties"
    phase = Phase.CPU
    order = 3
    shown = 1
    timed = True
    says = "property suite (examples, steps, mutants) ..."
    what = (
        "the property suite as a measurement: each proposed-vs-baseline state machine run to "
        "`examples` examples (100 in the full grid; the deep profile's 1,000 run on their own, see"
        " property-suite.md) of up to `steps` steps (the deep profile's 50), and each deliberately"
        " broken policy searched for a counterexample, in a pool of `workers` processes "
        "([property-suite.md](property-suite.md))"
    )
    writes = "`raw/properties.json`; tables `property-runs`, `mutants`"
    section = "properties"
    settings = SETTINGS

    def check(self, values: Mapping[str, Any]) -> None:
        check_known("properties.baselines", values["baselines"], list(BASELINES))
        check_known("properties.mutants", values["mutants"], list(MUTANTS))
        check_known("properties.shrink", [values["shrink"]], [s.value for s in Shrinking])

    def run(self, ctx: StageContext) -> None:
        found = property_results(ctx.grid.values["properties"], ctx.meta, show=ctx.show)
        write_properties(found, ctx.raw)

    def read(self, raw: Path) -> dict[str, Any] | None:
        return read_properties(raw)

    def report(self, found: dict[str, Any], raw: Path) -> StageReport:
        problems = check_properties(found)
        listed = (
            "\n".join(f"- {p}" for p in problems)
            or "none: every machine passed and every mutant was caught by the invariant it breaks"
        )
        return StageReport(
            tables=property_tables(found),
            sections=[("Property suite: problems", listed)],
            problems=problems,
        )


STAGE: Stage[dict[str, Any]] = PropertiesStage()
