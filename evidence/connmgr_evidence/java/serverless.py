"""Short-lived Java producers in one long-lived probe JVM (``Probe --client serverless``).

A serverless function starts a producer, sends a few records and closes it. Starting a JVM for
each would time the JVM's start (a second or more) rather than the client's, so the probe
keeps one JVM and builds a new ``KafkaProducer`` per start, on request: :class:`ServerlessProbe`
sends the start's number on the probe's stdin, the probe constructs the producer, sends the
records (value ``<prefix>:<start>:<i>``, partition ``i % partitions``, acks=all), waits for
every ack and reports; the caller looks at the JVM's sockets (``between``); then the probe
closes the producer and reports its connection metrics, read after the close. Only one producer
exists at a time. What a JVM shares between its producers -- loaded classes, JIT-compiled
code, the TLS provider -- is shared here too: a warm process, like a reused function instance.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from connmgr_evidence.java.build import ProbeBuild
from connmgr_evidence.java.errors import JavaProbeError
from connmgr_evidence.java.probe import JVM_OPTIONS, MAIN_CLASS, _expect, _Lines, default_extra

__all__ = ["JavaServerlessStart", "ServerlessProbe"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class JavaServerlessStart:
    """One producer of the probe, as it reported itself.

    ``sent`` / ``acked``: records sent and acknowledged (an unacknowledged one is named in
    ``errors``); ``first_ms``: from just before the producer was constructed to its first ack
    (None without one); ``created``: its ``connection-creation-total`` after the close (every
    connection it completed, the client's own count); ``closed_ms``: construction to the end of
    ``close()``."""

    start: int
    sent: int
    acked: int
    errors: tuple[str, ...]
    first_ms: float | None
    created: int
    closed_ms: float


class ServerlessProbe:
    """The probe JVM in ``serverless`` mode (see the module docstring), as a context manager.

    Entering starts the JVM and waits for its ``ready`` line; :meth:`run_start` runs one
    producer; leaving sends ``quit`` and waits for the exit (killing the JVM if it does not
    exit within ``timeout_s``). NetworkClient logs to ``log_path`` at ``log_level`` (INFO: the
    bootstrap closes and failures, not every dial or request). ``extra`` settings are added
    to the producer's configuration after :func:`~connmgr_evidence.java.probe.default_extra` (so
    ``4.3.1-patched`` runs with its switches on). Each wait for a line is bounded by
    ``timeout_s``; a missing, malformed or error line raises :class:`JavaProbeError` with the
    probe's stderr and log tails.
    """

    def __init__(
        self,
        build: ProbeBuild,
        *,
        bootstrap: str,
        topic: str,
        partitions: int,
        records: int,
        value_prefix: str,
        extra: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        log_level: Literal["TRACE", "DEBUG", "INFO"] = "INFO",
        timeout_s: float = 60.0,
    ) -> None:
        if records < 1 or partitions < 1:
            raise ValueError(f"records and partitions must be >= 1, got {records}, {partitions}")
        self.build = build
        self.log_path = log_path or (
            Path(tempfile.mkdtemp(prefix="connmgr-java-serverless-")) / "serverless.log"
        )
        self._stderr_path = self.log_path.with_name(self.log_path.name + ".stderr")
        self._timeout_s = timeout_s
        settings = {**default_extra(build.version, "producer"), **(extra or {})}
        self._args = [
            str(build.java),
            *JVM_OPTIONS,
            "-cp",
            build.classpath_arg,
            MAIN_CLASS,
            "--client",
            "serverless",
            "--bootstrap",
            bootstrap,
            "--topic",
            topic,
            "--partitions",
            str(partitions),
            "--records",
            str(records),
            "--value-prefix",
            value_prefix,
            "--log",
            str(self.log_path),
            "--log-level",
            log_level,
            "--timeout-ms",
            str(max(1, int(timeout_s * 1000) - 5000)),
        ]
        for key, value in settings.items():
            self._args += ["--extra", f"{key}={value}"]
        self._proc: subprocess.Popen[str] | None = None
        self._lines: _Lines | None = None
        self._stderr: Any = None
        self.version: str | None = None
        """kafka-clients' own version string, from the ready line."""

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise JavaProbeError("the serverless probe is not running")
        return self._proc.pid

    def __enter__(self) -> Self:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # Closed in __exit__: the JVM writes to it for as long as it lives.
        self._stderr = open(self._stderr_path, "w", encoding="utf-8")
        self._proc = subprocess.Popen(
            self._args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            cwd=self.log_path.parent,
        )
        assert self._proc.stdout is not None
        self._lines = _Lines(self._proc.stdout)
        try:
            ready = self._expect("ready")
        except BaseException:
            self._release()  # the failure to report is this one, not the exit code
            raise
        self.version = str(ready.get("version"))
        return self

    def _expect(self, phase: str) -> dict[str, Any]:
        assert self._lines is not None
        deadline = time.monotonic() + self._timeout_s
        return _expect(self._lines, phase, deadline, self.log_path, self._stderr_path)

    def _send(self, line: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(line + "\n")
        self._proc.stdin.flush()

    def run_start(self, start: int, between: Callable[[int], T]) -> tuple[JavaServerlessStart, T]:
        """Run producer number ``start``: construct, send, await the acks; call
        ``between(pid)`` (the JVM's pid) while it still holds its connections; close it.
        Returns its report and what ``between`` returned. ``between``'s exception propagates
        once the producer is closed."""
        self._send(str(start))
        acked = self._expect("acked")
        try:
            seen = between(self.pid)
        finally:
            self._send("")
            closed = self._expect("closed")
        if acked.get("start") != start or closed.get("start") != start:
            raise JavaProbeError(f"start {start}: the probe answered for {acked}, {closed}")
        first = acked.get("ttfa_ms")
        report = JavaServerlessStart(
            start=start,
            sent=int(acked["sent"]),
            acked=int(acked["acked"]),
            errors=tuple(str(e) for e in acked.get("errors", ())),
            first_ms=None if first is None else float(first),
            created=int(closed["metrics"]["connection-creation-total"]),
            closed_ms=float(closed["closed_ms"]),
        )
        return report, seen

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        code = self._release()
        if exc_type is None and code not in (None, 0):
            raise JavaProbeError(f"the serverless probe exited with {code}")

    def _release(self) -> int | None:
        """Ask the JVM to quit, wait (kill it after ``timeout_s``), close the pipes and the
        stderr file; the exit code, None if it was not running. Idempotent."""
        proc, lines = self._proc, self._lines
        code: int | None = None
        if proc is not None:
            with contextlib.suppress(OSError, ValueError):
                self._send("quit")
            try:
                proc.wait(timeout=self._timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if lines is not None:
                lines.join(10.0)
            for stream in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    if stream is not None:
                        stream.close()
            code = proc.returncode
            self._proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        return code
