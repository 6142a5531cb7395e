"""Group and transaction coordinators on the real cluster: finding one, finding a key that a
chosen broker coordinates, and moving a key's coordinator to another broker.

The real cluster's stand-in for a mock's ``set_coordinator``: a key's coordinator is the
leader of its partition of an internal topic (:mod:`connmgr_evidence.realkafka.placement`), so a key
is *picked* by the broker's rule and confirmed with FindCoordinator, and a coordinator is
*moved* by reordering that partition's replicas and electing the preferred leader.
:class:`CoordinatorAdmin` is a mixin of :class:`~connmgr_evidence.realkafka.KafkaCluster`, on top of
its topic administration.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka.protocol.admin import AlterPartitionReassignmentsRequest
from aiokafka.protocol.coordination import FindCoordinatorRequest

from connmgr_evidence.realkafka.errors import RealKafkaError
from connmgr_evidence.realkafka.placement import (
    COORDINATOR_KEY_TYPES,
    COORDINATOR_TOPICS,
    OFFSETS_TOPIC,
    CoordinatorKind,
    offsets_partition_for,
)
from connmgr_evidence.realkafka.protocol import (
    POLL_S,
    PROBE_ERRORS,
    RETRIABLE_COORDINATOR_ERRORS,
    connection,
    error_name,
    metadata,
    partition_leaders,
    partition_replicas,
    run_sync,
)
from connmgr_evidence.realkafka.topics import TopicAdmin, elect_preferred

__all__ = ["CoordinatorAdmin", "find_coordinator"]


class CoordinatorAdmin(TopicAdmin):
    """Coordinator lookup, placement and moves (see the module doc)."""

    def coordinator_for(self, group: str, timeout_s: float = 30.0) -> int:
        """The broker coordinating consumer group ``group`` (FindCoordinator, key type group).

        Waits out COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / NOT_COORDINATOR (the offsets
        topic being created or moving) up to ``timeout_s``; other errors raise at once.
        """
        port = self._first_port()
        return run_sync(
            lambda: find_coordinator(
                port,
                "group",
                group,
                time.monotonic() + timeout_s,
                label=repr(group),
                within=f"within {timeout_s}s",
            )
        )

    def group_for_coordinator(self, broker_id: int, prefix: str = "g", limit: int = 1000) -> str:
        """The first of ``prefix-0``, ``prefix-1``, ... (up to ``limit`` names) whose group
        coordinator is ``broker_id`` -- the real cluster's stand-in for a mock's
        ``set_coordinator``.

        Deterministic for a given placement of ``__consumer_offsets`` leaders: a name is
        picked by the broker's own rule (:func:`offsets_partition_for`, then that partition's
        leader) and confirmed with FindCoordinator. Raises :class:`RealKafkaError` when
        ``broker_id`` leads no offsets partition or no name within ``limit`` qualifies.
        """
        self._port_of(broker_id)
        port = self._first_port()
        offsets = run_sync(lambda: metadata(port, [OFFSETS_TOPIC]))
        leaders = partition_leaders(offsets).get(OFFSETS_TOPIC, {})
        if not leaders:
            raise RealKafkaError(f"{OFFSETS_TOPIC} does not exist yet (was start() completed?)")
        if broker_id not in leaders.values():
            raise RealKafkaError(
                f"broker {broker_id} leads no {OFFSETS_TOPIC} partition (leaders: {leaders}), "
                "so no group can have it as coordinator"
            )
        for i in range(limit):
            name = f"{prefix}-{i}"
            if leaders.get(offsets_partition_for(name, len(leaders))) != broker_id:
                continue
            actual = self.coordinator_for(name)
            if actual == broker_id:
                return name
            # Leadership moved since the metadata was read: read it again and go on.
            offsets = run_sync(lambda: metadata(port, [OFFSETS_TOPIC]))
            leaders = partition_leaders(offsets).get(OFFSETS_TOPIC, {})
        raise RealKafkaError(
            f"none of {prefix}-0..{prefix}-{limit - 1} is coordinated by broker {broker_id}"
        )

    def find_coordinator(self, kind: CoordinatorKind, key: str, timeout_s: float = 30.0) -> int:
        """The broker coordinating ``key`` (a group id or a transactional id, by ``kind``).

        Waits out COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS / NOT_COORDINATOR (the
        internal topic being created or its leader moving) up to ``timeout_s``.
        """
        require_kind(kind)
        deadline = time.monotonic() + timeout_s
        return run_sync(lambda: find_coordinator(self._first_port(), kind, key, deadline))

    def coordinator_replicas(self, kind: CoordinatorKind) -> dict[int, list[int]]:
        """Partition -> replicas (preferred leader first) of the internal topic that places
        keys of ``kind``; creates ``__transaction_state`` first if it does not exist yet."""
        return partition_replicas(self._coordinator_metadata(kind)).get(
            COORDINATOR_TOPICS[kind], {}
        )

    def _coordinator_metadata(self, kind: CoordinatorKind) -> dict[str, Any]:
        require_kind(kind)
        port = self._first_port()
        if kind == "transaction":
            # Any transactional id will do: asking is what creates the topic.
            self.find_coordinator(kind, "connmgr-create-transaction-state", timeout_s=60.0)
        return run_sync(lambda: metadata(port, [COORDINATOR_TOPICS[kind]]))

    def key_for_coordinator(
        self, kind: CoordinatorKind, broker_id: int, prefix: str, limit: int = 1000
    ) -> str:
        """The first of ``prefix-0``, ``prefix-1``, ... whose ``kind`` coordinator is
        ``broker_id``: :meth:`group_for_coordinator` for groups and transactional ids alike.

        Picked by the broker's rule (:func:`offsets_partition_for`, then that partition's
        leader) and confirmed with FindCoordinator. Raises :class:`RealKafkaError` when
        ``broker_id`` leads no partition of the internal topic or no name qualifies.
        """
        self._port_of(broker_id)
        topic = COORDINATOR_TOPICS[kind]
        for _attempt in range(3):
            leaders = partition_leaders(self._coordinator_metadata(kind)).get(topic, {})
            if broker_id not in leaders.values():
                raise RealKafkaError(
                    f"broker {broker_id} leads no {topic} partition (leaders: {leaders}), "
                    f"so no {kind} key can have it as coordinator"
                )
            name = next(
                (
                    f"{prefix}-{i}"
                    for i in range(limit)
                    if leaders[offsets_partition_for(f"{prefix}-{i}", len(leaders))] == broker_id
                ),
                None,
            )
            if name is None:
                break
            if self.find_coordinator(kind, name) == broker_id:
                return name
            # Leadership moved since the metadata was read: read it again.
        raise RealKafkaError(
            f"none of {prefix}-0..{prefix}-{limit - 1} has {kind} coordinator {broker_id}"
        )

    def move_coordinator(
        self, kind: CoordinatorKind, key: str, broker_id: int, timeout_s: float = 60.0
    ) -> int:
        """Make ``broker_id`` the ``kind`` coordinator of ``key``; returns the one before.

        The coordinator is the leader of ``key``'s partition of the internal topic, and every
        broker holds a replica of it (replication ``min(3, brokers)`` on 3 brokers), so this
        reorders that partition's replicas to put ``broker_id`` first (a reassignment that
        moves no data) and asks for a preferred-leader election. The old coordinator
        resigns and answers NOT_COORDINATOR, the new one loads the partition's state; clients
        follow as they would after a broker's controlled shutdown. Returns once
        FindCoordinator names ``broker_id``. Every key on the same partition moves with it:
        move it back (call again with the returned broker) when the cluster is shared.
        """
        require_kind(kind)
        self._port_of(broker_id)
        port = self._first_port()
        deadline = time.monotonic() + timeout_s
        return run_sync(lambda: _move_coordinator(port, kind, key, broker_id, deadline, timeout_s))


def require_kind(kind: object) -> None:
    """Raise :class:`RealKafkaError` unless ``kind`` is a :data:`CoordinatorKind`."""
    if kind not in COORDINATOR_TOPICS:
        raise RealKafkaError(f"kind must be one of {sorted(COORDINATOR_TOPICS)}, got {kind!r}")


async def find_coordinator(
    port: int,
    kind: CoordinatorKind,
    key: str,
    deadline: float,
    *,
    label: str | None = None,
    within: str = "in time",
) -> int:
    """The ``kind`` coordinator of ``key``, asked of the broker at ``port`` until ``deadline``.

    Retriable errors (the internal topic being created, its leader moving) and connection
    failures are waited out; another error raises :class:`RealKafkaError` at once, naming
    the request as ``FindCoordinator(label)`` (default: the kind and the key), and so does the
    deadline (the message says the key was not found ``within``).
    """
    label = f"{kind} {key!r}" if label is None else label
    last = "no answer"
    while True:
        try:
            async with connection(port) as conn:
                response = await conn.send(FindCoordinatorRequest(key, COORDINATOR_KEY_TYPES[kind]))
        except PROBE_ERRORS as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            code = int(response.error_code)
            if code == 0:
                return int(response.coordinator_id)
            if code not in RETRIABLE_COORDINATOR_ERRORS:
                raise RealKafkaError(f"FindCoordinator({label}) failed: {error_name(code)}")
            last = error_name(code)
        if time.monotonic() >= deadline:
            raise RealKafkaError(f"no coordinator for {kind} {key!r} {within}: {last}")
        await asyncio.sleep(POLL_S)


async def _move_coordinator(
    port: int, kind: CoordinatorKind, key: str, broker_id: int, deadline: float, timeout_s: float
) -> int:
    """:meth:`CoordinatorAdmin.move_coordinator`'s work, asked of the broker at ``port``."""
    topic = COORDINATOR_TOPICS[kind]
    before = await find_coordinator(port, kind, key, deadline)
    if before == broker_id:
        return before
    replicas = partition_replicas(await metadata(port, [topic])).get(topic, {})
    partition = offsets_partition_for(key, len(replicas))
    current = replicas[partition]
    if broker_id not in current:
        raise RealKafkaError(
            f"broker {broker_id} holds no replica of {topic}-{partition} ({current})"
        )
    target = [broker_id, *(r for r in current if r != broker_id)]
    await _reassign(port, topic, partition, target, deadline)
    note = ""
    elect_at = time.monotonic()
    while True:
        answer = await metadata(port, [topic])
        view = partition_replicas(answer).get(topic, {})
        leader = partition_leaders(answer).get(topic, {})
        now = time.monotonic()
        if view.get(partition) == target and leader.get(partition) != broker_id and now >= elect_at:
            note = await elect_preferred(port, topic, [partition])
            elect_at = now + 2.0  # an election takes a moment to show in metadata
        if leader.get(partition) == broker_id:
            found = await find_coordinator(port, kind, key, deadline)
            if found == broker_id:
                return before
        if time.monotonic() >= deadline:
            raise RealKafkaError(
                f"{topic}-{partition} did not move to broker {broker_id} within "
                f"{timeout_s}s: replicas {view.get(partition)}, leader "
                f"{leader.get(partition)}; last election: {note or 'none'}"
            )
        await asyncio.sleep(POLL_S)


async def _reassign(
    port: int, topic: str, partition: int, replicas: list[int], deadline: float
) -> None:
    """AlterPartitionReassignments of one partition to ``replicas`` (in that order)."""
    timeout_ms = max(1000, int((deadline - time.monotonic()) * 1000))
    async with connection(port, timeout_ms) as conn:
        response = await conn.send(
            AlterPartitionReassignmentsRequest(
                timeout_ms, [(topic, [(partition, replicas, {})], {})], {}
            )
        )
    answer = response.to_object()
    codes = [answer["error_code"]] + [
        p["error_code"] for t in answer["responses"] for p in t["partitions"]
    ]
    failed = [code for code in codes if code]
    if failed:
        raise RealKafkaError(
            f"reassigning {topic}-{partition} to {replicas} failed: "
            + ", ".join(error_name(code) for code in failed)
            + (f" ({answer['error_message']})" if answer.get("error_message") else "")
        )
