"""Who a connection talks to and what for: node identities, purposes, roles, connection keys.

A connection key is the (host, port, node id) triple plus a purpose. Keeping the endpoint in
the key means a node id that moves to a new host:port gets a *new* key, so a stale address can
never be found by a node-id lookup. Bootstrap nodes have their own identity type (never a
string, never a real broker id), and the group coordinator is a purpose, not a fake broker id:
:class:`CoordinatorNode` exists only to express the Java client's ``2147483647 - id`` scheme.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from connmgr.core.endpoint import Endpoint

COORDINATOR_ID_BASE = 2**31 - 1
"""The Java client addresses the group coordinator as ``2147483647 - brokerId``."""


class Purpose(enum.Enum):
    """What a connection carries: partition data and any-node requests, or group requests."""

    DATA = "data"
    COORDINATION = "coordination"

    # Members are singletons compared by identity; Enum's default hash (of the name, in
    # Python code) showed up as the top cost of 10,000-broker simulations.
    __hash__ = object.__hash__


class Role(enum.Enum):
    """The role a connection plays, for metrics: derived from its key, never stored apart."""

    BOOTSTRAP = "bootstrap"
    DATA = "data"
    COORDINATION = "coordination"

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, order=True)
class BootstrapNode:
    """Entry ``index`` (0-based) of ``bootstrap.servers``, before metadata names its broker."""

    index: int

    @property
    def java_id(self) -> int:
        """The negative id the Java client gives this entry: -1 for the first, -2, ..."""
        return -(self.index + 1)


@dataclass(frozen=True, slots=True, order=True)
class BrokerNode:
    """A broker known from metadata, by its real node id."""

    broker_id: int

    @property
    def java_id(self) -> int:
        return self.broker_id


@dataclass(frozen=True, slots=True, order=True)
class CoordinatorNode:
    """The Java client's separate identity for the group coordinator hosted by ``broker_id``."""

    broker_id: int

    @property
    def java_id(self) -> int:
        return COORDINATOR_ID_BASE - self.broker_id


NodeIdentity = BootstrapNode | BrokerNode | CoordinatorNode


@dataclass(frozen=True, slots=True)
class ConnectionKey:
    """The identity of one connection: endpoint, node identity and purpose.

    At most one live connection exists per key. Keys are values: compare and hash them, never
    mutate them; a connection whose identity changes (adoption) gets a new key.
    """

    endpoint: Endpoint
    node: NodeIdentity
    purpose: Purpose = Purpose.DATA
    _hash: int = field(init=False, repr=False, compare=False, default=0)

    def __post_init__(self) -> None:
        # Keys are hashed on every lookup; compute it once (the fields never change).
        object.__setattr__(self, "_hash", hash((self.endpoint, self.node, self.purpose)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def role(self) -> Role:
        if isinstance(self.node, BootstrapNode):
            return Role.BOOTSTRAP
        if self.purpose is Purpose.COORDINATION:
            return Role.COORDINATION
        return Role.DATA

    @property
    def broker_id(self) -> int | None:
        """The real broker id this key names, or None for a bootstrap node."""
        if isinstance(self.node, BootstrapNode):
            return None
        return self.node.broker_id

    def __str__(self) -> str:
        return f"{self.endpoint}/id={self.node.java_id}/{self.purpose.value}"
