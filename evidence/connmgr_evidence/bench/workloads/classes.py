"""Workload classes: the kinds of client an operator's fleet is made of, each by the events
that drive its connections.

A class draws its clients from ``(seed, index)`` alone, over a cluster of ``brokers``
brokers, as the fleet stage does (:mod:`connmgr_evidence.bench.stages.fleet`): each drawn client is
a
:class:`Drawn` -- a scenario the simulator runs under every client model, and the instant of
the hour it starts. Clients share nothing but the cluster's schedule; a class stands for a
fleet of :attr:`WorkloadClass.fleet` clients (or starts an hour), composed from the drawn
clients by :mod:`connmgr_evidence.bench.workloads.compose`.

The classes:

* ``steady``: long-lived producers and group consumers, started within the first 5 minutes
  (today's fleet stage without its restarts);
* ``serverless``: short-lived producers -- each starts, sends 1 to 10 records and closes --
  100,000 starts an hour;
* ``autoscaling``: group consumers that join the group at any time of the hour, live 10 to 60
  minutes and leave, and go through a rebalance every 5 to 15 minutes (the group's size drawn
  from 1 to 12, the member's range of the topic's partitions with it);
* ``pollers``: admin and monitoring pollers (lag exporters and the like), each asking every
  leader of the topics it watches once a minute -- modelled by the producer's flow at a
  60-s cadence: one request per leader per minute, the metadata refresh of every client;
* ``restart``, ``ip-change``, ``reassignment``: the steady fleet through churn -- a rolling
  restart of up to 10 brokers, every broker's pod re-addressed under its DNS name
  (``ip-change``'s changes), the topic moved to the other half of the brokers -- from
  minute 10.

Long-lived clients run at the sweep's cadence (a request every 2 minutes,
:data:`~connmgr_evidence.bench.stages.sweep.SWEEP_TIMINGS`), as the fleet stage does: the counts of
a
client's connections are those of the default cadence; short-lived producers and pollers keep
their own.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from connmgr.core.config import ClientKind
from connmgr.core.endpoint import parse_bootstrap
from connmgr.core.metadata import TopicPartition
from connmgr.sim.churn import restart_changes
from connmgr.sim.clients import ClientTimings
from connmgr.sim.cluster import build_cluster
from connmgr.sim.scenarios import Change, ScenarioSpec, get_scenario, localhost_brokers
from connmgr.sim.simulator import Simulator
from connmgr_evidence.bench.fleetplan import (
    DURATION_MS,
    ELECTION_MS,
    RESTART_AT_MS,
    RESTART_INTERVAL_MS,
)
from connmgr_evidence.bench.stages.sweep import SWEEP_TIMINGS

TOPIC, GROUP = "events", "app"
BOOTSTRAP_SERVERS: Final = 3
"""A fleet shares one ``bootstrap.servers`` of three brokers (1..3), as most deployments."""
START_SPREAD_MS: Final = 300_000
"""Long-lived clients start within the first 5 minutes (one metadata max age)."""
POLL_INTERVAL_MS: Final = 60_000
"""A poller asks every leader it watches once a minute."""
DARK_SOCKET_TIMINGS: Final = dataclasses.replace(SWEEP_TIMINGS, fetch_max_wait_ms=20_000)
"""``ip-change``'s cadence: the sweep's, but an empty fetch's long poll of 20 s, under the
30-s request timeout as the real defaults are (a socket to a dark address is found dead by
that timeout: a long poll longer than it would be taken for one)."""
RESTARTED_AT_MOST: Final = 10
"""``restart`` restarts up to 10 brokers, one every 2 minutes from minute 10."""


@dataclass(frozen=True)
class Drawn:
    """One client of a class: its scenario from its own start, when it starts in the hour,
    and the changes before its start (applied to its cluster before it runs)."""

    index: int
    start_ms: float
    spec: ScenarioSpec
    early: tuple[Change, ...] = ()


@dataclass(frozen=True)
class WorkloadClass:
    """A class of clients: how to draw client ``index`` over ``brokers`` brokers, and the
    fleet it stands for."""

    name: str
    summary: str
    fleet: int
    """The fleet the class stands for: clients, or starts an hour (:attr:`unit`)."""
    unit: str
    draw: Callable[[int, int, int], Drawn]
    """``(index, brokers, seed) -> Drawn``; depends on its arguments alone."""
    aligned: bool
    """Its clients' lives are tied to the cluster's clock (churn at fixed minutes): the fleet
    repeats each drawn client at its own start; otherwise anywhere in :attr:`window_ms`."""
    window_ms: float
    """When the fleet's clients start: uniformly over [0, window_ms)."""


