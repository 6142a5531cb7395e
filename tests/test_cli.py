from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

import connmgr.cli
from connmgr.cli import COMMAND_GROUP, EXIT_BAD_INPUT, EXIT_MISSING, EXIT_OK, main
from connmgr.policies import POLICIES
from connmgr.sim.run import POLICY_OPTIONS, build_simulator, options_of, prepare, simulate
from connmgr_evidence import cli as evidence_cli
from connmgr_evidence.bench import job
from connmgr_evidence.bench.grid import load_grid
from connmgr_evidence.bench.stages import Phase, StageContext

ROOT = Path(__file__).resolve().parents[1]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_lists(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policies")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(POLICIES)
    code, out, _ = run(capsys, "scenarios")
    assert code == 0 and "k8s-endpoint-change" in out and "brokers=1000" in out


def test_simulate_json_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", "seed-consumer", "--policy", "proposed", "--json")
    data = json.loads(out)
    assert code == 0
    # The simulator's own result for the same run, field by field.
    spec, settings, seed = prepare("seed-consumer", {})
    result = build_simulator(spec, "proposed", settings, seed).run()
    assert (data["opened"], data["peak"], data["steady"]) == (5, 4, 4)
    assert (data["opened"], data["peak"], data["steady"]) == (
        result.opened,
        result.peak,
        result.steady,
    )
    assert data["by_role"] == result.by_role
    assert len(data["timeline"]) == len(result.ledger.entries)
    assert len(data["requests"]) == len(result.requests)


def test_simulate_java_log(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "seed-producer",
        "--policy",
        "java-described",
        "--java-log",
        "--set",
        "duration_ms=1000",
    )
    assert code == 0
    assert "Initiating connection to node localhost:9093 (id: -2 rack: null)" in out.splitlines()[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate", "nope", "--policy", "proposed"], "unknown scenario 'nope'"),
        (["simulate", "seed-consumer", "--policy", "nope"], "unknown policy 'nope'"),
        (
            ["simulate", "seed-consumer", "--policy", "proposed", "--set", "brokers"],
            "expected KEY=VALUE",
        ),
        (
            ["simulate", "seed-consumer", "--policy", "proposed", "--set", "wat=1"],
            "neither a parameter",
        ),
        (
            ["simulate", "big-producer", "--policy", "proposed", "--set", "brokers=many"],
            "expected an integer",
        ),
        (
            ["simulate", "big-producer", "--policy", "proposed", "--set", "max_connections=-1"],
            "at least 1",
        ),
        (
            ["simulate", "big-producer", "--policy", "proposed", "--set", "warm_up=maybe"],
            "expected true or false",
        ),
        (
            [
                "simulate",
                "seed-consumer",
                "--policy",
                "proposed",
                "--set",
                "bootstrap=localhost:70000",
            ],
            "outside 1..65535",
        ),
        (
            ["simulate", "seed-consumer", "--policy", "proposed", "--set", "bootstrap=::1"],
            "needs brackets",
        ),
        (
            ["simulate", "seed-consumer", "--policy", "java-today", "--set", "max_connections=1"],
            "policy 'java-today' does not take max_connections; its options are bootstrap, "
            "bootstrap_offset, connections_max_idle_ms, reconnect_backoff_max_ms, "
            "reconnect_backoff_ms, replay_choices",
        ),
        (
            ["simulate", "seed-consumer", "--policy", "proposed", "--set", "replay_choices=1"],
            "policy 'proposed' does not take replay_choices; its options are adopt_unverified",
        ),
    ],
)
def test_bad_input_is_named(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and err.startswith("connmgr: error:")


def test_ipv6_and_default_port_bootstrap_work(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "simulate",
        "seed-consumer",
        "--policy",
        "proposed",
        "--set",
        "bootstrap=[::1],localhost:9092",
        "--json",
    )
    assert code == 0
    first = json.loads(out)["timeline"][0]
    assert (first["host"], first["port"], first["node"]) in {
        ("::1", 9092, -1),
        ("localhost", 9092, -2),
    }


# --- simulate --set: options a policy does not read ----------------------------------------

NON_DEFAULT = {
    "bootstrap_offset": "1",
    "warm_up": "true",
    "share_coordinator": "false",
    "connection_linger_ms": "60000",
    "max_connections": "1",
    "adopt_unverified": "true",
    "expected_cluster_id": "elsewhere",
}
"""A value other than the default for each option some policies do not read."""


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_option_a_policy_is_said_not_to_take_changes_nothing(policy: str) -> None:
    # What `simulate --set` rejects is exactly what the policy would ignore: each such option,
    # set alone (the check bypassed), gives the run it gives without it.
    scenario = "k8s-endpoint-change"
    baseline = simulate(scenario, policy).as_json()
    ignored = sorted(NON_DEFAULT.keys() - options_of(POLICIES[policy]))
    for name in ignored:
        run = simulate(scenario, policy, {name: NON_DEFAULT[name]}).as_json()
        run.pop("settings", None), baseline.pop("settings", None)
        assert run == baseline | {"wall_s": run["wall_s"]}, name
    assert set(ignored) <= POLICY_OPTIONS


def test_an_option_the_proposal_takes_changes_its_run() -> None:
    # The converse, for one option: max_connections is the proposal's and it bites.
    plain = simulate("big-producer", "proposed", {"duration_ms": "60000"})
    capped = simulate("big-producer", "proposed", {"duration_ms": "60000", "max_connections": "2"})
    assert capped.peak <= 2 < plain.peak


# --- the evidence's commands through the entry points ----------------------------------------


def _points(*pairs: tuple[str, str]) -> list[EntryPoint]:
    return [EntryPoint(name=n, value=v, group=COMMAND_GROUP) for n, v in pairs]


def test_an_evidence_command_without_the_evidence_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connmgr.cli, "entry_points", lambda group: [])
    for name in ("bench", "run", "cluster", "adoption", "longrun"):
        code, out, err = run(capsys, name, "--list")
        assert (code, out) == (EXIT_MISSING, "")
        assert err.splitlines() == [
            f"connmgr {name}: install kafka-connmgr-evidence to run it "
            "(from a checkout: pip install -e ./evidence)"
        ]
    code, out, _ = run(capsys, "policies")
    assert code == EXIT_OK and "proposed" in out


