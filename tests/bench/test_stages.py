"""The main job's stages are objects found in one package: the job's order, the report's
order and the docs' list of stages all come from them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from connmgr.docblocks import block
from connmgr_evidence.bench import docs, grid, stages
from connmgr_evidence.bench.stages import Phase, shown, stage_names, stages_markdown

ROOT = Path(__file__).parents[2]

RUN_ORDER = (
    "real",
    "throughput",
    "tls",
    "micro",
    "life",
    "simulate",
    "linger",
    "properties",
    "sweep",
    "fleet",
)


def test_the_job_runs_every_stage_phase_by_phase() -> None:
    found = stages.stages()
    assert tuple(s.name for s in found) == RUN_ORDER
    phases = [list(Phase).index(s.phase) for s in found]
    assert phases == sorted(phases)


def test_the_report_shows_the_stages_in_their_report_order() -> None:
    """The order index.md has always shown the stages' tables and plots in."""
    assert [s.name for s in shown(stages.stages())] == [
        "properties",
        "linger",
        "tls",
        "life",
        "fleet",
    ]


@pytest.mark.parametrize("name", docs.DOCS)
def test_the_docs_blocks_are_generated_from_the_code(name: str) -> None:
    text = (ROOT / name).read_text()
    made = docs.blocks(text)
    assert made, f"{name} has no generated block"
    for block_name, content in made.items():
        assert block(text, block_name) == content, (
            f"{name}: block {block_name} is out of date; run: python -m "
            f"connmgr_evidence.bench.docs {name}"
        )


def test_the_docs_name_every_stage() -> None:
    table = block((ROOT / "docs" / "benchmarks.md").read_text(), "stages")
    assert [line.split(" | ")[0].strip("| ") for line in table.splitlines()[2:]] == [
        *RUN_ORDER,
        "compare",
    ]


TRIAL = """
from pathlib import Path

from connmgr_evidence.bench.stages import Phase, RowsOnly, Setting, StageContext
from connmgr.errors import ConfigError


class Trial(RowsOnly):
    name = "trial"
    phase = Phase.CPU
    order = 99
    what = "a trial"
    writes = "nothing"
    section = "trial"
    settings = {"rounds": Setting(int), "sizes": Setting(int, True)}

    def check(self, values):
        if values["rounds"] > 10:
            raise ConfigError(f"trial.rounds must be at most 10, got {values['rounds']}")

    def run(self, ctx: StageContext) -> None:
        (ctx.raw / "trial").write_text("ran")


STAGE = Trial()
"""


def test_a_stage_is_one_module_of_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module with a STAGE beside the others is run, listed and documented: nothing
    else names it."""
    (tmp_path / "trialstage.py").write_text(TRIAL)
    monkeypatch.setattr(stages, "__path__", [*stages.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "connmgr_evidence.bench.stages.trialstage", raising=False)
    try:
        found = stages.stages()
        assert [s.name for s in found] == [
            *RUN_ORDER[:8],
            "trial",
            *RUN_ORDER[8:],
        ]
        assert "| trial | cpu | a trial | nothing |" in stages_markdown(found)
        assert "`properties` → `trial` → `sweep`" in stage_names(found)
        # The grid has the stage's section, its keys typed and checked as the stage says.
        assert grid.sections()["trial"] == {
            "rounds": stages.Setting(int),
            "sizes": stages.Setting(int, True),
        }
        text = grid.DEFAULT_GRID.read_text()
        path = tmp_path / "grid.toml"
        path.write_text(text + "\n[trial]\nrounds = 3\nsizes = [1, 2]\n")
        assert grid.load_grid(path).values["trial"] == {"rounds": 3, "sizes": [1, 2]}
        path.write_text(text)
        with pytest.raises(grid.GridError, match=r"missing section \[trial\]"):
            grid.load_grid(path)
        path.write_text(text + "\n[trial]\nrounds = 3\nsizes = 2\n")
        with pytest.raises(grid.GridError, match=r"trial\.sizes must be a non-empty list"):
            grid.load_grid(path)
        path.write_text(text + "\n[trial]\nrounds = 11\nsizes = [2]\n")
        with pytest.raises(grid.GridError, match=r"grid\.toml: trial\.rounds must be at most 10"):
            grid.load_grid(path)
    finally:
        sys.modules.pop("connmgr_evidence.bench.stages.trialstage", None)


def test_two_stages_with_one_name_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "twinstage.py").write_text(
        TRIAL.replace('"trial"', '"simulate"').replace("order = 99", "order = 98")
    )
    monkeypatch.setattr(stages, "__path__", [*stages.__path__, str(tmp_path)])
    try:
        with pytest.raises(stages.BenchError, match="two stages share a name"):
            stages.stages()
    finally:
        sys.modules.pop("connmgr_evidence.bench.stages.twinstage", None)