def _rng(kind: str, seed: int, index: int, brokers: int) -> random.Random:
    # String seeds hash the same in every process (Spark workers, pools).
    return random.Random(f"connmgr-workloads:{kind}:{seed}:{brokers}:{index}")


def _leaders(rng: random.Random, brokers: int, least: int, most: int) -> tuple[int, ...]:
    """A topic's partition leaders: ``least..most`` distinct brokers, each leading one to
    three partitions."""
    count = rng.randint(min(least, brokers), min(most, brokers))
    spread = rng.sample(range(1, brokers + 1), count)
    partitions = rng.randint(count, 3 * count)
    return tuple(spread[i % count] for i in range(partitions))


def _spec(
    brokers: int,
    leaders: tuple[int, ...],
    *,
    client: ClientKind,
    coordinator: int,
    seed: int,
    duration_ms: float,
    timings: ClientTimings,
    records: int | None = None,
    changes: list[Change] | None = None,
) -> ScenarioSpec:
    endpoints = localhost_brokers(range(1, brokers + 1), 9092)
    cluster = build_cluster(endpoints, {TOPIC: leaders}, {GROUP: coordinator}, seed=seed)
    servers = ",".join(str(endpoints[i]) for i in range(1, min(brokers, BOOTSTRAP_SERVERS) + 1))
    consumer = client is ClientKind.CONSUMER
    return ScenarioSpec(
        cluster=cluster,
        bootstrap=parse_bootstrap(servers),
        client=client,
        topics=(TOPIC,),
        group=GROUP if consumer else None,
        duration_ms=duration_ms,
        changes=changes or [],
        timings=timings,
        records=records,
    )


LeaderDraw = Callable[[random.Random, int], tuple[int, ...]]
"""``(rng, brokers) -> leaders``: how a class draws the leaders of its client's partitions."""
BOTH_KINDS: Final = (ClientKind.PRODUCER, ClientKind.CONSUMER)


def _stage_leaders(rng: random.Random, brokers: int) -> tuple[int, ...]:
    return _leaders(rng, brokers, 1, 6)


def _long_lived(
    rng: random.Random,
    brokers: int,
    *,
    kinds: tuple[ClientKind, ...] = BOTH_KINDS,
    leader_draw: LeaderDraw = _stage_leaders,
    **kw: object,
) -> ScenarioSpec:
    """A long-lived client: its kind drawn from ``kinds``, then its leaders, coordinator and
    seed, in that order (the stage's classes draw with the defaults)."""
    kind = rng.choice(kinds)
    leaders = leader_draw(rng, brokers)
    return _spec(
        brokers,
        leaders,
        client=kind,
        coordinator=rng.randint(1, brokers),
        seed=rng.randrange(2**31),
        timings=SWEEP_TIMINGS,
        **kw,  # type: ignore[arg-type]
    )


def short_lived_spec(
    rng: random.Random, brokers: int, leaders: tuple[int, ...], records: tuple[int, int]
) -> ScenarioSpec:
    """A short-lived producer's client: it sends ``records`` (an inclusive range drawn from
    ``rng`` after the client's seed) to ``leaders`` and closes (the serverless class's client)."""
    return _spec(
        brokers,
        leaders,
        client=ClientKind.PRODUCER,
        coordinator=1,
        seed=rng.randrange(2**31),
        duration_ms=DURATION_MS,
        timings=ClientTimings(),
        records=rng.randint(*records),
    )


