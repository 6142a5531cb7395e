"""The connection-policy options the drop-in clients accept, checked at construction."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from connmgr.errors import ConfigError
from connmgr.policies import POLICIES


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Options for :class:`~connmgr.aio.client.PolicyClient` (see the proposed policy's
    docstring for what each does). ``policy`` may name a baseline model too, which is how the
    tests run the models inside a real client."""

    warm_up: bool = False
    share_coordinator: bool = False
    linger_ms: int = 3_000
    max_connections: int | None = None
    expected_cluster_id: str | None = None
    adopt_unverified: bool = False
    bootstrap_offset: int | None = None
    seed: int | None = None
    policy: str = "proposed"

    def __post_init__(self) -> None:
        expected: dict[str, tuple[type, ...]] = {
            "warm_up": (bool,),
            "share_coordinator": (bool,),
            "linger_ms": (int,),
            "max_connections": (int, type(None)),
            "expected_cluster_id": (str, type(None)),
            "adopt_unverified": (bool,),
            "bootstrap_offset": (int, type(None)),
            "seed": (int, type(None)),
            "policy": (str,),
        }
        for f in fields(self):
            value: Any = getattr(self, f.name)
            kinds = expected[f.name]
            # bool is an int subclass: reject True for linger_ms and friends.
            wrong_bool = isinstance(value, bool) and bool not in kinds
            if not isinstance(value, kinds) or wrong_bool:
                names = " or ".join("None" if k is type(None) else k.__name__ for k in kinds)
                raise ConfigError(f"{f.name}={value!r} ({type(value).__name__}): expected {names}")
        if self.policy not in POLICIES:
            raise ConfigError(f"policy={self.policy!r}: known policies: {', '.join(POLICIES)}")
