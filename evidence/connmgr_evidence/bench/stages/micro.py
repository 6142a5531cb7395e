"""The pytest-benchmark suites of ``benchmarks/micro``, in a subprocess
(``raw/micro/micro.json``; the comparison reads it, :mod:`connmgr_evidence.bench.report.micro`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from connmgr_evidence.bench.gridfile import Grid
from connmgr_evidence.bench.stages import BenchError, Phase, RowsOnly, Setting, Stage, StageContext

MICRO_DIR = Path(__file__).resolve().parents[4] / "benchmarks" / "micro"


def run_micro(grid: Grid, out: Path) -> Path:
    """The pytest-benchmark suites, in a subprocess, into ``out`` (JSON)."""
    if not MICRO_DIR.is_dir():
        raise BenchError(f"micro-benchmarks not found at {MICRO_DIR} (run from a source checkout)")
    out.parent.mkdir(parents=True, exist_ok=True)
    # Not the checkout's test options nor a calling test worker's variables: under
    # pytest-xdist (which both bring), pytest-benchmark times nothing.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["CONNMGR_MICRO_ROUNDS"] = str(grid.get("micro", "rounds"))
    cmd = [sys.executable, "-m", "pytest", str(MICRO_DIR), "-q", "-p", "no:cacheprovider"]
    cmd += ["-o", "addopts=", f"--benchmark-json={out}", "--rootdir", str(MICRO_DIR)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not out.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise BenchError(f"micro-benchmarks failed (exit {done.returncode}):\n{tail}")
    return out


SETTINGS: Mapping[str, Setting] = {"rounds": Setting(int)}
"""``[micro]``: pytest-benchmark's rounds."""


class MicroStage(RowsOnly):
    name = "micro"
    phase = Phase.TIMED
    order = 4
    says = "micro-benchmarks (pytest-benchmark) ..."
    what = (
        "pytest-benchmark (`benchmarks/micro/`): the cost of one policy decision per policy (group"
        " `decision`), of a request and its response on a ready connection (group "
        "`decision-roundtrip`, in table `micro-other` per round of 500 pairs), and the simulator's"
        " events per second"
    )
    writes = "`raw/micro/micro.json`"
    section = "micro"
    settings = SETTINGS

    def run(self, ctx: StageContext) -> None:
        run_micro(ctx.grid, ctx.raw / "micro" / "micro.json")


STAGE: Stage[None] = MicroStage()
