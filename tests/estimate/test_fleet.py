"""``estimate fleet``: the stage's own parameters reproduce the committed workload report
(computed by ``python -m connmgr_evidence.bench.workloads``, not by this code), the Spark path
agrees
with the in-process one, and bad descriptions are named precisely."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connmgr_evidence.estimate import fleet
from connmgr_evidence.estimate.fleet_model import figures
from connmgr_evidence.estimate.fleet_spec import FleetSpecError, load_fleet, parse_fleet

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REPORT = ROOT / "reports" / "workloads" / "workloads.json"


def _committed(workload: str, brokers: int, client: str) -> dict[str, Any]:
    for cell in json.loads(REPORT.read_text())["cells"]:
        if (cell["workload"], cell["brokers"], cell["client"]) == (workload, brokers, client):
            load: dict[str, Any] = cell["load"]
            return load
    raise AssertionError(f"no committed cell {workload}/{brokers}/{client}")


@pytest.mark.parametrize(
    ("example", "workload", "client"),
    [
        ("fleet-stage-steady.toml", "steady", "java-today"),
        ("fleet-stage-steady.toml", "steady", "proposed-4.4"),
        ("fleet-stage-steady.toml", "steady", "aiokafka-today"),
        ("fleet-stage-serverless.toml", "serverless", "java-today"),
        ("fleet-stage-restart.toml", "restart", "proposed"),
        ("fleet-stage-ip-change.toml", "ip-change", "java-today"),
    ],
)
def test_stage_parameters_reproduce_the_committed_workload_report(
    example: str, workload: str, client: str
) -> None:
    spec = load_fleet(EXAMPLES / example)
    got = figures(spec, client).load
    want = _committed(workload, spec.brokers, client)
    for field in (
        "peak_connections",
        "peak_attempts",
        "handshakes",
        "broker_handshakes",
        "attempts",
        "cluster_peak_connections",
        "cluster_peak_attempts",
    ):
        assert getattr(got, field) == want[field], field
    assert got.socket_seconds == pytest.approx(want["socket_seconds"], rel=1e-9)


def _mixed(tmp_path: Path) -> Path:
    """The mixed example with 4 templates a class (the transactional class simulates slowly)."""
    small = tmp_path / "mixed.toml"
    small.write_text("templates = 4\n" + (EXAMPLES / "fleet-mixed-confluent.toml").read_text())
    return small


def test_per_broker_figures_add_up_to_the_stage_figures(tmp_path: Path) -> None:
    spec = load_fleet(_mixed(tmp_path))
    f = figures(spec, "java-today")
    assert max(b.peak_connections for b in f.brokers) == f.load.peak_connections
    assert max(b.peak_attempts_per_s for b in f.brokers) == f.load.peak_attempts
    assert sum(b.handshakes for b in f.brokers) == f.load.handshakes
    assert max(b.handshakes for b in f.brokers) == f.load.broker_handshakes


def test_headroom_is_the_stage_headroom(capsys: pytest.CaptureFixture[str]) -> None:
    # reports/workloads/index.md: steady, 3 brokers, java-today under MSK: 10,000 x 3,000 /
    # 13,667 = 2,195 clients, connections binding first.
    assert (
        fleet.main([str(EXAMPLES / "fleet-stage-steady.toml"), "--json", "--clients", "java-today"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    room = out["models"]["java-today"]["headroom"]
    assert room["max_clients"] == 2_195
    assert room["first_limit"] == "connections"
    assert room["over_limit"] is True
    assert out["engine"] == "numpy"


def test_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "fleet.png"
    code = fleet.main(
        [
            str(EXAMPLES / "fleet-mixed-confluent.toml"),
            "--clients",
            "java-today,proposed",
            "--plot",
            str(png),
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "peak connections, per broker:" in text
    assert "Confluent Standard x4 eCKU" in text
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_spark_and_numpy_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    from connmgr_evidence.bench.runtime.spark import spark_session
    from connmgr_evidence.estimate import fleet_spark

    # Tasks of 333 clients: a task's first client is not its templates' first (4 a class).
    monkeypatch.setattr(fleet_spark, "CLIENTS_PER_TASK", 333)

    # The process's one SparkSession, shared with every Spark test of this worker: it is left
    # running (stopping it here broke the bench tests' session fixture that reuses it).
    spark_session("local[2]", app="connmgr-estimate-tests")
    spec = load_fleet(_mixed(tmp_path))
    a = fleet.estimate(spec, ["java-today", "proposed"], engine="numpy")
    b = fleet.estimate(spec, ["java-today", "proposed"], engine="spark", master="local[2]")
    assert (a["engine"], b["engine"]) == ("numpy", "spark")
    for m in a["models"]:
        assert a["models"][m]["per_broker"] == b["models"][m]["per_broker"]
        assert a["models"][m]["busiest"] == b["models"][m]["busiest"]
        assert a["models"][m]["headroom"] == b["models"][m]["headroom"]
        ca, cb = a["models"][m]["cluster"], b["models"][m]["cluster"]
        assert ca["socket_seconds"] == pytest.approx(cb["socket_seconds"], rel=1e-9)
        assert {k: v for k, v in ca.items() if k != "socket_seconds"} == {
            k: v for k, v in cb.items() if k != "socket_seconds"
        }


test_spark_and_numpy_agree = pytest.mark.spark(test_spark_and_numpy_agree)

GOOD = """
[cluster]
brokers = 3
[provider]
name = "msk-iam"
[[clients]]
name = "a"
kind = "producer"
count = 10
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            GOOD.replace('name = "msk-iam"', 'name = "aiven"'),
            "fleet.toml:5: provider.name: unknown provider 'aiven'; valid: msk-iam, "
            "confluent-standard, confluent-enterprise, self-managed",
        ),
        (
            GOOD.replace("count = 10", 'count = "ten"'),
            "fleet.toml:9: clients[a].count: expected an integer, got 'ten'",
        ),
        (
            GOOD.replace('kind = "producer"', 'kind = "streams"'),
            "fleet.toml:8: clients[a].kind: unknown 'streams'; valid: producer, consumer, mixed, "
            "admin, transactional",
        ),
        (GOOD.replace("brokers = 3", "brokers = [3"), "fleet.toml: not TOML: "),
        (
            GOOD.replace('name = "msk-iam"', 'name = "confluent-standard"'),
            "fleet.toml:4: provider.ecku: missing",
        ),
        (
            GOOD.replace("count = 10", "count = 10\nlifetime_s = 30"),
            "clients[a].starts_per_hour: missing",
        ),
    ],
)
def test_bad_descriptions_name_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(FleetSpecError) as info:
        parse_fleet(text, "fleet.toml")
    assert message in str(info.value)


def test_toml_syntax_error_carries_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("brokers = 3", "brokers = [3"))
    assert fleet.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "line 4" in err
