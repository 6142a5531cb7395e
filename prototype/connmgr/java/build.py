"""Building the Java client probe: finding ``java`` and ``mvn``, and a Maven build per
kafka-clients version, cached by the fingerprint of everything it depends on.

Nothing built or downloaded goes into the repository: Maven keeps artifacts in its local
repository (``~/.m2``) and the build output goes to :func:`cache_dir` (``$XDG_CACHE_HOME`` or
``~/.cache``, then ``connmgr/java-probe/<version>``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from connmgr.errors import ConnMgrError
from connmgr.java.errors import JavaBuildError, JavaToolError, output_tail, strip_ansi

__all__ = [
    "MIN_JAVA",
    "JavaTools",
    "ProbeBuild",
    "build_probe",
    "cache_dir",
    "default_probe_dir",
    "find_tools",
]

MIN_JAVA: Final = 17
"""The probe compiles with ``maven.compiler.release`` 17."""

_VERSION_RE: Final = re.compile(r"^\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.]+)?$")
_FINGERPRINT_SCHEMA: Final = "java-probe-build-v1"
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


# -- build ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProbeBuild:
    """A built probe for one kafka-clients version.

    ``classpath`` is the compiled probe classes directory followed by every dependency jar (in
    Maven's local repository). ``built`` says whether this call ran Maven (False: the cached
    build matched the sources) and ``seconds`` how long the call took.
    """

    version: str
    classpath: tuple[Path, ...]
    build_dir: Path
    java: Path
    fingerprint: str
    built: bool
    seconds: float

    @property
    def classpath_arg(self) -> str:
        """The classpath as ``java -cp`` wants it."""
        return os.pathsep.join(str(p) for p in self.classpath)


def default_probe_dir() -> Path:
    """``benchmarks/java-probe`` of the source tree this package is installed from (editable)."""
    # build.py -> java -> connmgr -> prototype -> repository root
    return Path(__file__).resolve().parents[3] / "benchmarks" / "java-probe"


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


def cache_dir(version: str | None = None) -> Path:
    """The per-user cache for probe builds (``$XDG_CACHE_HOME`` or ``~/.cache``, then
    ``connmgr/java-probe``), or one version's directory inside it. Not created here."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(base) / "connmgr" / "java-probe"
    return root if version is None else root / _check_version(version)


def _check_version(version: str) -> str:
    # The version becomes a directory name and a Maven -D value: only plain versions.
    if not _VERSION_RE.match(version):
        raise ConnMgrError(f"not a kafka-clients version: {version!r} (expected e.g. 2.1.0)")
    return version


