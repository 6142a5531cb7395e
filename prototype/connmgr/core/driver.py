"""The driver contract: how any driver -- the simulator, the aiokafka adapter, a test script --
feeds a policy and carries out what it decides. IO-free, written once.

A driver implements :class:`DriverOps`, the handful of operations the actions name, and
feeds events through one :class:`EventPump`. The pump owns the two rules every driver must
keep:

* **Non-reentrant.** An event raised while the actions of another are being carried out (a
  lease that finds nobody waiting withdraws its request at once, a dial that fails on the
  spot) is queued and fed after them, never inside :meth:`Policy.handle`.
* **In order.** The actions of one event are carried out in the order the policy returned
  them, each by exactly one operation.

The events a driver must feed, and when (a driver that never feeds one leaves part of a
policy dead; ``tests/test_driver_contract.py`` runs the drivers on one script and compares
what they fed):

=======================  ===================================================================
``BootstrapRequested``   the client's first metadata request, while it has no metadata
``AnyNodeRequestNeeded`` every later metadata request, FindCoordinator, any-node requests
``BrokerRequestNeeded``  produce, fetch, list offsets: a request for one broker
``CoordinatorRequest..`` a request for a coordinator the client found on a broker
``CoordinatorLost``      NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, or a new lookup
``InterestChanged``      the partitions the client works with changed (assignment, topics)
``MetadataReceived``     the answer to a metadata request (it completes that request)
``ResponseReceived``     the answer to any other request
``RequestFailed``        a leased request ended without an answer (its connection broke,
                         it timed out, the broker answered with an error the caller retries)
``RequestWithdrawn``     the caller gave up on a request before it was answered, or nobody
                         waited for the lease any more
``ConnectionEstablished`` / ``ConnectionFailed`` / ``ConnectionClosedByPeer``
                         the outcome of a ``Connect``, and a socket the other side closed
``IdentityChecked``      the broker's answer to a ``CheckIdentity`` (KIP-1242)
``AddressesResolved``    a lookup of a host name ended: with the addresses it names now,
                         or failed (timeout, SERVFAIL, NXDOMAIN, no address). Every
                         lookup the driver makes, changed or not: before dialling a name
                         it holds no fresh answer for, and again every TTL (the
                         simulator: each name it dialled; the aio driver: each name it
                         holds a connection to, every ``dns_ttl_ms``). A driver may skip
                         the lookup before the first dial of a name it never looked up
                         while no established connection reaches it: the answer is
                         compared with addresses connections reached, and none has (the
                         aio driver does, and starts the name's refreshes at the dial)
``TimePassed``           the time a ``WakeAt`` asked for has come
``ClientClosed``         the application closed the client (last event)
=======================  ===================================================================

Names. A driver that resolves host names itself reports each lookup (``AddressesResolved``;
a failed one with how it failed) before the dial that uses it, and says in
``ConnectionEstablished`` which address the socket reached (``address``); the policy keeps
it on the connection record.
A driver that leaves resolution to the OS sends neither (``address`` None): no connection is
ever found stale, and a policy behaves as before. A request on a connection that never
answers fails after ``request_timeout_ms`` and the client drops that connection, as Java's
``NetworkClient`` and aiokafka do: the driver reports ``ConnectionClosedByPeer`` for it.
A policy may instead ``Close`` a connection with requests leased on it (the proposed policy,
when its address went stale): it places those requests again itself, and an answer that
still arrives on the closed socket is dropped, as after any ``Close``.

Two differences are by design. A driver whose callers see a broken connection (the aio
driver: aiokafka raises to whoever awaited the request) feeds ``RequestFailed`` for each
request leased on it before ``ConnectionClosedByPeer``; the simulator's client models do not
see the failure, so the policy re-places their requests.

Identity (KIP-1242, Kafka 4.4). A driver whose broker answers ``ApiVersions`` v5 says so in
``ConnectionEstablished`` (``checks_identity``), once the connection is authenticated (a v5
before SASL authentication is not checked by the broker). A dial for a known node carries the
check in its own handshake: a broker that is not that node fails the dial
(``ConnectionFailed``); one that is reports ``node_id``. ``CheckIdentity`` asks the same on an
established connection (the proposed policy's bootstrap connection, once metadata names the
node at its host:port), answered by ``IdentityChecked``. A driver whose brokers predate 4.4
reports ``checks_identity`` False and is never asked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from connmgr.core.actions import (
    Adopt,
    CheckIdentity,
    Close,
    CloseReason,
    Connect,
    Lease,
    RefreshMetadata,
    Reject,
    RejectReason,
    WakeAt,
)
from connmgr.core.events import Event
from connmgr.core.identity import ConnectionKey
from connmgr.core.policy import Policy


class DriverOps(Protocol):
    """What a driver does for each action. Each operation is called synchronously from
    :meth:`EventPump.feed`; one that needs the client to act again (a re-targeted request, a
    metadata fetch) schedules that for after the current event, as a real client's next loop
    turn would, and may feed events back through the pump (they are queued)."""

    def connect(self, conn_id: int, key: ConnectionKey) -> None:
        """Dial ``key.endpoint``; feed ConnectionEstablished or ConnectionFailed later."""

    def lease(self, conn_id: int, request_id: int) -> None:
        """Give READY connection ``conn_id`` to whoever waits for request ``request_id``."""

    def close(self, conn_id: int, reason: CloseReason) -> None:
        """Close ``conn_id`` (possibly still dialling: close it when the dial completes)."""

    def adopt(self, conn_id: int, old_key: ConnectionKey, new_key: ConnectionKey) -> None:
        """Record that socket ``conn_id`` now serves ``new_key`` (no I/O)."""

    def check_identity(self, conn_id: int, broker_id: int, cluster_id: str) -> None:
        """Ask the broker on ``conn_id`` whether it is ``broker_id`` of ``cluster_id``
        (KIP-1242); feed IdentityChecked with the answer later."""

    def reject(self, request_id: int, reason: RejectReason) -> None:
        """Hand request ``request_id`` back to its caller unsent, to be re-targeted."""

    def refresh_metadata(self) -> None:
        """Have the client fetch metadata soon (unless an answer arrived meanwhile)."""

    def wake_at(self, at_ms: float) -> None:
        """Feed TimePassed at ``at_ms`` or later; replaces any earlier wake-up."""


class EventPump:
    """One policy, one driver: the non-reentrant event queue and the action interpreter."""

    __slots__ = ("_feeding", "_now", "_ops", "_queue", "_table", "events", "policy")

    def __init__(self, policy: Policy, ops: DriverOps, now_ms: Callable[[], float]) -> None:
        self.policy = policy
        self.events = 0
        """Events fed so far."""
        self._ops = ops
        self._now = now_ms
        self._queue: deque[Event] = deque()
        self._feeding = False
        # By exact type: the interpreter runs once per action on the produce path.
        self._table: dict[type, Callable[[Any], None]] = {
            Lease: self._lease,
            Connect: self._connect,
            Close: self._close,
            Adopt: self._adopt,
            CheckIdentity: self._check,
            Reject: self._reject,
            RefreshMetadata: self._refresh,
            WakeAt: self._wake,
        }

    def feed(self, event: Event) -> None:
        """Hand ``event`` to the policy now (or after the event being handled, if called
        from one of its actions) and carry out the actions, in order."""
        self._queue.append(event)
        if self._feeding:
            return
        self._feeding = True
        try:
            queue, table, handle = self._queue, self._table, self.policy.handle
            while queue:
                self.events += 1
                for action in handle(queue.popleft(), self._now()):
                    table[type(action)](action)
        finally:
            self._feeding = False

    def _lease(self, action: Lease) -> None:
        self._ops.lease(action.conn_id, action.request_id)

    def _connect(self, action: Connect) -> None:
        self._ops.connect(action.conn_id, action.key)

    def _close(self, action: Close) -> None:
        self._ops.close(action.conn_id, action.reason)

    def _adopt(self, action: Adopt) -> None:
        self._ops.adopt(action.conn_id, action.old_key, action.new_key)

    def _check(self, action: CheckIdentity) -> None:
        self._ops.check_identity(action.conn_id, action.broker_id, action.cluster_id)

    def _reject(self, action: Reject) -> None:
        self._ops.reject(action.request_id, action.reason)

    def _refresh(self, action: RefreshMetadata) -> None:
        self._ops.refresh_metadata()

    def _wake(self, action: WakeAt) -> None:
        self._ops.wake_at(action.at_ms)
