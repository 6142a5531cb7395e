"""What a client model may ask of the simulator that runs it: the driver side of the
client/simulator contract, as a protocol, so that the client models do not depend on the
simulator (and the simulator, which builds them, depends on the models alone)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from connmgr.core.coordinator import CoordinatorRef
from connmgr.core.events import Api
from connmgr.core.metadata import TopicPartition
from connmgr.core.policy import Policy
from connmgr.sim.cluster import ClusterModel
from connmgr.sim.library import HostLibrary


class ClientHost(Protocol):
    """The simulator as a client model sees it (:class:`~connmgr.sim.simulator.Simulator`
    implements it). Requests are answered through the model's ``on_response``."""

    policy: Policy
    library: HostLibrary
    """The client library hosting the policy (what of the request pattern is its)."""
    cluster: ClusterModel
    now: float
    """The virtual clock, in ms."""
    records_acked: int
    """Records acknowledged so far; the producer models count them here."""

    def at(self, when: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual time ``when``."""

    def after(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` ``delay`` ms from now."""

    def send_metadata(self, topics: tuple[str, ...], *, bootstrap: bool) -> None:
        """A metadata request naming ``topics`` (``bootstrap``: the client's first)."""

    def send_any(self, api: Api) -> int:
        """An any-node request; returns its request id."""

    def send_broker(self, api: Api, broker_id: int, partitions: tuple[TopicPartition, ...]) -> None:
        """A request for ``partitions`` to the broker the client believes leads them."""

    def send_coordinator(self, api: Api, broker_id: int, coordinator: CoordinatorRef) -> int:
        """A request for ``coordinator``, which the client found on ``broker_id``; its id."""

    def request_open(self, request_id: int) -> bool:
        """Whether request ``request_id`` still waits for its answer or rejection."""

    def coordinator_lost(self, coordinator: CoordinatorRef) -> None:
        """The client no longer knows where ``coordinator`` is."""

    def interest(self, partitions: frozenset[TopicPartition]) -> None:
        """The partitions the client now works with."""

    def close_client(self) -> None:
        """The application closed the client now, before the run's end: the policy closes
        every connection, and the model sends nothing more."""
