"""Where the broker places a coordinator: the internal topics and the partition of a key.

Pure: the broker's own rule, computed here so a test can pick a group name or transactional
id whose coordinator is a chosen broker (see :mod:`connmgr_evidence.realkafka.coordinators`, which
confirms the pick with FindCoordinator).

Kafka places a transactional id as it places a group: TransactionStateManager.partitionFor is
``Utils.abs(transactionalId.hashCode()) % transaction.state.log.num.partitions``, and the
leader of that ``__transaction_state`` partition is the coordinator (so
:func:`offsets_partition_for` computes both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

__all__ = [
    "COORDINATOR_KEY_TYPES",
    "COORDINATOR_TOPICS",
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "CoordinatorKind",
    "java_string_hash",
    "offsets_partition_for",
]

OFFSETS_TOPIC: Final = "__consumer_offsets"
TRANSACTION_STATE_TOPIC: Final = "__transaction_state"

CoordinatorKind = Literal["group", "transaction"]
"""What a coordinator coordinates: a consumer group or a transactional id (as the mock's
``set_coordinator`` names them)."""

COORDINATOR_TOPICS: Final[Mapping[str, str]] = {
    "group": OFFSETS_TOPIC,
    "transaction": TRANSACTION_STATE_TOPIC,
}
"""The internal topic whose partition leader coordinates a key of each kind."""
COORDINATOR_KEY_TYPES: Final[Mapping[str, int]] = {"group": 0, "transaction": 1}
"""FindCoordinator's key_type for each kind."""


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text``: over UTF-16 code units, in signed 32 bits."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def offsets_partition_for(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group``, as the broker computes it.

    ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`` (GroupCoordinatorService);
    Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 rather than overflowing.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    value = java_string_hash(group)
    return (0 if value == -(1 << 31) else abs(value)) % partitions
