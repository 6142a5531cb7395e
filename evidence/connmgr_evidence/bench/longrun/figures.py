"""Everything the report prints, computed once from a :class:`~.drive.LongRunResult`: the
phase windows, each client's figures, each variant's totals, each broker's view. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

from connmgr_evidence.bench.longrun.drive import LongRunResult, PhaseEvent
from connmgr_evidence.bench.longrun.summary import (
    BURST_TAIL_S,
    ROLES,
    ClientFigures,
    Window,
    broker_series,
    client_figures,
    jmx_series,
    kernel_socket_seconds,
    kernel_vs_jmx,
    peak,
    totals_by_time,
)

__all__ = ["RunFigures", "VariantFigures", "counter_increase", "figures", "windows_of"]


@dataclass(frozen=True, slots=True)
class VariantFigures:
    """One variant's totals over its clients (see :class:`ClientFigures`) and the kernel's
    view of them: ``peak`` and ``broker_peaks`` are the most sockets its clients held at
    one sample (to all brokers, to each), ``steady`` the sum of each client's sockets at
    its steady line (the end of its life), ``kernel_socket_seconds`` the sampled
    integral."""

    variant: str
    version: str
    clients: int
    failed_clients: int
    dials: int
    tcp: int
    handshakes: int
    closes: int
    socket_seconds: float
    by_role: dict[str, dict[str, float]]
    windows: dict[str, dict[str, int]]
    bootstrap_open: int
    peak: int
    steady: int
    kernel_socket_seconds: float
    broker_peaks: dict[int, int]
    dials_after_move: dict[str, int]
    bootstrap_gone_s: float | None
    """When the variant's last bootstrap socket closed (None: one lived to its client's
    close)."""
    unready: dict[str, int]
    """Connections TCP-connected but never ready, by ``role: reason`` (see
    :attr:`ClientFigures.unready`)."""
    """``old`` / ``new``: dials of the moved broker's old and new SASL_SSL port from the
    move's start on."""

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RunFigures:
    windows: tuple[Window, ...]
    clients: tuple[ClientFigures, ...]
    variants: tuple[VariantFigures, ...]
    broker_jmx_peak: dict[int, float]
    broker_handshakes: dict[int, float]
    """Broker -> TLS+SASL handshakes it completed on SASL_SSL over the run (JMX
    ``successful-authentication-total``, its resets at restarts accounted for)."""
    crosscheck: dict[int, dict[str, float]]


def _first(events: Sequence[PhaseEvent], what: str) -> float | None:
    return next((e.t_s for e in events if e.what == what), None)


def windows_of(events: Sequence[PhaseEvent]) -> tuple[Window, ...]:
    """The restart window (its start to :data:`BURST_TAIL_S` after its end), a quiet window
    of the same length just before it, and the move's window; those the run reached."""
    found: list[Window] = []
    begin, end = _first(events, "restart-begin"), _first(events, "restart-end")
    if begin is not None and end is not None:
        length = end + BURST_TAIL_S - begin
        found.append(Window("before-restart", max(0.0, begin - length), begin))
        found.append(Window("restart", begin, end + BURST_TAIL_S))
    begin, end = _first(events, "move-begin"), _first(events, "move-end")
    if begin is not None and end is not None:
        found.append(Window("move", begin, end + BURST_TAIL_S))
    return tuple(found)


def counter_increase(values: Sequence[float | None]) -> float:
    """How much a counter grew over ``values`` (None: not read), counting a drop as a reset
    to zero (a restarted broker's counters start again)."""
    seen = [v for v in values if v is not None]
    total = 0.0
    for before, after in pairwise(seen):
        total += after - before if after >= before else after
    return total


def figures(result: LongRunResult) -> RunFigures:
    """The report's figures (see the module doc)."""
    windows = windows_of(result.events)
    restart_begin = _first(result.events, "restart-begin")
    bootstrap_at = (restart_begin - 0.001) if restart_begin is not None else result.settings.life_s
    move_begin = _first(result.events, "move-begin")
    until = (result.finished_at - result.started_at).total_seconds()
    clients = tuple(
        client_figures(
            c.spec.variant.slug,
            c.spec.name,
            c.lives,
            until_s=until,
            windows=windows,
            bootstrap_at_s=bootstrap_at,
            move_begin_s=move_begin,
        )
        for c in result.clients
    )
    old_port = new_port = None
    if result.move is not None:
        old_port, new_port = result.move.before["SASL_SSL"][1], result.move.after["SASL_SSL"][1]
    variants = []
    for v in result.settings.variants:
        mine = [c for c in clients if c.variant == v.slug]
        outcomes = [c for c in result.clients if c.spec.variant == v]
        total = totals_by_time(result.sockets, variant=v.slug)
        by_role = {
            r: {k: sum(c.by_role[r][k] for c in mine) for k in mine[0].by_role[r]} if mine else {}
            for r in ROLES
        }
        variants.append(
            VariantFigures(
                variant=v.slug,
                version=v.version,
                clients=len(outcomes),
                failed_clients=sum(c.run is None for c in outcomes),
                dials=sum(c.dials for c in mine),
                tcp=sum(c.tcp for c in mine),
                handshakes=sum(c.handshakes for c in mine),
                closes=int(sum(c.by_role[r]["closes"] for c in mine for r in ROLES)),
                socket_seconds=sum(c.socket_seconds for c in mine),
                by_role=by_role,
                windows={
                    w.name: {
                        k: sum(c.windows[w.name][k] for c in mine)
                        for k in ("dials", "tcp", "handshakes")
                    }
                    for w in windows
                },
                bootstrap_open=sum(c.bootstrap_open for c in mine),
                peak=peak(total),
                steady=sum(c.run.sample.count for c in outcomes if c.run is not None),
                kernel_socket_seconds=kernel_socket_seconds(total),
                broker_peaks={b: peak(s) for b, s in broker_series(result.sockets, v.slug).items()},
                bootstrap_gone_s=(
                    None
                    if any(c.bootstrap_gone_s is None for c in mine)
                    else max((c.bootstrap_gone_s or 0.0 for c in mine), default=0.0)
                ),
                unready=dict(sorted(sum((Counter(c.unready) for c in mine), Counter()).items())),
                dials_after_move={
                    "old": sum(c.ports_dialled_after_move.get(old_port or -1, 0) for c in mine),
                    "new": sum(c.ports_dialled_after_move.get(new_port or -1, 0) for c in mine),
                },
            )
        )
    counts = jmx_series(result.brokers, result.origin, "SASL_SSL", "connection-count")
    auth = jmx_series(result.brokers, result.origin, "SASL_SSL", "successful-authentication-total")
    return RunFigures(
        windows=windows,
        clients=clients,
        variants=tuple(variants),
        broker_jmx_peak={
            b: max((v for _t, v in s if v is not None), default=0.0) for b, s in counts.items()
        },
        broker_handshakes={b: counter_increase([v for _t, v in s]) for b, s in auth.items()},
        crosscheck=kernel_vs_jmx(
            result.sockets, result.brokers, result.origin, result.settings.sample_s / 2
        ),
    )
