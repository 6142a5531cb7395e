"""The connection ledger: every connection a real client opened and closed, with its role and
broker, in order. Real-client drivers write it from their own hooks; it is then checked
against the kernel's view of the process's sockets, and compared with simulated runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connmgr.core.identity import Role
from connmgr.core.metrics import Metrics


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    t_ms: float
    kind: str
    """``open`` (dial started), ``established``, ``failed``, ``close`` or ``adopt``."""
    conn_id: int
    host: str
    port: int
    broker: int | None
    role: Role
    reason: str = ""


@dataclass
class ConnectionLedger:
    """Append-only record of one client's connections. ``conn_id`` is the recorder's own
    numbering (unique per ledger)."""

    entries: list[LedgerEntry] = field(default_factory=list)
    _open: dict[int, LedgerEntry] = field(default_factory=dict)
    peak: int = 0

    def opened(
        self, t_ms: float, conn_id: int, host: str, port: int, broker: int | None, role: Role
    ) -> None:
        entry = LedgerEntry(t_ms, "open", conn_id, host, port, broker, role)
        self.entries.append(entry)
        self._open[conn_id] = entry
        self.peak = max(self.peak, len(self._open))

    def established(self, t_ms: float, conn_id: int) -> None:
        self._follow(t_ms, conn_id, "established")

    def failed(self, t_ms: float, conn_id: int, reason: str = "") -> None:
        self._follow(t_ms, conn_id, "failed", reason)
        self._open.pop(conn_id, None)

    def closed(self, t_ms: float, conn_id: int, reason: str = "") -> None:
        if conn_id in self._open:
            self._follow(t_ms, conn_id, "close", reason)
            del self._open[conn_id]

    def adopted(self, t_ms: float, conn_id: int, broker: int, role: Role) -> None:
        old = self._open[conn_id]
        entry = LedgerEntry(t_ms, "adopt", conn_id, old.host, old.port, broker, role)
        self.entries.append(entry)
        self._open[conn_id] = entry

    def _follow(self, t_ms: float, conn_id: int, kind: str, reason: str = "") -> None:
        last = self._open.get(conn_id)
        if last is None:
            return
        self.entries.append(
            LedgerEntry(t_ms, kind, conn_id, last.host, last.port, last.broker, last.role, reason)
        )

    def until(self, t_ms: float) -> ConnectionLedger:
        """The ledger as it stood at ``t_ms`` (entries up to and including that time)."""
        early = ConnectionLedger()
        for e in self.entries:
            if e.t_ms > t_ms:
                break
            if e.kind == "open":
                early.opened(e.t_ms, e.conn_id, e.host, e.port, e.broker, e.role)
            elif e.kind == "established":
                early.established(e.t_ms, e.conn_id)
            elif e.kind == "failed":
                early.failed(e.t_ms, e.conn_id, e.reason)
            elif e.kind == "close":
                early.closed(e.t_ms, e.conn_id, e.reason)
            elif e.kind == "adopt" and e.broker is not None:
                early.adopted(e.t_ms, e.conn_id, e.broker, e.role)
        return early

    # --- views ---------------------------------------------------------------------------

    def open_now(self) -> list[LedgerEntry]:
        """The latest entry of every connection still open, in dial order."""
        return sorted(self._open.values(), key=lambda e: e.conn_id)

    def sequence(self) -> list[tuple[int | None, Role]]:
        """(broker, role) of every dial, in order."""
        return [(e.broker, e.role) for e in self.entries if e.kind == "open"]

    def dials(self) -> list[tuple[int | None, Role, str]]:
        """(broker, role, host:port dialled) of every dial, in order: what is compared with
        the simulator (the endpoint tells bootstrap dials apart)."""
        return [(e.broker, e.role, f"{e.host}:{e.port}") for e in self.entries if e.kind == "open"]

    @property
    def opened_count(self) -> int:
        return sum(1 for e in self.entries if e.kind == "open")

    def summary(self) -> dict[str, Any]:
        """The same counting fields as a simulated run's JSON."""
        # The ledger's observations, counted by the same arithmetic as the policy's own
        # metrics (connmgr.core.metrics), so "opened" or "peak" means one thing on both sides.
        counted = Metrics()
        by_broker: dict[str, dict[str, int]] = {}
        roles_now: dict[int, Role] = {}
        for e in self.entries:
            if e.kind == "open":
                counted.on_dial(e.role)
                b = by_broker.setdefault(str(e.broker), {"opened": 0, "open_at_end": 0})
                b["opened"] += 1
                roles_now[e.conn_id] = e.role
            elif e.kind in ("close", "failed"):
                role = roles_now.pop(e.conn_id, e.role)
                counted.on_gone(role, failed=e.kind == "failed")
            elif e.kind == "adopt":
                counted.on_role_change(roles_now[e.conn_id], e.role)
                roles_now[e.conn_id] = e.role
        by_role: dict[str, dict[str, int]] = {
            role.value: {
                "opened": c.opened,
                "closed": c.closed,
                "failed": c.failed,
                "open_at_end": 0,
                "peak": c.peak,
                "handshakes_avoided": c.handshakes_avoided,
            }
            for role, c in counted.by_role.items()
        }
        for e in self._open.values():
            by_role[e.role.value]["open_at_end"] += 1
            by_broker.setdefault(str(e.broker), {"opened": 0, "open_at_end": 0})["open_at_end"] += 1
        return {
            "opened": self.opened_count,
            "failed": sum(1 for e in self.entries if e.kind == "failed"),
            "peak": self.peak,
            "steady": len(self._open),
            "by_role": by_role,
            "by_broker": by_broker,
        }

    def timeline(self) -> list[dict[str, Any]]:
        return [
            {
                "t_ms": round(e.t_ms, 3),
                "event": e.kind,
                "conn": e.conn_id,
                "host": e.host,
                "port": e.port,
                "broker": e.broker,
                "role": e.role.value,
                **({"reason": e.reason} if e.reason else {}),
            }
            for e in self.entries
        ]
