"""The main job's property stage: runs the machines and mutant searches, reports them, and
says what went wrong; broken input names the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connmgr.testing.evidence import MAX_STEPS, MUTANTS, MutantCase, find_counterexample
from connmgr.testing.mutants import NeverClose
from connmgr_evidence.bench.results.rows import new_meta
from connmgr_evidence.bench.results.schema import ResultsError
from connmgr_evidence.bench.stages.properties import (
    check_properties,
    property_results,
    property_tables,
    read_properties,
    write_properties,
)

SMALL = {
    "baselines": ["java-today", "aiokafka-today"],
    "examples": 5,
    "steps": 6,
    "mutants": ["NeverClose"],
    "mutant_examples": 2000,
    "shrink": "until readable",
    "workers": 2,
}


@pytest.fixture(scope="module")
def small() -> dict[str, Any]:
    return property_results(SMALL, new_meta("t"), show=False)


def test_a_small_stage_runs_every_machine_and_catches_the_mutant(small: dict[str, Any]) -> None:
    assert [r["baseline"] for r in small["agreement"]] == SMALL["baselines"]
    for run in small["agreement"]:
        assert run["failure"] is None and run["failures"] == 0
        assert 1 <= run["examples"] <= run["steps"] <= run["examples"] * SMALL["steps"]
    [mutant] = small["mutants"]
    assert mutant["caught"] and mutant["invariant"] == "tight"
    assert mutant["counterexample"][0].startswith("world:")
    assert check_properties(small) == []


def test_the_tables_carry_the_raw_results(small: dict[str, Any]) -> None:
    runs, mutants = (t.records() for t in property_tables(small))
    assert [(r["baseline"], r["steps"], r["result"]) for r in runs] == [
        (r["baseline"], r["steps"], "passed") for r in small["agreement"]
    ]
    # The cost of prompt close is a column of its own, copied from the raw counts.
    assert [(r["redials"], r["redial_examples"]) for r in runs] == [
        (r["redials"], r["redial_examples"]) for r in small["agreement"]
    ]
    assert all(r["redials"] >= r["redial_examples"] >= 0 for r in small["agreement"])
    assert mutants[0]["invariant"] == "tight"
    assert mutants[0]["steps"] == small["mutants"][0]["steps"] <= MAX_STEPS


SAYS = {
    "full": "shrunk by Hypothesis until it stopped, then the steps",
    "until readable": "the first failing story met, with the steps the failure does not need",
    "none": "as first met, not shrunk",
}


@pytest.mark.parametrize("shrink", SAYS)
def test_the_mutants_caption_says_how_the_stories_were_shortened(
    small: dict[str, Any], shrink: str
) -> None:
    results = {**small, "settings": {**small["settings"], "shrink": shrink}}
    caption = property_tables(results)[1].description
    assert [mode for mode, says in SAYS.items() if says in caption] == [shrink]


def test_a_failing_machine_and_an_uncaught_mutant_are_problems(small: dict[str, Any]) -> None:
    bad = json.loads(json.dumps(small))
    bad["agreement"][0]["failure"] = "never more sockets: 5 > 4\nworld: ...\nstep 1: wait 1 ms"
    bad["mutants"][0].update(caught=False, invariant=None, message=None, counterexample=[])
    problems = check_properties(bad)
    assert problems == [
        "property run vs java-today failed: never more sockets: 5 > 4",
        "mutant NeverClose not caught by tight",
    ]
    runs, mutants = (t.records() for t in property_tables(bad))
    assert runs[0]["result"] == "never more sockets: 5 > 4"
    assert mutants[0]["counterexample"] == "not caught"


def test_a_mutant_caught_by_the_wrong_invariant_is_a_problem(small: dict[str, Any]) -> None:
    wrong = json.loads(json.dumps(small))
    wrong["mutants"][0].update(invariant="safety", message="safety: budget exceeded")
    assert check_properties(wrong) == ["mutant NeverClose not caught by tight"]


def test_a_search_with_too_small_a_budget_finds_nothing() -> None:
    # The search can come back empty: the stage then reports the mutant as not caught.
    assert find_counterexample(MutantCase(NeverClose, ("tight",), 6), max_examples=1) is None
    assert MUTANTS["NeverClose"].mutant is NeverClose


def test_raw_file_round_trip_and_broken_files(small: dict[str, Any], tmp_path: Path) -> None:
    assert read_properties(tmp_path) is None  # a run without a property stage
    path = write_properties(small, tmp_path)
    assert read_properties(tmp_path) == json.loads(path.read_text())
    path.write_text("{not json")
    with pytest.raises(ResultsError, match=r"properties\.json: not readable JSON"):
        read_properties(tmp_path)
    path.write_text(json.dumps({"agreement": []}))
    with pytest.raises(ResultsError, match=r"properties\.json: missing 'mutants'"):
        read_properties(tmp_path)
