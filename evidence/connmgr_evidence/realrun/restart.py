"""A rolling restart of the embedded cluster during a real client's life.

Each broker in turn: its partitions' leadership and any coordinator it holds move to the next
broker, it goes down (its connections closed, new ones refused) for ``down_ms``, comes back
up, and its leadership and coordinators move back (the preferred-leader election an operator
runs after a restart). The restarts are spread over the middle half of the life, one slot
each, so the client lives before, between and after them. What happened, and when, is
returned for the run's record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connmgr.embedded import CoordinatorKeyType, MockCluster
from connmgr.errors import ConfigError

SETTLE_S = 0.5
"""Between moving leadership and taking the broker down (and between up and moving back):
what an orderly restart leaves for clients to follow the move."""


@dataclass(frozen=True)
class RestartEvent:
    t_ms: float
    """ms since the run's clock origin (``started``, ``time.perf_counter``)."""
    broker: int
    what: str
    """``moved-away``, ``down``, ``up`` or ``moved-back``."""

    def as_json(self) -> dict[str, Any]:
        return {"t_ms": round(self.t_ms, 3), "broker": self.broker, "what": self.what}


def check_fits(brokers: int, life_s: float, down_ms: int) -> None:
    """A :class:`ConfigError` unless ``brokers`` restarts, each ``down_ms`` down with the
    moves around it, fit in the middle half of a ``life_s`` life (restart a small cluster:
    ``--set brokers=3``)."""
    need_s = brokers * (down_ms / 1000.0 + 2 * SETTLE_S)
    if need_s > life_s / 2:
        raise ConfigError(
            f"a rolling restart of {brokers} brokers, each down {down_ms} ms, takes "
            f"{need_s:g} s: more than half the life ({life_s:g} s); use fewer brokers, a "
            "shorter down_ms or a longer life_s"
        )


async def rolling_restart(
    cluster: MockCluster,
    leaders: Mapping[str, Sequence[int]],
    coordinators: Mapping[tuple[CoordinatorKeyType, str], int],
    *,
    started: float,
    life_s: float,
    down_ms: int,
    events: list[RestartEvent],
) -> None:
    """Restart every broker of ``cluster`` once, in id order, during ``life_s`` seconds from
    ``started`` (``time.perf_counter``): broker ``i`` of ``n`` in the slot starting at
    ``started + life_s * (1/4 + i / (2n))``. ``leaders`` is topic -> the leader of each
    partition, ``coordinators`` (key type, key) -> broker; both are restored after each
    broker comes back. Appends to ``events`` as it goes (so a cancelled restart still says
    what it did) and leaves every broker up."""
    brokers = sorted(cluster.endpoints())
    n = len(brokers)
    check_fits(n, life_s, down_ms)

    def now_ms() -> float:
        return (time.perf_counter() - started) * 1000.0

    for i, broker in enumerate(brokers):
        slot = started + life_s * (0.25 + i / (2 * n))
        await asyncio.sleep(max(0.0, slot - time.perf_counter()))
        other = brokers[(i + 1) % n]
        if other == broker:
            break  # a one-broker cluster has nowhere to move to
        _move(cluster, leaders, coordinators, broker, other)
        events.append(RestartEvent(now_ms(), broker, "moved-away"))
        await asyncio.sleep(SETTLE_S)
        try:
            cluster.broker_down(broker)
            events.append(RestartEvent(now_ms(), broker, "down"))
            await asyncio.sleep(down_ms / 1000.0)
        finally:
            cluster.broker_up(broker)
            events.append(RestartEvent(now_ms(), broker, "up"))
        await asyncio.sleep(SETTLE_S)
        _restore(cluster, leaders, coordinators, broker)
        events.append(RestartEvent(now_ms(), broker, "moved-back"))


def _move(
    cluster: MockCluster,
    leaders: Mapping[str, Sequence[int]],
    coordinators: Mapping[tuple[CoordinatorKeyType, str], int],
    broker: int,
    to: int,
) -> None:
    for topic, led in leaders.items():
        for partition, leader in enumerate(led):
            if leader == broker:
                cluster.set_partition_leader(topic, partition, to)
    for (kind, key), at in coordinators.items():
        if at == broker:
            cluster.set_coordinator(kind, key, to)


def _restore(
    cluster: MockCluster,
    leaders: Mapping[str, Sequence[int]],
    coordinators: Mapping[tuple[CoordinatorKeyType, str], int],
    broker: int,
) -> None:
    for topic, led in leaders.items():
        for partition, leader in enumerate(led):
            if leader == broker:
                cluster.set_partition_leader(topic, partition, broker)
    for (kind, key), at in coordinators.items():
        if at == broker:
            cluster.set_coordinator(kind, key, broker)
