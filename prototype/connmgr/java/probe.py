"""Build and run the Java-client probe, and account for every connection it makes.

The probe (``benchmarks/java-probe``: a Maven module and ``connmgr.probe.Probe``) runs the real
``org.apache.kafka:kafka-clients`` of a chosen version through one scenario -- producer: send
records round-robin over partitions with ``acks=all``; consumer: join a group, read them,
commit -- with ``org.apache.kafka.clients.NetworkClient`` logging to a file. It then reports
``{"phase": "steady", ...}`` on stdout and waits, so the caller can look at the JVM's sockets,
before closing the client and reporting ``{"phase": "closed", ...}``.

Three views of the same connections are then reconciled by :func:`cross_check`:

* the **log**: every ``Initiating connection to node HOST:PORT (id: N ...)`` line is a dial,
  ``Completed connection to node N`` its establishment, and the disconnect lines its end (see
  :func:`connmgr.javalog.parse_connection_events`). Closing the client closes every connection
  without a line per connection, so whatever is open then is closed "by client close";
* the client's **metrics** ``connection-creation-total`` (successful connects only),
  ``connection-close-total`` (every registered socket closed, failed dials included) and
  ``connection-count`` (registered sockets, dials in progress included);
* the **kernel**: the JVM's TCP sockets to the brokers while it sits in its steady state.

Nothing built or downloaded goes into the repository: Maven keeps artifacts in its local
repository (``~/.m2``) and the build output goes to :func:`cache_dir` (``$XDG_CACHE_HOME`` or
``~/.cache``, then ``connmgr/java-probe/<version>``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Final, Generic, Literal, TypeVar

from connmgr.aio.kernel import LIVE_STATES
from connmgr.core.identity import COORDINATOR_ID_BASE, Role
from connmgr.errors import ConnMgrError
from connmgr.javalog import (
    LoggedConnection,
    LoggedConnectionEvent,
    parse_connection_events,
    parse_connections,
    parse_log_time,
)
from connmgr.ledger import ConnectionLedger

__all__ = [
    "JavaAccountingMismatch",
    "JavaBuildError",
    "JavaProbeError",
    "JavaRun",
    "JavaToolError",
    "JavaTools",
    "KernelSample",
    "LogAccount",
    "PhaseReport",
    "ProbeBuild",
    "TransactionPlan",
    "build_ledger",
    "build_probe",
    "cache_dir",
    "cross_check",
    "default_extra",
    "find_tools",
    "kernel_sampler",
    "kernel_sockets",
    "role_of",
    "run_probe",
]

T = TypeVar("T")
Client = Literal["producer", "consumer"]

MIN_JAVA: Final = 17
"""The probe compiles with ``maven.compiler.release`` 17."""

JVM_OPTIONS: Final = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""Small and quick to start: the probe moves a few records, it does not need a tuned JVM."""

MAIN_CLASS: Final = "connmgr.probe.Probe"
METRIC_NAMES: Final = ("connection-creation-total", "connection-close-total", "connection-count")

_VERSION_RE: Final = re.compile(r"^\d+\.\d+\.\d+(?:[.-][A-Za-z0-9.]+)?$")
_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FINGERPRINT_SCHEMA: Final = "java-probe-build-v1"
_LOCK_POLL_S: Final = 0.1
_TAIL_LINES: Final = 40


# -- errors -----------------------------------------------------------------------------------


class JavaToolError(ConnMgrError):
    """``java`` or ``mvn`` is missing or unusable; the message says what to install."""


class JavaBuildError(JavaToolError):
    """Maven failed to build the probe; the message ends with the tail of Maven's output."""


class JavaProbeError(ConnMgrError):
    """The probe run failed: it reported ``{"phase": "error"}``, exited non-zero, printed
    something unexpected or timed out. The message carries the probe's error, the tail of its
    stderr and the tail of the client log."""


