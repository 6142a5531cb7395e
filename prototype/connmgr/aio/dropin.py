"""Drop-in ``AIOKafkaProducer`` and ``AIOKafkaConsumer`` with the proposed connection policy.

Same constructor arguments as aiokafka's classes, plus the policy options (``warm_up``,
``share_coordinator``, ``linger_ms``, ``max_connections``, ``expected_cluster_id``,
``adopt_unverified``, ``policy_seed``). aiokafka builds its client as usual; the constructor
then upgrades that very client object to a :class:`~connmgr.aio.client.PolicyClient`, so the
sender, fetcher and group coordinator aiokafka wired to it use the policy without any aiokafka
code being copied.

Misuse raises :class:`~connmgr.errors.ClientMisuse` with what to do: starting twice,
sending or polling before ``start()`` or after ``stop()`` (a producer's sends are checked by
:meth:`PolicyClient._wait_on_metadata`, so that a record costs no more than in aiokafka).
"""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from connmgr.aio.client import PolicyClient
from connmgr.aio.options import PolicyOptions
from connmgr.core.config import ClientKind
from connmgr.core.coordinator import CoordinatorRef
from connmgr.errors import ClientMisuse
from connmgr.ledger import ConnectionLedger

POLICY_OPTION_NAMES = (
    "warm_up",
    "share_coordinator",
    "linger_ms",
    "max_connections",
    "expected_cluster_id",
    "adopt_unverified",
    "bootstrap_offset",
)


def _pop_options(kwargs: dict[str, Any]) -> PolicyOptions:
    chosen = {name: kwargs.pop(name) for name in POLICY_OPTION_NAMES if name in kwargs}
    if "policy_seed" in kwargs:
        chosen["seed"] = kwargs.pop("policy_seed")
    if "connection_policy" in kwargs:
        chosen["policy"] = kwargs.pop("connection_policy")
    return PolicyOptions(**chosen)


class _Lifecycle:
    """Start/stop bookkeeping shared by both classes (aiokafka's own checks are asserts)."""

    _connmgr_state = "new"

    def _starting(self) -> None:
        if self._connmgr_state != "new":
            raise ClientMisuse(
                f"{type(self).__name__}.start() called twice (state: {self._connmgr_state}); "
                "create a new client to start again"
            )
        self._connmgr_state = "starting"

    async def start(self) -> None:
        self._starting()
        try:
            await super().start()  # type: ignore[misc]
        except BaseException:
            self._connmgr_state = "failed"
            await self.stop()
            raise
        self._connmgr_state = "running"

    async def stop(self) -> None:
        self._connmgr_state = "stopped"
        await super().stop()  # type: ignore[misc]

    def _require_running(self, what: str) -> None:
        if self._connmgr_state == "stopped":
            raise ClientMisuse(f"{what} after stop(): create and start a new client")
        if self._connmgr_state == "new":
            raise ClientMisuse(f"{what} before start(): await start() first")


class ProposedProducer(_Lifecycle, AIOKafkaProducer):  # type: ignore[misc]
    """``AIOKafkaProducer`` whose connections the proposed policy manages."""

    client: PolicyClient

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = _pop_options(kwargs)
        super().__init__(*args, **kwargs)
        txn = kwargs.get("transactional_id")
        lookups = () if txn is None else (CoordinatorRef.transaction(str(txn)),)
        PolicyClient.upgrade(self.client, options, ClientKind.PRODUCER, lookups)

    @property
    def ledger(self) -> ConnectionLedger:
        return self.client.ledger


class ProposedConsumer(_Lifecycle, AIOKafkaConsumer):  # type: ignore[misc]
    """``AIOKafkaConsumer`` whose connections the proposed policy manages."""

    _client: PolicyClient

    def __init__(self, *topics: str, **kwargs: Any) -> None:
        options = _pop_options(kwargs)
        super().__init__(*topics, **kwargs)
        group = kwargs.get("group_id")
        lookups = () if group is None else (CoordinatorRef.group(str(group)),)
        PolicyClient.upgrade(self._client, options, ClientKind.CONSUMER, lookups)

    @property
    def ledger(self) -> ConnectionLedger:
        return self._client.ledger

    @property
    def client(self) -> PolicyClient:
        return self._client

    async def getone(self, *partitions: Any) -> Any:
        self._require_running("getone()")
        return await super().getone(*partitions)

    async def getmany(self, *partitions: Any, **kwargs: Any) -> Any:
        self._require_running("getmany()")
        return await super().getmany(*partitions, **kwargs)
