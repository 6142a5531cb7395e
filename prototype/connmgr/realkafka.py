"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) on 127.0.0.1, for tests.

The broker is the pinned :data:`KAFKA_VERSION` of ``org.apache.kafka:kafka_2.13``, fetched by
Maven through the tiny module ``benchmarks/kafka-broker/pom.xml``: the jars live in Maven's
local repository (``~/.m2``), and the resolved classpath is cached per pom content under
``$XDG_CACHE_HOME/connmgr/kafka-broker/<version>/`` (default ``~/.cache/...``). Nothing is
downloaded into the source tree.

:class:`KafkaCluster` formats one temporary data directory per node with Kafka's own
``kafka.tools.StorageTool`` (static quorum: every node lists all controllers in
``controller.quorum.voters``, so ``format`` takes no ``--standalone``/``--initial-controllers``
flag), starts ``kafka.Kafka server.properties`` per node, and waits until *every* broker's
Metadata lists *all* brokers. Node ids are ``1..N`` like :class:`connmgr.embedded.MockCluster`,
and the API mirrors it where it can: ``bootstrap_servers``, ``endpoints()``, ``listeners()``,
``broker_ids``, ``create_topic_with_leaders``; a mock's ``set_coordinator`` becomes
:meth:`KafkaCluster.group_for_coordinator`, which *finds* a group name the real broker places
on the wanted coordinator.

