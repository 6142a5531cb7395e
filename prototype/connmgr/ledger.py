"""The connection ledger: every connection a client opened and closed, in order, as one typed
record. Every driver writes it -- the simulator, the aiokafka adapter, the observers of stock
aiokafka and of the Java client -- so a simulated run and a real one are read, counted and
compared by the same code; a real client's ledger is also checked against the kernel's view
of the process's sockets.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.endpoint import Endpoint
from connmgr.core.identity import (
    BootstrapNode,
    BrokerNode,
    ConnectionKey,
    CoordinatorNode,
    Purpose,
    Role,
)
from connmgr.core.metrics import Metrics


class ConnEvent(enum.Enum):
    """What happened to a connection."""

    DIAL = "dial"
    """The client started dialling (a handshake begins: TCP, then ApiVersions)."""
    ESTABLISHED = "established"
    FAILED = "failed"
    """The dial produced no usable connection."""
    CLOSED = "closed"
    """The client closed it; ``reason`` is the policy's CloseReason value, or what the
    observed client said."""
    PEER_CLOSED = "peer_closed"
    """The other side closed an established connection (broker down, broker idle reaping)."""
    ADOPTED = "adopted"
    """The socket took a new identity (``key``) without I/O."""


GONE = frozenset({ConnEvent.FAILED, ConnEvent.CLOSED, ConnEvent.PEER_CLOSED})

Dial = tuple[int | None, Role, str]
"""(broker, role, host:port) of one dial: what a real client's dials and the model's are
compared by (the endpoint tells bootstrap dials apart)."""

LogRow = tuple[float, str, str, int, int, str]
"""(t_ms, kind, host, port, node id, reason): a row :func:`connmgr.javalog.render_events`
prints as the Java client's log line."""


@dataclass(frozen=True, slots=True)
class ConnEntry:
    t_ms: float
    kind: ConnEvent
    conn_id: int
    key: ConnectionKey
    """The identity the connection has at this entry (after an adoption, its new one)."""
    reached: int | None = None
    """The broker the socket really reached, where the driver knows it (the simulator);
    None for a real client (the kernel cross-check covers its sockets) or an unreachable
    address."""
    reason: str = ""

    @property
    def host(self) -> str:
        return self.key.endpoint.host

    @property
    def port(self) -> int:
        return self.key.endpoint.port

    @property
    def broker(self) -> int | None:
        return self.key.broker_id

    @property
    def role(self) -> Role:
        return self.key.role


def observed_key(
    host: str, port: int, broker: int | None, role: Role, bootstrap_index: int = 0
) -> ConnectionKey:
    """The key of a connection seen from outside a client (stock aiokafka, the Java client):
    its endpoint, the broker it was dialled for and its role. A coordination connection gets
    the Java client's coordinator identity, so its node id prints as the Java client's."""
    endpoint = Endpoint(host, port)
    if role is Role.BOOTSTRAP:
        return ConnectionKey(endpoint, BootstrapNode(max(bootstrap_index, 0)))
    if broker is None:
        raise ValueError(f"a {role.value} connection to {endpoint} names no broker")
    if role is Role.COORDINATION:
        return ConnectionKey(endpoint, CoordinatorNode(broker), Purpose.COORDINATION)
    return ConnectionKey(endpoint, BrokerNode(broker))


HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class Life:
    """A client's connections over its life up to one instant: socket-seconds (the
    time-integral of open sockets, from the dial to the end) and handshakes (connections
    established), by role, over ``horizon_s`` seconds from the ledger's origin (the
    client's start). What a platform team pays for: a socket held for an hour costs 3,600
    socket-seconds, each new connection one TCP handshake (and one TLS/SASL exchange on a
    secured listener)."""

    horizon_s: float
    socket_seconds: dict[str, float]
    """Per role (``Role`` values): the role a socket played while it was open (a bootstrap
    socket adopted as a broker's counts as bootstrap until its adoption)."""
    handshakes: dict[str, int]
    """Per role: connections established while in that role."""

    def per_hour(self, values: dict[str, float] | dict[str, int]) -> dict[str, float]:
        """``values`` scaled from the horizon to one client-hour (empty horizon: zeros)."""
        scale = HOUR_S / self.horizon_s if self.horizon_s > 0 else 0.0
        return {role: value * scale for role, value in values.items()}

    def scaled(self, time_scale: float) -> Life:
        """The life this one stands for when each of its seconds represents ``time_scale``
        seconds (a scaled-life real run, :mod:`connmgr_evidence.realrun.life`): horizon and
        socket-seconds stretched by ``time_scale``, handshakes as they are (a handshake is
        one, however long the second it happened in). So :meth:`per_hour` of the result is
        per *represented* client-hour: socket-seconds per hour unchanged, handshakes per hour
        divided by ``time_scale``."""
        if time_scale <= 0:
            raise ValueError(f"time_scale={time_scale!r}: must be > 0")
        return Life(
            self.horizon_s * time_scale,
            {role: s * time_scale for role, s in self.socket_seconds.items()},
            dict(self.handshakes),
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Life:
        """The inverse of :meth:`as_json` (up to its rounding)."""
        return cls(
            float(data["horizon_s"]),
            {r: float(v) for r, v in data["socket_seconds"].items()},
            {r: int(v) for r, v in data["handshakes"].items()},
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "horizon_s": round(self.horizon_s, 6),
            "socket_seconds": {r: round(v, 6) for r, v in self.socket_seconds.items()},
            "handshakes": dict(self.handshakes),
        }


@dataclass(frozen=True, slots=True)
class ConnectionCounts:
    """A client's connections counted from its ledger at one instant (the steady state of a
    run): the one result of a simulated and of a real run's connection accounting."""

    opened: int
    """Dials started (a failed one counts)."""
    failed: int
    """Dials that produced no connection."""
    peak: int
    """The most sockets open at once."""
    steady: int
    """Sockets open at the instant counted."""
    by_role: dict[str, dict[str, int]]
    """Per role: opened, closed, failed, open_at_end, peak, handshakes_avoided."""
    by_broker: dict[str, dict[str, int]]
    """Per broker (``"None"``: no broker): opened, open_at_end."""
    life: Life
    """Socket-seconds and handshakes from the origin to the instant counted."""

    def as_json(self) -> dict[str, Any]:
        return {
            "opened": self.opened,
            "failed": self.failed,
            "peak": self.peak,
            "steady": self.steady,
            "by_role": self.by_role,
            "by_broker": self.by_broker,
            "life": self.life.as_json(),
        }


def _broker_order(name: str) -> tuple[int, int]:
    return (1, 0) if name == "None" else (0, int(name))


@dataclass
class ConnectionLedger:
    """Append-only record of one client's connections. ``conn_id`` is the writer's own
    numbering (unique per ledger)."""

    entries: list[ConnEntry] = field(default_factory=list)
    _open: dict[int, ConnEntry] = field(default_factory=dict)
    peak: int = 0
    counts_reached: bool = False
    """Count sockets by the broker they reached (``ConnEntry.reached``; the simulator knows
    it) rather than by the broker their key names."""
    clock: Callable[[], float] | None = field(default=None, compare=False, repr=False)
    """The writer's clock (ms from the origin of ``t_ms``), set by a live writer (a real
    client's driver or observer): "now" for :meth:`counts` without an instant."""

    # --- writing -------------------------------------------------------------------------

    def opened(
        self, t_ms: float, conn_id: int, key: ConnectionKey, reached: int | None = None
    ) -> None:
        entry = ConnEntry(t_ms, ConnEvent.DIAL, conn_id, key, reached)
        self.entries.append(entry)
        self._open[conn_id] = entry
        if len(self._open) > self.peak:
            self.peak = len(self._open)

    def established(self, t_ms: float, conn_id: int) -> None:
        self._follow(t_ms, conn_id, ConnEvent.ESTABLISHED)

    def failed(self, t_ms: float, conn_id: int, reason: str = "") -> None:
        self._gone(t_ms, conn_id, ConnEvent.FAILED, reason)

    def closed(self, t_ms: float, conn_id: int, reason: str = "") -> None:
        self._gone(t_ms, conn_id, ConnEvent.CLOSED, reason)

    def peer_closed(self, t_ms: float, conn_id: int, reason: str = "") -> None:
        self._gone(t_ms, conn_id, ConnEvent.PEER_CLOSED, reason)

    def adopted(self, t_ms: float, conn_id: int, key: ConnectionKey) -> None:
        old = self._open.get(conn_id)
        if old is None:
            return  # reset by the peer a moment before: its end is recorded already
        entry = ConnEntry(t_ms, ConnEvent.ADOPTED, conn_id, key, old.reached)
        self.entries.append(entry)
        self._open[conn_id] = entry

    def record(self, entry: ConnEntry) -> None:
        """Write ``entry`` through the method of its kind (replaying another ledger)."""
        kind = entry.kind
        if kind is ConnEvent.DIAL:
            self.opened(entry.t_ms, entry.conn_id, entry.key, entry.reached)
        elif kind is ConnEvent.ADOPTED:
            self.adopted(entry.t_ms, entry.conn_id, entry.key)
        elif kind is ConnEvent.ESTABLISHED:
            self.established(entry.t_ms, entry.conn_id)
        else:
            self._gone(entry.t_ms, entry.conn_id, kind, entry.reason)

    def _follow(self, t_ms: float, conn_id: int, kind: ConnEvent, reason: str = "") -> None:
        last = self._open.get(conn_id)
        if last is not None:
            self.entries.append(ConnEntry(t_ms, kind, conn_id, last.key, last.reached, reason))

    def _gone(self, t_ms: float, conn_id: int, kind: ConnEvent, reason: str) -> None:
        # Only the first end counts: a close reported after a failure (or twice) is noise.
        if conn_id in self._open:
            self._follow(t_ms, conn_id, kind, reason)
            del self._open[conn_id]

    def until(self, t_ms: float) -> ConnectionLedger:
        """The ledger as it stood at ``t_ms`` (entries up to and including that time)."""
        early = ConnectionLedger()
        for e in self.entries:
            if e.t_ms > t_ms:
                break
            early.record(e)
        return early

    # --- views ---------------------------------------------------------------------------

    def open_now(self) -> list[ConnEntry]:
        """The latest entry of every connection still open, in dial order."""
        return sorted(self._open.values(), key=lambda e: e.conn_id)

    def dial_entries(self) -> list[ConnEntry]:
        return [e for e in self.entries if e.kind is ConnEvent.DIAL]

    def sequence(self) -> list[tuple[int | None, Role]]:
        """(broker, role) of every dial, in order."""
        return [(e.broker, e.role) for e in self.dial_entries()]

    def dials(self) -> list[Dial]:
        """(broker, role, host:port) of every dial, in order."""
        return [(e.broker, e.role, str(e.key.endpoint)) for e in self.dial_entries()]

    def dial_batches(self) -> list[list[Dial]]:
        """:meth:`dials` grouped by the instant they started: a client that dials several
        brokers at one instant (a fetch round) gives them no defined order."""
        batches: list[list[Dial]] = []
        last: float | None = None
        for e in self.dial_entries():
            if e.t_ms != last:
                batches.append([])
                last = e.t_ms
            batches[-1].append((e.broker, e.role, str(e.key.endpoint)))
        return batches

    @property
    def opened_count(self) -> int:
        return sum(1 for e in self.entries if e.kind is ConnEvent.DIAL)

    def count(self, kind: ConnEvent) -> int:
        return sum(1 for e in self.entries if e.kind is kind)

    def counts(self, at_ms: float | None = None) -> ConnectionCounts:
        """What the ledger says at ``at_ms`` (default: the writer's clock now, else the last
        entry): dials, failures, peak, what is open, by role and by broker, and the life so
        far -- one counting for simulated and real runs alike. Entries after ``at_ms`` are not
        expected (use :meth:`until` first)."""
        # The ledger's observations, counted by the same arithmetic as the policy's own
        # metrics (connmgr.core.metrics), so "opened" or "peak" means one thing on both sides.
        counted = Metrics()
        by_broker: dict[str, dict[str, int]] = {}
        roles_now: dict[int, Role] = {}
        for e in self.entries:
            if e.kind is ConnEvent.DIAL:
                counted.on_dial(e.role)
                b = by_broker.setdefault(self._broker_of(e), {"opened": 0, "open_at_end": 0})
                b["opened"] += 1
                roles_now[e.conn_id] = e.role
            elif e.kind in GONE:
                role = roles_now.pop(e.conn_id, e.role)
                counted.on_gone(role, failed=e.kind is ConnEvent.FAILED)
            elif e.kind is ConnEvent.ADOPTED:
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
            where = self._broker_of(e)
            by_broker.setdefault(where, {"opened": 0, "open_at_end": 0})["open_at_end"] += 1
        return ConnectionCounts(
            opened=self.opened_count,
            failed=self.count(ConnEvent.FAILED),
            peak=self.peak,
            steady=len(self._open),
            by_role=by_role,
            by_broker=dict(sorted(by_broker.items(), key=lambda kv: _broker_order(kv[0]))),
            life=self.life(self._instant(at_ms)),
        )

    def _instant(self, at_ms: float | None) -> float:
        if at_ms is not None:
            return at_ms
        if self.clock is not None:
            return self.clock()
        return self.entries[-1].t_ms if self.entries else 0.0

    def life(self, at_ms: float) -> Life:
        """Socket-seconds and handshakes by role from the origin to ``at_ms``; a socket
        still open at ``at_ms`` counts up to it, entries after it are ignored."""
        seconds = {role.value: 0.0 for role in Role}
        handshakes = {role.value: 0 for role in Role}
        since: dict[int, tuple[float, Role]] = {}  # open socket -> (start of its role, role)
        for e in self.entries:
            if e.t_ms > at_ms:
                break
            if e.kind is ConnEvent.DIAL:
                since[e.conn_id] = (e.t_ms, e.role)
                continue
            start = since.get(e.conn_id)
            if start is None:
                continue
            if e.kind is ConnEvent.ESTABLISHED:
                handshakes[start[1].value] += 1
            elif e.kind is ConnEvent.ADOPTED:
                seconds[start[1].value] += (e.t_ms - start[0]) / 1000.0
                since[e.conn_id] = (e.t_ms, e.role)
            elif e.kind in GONE:
                seconds[start[1].value] += (e.t_ms - start[0]) / 1000.0
                del since[e.conn_id]
        for t_ms, role in since.values():
            seconds[role.value] += max(at_ms - t_ms, 0.0) / 1000.0
        return Life(max(at_ms, 0.0) / 1000.0, seconds, handshakes)

    def _broker_of(self, e: ConnEntry) -> str:
        # A writer that knows where each socket went (the simulator) counts it there; a real
        # client's ledger counts it at the broker its key names (None: a bootstrap entry).
        return str(e.reached if self.counts_reached else e.broker)

    def summary(self, at_ms: float | None = None) -> dict[str, Any]:
        """:meth:`counts` as the JSON fields of ``connmgr simulate`` / ``connmgr run``."""
        return self.counts(at_ms).as_json()

    def timeline(self) -> list[dict[str, Any]]:
        """The entries as JSON rows (``connmgr simulate`` and ``connmgr run`` alike)."""
        return [timeline_row(e) for e in self.entries]

    def java_log_rows(self, *, failures: bool = True) -> list[LogRow]:
        """Dials and ends as (t_ms, kind, host, port, node id, reason) rows for
        :func:`connmgr.javalog.render_events` (kind "connect" or "close"); a failed dial's
        end only with ``failures``."""
        ends = GONE if failures else GONE - {ConnEvent.FAILED}
        rows: list[LogRow] = []
        for e in self.entries:
            if e.kind is ConnEvent.DIAL or e.kind in ends:
                kind = "connect" if e.kind is ConnEvent.DIAL else "close"
                rows.append((e.t_ms, kind, e.host, e.port, e.key.node.java_id, e.reason))
        return rows


def key_json(key: ConnectionKey) -> dict[str, Any]:
    return {
        "node": key.node.java_id,
        "broker": key.broker_id,
        "host": key.endpoint.host,
        "port": key.endpoint.port,
        "purpose": key.purpose.value,
        "role": key.role.value,
    }


def timeline_row(e: ConnEntry) -> dict[str, Any]:
    return {
        "t_ms": round(e.t_ms, 3),
        "event": e.kind.value,
        "conn": e.conn_id,
        "reached": e.reached,
        **key_json(e.key),
        **({"reason": e.reason} if e.reason else {}),
    }
