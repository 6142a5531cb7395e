"""``aiokafka-today``: aiokafka 0.14's ``AIOKafkaClient`` (B3 in baseline-behaviour).

* ``start()`` dials the bootstrap servers one at a time until one answers Metadata, then
  **closes** that connection (keeping it only if the metadata listed no brokers). The order is
  a random shuffle of the list (``collect_hosts(..., randomize=True)``), not the given order
  as docs/baseline-behaviour.md B3 says; measured on the embedded cluster
  (tests/embedded/test_observe.py). ``bootstrap_offset`` pins the entry tried first, to
  replay a recorded run.
* Connections are keyed by ``(node_id, group)``: group DEFAULT for data, COORDINATION for
  every coordinator (group and transaction alike; a transactional ``InitProducerId`` is the
  exception, on DEFAULT); found by node id alone, whatever the endpoint.
* Periodic metadata and FindCoordinator go to a **random** known broker, dialled if needed;
  an open connection is not preferred.
* A connection closes after ``connections_max_idle_ms`` without activity, never while a
  request is pending. There is no reconnect backoff of its own beyond the retry delay.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from connmgr.core.actions import CloseReason
from connmgr.core.config import PolicyConfig
from connmgr.core.connections import Connection
from connmgr.core.decisions import WAIT, Decision, Drain, OpenFor, Placement, SendOn
from connmgr.core.events import Api
from connmgr.core.identity import BootstrapNode, BrokerNode, ConnectionKey, Purpose, Role
from connmgr.core.metadata import ClusterMetadata
from connmgr.core.policy import Policy
from connmgr.core.request import Request, ToAnyNode, ToBootstrap, ToBroker, ToCoordinator
from connmgr.core.rng import RandomSource
from connmgr.policies.recorded import NOTHING_RECORDED, RecordedChoices


class AiokafkaTodayPolicy(Policy):
    name: ClassVar[str] = "aiokafka-today"
    extra_options: ClassVar[frozenset[str]] = frozenset({"bootstrap_offset"})
    summary: ClassVar[str] = "aiokafka 0.14: bootstrap then close, random node for metadata"

    def __init__(
        self, config: PolicyConfig, rng: RandomSource, recorded: RecordedChoices = NOTHING_RECORDED
    ) -> None:
        super().__init__(config, rng)
        self.recorded = recorded
        """A recorded run's broker choices (``replay_choices``), replayed in order."""
        self._replayed = 0
        order = list(range(len(config.bootstrap)))
        if config.bootstrap_offset is None:
            rng.shuffle(order)
        else:
            order.remove(config.bootstrap_offset)
            order.insert(0, config.bootstrap_offset)
        self._bootstrap_order = order

    def place(self, request: Request) -> Placement:
        target = request.target
        md = self.metadata
        if isinstance(target, ToBootstrap) or (isinstance(target, ToAnyNode) and md is None):
            return self._bootstrap_connection()
        if md is None:
            return WAIT
        if isinstance(target, ToAnyNode):
            if not md.brokers:
                return self._bootstrap_connection()
            broker_id, purpose = self._random_broker(md), Purpose.DATA
        elif isinstance(target, ToBroker):
            broker_id, purpose = target.broker_id, Purpose.DATA
        else:
            assert isinstance(target, ToCoordinator)
            # Every coordinator request goes on the (node, COORDINATION) connection -- the
            # group's and the transaction's alike, shared when they are on one broker --
            # except InitProducerId, whose handler uses the DEFAULT group.
            broker_id = target.broker_id
            purpose = Purpose.DATA if request.api is Api.INIT_PRODUCER_ID else Purpose.COORDINATION
        conn = self.table.live_for_node(BrokerNode(broker_id), purpose)
        if conn is not None:
            return SendOn(conn)
        endpoint = md.endpoint_of(broker_id)
        if endpoint is None:
            return WAIT
        return OpenFor(ConnectionKey(endpoint, BrokerNode(broker_id), purpose))

    def _random_broker(self, md: ClusterMetadata) -> int:
        """aiokafka's ``random.choice`` over known brokers, or the next replayed choice."""
        while self._replayed < len(self.recorded.replay_choices):
            choice = self.recorded.replay_choices[self._replayed]
            self._replayed += 1
            if choice in md.by_id:
                return choice
        return md.brokers[self.rng.randrange(len(md.brokers))].broker_id

    def _bootstrap_connection(self) -> Placement:
        """The live bootstrap connection, else a dial to the next server (in the shuffled
        order) not backing off."""
        for conn in self.table.records():
            if conn.role is Role.BOOTSTRAP:
                return SendOn(conn)
        for index in self._bootstrap_order:
            endpoint = self.config.bootstrap[index]
            key = ConnectionKey(endpoint, BootstrapNode(index), Purpose.DATA)
            if not self.in_backoff(key):
                return OpenFor(key)
        return WAIT

    def on_metadata(
        self, old: ClusterMetadata | None, via: Connection | None
    ) -> Iterator[Decision]:
        if via is None or via.role is not Role.BOOTSTRAP:
            return
        if self.metadata is not None and self.metadata.brokers:
            yield Drain(via, CloseReason.BOOTSTRAP_DONE)
