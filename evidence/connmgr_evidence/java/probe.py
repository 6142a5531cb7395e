"""Run the Java-client probe once, and account for every connection it makes.

The probe (``benchmarks/java-probe``: a Maven module and ``connmgr.probe.Probe``, built by
:mod:`connmgr_evidence.java.build`) runs the real ``org.apache.kafka:kafka-clients`` of a chosen
version
through one scenario -- producer: send records round-robin over partitions with ``acks=all``;
consumer: join a group, read them, commit; admin client: describe the cluster, list topics --
with ``org.apache.kafka.clients.NetworkClient``
logging to a file. It then reports ``{"phase": "steady", ...}`` on stdout and waits, so the
caller can look at the JVM's sockets (:func:`kernel_sampler`), before closing the client and
reporting ``{"phase": "closed", ...}``. The run's log is then replayed
(:mod:`connmgr_evidence.java.accounting`) and, on request, reconciled with the client's metrics and
the kernel (:func:`connmgr_evidence.java.crosscheck.cross_check`).
"""

from __future__ import annotations

import contextlib
import json
import queue
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Literal, TypeVar

from connmgr.errors import ConnMgrError
from connmgr.javalog import parse_connection_events, parse_connections, parse_log_time
from connmgr.kernel import Address, KernelSample, kernel_sockets
from connmgr_evidence.java.accounting import build_ledger, open_counts
from connmgr_evidence.java.build import ProbeBuild
from connmgr_evidence.java.crosscheck import JavaAccountingMismatch, cross_check
from connmgr_evidence.java.errors import TAIL_LINES, JavaProbeError, output_tail
from connmgr_evidence.java.results import Client, JavaRun, PhaseReport

__all__ = [
    "JVM_OPTIONS",
    "MAIN_CLASS",
    "TransactionPlan",
    "default_extra",
    "kernel_sampler",
    "run_probe",
]

T = TypeVar("T")

JVM_OPTIONS: Final = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
"""Small and quick to start: the probe moves a few records, it does not need a tuned JVM."""

MAIN_CLASS: Final = "connmgr.probe.Probe"


def kernel_sampler(
    endpoints: Mapping[int, Address] | Iterable[Address],
) -> Callable[[int], KernelSample]:
    """A ``sample`` for :func:`run_probe`: the JVM's live sockets to ``endpoints``."""
    pairs = list(endpoints.values()) if isinstance(endpoints, Mapping) else list(endpoints)
    return lambda pid: kernel_sockets(pid, pairs)


def default_extra(version: str, client: Client) -> dict[str, str]:
    """Client settings every run of ``version`` needs: the consumer's
    ``group.protocol=classic`` where the setting exists (3.7+; KIP-848), so 4.x runs the same
    group protocol as 2.1.0 whatever its default. Older clients only warn about settings they
    do not know, but are not given any. The patched client (``4.3.1-patched``) runs with
    every configuration of the patch on (:data:`connmgr_evidence.java.patched.SWITCHES`)."""
    from connmgr_evidence.java.patched import PATCHED_SUFFIX, SWITCHES

    extra = dict(SWITCHES) if version.endswith(PATCHED_SUFFIX) else {}
    numbers = [int(x) for x in re.findall(r"\d+", version)[:2]]
    if client == "consumer" and tuple(numbers) >= (3, 7):
        extra["group.protocol"] = "classic"
    return extra


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
    live: bool = False
    """With ``life_every_ms``: after the planned transactions, one more transaction of one
    record every ``life_every_ms`` through the settle (a transactional producer's life)."""

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
        if self.live:
            args += ["--txn-life", "true"]
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


