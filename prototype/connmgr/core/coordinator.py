"""Coordinators: which one a request is for, and where each one is.

A client may talk to several coordinators at once: a consume-transform-produce producer has a
*group* coordinator (``TxnOffsetCommit``) and a *transaction* coordinator (``InitProducerId``,
``AddPartitionsToTxn``, ``AddOffsetsToTxn``, ``EndTxn``), usually on different brokers; a
share-group member (KIP-932) has a share coordinator. A coordinator is therefore named by its
kind and its key (the group id, the transactional id), never by a single "coordinator id",
and each has its own placement: one moving (NOT_COORDINATOR) says nothing about the others.

:class:`CoordinatorTable` is the policy's record of the placements it has been told about,
in the order they were learned.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from connmgr.core.api import Api


class CoordinatorKind(enum.Enum):
    GROUP = "group"
    """A consumer group's coordinator (FindCoordinator key type 0)."""
    TRANSACTION = "transaction"
    """A transactional id's coordinator (key type 1)."""
    SHARE = "share"
    """A share group's coordinator (KIP-932, key type 2): named so a policy can tell it
    apart; no workload here uses it yet."""

    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True, order=True)
class CoordinatorRef:
    """One coordinator: its kind and its key (group id or transactional id)."""

    kind: CoordinatorKind
    key: str

    @classmethod
    def group(cls, group_id: str) -> CoordinatorRef:
        return cls(CoordinatorKind.GROUP, group_id)

    @classmethod
    def transaction(cls, transactional_id: str) -> CoordinatorRef:
        return cls(CoordinatorKind.TRANSACTION, transactional_id)

    def __str__(self) -> str:
        return f"{self.kind.value}:{self.key}"


ANY_GROUP = CoordinatorRef(CoordinatorKind.GROUP, "")
"""The group coordinator of a client that has one group and does not name it (the default of
:class:`~connmgr.core.events.CoordinatorRequestNeeded`)."""

TRANSACTION_APIS = frozenset(
    {Api.INIT_PRODUCER_ID, Api.ADD_PARTITIONS_TO_TXN, Api.ADD_OFFSETS_TO_TXN, Api.END_TXN}
)
"""Requests a transactional producer sends to its *transaction* coordinator. (An idempotent,
non-transactional ``InitProducerId`` is an any-node request instead.)"""

GROUP_APIS = frozenset(
    {
        Api.JOIN_GROUP,
        Api.SYNC_GROUP,
        Api.HEARTBEAT,
        Api.LEAVE_GROUP,
        Api.OFFSET_COMMIT,
        Api.OFFSET_FETCH,
        Api.TXN_OFFSET_COMMIT,
        Api.DESCRIBE_GROUPS,
        Api.CONSUMER_GROUP_HEARTBEAT,
    }
)
"""Requests for a *group* coordinator; ``TxnOffsetCommit`` is one of them (a transactional
producer commits a group's offsets on that group's coordinator)."""


def coordinator_kind(api: Api) -> CoordinatorKind | None:
    """The kind of coordinator ``api`` is addressed to, or None if the API alone cannot say
    (a readiness probe, a request of another kind)."""
    if api in TRANSACTION_APIS:
        return CoordinatorKind.TRANSACTION
    if api in GROUP_APIS:
        return CoordinatorKind.GROUP
    return None


class CoordinatorTable:
    """Where each known coordinator is: ``ref -> broker id``. Mutable, owned by a policy,
    which derives from it: ``on_change`` is called whenever a placement changes."""

    __slots__ = ("_at", "_on_change")

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._at: dict[CoordinatorRef, int] = {}
        self._on_change = on_change

    def place(self, ref: CoordinatorRef, broker_id: int) -> int | None:
        """Record that ``ref`` is on ``broker_id``; returns where it was before (None: new),
        or ``broker_id`` itself when nothing changed."""
        old = self._at.get(ref)
        if old != broker_id:
            self._at[ref] = broker_id
            self._on_change()
        return old

    def forget(self, ref: CoordinatorRef) -> int | None:
        """``ref``'s placement is no longer valid (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
        a new lookup); returns the broker it was on."""
        old = self._at.pop(ref, None)
        if old is not None:
            self._on_change()
        return old

    def broker_of(self, ref: CoordinatorRef) -> int | None:
        return self._at.get(ref)

    def brokers(self, kind: CoordinatorKind | None = None) -> frozenset[int]:
        """The brokers hosting a known coordinator (of ``kind``, or of any kind)."""
        return frozenset(b for r, b in self._at.items() if kind is None or r.kind is kind)

    def items(self) -> Iterator[tuple[CoordinatorRef, int]]:
        return iter(self._at.items())

    def __len__(self) -> int:
        return len(self._at)

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{r}@{b}" for r, b in self._at.items()) + "}"
