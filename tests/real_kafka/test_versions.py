"""Which Kafka release the real tier runs: 4.4.0 by default, 4.3.1 on request, nothing else.

No cluster is started here (the 4.3.1 broker itself runs in ``test_kip1242.py``): these pin
how a release is chosen (argument, ``$CONNMGR_KAFKA_VERSION``, default), that each release
resolves to its own jars with its own log4j binding and its own cached classpath, and that an
unsupported release or a wrong binding is a clear :class:`RealKafkaError`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from connmgr_evidence.realkafka import (
    KAFKA_VERSION,
    KAFKA_VERSION_ENV,
    KAFKA_VERSIONS,
    KafkaCluster,
    RealKafkaError,
    broker_cache_dir,
    kafka_version,
    resolve_broker_classpath,
)
from connmgr_evidence.realkafka import classpath as classpath_module
from connmgr_evidence.realkafka.classpath import LOG4J_VERSIONS
from connmgr_evidence.realkafka.cli import cluster_command

pytestmark = pytest.mark.real_kafka


def test_the_default_is_4_4_0_and_4_3_1_stays_selectable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert KAFKA_VERSION == "4.4.0"
    assert KAFKA_VERSIONS == ("4.4.0", "4.3.1")
    monkeypatch.delenv(KAFKA_VERSION_ENV, raising=False)
    assert kafka_version() == "4.4.0"
    monkeypatch.setenv(KAFKA_VERSION_ENV, "  ")  # blank is unset
    assert kafka_version() == "4.4.0"
    monkeypatch.setenv(KAFKA_VERSION_ENV, "4.3.1")
    assert kafka_version() == "4.3.1"
    assert kafka_version("4.4.0") == "4.4.0"  # an argument wins over the environment
    cluster = KafkaCluster(1)
    assert cluster.version == "4.3.1" and "kafka=4.3.1" in repr(cluster)
    assert KafkaCluster(1, version="4.4.0").version == "4.4.0"


def test_an_unsupported_release_is_refused_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(KAFKA_VERSION_ENV, raising=False)
    with pytest.raises(
        RealKafkaError,
        match=r"Kafka '4\.2\.0' \(asked for\) is not a release the real Kafka tier runs: "
        r"choose one of 4\.4\.0, 4\.3\.1 \(default 4\.4\.0\)",
    ):
        KafkaCluster(1, version="4.2.0")
    with pytest.raises(RealKafkaError, match=r"'4\.2\.0' \(asked for\)"):
        resolve_broker_classpath(version="4.2.0")
    monkeypatch.setenv(KAFKA_VERSION_ENV, "latest")
    with pytest.raises(RealKafkaError, match=rf"'latest' \(from \${KAFKA_VERSION_ENV}\)"):
        KafkaCluster(1)
    assert cluster_command(["--hold", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("connmgr: error: Kafka 'latest' (from $CONNMGR_KAFKA_VERSION)")
    assert cluster_command(["--kafka-version", "3.9.0", "--hold", "0"]) == 2
    assert "Kafka '3.9.0' (asked for) is not a release" in capsys.readouterr().err


def test_python_m_realkafka_is_the_cluster_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "connmgr_evidence.realkafka", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    help_text = " ".join(done.stdout.split())  # argparse wraps the help to the terminal
    assert "--kafka-version X.Y.Z" in help_text
    assert f"one of 4.4.0, 4.3.1 (default: ${KAFKA_VERSION_ENV} if set, else 4.4.0" in help_text


def _names(classpath: list[str]) -> set[str]:
    return {Path(entry).name for entry in classpath}


def test_each_release_has_its_own_jars_binding_and_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KAFKA_VERSION_ENV, raising=False)
    by_release = {v: resolve_broker_classpath(version=v) for v in KAFKA_VERSIONS}
    for version, classpath in by_release.items():
        log4j = LOG4J_VERSIONS[version]
        names = _names(classpath)
        assert Path(classpath[0]).name == f"kafka_2.13-{version}.jar"
        assert {f"kafka-server-{version}.jar", f"kafka-clients-{version}.jar"} <= names
        # The binding and the log4j it binds to are the version kafka-server depends on.
        log4j_jars = {n for n in names if n.startswith("log4j-")}
        assert log4j_jars == {
            f"log4j-{part}-{log4j}.jar" for part in ("api", "core", "slf4j-impl")
        }, log4j_jars
        cached = list(broker_cache_dir(version).glob("classpath-*.txt"))
        assert cached, f"no cached classpath for {version}"
    assert not _names(by_release["4.4.0"]) & {"kafka_2.13-4.3.1.jar", "kafka-server-4.3.1.jar"}
    assert LOG4J_VERSIONS == {"4.4.0": "2.25.5", "4.3.1": "2.25.4"}
    # The default resolves to the same classpath as 4.4.0 named.
    assert resolve_broker_classpath() == by_release[KAFKA_VERSION]


def test_a_binding_other_than_kafka_servers_log4j_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """4.3.1 bound with 4.4.0's log4j: Maven resolves it, the check against kafka-server
    4.3.1's pom (which names log4j-core 2.25.4) refuses it and caches nothing."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(
        classpath_module, "LOG4J_VERSIONS", {**LOG4J_VERSIONS, "4.3.1": LOG4J_VERSIONS["4.4.0"]}
    )
    with pytest.raises(
        RealKafkaError,
        match=r"kafka-server 4\.3\.1 depends on log4j-core '2\.25\.4' but the slf4j binding "
        r"is pinned at '2\.25\.5'",
    ):
        resolve_broker_classpath(version="4.3.1")
    assert list(broker_cache_dir("4.3.1").glob("classpath-*")) == []
