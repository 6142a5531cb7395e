"""Deliberately broken variants of the proposed policy, one per invariant of the property
suite (and of the scenario checks in tests/test_mutants.py). Each breaks exactly one rule;
the suite must fail on it with a short, readable counterexample.

They live in the package, not in tests/, because the main job's property stage
(:mod:`connmgr.testing.evidence`) searches them too, and its figures go into the RFC."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import ClassVar

from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection
from connmgr.core.decisions import AdoptAs, Decision, Open, OpenFor, Placement, SendOn
from connmgr.core.identity import BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.request import Request
from connmgr.core.rng import RandomSource
from connmgr.core.state import ConnState
from connmgr.policies import ProposedPolicy
from connmgr.policies.proposed.prompt_close import PromptClose


class KeyedByHostPort(ProposedPolicy):
    """Same routing, broken: reuses any ready connection to the request's host:port, as a
    pool keyed by address alone would -- behind a proxy, one broker's socket carries
    another's requests."""

    def place(self, request: Request) -> Placement:
        placement = super().place(request)
        if isinstance(placement, OpenFor):
            key = placement.key
            for conn in self.table.records():
                if (
                    conn.state is ConnState.READY
                    and conn.role is not Role.BOOTSTRAP
                    and (conn.key.endpoint, conn.key.purpose) == (key.endpoint, key.purpose)
                ):
                    return SendOn(conn)
        return placement


class MergeByHostPort(ProposedPolicy):
    """Safety, broken: adopts a bootstrap connection whenever any broker lists its
    host:port (the behaviour librdkafka removed in 2.10)."""

    def on_metadata(
        self, old: ClusterMetadata | None, via: Connection | None
    ) -> Iterator[Decision]:
        md = self.metadata
        assert md is not None
        for conn in self.table.records():
            ids = md.ids_by_endpoint.get(conn.key.endpoint)
            if conn.role is Role.BOOTSTRAP and ids:
                key = ConnectionKey(conn.key.endpoint, BrokerNode(min(ids)), Purpose.DATA)
                if self.table.live(key) is None:
                    yield AdoptAs(conn, key)


class EagerDialer(ProposedPolicy):
    """Never more sockets, broken: dials every broker as soon as metadata names it, as the
    2019 articles describe the Java client doing."""

    def on_metadata(
        self, old: ClusterMetadata | None, via: Connection | None
    ) -> Iterator[Decision]:
        yield from super().on_metadata(old, via)
        md = self.metadata
        assert md is not None
        for broker in md.brokers:
            key = ConnectionKey(broker.endpoint, BrokerNode(broker.broker_id), Purpose.DATA)
            if self.table.live(key) is None and not self.in_backoff(key):
                yield Open(key)


class Thrashing(ProposedPolicy):
    """Never more sockets, broken the other way: counts nothing as needed (no leader, no
    coordinator, no connection kept for any-node requests; only a busy one is spared) and
    lingers 0 ms, so every quiet connection closes at once and is dialled again at the
    next request. It holds fewer sockets than any baseline and opens hundreds more."""

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(dataclasses.replace(config, connection_linger_ms=0), rng)
        self.prompt_close = _NothingNeeded(self, self.adoption)


class _NothingNeeded(PromptClose):
    """Rule (g) for :class:`Thrashing`: only a busy connection is kept."""

    def needs(self) -> tuple[frozenset[int], frozenset[int]]:
        busy = frozenset(
            c.conn_id for c in self._policy.table.records() if c.state is ConnState.READY and c.busy
        )
        return frozenset(), busy


class NeverClose(ProposedPolicy):
    """Tight, broken: forgets prompt close, so unneeded connections stay open."""

    def review(self) -> Iterator[Decision]:
        return iter(())  # idle expiry alone


class StaleEndpoint(ProposedPolicy):
    """Safety, broken: finds a broker's connection by node id alone and keeps it when the
    broker moves to a new host:port, so it goes on sending to the old address."""

    def retire_moved(self) -> Iterator[Decision]:
        return iter(())  # rule (h) off

    def place(self, request: Request) -> Placement:
        placement = super().place(request)
        broker_id = placement.key.broker_id if isinstance(placement, OpenFor) else None
        if isinstance(placement, OpenFor) and broker_id is not None:
            found = self.table.live_for_node(BrokerNode(broker_id), placement.key.purpose)
            if found is not None:
                return SendOn(found)
        return placement


class TrustsHostPort(ProposedPolicy):
    """Safety, broken in a subtler way: adopts a bootstrap connection whose host:port
    metadata gives to one broker without the broker confirming its id (the policy's
    ``adopt_unverified`` option, forced on)."""

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(dataclasses.replace(config, adopt_unverified=True), rng)


class IgnoresBudget(ProposedPolicy):
    """Safety, broken: forgets ``max_connections``."""

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(dataclasses.replace(config, max_connections=None), rng)


class SharedCursor(ProposedPolicy):
    """Determinism, broken: counts its instances in a class attribute (state shared by every
    client in the process) and lets the count move the bootstrap server it tries first, so
    the same world and events give another trace in the next client."""

    instances: ClassVar[int] = 0

    def __init__(self, config: PolicyConfig, rng: RandomSource) -> None:
        super().__init__(config, rng)
        SharedCursor.instances += 1
        self._boot_cursor = (self._boot_cursor + SharedCursor.instances) % len(config.bootstrap)