class JavaAccountingMismatch(ConnMgrError):
    """The log, the client's metrics and the kernel disagree about the connections of a run
    (raised by :func:`run_probe` with ``verify=True``). ``problems`` lists every disagreement;
    ``run`` is the complete run, for inspection."""

    def __init__(self, problems: Sequence[str], run: JavaRun[Any]) -> None:
        super().__init__(
            f"Java client {run.version} {run.client}: log, metrics and kernel disagree:\n  "
            + "\n  ".join(problems)
            + f"\n(log: {run.log_path})"
        )
        self.problems = list(problems)
        self.run = run


# -- tools ------------------------------------------------------------------------------------


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
    # probe.py -> java -> connmgr -> prototype -> repository root
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


def _tail(text: str, lines: int = _TAIL_LINES) -> str:
    return "\n".join(_ANSI_RE.sub("", text).strip().splitlines()[-lines:])


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
    env = dict(os.environ)
    # Compile with the JDK the probe will run on, not whatever Maven would pick by itself.
    env.setdefault("JAVA_HOME", str(tools.java.resolve().parent.parent))
    try:
        result = subprocess.run(
            command,
            cwd=vdir,
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
            f"Maven did not finish building the probe for kafka-clients {version} within "
            f"{timeout_s:.0f}s; last output:\n{_tail(output)}"
        ) from e
    output = result.stdout + result.stderr
    (vdir / "build.log").write_text(_ANSI_RE.sub("", output), encoding="utf-8")
    if result.returncode != 0 or not cp_file.is_file():
        raise JavaBuildError(
            f"Maven failed (exit {result.returncode}) building the probe for kafka-clients "
            f"{version}: {' '.join(command)}\n{_tail(output)}"
        )
    jars = [Path(p) for p in cp_file.read_text(encoding="utf-8").strip().split(os.pathsep) if p]
    classes = target / "classes"
    if not (classes / "connmgr" / "probe" / "Probe.class").is_file():
        raise JavaBuildError(f"Maven succeeded but {classes} holds no connmgr/probe/Probe.class")
    return (classes, *jars)


# -- the kernel's view ------------------------------------------------------------------------

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class KernelSample:
    """The live TCP sockets (states in :data:`connmgr.aio.kernel.LIVE_STATES`) a process holds
    to a set of endpoints, as (remote ip, remote port, state), at one instant."""

    pid: int
    sockets: tuple[tuple[str, int, str], ...]

    @property
    def count(self) -> int:
        return len(self.sockets)


def _canonical_ip(ip: str) -> str:
    # A JVM dials from dual-stack sockets: 127.0.0.1 shows up as ::ffff:127.0.0.1.
    address = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def _endpoint_ips(host: str, port: int) -> set[Address]:
    try:
        return {(_canonical_ip(host), port)}
    except ValueError:
        pass
    if host.lower() == "localhost":
        return {("127.0.0.1", port), ("::1", port)}
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return set()
    return {(_canonical_ip(str(info[4][0])), port) for info in infos}


def kernel_sockets(pid: int, endpoints: Mapping[int, Address] | Iterable[Address]) -> KernelSample:
    """The live client sockets process ``pid`` holds to ``endpoints`` (broker id -> (host,
    port) as from ``MockCluster.listeners()``, or just (host, port) pairs), read with psutil.

    A socket counts when its *remote* address is one of the endpoints (IPv4-mapped IPv6
    addresses compare as IPv4; ``localhost`` is both loopbacks; other names are resolved) and
    its state is ``SYN_SENT``, ``ESTABLISHED`` or ``CLOSE_WAIT``.
    """
    import psutil  # a declared dependency; imported here so the module loads without it

    pairs = list(endpoints.values()) if isinstance(endpoints, Mapping) else list(endpoints)
    wanted: set[Address] = set()
    for host, port in pairs:
        wanted |= _endpoint_ips(host, port)
    found: list[tuple[str, int, str]] = []
    for conn in psutil.Process(pid).net_connections(kind="tcp"):
        if not conn.raddr or conn.status not in LIVE_STATES:
            continue
        remote = (_canonical_ip(conn.raddr.ip), int(conn.raddr.port))
        if remote in wanted:
            found.append((*remote, str(conn.status)))
    return KernelSample(pid, tuple(sorted(found)))


