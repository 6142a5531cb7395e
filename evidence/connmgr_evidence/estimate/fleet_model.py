"""A fleet description run through the workload stage's model: each class drawn with the
stage's draws, simulated under every client model, composed to its count and measured per
broker.

Nothing here is a second model. A class becomes a
:class:`~connmgr_evidence.bench.workloads.classes.WorkloadClass` whose draw is the stage's (its
kind,
leaders, coordinator and seed drawn in the stage's order, from ``(seed, class name, index)``);
:func:`.compose.simulate`, :func:`.compose.replica_starts` and :func:`.compose.fleet_events`
(of :mod:`connmgr_evidence.bench.workloads`) do the rest, and :func:`.compose.load_of` gives the
busiest broker's and the cluster's figures exactly as the stage's report has them. What this
module adds is the per-broker breakdown (:func:`per_broker`) and the mapping of the
description's kinds:

* ``producer`` / ``consumer`` / ``mixed`` (half each, the stage's ``steady``): long-lived at
  the stage's cadence (a request every 2 minutes), or short-lived: a producer sends its
  records and closes (the stage's ``serverless``), a consumer leaves at ``lifetime_s``;
* ``admin``: the stage's pollers (every watched leader once a minute; by default half to all
  of the brokers);
* ``transactional``: the simulator's transactional producer (its transaction coordinator
  drawn like a group coordinator).
"""

from __future__ import annotations

import dataclasses
import functools
import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from connmgr.core.config import ClientKind
from connmgr.sim.churn import restart_changes
from connmgr.sim.scenarios import Change, ScenarioSpec
from connmgr_evidence.bench.fleetplan import DURATION_MS, ELECTION_MS
from connmgr_evidence.bench.stages.fleet import ClientSockets
from connmgr_evidence.bench.stages.sweep import SWEEP_TIMINGS
from connmgr_evidence.bench.workloads.classes import (
    BOTH_KINDS,
    DARK_SOCKET_TIMINGS,
    START_SPREAD_MS,
    Drawn,
    LeaderDraw,
    WorkloadClass,
    churn_scenario,
    draw_rng,
    leave,
    long_lived_spec,
    poller_spec,
    restarted,
    shifted_changes,
    short_lived_spec,
    topic_leaders,
)
from connmgr_evidence.bench.workloads.compose import (
    MODEL_NAMED,
    BrokerLoad,
    FleetEvents,
    fleet_events,
    load_of,
    replica_starts,
    simulate,
)

from .fleet_spec import ClientClass, FleetSpec

TODAY: Final = ("java-today", "java-4.4", "aiokafka-today")
"""Today's clients the simulator models (librdkafka has no model of its own in it)."""
PROPOSAL: Final = ("proposed", "proposed-4.4")
KIP_ALONE: Final = (
    ("(b0) alone", "java-b0", "java-today"),
    ("(b) rule 6 alone", "java-linger", "java-today"),
    ("(b0) + rule 6 (the patch)", "java-patched", "java-today"),
    ("the proposal, no KIP-1242", "proposed", "java-today"),
    ("(d) on top (KIP-1242 brokers)", "proposed-4.4", "proposed"),
)
"""Each KIP alone, as the workload report gives it: (label, client, compared with)."""
MODELS: Final = (*TODAY, *PROPOSAL, "java-b0", "java-linger", "java-patched")
Groups = list[tuple[list[ClientSockets], npt.NDArray[np.float64]]]


def _partition_leaders(partitions: int, rng: random.Random, brokers: int) -> tuple[int, ...]:
    """``partitions`` partitions over ``min(partitions, brokers)`` distinct brokers."""
    spread = rng.sample(range(1, brokers + 1), min(partitions, brokers))
    return tuple(spread[i % len(spread)] for i in range(partitions))


def _range_leaders(least: int, most: int, rng: random.Random, brokers: int) -> tuple[int, ...]:
    return topic_leaders(rng, brokers, least, most)