Talking to the cluster: the helpers here speak the Kafka protocol through aiokafka's own
connection and request classes (one short-lived connection per question, closed before the
call returns), so that a test's kernel-socket check sees only the sockets of the client under
test. The public API is synchronous; from asyncio code call it via ``asyncio.to_thread`` (a
direct call also works -- it runs on a helper thread -- but blocks the caller's loop).

Lifecycle: ``stop()`` sends SIGTERM to every node, waits, SIGKILLs what is left, and removes
the temporary directory. It is idempotent and also runs at interpreter exit (and when the
object is garbage-collected). A cluster left behind by a process that died without running
its exit hooks (SIGKILL, a CI timeout) is reaped by the next :meth:`KafkaCluster.start`.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
import xml.etree.ElementTree as ElementTree
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Literal, Self, TypeVar

import aiokafka.errors as kafka_errors
import psutil
from aiokafka.conn import create_conn
from aiokafka.protocol.admin import AlterPartitionReassignmentsRequest, CreateTopicsRequest
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.types import Array, Int8, Int16, Int32, Schema, String

from connmgr.errors import ConnMgrError

__all__ = [
    "KAFKA_VERSION",
    "TRANSACTION_STATE_TOPIC",
    "CoordinatorKind",
    "KafkaCluster",
    "MissingTool",
    "RealKafkaError",
    "broker_cache_dir",
    "default_pom",
    "java_string_hash",
    "offsets_partition_for",
    "resolve_broker_classpath",
]

KAFKA_VERSION: Final = "4.3.1"
"""The pinned broker release; must equal ``kafka.version`` in ``benchmarks/kafka-broker/pom.xml``.

4.x because those brokers run on Java 17 (what this machine and CI have) and are KRaft-only,
so no ZooKeeper; 4.3.1 because it is a patch release of the newest line we verified resolves.
"""

HOST: Final = "127.0.0.1"
"""Where every listener binds and what every broker advertises."""

MIN_JAVA: Final = 17
"""Kafka 4.x brokers need Java 17 or newer."""

OFFSETS_TOPIC: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"

CoordinatorKind = Literal["group", "transaction"]
"""What a coordinator coordinates: a consumer group or a transactional id (as the mock's
``set_coordinator`` names them)."""

_COORDINATOR_TOPICS: Final[Mapping[str, str]] = {
    "group": OFFSETS_TOPIC,
    "transaction": TRANSACTION_STATE_TOPIC,
}
"""The internal topic whose partition leader coordinates a key of each kind."""
_COORDINATOR_KEY_TYPES: Final[Mapping[str, int]] = {"group": 0, "transaction": 1}
"""FindCoordinator's key_type for each kind."""

_REPO_ROOT: Final = Path(__file__).resolve().parents[2]
_MAVEN_TIMEOUT_S: Final = 900.0
_FORMAT_TIMEOUT_S: Final = 60.0
_POLL_S: Final = 0.25
_PROBE_TIMEOUT_MS: Final = 3_000
_LOG_TAIL_LINES: Final = 40
_WORKDIR_PREFIX: Final = "connmgr-kafka-"
_OWNER_FILE: Final = "owner.json"

# Kafka error codes the helpers wait out rather than report (aiokafka.errors has the names).
_COORDINATOR_NOT_AVAILABLE: Final = 15
_COORDINATOR_LOAD_IN_PROGRESS: Final = 14
_NOT_COORDINATOR: Final = 16
_ELECTION_NOT_NEEDED: Final = 84
_RETRIABLE_COORDINATOR_ERRORS: Final = frozenset(
    {_COORDINATOR_NOT_AVAILABLE, _COORDINATOR_LOAD_IN_PROGRESS, _NOT_COORDINATOR}
)

_T = TypeVar("_T")


class RealKafkaError(ConnMgrError):
    """The real cluster could not be resolved, started, queried or shaped as asked.

    The message says what went wrong and, where a process failed, ends with the tail of its
    output or log.
    """


class MissingTool(RealKafkaError):
    """``java`` or ``mvn`` is not installed (or too old); the message names what to install."""


# -- Maven: the broker's classpath --------------------------------------------------------------


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


def _require_java() -> str:
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


def _tail(text: str, lines: int = _LOG_TAIL_LINES) -> str:
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    (no output)"


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
                + _tail(output)
            ) from exc
        if done.returncode != 0:
            raise RealKafkaError(
                f"Maven failed (exit {done.returncode}) to resolve Kafka {KAFKA_VERSION} "
                f"from {pom}:\n{_tail(done.stdout)}"
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


# -- group coordinator placement -----------------------------------------------------------------


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text``: over UTF-16 code units, in signed 32 bits."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def offsets_partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``, as the broker computes it.

    ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` (GroupCoordinatorService);
    Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 rather than overflowing.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    value = java_string_hash(group)
    return (0 if value == -(1 << 31) else abs(value)) % partitions


# -- Kafka protocol helpers ----------------------------------------------------------------------
# aiokafka 0.14 has no ElectLeaders request; version 1 (the first with an election type) is
# enough: 4.x brokers accept versions 0-2. Field layout from ElectLeadersRequest.json.


class _ElectLeadersResponseV1(Response):  # type: ignore[misc]
    API_KEY = 43
    API_VERSION = 1
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("error_code", Int16),
        (
            "replica_election_results",
            Array(
                ("topic", String("utf-8")),
                (
                    "partition_result",
                    Array(
                        ("partition_id", Int32),
                        ("error_code", Int16),
                        ("error_message", String("utf-8")),
                    ),
                ),
            ),
        ),
    )


class _ElectLeadersRequestV1(RequestStruct):  # type: ignore[misc]
    API_KEY = 43
    API_VERSION = 1
    RESPONSE_TYPE = _ElectLeadersResponseV1
    SCHEMA = Schema(
        ("election_type", Int8),
        ("topic_partitions", Array(("topic", String("utf-8")), ("partitions", Array(Int32)))),
        ("timeout_ms", Int32),
    )


class _ElectLeadersRequest(Request[_ElectLeadersRequestV1]):  # type: ignore[misc]
    API_KEY = 43
    PREFERRED = 0

    def __init__(self, topic: str, partitions: Sequence[int], timeout_ms: int) -> None:
        self._topic = topic
        self._partitions = list(partitions)
        self._timeout_ms = timeout_ms

    def build(self, request_struct_class: type[Any]) -> Any:
        return request_struct_class(
            self.PREFERRED, [(self._topic, self._partitions)], self._timeout_ms
        )


def _error_name(code: int) -> str:
    return f"{kafka_errors.for_code(code).__name__}({code})"


@contextlib.asynccontextmanager
async def _connection(port: int, timeout_ms: int = _PROBE_TIMEOUT_MS) -> AsyncIterator[Any]:
    """One aiokafka connection to the broker at ``HOST:port``, closed (socket gone) on exit."""
    conn = await create_conn(
        HOST, port, request_timeout_ms=timeout_ms, client_id="connmgr-realkafka"
    )
    try:
        yield conn
    finally:
        conn.close()
        # The transport releases its socket from a loop callback: let it run before returning,
        # so a caller's kernel-socket check right after never sees it.
        await asyncio.sleep(0)
        await asyncio.sleep(0)


async def _metadata(port: int, topics: list[str] | None) -> dict[str, Any]:
    async with _connection(port) as conn:
        response = await conn.send(MetadataRequest(topics, allow_auto_topic_creation=False))
    result: dict[str, Any] = response.to_object()
    return result


_PROBE_ERRORS: Final = (OSError, asyncio.TimeoutError, kafka_errors.KafkaError)


def _run_sync(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run the coroutine ``factory()`` to completion from synchronous code, in any thread.

    In a thread without a running loop this is :func:`asyncio.run`; in a thread that runs a
    loop (a direct call from a coroutine) the coroutine runs on a helper thread's own loop,
    since a loop cannot be re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="realkafka") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


# -- processes ----------------------------------------------------------------------------------


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.directory / "stdout.log"

    def tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        parts: list[str] = []
        for path in (self.stdout_file, self.log_file):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if text.strip():
                parts.append(f"  {path.name}:\n{_tail(text, lines)}")
        return "\n".join(parts) or "  (no output or log)"

    def bind_failure(self) -> str | None:
        """``host:port`` the node's log says it failed to bind, or None (read after exit)."""
        text = ""
        for path in (self.stdout_file, self.log_file):
            with contextlib.suppress(OSError):
                text += path.read_text(encoding="utf-8", errors="replace")
        match = re.search(r"failed to bind to (\S+?):(\d+)", text)
        if match:
            return f"{match[1]}:{match[2]}"
        if "Address already in use" in text or "BindException" in text:
            return f"{HOST}:{self.port} or {HOST}:{self.controller_port}"
        return None


@dataclass
class _Resources:
    """What a cluster must release; shared with its finalizer, which must not hold the cluster."""

    workdir: Path | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    keep_workdir: bool = False

    def release(self, timeout_s: float) -> list[int]:
        """Stop the processes and remove the work directory; the pids that needed SIGKILL."""
        killed = _terminate(self.processes, timeout_s)
        self.processes = []
        if self.workdir is not None:
            if self.keep_workdir:
                # Kept for reading: without an owner file the reaper leaves it alone.
                with contextlib.suppress(FileNotFoundError):
                    (self.workdir / _OWNER_FILE).unlink()
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None
        return killed


def _terminate(processes: Iterable[subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
    """SIGTERM every live process, wait up to ``timeout_s`` for all, then SIGKILL the rest.

    All are signalled before any is waited for: the nodes shut down in parallel, which
    matters because a combined node's Raft client, once the quorum is going away, waits a
    fixed 5 s for its graceful shutdown. Returns the pids that had to be killed.
    """
    killed: list[int] = []
    live = [p for p in processes if p.poll() is None]
    for process in live:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for process in live:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
                killed.append(process.pid)
    for process in live:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    return killed


def _reserve_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on ``HOST`` a moment ago.

    All are bound at once (port 0: the kernel picks) and only then released, so they differ.
    A port can still be taken before the broker binds it; start() detects that and retries.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((HOST, 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _owner_alive(owner: Mapping[str, Any]) -> bool:
    try:
        process = psutil.Process(int(owner["pid"]))
        started = float(process.create_time())
        return abs(started - float(owner["create_time"])) < 1.0
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def _await_death(process: psutil.Process, timeout_s: float) -> None:
    """Wait until a process that is not our child is gone or a zombie (dead, but its new
    parent has not reaped it yet -- in a container, pid 1 may never do so)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def _reap_orphans(base: Path) -> list[Path]:
    """Stop clusters whose owning process died without stopping them; remove their dirs.

    A node is killed only if its pid still runs a command line naming that cluster's
    directory, so a recycled pid is never touched.
    """
    reaped: list[Path] = []
    for workdir in base.glob(f"{_WORKDIR_PREFIX}*"):
        try:
            owner = json.loads((workdir / _OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not ours, or still being set up
        if not isinstance(owner, dict) or _owner_alive(owner):
            continue
        for pid in owner.get("nodes", []):
            with contextlib.suppress(psutil.Error, TypeError, ValueError):
                process = psutil.Process(int(pid))
                if any(str(workdir) in part for part in process.cmdline()):
                    process.kill()
                    _await_death(process, 10.0)
        shutil.rmtree(workdir, ignore_errors=True)
        reaped.append(workdir)
    return reaped


class _PortTaken(RealKafkaError):
    """A node could not bind a reserved port (another process took it first)."""


_LOG4J2: Final = """\
# Written by connmgr.realkafka: INFO to one file per node, nothing on the console.
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


# -- the cluster --------------------------------------------------------------------------------


class KafkaCluster:
    """``brokers`` real Kafka nodes (combined broker+controller, KRaft) on 127.0.0.1.

    Node ids are ``1..brokers``; each node has a client listener (``PLAINTEXT``, advertised as
    ``127.0.0.1:port``) and a controller listener, all on distinct free ports. Topics are not
    auto-created; internal topics and new topics default to replication ``min(3, brokers)``;
    ``group.initial.rebalance.delay.ms=0`` so a group's first join is not held back 3 s.

    Arguments:
        brokers: number of nodes, 1..9 (every node is a controller; 3 is the usual quorum).
        heap_mb: each JVM's maximum heap (-Xmx).
        offsets_partitions: ``offsets.topic.num.partitions``; default ``2 * brokers`` (the
            broker default, 50, only slows coordinator start-up here).
        properties: extra ``server.properties`` entries, applied last (they win).
        jvm_options: extra JVM options, after the defaults.
        keep_workdir: keep the temporary directory (data and logs) after ``stop()``.

    Use as a context manager (``with KafkaCluster() as cluster:``) or call :meth:`start` and
    :meth:`stop`. Thread-safe: start and stop serialise on a lock; the query helpers open
    their own connections.
    """

    def __init__(
        self,
        brokers: int = 3,
        *,
        heap_mb: int = 384,
        offsets_partitions: int | None = None,
        properties: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (),
        keep_workdir: bool = False,
    ) -> None:
        if not isinstance(brokers, int) or isinstance(brokers, bool) or not 1 <= brokers <= 9:
            raise RealKafkaError(f"brokers must be an int in 1..9, got {brokers!r}")
        if not isinstance(heap_mb, int) or heap_mb < 128:
            raise RealKafkaError(f"heap_mb must be an int >= 128, got {heap_mb!r}")
        offsets = 2 * brokers if offsets_partitions is None else offsets_partitions
        if not isinstance(offsets, int) or offsets < 1:
            raise RealKafkaError(f"offsets_partitions must be an int >= 1, got {offsets!r}")
        self._broker_count = brokers
        self._heap_mb = heap_mb
        self._offsets_partitions = offsets
        self._extra_properties = dict(properties or {})
        self._jvm_options = list(jvm_options)
        self._lock = threading.RLock()
        self._nodes: list[_Node] = []
        self._state = "new"
        self._resources = _Resources(keep_workdir=keep_workdir)
        # Runs stop's cleanup at interpreter exit, or when the cluster is collected unstopped.
        self._finalizer = weakref.finalize(self, self._resources.release, 10.0)
        self.start_seconds: float | None = None
        """Wall time of the last successful :meth:`start`, classpath resolution included."""
        self.timings: dict[str, float] = {}
        """Seconds per start phase: classpath, format, brokers_ready, coordinators_ready."""
        self.cluster_id: str | None = None
        self.stop_seconds: float | None = None
        """Wall time of :meth:`stop` (None until stopped)."""
        self.killed: tuple[int, ...] = ()
        """Broker ids that :meth:`stop` had to SIGKILL after its timeout."""

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, timeout_s: float = 120.0) -> Self:
        """Resolve the broker, format storage, start the nodes, and wait until they serve.

        Returns when every broker's Metadata lists all brokers and ``__consumer_offsets``
        exists with a leader for every partition (so group coordinators answer at once).
        ``timeout_s`` bounds everything after classpath resolution (which has its own, long,
        Maven timeout). Records :attr:`start_seconds` and :attr:`timings`.

        Raises :class:`MissingTool` (java/mvn), or :class:`RealKafkaError` when a node fails
        to format or dies during start (with the tail of its log), a port is taken twice in a
        row, or the timeout passes (saying which brokers were seen). Whatever was started is
        stopped and removed before raising. A cluster starts once: a stopped one stays stopped.
        """
        with self._lock:
            if self._state != "new":
                raise RealKafkaError(f"start() on a {self._state} cluster: create a new one")
            self._state = "starting"
            began = time.monotonic()
            try:
                java = _require_java()
                classpath = resolve_broker_classpath()
                self.timings["classpath"] = time.monotonic() - began
                _reap_orphans(Path(tempfile.gettempdir()))
                deadline = time.monotonic() + timeout_s
                try:
                    self._launch(java, classpath, deadline)
                except _PortTaken:
                    # Another process grabbed a reserved port between reservation and bind;
                    # fresh ports almost surely do not collide again.
                    self._resources.release(10.0)
                    self._launch(java, classpath, deadline)
            except BaseException:
                self._state = "failed"
                self._resources.release(10.0)
                raise
            self._state = "running"
            self.start_seconds = time.monotonic() - began
            return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every node, SIGKILL those still alive after ``timeout_s``, remove the data.

        A 3-node cluster normally takes about 6 s: the brokers are done in under a second,
        then the last controllers wait out Kafka's fixed 5 s graceful Raft shutdown. Records
        :attr:`stop_seconds` and :attr:`killed`. Idempotent, and safe on a cluster that never
        started or failed to.
        """
        with self._lock:
            if self._state == "stopped":
                return
            began = time.monotonic()
            by_pid = {pid: broker for broker, pid in self.pids().items()}
            killed = self._resources.release(timeout_s)
            self.killed = tuple(sorted(by_pid.get(pid, -1) for pid in killed))
            self.stop_seconds = time.monotonic() - began
            self._state = "stopped"

    def __enter__(self) -> Self:
        if self._state == "new":
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f" bootstrap={self.bootstrap_servers!r}" if self._nodes else ""
        took = f" started_in={self.start_seconds:.1f}s" if self.start_seconds is not None else ""
        return (
            f"KafkaCluster(brokers={self._broker_count}, state={self._state}, "
            f"kafka={KAFKA_VERSION}{where}{took})"
        )

    # -- start-up steps -------------------------------------------------------------------------

    def _launch(self, java: str, classpath: list[str], deadline: float) -> None:
        workdir = Path(tempfile.mkdtemp(prefix=f"{_WORKDIR_PREFIX}{os.getpid()}-"))
        self._resources.workdir = workdir
        ports = _reserve_ports(2 * self._broker_count)
        self._nodes = [
            _Node(
                node_id=i + 1,
                port=ports[i],
                controller_port=ports[self._broker_count + i],
                directory=workdir / f"node-{i + 1}",
            )
            for i in range(self._broker_count)
        ]
        (workdir / "log4j2.properties").write_text(_LOG4J2, encoding="utf-8")
        self.cluster_id = _random_cluster_id()
        # Owner first (no nodes yet), so even a crash during start leaves a reapable directory.
        self._write_owner(workdir)
        for node in self._nodes:
            (node.directory / "tmp").mkdir(parents=True)
            node.properties_file.write_text(self._server_properties(node), encoding="utf-8")

        t = time.monotonic()
        self._format(java, classpath, deadline)
        self.timings["format"] = time.monotonic() - t

        t = time.monotonic()
        for node in self._nodes:
            node.process = self._spawn(
                java, classpath, node, self._jvm_args(node), "kafka.Kafka", node.properties_file
            )
            self._resources.processes.append(node.process)
        self._write_owner(workdir)
        _run_sync(lambda: self._await_brokers(deadline))
        self.timings["brokers_ready"] = time.monotonic() - t

        t = time.monotonic()
        _run_sync(lambda: self._await_offsets_topic(deadline))
        self.timings["coordinators_ready"] = time.monotonic() - t

    def _server_properties(self, node: _Node) -> str:
        replication = min(3, self._broker_count)
        voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in self._nodes)
        settings: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "listeners": (
                f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{HOST}:{node.port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            # A static quorum: format needs no --standalone/--initial-controllers.
            "controller.quorum.voters": voters,
            "log.dirs": str(node.directory / "data"),
            "num.partitions": "1",
            "default.replication.factor": str(replication),
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": str(replication),
            "offsets.topic.num.partitions": str(self._offsets_partitions),
            "transaction.state.log.replication.factor": str(replication),
            "transaction.state.log.min.isr": str(min(2, replication)),
            "transaction.state.log.num.partitions": str(self._broker_count),
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": str(min(2, replication)),
            "share.coordinator.state.topic.num.partitions": str(self._broker_count),
            "group.initial.rebalance.delay.ms": "0",
            # Small and few: a test cluster on 2 cores.
            "log.segment.bytes": str(1024 * 1024),
            "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
            "log.cleaner.threads": "1",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.replica.fetchers": "1",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "2",
            # Unfence a new broker within half a second of its registration, not two.
            "broker.heartbeat.interval.ms": "500",
        }
        settings.update(self._extra_properties)
        return "".join(f"{key}={value}\n" for key, value in settings.items())

    def _jvm_args(self, node: _Node) -> list[str]:
        return [
            f"-Xmx{self._heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            # C1 only: start-up and CPU matter here, peak throughput does not.
            "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError",
            "-XX:-UsePerfData",  # no hsperfdata files left in /tmp
            "-Djava.awt.headless=true",
            # Native libraries (snappy, zstd) unpack here, removed with the cluster.
            f"-Djava.io.tmpdir={node.directory / 'tmp'}",
            f"-Dkafka.logs.dir={node.directory}",
            f"-Dlog4j2.configurationFile={node.directory.parent / 'log4j2.properties'}",
            *self._jvm_options,
        ]

    def _spawn(
        self,
        java: str,
        classpath: list[str],
        node: _Node,
        jvm_args: list[str],
        main_class: str,
        *args: object,
        output: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        out: IO[bytes]
        with open(output or node.stdout_file, "ab") as out:
            # The child gets the descriptor; ours is closed on leaving the block.
            return subprocess.Popen(
                [java, *jvm_args, "-cp", os.pathsep.join(classpath), main_class, *map(str, args)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=node.directory,
                # Own session: a terminal's Ctrl-C reaches only us, and we stop the nodes
                # (SIGTERM, then the data removed) instead of every JVM dying on its own.
                start_new_session=True,
            )

    def _format(self, java: str, classpath: list[str], deadline: float) -> None:
        jvm = ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"]
        jvm.append(
            f"-Dlog4j2.configurationFile={self._nodes[0].directory.parent / 'log4j2.properties'}"
        )
        formatting: list[tuple[_Node, subprocess.Popen[bytes], Path]] = []
        try:
            for node in self._nodes:
                output = node.directory / "format.log"
                process = self._spawn(
                    java,
                    classpath,
                    node,
                    [
                        *jvm,
                        f"-Dkafka.logs.dir={node.directory}",
                        f"-Djava.io.tmpdir={node.directory / 'tmp'}",
                    ],
                    "kafka.tools.StorageTool",
                    "format",
                    "--cluster-id",
                    self.cluster_id,
                    "--config",
                    node.properties_file,
                    output=output,
                )
                formatting.append((node, process, output))
            for node, process, output in formatting:
                timeout = min(_FORMAT_TIMEOUT_S, max(1.0, deadline - time.monotonic()))
                try:
                    code = process.wait(timeout=timeout)
                except subprocess.TimeoutExpired as exc:
                    raise RealKafkaError(
                        f"formatting node {node.node_id}'s storage took over {timeout:.0f}s:\n"
                        + _tail(output.read_text(encoding="utf-8", errors="replace"))
                    ) from exc
                if code != 0:
                    raise RealKafkaError(
                        f"kafka.tools.StorageTool format failed for node {node.node_id} "
                        f"(exit {code}):\n"
                        + _tail(output.read_text(encoding="utf-8", errors="replace"))
                    )
        finally:
            _terminate([p for _, p, _ in formatting], 5.0)

    def _write_owner(self, workdir: Path) -> None:
        owner = {
            "pid": os.getpid(),
            "create_time": psutil.Process().create_time(),
            "nodes": [n.process.pid for n in self._nodes if n.process is not None],
        }
        (workdir / _OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")

    def _check_alive(self) -> None:
        """Raise, with the log tail, if any node has exited."""
        for node in self._nodes:
            if node.process is None:
                continue
            code = node.process.poll()
            if code is None:
                continue
            address = node.bind_failure()
            if address is not None:
                raise _PortTaken(
                    f"node {node.node_id} could not bind {address}: address already in use "
                    f"(another process took it after it was reserved):\n{node.tail()}"
                )
            raise RealKafkaError(
                f"Kafka node {node.node_id} exited with code {code}"
                f"{' during start' if self._state == 'starting' else ''}:\n{node.tail()}"
            )

    def check_alive(self) -> None:
        """Raise :class:`RealKafkaError` (with the log tail) if any node has exited."""
        self._check_alive()

    async def _await_brokers(self, deadline: float) -> None:
        want = set(self.broker_ids)
        seen: dict[int, set[int]] = {}
        errors: dict[int, str] = {}
        while True:
            self._check_alive()
            for node in self._nodes:
                try:
                    metadata = await _metadata(node.port, [])
                except _PROBE_ERRORS as exc:
                    errors[node.node_id] = f"{type(exc).__name__}: {exc}"
                    continue
                errors.pop(node.node_id, None)
                seen[node.node_id] = {int(b["node_id"]) for b in metadata["brokers"]}
            if all(seen.get(i) == want for i in want):
                return
            if time.monotonic() >= deadline:
                views = ", ".join(
                    f"{i}: {sorted(seen[i]) if i in seen else errors.get(i, 'no answer')}"
                    for i in sorted(want)
                )
                tails = "\n".join(f"node {n.node_id}:\n{n.tail(10)}" for n in self._nodes)
                raise RealKafkaError(
                    f"timed out waiting for {len(want)} brokers to register; each broker's "
                    f"view of the live brokers: {views}\n{tails}"
                )
            await asyncio.sleep(_POLL_S)

    async def _await_offsets_topic(self, deadline: float) -> None:
        """Create ``__consumer_offsets`` (a FindCoordinator does) and wait for all its leaders."""
        port = self._nodes[0].port
        while True:
            self._check_alive()
            with contextlib.suppress(*_PROBE_ERRORS):
                async with _connection(port) as conn:
                    await conn.send(FindCoordinatorRequest("connmgr-warm-up", 0))
                ready = True
                for node in self._nodes:
                    leaders = _partition_leaders(await _metadata(node.port, [OFFSETS_TOPIC]))
                    partitions = leaders.get(OFFSETS_TOPIC, {})
                    if (
                        len(partitions) != self._offsets_partitions
                        or min(partitions.values(), default=-1) < 0
                    ):
                        ready = False
                        break
                if ready:
                    return
            if time.monotonic() >= deadline:
                raise RealKafkaError(
                    f"timed out waiting for {OFFSETS_TOPIC} to get a leader for each of its "
                    f"{self._offsets_partitions} partitions"
                )
            await asyncio.sleep(_POLL_S)

    # -- where things are -----------------------------------------------------------------------

    def _require_started(self) -> list[_Node]:
        if not self._nodes:
            raise RealKafkaError(f"{self!r} has no brokers yet: call start() first")
        return self._nodes

    @property
    def running(self) -> bool:
        return self._state == "running"

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """``(1, ..., brokers)``; known before start."""
        return tuple(range(1, self._broker_count + 1))

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of every broker's client listener, comma-separated, by id."""
        return ",".join(f"{HOST}:{n.port}" for n in self._require_started())

    def endpoints(self) -> dict[int, tuple[str, int]]:
        """Broker id -> the (host, port) it advertises (its client listener)."""
        return {n.node_id: (HOST, n.port) for n in self._require_started()}

    def listeners(self) -> dict[int, tuple[str, int]]:
        """Broker id -> the (host, port) its client listener is bound to.

        The same as :meth:`endpoints` here (every broker advertises where it listens); the
        controller listeners are left out, since clients never dial them. This is what
        :func:`connmgr.aio.kernel.verify_against_kernel` wants.
        """
        return self.endpoints()

    @property
    def workdir(self) -> Path | None:
        """The temporary directory holding every node's data and logs, while it exists."""
        return self._resources.workdir

    def log_file(self, broker_id: int) -> Path:
        """The broker's log4j log (``server.log``), while the work directory exists."""
        return self._node(broker_id).log_file

    def pids(self) -> dict[int, int]:
        """Broker id -> JVM process id, for nodes that were started."""
        return {n.node_id: n.process.pid for n in self._nodes if n.process is not None}

    def _node(self, broker_id: int) -> _Node:
        for node in self._require_started():
            if node.node_id == broker_id:
                return node
        raise RealKafkaError(f"no broker {broker_id!r}: the brokers are {list(self.broker_ids)}")

    def _require_running(self) -> list[_Node]:
        if self._state != "running":
            raise RealKafkaError(f"{self!r} is not running")
        return self._nodes

    # -- asking the cluster ---------------------------------------------------------------------

    def api_versions(self, broker_id: int = 1) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version the broker accepts (its ApiVersions answer)."""
        node = self._node(broker_id)

        async def ask() -> dict[int, tuple[int, int]]:
            async with _connection(node.port) as conn:
                return dict(conn._versions)

        return _run_sync(ask)

    def leaders(self, topic: str, broker_id: int | None = None) -> dict[int, int]:
        """Partition -> leader broker id of ``topic`` per ``broker_id``'s metadata (default:
        the first broker); -1 for a partition without a leader; {} for an unknown topic."""
        node = self._node(broker_id) if broker_id is not None else self._require_running()[0]

        async def ask() -> dict[int, int]:
            return _partition_leaders(await _metadata(node.port, [topic])).get(topic, {})

        return _run_sync(ask)

    def create_topic_with_leaders(
        self,
        name: str,
        leaders: Sequence[int],
        *,
        replication_factor: int | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Create ``name`` with partition ``i`` led by ``leaders[i]``, and wait until it is.

        Each partition's replicas are ``leaders[i]`` first (the preferred leader) then the
        next brokers by id, wrapping around, ``replication_factor`` in all (default
        ``min(3, brokers)``). Returns once *every* broker's metadata shows every partition
        led by the broker asked for; if a partition came up led by another broker (a replica
        was not in sync yet), a preferred-leader election is requested for it.

        Raises :class:`RealKafkaError` for an unknown broker id, an empty ``leaders``, a bad
        replication factor, a broker error (e.g. the topic exists; its name is given), or when
        ``timeout_s`` passes first (showing the leaders seen).
        """
        nodes = self._require_running()
        wanted = list(leaders)
        if not wanted:
            raise RealKafkaError("leaders must name at least one broker (one per partition)")
        for leader in wanted:
            if (
                isinstance(leader, bool)
                or not isinstance(leader, int)
                or leader not in self.broker_ids
            ):
                raise RealKafkaError(
                    f"leader {leader!r} is not a broker id; the brokers are {list(self.broker_ids)}"
                )
        replication = (
            min(3, self._broker_count) if replication_factor is None else replication_factor
        )
        if not 1 <= replication <= self._broker_count:
            raise RealKafkaError(
                f"replication_factor must be in 1..{self._broker_count}, got {replication_factor!r}"
            )
        ids = list(self.broker_ids)
        assignment = [
            (p, [ids[(ids.index(leader) + k) % len(ids)] for k in range(replication)])
            for p, leader in enumerate(wanted)
        ]
        want = dict(enumerate(wanted))
        deadline = time.monotonic() + timeout_s

        async def create_and_wait() -> None:
            async with _connection(nodes[0].port, int(timeout_s * 1000)) as conn:
                response = await conn.send(
                    CreateTopicsRequest(
                        [(name, -1, -1, assignment, [])], int(timeout_s * 1000), False
                    )
                )
            for result in response.to_object()["topic_errors"]:
                if result["error_code"]:
                    raise RealKafkaError(
                        f"creating topic {name!r} failed: {_error_name(result['error_code'])}"
                        f" {result.get('error_message') or ''}".rstrip()
                    )
            await self._await_leaders(name, want, deadline)

        _run_sync(create_and_wait)

    async def _await_leaders(self, topic: str, want: dict[int, int], deadline: float) -> None:
        elect_at = time.monotonic() + 2.0
        election_note = ""
        while True:
            views: dict[int, dict[int, int]] = {}
            for node in self._nodes:
                with contextlib.suppress(*_PROBE_ERRORS):
                    views[node.node_id] = _partition_leaders(
                        await _metadata(node.port, [topic])
                    ).get(topic, {})
            if len(views) == len(self._nodes) and all(v == want for v in views.values()):
                return
            now = time.monotonic()
            # Leaders elected, but not the ones asked for: ask for the preferred ones.
            wrong = sorted(
                {
                    p
                    for view in views.values()
                    for p, leader in view.items()
                    if leader >= 0 and leader != want.get(p)
                }
            )
            if wrong and now >= elect_at:
                election_note = await self._elect_preferred(topic, wrong)
                elect_at = now + 2.0
            if now >= deadline:
                raise RealKafkaError(
                    f"topic {topic!r}: wanted leaders {want}, brokers' views {views}"
                    + (f"; last election: {election_note}" if election_note else "")
                )
            await asyncio.sleep(_POLL_S)

    async def _elect_preferred(self, topic: str, partitions: list[int]) -> str:
        """Ask for preferred-leader election of ``partitions``; a summary of the answer."""
        try:
            async with _connection(self._nodes[0].port) as conn:
                response = await conn.send(_ElectLeadersRequest(topic, partitions, 10_000))
        except _PROBE_ERRORS as exc:
            return f"{type(exc).__name__}: {exc}"
        except (NotImplementedError, kafka_errors.IncompatibleBrokerVersion) as exc:
            raise RealKafkaError(f"the broker does not take ElectLeaders v1: {exc}") from exc
        answer = response.to_object()
        codes = [
            (r["partition_id"], r["error_code"])
            for t in answer["replica_election_results"]
            for r in t["partition_result"]
        ]
        return ", ".join(
            f"p{p}: {'ok' if c in (0, _ELECTION_NOT_NEEDED) else _error_name(c)}" for p, c in codes
        ) or _error_name(answer["error_code"])

    def elect_preferred_leaders(self, topic: str, partitions: Sequence[int]) -> dict[int, int]:
        """Request preferred-leader election; partition -> Kafka error code (0: elected,
        84: not needed, the preferred replica already leads)."""
        node = self._require_running()[0]

        async def ask() -> dict[int, int]:
            async with _connection(node.port) as conn:
                response = await conn.send(_ElectLeadersRequest(topic, partitions, 10_000))
            return {
                r["partition_id"]: r["error_code"]
                for t in response.to_object()["replica_election_results"]
                for r in t["partition_result"]
            }

        return _run_sync(ask)

    def coordinator_for(self, group: str, timeout_s: float = 30.0) -> int:
        """The broker coordinating consumer group ``group`` (FindCoordinator, key type group).

        Waits out COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / NOT_COORDINATOR (the offsets
        topic being created or moving) up to ``timeout_s``; other errors raise at once.
        """
        nodes = self._require_running()

        async def ask() -> int:
            deadline = time.monotonic() + timeout_s
            last = "no answer"
            while True:
                try:
                    async with _connection(nodes[0].port) as conn:
                        response = await conn.send(FindCoordinatorRequest(group, 0))
                except _PROBE_ERRORS as exc:
                    last = f"{type(exc).__name__}: {exc}"
                else:
                    code = int(response.error_code)
                    if code == 0:
                        return int(response.coordinator_id)
                    if code not in _RETRIABLE_COORDINATOR_ERRORS:
                        raise RealKafkaError(
                            f"FindCoordinator({group!r}) failed: {_error_name(code)}"
                        )
                    last = _error_name(code)
                if time.monotonic() >= deadline:
                    raise RealKafkaError(
                        f"no coordinator for group {group!r} within {timeout_s}s: {last}"
                    )
                await asyncio.sleep(_POLL_S)

        return _run_sync(ask)

    def group_for_coordinator(self, broker_id: int, prefix: str = "g", limit: int = 1000) -> str:
        """The first of ``prefix-0``, ``prefix-1``, ... (up to ``limit`` names) whose group
        coordinator is ``broker_id`` -- the real cluster's stand-in for a mock's
        ``set_coordinator``.

        Deterministic for a given placement of ``__consumer_offsets`` leaders: a name is
        picked by the broker's own rule (:func:`offsets_partition_for`, then that partition's
        leader) and confirmed with FindCoordinator. Raises :class:`RealKafkaError` when
        ``broker_id`` leads no offsets partition or no name within ``limit`` qualifies.
        """
        self._node(broker_id)
        nodes = self._require_running()
        offsets = _run_sync(lambda: _metadata(nodes[0].port, [OFFSETS_TOPIC]))
        leaders = _partition_leaders(offsets).get(OFFSETS_TOPIC, {})
        if not leaders:
            raise RealKafkaError(f"{OFFSETS_TOPIC} does not exist yet (was start() completed?)")
        if broker_id not in leaders.values():
            raise RealKafkaError(
                f"broker {broker_id} leads no {OFFSETS_TOPIC} partition (leaders: {leaders}), "
                "so no group can have it as coordinator"
            )
        for i in range(limit):
            name = f"{prefix}-{i}"
            if leaders.get(offsets_partition_for(name, len(leaders))) != broker_id:
                continue
            actual = self.coordinator_for(name)
            if actual == broker_id:
                return name
            # Leadership moved since the metadata was read: read it again and go on.
            offsets = _run_sync(lambda: _metadata(nodes[0].port, [OFFSETS_TOPIC]))
            leaders = _partition_leaders(offsets).get(OFFSETS_TOPIC, {})
        raise RealKafkaError(
            f"none of {prefix}-0..{prefix}-{limit - 1} is coordinated by broker {broker_id}"
        )

    # -- transaction coordinators, and moving a coordinator ---------------------------------------
    # Kafka places a transactional id as it places a group: TransactionStateManager.partitionFor
    # is Utils.abs(transactionalId.hashCode()) % transaction.state.log.num.partitions, and the
    # leader of that __transaction_state partition is the coordinator (so offsets_partition_for
    # computes both). __transaction_state is created by the first FindCoordinator asking for a
    # transaction coordinator.

    def find_coordinator(self, kind: CoordinatorKind, key: str, timeout_s: float = 30.0) -> int:
        """The broker coordinating ``key`` (a group id or a transactional id, by ``kind``).

        Waits out COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / NOT_COORDINATOR (the
        internal topic being created or its leader moving) up to ``timeout_s``.
        """
        self._require_kind(kind)
        deadline = time.monotonic() + timeout_s
        return _run_sync(lambda: self._find_coordinator(kind, key, deadline))

    async def _find_coordinator(self, kind: CoordinatorKind, key: str, deadline: float) -> int:
        port = self._require_running()[0].port
        last = "no answer"
        while True:
            try:
                async with _connection(port) as conn:
                    response = await conn.send(
                        FindCoordinatorRequest(key, _COORDINATOR_KEY_TYPES[kind])
                    )
            except _PROBE_ERRORS as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                code = int(response.error_code)
                if code == 0:
                    return int(response.coordinator_id)
                if code not in _RETRIABLE_COORDINATOR_ERRORS:
                    raise RealKafkaError(
                        f"FindCoordinator({kind} {key!r}) failed: {_error_name(code)}"
                    )
                last = _error_name(code)
            if time.monotonic() >= deadline:
                raise RealKafkaError(f"no coordinator for {kind} {key!r} in time: {last}")
            await asyncio.sleep(_POLL_S)

    def coordinator_replicas(self, kind: CoordinatorKind) -> dict[int, list[int]]:
        """Partition -> replicas (preferred leader first) of the internal topic that places
        keys of ``kind``; creates ``__transaction_state`` first if it does not exist yet."""
        return _partition_replicas(self._coordinator_metadata(kind)).get(
            _COORDINATOR_TOPICS[kind], {}
        )

    def _coordinator_metadata(self, kind: CoordinatorKind) -> dict[str, Any]:
        self._require_kind(kind)
        port = self._require_running()[0].port
        if kind == "transaction":
            # Any transactional id will do: asking is what creates the topic.
            self.find_coordinator(kind, "connmgr-create-transaction-state", timeout_s=60.0)
        return _run_sync(lambda: _metadata(port, [_COORDINATOR_TOPICS[kind]]))

    def key_for_coordinator(
        self, kind: CoordinatorKind, broker_id: int, prefix: str, limit: int = 1000
    ) -> str:
        """The first of ``prefix-0``, ``prefix-1``, ... whose ``kind`` coordinator is
        ``broker_id``: :meth:`group_for_coordinator` for groups and transactional ids alike.

        Picked by the broker's rule (:func:`offsets_partition_for`, then that partition's
        leader) and confirmed with FindCoordinator. Raises :class:`RealKafkaError` when
        ``broker_id`` leads no partition of the internal topic or no name qualifies.
        """
        self._node(broker_id)
        topic = _COORDINATOR_TOPICS[kind]
        for _attempt in range(3):
            leaders = self._coordinator_leaders(kind)
            if broker_id not in leaders.values():
                raise RealKafkaError(
                    f"broker {broker_id} leads no {topic} partition (leaders: {leaders}), "
                    f"so no {kind} key can have it as coordinator"
                )
            name = next(
                (
                    f"{prefix}-{i}"
                    for i in range(limit)
                    if leaders[offsets_partition_for(f"{prefix}-{i}", len(leaders))] == broker_id
                ),
                None,
            )
            if name is None:
                break
            if self.find_coordinator(kind, name) == broker_id:
                return name
            # Leadership moved since the metadata was read: read it again.
        raise RealKafkaError(
            f"none of {prefix}-0..{prefix}-{limit - 1} has {kind} coordinator {broker_id}"
        )

    def _coordinator_leaders(self, kind: CoordinatorKind) -> dict[int, int]:
        metadata = self._coordinator_metadata(kind)
        return _partition_leaders(metadata).get(_COORDINATOR_TOPICS[kind], {})

    def move_coordinator(
        self, kind: CoordinatorKind, key: str, broker_id: int, timeout_s: float = 60.0
    ) -> int:
        """Make ``broker_id`` the ``kind`` coordinator of ``key``; returns the one before.

        The coordinator is the leader of ``key``'s partition of the internal topic, and every
        broker holds a replica of it (replication ``min(3, brokers)`` on 3 brokers), so this
        reorders that partition's replicas to put ``broker_id`` first (a reassignment that
        moves no data) and asks for a preferred-leader election. The old coordinator
        resigns and answers NOT_COORDINATOR, the new one loads the partition's state; clients
        follow as they would after a broker's controlled shutdown. Returns once
        FindCoordinator names ``broker_id``. Every key on the same partition moves with it:
        move it back (call again with the returned broker) when the cluster is shared.
        """
        self._require_kind(kind)
        self._node(broker_id)
        topic = _COORDINATOR_TOPICS[kind]
        port = self._require_running()[0].port
        deadline = time.monotonic() + timeout_s

        async def move() -> int:
            before = await self._find_coordinator(kind, key, deadline)
            if before == broker_id:
                return before
            replicas = _partition_replicas(await _metadata(port, [topic])).get(topic, {})
            partition = offsets_partition_for(key, len(replicas))
            current = replicas[partition]
            if broker_id not in current:
                raise RealKafkaError(
                    f"broker {broker_id} holds no replica of {topic}-{partition} ({current})"
                )
            target = [broker_id, *(r for r in current if r != broker_id)]
            await self._reassign(topic, partition, target, deadline)
            note = ""
            elect_at = time.monotonic()
            while True:
                metadata = await _metadata(port, [topic])
                view = _partition_replicas(metadata).get(topic, {})
                leader = _partition_leaders(metadata).get(topic, {})
                now = time.monotonic()
                if (
                    view.get(partition) == target
                    and leader.get(partition) != broker_id
                    and now >= elect_at
                ):
                    note = await self._elect_preferred(topic, [partition])
                    elect_at = now + 2.0  # an election takes a moment to show in metadata
                if leader.get(partition) == broker_id:
                    found = await self._find_coordinator(kind, key, deadline)
                    if found == broker_id:
                        return before
                if time.monotonic() >= deadline:
                    raise RealKafkaError(
                        f"{topic}-{partition} did not move to broker {broker_id} within "
                        f"{timeout_s}s: replicas {view.get(partition)}, leader "
                        f"{leader.get(partition)}; last election: {note or 'none'}"
                    )
                await asyncio.sleep(_POLL_S)

        return _run_sync(move)

    async def _reassign(
        self, topic: str, partition: int, replicas: list[int], deadline: float
    ) -> None:
        """AlterPartitionReassignments of one partition to ``replicas`` (in that order)."""
        timeout_ms = max(1000, int((deadline - time.monotonic()) * 1000))
        async with _connection(self._require_running()[0].port, timeout_ms) as conn:
            response = await conn.send(
                AlterPartitionReassignmentsRequest(
                    timeout_ms, [(topic, [(partition, replicas, {})], {})], {}
                )
            )
        answer = response.to_object()
        codes = [answer["error_code"]] + [
            p["error_code"] for t in answer["responses"] for p in t["partitions"]
        ]
        failed = [code for code in codes if code]
        if failed:
            raise RealKafkaError(
                f"reassigning {topic}-{partition} to {replicas} failed: "
                + ", ".join(_error_name(code) for code in failed)
                + (f" ({answer['error_message']})" if answer.get("error_message") else "")
            )

    def _require_kind(self, kind: object) -> None:
        if kind not in _COORDINATOR_TOPICS:
            raise RealKafkaError(f"kind must be one of {sorted(_COORDINATOR_TOPICS)}, got {kind!r}")


def _partition_replicas(metadata: Mapping[str, Any]) -> dict[str, dict[int, list[int]]]:
    """Topic -> partition -> replica ids (preferred leader first) from a Metadata response."""
    result: dict[str, dict[int, list[int]]] = {}
    for topic in metadata["topics"]:
        if topic["error_code"]:
            continue
        result[topic["topic"]] = {
            int(p["partition"]): [int(r) for r in p["replicas"]] for p in topic["partitions"]
        }
    return result


def _partition_leaders(metadata: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """Topic -> partition -> leader id from a Metadata response (topics with errors omitted)."""
    result: dict[str, dict[int, int]] = {}
    for topic in metadata["topics"]:
        if topic["error_code"]:
            continue
        result[topic["topic"]] = {
            int(p["partition"]): int(p["leader"]) for p in topic["partitions"]
        }
    return result


def _random_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` makes one: url-safe base64, no padding.

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-`` (it would read as a
    command-line option). Kafka's two reserved ids (0 and 1) are not worth a check: a uuid4
    has version bits set, so it is never either.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text