def kernel_sampler(
    endpoints: Mapping[int, Address] | Iterable[Address],
) -> Callable[[int], KernelSample]:
    """A ``sample`` for :func:`run_probe`: the JVM's live sockets to ``endpoints``."""
    pairs = list(endpoints.values()) if isinstance(endpoints, Mapping) else list(endpoints)
    return lambda pid: kernel_sockets(pid, pairs)


# -- the log's view ---------------------------------------------------------------------------


def role_of(node: str) -> tuple[Role, int | None]:
    """The role of a Java connection id and the broker it reaches (None for bootstrap).

    ``-N``: bootstrap entry N; ``+B`` (4.4+) or an id above 2**30 (``2147483647 - B``, older
    clients): the group coordinator on broker B; anything else: broker N's data connection.
    """
    if node.startswith("+"):
        return Role.COORDINATION, int(node[1:])
    n = int(node)
    if n < 0:
        return Role.BOOTSTRAP, None
    if n > 2**30:
        return Role.COORDINATION, COORDINATOR_ID_BASE - n
    return Role.DATA, n


@dataclass
class LogAccount:
    """Counts from replaying a log's connection events (see :func:`build_ledger`)."""

    opened: int = 0
    established: int = 0
    closed: int = 0
    """Connections that were established and then closed (any reason, client close included)."""
    failed: int = 0
    """Dials that never completed: refused, timed out, or a failed synchronous connect."""
    connect_errors: int = 0
    """Of ``failed``, those that failed before a socket was registered ("Error connecting"):
    the only connections ``connection-close-total`` never counts."""
    closed_by_client_close: int = 0
    unmatched: list[LoggedConnectionEvent] = field(default_factory=list)
    """Disconnect lines for a node with no open connection (e.g. a no-op close request)."""

    @property
    def open(self) -> int:
        return self.opened - self.closed - self.failed

    @property
    def metric_closes(self) -> int:
        """What ``connection-close-total`` should say: every registered socket closed."""
        return self.closed + self.failed - self.connect_errors


def _ms(t: datetime, t0: datetime) -> float:
    return (t - t0).total_seconds() * 1000.0


