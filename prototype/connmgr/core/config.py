"""Policy configuration: one frozen value, validated when built.

Option names follow the Kafka client configuration keys they model (in snake case); options
only the proposed policy reads are marked so. :func:`PolicyConfig.with_settings` applies
``key=value`` strings (the CLI's ``--set``) with type checks and clear errors.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.endpoint import Endpoint, parse_bootstrap
from connmgr.errors import ConfigError, UnknownName


class ClientKind(enum.Enum):
    PRODUCER = "producer"
    CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Everything a policy needs to know about its client, apart from events.

    Durations are in milliseconds. ``connections_max_idle_ms = -1`` disables idle expiry.
    """

    bootstrap: tuple[Endpoint, ...]
    client: ClientKind = ClientKind.CONSUMER
    connections_max_idle_ms: int = 540_000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1_000
    bootstrap_offset: int | None = None
    """Java clients start their least-loaded scan at a random offset; None draws it from the
    policy's random source, an int pins it (to replay a recorded log)."""
    replay_choices: tuple[int, ...] = ()
    """Broker ids a recorded run chose at random for any-node requests, in order; a model
    replays them instead of drawing (observing a real client's choices rather than loosening
    a comparison). Empty: draw from the policy's random source."""
    replay_telemetry: tuple[int, ...] = ()
    """Where a recorded Java run sent its GetTelemetrySubscriptions request (node id), to
    replay; empty: the model picks with ``leastLoadedNode``."""
    # Proposed policy only:
    warm_up: bool = False
    """Open the bootstrap connection when the client starts instead of on first need."""
    share_coordinator: bool = False
    """Send group requests on the coordinator broker's data connection."""
    linger_ms: int = 3_000
    """How long an unneeded, quiet connection stays open before prompt close."""
    max_connections: int | None = None
    """Socket budget: never more sockets than this (None: unlimited)."""
    expected_cluster_id: str | None = None
    """If set, adopt a bootstrap connection only when metadata reports this cluster id."""
    adopt_unverified: bool = False
    """Adopt a bootstrap connection whose host:port metadata gives to exactly one broker
    even when no broker id was confirmed on the socket. Saves one dial per client start;
    unsafe behind a proxy that changes what that host:port leads to between the dial and
    the metadata answer (the property suite's counterexample, see docs/property-suite.md)."""
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap:
            raise ConfigError("bootstrap must list at least one endpoint")
        if self.connections_max_idle_ms < -1 or self.connections_max_idle_ms == 0:
            raise ConfigError(
                f"connections_max_idle_ms={self.connections_max_idle_ms}: "
                "use a positive number of ms, or -1 to disable idle expiry"
            )
        if self.reconnect_backoff_ms < 0 or self.reconnect_backoff_max_ms < 0:
            raise ConfigError("reconnect backoffs must be >= 0 ms")
        if self.linger_ms < 0:
            raise ConfigError(f"linger_ms={self.linger_ms}: must be >= 0")
        if self.max_connections is not None and self.max_connections < 1:
            raise ConfigError(
                f"max_connections={self.max_connections}: a socket budget must allow at "
                "least 1 connection (omit it for no budget)"
            )
        if self.bootstrap_offset is not None and not (
            0 <= self.bootstrap_offset < len(self.bootstrap)
        ):
            raise ConfigError(
                f"bootstrap_offset={self.bootstrap_offset}: must index the "
                f"{len(self.bootstrap)} bootstrap servers (0..{len(self.bootstrap) - 1})"
            )

    @property
    def idle_expiry_ms(self) -> int | None:
        """``connections_max_idle_ms`` or None when idle expiry is disabled."""
        return None if self.connections_max_idle_ms == -1 else self.connections_max_idle_ms

    def with_settings(self, settings: Mapping[str, str]) -> PolicyConfig:
        """A copy with ``settings`` (names of this class's fields, string values) applied."""
        changes: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(self) if f.name != "extra"}
        for name, text in settings.items():
            if name not in fields:
                raise UnknownName(
                    f"unknown policy option {name!r}; known: {', '.join(sorted(fields))}"
                )
            changes[name] = coerce_option(name, self.__getattribute__(name), text)
        return dataclasses.replace(self, **changes)


def coerce_option(name: str, current: object, text: str) -> object:
    """Convert ``text`` to the type of option ``name`` (judged by its current value)."""
    lowered = text.strip().lower()
    if name == "bootstrap":
        return parse_bootstrap(text)
    if name in ("replay_choices", "replay_telemetry"):
        try:
            return tuple(int(part) for part in text.split(",") if part.strip())
        except ValueError:
            raise ConfigError(f"{name}={text!r}: expected node ids like 3,1,-2") from None
    if name == "client":
        try:
            return ClientKind(lowered)
        except ValueError:
            raise ConfigError(f"client={text!r}: expected producer or consumer") from None
    if isinstance(current, bool):
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name}={text!r}: expected true or false")
    if lowered in ("none", "null", "") and name in (
        "max_connections",
        "bootstrap_offset",
        "expected_cluster_id",
    ):
        return None
    if name == "expected_cluster_id":
        return text
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected an integer") from None