def _read_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        return output_tail(path.read_text(encoding="utf-8", errors="replace"), lines)
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
    settle_until: float | None = None,
    settle_end_file: Path | None = None,
    life_every_ms: int = 0,
    wait_ms: int = 0,
    extra: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    log_level: Literal["TRACE", "DEBUG", "INFO"] = "TRACE",
    timeout_s: float = 120.0,
    verify: bool = False,
    transaction: TransactionPlan | None = None,
    allow_send_errors: bool = False,
    on_start: Callable[[int], None] | None = None,
) -> JavaRun[T]:
    """Run the probe once and account for its connections.

    Starts ``java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp ... connmgr.probe.Probe``
    as a ``client`` against ``bootstrap`` (producer: ``records`` records round-robin over
    ``partitions`` partitions of ``topic``, acks=all; consumer: group ``group`` reads ``records``
    records and commits), waits for its steady line (after ``settle_ms``, or at
    ``settle_until`` -- a :func:`time.time` instant, the same for every client of a long
    run however long each JVM takes to start -- if given; with
    ``life_every_ms`` the client keeps working through the settle -- a non-transactional
    producer sends one more record, a consumer commits, every ``life_every_ms`` -- and the
    producer flushes before its steady line, so every record sent is acknowledged; an admin
    client asks describeCluster and listTopics every ``life_every_ms``; such a life also ends
    as soon as ``settle_end_file`` exists, the caller's condition), calls
    ``sample(pid)`` -- the caller's look at the JVM, e.g. :func:`kernel_sampler` -- then lets
    the probe close the client and waits for it to exit. With ``transaction`` the producer is
    transactional (see :class:`TransactionPlan`). With ``allow_send_errors`` a living
    producer that could not deliver a record (or commit a transaction) goes on and names it
    in its steady line (``failed_records``, ``aborted_records`` in ``steady.raw``) instead of
    failing the run. ``on_start(pid)`` is called as soon as the JVM is started (to watch it
    while it lives, e.g. sample its sockets). ``extra`` settings are passed to the
    client as they are (see :func:`default_extra`). The log goes to ``log_path`` (default: a
    new temporary directory), at ``log_level`` for NetworkClient and WARN for everything else.

    ``timeout_s`` bounds each wait: for the steady line, and then for the exit after release.
    Raises :class:`JavaProbeError` if the probe reports an error, exits non-zero or times out
    (the JVM is killed then), and -- with ``verify`` -- :class:`JavaAccountingMismatch` if
    :func:`cross_check` finds any problem. Exceptions from ``sample`` propagate after the JVM
    has been released and has exited.
    """
    if client not in ("producer", "consumer", "admin"):
        raise ConnMgrError(f"client must be 'producer', 'consumer' or 'admin', got {client!r}")
    if client == "consumer" and not group:
        raise ConnMgrError("a consumer run needs a group")
    if transaction is not None and client != "producer":
        raise ConnMgrError("only a producer can be transactional")
    if log_path is None:
        log_path = Path(tempfile.mkdtemp(prefix="connmgr-java-probe-")) / f"{client}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path = log_path.with_name(log_path.name + ".stderr")
    settle_for = settle_ms if settle_until is None else round((settle_until - time.time()) * 1000)
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
        *(
            ()
            if settle_until is None
            else ("--settle-until-epoch-ms", str(round(settle_until * 1000)))
        ),
        "--wait-ms",
        str(wait_ms),
        "--life-every-ms",
        str(life_every_ms),
        "--log",
        str(log_path),
        "--log-level",
        log_level,
        # The probe's own deadline for producing/consuming, inside ours for the steady line.
        "--timeout-ms",
        str(max(1, int(timeout_s * 1000) - settle_for - 5000)),
    ]
    if settle_until is not None:
        args += ["--settle-until-epoch-ms", str(round(settle_until * 1000))]
    if settle_end_file is not None:
        args += ["--settle-end-file", str(settle_end_file)]
    if group:
        args += ["--group", group]
    if transaction is not None:
        args += transaction.probe_args()
    if allow_send_errors:
        args += ["--allow-send-errors", "true"]
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
            if on_start is not None:
                on_start(proc.pid)
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
        open_during_sample=open_counts(events, started_at, steady.log_time, released_at),
        sample=sampled,
        seconds=time.monotonic() - started,
        stderr=stderr_path.read_text(encoding="utf-8", errors="replace"),
    )
    if verify:
        problems = cross_check(run)
        if problems:
            raise JavaAccountingMismatch(problems, run)
    return run