def build_ledger(
    events: Iterable[LoggedConnectionEvent],
    *,
    t0: datetime,
    until: datetime | None = None,
    client_closed_at: datetime | None = None,
) -> tuple[ConnectionLedger, LogAccount]:
    """Replay the log's connection events into a :class:`ConnectionLedger`.

    Each ``connect`` opens a connection (role and broker by :func:`role_of` of its node id);
    ``established`` marks it established; a ``disconnect`` of an established connection closes
    it, of one never established fails it, as does a ``connect_error``. Events after ``until``
    are ignored. If ``client_closed_at`` is given, every connection still open is closed then
    with reason ``client close`` (the client's close() logs nothing per connection). Times in
    the ledger are milliseconds since ``t0``.
    """
    ledger = ConnectionLedger()
    account = LogAccount()
    current: dict[str, int] = {}  # node id as printed -> conn_id of its open connection
    established: set[int] = set()
    for e in events:
        if until is not None and e.timestamp > until:
            break
        t_ms = _ms(e.timestamp, t0)
        if e.kind == "connect":
            role, broker = role_of(e.node)
            conn_id = account.opened
            account.opened += 1
            ledger.opened(t_ms, conn_id, e.host, e.port, broker, role)
            current[e.node] = conn_id
        elif e.kind == "established" and e.node in current:
            ledger.established(t_ms, current[e.node])
            established.add(current[e.node])
            account.established += 1
        elif e.kind in ("disconnect", "connect_error"):
            conn_id_or_none = current.pop(e.node, None)
            if conn_id_or_none is None:
                account.unmatched.append(e)
            elif conn_id_or_none in established:
                ledger.closed(t_ms, conn_id_or_none, e.reason)
                account.closed += 1
            else:
                ledger.failed(t_ms, conn_id_or_none, e.reason)
                account.failed += 1
                account.connect_errors += int(e.kind == "connect_error")
    if client_closed_at is not None:
        for entry in ledger.open_now():
            if entry.conn_id in established:
                ledger.closed(_ms(client_closed_at, t0), entry.conn_id, "client close")
                account.closed += 1
            else:
                ledger.failed(_ms(client_closed_at, t0), entry.conn_id, "client close")
                account.failed += 1
            account.closed_by_client_close += 1
    return ledger, account


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PhaseReport:
    """One JSON line of the probe (``steady`` or ``closed``): record counts and the client's
    connection metrics at that moment, and the moment in the log's clock."""

    phase: str
    records_sent: int
    records_acked: int
    records_consumed: int
    connection_creation_total: int
    connection_close_total: int
    connection_count: int
    log_time: datetime
    raw: Mapping[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PhaseReport:
        """Read one probe line; raises :class:`JavaProbeError` if a metric is missing or not a
        number."""
        metrics = data.get("metrics")
        if not isinstance(metrics, dict) or not all(
            isinstance(metrics.get(name), int | float) for name in METRIC_NAMES
        ):
            raise JavaProbeError(f"the probe's {data.get('phase')!r} line lacks metrics: {data}")
        return cls(
            phase=str(data["phase"]),
            records_sent=int(data["records_sent"]),
            records_acked=int(data["records_acked"]),
            records_consumed=int(data["records_consumed"]),
            # The client reports doubles; these three are counts.
            connection_creation_total=round(metrics["connection-creation-total"]),
            connection_close_total=round(metrics["connection-close-total"]),
            connection_count=round(metrics["connection-count"]),
            log_time=parse_log_time(str(data["log_time"])),
            raw=dict(data),
        )


@dataclass(frozen=True)
class JavaRun(Generic[T]):
    """Everything one probe run produced. ``events`` is the log's connection events (all of
    them; ``connections`` is the dials alone through :func:`connmgr.javalog.parse_connections`,
    which gives 4.4's ``+B`` coordinator ids as the classic ``2147483647 - B``).
    ``ledger`` covers the whole run, closing at client close whatever was still open; the
    ``*_account`` fields count the log up to the steady line, up to the release (the end of
    the caller's sample) and to the end."""

    build: ProbeBuild
    client: Client
    version: str
    pid: int
    records_requested: int
    steady: PhaseReport
    closed: PhaseReport
    started_at: datetime
    released_at: datetime
    log_path: Path
    connections: list[LoggedConnection]
    events: list[LoggedConnectionEvent]
    ledger: ConnectionLedger
    steady_account: LogAccount
    final_account: LogAccount
    open_during_sample: frozenset[int]
    """The log's open-connection counts at every instant from the steady line to the release:
    one value unless a connection opened or closed while the caller sampled."""
    sample: T
    seconds: float
    stderr: str

    @property
    def kernel_count(self) -> int | None:
        """The kernel's socket count from ``sample``, if it is a count or a
        :class:`KernelSample`; None if the sample is something else."""
        if isinstance(self.sample, KernelSample):
            return self.sample.count
        if isinstance(self.sample, int) and not isinstance(self.sample, bool):
            return self.sample
        return None

    def dials(self) -> list[tuple[str, str, Role]]:
        """(node id as logged, host:port, role) of every dial, in order."""
        return [
            (e.node, f"{e.host}:{e.port}", role_of(e.node)[0])
            for e in self.events
            if e.kind == "connect"
        ]

    def closes(self) -> list[tuple[str, str]]:
        """(node id, reason) of every disconnect line, in order (closes at client close are not
        logged and so not listed)."""
        return [(e.node, e.reason) for e in self.events if e.kind == "disconnect"]


def default_extra(version: str, client: Client) -> dict[str, str]:
    """Client settings every run of ``version`` needs: the consumer's
    ``group.protocol=classic`` where the setting exists (3.7+; KIP-848), so 4.x runs the same
    group protocol as 2.1.0 whatever its default. Older clients only warn about settings they
    do not know, but are not given any."""
    numbers = [int(x) for x in re.findall(r"\d+", version)[:2]]
    if client == "consumer" and tuple(numbers) >= (3, 7):
        return {"group.protocol": "classic"}
    return {}


@dataclass(frozen=True, slots=True)
class TransactionPlan:
    """A transactional producer run: ``transactions`` transactions of ``transactional_id``,
    one starting every ``interval_ms`` (counted from the client's construction); with
    ``offsets_group``, each also commits an offset of partition 0 of ``offsets_topic`` for that
    group (sendOffsetsToTransaction: the producer side of consume-transform-produce)."""

    transactional_id: str
    transactions: int = 1
    interval_ms: int = 0
    offsets_group: str | None = None
    offsets_topic: str | None = None

    def probe_args(self) -> list[str]:
        args = [
            "--transactional-id",
            self.transactional_id,
            "--transactions",
            str(self.transactions),
            "--txn-interval-ms",
            str(self.interval_ms),
        ]
        if self.offsets_group is not None:
            if self.offsets_topic is None:
                raise ConnMgrError("a transaction plan with offsets_group needs offsets_topic")
            args += ["--offsets-group", self.offsets_group, "--offsets-topic", self.offsets_topic]
        return args


class _Lines:
    """The probe's stdout, line by line, read on a thread so waits can time out."""

    def __init__(self, stream: IO[str]) -> None:
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._queue.put(line)
        finally:
            self._queue.put(None)

    def next(self, deadline: float) -> str | None:
        """The next line, None at EOF; raises queue.Empty at the deadline."""
        return self._queue.get(timeout=max(0.0, deadline - time.monotonic()))

    def join(self, timeout_s: float) -> None:
        """Wait for EOF (the process has exited, so it comes at once)."""
        self._thread.join(timeout_s)


def _read_tail(path: Path, lines: int = _TAIL_LINES) -> str:
    try:
        return _tail(path.read_text(encoding="utf-8", errors="replace"), lines)
    except OSError:
        return ""


def run_probe(
    build: ProbeBuild,
    *,
    client: Client,
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    sample: Callable[[int], T],
    group: str | None = None,
    settle_ms: int = 1000,
    wait_ms: int = 0,
    extra: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    log_level: Literal["TRACE", "DEBUG", "INFO"] = "TRACE",
    timeout_s: float = 120.0,
    verify: bool = False,
    transaction: TransactionPlan | None = None,
) -> JavaRun[T]:
    """Run the probe once and account for its connections.

    Starts ``java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp ... connmgr.probe.Probe``
    as a ``client`` against ``bootstrap`` (producer: ``records`` records round-robin over
    ``partitions`` partitions of ``topic``, acks=all; consumer: group ``group`` reads ``records``
    records and commits), waits for its steady line (after ``settle_ms``), calls
    ``sample(pid)`` -- the caller's look at the JVM, e.g. :func:`kernel_sampler` -- then lets
    the probe close the client and waits for it to exit. With ``transaction`` the producer is
    transactional (see :class:`TransactionPlan`). ``extra`` settings are passed to the
    client as they are (see :func:`default_extra`). The log goes to ``log_path`` (default: a
    new temporary directory), at ``log_level`` for NetworkClient and WARN for everything else.

    ``timeout_s`` bounds each wait: for the steady line, and then for the exit after release.
    Raises :class:`JavaProbeError` if the probe reports an error, exits non-zero or times out
    (the JVM is killed then), and -- with ``verify`` -- :class:`JavaAccountingMismatch` if
    :func:`cross_check` finds any problem. Exceptions from ``sample`` propagate after the JVM
    has been released and has exited.
    """
    if client not in ("producer", "consumer"):
        raise ConnMgrError(f"client must be 'producer' or 'consumer', got {client!r}")
    if client == "consumer" and not group:
        raise ConnMgrError("a consumer run needs a group")
    if transaction is not None and client != "producer":
        raise ConnMgrError("only a producer can be transactional")
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="connmgr-java-probe-")) / f"{client}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path = log_path.with_name(log_path.name + ".stderr")
    args = [
        str(build.java),
        *JVM_OPTIONS,
        "-cp",
        build.classpath_arg,
        MAIN_CLASS,
        "--client",
        client,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--partitions",
        str(partitions),
        "--records",
        str(records),
        "--settle-ms",
        str(settle_ms),
        "--wait-ms",
        str(wait_ms),
        "--log",
        str(log_path),
        "--log-level",
        log_level,
        # The probe's own deadline for producing/consuming, inside ours for the steady line.
        "--timeout-ms",
        str(max(1, int(timeout_s * 1000) - settle_ms - 5000)),
    ]
    if group:
        args += ["--group", group]
    if transaction is not None:
        args += transaction.probe_args()
    for key, value in (extra or {}).items():
        args += ["--extra", f"{key}={value}"]

    started = time.monotonic()
    with open(stderr_path, "w", encoding="utf-8") as stderr_file:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file,
            text=True,
            encoding="utf-8",
            # Any hs_err file of a crashing JVM lands next to the log, not in the caller's cwd.
            cwd=log_path.parent,
        )
        assert proc.stdout is not None and proc.stdin is not None  # both are PIPEs
        lines = _Lines(proc.stdout)
        try:
            return _drive(
                proc,
                lines,
                build,
                client,
                records,
                sample,
                log_path,
                stderr_path,
                timeout_s,
                started,
                verify,
            )
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            # Close the pipes only once the reader has seen EOF, never under its feet.
            lines.join(10.0)
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()


