"""A class's fleet as the brokers see it: drawn clients simulated under each client model,
then repeated over the hour to the class's fleet size.

Simulating 100,000 serverless starts under eight client models would take hours; their
connections are independent (clients share nothing but the cluster), so the fleet is
composed instead. ``templates`` clients are drawn and simulated (:func:`simulate`); client
``j`` of a fleet of ``F`` repeats drawn client ``j mod templates``, its whole life shifted:

* to a start drawn uniformly over the class's window, when the client's life depends on
  its own clock alone (no churn:
  :attr:`~connmgr_evidence.bench.workloads.classes.WorkloadClass.aligned`
  is false) -- exact, as each drawn client was simulated from its own time 0;
* by a jitter of up to half a second either way around the drawn client's own start, when
  its life is tied to the cluster's clock (churn at fixed minutes) -- the copies of one
  drawn client then meet a restart within the same second, as clients on one broker do.

Every socket reaches one broker (the simulator knows which), each from its dial to its end
(cut at the hour's end). Per broker (:func:`measure`): the most sockets open at once, the
connection attempts (dials, those refused included) in each second of the hour -- their
largest and their 99th percentile --, handshakes in the hour and socket-seconds. Cluster-wide,
the same summed over the brokers (what a per-eCKU limit counts). Everything is drawn from
the seed: a composition replays exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from connmgr.core.endpoint import Endpoint
from connmgr.policies import policy_class
from connmgr.sim.run import build_simulator
from connmgr_evidence.bench.fleetplan import DURATION_MS
from connmgr_evidence.bench.stages.fleet import ClientSockets, client_sockets
from connmgr_evidence.bench.workloads.classes import Drawn, WorkloadClass

SECONDS: Final = DURATION_MS // 1000
JITTER_MS: Final = 500.0
"""Aligned copies of a drawn client start within half a second of it, either way."""


@dataclass(frozen=True)
class ClientModel:
    """A client as the workload tables name it: a policy, on brokers that answer KIP-1242's
    identity check or not."""

    name: str
    policy: str
    kip_1242: bool = False


CLIENT_MODELS: Final = (
    ClientModel("java-today", "java-today"),
    ClientModel("java-4.4", "java-4.4"),
    ClientModel("java-patched", "java-patched"),
    ClientModel("proposed", "proposed"),
    ClientModel("proposed-4.4", "proposed", kip_1242=True),
    ClientModel("aiokafka-today", "aiokafka-today"),
    ClientModel("java-b0", "java-b0"),
    ClientModel("java-linger", "java-linger"),
)
"""Today's clients (``java-today``; ``java-4.4``, kafka-clients 4.4.0 as measured, two
bootstrap connections a start; ``aiokafka-today``), the patch (``java-patched``: (b0) and
rule 6), the proposal without and with KIP-1242 brokers, and each KIP alone on today's Java
client (``java-b0``, ``java-linger``)."""
MODEL_NAMED: Final = {m.name: m for m in CLIENT_MODELS}


def simulate(drawn: Drawn, model: ClientModel) -> ClientSockets:
    """Run ``drawn`` under ``model`` to the end of its hour: its sockets per broker, in the
    hour's time (from the drawn client's start)."""
    spec = drawn.spec
    spec.cluster.confirms_identity = model.kip_1242
    broker_at: dict[Endpoint, int] = {b.endpoint: i for i, b in spec.cluster.brokers.items()}
    sim = build_simulator(spec, policy_class(model.policy), {}, drawn.index)
    for _, change in drawn.early:
        change(sim)
    sim.run()
    return client_sockets(drawn, model.name, sim.ledger, broker_at, sim.duration_ms)


@dataclass(frozen=True)
class BrokerLoad:
    """One class's fleet under one client model on one cluster: what its brokers carry."""

    peak_connections: int
    """The most sockets open at once at the busiest broker."""
    peak_attempts: int
    """The most connection attempts in one second of the hour at one broker."""
    p99_attempts: float
    """The 99th percentile of attempts per second over the hour's seconds, at the broker
    where it is highest."""
    handshakes: int
    """Connections established in the hour, all brokers."""
    broker_handshakes: int
    """Connections established in the hour at the busiest broker."""
    attempts: int
    """Connection attempts in the hour, all brokers (refused dials included)."""
    socket_seconds: float
    """Socket-seconds held in the hour, all brokers."""
    cluster_peak_connections: int
    """The most sockets open at once across the cluster (what a per-eCKU limit counts)."""
    cluster_peak_attempts: int
    """The most attempts in one second across the cluster."""


def replica_starts(
    cls: WorkloadClass, drawn: Sequence[Drawn], fleet: int, seed: int
) -> npt.NDArray[np.float64]:
    """The shift of each fleet client's life from its drawn client's (ms): client ``j``
    repeats drawn client ``j mod len(drawn)``."""
    rng = np.random.default_rng([seed, len(drawn), fleet, 1 if cls.aligned else 0])
    if cls.aligned:
        return rng.uniform(-JITTER_MS, JITTER_MS, fleet)
    # Drawn clients of an unaligned class start at 0: the shift is the start itself.
    return rng.uniform(0.0, cls.window_ms, fleet)


def measure(
    lives: Sequence[ClientSockets], shifts: npt.NDArray[np.float64], brokers: int
) -> BrokerLoad:
    """The fleet's load: client ``j`` is ``lives[j mod len(lives)]`` shifted by
    ``shifts[j]`` ms, every instant cut to the hour."""
    return load_of(fleet_events([(lives, shifts)]), brokers)


