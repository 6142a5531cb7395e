"""The KRaft node processes: ports, per-node configuration, spawning, formatting, stopping,
and reaping the clusters of owners that died.

Every node is a combined broker+controller JVM with a temporary directory of its own (data,
logs, ``server.properties``) under the cluster's work directory. The work directory holds an
owner file (the owning process and its nodes' pids), so that a cluster left behind by a process
that died without running its exit hooks (SIGKILL, a CI timeout) is reaped by the next start.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import psutil

from connmgr_evidence.realkafka.errors import LOG_TAIL_LINES, RealKafkaError, output_tail

__all__ = [
    "HOST",
    "LOG4J2",
    "WORKDIR_PREFIX",
    "Node",
    "Resources",
    "format_storage",
    "jmx_options",
    "jvm_args",
    "random_cluster_id",
    "reap_orphans",
    "reserve_ports",
    "server_properties",
    "spawn",
    "terminate",
    "write_owner",
]

HOST: Final = "127.0.0.1"
"""Where every listener binds and what every broker advertises."""

WORKDIR_PREFIX: Final = "connmgr-kafka-"
_OWNER_FILE: Final = "owner.json"
_FORMAT_TIMEOUT_S: Final = 60.0


@dataclass
class Node:
    """One combined broker+controller: its id, its client and controller ports, its
    directory (data, logs, ``server.properties``) and, once started, its JVM."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    jmx_port: int | None = None
    """The JVM's remote JMX port on ``HOST`` (no authentication, no TLS), or None: no JMX."""

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.directory / "stdout.log"

    def tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` of the node's output and log, for an error message."""
        parts: list[str] = []
        for path in (self.stdout_file, self.log_file):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if text.strip():
                parts.append(f"  {path.name}:\n{output_tail(text, lines)}")
        return "\n".join(parts) or "  (no output or log)"

    def bind_failure(self) -> str | None:
        """``host:port`` the node's log says it failed to bind, or None (read after exit).
        The output accumulates over restarts: the last failure in each file is the one."""
        text = ""
        found: list[tuple[str, str]] = []
        for path in (self.stdout_file, self.log_file):
            with contextlib.suppress(OSError):
                part = path.read_text(encoding="utf-8", errors="replace")
                text += part
                found += re.findall(r"failed to bind to (\S+?):(\d+)", part)[-1:]
        if found:
            return f"{found[-1][0]}:{found[-1][1]}"
        if "Address already in use" in text or "BindException" in text:
            return f"{HOST}:{self.port} or {HOST}:{self.controller_port}"
        return None


@dataclass
class Resources:
    """What a cluster must release; shared with its finalizer, which must not hold the cluster."""

    workdir: Path | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    keep_workdir: bool = False
    closers: list[Callable[[], None]] = field(default_factory=list)
    """Run after the processes stop, last added first (the delay forwarders' close)."""

    def release(self, timeout_s: float) -> list[int]:
        """Stop the processes, run the closers, remove the work directory; the pids that
        needed SIGKILL."""
        killed = terminate(self.processes, timeout_s)
        self.processes = []
        while self.closers:
            self.closers.pop()()
        if self.workdir is not None:
            if self.keep_workdir:
                # Kept for reading: without an owner file the reaper leaves it alone.
                with contextlib.suppress(FileNotFoundError):
                    (self.workdir / _OWNER_FILE).unlink()
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir = None
        return killed


def terminate(processes: Iterable[subprocess.Popen[bytes]], timeout_s: float) -> list[int]:
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


def reserve_ports(count: int) -> list[int]:
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


def reap_orphans(base: Path) -> list[Path]:
    """Stop clusters whose owning process died without stopping them; remove their dirs.

    A node is killed only if its pid still runs a command line naming that cluster's
    directory, so a recycled pid is never touched.
    """
    reaped: list[Path] = []
    for workdir in base.glob(f"{WORKDIR_PREFIX}*"):
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


LOG4J2: Final = """\
# Written by connmgr_evidence.realkafka: INFO to one file per node, nothing on the console.
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


def random_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` makes one: url-safe base64, no padding.

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-`` (it would read as a
    command-line option). Kafka's two reserved ids (0 and 1) are not worth a check: a uuid4
    has version bits set, so it is never either.
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def write_owner(workdir: Path, nodes: Iterable[Node]) -> None:
    """Record this process and the nodes' pids in ``workdir``, for :func:`reap_orphans`."""
    owner = {
        "pid": os.getpid(),
        "create_time": psutil.Process().create_time(),
        "nodes": [n.process.pid for n in nodes if n.process is not None],
    }
    (workdir / _OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")


# -- configuration ------------------------------------------------------------------------------


def server_properties(
    node: Node,
    nodes: Sequence[Node],
    *,
    offsets_partitions: int,
    extra: Mapping[str, str],
) -> str:
    """``node``'s ``server.properties`` in a cluster of ``nodes`` (all of them controllers),
    ``extra`` applied last (it wins)."""
    broker_count = len(nodes)
    replication = min(3, broker_count)
    voters = ",".join(f"{n.node_id}@{HOST}:{n.controller_port}" for n in nodes)
    settings: dict[str, str] = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "listeners": (f"PLAINTEXT://{HOST}:{node.port},CONTROLLER://{HOST}:{node.controller_port}"),
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
        "offsets.topic.num.partitions": str(offsets_partitions),
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min(2, replication)),
        "transaction.state.log.num.partitions": str(broker_count),
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min(2, replication)),
        "share.coordinator.state.topic.num.partitions": str(broker_count),
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
    settings.update(extra)
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def jmx_options(port: int) -> list[str]:
    """JVM options opening remote JMX on ``HOST:port`` only, without authentication or TLS
    (a loopback test cluster's metrics, read by ``connmgr_evidence.java.jmx``). The RMI server uses
    the same port, so one port per broker is all a reader needs."""
    return [
        f"-Dcom.sun.management.jmxremote.port={port}",
        f"-Dcom.sun.management.jmxremote.rmi.port={port}",
        f"-Dcom.sun.management.jmxremote.host={HOST}",
        f"-Djava.rmi.server.hostname={HOST}",
        "-Dcom.sun.management.jmxremote.authenticate=false",
        "-Dcom.sun.management.jmxremote.ssl=false",
    ]