def _failure(what: str, log_path: Path, stderr_path: Path) -> JavaProbeError:
    return JavaProbeError(
        f"{what}\n--- probe stderr (tail) ---\n{_read_tail(stderr_path)}"
        f"\n--- client log {log_path} (tail) ---\n{_read_tail(log_path, 15)}"
    )


def _expect(
    lines: _Lines, phase: str, deadline: float, log_path: Path, stderr: Path
) -> dict[str, Any]:
    try:
        line = lines.next(deadline)
    except queue.Empty:
        raise _failure(f"no {phase!r} line from the probe in time", log_path, stderr) from None
    if line is None:
        raise _failure(f"the probe exited before its {phase!r} line", log_path, stderr)
    try:
        data = json.loads(line)
    except ValueError:
        raise _failure(f"the probe printed {line.strip()!r}, not JSON", log_path, stderr) from None
    if not isinstance(data, dict):
        raise _failure(f"the probe printed {line.strip()!r}, not an object", log_path, stderr)
    if data.get("phase") == "error":
        raise _failure(f"the probe failed: {data.get('error')}", log_path, stderr)
    if data.get("phase") != phase:
        raise _failure(f"expected phase {phase!r}, the probe printed {data}", log_path, stderr)
    return data


def _drive(
    proc: subprocess.Popen[str],
    lines: _Lines,
    build: ProbeBuild,
    client: Client,
    records: int,
    sample: Callable[[int], T],
    log_path: Path,
    stderr_path: Path,
    timeout_s: float,
    started: float,
    verify: bool,
) -> JavaRun[T]:
    assert proc.stdin is not None  # a PIPE
    steady_json = _expect(lines, "steady", started + timeout_s, log_path, stderr_path)
    try:
        sampled = sample(proc.pid)
    finally:
        # Release the probe whatever the sampler did: a line (or EOF) on stdin means "close".
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write("\n")
            proc.stdin.close()
    deadline = time.monotonic() + timeout_s
    closed_json = _expect(lines, "closed", deadline, log_path, stderr_path)
    try:
        code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise _failure("the probe did not exit after closing", log_path, stderr_path) from None
    if code != 0:
        raise _failure(f"the probe exited with {code}", log_path, stderr_path)

    steady = PhaseReport.from_json(steady_json)
    closed = PhaseReport.from_json(closed_json)
    started_at = parse_log_time(str(steady_json["started_at"]))
    released_at = parse_log_time(str(closed_json["released_at"]))
    text = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    events = parse_connection_events(text)
    ledger, final_account = build_ledger(events, t0=started_at, client_closed_at=closed.log_time)
    _, steady_account = build_ledger(events, t0=started_at, until=steady.log_time)
    run = JavaRun(
        build=build,
        client=client,
        version=str(steady_json.get("version", build.version)),
        pid=proc.pid,
        records_requested=records,
        steady=steady,
        closed=closed,
        started_at=started_at,
        released_at=released_at,
        log_path=log_path,
        connections=parse_connections(text),
        events=events,
        ledger=ledger,
        steady_account=steady_account,
        final_account=final_account,
        open_during_sample=_open_counts(events, started_at, steady.log_time, released_at),
        sample=sampled,
        seconds=time.monotonic() - started,
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
    )
    if verify:
        problems = cross_check(run)
        if problems:
            raise JavaAccountingMismatch(problems, run)
    return run


