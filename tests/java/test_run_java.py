"""`connmgr run --client java`: the real Java client through scenarios on the embedded cluster,
with the same JSON fields as the other clients."""

from __future__ import annotations

import json

import pytest

from connmgr_evidence.cli import main
from connmgr_evidence.realrun.workloads import java_needs_compat

pytestmark = pytest.mark.java


@pytest.mark.parametrize("version", ["2.1.0", "4.4.0"])
def test_run_seed_consumer_with_the_java_client(
    version: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "run",
            "seed-consumer",
            "--client",
            "java",
            "--kafka-clients",
            version,
            "--set",
            "records=60",
            "--set",
            "settle_ms=1500",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["records_consumed"] == 60
    assert {"opened", "peak", "steady", "by_role", "by_broker", "timeline"} <= set(data)
    roles = data["by_role"]
    # One coordination connection to the group's coordinator, separate from data connections,
    # and the bootstrap connection still open (idle expiry is 9 minutes away).
    assert roles["coordination"]["opened"] == 1
    assert roles["bootstrap"]["open_at_end"] >= 1
    assert data["steady"] == data["opened"]
    # opened / peak / steady for every role; nothing closed before the steady point here.
    for counts in roles.values():
        assert counts["opened"] == counts["peak"] == counts["open_at_end"]
    assert data["peak"] == sum(c["peak"] for c in roles.values())


def test_java_log_output_is_the_clients_own(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "seed-producer",
            "--client",
            "java",
            "--kafka-clients",
            "2.1.0",
            "--set",
            "records=30",
            "--set",
            "settle_ms=500",
            "--java-log",
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert any("Initiating connection to node 127.0.0.1:" in line for line in lines)
    assert all("NetworkClient" in line for line in lines if "Initiating" in line)


def test_kafka_clients_goes_with_java_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "seed-producer", "--client", "java"]) == 2
    assert "--kafka-clients" in capsys.readouterr().err
    assert main(["run", "seed-producer", "--client", "aiokafka", "--kafka-clients", "4.4.0"]) == 2


def test_which_versions_need_the_compat_proxy() -> None:
    assert not java_needs_compat("2.1.0")
    assert java_needs_compat("4.4.0") and java_needs_compat("3.7.0")
