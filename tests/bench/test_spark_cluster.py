"""The main job on a real Spark standalone cluster: a master and two workers started from the
pyspark installation on 127.0.0.1, whose executors run a Python that has neither this
project nor pyspark installed and lives at another path than the driver's (a bare venv).

The driver is a separate process (one SparkContext per process; this test session's local
one stays as it is), started without ``PYSPARK_PYTHON``: the executors run the ``python3``
of the workers' ``PATH``, the venv's. What must hold:

* the sweep's rows computed on the cluster equal the rows computed locally (the package
  reached the executors as a zip; the driver gathered the rows and wrote them itself);
* ``connmgr bench --report-only`` on the cluster writes the same tables as on ``local[2]``
  (the driver read the results; the workers never see the run directory), and the report
  names the master;
* an executor whose Python cannot start fails the job in one line, not a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.runtime.spark import find_java, launcher_home
from connmgr_evidence.bench.stages import sweep

pytestmark = pytest.mark.spark  # a standalone master and workers, beside the local session

POINTS = 90
META = RunMeta("cluster-test", "0123abcd", "{}", "{}", "2026-11-24T00:00:00+00:00")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _bare_python(where: Path) -> Path:
    """A venv with nothing installed (no pip, no site-packages of the driver's Python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python3"
    # Checked in the environment the workers get (no PYTHONPATH: a developer's checkout on
    # it would put the package within the executors' reach).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run(
        [str(python), "-c", "import connmgr"], capture_output=True, text=True, check=False, env=env
    )
    assert probe.returncode != 0, "the executors' Python must not have the package"
    return python


def _cluster_env(scratch: Path, path_first: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.pop("PYTHONPATH", None)
    env["JAVA_HOME"] = str(launcher_home(find_java(), scratch))
    env["SPARK_HOME"] = str(_spark_home())
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOG_DIR"] = str(scratch / "logs")
    env["SPARK_NO_DAEMONIZE"] = "1"
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return env


def _wait_for_workers(ui_port: int, count: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                last = json.load(r)
            if int(last.get("aliveworkers", 0)) >= count:
                return
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"the standalone cluster did not come up: {last!r}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``spark://127.0.0.1:PORT`` of a master with two one-core workers."""
    scratch = tmp_path_factory.mktemp("standalone")
    venv = _bare_python(scratch / "executor-python")
    spark_class = str(_spark_home() / "bin" / "spark-class")
    port, ui = _free_port(), _free_port()
    env = _cluster_env(scratch, path_first=venv.parent)
    master = f"spark://127.0.0.1:{port}"
    commands = [
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port)],
        *(
            [
                "org.apache.spark.deploy.worker.Worker",
                master,
                *("--host", "127.0.0.1", "--cores", "1", "--memory", "1G"),
                *("--work-dir", str(scratch / f"work{n}")),
            ]
            for n in range(2)
        ),
    ]
    with contextlib.ExitStack() as stack:
        procs: list[subprocess.Popen[bytes]] = []
        for n, command in enumerate(commands):
            web = _free_port() if n else ui
            log = stack.enter_context(open(scratch / f"daemon{n}.log", "wb"))
            procs.append(
                subprocess.Popen(
                    [spark_class, *command, "--webui-port", str(web)],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        try:
            _wait_for_workers(ui, 2)
            yield master
        finally:
            for proc in reversed(procs):
                proc.terminate()
            for proc in procs:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _driver(
    code: str, master: str, scratch: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh driver process (this project's Python), without
    PYSPARK_PYTHON, with ``MASTER`` in its environment."""
    env = _cluster_env(scratch)
    env.pop("JAVA_HOME")  # spark_session finds Java itself
    env["MASTER"] = master
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )


SWEEP = """
import os, sys
from pathlib import Path
from connmgr_evidence.bench.stages import sweep
from connmgr_evidence.bench.results.rows import RunMeta
from connmgr_evidence.bench.runtime.spark import SparkJobFailed, spark_session
meta = RunMeta("cluster-test", "0123abcd", "{}", "{}", "2026-11-24T00:00:00+00:00")
spark = spark_session(os.environ["MASTER"], app="connmgr-cluster-test")
try:
    sweep.run_sweep(spark, int(os.environ["POINTS"]), Path(os.environ["OUT"]), meta=meta)
except SparkJobFailed as e:
    print(f"connmgr: error: {e}", file=sys.stderr)
    sys.exit(3)
"""


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Rows without ``wall_s`` (a measurement), sorted, each value with its type."""
    return sorted(
        tuple((k, type(v).__name__, v) for k, v in sorted(r.items()) if k != "wall_s") for r in rows
    )


def test_sweep_rows_on_the_cluster_equal_local_rows(cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep.parquet"
    done = _driver(SWEEP, cluster, tmp_path, OUT=str(out), POINTS=str(POINTS))
    assert done.returncode == 0, done.stderr[-3000:]
    local = sweep.run_local(POINTS, META)
    assert len(local) == POINTS * len(sweep.SWEEP_POLICIES)
    assert _rows(pq.read_table(out).to_pylist()) == _rows(local)


def test_an_executor_python_that_cannot_start_is_one_line(cluster: str, tmp_path: Path) -> None:
    done = _driver(
        SWEEP,
        cluster,
        tmp_path,
        OUT=str(tmp_path / "x"),
        POINTS="10",
        PYSPARK_PYTHON="/nonexistent/python",
    )
    assert done.returncode == 3, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("connmgr: error:")]
    assert len(lines) == 1 and "Spark" in lines[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_report_only_on_the_cluster_equals_local(cluster: str, tmp_path: Path, spark: Any) -> None:
    run = tmp_path / "run"
    results = run / "raw" / "results"
    results.mkdir(parents=True)
    sweep.run_sweep(spark, POINTS, results / "sweep.parquet", meta=META, seed=0)
    job = {"grid": "test grid", "skipped": [], "stage_seconds": {}, "retried": []}
    job["sweep"] = [[POINTS, 1.0, POINTS * len(sweep.SWEEP_POLICIES)]]
    (run / "raw" / "job.json").write_text(json.dumps(job))
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    code = (
        "import os, sys; from connmgr_evidence.cli import main; "
        "sys.exit(main(['bench', '--report-only', os.environ['RUN'], '--master', "
        "os.environ['MASTER'], '--no-rfc', '--no-progress']))"
    )
    on_cluster = _driver(code, cluster, tmp_path, RUN=str(run))
    assert on_cluster.returncode in (0, 1), on_cluster.stderr[-3000:]
    local = _driver(code, "local[2]", tmp_path, RUN=str(copy))
    assert local.returncode == on_cluster.returncode, local.stderr[-3000:]
    tables = sorted(p.name for p in (run / "tables").glob("*.md"))
    assert tables and tables == sorted(p.name for p in (copy / "tables").glob("*.md"))
    for name in tables:
        assert (run / "tables" / name).read_text() == (copy / "tables" / name).read_text(), name
    index = (run / "index.md").read_text()
    assert f"`{cluster}`" in index
    assert "`local[2]`" in (copy / "index.md").read_text()