def _open_counts(
    events: list[LoggedConnectionEvent], t0: datetime, start: datetime, end: datetime
) -> frozenset[int]:
    """The log's open-connection count at ``start`` and after every event up to ``end``."""
    counts = {build_ledger(events, t0=t0, until=start)[1].open}
    for e in events:
        if start < e.timestamp <= end:
            counts.add(build_ledger(events, t0=t0, until=e.timestamp)[1].open)
    return frozenset(counts)


# -- the reconciliation -----------------------------------------------------------------------


def cross_check(run: JavaRun[Any]) -> list[str]:
    """Every disagreement between the log, the client's metrics and the kernel; empty when the
    run is consistent.

    At the steady line and at the end:

    * connections established in the log (``Completed connection``) == the metric
      ``connection-creation-total`` (a failed dial logs ``Initiating`` but is never created),
      with no dial still in progress at the steady line;
    * established-then-closed connections + failed dials that had registered a socket ==
      ``connection-close-total`` (the metric counts every registered socket it closes; at the
      end this includes the connections closed by the client's close(), which logs nothing per
      connection);
    * open connections in the log == ``connection-count`` (0 at the end);

    and while the caller sampled: the kernel's count (from ``run.sample``, see
    :attr:`JavaRun.kernel_count`) == the log's open connections at some instant between the
    steady line and the release. Also: the producer had every record acked, the consumer read
    exactly the records asked for.
    """
    problems: list[str] = []
    for label, account, report in (
        ("steady", run.steady_account, run.steady),
        ("closed", run.final_account, run.closed),
    ):
        if account.established != report.connection_creation_total:
            problems.append(
                f"{label}: log shows {account.established} connections established "
                f"({account.opened} dials, {account.failed} failed), "
                f"connection-creation-total is {report.connection_creation_total}"
            )
        pending = account.opened - account.established - account.failed
        if label == "steady" and pending:
            # Not a steady state: a dial in flight makes the kernel comparison a race.
            problems.append(f"steady: {pending} dials still in progress at the steady line")
        if account.metric_closes != report.connection_close_total:
            problems.append(
                f"{label}: log shows {account.closed} closed + "
                f"{account.failed - account.connect_errors} failed with a socket, "
                f"connection-close-total is {report.connection_close_total}"
            )
        expected_count = account.open if label == "steady" else 0
        if expected_count != report.connection_count:
            problems.append(
                f"{label}: log shows {expected_count} connections open, connection-count is "
                f"{report.connection_count}"
            )
    kernel = run.kernel_count
    if kernel is not None and kernel not in run.open_during_sample:
        problems.append(
            f"kernel: {kernel} live sockets to the brokers, the log shows "
            f"{sorted(run.open_during_sample)} open while sampling"
        )
    if run.client == "producer":
        if run.closed.records_acked != run.records_requested:
            problems.append(f"records: {run.closed.records_acked} of {run.records_requested} acked")
    elif run.closed.records_consumed != run.records_requested:
        problems.append(
            f"records: consumed {run.closed.records_consumed}, expected {run.records_requested}"
        )
    return problems
