"""Finding ``java`` and ``mvn``, and running Maven with them: what the probe build
(:mod:`connmgr_evidence.java.build`) and the kafka-clients patch
(:mod:`connmgr_evidence.java.patch`) share."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from connmgr_evidence.java.errors import JavaBuildError, JavaToolError, output_tail

__all__ = ["MIN_JAVA", "JavaTools", "file_lock", "find_tools", "run_maven"]

MIN_JAVA: Final = 17
"""The probe compiles with ``maven.compiler.release`` 17."""

_LOCK_POLL_S: Final = 0.1


@dataclass(frozen=True, slots=True)
class JavaTools:
    """Where ``java`` and ``mvn`` are, and the JDK's feature version (17 for ``17.0.15``)."""

    java: Path
    mvn: Path
    java_version: int


_JAVA_HINT: Final = (
    f"install a JDK {MIN_JAVA} or newer (Debian/Ubuntu: `apt-get install "
    "openjdk-17-jdk-headless`) and put its bin/ on PATH or set JAVA_HOME"
)
_MVN_HINT: Final = (
    "install Apache Maven 3.6 or newer (Debian/Ubuntu: `apt-get install maven`, or unpack "
    "https://maven.apache.org/download.cgi) and put its bin/ on PATH or set MAVEN_HOME"
)


def _java_major(java: Path) -> int:
    try:
        out = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaToolError(f"cannot run {java} -version ({e}); {_JAVA_HINT}") from e
    # `java -version` prints to stderr: 'openjdk version "17.0.15" ...' or '"1.8.0_392"'.
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if m is None:
        raise JavaToolError(
            f"cannot tell the version of {java} from {(out.stderr or out.stdout)[:200]!r}; "
            + _JAVA_HINT
        )
    major = int(m[1])
    return int(m[2] or 0) if major == 1 else major  # 1.8 means 8


def find_tools() -> JavaTools:
    """Locate ``java`` (``$JAVA_HOME/bin/java``, else PATH) and ``mvn`` (PATH, else
    ``$MAVEN_HOME``/``$M2_HOME``), and check that the JDK is at least version 17.

    Raises :class:`JavaToolError` naming what is missing and how to install it.
    """
    java: str | None = None
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home, "bin", "java"), os.X_OK):
        java = str(Path(java_home, "bin", "java"))
    java = java or shutil.which("java")
    mvn = shutil.which("mvn")
    for home in (os.environ.get("MAVEN_HOME"), os.environ.get("M2_HOME")):
        if mvn is None and home and os.access(Path(home, "bin", "mvn"), os.X_OK):
            mvn = str(Path(home, "bin", "mvn"))
    missing = []
    if java is None:
        missing.append(f"`java` was not found: {_JAVA_HINT}")
    if mvn is None:
        missing.append(f"`mvn` was not found: {_MVN_HINT}")
    if java is None or mvn is None:
        raise JavaToolError("the Java client probe needs a JDK and Maven; " + "; ".join(missing))
    major = _java_major(Path(java))
    if major < MIN_JAVA:
        raise JavaToolError(f"{java} is Java {major}, the probe needs {MIN_JAVA}+: {_JAVA_HINT}")
    return JavaTools(Path(java), Path(mvn), major)


def run_maven(
    tools: JavaTools,
    command: list[str],
    *,
    timeout_s: float,
    doing: str,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a Maven ``command`` with the JDK of ``tools`` (``JAVA_HOME``, unless set: the JDK
    the result runs on, not whatever Maven would pick), no stdin, output captured. A
    non-zero exit is the caller's to judge; past ``timeout_s`` it raises
    :class:`JavaBuildError` saying it did not finish ``doing``, with the output's tail."""
    env = dict(os.environ)
    env.setdefault("JAVA_HOME", str(tools.java.resolve().parent.parent))
    try:
        return subprocess.run(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        raise JavaBuildError(
            f"Maven did not finish {doing} within {timeout_s:.0f}s; "
            f"last output:\n{output_tail(output)}"
        ) from e


@contextlib.contextmanager
def file_lock(path: Path, timeout_s: float) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, so two processes never build one version at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise JavaBuildError(
                        f"timed out after {timeout_s:.0f}s waiting for the build lock {path} "
                        "(another process is building this version)"
                    ) from None
                time.sleep(_LOCK_POLL_S)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
