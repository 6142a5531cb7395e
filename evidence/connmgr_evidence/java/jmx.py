"""The brokers' own connection counts, read over remote JMX by the probe module's
``connmgr.probe.BrokerJmx`` (JDK classes only) while a cluster started with ``jmx=True``
runs.

Every ``every_s`` the poller reads, per broker, the
``kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N`` MBeans and prints
one JSON line per broker: per listener, each of :data:`ATTRIBUTES` summed over the network
processors. A broker that cannot be read (stopped for a restart or a move) gives a line with
``up: false``; the poller connects again at the next sample, so a broker that came back is
read again at once (its JMX port does not change when it moves). :func:`parse_reading` reads
one line; :class:`BrokerJmxPoller` runs the JVM and collects them.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Final, Self

from connmgr_evidence.java.build import ProbeBuild
from connmgr_evidence.java.errors import JavaProbeError, output_tail
from connmgr_evidence.java.probe import JVM_OPTIONS

__all__ = ["ATTRIBUTES", "MAIN_CLASS", "BrokerJmxPoller", "BrokerReading", "parse_reading"]

MAIN_CLASS: Final = "connmgr.probe.BrokerJmx"
ATTRIBUTES: Final = (
    "connection-count",
    "connection-creation-total",
    "connection-close-total",
    "successful-authentication-total",
    "failed-authentication-total",
)
"""The Selector metrics read per listener (the names of ``BrokerJmx.ATTRIBUTES``)."""


@dataclass(frozen=True, slots=True)
class BrokerReading:
    """One broker at one instant: ``t_ms`` (Unix epoch, the poller's clock), whether it could
    be read, and listener -> attribute -> value (summed over the network processors; a
    listener without a value for an attribute leaves it out)."""

    t_ms: int
    broker: int
    up: bool
    listeners: Mapping[str, Mapping[str, float]]
    error: str = ""

    def value(self, listener: str, attribute: str) -> float | None:
        """``attribute`` of ``listener``; None if the broker was down or lacks it."""
        return self.listeners.get(listener, {}).get(attribute)


def parse_reading(line: str) -> BrokerReading | None:
    """One line of ``BrokerJmx``'s output; None for its last line (``{"phase": "closed"}``).

    Raises :class:`JavaProbeError` for a line that is not one of the two shapes the class
    documents (not JSON, no broker, a listener that is not an object of numbers).
    """
    try:
        data = json.loads(line)
    except ValueError:
        raise JavaProbeError(f"BrokerJmx printed {line.strip()!r}, not JSON") from None
    if not isinstance(data, dict):
        raise JavaProbeError(f"BrokerJmx printed {line.strip()!r}, not an object")
    if data.get("phase") == "closed":
        return None
    try:
        t_ms, broker, up = int(data["t_ms"]), int(data["broker"]), data["up"]
    except (KeyError, TypeError, ValueError):
        raise JavaProbeError(f"BrokerJmx line without t_ms, broker or up: {data}") from None
    if not isinstance(up, bool):
        raise JavaProbeError(f"BrokerJmx line whose 'up' is not a boolean: {data}")
    listeners: dict[str, dict[str, float]] = {}
    raw = data.get("listeners", {}) if up else {}
    if not isinstance(raw, dict):
        raise JavaProbeError(f"BrokerJmx line whose listeners are not an object: {data}")
    for name, values in raw.items():
        if not isinstance(values, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values.values()
        ):
            raise JavaProbeError(f"BrokerJmx listener {name!r} is not numbers: {values}")
        listeners[str(name)] = {str(k): float(v) for k, v in values.items()}
    return BrokerReading(t_ms, broker, up, listeners, str(data.get("error", "")))


class BrokerJmxPoller:
    """``BrokerJmx`` polling ``endpoints`` (broker id -> JMX (host, port), e.g.
    ``KafkaCluster.jmx_endpoints()``) every ``every_s`` seconds, with the probe build's
    classpath and JVM; its stderr goes to ``stderr_path``.

    :meth:`start` starts the JVM; :meth:`readings` is what it read so far (thread-safe);
    :meth:`stop` ends it and returns every reading. Use as a context manager. A line that
    cannot be parsed fails :meth:`stop` (with the JVM's stderr tail) rather than being
    dropped.
    """

    def __init__(
        self,
        build: ProbeBuild,
        endpoints: Mapping[int, tuple[str, int]],
        every_s: float,
        stderr_path: Path,
    ) -> None:
        if every_s <= 0:
            raise JavaProbeError(f"every_s must be > 0, got {every_s!r}")
        self._args = [str(build.java), *JVM_OPTIONS, "-cp", build.classpath_arg, MAIN_CLASS]
        for broker, (host, port) in sorted(endpoints.items()):
            self._args += ["--broker", f"{broker}={host}:{port}"]
        self._args += ["--every-ms", str(max(1, round(every_s * 1000)))]
        self._stderr_path = stderr_path
        self._lock = threading.Lock()
        self._readings: list[BrokerReading] = []
        self._problem: str | None = None
        self._closed = False
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> Self:
        self._stderr_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._stderr_path, "w", encoding="utf-8") as stderr:
            self._process = subprocess.Popen(
                self._args,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
                cwd=self._stderr_path.parent,
            )
        assert self._process.stdout is not None  # a PIPE
        self._reader = threading.Thread(
            target=self._read, args=(self._process.stdout,), name="broker-jmx", daemon=True
        )
        self._reader.start()
        return self

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                reading = parse_reading(line)
            except JavaProbeError as exc:
                with self._lock:
                    self._problem = self._problem or str(exc)
                continue
            with self._lock:
                if reading is None:
                    self._closed = True
                else:
                    self._readings.append(reading)

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def readings(self) -> list[BrokerReading]:
        """Every reading so far, in the order printed."""
        with self._lock:
            return list(self._readings)

    def stop(self, timeout_s: float = 30.0) -> list[BrokerReading]:
        """End the polling (a line on its stdin), wait for the JVM to exit, and return every
        reading. Raises :class:`JavaProbeError` if it had printed a line that is not a
        reading, did not say it closed, or exited non-zero (it is killed after
        ``timeout_s``)."""
        process = self._process
        if process is None:
            return []
        assert process.stdin is not None  # a PIPE
        with contextlib.suppress(BrokenPipeError, OSError):
            process.stdin.write("\n")
            process.stdin.close()
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if self._reader is not None:
            self._reader.join(timeout_s)
        if process.stdout is not None:
            process.stdout.close()  # only once the reader has seen EOF, never under its feet
        self._process = None
        tail = output_tail(self._stderr_path.read_text(encoding="utf-8", errors="replace"))
        with self._lock:
            problem = self._problem
            closed = self._closed
        if problem is not None or code != 0 or not closed:
            what = problem or f"exit {code}" + ("" if closed else ", no closing line")
            raise JavaProbeError(f"BrokerJmx failed: {what}\n--- stderr (tail) ---\n{tail}")
        return self.readings()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.stop()
            return
        with contextlib.suppress(JavaProbeError):
            self.stop()