def jvm_args(node: Node, *, heap_mb: int, extra: Sequence[str]) -> list[str]:
    """The JVM options of ``node``'s broker: ``-Xmx{heap_mb}m``, then the defaults, remote
    JMX if the node has a :attr:`Node.jmx_port` (:func:`jmx_options`), then ``extra``."""
    jmx = [] if node.jmx_port is None else jmx_options(node.jmx_port)
    return [
        f"-Xmx{heap_mb}m",
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
        *jmx,
        *extra,
    ]


# -- running the JVMs ---------------------------------------------------------------------------


def spawn(
    java: str,
    classpath: list[str],
    node: Node,
    jvm_options: list[str],
    main_class: str,
    *args: object,
    output: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``main_class`` in ``node``'s directory, output appended to ``output`` (default:
    the node's ``stdout.log``), in a session of its own."""
    out: IO[bytes]
    with open(output or node.stdout_file, "ab") as out:
        # The child gets the descriptor; ours is closed on leaving the block.
        return subprocess.Popen(
            [java, *jvm_options, "-cp", os.pathsep.join(classpath), main_class, *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=node.directory,
            # Own session: a terminal's Ctrl-C reaches only us, and we stop the nodes
            # (SIGTERM, then the data removed) instead of every JVM dying on its own.
            start_new_session=True,
        )


def format_storage(
    java: str,
    classpath: list[str],
    nodes: Sequence[Node],
    cluster_id: str,
    deadline: float,
    extra_args: Sequence[str] = (),
) -> None:
    """Format every node's storage for ``cluster_id`` with ``kafka.tools.StorageTool``, all
    nodes at once, ``extra_args`` appended to its ``format`` command (e.g. ``--add-scram``).

    Raises :class:`RealKafkaError` with the tail of the tool's output when one fails or takes
    over a minute (or past ``deadline``); no formatting process outlives the call.
    """
    jvm = ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData"]
    jvm.append(f"-Dlog4j2.configurationFile={nodes[0].directory.parent / 'log4j2.properties'}")
    formatting: list[tuple[Node, subprocess.Popen[bytes], Path]] = []
    try:
        for node in nodes:
            output = node.directory / "format.log"
            process = spawn(
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
                cluster_id,
                "--config",
                node.properties_file,
                *extra_args,
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
                    + output_tail(output.read_text(encoding="utf-8", errors="replace"))
                ) from exc
            if code != 0:
                raise RealKafkaError(
                    f"kafka.tools.StorageTool format failed for node {node.node_id} "
                    f"(exit {code}):\n"
                    + output_tail(output.read_text(encoding="utf-8", errors="replace"))
                )
    finally:
        terminate([p for _, p, _ in formatting], 5.0)
