"""The Kafka broker's runtime classpath, resolved by Maven and cached per release and pom.

The broker is ``org.apache.kafka:kafka_2.13`` at one of :data:`KAFKA_VERSIONS` (default
:data:`KAFKA_VERSION`; :func:`kafka_version` picks, reading ``$CONNMGR_KAFKA_VERSION``),
fetched by Maven through the tiny module ``benchmarks/kafka-broker/pom.xml``: the jars live in
Maven's local repository (``~/.m2``), and the resolved classpath is cached per release under
:func:`broker_cache_dir`. Nothing is downloaded into the source tree. Also here: finding a
``java`` new enough to run it.
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
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from connmgr_evidence.realkafka.errors import MissingTool, RealKafkaError, output_tail

__all__ = [
    "KAFKA_VERSION",
    "KAFKA_VERSIONS",
    "KAFKA_VERSION_ENV",
    "LOG4J_VERSIONS",
    "MIN_JAVA",
    "broker_cache_dir",
    "default_pom",
    "kafka_version",
    "require_java",
    "resolve_broker_classpath",
]

KAFKA_VERSION: Final = "4.4.0"
"""The default broker release; must equal ``kafka.version`` in ``benchmarks/kafka-broker/pom.xml``.

4.x because those brokers run on Java 17 (what this machine and CI have) and are KRaft-only,
so no ZooKeeper; 4.4.0 because it ships KIP-1242's identity check (``ApiVersions`` v5 with
``ClusterId`` and ``NodeId``), which ``tests/real_kafka/test_kip1242.py`` pins.
"""

LOG4J_VERSIONS: Final[Mapping[str, str]] = MappingProxyType({"4.4.0": "2.25.5", "4.3.1": "2.25.4"})
"""Release -> the log4j 2 version its ``kafka-server`` pom depends on (log4j-api, log4j-core).

The slf4j-to-log4j binding the pom adds must be that version: the binding sits nearer the
root of Maven's dependency tree than ``kafka-server``, so its log4j-core would win over the
broker's own. :func:`resolve_broker_classpath` checks the release's entry against the
``kafka-server`` pom Maven fetched.
"""

KAFKA_VERSIONS: Final[tuple[str, ...]] = tuple(LOG4J_VERSIONS)
"""The releases the tier runs, the default first: 4.3.1 stays for comparison (no identity
check: its ``ApiVersions`` stops at v4)."""

KAFKA_VERSION_ENV: Final = "CONNMGR_KAFKA_VERSION"
"""The environment variable choosing the release when no caller names one (read only by
:func:`kafka_version`)."""

MIN_JAVA: Final = 17
"""Kafka 4.x brokers need Java 17 or newer."""

# classpath.py -> realkafka -> connmgr_evidence -> evidence -> repository root
_REPO_ROOT: Final = Path(__file__).resolve().parents[3]
_MAVEN_TIMEOUT_S: Final = 900.0


def default_pom() -> Path:
    """``benchmarks/kafka-broker/pom.xml`` of the source tree this package is installed from."""
    return _REPO_ROOT / "benchmarks" / "kafka-broker" / "pom.xml"


def kafka_version(version: str | None = None) -> str:
    """The broker release to run: ``version`` if given, else ``$CONNMGR_KAFKA_VERSION`` if set
    and not blank, else :data:`KAFKA_VERSION`. The one place the variable is read.

    Raises :class:`RealKafkaError` naming the supported releases, and where the bad value came
    from, when it is not one of :data:`KAFKA_VERSIONS`.
    """
    source = "asked for"
    if version is None:
        from_env = os.environ.get(KAFKA_VERSION_ENV, "").strip()
        if not from_env:
            return KAFKA_VERSION
        version, source = from_env, f"from ${KAFKA_VERSION_ENV}"
    if version not in LOG4J_VERSIONS:
        raise RealKafkaError(
            f"Kafka {version!r} ({source}) is not a release the real Kafka tier runs: "
            f"choose one of {', '.join(KAFKA_VERSIONS)} (default {KAFKA_VERSION}); a new "
            "release needs its log4j version in connmgr_evidence.realkafka.classpath.LOG4J_VERSIONS"
        )
    return version


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
            f"{java} is Java {major}; Kafka 4.x brokers need Java {MIN_JAVA}+ "
            "(e.g. apt-get install openjdk-17-jdk, or put a newer java first on PATH)"
        )
    return java


def _parse_pom(pom: Path) -> tuple[ElementTree.Element, str]:
    """The pom's root element and its namespace prefix (``{uri}``, or empty)."""
    root = ElementTree.parse(pom).getroot()
    return root, root.tag.partition("}")[0] + "}" if root.tag.startswith("{") else ""


def _pom_property(pom: Path, name: str) -> str | None:
    root, namespace = _parse_pom(pom)
    node = root.find(f"{namespace}properties/{namespace}{name}")
    return node.text.strip() if node is not None and node.text else None


def _declared_log4j(server_pom: Path) -> str | None:
    """The ``log4j-core`` version a ``kafka-server`` pom (as published: literal versions)
    declares, or None when it names none."""
    root, namespace = _parse_pom(server_pom)
    for dependency in root.iter(f"{namespace}dependency"):
        artifact = dependency.findtext(f"{namespace}artifactId", "").strip()
        group = dependency.findtext(f"{namespace}groupId", "").strip()
        if (group, artifact) == ("org.apache.logging.log4j", "log4j-core"):
            return dependency.findtext(f"{namespace}version", "").strip() or None
    return None


