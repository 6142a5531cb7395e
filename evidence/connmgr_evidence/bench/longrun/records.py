"""Were the records delivered exactly once? The topics read back at the end by a fresh
reader, and every record a producer had acknowledged looked for.

A producer of the long run numbers its records (``record-0``, ``record-1``, ...) and reports
which ones it could not deliver (``failed_records``) and which were in aborted transactions
(``aborted_records``); every other record it sent was acknowledged (for a transactional
producer: committed). A record acknowledged but absent from the topic is *lost*; one present
more than once is *duplicated*; a value found that no producer acknowledged (a failed or
aborted record made visible, or a stranger) is *unexpected*.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any, Final

from aiokafka import AIOKafkaConsumer, TopicPartition

from connmgr.errors import ConnMgrError

__all__ = ["RecordCheck", "check_records", "read_topic"]

_NUMBERED: Final = re.compile(rb"record-(\d+)")


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """One topic's records against what its producer acknowledged (see the module doc)."""

    topic: str
    sent: int
    acked: int
    read: int
    """Records read back (every copy counted)."""
    lost: tuple[int, ...]
    duplicated: tuple[int, ...]
    unexpected: int

    @property
    def exactly_once(self) -> bool:
        return not self.lost and not self.duplicated and not self.unexpected

    def as_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "sent": self.sent,
            "acked": self.acked,
            "read": self.read,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "unexpected": self.unexpected,
            "lost_records": list(self.lost[:20]),
            "duplicated_records": list(self.duplicated[:20]),
        }


def check_records(
    topic: str, values: Iterable[bytes], sent: int, not_acked: Collection[int]
) -> RecordCheck:
    """Compare the values read from ``topic`` with records ``0 .. sent-1`` minus
    ``not_acked`` (failed or aborted): which acknowledged ones are missing, which appear
    more than once, how many values are neither."""
    counts: Counter[int] = Counter()
    read = unexpected = 0
    refused = set(not_acked)
    for value in values:
        read += 1
        m = _NUMBERED.fullmatch(value)
        if m is None or int(m[1]) >= sent or int(m[1]) in refused:
            unexpected += 1
            continue
        counts[int(m[1])] += 1
    acked = [n for n in range(sent) if n not in refused]
    return RecordCheck(
        topic=topic,
        sent=sent,
        acked=len(acked),
        read=read,
        lost=tuple(n for n in acked if counts[n] == 0),
        duplicated=tuple(sorted(n for n, c in counts.items() if c > 1)),
        unexpected=unexpected,
    )


async def read_topic(
    bootstrap: str, topic: str, partitions: int, *, committed_only: bool, timeout_s: float = 120.0
) -> list[bytes]:
    """Every value in ``topic`` (partitions ``0 .. partitions-1``), read from the start to
    the end offsets seen when reading begins by a new consumer that joins no group
    (``read_committed`` with ``committed_only``: only committed transactions' records).
    Raises :class:`ConnMgrError` if the end is not reached within ``timeout_s``."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if committed_only else "read_uncommitted",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        end = await consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while True:
            positions = {tp: await consumer.position(tp) for tp in tps}
            if all(positions[tp] >= end[tp] for tp in tps):
                return values
            if time.monotonic() >= deadline:
                raise ConnMgrError(
                    f"reading {topic} back: at {positions} after {timeout_s:g}s, end is {end}"
                )
            batch = await consumer.getmany(timeout_ms=500)
            values += [r.value for records in batch.values() for r in records if r.value]
            await asyncio.sleep(0)
    finally:
        await consumer.stop()
