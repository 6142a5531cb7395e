"""A scaled life: a real client kept alive ``life_s`` seconds of wall time standing for
``life_s x time_scale`` seconds of its life.

A real run without a life measures seconds after start-up; what a platform team pays for is
a client's whole life, where metadata refreshes, idle expiry and prompt close decide which
sockets stay open and which are dialled again. Waiting an hour per run is not affordable, so
the timers that decide *connections* are scaled down together by ``time_scale`` and the
client keeps working at a cadence scaled the same way:

- metadata refresh: aiokafka's and the proposal's ``metadata_max_age_ms``, Java's
  ``metadata.max.age.ms``, librdkafka's ``topic.metadata.refresh.interval.ms`` (all 300 s by
  default; 5 s at scale 60);
- idle expiry: ``connections_max_idle_ms`` / ``connections.max.idle.ms`` (540 s; 9 s at
  scale 60) for aiokafka, the proposal and Java. librdkafka's default is 0 (never): it keeps
  its default, as its users run it;
- the proposal's prompt-close ``connection_linger_ms`` (3 s; 50 ms at scale 60);
- the work: a producer sends one record every 120 s of its life (2 s at scale 60), a consumer
  keeps polling and commits at the same cadence.

Protocol timers stay real (session timeout, heartbeat, request timeout, rebalance timeout):
the broker enforces them, and a scaled session timeout would only make the broker evict the
member, a behaviour no client-hour has.

A run's socket-seconds and handshakes are its ledger's :class:`~connmgr.ledger.Life` over the
window from the client's start to the end of its life, :meth:`~connmgr.ledger.Life.scaled`
to the represented time, so that ``per_hour`` gives figures per represented client-hour --
the same arithmetic the simulator's client-hours go through.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from connmgr.core.config import PolicyConfig
from connmgr.errors import ConfigError

METADATA_MAX_AGE_MS: Final = 300_000
"""aiokafka's ``metadata_max_age_ms``, Java's ``metadata.max.age.ms`` and librdkafka's
``topic.metadata.refresh.interval.ms``: the same default, 5 minutes, in all three."""
PRODUCE_EVERY_MS: Final = 120_000
"""A living producer's cadence: one record every 2 minutes of its life."""


def _default(name: str) -> int:
    # The policy's own defaults, read from its config: one source for 540 s and 3 s.
    value = {f.name: f.default for f in dataclasses.fields(PolicyConfig)}[name]
    assert isinstance(value, int)
    return value


IDLE_MS: Final = _default("connections_max_idle_ms")
LINGER_MS: Final = _default("connection_linger_ms")


@dataclass(frozen=True)
class LifePlan:
    """How long a real client lives and how its connection timers are scaled.

    ``life_s`` is wall time after the run's first workload (the records of ``records``);
    ``time_scale`` is represented seconds per wall second. ``idle_ms`` is the represented
    idle timeout (``connections_max_idle_ms`` as the scenario gives it; -1: disabled)."""

    life_s: int
    time_scale: int
    idle_ms: int = IDLE_MS
    rolling_restart: bool = False
    down_ms: int = 3_000
    """Wall ms each broker is down in the rolling restart."""

    def __post_init__(self) -> None:
        if self.life_s < 1:
            raise ConfigError(f"life_s={self.life_s}: a life lasts at least one second")
        if self.time_scale < 1:
            raise ConfigError(f"time_scale={self.time_scale}: must be >= 1")

    @classmethod
    def from_options(cls, options: Mapping[str, int], idle_ms: int | None) -> LifePlan | None:
        """The plan the run options ask for (``life_s``, ``time_scale``, ``rolling_restart``,
        ``down_ms``), or None without a life (``life_s=0``: today's steady run)."""
        if options["life_s"] == 0:
            if options["rolling_restart"]:
                raise ConfigError("rolling_restart=1 needs a life (life_s > 0)")
            return None
        return cls(
            options["life_s"],
            options["time_scale"],
            IDLE_MS if idle_ms is None else idle_ms,
            bool(options["rolling_restart"]),
            options["down_ms"],
        )

    def _scaled(self, ms: int) -> int:
        return max(1, round(ms / self.time_scale))

    @property
    def life_ms(self) -> int:
        return self.life_s * 1000

    @property
    def metadata_max_age_ms(self) -> int:
        return self._scaled(METADATA_MAX_AGE_MS)

    @property
    def scaled_idle_ms(self) -> int:
        """The idle timeout in wall ms (-1: disabled stays disabled)."""
        return -1 if self.idle_ms == -1 else self._scaled(self.idle_ms)

    def linger_ms(self, represented: int = LINGER_MS) -> int:
        return self._scaled(represented)

    @property
    def every_ms(self) -> int:
        """The work's cadence in wall ms: a record (producer) or a commit (consumer)."""
        return self._scaled(PRODUCE_EVERY_MS)

    def policy_settings(self, client: str, given: Mapping[str, str]) -> dict[str, str]:
        """Settings to add to a run's ``--set`` policy settings: the scaled idle timeout for
        aiokafka and the proposal, and the proposal's scaled ``connection_linger_ms`` (``given``'s
        value, else the default, read as represented time); none for Java and librdkafka
        (their settings are their own: :meth:`java_config`, :meth:`librdkafka_config`)."""
        if client not in ("aiokafka", "proposed"):
            return {}
        settings = {"connections_max_idle_ms": str(self.scaled_idle_ms)}
        if client == "proposed":
            settings["connection_linger_ms"] = str(
                self.linger_ms(int(given.get("connection_linger_ms", LINGER_MS)))
            )
        return settings

    def aiokafka_kwargs(self) -> dict[str, Any]:
        """aiokafka keyword arguments beyond the policy settings (stock and proposed)."""
        return {"metadata_max_age_ms": self.metadata_max_age_ms}

    def java_config(self) -> dict[str, str]:
        """kafka-clients settings (the probe's ``--extra``)."""
        idle = self.scaled_idle_ms
        return {
            "metadata.max.age.ms": str(self.metadata_max_age_ms),
            # Java has no "disabled": -1 is a timeout that never comes in practice.
            "connections.max.idle.ms": str(2**62 if idle == -1 else idle),
        }

    def librdkafka_config(self) -> dict[str, Any]:
        """confluent-kafka settings. ``connections.max.idle.ms`` is left at librdkafka's
        default (0: never), as its users run it."""
        return {"topic.metadata.refresh.interval.ms": self.metadata_max_age_ms}

    def as_json(self) -> dict[str, Any]:
        return {
            "life_s": self.life_s,
            "time_scale": self.time_scale,
            "represented_s": self.life_s * self.time_scale,
            "every_ms": self.every_ms,
            "rolling_restart": self.rolling_restart,
            "down_ms": self.down_ms,
        }