def _check_log4j_binding(entries: list[str], version: str, log4j: str) -> None:
    """Raise :class:`RealKafkaError` unless ``kafka-server`` ``version``'s pom (beside its jar
    in Maven's local repository) depends on log4j-core ``log4j``, the binding's version."""
    server_jar = f"kafka-server-{version}.jar"
    jars = [Path(e) for e in entries if os.path.basename(e) == server_jar]
    if not jars:
        raise RealKafkaError(f"Maven's classpath for Kafka {version} lacks {server_jar}")
    server_pom = jars[0].with_suffix(".pom")
    try:
        declared = _declared_log4j(server_pom)
    except (OSError, ElementTree.ParseError) as exc:
        raise RealKafkaError(f"cannot read {server_pom} to check the log4j binding: {exc}") from exc
    if declared != log4j:
        raise RealKafkaError(
            f"kafka-server {version} depends on log4j-core {declared!r} but the slf4j binding "
            f"is pinned at {log4j!r}: set LOG4J_VERSIONS[{version!r}] (and, for the default "
            "release, log4j.version in the pom) to its version"
        )


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
    *,
    version: str | None = None,
    pom: Path | None = None,
    refresh: bool = False,
    timeout_s: float = _MAVEN_TIMEOUT_S,
) -> list[str]:
    """The runtime classpath (jar paths, broker first) of Kafka ``version``.

    ``version`` is chosen by :func:`kafka_version` (None: ``$CONNMGR_KAFKA_VERSION``, else
    :data:`KAFKA_VERSION`). Runs ``mvn -q dependency:build-classpath`` on ``pom`` (default
    :func:`default_pom`) with ``-Dkafka.version`` and ``-Dlog4j.version`` set for that release
    (:data:`LOG4J_VERSIONS`), which downloads what is missing into Maven's local repository,
    and caches the result in ``broker_cache_dir(version)`` under a hash of the pom's content
    and both versions; later calls with the same pom and release read the cache (unless
    ``refresh``, or a listed jar has disappeared) and run no Maven at all.

    Raises :class:`MissingTool` naming what to install when ``mvn`` or ``java`` is missing,
    and :class:`RealKafkaError` when the release is not supported, the pom is missing or does
    not pin :data:`KAFKA_VERSION` and its log4j version (so that running Maven on it by hand
    gives the default release, rightly bound), Maven fails or times out (with the tail of its
    output), or ``kafka-server``'s pom depends on another log4j than the binding's.
    """
    version = kafka_version(version)
    log4j = LOG4J_VERSIONS[version]
    pom = (pom or default_pom()).resolve()
    if not pom.is_file():
        raise RealKafkaError(
            f"{pom} not found: the real-Kafka tier needs the source tree's "
            "benchmarks/kafka-broker/pom.xml (install connmgr editable from the repository)"
        )
    pinned = _pom_property(pom, "kafka.version")
    if pinned != KAFKA_VERSION:
        raise RealKafkaError(
            f"{pom} pins kafka.version={pinned!r} but connmgr_evidence.realkafka.KAFKA_VERSION is "
            f"{KAFKA_VERSION!r}: change both together"
        )
    pinned_log4j = _pom_property(pom, "log4j.version")
    if pinned_log4j != LOG4J_VERSIONS[KAFKA_VERSION]:
        raise RealKafkaError(
            f"{pom} pins log4j.version={pinned_log4j!r} but Kafka {KAFKA_VERSION} needs "
            f"{LOG4J_VERSIONS[KAFKA_VERSION]!r} "
            "(connmgr_evidence.realkafka.classpath.LOG4J_VERSIONS): "
            "change both together"
        )
    # The release and its log4j are Maven arguments, not pom content: both key the cache too.
    digest = hashlib.sha256(pom.read_bytes() + f"\0{version}\0{log4j}".encode()).hexdigest()
    cache_dir = broker_cache_dir(version)
    cached = cache_dir / f"classpath-{digest[:16]}.txt"
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
        # User properties override the pom's <properties>: the same pom serves every release.
        f"-Dkafka.version={version}",
        f"-Dlog4j.version={log4j}",
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
                f"Maven did not resolve Kafka {version} within {timeout_s:.0f}s:\n"
                + output_tail(output)
            ) from exc
        if done.returncode != 0:
            raise RealKafkaError(
                f"Maven failed (exit {done.returncode}) to resolve Kafka {version} "
                f"from {pom}:\n{output_tail(done.stdout)}"
            )
        entries = [e for e in Path(scratch).read_text(encoding="utf-8").strip().split(os.pathsep)]
        entries = [e for e in entries if e]
        broker_jar = f"kafka_2.13-{version}.jar"
        if not any(os.path.basename(e) == broker_jar for e in entries):
            raise RealKafkaError(
                f"Maven's classpath for {pom} lacks {broker_jar}: {entries[:5]}..."
            )
        _check_log4j_binding(entries, version, log4j)
        os.replace(scratch, cached)
        return entries
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
