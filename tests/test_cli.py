from __future__ import annotations

import json

import pytest

from connmgr.cli import main
from connmgr.policies import POLICIES
from connmgr.sim.run import build_simulator, prepare


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
