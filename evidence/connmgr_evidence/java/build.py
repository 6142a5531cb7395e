"""Building the Java client probe: a Maven build per kafka-clients version (the tools from
:mod:`connmgr_evidence.java.tools`), cached by the fingerprint of everything it depends on.

Nothing built or downloaded goes into the repository: Maven keeps artifacts in its local
repository (``~/.m2``) and the build output goes to :func:`cache_dir` (``$XDG_CACHE_HOME`` or
``~/.cache``, then ``connmgr/java-probe/<version>``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from connmgr.errors import ConnMgrError
from connmgr_evidence.java import patched
from connmgr_evidence.java.errors import JavaBuildError, JavaToolError, output_tail, strip_ansi
from connmgr_evidence.java.tools import JavaTools, file_lock, find_tools, run_maven

__all__ = [
    "ProbeBuild",
    "build_probe",
    "cache_dir",
    "default_probe_dir",
]

_VERSION_RE: Final = re.compile(r"^\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.]+)?$")
_FINGERPRINT_SCHEMA: Final = "java-probe-build-v1"


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
    # build.py -> java -> connmgr_evidence -> evidence -> repository root
    return Path(__file__).resolve().parents[3] / "benchmarks" / "java-probe"


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

    ``4.3.1-patched`` (:data:`connmgr_evidence.java.patched.PATCHED_SUFFIX`) is the probe built for
    4.3.1 with the released kafka-clients jar on its classpath replaced by the project's
    patched one (:func:`connmgr_evidence.java.patched.build_patched_client`).

    Raises :class:`JavaToolError` if java/mvn are missing, :class:`JavaBuildError` with the
    tail of Maven's output if the build fails or exceeds ``timeout_s``.
    """
    started = time.monotonic()
    _check_version(version)
    tools = tools or find_tools()
    if version.endswith(patched.PATCHED_SUFFIX):
        return _patched_probe(version, probe_dir, tools, timeout_s, started)
    probe_dir = probe_dir or default_probe_dir()
    if not (probe_dir / "pom.xml").is_file():
        raise JavaToolError(
            f"probe sources not found at {probe_dir} (expected pom.xml there; connmgr must be "
            "installed editable from its source tree, or pass probe_dir)"
        )
    vdir = cache_dir(version)
    stamp = vdir / "build.json"
    fingerprint = _fingerprint(probe_dir, version, tools)
    with file_lock(vdir / ".lock", timeout_s):
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


def _patched_probe(
    version: str, probe_dir: Path | None, tools: JavaTools, timeout_s: float, started: float
) -> ProbeBuild:
    base = version.removesuffix(patched.PATCHED_SUFFIX)
    if base != patched.KAFKA_VERSION:
        raise ConnMgrError(
            f"kafka-clients {version!r}: the patch applies to {patched.KAFKA_VERSION} only "
            f"(use {patched.KAFKA_VERSION}{patched.PATCHED_SUFFIX})"
        )
    stock = build_probe(base, probe_dir=probe_dir, tools=tools, timeout_s=timeout_s)
    jar = patched.build_patched_client(tools=tools, timeout_s=timeout_s)
    released = f"kafka-clients-{base}.jar"
    if [p.name for p in stock.classpath].count(released) != 1:
        raise JavaBuildError(f"the probe's classpath for {base} does not hold {released} once")
    return ProbeBuild(
        version=version,
        classpath=tuple(jar if p.name == released else p for p in stock.classpath),
        build_dir=stock.build_dir,
        java=stock.java,
        fingerprint=hashlib.sha256(f"{stock.fingerprint}\0{jar.name}".encode()).hexdigest(),
        built=stock.built,
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