def _leader_draw(cc: ClientClass, least: int, most: int) -> LeaderDraw:
    if cc.partitions is not None:
        return functools.partial(_partition_leaders, cc.partitions)
    lo, hi = cc.leaders or (least, most)
    return functools.partial(_range_leaders, lo, hi)


_KINDS: Final = {
    "producer": (ClientKind.PRODUCER,),
    "consumer": (ClientKind.CONSUMER,),
    "mixed": BOTH_KINDS,
    "transactional": (ClientKind.PRODUCER,),
}


def draw_client(spec: FleetSpec, cc: ClientClass, index: int, brokers: int, seed: int) -> Drawn:
    """Client ``index`` of class ``cc`` (``brokers`` and ``seed`` as a
    :attr:`WorkloadClass.draw` takes them)."""
    rng = draw_rng(cc.name, seed, index, brokers)
    life_ms = None if cc.lifetime_s is None else cc.lifetime_s * 1000.0
    if cc.kind == "admin":
        scenario = poller_spec(
            rng, brokers, _leader_draw(cc, max(1, brokers // 2), 30)(rng, brokers)
        )
        if life_ms is not None:
            scenario.changes.append((life_ms, leave))
        return Drawn(index, 0.0, _bootstrapped(spec, scenario))
    if life_ms is not None and cc.kind == "producer":
        leaders = _leader_draw(cc, 1, 6)(rng, brokers)
        scenario = short_lived_spec(rng, brokers, leaders, cc.records)
        return Drawn(index, 0.0, _bootstrapped(spec, scenario))
    if life_ms is None and spec.move is not None:
        kinds = tuple(k.value for k in _KINDS[cc.kind])
        timings = DARK_SOCKET_TIMINGS if spec.move == "ip-change" else SWEEP_TIMINGS
        at_key = "restart_at_ms" if spec.move == "ip-change" else "reassign_at_ms"
        return churn_scenario(
            spec.move, at_key, index, brokers, seed, timings, key=cc.name, kinds=kinds
        )
    start = 0.0
    changes: list[Change] = []
    if life_ms is None and spec.restarts is not None:
        r = spec.restarts
        start = rng.uniform(0, START_SPREAD_MS)
        schedule = restart_changes(
            restarted(brokers, seed)[: r.brokers],
            start_ms=r.at_minute * 60_000.0,
            interval_ms=r.every_s * 1000.0,
            down_ms=r.down_s * 1000.0,
            election_ms=ELECTION_MS,
        )
        changes = list(shifted_changes(schedule, start))
    scenario = long_lived_spec(
        rng,
        brokers,
        kinds=_KINDS[cc.kind],
        leader_draw=_leader_draw(cc, 1, 6),
        duration_ms=DURATION_MS - start,
        changes=changes,
    )
    if cc.kind == "transactional":
        tid = f"{cc.name}-{index}"
        scenario.cluster.txn_coordinators[tid] = rng.randint(1, brokers)
        scenario = dataclasses.replace(scenario, transactional_id=tid)
    if life_ms is not None:
        scenario.changes.append((life_ms, leave))
    return Drawn(index, start, _bootstrapped(spec, scenario))


def _bootstrapped(spec: FleetSpec, scenario: ScenarioSpec) -> ScenarioSpec:
    """``scenario`` with the description's ``bootstrap.servers`` (unchanged when it is the
    stage's 1..3, so the stage's classes stay the stage's)."""
    ids = spec.bootstrap
    endpoints = tuple(scenario.cluster.brokers[i].endpoint for i in ids)
    if endpoints == scenario.bootstrap:
        return scenario
    return dataclasses.replace(scenario, bootstrap=endpoints)


def workload_class(spec: FleetSpec, cc: ClientClass) -> WorkloadClass:
    """``cc`` as a workload class of the stage's: churn ties a long-lived class to the
    cluster's clock (aligned); a short-lived one starts over the hour less its life."""
    churn = spec.restarts is not None or spec.move is not None
    if cc.lifetime_s is None:
        aligned, window = churn, float(START_SPREAD_MS)
    else:
        aligned, window = False, DURATION_MS - cc.lifetime_s * 1000.0
    return WorkloadClass(
        cc.name,
        f"{cc.kind} x {cc.count}",
        cc.count,
        "starts an hour" if cc.lifetime_s is not None else "clients",
        functools.partial(draw_client, spec, cc),
        aligned=aligned,
        window_ms=window,
    )


def class_seed(seed: int, position: int, name: str) -> int:
    """The seed of class ``position``'s start times: the description's own for the first
    class (as the stage has it for its one class), one drawn from the class's name for the
    others, so two classes of equal size do not start in step."""
    return seed if position == 0 else zlib.crc32(f"{seed}:{name}".encode())


def compose(spec: FleetSpec, model: str) -> Groups:
    """Every class of ``spec`` under client ``model``: its simulated templates and the start
    shift of each of its ``count`` clients."""
    groups: Groups = []
    for position, cc in enumerate(spec.classes):
        wc = workload_class(spec, cc)
        n = min(spec.templates, cc.count)
        lives = [
            simulate(wc.draw(i, spec.brokers, spec.seed), MODEL_NAMED[model]) for i in range(n)
        ]
        drawn = [wc.draw(i, spec.brokers, spec.seed) for i in range(n)]
        shifts = replica_starts(wc, drawn, cc.count, class_seed(spec.seed, position, cc.name))
        groups.append((lives, shifts))
    return groups


@dataclass(frozen=True)
class BrokerFigures:
    """One broker's share of the fleet under one client model."""

    broker: int
    peak_connections: int
    peak_attempts_per_s: int
    """The most connection attempts in one second of the hour (refused dials included)."""
    handshakes: int
    """Connections established in the hour (each a TLS and, with SASL, an authentication)."""


def per_broker(events: FleetEvents, brokers: int) -> list[BrokerFigures]:
    """Brokers 1..``brokers``' figures from ``events`` (numpy)."""
    seconds = DURATION_MS // 1000
    per_second = np.zeros((brokers + 1, seconds), dtype=np.int64)
    np.add.at(per_second, (events.try_brokers, (events.tries // 1000).astype(np.int64)), 1)
    shakes = np.bincount(events.shake_brokers, minlength=brokers + 1)
    out = []
    for b in range(1, brokers + 1):
        mine = events.socket_brokers == b
        out.append(
            BrokerFigures(
                b,
                peak_open(events.opens[mine], events.closes[mine]),
                int(per_second[b].max(initial=0)),
                int(shakes[b]),
            )
        )
    return out


def peak_open(opens: npt.NDArray[np.float64], closes: npt.NDArray[np.float64]) -> int:
    """The most intervals ``[open, close)`` open at once (at one instant a close goes
    first)."""
    if not opens.size:
        return 0
    times = np.concatenate([opens, closes])
    steps = np.concatenate([np.ones(opens.size, np.int64), -np.ones(closes.size, np.int64)])
    order = np.lexsort((steps, times))
    return int(np.cumsum(steps[order]).max(initial=0))


@dataclass(frozen=True)
class ModelFigures:
    """The fleet under one client model: per broker, and the stage's busiest-broker and
    cluster figures."""

    model: str
    brokers: list[BrokerFigures]
    load: BrokerLoad


def figures(spec: FleetSpec, model: str) -> ModelFigures:
    """``spec``'s fleet under ``model`` (numpy, in this process)."""
    events = fleet_events(compose(spec, model))
    return ModelFigures(model, per_broker(events, spec.brokers), load_of(events, spec.brokers))


def check_models(names: Sequence[str]) -> None:
    for n in names:
        if n not in MODEL_NAMED:
            raise KeyError(f"unknown client model {n!r}; known: {', '.join(MODELS)}")