@dataclass(frozen=True)
class FleetEvents:
    """Every socket, dial and handshake of a composed fleet, cut to the hour: sockets
    ``[opens, closes)`` at ``socket_brokers``, dials at ``tries`` to ``try_brokers``,
    handshakes at ``shakes`` with ``shake_brokers`` (ms; brokers by id)."""

    opens: npt.NDArray[np.float64]
    closes: npt.NDArray[np.float64]
    socket_brokers: npt.NDArray[np.int64]
    tries: npt.NDArray[np.float64]
    try_brokers: npt.NDArray[np.int64]
    shakes: npt.NDArray[np.float64]
    shake_brokers: npt.NDArray[np.int64]


def fleet_events(
    groups: Sequence[tuple[Sequence[ClientSockets], npt.NDArray[np.float64]]],
) -> FleetEvents:
    """The events of several composed fleets together: in each ``(lives, shifts)``, client
    ``j`` is ``lives[j mod len(lives)]`` shifted by ``shifts[j]`` ms."""
    opens: list[npt.NDArray[np.float64]] = []
    closes: list[npt.NDArray[np.float64]] = []
    socket_brokers: list[npt.NDArray[np.int64]] = []
    tries: list[npt.NDArray[np.float64]] = []
    try_brokers: list[npt.NDArray[np.int64]] = []
    shakes: list[npt.NDArray[np.float64]] = []
    shake_brokers: list[npt.NDArray[np.int64]] = []
    for lives, shifts in groups:
        n = len(lives)
        for k, life in enumerate(lives):
            mine = shifts[k::n]
            if not mine.size:
                continue
            if life.intervals:
                iv = np.asarray([(b, s, e) for b, s, e in life.intervals], dtype=np.float64)
                opens.append((mine[:, None] + iv[None, :, 1]).ravel())
                closes.append((mine[:, None] + iv[None, :, 2]).ravel())
                socket_brokers.append(np.tile(iv[:, 0].astype(np.int64), mine.size))
            dials = [(b, s) for b, s, _ in life.intervals] + list(life.refused)
            if dials:
                dv = np.asarray(dials, dtype=np.float64)
                tries.append((mine[:, None] + dv[None, :, 1]).ravel())
                try_brokers.append(np.tile(dv[:, 0].astype(np.int64), mine.size))
            if life.handshakes:
                hv = np.asarray(life.handshakes, dtype=np.float64)
                shakes.append((mine[:, None] + hv[None, :, 1]).ravel())
                shake_brokers.append(np.tile(hv[:, 0].astype(np.int64), mine.size))
    end = float(DURATION_MS)
    o, c, sb = _cat(opens), _cat(closes), _cat_i(socket_brokers)
    keep = (o < end) & (c > 0)
    o, c, sb = np.clip(o[keep], 0, end), np.clip(c[keep], 0, end), sb[keep]
    t, tb = _cat(tries), _cat_i(try_brokers)
    keep = (t >= 0) & (t < end)
    t, tb = t[keep], tb[keep]
    h, hb = _cat(shakes), _cat_i(shake_brokers)
    keep = (h >= 0) & (h < end)
    h, hb = h[keep], hb[keep]
    return FleetEvents(o, c, sb, t, tb, h, hb)


def load_of(events: FleetEvents, brokers: int) -> BrokerLoad:
    """What ``events`` cost brokers 1..``brokers``: the busiest broker's and the cluster's."""
    o, c, sb = events.opens, events.closes, events.socket_brokers
    t, tb = events.tries, events.try_brokers
    h, hb = events.shakes, events.shake_brokers
    per_second = np.zeros((brokers + 1, SECONDS), dtype=np.int64)
    np.add.at(per_second, (tb, (t // 1000).astype(np.int64)), 1)
    return BrokerLoad(
        peak_connections=_peak_per_group(o, c, sb),
        peak_attempts=int(per_second.max(initial=0)),
        p99_attempts=float(np.percentile(per_second[1:], 99, axis=1).max(initial=0.0)),
        handshakes=int(h.size),
        broker_handshakes=int(np.bincount(hb, minlength=brokers + 1).max(initial=0)),
        attempts=int(t.size),
        socket_seconds=float((c - o).sum() / 1000.0),
        cluster_peak_connections=_peak_per_group(o, c, np.zeros_like(sb)),
        cluster_peak_attempts=int(per_second.sum(axis=0).max(initial=0)),
    )


def _cat(parts: list[npt.NDArray[np.float64]]) -> npt.NDArray[np.float64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)


def _cat_i(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _peak_per_group(
    opens: npt.NDArray[np.float64],
    closes: npt.NDArray[np.float64],
    groups: npt.NDArray[np.int64],
) -> int:
    """The most intervals [open, close) open at once within any one group (0..most). At one
    instant a close goes before an open."""
    if not opens.size:
        return 0
    times = np.concatenate([opens, closes])
    steps = np.concatenate([np.ones_like(opens), -np.ones_like(closes)]).astype(np.int64)
    keys = np.concatenate([groups, groups])
    order = np.lexsort((steps, times, keys))
    running = np.cumsum(steps[order])
    sorted_keys = keys[order]
    firsts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    # Each group's running count: the overall sum less what the earlier groups left (their
    # opens and closes balance, as every interval is cut to the hour; the subtraction keeps
    # the groups apart whatever they leave).
    before = np.r_[0, running[firsts[1:] - 1]]
    base = np.repeat(before, np.diff(np.r_[firsts, running.size]))
    return int((running - base).max(initial=0))
