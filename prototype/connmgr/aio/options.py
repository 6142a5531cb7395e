"""The connection-policy options the drop-in clients accept, checked at construction.

Nothing here repeats an option: the policy options are the fields of
:class:`~connmgr.core.config.PolicyConfig` that reach the drop-in clients
(:data:`~connmgr.core.config.DROP_IN_POLICY_OPTIONS`), and the keywords only the drop-in
clients take are declared once below, as fields of :class:`PolicyOptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connmgr.core.config import DROP_IN_POLICY_OPTIONS
from connmgr.core.options import OptionSpec, Reach, declared_options, option
from connmgr.docblocks import options_markdown, refresh
from connmgr.errors import ConfigError, UnknownName
from connmgr.policies import POLICIES


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Options for :class:`~connmgr.aio.client.PolicyClient`, type-checked when built.
    ``policy`` may name a baseline model too, which is how the tests run the models inside a
    real client."""

    policy_settings: Mapping[str, Any] = field(default_factory=dict)
    """Values of policy options (:data:`DROP_IN_POLICY_OPTIONS`) given as keywords; the others
    keep :class:`~connmgr.core.config.PolicyConfig`'s defaults."""
    seed: int | None = field(
        default=None,
        metadata=option(
            "seed of the policy's random choices",
            reach=Reach.DROP_IN_TESTS,
            keyword="policy_seed",
            meaning="seed of the policy's random choices (the bootstrap server tried first, a "
            "broker for any-node requests when none is connected)",
        ),
    )
    dns_ttl_ms: int = field(
        default=30_000,
        metadata=option(
            "resolve broker host names again this often while connected (ms); 0: only when "
            "dialling",
            reach=Reach.DROP_IN,
            meaning="how often (ms) the client resolves a host name again while it holds a "
            "connection to it, so that a connection whose name no longer resolves to the "
            "address it reached (a broker pod restarted with a new IP; two answers in a row "
            "without it) is closed and its requests re-sent instead of after "
            "`request_timeout_ms`; a failed, timed-out or empty lookup closes nothing; 0: "
            "names are resolved only when dialled. The default is the JVM's default cache "
            "time for a resolved name (`networkaddress.cache.ttl`, 30 s), the Java client's own "
            "staleness; literal addresses are never resolved",
        ),
    )
    policy: str = field(
        default="proposed",
        metadata=option(
            "the policy inside the client",
            reach=Reach.DROP_IN_TESTS,
            keyword="connection_policy",
            meaning="run another policy of `connmgr.policies.POLICIES` inside the client, e.g. "
            "the baseline model `aiokafka-today`",
        ),
    )

    def __post_init__(self) -> None:
        for name, value in self.policy_settings.items():
            spec = _POLICY_OPTION_NAMED.get(name)
            if spec is None:
                raise UnknownName(
                    f"{name!r} is no policy option of the drop-in clients; known: "
                    f"{', '.join(POLICY_OPTION_NAMES)}"
                )
            spec.check(value)
        for spec in CLIENT_OPTIONS:
            spec.check(getattr(self, spec.name))
        if self.dns_ttl_ms < 0:
            raise ConfigError(f"dns_ttl_ms={self.dns_ttl_ms}: must be >= 0")
        if self.policy not in POLICIES:
            raise ConfigError(
                f"connection_policy={self.policy!r}: known policies: {', '.join(POLICIES)}"
            )

    @classmethod
    def take(cls, kwargs: dict[str, Any]) -> PolicyOptions:
        """Remove every drop-in keyword (:data:`DROP_IN_OPTIONS`) from ``kwargs``, a drop-in
        client's constructor arguments, leaving aiokafka's; the options they give."""
        settings = {
            s.name: kwargs.pop(s.keyword) for s in DROP_IN_POLICY_OPTIONS if s.keyword in kwargs
        }
        own = {s.name: kwargs.pop(s.keyword) for s in CLIENT_OPTIONS if s.keyword in kwargs}
        return cls(settings, **own)


CLIENT_OPTIONS: tuple[OptionSpec, ...] = declared_options(PolicyOptions)
"""The drop-in keywords that are no policy option (``policy_seed``, ``dns_ttl_ms``,
``connection_policy``): the policy never sees them."""
DROP_IN_OPTIONS: tuple[OptionSpec, ...] = DROP_IN_POLICY_OPTIONS + CLIENT_OPTIONS
"""Every keyword the drop-in clients take besides aiokafka's."""
POLICY_OPTION_NAMES: tuple[str, ...] = tuple(s.keyword for s in DROP_IN_POLICY_OPTIONS)
_POLICY_OPTION_NAMED: dict[str, OptionSpec] = {s.name: s for s in DROP_IN_POLICY_OPTIONS}


def doc_tables() -> dict[str, str]:
    """The tables ``docs/drop-in-clients.md`` embeds, by marker (see :func:`refresh_doc`)."""
    return {
        "drop-in options": options_markdown(
            tuple(s for s in DROP_IN_OPTIONS if s.reach is Reach.DROP_IN)
        ),
        "drop-in test options": options_markdown(
            tuple(s for s in DROP_IN_OPTIONS if s.reach is Reach.DROP_IN_TESTS)
        ),
    }


def refresh_doc(path: Path) -> bool:
    """Rewrite the generated tables in ``path`` (``docs/drop-in-clients.md``) from the
    declarations; True if that changed the file."""
    return refresh(path, doc_tables())
