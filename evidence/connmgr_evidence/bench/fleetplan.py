"""The fleet's hour, as the grid's ``[fleet]`` section sets it: the checked settings
(:class:`FleetSettings`) and the brokers' restart schedule drawn from them. The grid checks
its section with these, and the fleet stage (:mod:`connmgr_evidence.bench.stages.fleet`) runs them:
kept apart from the stages so that reading the grid needs no stage."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connmgr.errors import ConfigError

DURATION_MS = 3_600_000
RESTART_AT_MS = 600_000
"""The first broker goes down 10 minutes into the hour, once every client has started."""
RESTART_INTERVAL_MS = 120_000
ELECTION_MS = 30_000
"""As ``rolling-restart``: a broker down ``down_ms`` (30 s there), its leadership back 30 s
after it returns, the next one 2 minutes after it went down."""


@dataclass(frozen=True)
class FleetSettings:
    """The grid's ``[fleet]`` section, checked: ``clients`` over ``brokers`` for one hour,
    ``restarts`` brokers restarted (each down ``down_ms``), sockets counted per
    ``bucket_ms``."""

    clients: int
    brokers: int
    restarts: int
    down_ms: int
    bucket_ms: int
    seed: int

    def __post_init__(self) -> None:
        if self.clients < 1 or self.brokers < 2:
            raise ConfigError("a fleet needs clients >= 1 and brokers >= 2")
        if not 0 <= self.restarts <= self.brokers:
            raise ConfigError(f"restarts={self.restarts}: between 0 and brokers")
        end = RESTART_AT_MS + self.restarts * RESTART_INTERVAL_MS
        if end > DURATION_MS:  # the first restart comes after the fleet's start
            most = (DURATION_MS - RESTART_AT_MS) // RESTART_INTERVAL_MS
            raise ConfigError(f"restarts={self.restarts}: at most {most} fit in the hour")
        if not 0 < self.down_ms <= RESTART_INTERVAL_MS - ELECTION_MS:
            raise ConfigError(
                f"down_ms={self.down_ms}: between 1 and {RESTART_INTERVAL_MS - ELECTION_MS} "
                "(one broker down at a time)"
            )
        if self.bucket_ms < 1000 or DURATION_MS % self.bucket_ms:
            raise ConfigError(f"bucket_ms={self.bucket_ms}: >= 1000 and dividing the hour")

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> FleetSettings:
        """From the grid's ``[fleet]`` values (extra keys are not settings: an error)."""
        names = {f.name for f in dataclasses.fields(cls)}
        if set(values) != names:
            raise ConfigError(f"[fleet] needs exactly {sorted(names)}, got {sorted(values)}")
        return cls(**{n: int(values[n]) for n in names})

    @property
    def buckets(self) -> int:
        return DURATION_MS // self.bucket_ms


@dataclass(frozen=True)
class Restart:
    """One broker's restart: down at ``down_at_ms``, up at ``up_at_ms``, leading again from
    ``elected_at_ms``."""

    broker: int
    down_at_ms: int
    up_at_ms: int
    elected_at_ms: int


def restart_schedule(settings: FleetSettings) -> tuple[Restart, ...]:
    """The brokers restarted, in order, drawn from the seed alone (every client sees it)."""
    rng = random.Random(f"connmgr-fleet:{settings.seed}:restarts")
    chosen = rng.sample(range(1, settings.brokers + 1), settings.restarts)
    out = []
    for k, broker in enumerate(chosen):
        down = RESTART_AT_MS + k * RESTART_INTERVAL_MS
        out.append(
            Restart(broker, down, down + settings.down_ms, down + settings.down_ms + ELECTION_MS)
        )
    return tuple(out)


def restart_window(settings: FleetSettings) -> tuple[int, int]:
    """[first down, last election + one interval): the storm, with the cadence's tail (a
    client learns its leader came back on its next request, up to 2 minutes later)."""
    schedule = restart_schedule(settings)
    if not schedule:
        return (RESTART_AT_MS, RESTART_AT_MS)
    return (schedule[0].down_at_ms, schedule[-1].elected_at_ms + RESTART_INTERVAL_MS)
