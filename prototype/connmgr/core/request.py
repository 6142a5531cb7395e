"""A request as a policy holds it: its id, its API and where it must go."""

from __future__ import annotations

from dataclasses import dataclass

from connmgr.core.api import Api
from connmgr.core.coordinator import CoordinatorRef


@dataclass(frozen=True, slots=True)
class ToBootstrap:
    """The first metadata request: only bootstrap servers are known."""


@dataclass(frozen=True, slots=True)
class ToAnyNode:
    pass


@dataclass(frozen=True, slots=True)
class ToBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class ToCoordinator:
    broker_id: int
    coordinator: CoordinatorRef


Target = ToBootstrap | ToAnyNode | ToBroker | ToCoordinator


@dataclass(frozen=True, slots=True)
class Request:
    request_id: int
    api: Api
    target: Target
    since_md: int = 0
    """How many metadata responses the policy had when the request arrived: metadata newer
    than the request that still lacks its broker means the broker is gone (``Reject``)."""