def test_an_installed_command_is_found_through_its_entry_point(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    points = _points(
        ("bench", "connmgr_evidence.cli:bench"), ("estimate", "connmgr_evidence.cli:nope")
    )
    monkeypatch.setattr(connmgr.cli, "entry_points", lambda group: points)
    code, out, _ = run(capsys, "bench", "--list")
    assert code == EXIT_OK and out.startswith("stages: real")
    # Registered but not there (a version without it): one line, exit 4, and not listed.
    code, out, err = run(capsys, "estimate")
    assert (code, out) == (EXIT_MISSING, "")
    assert err.startswith("connmgr estimate: not in this install of") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = capsys.readouterr().out
    assert "estimate" not in listed and "bench     the main job" in listed
    assert "[needs kafka-connmgr-evidence]" in listed  # run, cluster, ... not installed here


def test_every_declared_entry_point_resolves_to_a_command() -> None:
    declared = tomllib.loads((ROOT / "evidence" / "pyproject.toml").read_text())["project"]
    points = declared["entry-points"][COMMAND_GROUP]
    assert set(points) == set(connmgr.cli.EVIDENCE_COMMANDS)
    for name, value in points.items():
        module, _, attr = value.partition(":")
        command = getattr(import_module(module), attr, None)
        # estimate is there only once connmgr_evidence.estimate.cli is.
        assert callable(command) or name == "estimate", name
        assert (name in evidence_cli.COMMANDS) == callable(command)


def _python(code: str, *, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_python_m_connmgr_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "connmgr", "policies"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )
    assert done.returncode == 0 and done.stdout.split()[0] == next(iter(POLICIES))


# --- bench: without Hypothesis, missing dependencies, --quick, --stages ----------------------

WITHOUT = "import sys; sys.modules[{module!r}] = None\n"
"""A module made unimportable, as if not installed (``import`` raises ModuleNotFoundError)."""


def test_bench_list_and_help_work_without_hypothesis() -> None:
    code = WITHOUT.format(module="hypothesis") + (
        "from connmgr_evidence.cli import main\n"
        "assert main(['bench', '--list']) == 0\n"
        "try:\n    main(['bench', '--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "assert 'hypothesis' not in sys.modules or sys.modules['hypothesis'] is None\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    assert "stages: real" in done.stdout and "usage: connmgr bench" in done.stdout


def test_a_missing_module_is_one_line_and_its_own_exit_status(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "raw" / "job.json").write_text("{}")
    code = WITHOUT.format(module="pyspark") + (
        "from connmgr_evidence.cli import main\n"
        f"sys.exit(main(['bench', '--report-only', {str(run_dir)!r}, '--no-rfc']))\n"
    )
    done = _python(code)
    assert (done.returncode, done.stdout) == (EXIT_MISSING, "")
    [line] = done.stderr.splitlines()
    assert line.startswith("connmgr bench: missing dependency: pyspark is not installed")
    assert line.endswith("install the evidence with `pip install -e ./evidence`")


def test_a_missing_module_of_the_project_itself_is_a_bug_not_a_missing_dependency() -> None:
    def broken() -> int:
        raise ModuleNotFoundError("No module named 'connmgr.nope'", name="connmgr.nope")

    with pytest.raises(ModuleNotFoundError):
        evidence_cli._guarded("bench", broken)

    def hypothesis_missing() -> int:
        raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")

    assert evidence_cli._guarded("bench", hypothesis_missing) == EXIT_MISSING


@dataclass
class _Outcome:
    run_dir: Path
    report: Path
    partial: bool = False
    regressions: list[Any] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def test_a_quick_run_leaves_the_rfc_alone_and_a_full_one_refreshes_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from connmgr_evidence.bench import rfc

    refreshed: list[Path] = []
    run_dir = rfc.REPORTS / "20990101T000000Z-0000000"  # never created: both are stubbed
    monkeypatch.setattr(job, "run_bench", lambda *a, **k: _Outcome(run_dir, run_dir / "index.md"))
    monkeypatch.setattr(rfc, "refresh", lambda d: refreshed.append(d) or True)
    assert evidence_cli.bench(["--quick", "--no-progress"]) == EXIT_OK
    assert refreshed == []
    assert evidence_cli.bench(["--no-progress"]) == EXIT_OK
    assert refreshed == [run_dir]
    assert "figures refreshed" in capsys.readouterr().out


def test_bench_stages_runs_only_the_stages_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    monkeypatch.setattr(
        job,
        "run_bench",
        lambda *a, **k: asked.append(k["only"]) or _Outcome(Path("r"), Path("r/i"), True),
    )
    assert evidence_cli.bench(["--quick", "--stages", "simulate, linger"]) == EXIT_OK
    assert asked == [("simulate", "linger")]
    assert capsys.readouterr().out == "raw results: r/raw (stages simulate, linger; no report)\n"
    assert evidence_cli.bench(["--quick", "--stages", "simulate,nope"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "unknown stage nope; the stages are real, throughput" in err


@dataclass
class _FakeStage:
    name: str
    ran: list[str]
    phase: Phase = Phase.CPU
    order: int = 0
    shown: int | None = None
    timed: bool = True
    says: str | None = None

    def run(self, ctx: StageContext) -> None:
        self.ran.append(self.name)


def test_run_bench_with_only_runs_those_stages_and_writes_no_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []
    fakes = (_FakeStage("a", ran), _FakeStage("b", ran, order=1))
    monkeypatch.setattr(job, "stages", lambda: fakes)
    outcome = job.run_bench(
        load_grid(None, quick=True), tmp_path, show=False, say=lambda _: None, only={"b"}
    )
    assert ran == ["b"] and outcome.partial and not outcome.report.exists()
    written = json.loads((outcome.run_dir / "raw" / job.JOB_FILE).read_text())
    assert written["stages"] == ["b"] and written["master"] is None


def test_rfc_check_says_one_line_when_the_rfc_matches() -> None:
    done = _python(
        "from connmgr_evidence.bench.rfc import main; raise SystemExit(main(['--check']))"
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 1 and " files match " in done.stdout