def poller_spec(rng: random.Random, brokers: int, leaders: tuple[int, ...]) -> ScenarioSpec:
    """An admin or monitoring poller's client: a metadata and offsets request to ``leaders``
    every :data:`POLL_INTERVAL_MS` for the hour (the pollers class's client)."""
    return _spec(
        brokers,
        leaders,
        client=ClientKind.PRODUCER,
        coordinator=1,
        seed=rng.randrange(2**31),
        duration_ms=DURATION_MS,
        timings=ClientTimings(send_interval_ms=POLL_INTERVAL_MS),
    )


def draw_steady(index: int, brokers: int, seed: int) -> Drawn:
    rng = _rng("steady", seed, index, brokers)
    return Drawn(index, 0.0, _long_lived(rng, brokers, duration_ms=DURATION_MS))


def draw_serverless(index: int, brokers: int, seed: int) -> Drawn:
    rng = _rng("serverless", seed, index, brokers)
    return Drawn(index, 0.0, short_lived_spec(rng, brokers, _leaders(rng, brokers, 1, 6), (1, 10)))


def range_of(
    partitions: list[TopicPartition], members: int, member: int
) -> frozenset[TopicPartition]:
    """What the range assignor gives member ``member`` (0-based, in member-id order) of
    ``members``: ``P // members`` partitions each, the first ``P % members`` one more."""
    each, extra = divmod(len(partitions), members)
    first = member * each + min(member, extra)
    return frozenset(sorted(partitions)[first : first + each + (1 if member < extra else 0)])


def _rebalance(share: frozenset[TopicPartition], sim: Simulator) -> None:
    sim.cluster.rebalance(GROUP, share)


def _leave(sim: Simulator) -> None:
    sim.client.close()


def draw_autoscaling(index: int, brokers: int, seed: int) -> Drawn:
    rng = _rng("autoscaling", seed, index, brokers)
    leaders = _leaders(rng, brokers, 2, 12)
    life = rng.uniform(600_000, 3_600_000)
    spec = _spec(
        brokers,
        leaders,
        client=ClientKind.CONSUMER,
        coordinator=rng.randint(1, brokers),
        seed=rng.randrange(2**31),
        duration_ms=DURATION_MS,
        timings=SWEEP_TIMINGS,
    )
    partitions = spec.cluster.partitions([TOPIC])
    size = rng.randint(1, 12)
    spec.cluster.rebalance(GROUP, range_of(partitions, size, rng.randrange(size)))
    at = rng.uniform(300_000, 900_000)
    while at < life:
        size = rng.randint(1, 12)
        share = range_of(partitions, size, rng.randrange(size))
        spec.changes.append((at, functools.partial(_rebalance, share)))
        at += rng.uniform(300_000, 900_000)
    spec.changes.append((life, _leave))
    return Drawn(index, 0.0, spec)


