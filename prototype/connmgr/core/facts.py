"""The facts a client reports to its policy, whose every change drops what derived from them.

The metadata and the partitions in use are written only through the setters below, which
call :meth:`Derived.facts_changed <connmgr.core.derived.Derived.facts_changed>`; the third
fact, where each coordinator is, lives in :class:`~connmgr.core.coordinator.CoordinatorTable`,
which does the same.
"""

from __future__ import annotations

from connmgr.core.derived import Derived
from connmgr.core.metadata import ClusterMetadata, TopicPartition


class ClientFacts:
    """The metadata and the interest of a policy (:class:`~connmgr.core.policy.Policy`
    mixes this in and sets the three attributes at construction)."""

    derived: Derived
    _metadata: ClusterMetadata | None
    _interest: frozenset[TopicPartition] | None

    @property
    def metadata(self) -> ClusterMetadata | None:
        """The cluster metadata last received (None before the first)."""
        return self._metadata

    @metadata.setter
    def metadata(self, metadata: ClusterMetadata | None) -> None:
        # The same (immutable) metadata again changes no fact: a client that refreshes an
        # unchanged cluster keeps what was derived (the simulator answers every refresh of
        # an unchanged cluster with one object; at 1,000 brokers, rebuilding the node list
        # after each one was a fifth of a simulated hour's CPU).
        if metadata is self._metadata:
            return
        self._metadata = metadata
        self.derived.facts_changed()

    @property
    def interest(self) -> frozenset[TopicPartition] | None:
        """The partitions the client uses (None: not told, every partition may be)."""
        return self._interest

    @interest.setter
    def interest(self, partitions: frozenset[TopicPartition] | None) -> None:
        if partitions is self._interest:
            return  # the same (immutable) set: no fact changed
        self._interest = partitions
        self.derived.facts_changed()
