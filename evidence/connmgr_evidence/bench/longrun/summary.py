"""The long run's figures, from what it recorded: per client, per variant, per broker. Pure
functions of the run's rows and connection lives; the report prints them.

Three sources, kept apart because they see different things:

* the clients' logs (:mod:`.lives`): every dial, TCP connect, TLS+SASL handshake and close,
  by role -- exact, per client, on the run's clock to the millisecond;
* the kernel (:mod:`.sampling`): the live sockets each client JVM held to each broker, every
  few seconds -- the ground truth, but sampled;
* the brokers' JMX: each broker's own count of connections on each listener -- both
  variants together (they share the listener), sampled.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from connmgr.core.identity import Role
from connmgr_evidence.bench.longrun.lives import ConnLife, open_at
from connmgr_evidence.bench.longrun.sampling import SocketRow
from connmgr_evidence.java.jmx import BrokerReading

__all__ = [
    "BURST_TAIL_S",
    "ClientFigures",
    "Window",
    "broker_series",
    "client_figures",
    "jmx_series",
    "kernel_socket_seconds",
    "peak",
    "totals_by_time",
]

BURST_TAIL_S: Final = 10.0
"""A phase's burst window runs from its start to this long after its end: clients
reconnect to a broker that came back within a few seconds."""

ROLES: Final = tuple(r.value for r in Role)


@dataclass(frozen=True, slots=True)
class Window:
    """``[start_s, end_s)`` on the run's clock."""

    name: str
    start_s: float
    end_s: float

    def holds(self, t_s: float | None) -> bool:
        return t_s is not None and self.start_s <= t_s < self.end_s


