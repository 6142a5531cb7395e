"""Policy configuration: one frozen value, validated when built.

Each field of :class:`PolicyConfig` is a policy option, declared there once with
its help text and where it can be set (:func:`~connmgr.core.options.option`);
:data:`CONFIG_OPTIONS` derives the rest (parsing, drop-in keywords, help, docs tables) from
those fields. Option names follow the Kafka client configuration keys they model (in snake
case). :meth:`PolicyConfig.with_settings` applies ``key=value`` strings (the CLI's ``--set``)
with type checks and clear errors.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connmgr.core.endpoint import Endpoint
from connmgr.core.options import BOOL, INT, OptionSpec, Reach, declared_options, option
from connmgr.errors import ConfigError, UnknownName


class ClientKind(enum.Enum):
    PRODUCER = "producer"
    CONSUMER = "consumer"


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """Everything a policy needs to know about its client, apart from events.

    Durations are in milliseconds. Each option's meaning is its ``option(...)`` help. A
    value: frozen, compared and hashed by its fields.
    """

    bootstrap: tuple[Endpoint, ...] = field(
        metadata=option("the bootstrap servers, host:port,host:port,...")
    )
    client: ClientKind = field(
        default=ClientKind.CONSUMER, metadata=option("the client modelled: producer or consumer")
    )
    connections_max_idle_ms: int = field(
        default=540_000,
        metadata=option("close a connection idle this long (ms); -1 disables idle expiry"),
    )
    reconnect_backoff_ms: int = field(
        default=50, metadata=option("wait before dialling a broker again after a failure (ms)")
    )
    reconnect_backoff_max_ms: int = field(
        default=1_000, metadata=option("the most the reconnect backoff grows to (ms)")
    )
    bootstrap_offset: int | None = field(
        default=None,
        metadata=option(
            "index of the bootstrap server tried first (Java clients start their "
            "least-loaded scan at a random offset); none: drawn from the policy's random "
            "source, an int pins it (to replay a recorded log)",
            reach=Reach.DROP_IN_TESTS,
            meaning="index of the bootstrap server tried first (pins the random start, to "
            "replay a recorded run)",
        ),
    )
    # Proposed policy only:
    warm_up: bool = field(
        default=False,
        metadata=option(
            "open the bootstrap connection when the client starts instead of on first need",
            reach=Reach.DROP_IN,
            meaning="bootstrap in `start()` (and fail there, as stock `start()` does, if no "
            "server can be connected or answers within `request_timeout_ms`); by default "
            "nothing is dialled until the first send or subscription needs metadata, or until "
            "the client looks up a coordinator: a consumer with a `group_id` and a producer "
            "with a `transactional_id` send their coordinator lookup from `start()`, together "
            "with the first metadata request on the same connection (aiokafka would wait for "
            "the metadata answer first: one round trip more at every start)",
        ),
    )
    share_coordinator: bool = field(
        default=False,
        metadata=option(
            "send group requests on the coordinator broker's data connection",
            reach=Reach.DROP_IN,
            meaning="send group requests on the coordinator broker's data connection instead "
            "of a separate one (group requests then queue behind long-poll fetches)",
        ),
    )
    connection_linger_ms: int = field(
        default=3_000,
        metadata=option(
            "how long an unneeded, quiet connection stays open before prompt close (ms)",
            reach=Reach.DROP_IN,
            meaning="how long a connection nothing needs stays open before it is closed",
        ),
    )
    max_connections: int | None = field(
        default=None,
        metadata=option(
            "socket budget: never more sockets than this (none: unlimited)",
            reach=Reach.DROP_IN,
            meaning="socket budget; never exceeded (quiet connections are closed to make "
            "room, otherwise dials wait)",
        ),
    )
    expected_cluster_id: str | None = field(
        default=None,
        metadata=option(
            "if set, adopt a bootstrap connection only when metadata reports this cluster id",
            reach=Reach.DROP_IN,
            meaning="a bootstrap connection whose first Metadata answer (the request that "
            "reveals the cluster id) names another cluster is never adopted and takes no "
            "further request: it drains and closes",
        ),
    )
    adopt_unverified: bool = field(
        default=False,
        metadata=option(
            "adopt a bootstrap connection whose host:port metadata gives to exactly one "
            "broker even when the broker cannot confirm that it is that node (brokers before "
            "Kafka 4.4; a 4.4+ broker is asked, KIP-1242) (saves one dial per client start; "
            "unsafe behind a proxy that changes what that host:port leads to, see "
            "docs/property-suite.md)",
            reach=Reach.DROP_IN,
            meaning="adopt the bootstrap connection as the broker's whose host:port metadata "
            "gives it, without the broker confirming its id (saves one dial per start; unsafe "
            "behind a proxy whose routing changes, see [property-suite.md](property-suite.md))"
            ". By default a 4.4+ broker is asked on the socket whether it is that node "
            "(KIP-1242's ApiVersions v5) and the socket adopted if it says so; an older "
            "broker's bootstrap connection serves metadata until a broker connection exists, "
            "then closes",
        ),
    )

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
        if self.connection_linger_ms < 0:
            raise ConfigError(f"connection_linger_ms={self.connection_linger_ms}: must be >= 0")
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
        """A copy with ``settings`` (option names, string values) applied: :class:`UnknownName`
        listing the options for an unknown name, :class:`ConfigError` for a malformed value."""
        changes: dict[str, Any] = {}  # values of the options' declared types
        for name, text in settings.items():
            spec = _OPTION_NAMED.get(name)
            if spec is None:
                raise UnknownName(
                    f"unknown policy option {name!r}; known: {', '.join(sorted(_OPTION_NAMED))}"
                )
            changes[name] = spec.parse(text)
        return dataclasses.replace(self, **changes)


CONFIG_OPTIONS: tuple[OptionSpec, ...] = declared_options(PolicyConfig)
"""Every policy option, from :class:`PolicyConfig`'s fields, in field order."""
DROP_IN_POLICY_OPTIONS: tuple[OptionSpec, ...] = tuple(s for s in CONFIG_OPTIONS if s.reach.drop_in)
"""The policy options the drop-in clients take as keyword arguments."""
_OPTION_NAMED: dict[str, OptionSpec] = {s.name: s for s in CONFIG_OPTIONS}


def coerce_option(name: str, current: object, text: str) -> object:
    """Convert ``text`` to the type of option ``name``; for a name that is no policy option
    (a scenario parameter), to the type of ``current``: bool or int."""
    spec = _OPTION_NAMED.get(name)
    if spec is not None:
        return spec.parse(text)
    return (BOOL if isinstance(current, bool) else INT).parse(name, text)