def draw_pollers(index: int, brokers: int, seed: int) -> Drawn:
    rng = _rng("pollers", seed, index, brokers)
    return Drawn(
        index, 0.0, poller_spec(rng, brokers, _leaders(rng, brokers, max(1, brokers // 2), 30))
    )


def restarted(brokers: int, seed: int) -> list[int]:
    """The brokers ``restart`` restarts, in order (the same for every client of a fleet)."""
    rng = random.Random(f"connmgr-workloads:restarts:{seed}:{brokers}")
    return rng.sample(range(1, brokers + 1), min(brokers, RESTARTED_AT_MOST))


def _shifted(changes: list[Change], start_ms: float) -> list[Change]:
    return [(at - start_ms, change) for at, change in changes if at >= start_ms]


def draw_restart(index: int, brokers: int, seed: int) -> Drawn:
    rng = _rng("restart", seed, index, brokers)
    start = rng.uniform(0, START_SPREAD_MS)
    schedule = restart_changes(
        restarted(brokers, seed),
        start_ms=RESTART_AT_MS,
        interval_ms=RESTART_INTERVAL_MS,
        down_ms=30_000,
        election_ms=ELECTION_MS,
    )
    spec = _long_lived(
        rng, brokers, duration_ms=DURATION_MS - start, changes=_shifted(schedule, start)
    )
    return Drawn(index, start, spec)


def _churn_scenario(
    name: str,
    at_key: str,
    index: int,
    brokers: int,
    seed: int,
    timings: ClientTimings,
    *,
    key: str | None = None,
    kinds: tuple[str, ...] = ("producer", "consumer"),
) -> Drawn:
    """A churn scenario of the simulator's own (``ip-change``, ``reassignment``) for one
    client of the fleet: its client kind (of ``kinds``), start and seed drawn (from ``key``,
    the scenario's name by default), its changes from minute 10 of the hour, at ``timings``."""
    rng = _rng(key or name, seed, index, brokers)
    start = rng.uniform(0, START_SPREAD_MS)
    spec = get_scenario(name).spec(
        {
            "brokers": str(brokers),
            "client": rng.choice(kinds),
            "seed": str(rng.randrange(2**31)),
            "duration_ms": str(round(DURATION_MS - start)),
            at_key: str(round(RESTART_AT_MS - start)),
        }
    )
    return Drawn(index, start, dataclasses.replace(spec, timings=timings))


def draw_ip_change(index: int, brokers: int, seed: int) -> Drawn:
    return _churn_scenario("ip-change", "restart_at_ms", index, brokers, seed, DARK_SOCKET_TIMINGS)


def draw_reassignment(index: int, brokers: int, seed: int) -> Drawn:
    return _churn_scenario("reassignment", "reassign_at_ms", index, brokers, seed, SWEEP_TIMINGS)


CLASSES: Final = (
    WorkloadClass(
        "steady",
        "long-lived producers and group consumers, started in the first 5 minutes",
        10_000,
        "clients",
        draw_steady,
        aligned=False,
        window_ms=START_SPREAD_MS,
    ),
    WorkloadClass(
        "serverless",
        "short-lived producers: start, send 1-10 records, close",
        100_000,
        "starts an hour",
        draw_serverless,
        aligned=False,
        window_ms=DURATION_MS - 60_000,
    ),
    WorkloadClass(
        "autoscaling",
        "group members joining any time, living 10-60 min, a rebalance every 5-15 min",
        2_000,
        "members",
        draw_autoscaling,
        aligned=False,
        window_ms=DURATION_MS,
    ),
    WorkloadClass(
        "pollers",
        "admin and monitoring pollers: every watched leader once a minute",
        500,
        "clients",
        draw_pollers,
        aligned=False,
        window_ms=START_SPREAD_MS,
    ),
    WorkloadClass(
        "restart",
        "the steady fleet through a rolling restart of up to 10 brokers from minute 10",
        10_000,
        "clients",
        draw_restart,
        aligned=True,
        window_ms=START_SPREAD_MS,
    ),
    WorkloadClass(
        "ip-change",
        "the steady fleet while every broker's pod gets a new IP under its DNS name",
        10_000,
        "clients",
        draw_ip_change,
        aligned=True,
        window_ms=START_SPREAD_MS,
    ),
    WorkloadClass(
        "reassignment",
        "the steady fleet while the topic moves to the other half of the brokers",
        10_000,
        "clients",
        draw_reassignment,
        aligned=True,
        window_ms=START_SPREAD_MS,
    ),
)
"""Every class, in table order."""


def workload_class(name: str) -> WorkloadClass:
    """The class called ``name``; :class:`KeyError` naming the classes if none is."""
    for c in CLASSES:
        if c.name == name:
            return c
    raise KeyError(f"unknown workload class {name!r}; known: {', '.join(c.name for c in CLASSES)}")


# The pieces a fleet description's classes are drawn with (connmgr_evidence.estimate.fleet_model):
# the stage's own draws, so that a description with the stage's parameters is the stage.
draw_rng = _rng
topic_leaders = _leaders
client_spec = _spec
long_lived_spec = _long_lived
leave = _leave
shifted_changes = _shifted
churn_scenario = _churn_scenario
