"""What one simulated (or real) run produced: counts, the connection timeline, and where each
request went. ``RunResult.as_json()`` is the JSON schema shared by ``connmgr simulate`` and
``connmgr run``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from connmgr.core.endpoint import Endpoint
from connmgr.core.events import Api
from connmgr.core.identity import ConnectionKey, Role
from connmgr.core.metadata import TopicPartition
from connmgr.core.policy import Policy
from connmgr.ledger import ConnectionCounts, ConnectionLedger, ConnEntry, Dial, Life, key_json


@dataclass(slots=True)
class ConnRecord:
    """One socket, from dial to close."""

    conn_id: int
    key: ConnectionKey
    backend: int | None
    opened_ms: float
    closed_ms: float | None = None
    close_reason: str | None = None
    adopted_as: ConnectionKey | None = None
    dialled_at: Endpoint | None = None
    """Where the cluster placed the key's broker when this socket was dialled (None for a
    socket dialled without a broker id). Differing from the key's endpoint, the dial went
    by stale metadata and reached whoever was at that address then."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    t_ms: float
    request_id: int
    api: Api
    target: str
    reached: int
    conn_id: int
    key: ConnectionKey
    routed_ok: bool
    known_endpoint: Endpoint | None = None
    """Where the policy's metadata placed the target broker when the request was sent."""
    true_endpoint: Endpoint | None = None
    """Where the target broker really was when the request was sent (None: any node).
    A request sent elsewhere went by stale metadata."""
    partitions: tuple[TopicPartition, ...] = ()
    """The partitions a broker request (Produce, Fetch) carried."""


@dataclass
class RunResult:
    scenario: str
    policy: str
    seed: int
    settings: dict[str, str]
    duration_ms: float
    counts: ConnectionCounts
    """The ledger's counts at the steady instant (what ``opened`` ... ``life`` read)."""
    steady_connections: list[dict[str, Any]]
    ledger: ConnectionLedger
    requests: list[RequestRecord]
    misrouted: int
    leaked: int
    events: int
    wall_s: float
    needed_conn_ids: list[int] | None
    steady_conn_ids: list[int]
    conn_records: list[ConnRecord] = field(default_factory=list)
    stale_waits: int | None = None
    """Requests that waited on a socket to an address that stopped answering (a replaced
    pod's), or None when the cluster's hosts are literal addresses (no name can go stale)."""
    stale_wait_ms: float | None = None
    """The ms those requests waited there (None as :attr:`stale_waits`)."""

    @property
    def opened(self) -> int:
        return self.counts.opened

    @property
    def failed(self) -> int:
        return self.counts.failed

    @property
    def peak(self) -> int:
        return self.counts.peak

    @property
    def steady(self) -> int:
        return self.counts.steady

    @property
    def by_role(self) -> dict[str, dict[str, int]]:
        return self.counts.by_role

    @property
    def by_broker(self) -> dict[str, dict[str, int]]:
        return self.counts.by_broker

    @property
    def life(self) -> Life:
        """Socket-seconds and handshakes over the whole simulated duration."""
        return self.counts.life

    @classmethod
    def build(
        cls,
        sim: FinishedRun,
        *,
        counts: ConnectionCounts,
        steady: list[ConnectionKey],
        needed_conn_ids: list[int] | None,
        steady_conn_ids: list[int],
        leaked: int,
        wall_s: float,
    ) -> RunResult:
        return cls(
            scenario="",
            policy=sim.policy.name,
            seed=0,
            settings={},
            duration_ms=sim.duration_ms,
            counts=counts,
            steady_connections=[key_json(k) for k in steady],
            ledger=sim.ledger,
            requests=sim.request_log,
            misrouted=sim.misrouted,
            leaked=leaked,
            events=sim.events,
            wall_s=wall_s,
            needed_conn_ids=needed_conn_ids,
            steady_conn_ids=steady_conn_ids,
            conn_records=sim.conn_records,
        )

    @property
    def timeline(self) -> list[ConnEntry]:
        """Every connection event of the run, in order (the ledger's entries)."""
        return self.ledger.entries

    def connection_sequence(self) -> list[tuple[int, str, int]]:
        """(node id as the Java client prints it, host, port) of every dial, in order."""
        return [(e.key.node.java_id, e.host, e.port) for e in self.ledger.dial_entries()]

    def role_sequence(self) -> list[tuple[int | None, Role]]:
        """(broker id, role) of every dial, in order, as a real client's ledger records it."""
        return self.ledger.sequence()

    def dial_batches(self) -> list[list[Dial]]:
        """(broker, role, host:port) of every dial, grouped by the instant it started."""
        return self.ledger.dial_batches()

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "policy": self.policy,
            "seed": self.seed,
            "settings": self.settings,
            "duration_ms": self.duration_ms,
            "opened": self.opened,
            "failed": self.failed,
            "peak": self.peak,
            "steady": self.steady,
            "by_role": self.by_role,
            "by_broker": self.by_broker,
            "life": self.life.as_json(),
            "steady_connections": self.steady_connections,
            "misrouted": self.misrouted,
            "leaked": self.leaked,
            "events": self.events,
            "wall_s": round(self.wall_s, 4),
        } | (
            {}
            if self.stale_waits is None or self.stale_wait_ms is None
            else {"stale_waits": self.stale_waits, "stale_wait_ms": round(self.stale_wait_ms, 3)}
        )

    def as_json(self) -> dict[str, Any]:
        data = self.summary()
        data["timeline"] = self.ledger.timeline()
        data["requests"] = [
            {
                "t_ms": round(r.t_ms, 3),
                "request_id": r.request_id,
                "api": r.api.name,
                "target": r.target,
                "reached": r.reached,
                "conn": r.conn_id,
                "node": r.key.node.java_id,
                "purpose": r.key.purpose.value,
                "routed_ok": r.routed_ok,
            }
            for r in self.requests
        ]
        return data


def java_log_events(result: RunResult) -> list[tuple[float, str, str, int, int, str]]:
    """The run as (t_ms, kind, host, port, node id, reason) rows for :mod:`connmgr.javalog`:
    dials, closes, and the node each metadata request went to, in time order."""
    rows = [
        (t, n, kind, host, port, node, reason)
        for n, (t, kind, host, port, node, reason) in enumerate(
            result.ledger.java_log_rows(failures=False)
        )
    ]
    offset = len(rows)
    for n, r in enumerate(result.requests):
        if r.api is Api.METADATA:
            ep = r.key.endpoint
            rows.append((r.t_ms, offset + n, "metadata", ep.host, ep.port, r.key.node.java_id, ""))
    rows.sort(key=lambda row: (row[0], row[1]))
    return [(t, kind, host, port, node, reason) for t, _, kind, host, port, node, reason in rows]


class FinishedRun(Protocol):
    """What :meth:`RunResult.build` reads of a finished simulation
    (:class:`~connmgr.sim.simulator.Simulator` provides it)."""

    policy: Policy
    duration_ms: float
    conn_records: list[ConnRecord]
    ledger: ConnectionLedger
    request_log: list[RequestRecord]
    misrouted: int

    @property
    def events(self) -> int: ...