def _fingerprint(probe_dir: Path, version: str, tools: JavaTools) -> str:
    """Hash of everything the build output depends on: the pom, every file under src/, the
    client version and the JDK/Maven used."""
    h = hashlib.sha256()
    for part in (_FINGERPRINT_SCHEMA, version, str(tools.java.resolve()), str(tools.mvn)):
        h.update(part.encode() + b"\0")
    sources = sorted(p for p in (probe_dir / "src").rglob("*") if p.is_file())
    files = [probe_dir / "pom.xml", *sources]
    for path in files:
        h.update(str(path.relative_to(probe_dir)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@contextlib.contextmanager
def _file_lock(path: Path, timeout_s: float) -> Iterator[None]:
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


def _cached(stamp: Path, fingerprint: str) -> tuple[Path, ...] | None:
    """The cached classpath if ``stamp`` records a build of ``fingerprint`` whose every
    classpath entry still exists (a wiped ~/.m2 or cache means rebuilding)."""
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("fingerprint") != fingerprint:
        return None
    entries = data.get("classpath")
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    classpath = tuple(Path(e) for e in entries)
    return classpath if classpath and all(p.exists() for p in classpath) else None


def build_probe(
    version: str,
    *,
    probe_dir: Path | None = None,
    tools: JavaTools | None = None,
    timeout_s: float = 900.0,
) -> ProbeBuild:
    """Build the probe against kafka-clients ``version`` unless an up-to-date build is cached.

    The build directory is ``cache_dir(version)``; a build is reused when the fingerprint of
    the pom, the sources, the version and the tools matches the one recorded with it and its
    classpath still exists. Otherwise Maven runs quietly (``-q -B``)::

        mvn -q -B -Dkafka.clients.version=V -Dprobe.build.dir=<cache>/V/target \\
            compile dependency:build-classpath -Dmdep.outputFile=<cache>/V/classpath.txt

    downloading into ``~/.m2`` whatever it lacks. An exclusive file lock per version makes
    concurrent callers (other processes included) wait for one build instead of racing.

    Raises :class:`JavaToolError` if java/mvn are missing, :class:`JavaBuildError` with the
    tail of Maven's output if the build fails or exceeds ``timeout_s``.
    """
    started = time.monotonic()
    _check_version(version)
    tools = tools or find_tools()
    probe_dir = probe_dir or default_probe_dir()
    if not (probe_dir / "pom.xml").is_file():
        raise JavaToolError(
            f"probe sources not found at {probe_dir} (expected pom.xml there; connmgr must be "
            "installed editable from its source tree, or pass probe_dir)"
        )
    vdir = cache_dir(version)
    stamp = vdir / "build.json"
    fingerprint = _fingerprint(probe_dir, version, tools)
    with _file_lock(vdir / ".lock", timeout_s):
        classpath = _cached(stamp, fingerprint)
        built = classpath is None
        if classpath is None:
            classpath = _run_maven(probe_dir, version, vdir, tools, timeout_s)
            tmp = stamp.with_suffix(".tmp")
            tmp.write_text(
                json.dumps(
                    {
                        "fingerprint": fingerprint,
                        "version": version,
                        "classpath": [str(p) for p in classpath],
                        "built_at": datetime.now().isoformat(timespec="seconds"),
                    },
                    indent=2,
                ),
                encoding="utf-8",
            )
            tmp.replace(stamp)  # atomic: a crashed build never leaves a stamp behind
    return ProbeBuild(
        version=version,
        classpath=classpath,
        build_dir=vdir / "target",
        java=tools.java,
        fingerprint=fingerprint,
        built=built,
        seconds=time.monotonic() - started,
    )


def _run_maven(
    probe_dir: Path, version: str, vdir: Path, tools: JavaTools, timeout_s: float
) -> tuple[Path, ...]:
    target = vdir / "target"
    cp_file = vdir / "classpath.txt"
    # Start from nothing: a source file removed since the last build must not survive as a
    # stale class.
    shutil.rmtree(target, ignore_errors=True)
    cp_file.unlink(missing_ok=True)
    command = [
        str(tools.mvn),
        "-q",
        "-B",
        "-Dstyle.color=never",
        "-f",
        str(probe_dir / "pom.xml"),
        f"-Dkafka.clients.version={version}",
        f"-Dprobe.build.dir={target}",
        "compile",
        "dependency:build-classpath",
        f"-Dmdep.outputFile={cp_file}",
    ]
    result = run_maven(
        tools,
        command,
        timeout_s=timeout_s,
        doing=f"building the probe for kafka-clients {version}",
        cwd=vdir,
    )
    output = result.stdout + result.stderr
    (vdir / "build.log").write_text(strip_ansi(output), encoding="utf-8")
    if result.returncode != 0 or not cp_file.is_file():
        raise JavaBuildError(
            f"Maven failed (exit {result.returncode}) building the probe for kafka-clients "
            f"{version}: {' '.join(command)}\n{output_tail(output)}"
        )
    jars = [Path(p) for p in cp_file.read_text(encoding="utf-8").strip().split(os.pathsep) if p]
    classes = target / "classes"
    if not (classes / "connmgr" / "probe" / "Probe.class").is_file():
        raise JavaBuildError(f"Maven succeeded but {classes} holds no connmgr/probe/Probe.class")
    return (classes, *jars)
