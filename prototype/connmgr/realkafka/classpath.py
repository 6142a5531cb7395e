"""The pinned Kafka broker's runtime classpath, resolved by Maven and cached per pom content.

The broker is ``org.apache.kafka:kafka_2.13`` at :data:`KAFKA_VERSION`, fetched by Maven
through the tiny module ``benchmarks/kafka-broker/pom.xml``: the jars live in Maven's local
repository (``~/.m2``), and the resolved classpath is cached under :func:`broker_cache_dir`.
Nothing is downloaded into the source tree. Also here: finding a ``java`` new enough to run it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Final

from connmgr.realkafka.errors import MissingTool, RealKafkaError, output_tail

__all__ = [
    "KAFKA_VERSION",
    "MIN_JAVA",
    "broker_cache_dir",
    "default_pom",
    "require_java",
    "resolve_broker_classpath",
]

KAFKA_VERSION: Final = "4.3.1"
"""The pinned broker release; must equal ``kafka.version`` in ``benchmarks/kafka-broker/pom.xml``.

4.x because those brokers run on Java 17 (what this machine and CI have) and are KRaft-only,
so no ZooKeeper; 4.3.1 because it is a patch release of the newest line we verified resolves.
"""

MIN_JAVA: Final = 17
"""Kafka 4.x brokers need Java 17 or newer."""

# classpath.py -> realkafka -> connmgr -> prototype -> repository root
_REPO_ROOT: Final = Path(__file__).resolve().parents[3]
_MAVEN_TIMEOUT_S: Final = 900.0


def default_pom() -> Path:
    """``benchmarks/kafka-broker/pom.xml`` of the source tree this package is installed from."""
    return _REPO_ROOT / "benchmarks" / "kafka-broker" / "pom.xml"


def broker_cache_dir(version: str = KAFKA_VERSION) -> Path:
    """Per-user cache for ``version``: ``$XDG_CACHE_HOME/connmgr/kafka-broker/<version>``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "connmgr" / "kafka-broker" / version


def _require_tool(name: str, install: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingTool(f"`{name}` is not on PATH: install {install}")
    return path


@functools.cache
def _java_major(java: str) -> int:
    """The major version of the ``java`` at ``java`` (``java -version`` prints to stderr)."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingTool(f"cannot run `{java} -version`: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if match is None:
        raise MissingTool(f"cannot read the version of {java}: {done.stderr.strip()!r}")
    major = int(match[1])
    # Java 8 and older call themselves 1.x.
    return int(match[2] or 0) if major == 1 else major


def require_java() -> str:
    """The ``java`` on PATH, if it is Java :data:`MIN_JAVA` or newer; raises
    :class:`MissingTool` saying what to install otherwise."""
    java = _require_tool(
        "java", f"a Java {MIN_JAVA}+ runtime (e.g. apt-get install openjdk-17-jdk)"
    )
    major = _java_major(java)
    if major < MIN_JAVA:
        raise MissingTool(
            f"{java} is Java {major}; Kafka {KAFKA_VERSION} brokers need Java {MIN_JAVA}+ "
            "(e.g. apt-get install openjdk-17-jdk, or put a newer java first on PATH)"
        )
    return java


def _pom_kafka_version(pom: Path) -> str | None:
    root = ElementTree.parse(pom).getroot()
    namespace = root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""
    node = root.find(f"{namespace}properties/{namespace}kafka.version")
    return node.text.strip() if node is not None and node.text else None


def _read_cached_classpath(path: Path) -> list[str] | None:
    try:
        entries = [e for e in path.read_text(encoding="utf-8").strip().split(os.pathsep) if e]
    except OSError:
        return None
    # ~/.m2 may have been cleaned since: a cache naming missing jars is no cache.
    if entries and all(os.path.isfile(entry) for entry in entries):
        return entries
    return None


def resolve_broker_classpath(
    *, pom: Path | None = None, refresh: bool = False, timeout_s: float = _MAVEN_TIMEOUT_S
) -> list[str]:
    """The runtime classpath (jar paths, broker first) of the pinned Kafka broker.

    Runs ``mvn -q dependency:build-classpath`` on ``pom`` (default :func:`default_pom`), which
    downloads what is missing into Maven's local repository, and caches the result in
    :func:`broker_cache_dir` under the pom's content hash; later calls with the same pom read
    the cache (unless ``refresh``, or a listed jar has disappeared) and run no Maven at all.

    Raises :class:`MissingTool` naming what to install when ``mvn`` or ``java`` is missing,
    and :class:`RealKafkaError` when the pom is missing or pins another version than
    :data:`KAFKA_VERSION`, or Maven fails or times out (with the tail of its output).
    """
    pom = (pom or default_pom()).resolve()
    if not pom.is_file():
        raise RealKafkaError(
            f"{pom} not found: the real-Kafka tier needs the source tree's "
            "benchmarks/kafka-broker/pom.xml (install connmgr editable from the repository)"
        )
    pinned = _pom_kafka_version(pom)
    if pinned != KAFKA_VERSION:
        raise RealKafkaError(
            f"{pom} pins kafka.version={pinned!r} but connmgr.realkafka.KAFKA_VERSION is "
            f"{KAFKA_VERSION!r}: change both together"
        )
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:16]
    cache_dir = broker_cache_dir()
    cached = cache_dir / f"classpath-{digest}.txt"
    if not refresh:
        entries = _read_cached_classpath(cached)
        if entries is not None:
            return entries

    mvn = _require_tool("mvn", "Apache Maven 3.6+ (e.g. apt-get install maven)")
    _require_tool("java", f"a Java {MIN_JAVA}+ JDK for Maven (e.g. apt-get install openjdk-17-jdk)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Written to a private file, then renamed: concurrent resolutions never see half a file.
    fd, scratch = tempfile.mkstemp(prefix="classpath-", suffix=".tmp", dir=cache_dir)
    os.close(fd)
    command = [
        mvn,
        "-q",
        "-B",
        "-ntp",
        "-Dstyle.color=never",
        "-f",
        str(pom),
        "dependency:build-classpath",
        "-Dmdep.includeScope=runtime",
        f"-Dmdep.outputFile={scratch}",
    ]
    try:
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            output = exc.output if isinstance(exc.output, str) else ""
            raise RealKafkaError(
                f"Maven did not resolve Kafka {KAFKA_VERSION} within {timeout_s:.0f}s:\n"
                + output_tail(output)
            ) from exc
        if done.returncode != 0:
            raise RealKafkaError(
                f"Maven failed (exit {done.returncode}) to resolve Kafka {KAFKA_VERSION} "
                f"from {pom}:\n{output_tail(done.stdout)}"
            )
        entries = [e for e in Path(scratch).read_text(encoding="utf-8").strip().split(os.pathsep)]
        entries = [e for e in entries if e]
        broker_jar = f"kafka_2.13-{KAFKA_VERSION}.jar"
        if not any(os.path.basename(e) == broker_jar for e in entries):
            raise RealKafkaError(
                f"Maven's classpath for {pom} lacks {broker_jar}: {entries[:5]}..."
            )
        os.replace(scratch, cached)
        return entries
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
