"""What one run of the Java client probe produced: its two phase reports, the log's
connection events and accounts, and the caller's sample of the JVM.

The probe reports ``{"phase": "steady", ...}`` on stdout and waits, so the caller can look at
the JVM's sockets, before closing the client and reporting ``{"phase": "closed", ...}``; each
report carries the client's connection metrics at that moment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Generic, Literal, TypeVar

from connmgr.core.identity import Role
from connmgr.javalog import LoggedConnection, LoggedConnectionEvent, parse_log_time
from connmgr.kernel import KernelSample
from connmgr.ledger import ConnectionLedger
from connmgr_evidence.java.accounting import LogAccount, role_of
from connmgr_evidence.java.build import ProbeBuild
from connmgr_evidence.java.errors import JavaProbeError

__all__ = ["METRIC_NAMES", "Client", "JavaRun", "PhaseReport"]

T = TypeVar("T")
Client = Literal["producer", "consumer", "admin"]

METRIC_NAMES: Final = ("connection-creation-total", "connection-close-total", "connection-count")


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
