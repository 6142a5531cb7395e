"""Topics on the real cluster: creating one with chosen partition leaders, reading leaders, and
preferred-leader elections.

:class:`TopicAdmin` is the part of :class:`~connmgr_evidence.realkafka.KafkaCluster` that asks the
brokers about topics. It is a mixin: the cluster supplies which brokers exist and where they
listen (:attr:`TopicAdmin.broker_ids`, :meth:`TopicAdmin._port_of`,
:meth:`TopicAdmin._running_ports`); everything here speaks to the brokers only through
:mod:`connmgr_evidence.realkafka.protocol`'s one-question connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

import aiokafka.errors as kafka_errors
from aiokafka.protocol.admin import CreateTopicsRequest

from connmgr_evidence.realkafka.errors import RealKafkaError
from connmgr_evidence.realkafka.protocol import (
    ELECTION_NOT_NEEDED,
    POLL_S,
    PROBE_ERRORS,
    ElectLeadersRequest,
    connection,
    error_name,
    metadata,
    partition_leaders,
    run_sync,
)

__all__ = ["TopicAdmin", "await_leaders", "elect_preferred"]


class TopicAdmin:
    """Topic creation with placed leaders, leader reads and elections (see the module doc)."""

    @property
    def broker_ids(self) -> tuple[int, ...]:
        """Every broker's id, ascending; known before start."""
        raise NotImplementedError

    def _port_of(self, broker_id: int) -> int:
        """``broker_id``'s client port; raises :class:`RealKafkaError` for an unknown id or a
        cluster not started."""
        raise NotImplementedError

    def _running_ports(self) -> dict[int, int]:
        """Broker id -> client port, by id; raises :class:`RealKafkaError` unless running."""
        raise NotImplementedError

    def _first_port(self) -> int:
        """The client port of the lowest broker id, the one questions go to by default."""
        return next(iter(self._running_ports().values()))

    def leaders(self, topic: str, broker_id: int | None = None) -> dict[int, int]:
        """Partition -> leader broker id of ``topic`` per ``broker_id``'s metadata (default:
        the first broker); -1 for a partition without a leader; {} for an unknown topic."""
        port = self._port_of(broker_id) if broker_id is not None else self._first_port()

        async def ask() -> dict[int, int]:
            return partition_leaders(await metadata(port, [topic])).get(topic, {})

        return run_sync(ask)

    def create_topic_with_leaders(
        self,
        name: str,
        leaders: Sequence[int],
        *,
        replication_factor: int | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Create ``name`` with partition ``i`` led by ``leaders[i]``, and wait until it is.

        Each partition's replicas are ``leaders[i]`` first (the preferred leader) then the
        next brokers by id, wrapping around, ``replication_factor`` in all (default
        ``min(3, brokers)``). Returns once *every* broker's metadata shows every partition
        led by the broker asked for; if a partition came up led by another broker (a replica
        was not in sync yet), a preferred-leader election is requested for it.

        Raises :class:`RealKafkaError` for an unknown broker id, an empty ``leaders``, a bad
        replication factor, a broker error (e.g. the topic exists; its name is given), or when
        ``timeout_s`` passes first (showing the leaders seen).
        """
        ports = self._running_ports()
        ids = list(self.broker_ids)
        wanted = list(leaders)
        if not wanted:
            raise RealKafkaError("leaders must name at least one broker (one per partition)")
        for leader in wanted:
            if isinstance(leader, bool) or not isinstance(leader, int) or leader not in ids:
                raise RealKafkaError(f"leader {leader!r} is not a broker id; the brokers are {ids}")
        replication = min(3, len(ids)) if replication_factor is None else replication_factor
        if not 1 <= replication <= len(ids):
            raise RealKafkaError(
                f"replication_factor must be in 1..{len(ids)}, got {replication_factor!r}"
            )
        assignment = [
            (p, [ids[(ids.index(leader) + k) % len(ids)] for k in range(replication)])
            for p, leader in enumerate(wanted)
        ]
        want = dict(enumerate(wanted))
        deadline = time.monotonic() + timeout_s
        first = next(iter(ports.values()))

        async def create_and_wait() -> None:
            async with connection(first, int(timeout_s * 1000)) as conn:
                response = await conn.send(
                    CreateTopicsRequest(
                        [(name, -1, -1, assignment, [])], int(timeout_s * 1000), False
                    )
                )
            for result in response.to_object()["topic_errors"]:
                if result["error_code"]:
                    raise RealKafkaError(
                        f"creating topic {name!r} failed: {error_name(result['error_code'])}"
                        f" {result.get('error_message') or ''}".rstrip()
                    )
            await await_leaders(ports, name, want, deadline)

        run_sync(create_and_wait)

    def elect_preferred_leaders(
        self, topic: str, partitions: Sequence[int] | None = None
    ) -> dict[int, int]:
        """Request preferred-leader election of ``partitions`` (default: every partition of
        ``topic``), once; partition -> Kafka error code (0: elected, 84: not needed, the
        preferred replica already leads; 80: the preferred replica is not in sync yet)."""
        port = self._first_port()

        async def ask() -> dict[int, int]:
            if partitions is None:
                wanted = sorted(partition_leaders(await metadata(port, [topic])).get(topic, {}))
            else:
                wanted = list(partitions)
            async with connection(port) as conn:
                response = await conn.send(ElectLeadersRequest(topic, wanted, 10_000))
            return {
                r["partition_id"]: r["error_code"]
                for t in response.to_object()["replica_election_results"]
                for r in t["partition_result"]
            }

        return run_sync(ask)


async def await_leaders(
    ports: dict[int, int], topic: str, want: dict[int, int], deadline: float
) -> None:
    """Wait until every broker in ``ports`` (id -> client port) sees ``topic``'s partitions
    led as in ``want``, asking for preferred-leader elections of the partitions led by
    another broker every 2 s; raises :class:`RealKafkaError` at ``deadline``."""
    first = next(iter(ports.values()))
    elect_at = time.monotonic() + 2.0
    election_note = ""
    while True:
        views: dict[int, dict[int, int]] = {}
        for node_id, port in ports.items():
            with contextlib.suppress(*PROBE_ERRORS):
                views[node_id] = partition_leaders(await metadata(port, [topic])).get(topic, {})
        if len(views) == len(ports) and all(v == want for v in views.values()):
            return
        now = time.monotonic()
        # Leaders elected, but not the ones asked for: ask for the preferred ones.
        wrong = sorted(
            {
                p
                for view in views.values()
                for p, leader in view.items()
                if leader >= 0 and leader != want.get(p)
            }
        )
        if wrong and now >= elect_at:
            election_note = await elect_preferred(first, topic, wrong)
            elect_at = now + 2.0
        if now >= deadline:
            raise RealKafkaError(
                f"topic {topic!r}: wanted leaders {want}, brokers' views {views}"
                + (f"; last election: {election_note}" if election_note else "")
            )
        await asyncio.sleep(POLL_S)


async def elect_preferred(port: int, topic: str, partitions: list[int]) -> str:
    """Ask the broker at ``port`` for preferred-leader election of ``partitions``; a summary
    of the answer (a connection failure is summarised too, not raised)."""
    try:
        async with connection(port) as conn:
            response = await conn.send(ElectLeadersRequest(topic, partitions, 10_000))
    except PROBE_ERRORS as exc:
        return f"{type(exc).__name__}: {exc}"
    except (NotImplementedError, kafka_errors.IncompatibleBrokerVersion) as exc:
        raise RealKafkaError(f"the broker does not take ElectLeaders v1: {exc}") from exc
    answer = response.to_object()
    codes = [
        (r["partition_id"], r["error_code"])
        for t in answer["replica_election_results"]
        for r in t["partition_result"]
    ]
    return ", ".join(
        f"p{p}: {'ok' if c in (0, ELECTION_NOT_NEEDED) else error_name(c)}" for p, c in codes
    ) or error_name(answer["error_code"])
