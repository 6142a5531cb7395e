"""The real cluster: :class:`KafkaCluster` starts KRaft nodes, waits until they serve, says
where they are, and stops them.

It composes the package's rooms: the broker's classpath
(:mod:`~connmgr_evidence.realkafka.classpath`),
the node processes (:mod:`~connmgr_evidence.realkafka.process`), the wire
(:mod:`~connmgr_evidence.realkafka.protocol`), and, mixed in, the administration of topics
(:mod:`~connmgr_evidence.realkafka.topics`), coordinators
(:mod:`~connmgr_evidence.realkafka.coordinators`) and
broker restarts and moves (:mod:`~connmgr_evidence.realkafka.restart`,
:mod:`~connmgr_evidence.realkafka.move`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from aiokafka.protocol.coordination import FindCoordinatorRequest

from connmgr_evidence.realkafka.classpath import (
    kafka_version,
    require_java,
    resolve_broker_classpath,
)
from connmgr_evidence.realkafka.coordinators import CoordinatorAdmin
from connmgr_evidence.realkafka.errors import PortTaken, RealKafkaError
from connmgr_evidence.realkafka.move import Address, BrokerMoves
from connmgr_evidence.realkafka.placement import OFFSETS_TOPIC
from connmgr_evidence.realkafka.process import (
    HOST,
    LOG4J2,
    WORKDIR_PREFIX,
    Node,
    Resources,
    format_storage,
    jvm_args,
    random_cluster_id,
    reap_orphans,
    reserve_ports,
    server_properties,
    spawn,
    write_owner,
)
from connmgr_evidence.realkafka.protocol import (
    POLL_S,
    PROBE_ERRORS,
    connection,
    metadata,
    partition_leaders,
    run_sync,
)
from connmgr_evidence.realkafka.security import PROTOCOLS, ListenerAccess, Protocol, SecureTier

__all__ = ["KafkaCluster"]


START_ATTEMPTS: Final = 4
"""Starts tried with fresh ports when a reserved port was taken before a node bound it: two
in a row were seen on a 2-core machine running a Spark cluster beside the tier."""


class KafkaCluster(BrokerMoves, CoordinatorAdmin):
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
        security: also give every node an ``SSL`` and a ``SASL_SSL`` (SCRAM-SHA-512) client
            listener, advertised at delay forwarders (:mod:`~connmgr_evidence.realkafka.security`):
            :meth:`access` says how to reach each, :meth:`set_rtt` sets their round-trip time.
            Off by default; the PLAINTEXT listener and its ports are the same either way.
        jmx: give every node's JVM a remote JMX port on 127.0.0.1, without authentication
            or TLS (:meth:`jmx_endpoints`; read by :mod:`connmgr_evidence.java.jmx`). Off by
            default.
        version: the Kafka release, one of :data:`~connmgr_evidence.realkafka.KAFKA_VERSIONS`; None
            (the default) is ``$CONNMGR_KAFKA_VERSION`` if set, else
            :data:`~connmgr_evidence.realkafka.KAFKA_VERSION`
            (:func:`~connmgr_evidence.realkafka.kafka_version`).
            An unsupported one raises :class:`RealKafkaError` here, before anything starts.

    Use as a context manager (``with KafkaCluster() as cluster:``) or call :meth:`start` and
    :meth:`stop`. Thread-safe: start, stop and broker restarts serialise on a lock; the query
    helpers open their own connections. A running cluster can restart its brokers one at a
    time (:meth:`stop_broker`, then :meth:`start_broker`) and give the partitions back to
    their preferred leaders (:meth:`restore_preferred_leaders`), or move one to new client
    ports (:meth:`move_broker`).
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
        security: bool = False,
        jmx: bool = False,
        version: str | None = None,
    ) -> None:
        self.version = kafka_version(version)
        """The Kafka release this cluster runs."""
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
        self._security = security
        self._jmx = jmx
        self._secure: SecureTier | None = None
        self._lock = threading.RLock()
        self._nodes: list[Node] = []
        self._down: set[int] = set()
        self._java: str | None = None
        self._classpath: list[str] = []
        self._state = "new"
        self._resources = Resources(keep_workdir=keep_workdir)
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
        to format or dies during start (with the tail of its log), a port is taken in
        :data:`START_ATTEMPTS` starts in a row, or the timeout passes (saying which brokers
        were seen). Whatever was started is stopped and removed before raising. A cluster
        starts once: a stopped one stays stopped.
        """
        with self._lock:
            if self._state != "new":
                raise RealKafkaError(f"start() on a {self._state} cluster: create a new one")
            self._state = "starting"
            began = time.monotonic()
            try:
                java = self._java = require_java()
                classpath = self._classpath = resolve_broker_classpath(version=self.version)
                self.timings["classpath"] = time.monotonic() - began
                reap_orphans(Path(tempfile.gettempdir()))
                deadline = time.monotonic() + timeout_s
                for attempt in range(1, START_ATTEMPTS + 1):
                    try:
                        self._launch(java, classpath, deadline)
                        break
                    except PortTaken:
                        # Another process grabbed a reserved port between reservation and
                        # bind (a busy machine: a Spark worker or a client binding port 0 may
                        # be handed the port just released); fresh ports are tried.
                        self._resources.release(10.0)
                        if attempt == START_ATTEMPTS:
                            raise
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
            f"kafka={self.version}{where}{took})"
        )

    def _launch(self, java: str, classpath: list[str], deadline: float) -> None:
        workdir = Path(tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-"))
        self._resources.workdir = workdir
        ports = reserve_ports(2 * self._broker_count)
        self._nodes = [
            Node(
                node_id=i + 1,
                port=ports[i],
                controller_port=ports[self._broker_count + i],
                directory=workdir / f"node-{i + 1}",
            )
            for i in range(self._broker_count)
        ]
        (workdir / "log4j2.properties").write_text(LOG4J2, encoding="utf-8")
        format_args: list[str] = []
        if self._security:
            # Ports of their own, reserved after the PLAINTEXT and controller ones so those
            # are drawn exactly as without security.
            secure = SecureTier.create(
                workdir / "tls", self._nodes, reserve_ports(3 * self._broker_count)
            )
            self._resources.closers.append(secure.close)
            self._secure = secure
            format_args = secure.format_args()
        if self._jmx:
            # Drawn last, so the other ports are drawn exactly as without JMX.
            for node, port in zip(self._nodes, reserve_ports(self._broker_count), strict=True):
                node.jmx_port = port
        self.cluster_id = random_cluster_id()
        # Owner first (no nodes yet), so even a crash during start leaves a reapable directory.
        write_owner(workdir, self._nodes)
        for node in self._nodes:
            (node.directory / "tmp").mkdir(parents=True)
            node.properties_file.write_text(self._server_properties(node), encoding="utf-8")

        t = time.monotonic()
        format_storage(java, classpath, self._nodes, self.cluster_id, deadline, format_args)
        self.timings["format"] = time.monotonic() - t

        t = time.monotonic()
        for node in self._nodes:
            self._spawn_node(node)
        run_sync(lambda: self._await_brokers(deadline))
        self.timings["brokers_ready"] = time.monotonic() - t

        t = time.monotonic()
        run_sync(lambda: self._await_offsets_topic(deadline))
        self.timings["coordinators_ready"] = time.monotonic() - t

    def _spawn_node(self, node: Node) -> None:
        """Start ``node``'s JVM (``kafka.Kafka`` on its properties) and hand it to the
        resources, replacing its previous process there (a restart), and to the owner file."""
        if self._java is None or self._resources.workdir is None:
            raise RealKafkaError(f"{self!r} has no broker classpath yet: call start() first")
        previous = node.process
        node.process = spawn(
            self._java,
            self._classpath,
            node,
            jvm_args(node, heap_mb=self._heap_mb, extra=self._jvm_options),
            "kafka.Kafka",
            node.properties_file,
        )
        processes = self._resources.processes
        if previous in processes:
            processes.remove(previous)
        processes.append(node.process)
        write_owner(self._resources.workdir, self._nodes)

    def _relocate(self, node: Node) -> None:
        """New client ports for ``node`` (stopped): PLAINTEXT, and SSL, SASL_SSL and CLIENT
        with their forwarders on a secure cluster; its properties rewritten for them."""
        if self._secure is None:
            (node.port,) = reserve_ports(1)
        else:
            node.port, ssl_port, sasl_port, client_port = reserve_ports(4)
            self._secure.relocate(node, ssl_port, sasl_port, client_port)
        node.properties_file.write_text(self._server_properties(node), encoding="utf-8")

    def _advertised(self, broker_id: int) -> dict[str, Address]:
        protocols: tuple[Protocol, ...] = ("PLAINTEXT",) if self._secure is None else PROTOCOLS
        return {p: dict(self.access(p).endpoints)[broker_id] for p in protocols}

    def _server_properties(self, node: Node) -> str:
        secure = {} if self._secure is None else self._secure.properties(node)
        return server_properties(
            node,
            self._nodes,
            offsets_partitions=self._offsets_partitions,
            extra={**secure, **self._extra_properties},
        )

    def _check_alive(self) -> None:
        """Raise, with the log tail, if any node has exited (except one stopped on purpose)."""
        for node in self._nodes:
            if node.process is None or node.node_id in self._down:
                continue
            code = node.process.poll()
            if code is None:
                continue
            address = node.bind_failure()
            if address is not None:
                raise PortTaken(
                    f"node {node.node_id} could not bind {address}: address already in use "
                    f"(another process took it after it was reserved):\n{node.tail()}"
                )
            raise RealKafkaError(
                f"Kafka node {node.node_id} exited with code {code}"
                f"{' during start' if self._state == 'starting' else ''}:\n{node.tail()}"
            )

    def check_alive(self) -> None:
        """Raise :class:`RealKafkaError` (with the log tail) if any node has exited, other than
        one :meth:`stop_broker` stopped."""
        self._check_alive()

    async def _await_brokers(self, deadline: float) -> None:
        """Wait until every node's Metadata lists every broker (all registered, unfenced)."""
        want = set(self.broker_ids)
        seen: dict[int, set[int]] = {}
        errors: dict[int, str] = {}
        while True:
            self._check_alive()
            for node in self._nodes:
                try:
                    answer = await metadata(node.port, [])
                except PROBE_ERRORS as exc:
                    errors[node.node_id] = f"{type(exc).__name__}: {exc}"
                    continue
                errors.pop(node.node_id, None)
                seen[node.node_id] = {int(b["node_id"]) for b in answer["brokers"]}
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
            await asyncio.sleep(POLL_S)

    async def _await_offsets_topic(self, deadline: float) -> None:
        """Create ``__consumer_offsets`` (a FindCoordinator does) and wait for all its leaders."""
        port = self._nodes[0].port
        while True:
            self._check_alive()
            with contextlib.suppress(*PROBE_ERRORS):
                async with connection(port) as conn:
                    await conn.send(FindCoordinatorRequest("connmgr-warm-up", 0))
                ready = True
                for node in self._nodes:
                    leaders = partition_leaders(await metadata(node.port, [OFFSETS_TOPIC]))
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
            await asyncio.sleep(POLL_S)

    # -- where things are -----------------------------------------------------------------------

    def _require_started(self) -> list[Node]:
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

    def _require_secure(self) -> SecureTier:
        self._require_started()
        if self._secure is None:
            raise RealKafkaError(f"{self!r} has no secure listeners: create it with security=True")
        return self._secure

    def access(self, protocol: Protocol = "PLAINTEXT") -> ListenerAccess:
        """How a client reaches the cluster over ``protocol`` ("PLAINTEXT", "SSL",
        "SASL_SSL"): endpoints, bootstrap string, CA file, SCRAM credentials, and the
        aiokafka / Java settings built from them. SSL and SASL_SSL need ``security=True``
        and go through the delay forwarders; PLAINTEXT is the direct listener."""
        if protocol == "PLAINTEXT":
            return ListenerAccess("PLAINTEXT", tuple(sorted(self.endpoints().items())))
        return self._require_secure().access(protocol)

    def jmx_endpoints(self) -> dict[int, tuple[str, int]]:
        """Broker id -> its JVM's remote JMX address (``jmx=True`` only). The port stays the
        same through a restart and a :meth:`move_broker`."""
        nodes = self._require_started()
        if not self._jmx:
            raise RealKafkaError(f"{self!r} has no JMX ports: create it with jmx=True")
        return {n.node_id: (HOST, n.jmx_port) for n in nodes if n.jmx_port is not None}

    @property
    def secure(self) -> SecureTier:
        """The certificates, secure ports and delay forwarders (``security=True`` only)."""
        return self._require_secure()

    def set_rtt(self, rtt_ms: float) -> None:
        """Round-trip time the forwarders add from now on (``security=True`` only); the
        direct PLAINTEXT listener is never delayed."""
        self._require_secure().network.set_rtt(rtt_ms)

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

    def _node(self, broker_id: int) -> Node:
        for node in self._require_started():
            if node.node_id == broker_id:
                return node
        raise RealKafkaError(f"no broker {broker_id!r}: the brokers are {list(self.broker_ids)}")

    def _require_running(self) -> list[Node]:
        if self._state != "running":
            raise RealKafkaError(f"{self!r} is not running")
        return self._nodes

    # -- asking the cluster (topics and coordinators: the mixins) -------------------------------

    def _port_of(self, broker_id: int) -> int:
        return self._node(broker_id).port

    def _running_ports(self) -> dict[int, int]:
        # A broker stopped for a restart answers nothing: questions go to the others.
        return {n.node_id: n.port for n in self._require_running() if n.node_id not in self._down}

    def api_versions(self, broker_id: int = 1) -> dict[int, tuple[int, int]]:
        """API key -> (min, max) version the broker accepts (its ApiVersions answer)."""
        port = self._port_of(broker_id)

        async def ask() -> dict[int, tuple[int, int]]:
            async with connection(port) as conn:
                return dict(conn._versions)

        return run_sync(ask)