@dataclass(frozen=True, slots=True)
class ClientFigures:
    """One client's connections, from its log (see the module doc). ``by_role`` is role ->
    {dials, tcp, handshakes, closes, socket_seconds}; ``windows`` is window name -> {dials, tcp,
    handshakes} started in it; ``bootstrap_open`` the bootstrap sockets held at the instant
    asked (just before the rolling restart). A close is a connection that ended during the
    life (failed dials included), not at the client's close."""

    variant: str
    client: str
    dials: int
    tcp: int
    handshakes: int
    peak: int
    socket_seconds: float
    by_role: dict[str, dict[str, float]]
    windows: dict[str, dict[str, int]]
    bootstrap_open: int
    ports_dialled_after_move: dict[int, int]
    bootstrap_gone_s: float | None
    """When its last bootstrap socket closed (seconds on the run's clock); None if one was
    still open when the client closed."""
    unready: dict[str, int]
    """``role: reason`` -> connections whose TCP connect completed but whose handshake never
    did (closed first: by the patch, a setup timeout, a broker going away)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "client": self.client,
            "dials": self.dials,
            "tcp_connects": self.tcp,
            "handshakes": self.handshakes,
            "peak": self.peak,
            "socket_seconds": round(self.socket_seconds, 3),
            "by_role": {r: {k: round(v, 3) for k, v in d.items()} for r, d in self.by_role.items()},
            "windows": self.windows,
            "bootstrap_open_before_restart": self.bootstrap_open,
            "bootstrap_gone_s": self.bootstrap_gone_s,
            "unready": self.unready,
            "ports_dialled_after_move": {
                str(p): n for p, n in self.ports_dialled_after_move.items()
            },
        }


def _peak(lives: Sequence[ConnLife]) -> int:
    """The most sockets held at once (an end at the same instant as a dial frees first)."""
    edges = sorted(
        [(c.dialled_s, 1) for c in lives]
        + [(c.ended_s, -1) for c in lives if c.ended_s is not None]
    )
    held = best = 0
    for _t, step in edges:
        held += step
        best = max(best, held)
    return best


def _bootstrap_gone(lives: Sequence[ConnLife]) -> float | None:
    boot = [c for c in lives if c.role is Role.BOOTSTRAP]
    if any(c.ended_s is None or c.reason == "client close" for c in boot):
        return None
    return max((c.ended_s for c in boot if c.ended_s is not None), default=0.0)


def client_figures(
    variant: str,
    client: str,
    lives: Sequence[ConnLife],
    *,
    until_s: float,
    windows: Iterable[Window],
    bootstrap_at_s: float,
    move_begin_s: float | None,
) -> ClientFigures:
    """The figures of one client whose connections are ``lives``, socket-seconds counted up
    to ``until_s``; dials of each port from ``move_begin_s`` on (None: no move)."""
    by_role: dict[str, dict[str, float]] = {
        r: {"dials": 0, "tcp": 0, "handshakes": 0, "closes": 0, "socket_seconds": 0.0}
        for r in ROLES
    }
    for c in lives:
        row = by_role[c.role.value]
        row["dials"] += 1
        row["tcp"] += c.connected_s is not None
        row["handshakes"] += c.ready_s is not None
        row["closes"] += c.ended_s is not None and c.reason != "client close"
        row["socket_seconds"] += c.seconds(until_s)
    counted = {
        w.name: {
            "dials": sum(w.holds(c.dialled_s) for c in lives),
            "tcp": sum(w.holds(c.connected_s) for c in lives),
            "handshakes": sum(w.holds(c.ready_s) for c in lives),
        }
        for w in windows
    }
    ports: dict[int, int] = defaultdict(int)
    if move_begin_s is not None:
        for c in lives:
            if c.dialled_s >= move_begin_s:
                ports[c.port] += 1
    return ClientFigures(
        variant=variant,
        client=client,
        dials=len(lives),
        tcp=sum(c.connected_s is not None for c in lives),
        handshakes=sum(c.ready_s is not None for c in lives),
        peak=_peak(lives),
        socket_seconds=sum(c.seconds(until_s) for c in lives),
        by_role=by_role,
        windows=counted,
        bootstrap_open=open_at(lives, bootstrap_at_s, Role.BOOTSTRAP),
        ports_dialled_after_move=dict(sorted(ports.items())),
        bootstrap_gone_s=_bootstrap_gone(lives),
        unready=dict(
            sorted(
                Counter(
                    f"{c.role.value}: {c.reason or 'open'}"
                    for c in lives
                    if c.connected_s is not None and c.ready_s is None
                ).items()
            )
        ),
    )


# -- the kernel's time series -------------------------------------------------------------------


def totals_by_time(
    rows: Iterable[SocketRow], *, variant: str | None = None, broker: int | None = None
) -> list[tuple[float, int]]:
    """(t_s, sockets) per sample, summed over the clients (of ``variant``) and brokers (or
    ``broker`` only), in time order."""
    sums: dict[float, int] = defaultdict(int)
    for r in rows:
        if (variant is None or r.variant == variant) and (broker is None or r.broker == broker):
            sums[r.t_s] += r.sockets
    return sorted(sums.items())


def broker_series(rows: Iterable[SocketRow], variant: str) -> dict[int, list[tuple[float, int]]]:
    """Broker -> (t_s, sockets ``variant``'s clients held to it) per sample."""
    listed = list(rows)
    brokers = sorted({r.broker for r in listed})
    return {b: totals_by_time(listed, variant=variant, broker=b) for b in brokers}


def peak(series: Sequence[tuple[float, int]]) -> int:
    return max((n for _t, n in series), default=0)


def kernel_socket_seconds(series: Sequence[tuple[float, int]]) -> float:
    """Socket-seconds of a sampled series: each sample's count held until the next sample
    (the last one counts for nothing)."""
    return sum(n * (t1 - t0) for (t0, n), (t1, _) in pairwise(series))


def jmx_series(
    readings: Iterable[BrokerReading], origin: float, listener: str, attribute: str
) -> dict[int, list[tuple[float, float | None]]]:
    """Broker -> (t_s on the run's clock, ``attribute`` of ``listener``; None while the
    broker could not be read) per reading."""
    found: dict[int, list[tuple[float, float | None]]] = defaultdict(list)
    for r in readings:
        found[r.broker].append((r.t_ms / 1000.0 - origin, r.value(listener, attribute)))
    return {b: sorted(s, key=lambda p: p[0]) for b, s in sorted(found.items())}


def kernel_vs_jmx(
    rows: Sequence[SocketRow],
    readings: Sequence[BrokerReading],
    origin: float,
    within_s: float,
) -> dict[int, dict[str, float]]:
    """Broker -> how the brokers' SASL_SSL ``connection-count`` compares with the sockets
    every client JVM held to it (the kernel, both variants), at kernel samples with a JMX
    reading of that broker within ``within_s``: {pairs, equal, median_diff, max_diff}
    (diff = broker count - kernel count; the two are sampled apart, so they differ while
    connections come and go)."""
    counts = jmx_series(readings, origin, "SASL_SSL", "connection-count")
    out: dict[int, dict[str, float]] = {}
    for broker, series in counts.items():
        kernel = totals_by_time(rows, broker=broker)
        diffs: list[float] = []
        for t, n in kernel:
            near = [
                (abs(tj - t), v) for tj, v in series if v is not None and abs(tj - t) <= within_s
            ]
            if near:
                diffs.append(min(near)[1] - n)
        out[broker] = {
            "pairs": len(diffs),
            "equal": sum(d == 0 for d in diffs),
            "median_diff": statistics.median(diffs) if diffs else 0.0,
            "max_diff": max(diffs, key=abs, default=0.0),
        }
    return out
