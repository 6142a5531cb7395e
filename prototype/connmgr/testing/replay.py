"""One script, several drivers: record what the simulator fed a policy, then make the same
things happen to the aiokafka adapter's driver and record what *it* fed an identical policy.

The driver contract (:mod:`connmgr.core.driver`) says which event a driver feeds for what
happens to it. If both drivers keep it, the two recordings are equal event by event, and
so are the policy's actions (the policy is deterministic). The replay acts on the aio driver
only through the calls a real client makes -- ``acquire`` for a request, ``done`` for an
answer, the dialler's outcome for a connection, a connection's ``on_close`` -- on a clock
and a dialler the script controls.

How each of the contract's 17 event kinds reaches the policy in the replay:

* **Made by the driver, from what the policy asked.** ``TimePassed``: the driver's timer,
  armed by the policy's ``WakeAt`` (:meth:`ScriptedDriver.wake_at`), fires when the script's
  clock reaches it; a recorded ``TimePassed`` with no wake-up due is not fed, and a wake-up
  that falls due before the next recorded step is fed at its time (either way the recordings
  then differ).
* **Made by the driver, from a happening the replay makes happen** (the event object is the
  driver's): the four request kinds (``acquire``; the driver numbers the request, the
  client's choice of target -- API, broker, coordinator -- is the recording's),
  ``MetadataReceived`` and ``ResponseReceived`` (``done``; the metadata is the broker's
  answer, from the recording), ``RequestFailed`` and ``RequestWithdrawn`` (``failed`` /
  ``withdraw``, or a lease that finds nobody waiting), ``ConnectionEstablished`` and
  ``ConnectionFailed`` (the dial's outcome; a connection whose recorded broker answers
  KIP-1242's check lists ``ApiVersions`` v5), ``IdentityChecked`` (the broker's answer to
  the check the driver sent), ``ConnectionClosedByPeer`` (the connection's ``on_close``),
  ``ClientClosed`` (``aclose``).
* **Fed as recorded** (:data:`FED_AS_RECORDED`; the recorded object itself): what only the
  world outside the driver says, and a real client feeds through ``PolicyDriver.feed`` as
  it is -- ``CoordinatorLost`` (the client's coordinator lookup after NOT_COORDINATOR),
  ``InterestChanged`` (the consumer's assignment) -- and the simulator's end-of-run
  ``TimePassed`` (``Simulator.finish`` measures the steady state with it; it is no wake-up,
  and no aio client has one), the step just before the final ``ClientClosed``.
* **Not replayed**: ``AddressesResolved`` (the replayed scripts dial no host names; the aio
  driver's resolver is exercised by ``tests/embedded/test_resolve_real.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connmgr.aio.driver import Identity, Leased, PolicyDriver
from connmgr.aio.identity import (
    API_VERSIONS_KEY,
    CHECK_VERSION,
    REBOOTSTRAP_REQUIRED,
    IdentityCheckRequest,
)
from connmgr.core.actions import Action
from connmgr.core.events import (
    AnyNodeRequestNeeded,
    BootstrapRequested,
    BrokerRequestNeeded,
    ClientClosed,
    ConnectionClosedByPeer,
    ConnectionEstablished,
    ConnectionFailed,
    CoordinatorLost,
    CoordinatorRequestNeeded,
    Event,
    IdentityAnswer,
    IdentityChecked,
    InterestChanged,
    MetadataReceived,
    RequestFailed,
    RequestWithdrawn,
    ResponseReceived,
    TimePassed,
)
from connmgr.core.identity import ConnectionKey
from connmgr.core.policy import Policy
from connmgr.ledger import ConnectionLedger

Step = tuple[float, Event, tuple[Action, ...]]
"""(time, the event a policy was fed, the actions it returned)."""

REQUESTS = (
    BootstrapRequested,
    AnyNodeRequestNeeded,
    BrokerRequestNeeded,
    CoordinatorRequestNeeded,
)


FED_AS_RECORDED: tuple[type[Event], ...] = (CoordinatorLost, InterestChanged, TimePassed)
"""The kinds the replay hands the driver as the recording has them (see the module's
docstring; ``TimePassed`` only as the simulator's end-of-run tick)."""


def record(policy: Policy) -> list[Step]:
    """Record every event ``policy`` is fed from now on, with its time and actions."""
    steps: list[Step] = []
    handle = policy.handle

    def recording(event: Event, now_ms: float) -> list[Action]:
        actions = handle(event, now_ms)
        steps.append((now_ms, event, tuple(actions)))
        return actions

    policy.handle = recording  # type: ignore[method-assign]
    return steps


class FakeConnection:
    """The part of an aiokafka connection the driver touches; closing it is recorded. The
    only request written on it is an identity check, answered when the replay says."""

    def __init__(self, on_close: Callable[[Any, Any], None], checks: bool = False) -> None:
        self.on_close = on_close
        self.open = True
        self._versions = {API_VERSIONS_KEY: (0, CHECK_VERSION)} if checks else {}
        self.check: asyncio.Future[Any] | None = None

    def send(self, request: Any, expect_response: bool = True) -> Any:
        if not isinstance(request, IdentityCheckRequest) or self.check is not None:
            raise AssertionError(f"the replay writes no {request!r} on a connection")
        self.check = asyncio.get_running_loop().create_future()
        return self.check

    def close(self, reason: Any = None, exc: BaseException | None = None) -> None:
        self.open = False

    def connected(self) -> bool:
        return self.open


class ScriptedDriver(PolicyDriver):
    """The aio driver on the script's clock: its wake-up timer is armed as the real one is
    (one at a time, each replacing the last) and fires when the script's clock reaches it."""

    clock_ms = 0.0
    armed_ms: float | None = None

    @property
    def now_ms(self) -> float:
        return self.clock_ms

    def wake_at(self, at_ms: float) -> None:
        self.armed_ms = at_ms  # as the real driver's call_at handle, replacing the last

    def advance(self, to_ms: float) -> int:
        """Move the clock to ``to_ms``, firing each wake-up that falls due strictly before it
        at its own time, as the real driver's ``loop.call_at`` timer would; how many fired."""
        fired = 0
        while self.armed_ms is not None and self.armed_ms < to_ms and not self.closed:
            if fired == 10_000:
                raise AssertionError(f"the policy keeps waking itself before {to_ms} ms")
            self.clock_ms = max(self.clock_ms, self.armed_ms)
            self.fire_due()
            fired += 1
        self.clock_ms = to_ms
        return fired

    def fire_due(self) -> bool:
        """Fire the armed wake-up if it is due at the clock's time: feed ``TimePassed``, as the
        real driver's timer does. True if it fired."""
        at = self.armed_ms
        if at is None or at > self.clock_ms or self.closed:
            return False
        self.armed_ms = None
        self.feed(TimePassed())
        return True


@dataclass
class AioReplay:
    """Replays a simulator's recording on a :class:`ScriptedDriver`."""

    policy: Policy
    driver_class: type[ScriptedDriver] = ScriptedDriver
    ledger: ConnectionLedger = field(default_factory=ConnectionLedger)
    dials: dict[ConnectionKey, asyncio.Future[FakeConnection]] = field(default_factory=dict)
    conns: dict[int, FakeConnection] = field(default_factory=dict)
    acquired: dict[int, asyncio.Task[Leased]] = field(default_factory=dict)

    async def run(self, steps: list[Step]) -> list[Step]:
        seen = record(self.policy)
        driver = self.driver_class(
            self.policy, self._dial, ledger=self.ledger, dial_errors=(OSError,)
        )
        for index, (now_ms, event, _) in enumerate(steps):
            if driver.advance(now_ms):
                await _settle()  # wake-ups the recording skipped: the recordings differ
            if isinstance(event, TimePassed):
                if not driver.fire_due() and _end_of_run_tick(steps, index):
                    driver.feed(event)
            else:
                await self._make_happen(driver, event)
            await _settle()
        # Requests still waiting when the client closed failed to their callers.
        await asyncio.gather(*self.acquired.values(), return_exceptions=True)
        return seen

    async def _dial(
        self, key: ConnectionKey, on_close: Callable[[Any, Any], None], identity: Identity | None
    ) -> Any:
        # A policy has at most one live connection per key: the key names the dial.
        future: asyncio.Future[FakeConnection] = asyncio.get_running_loop().create_future()
        self.dials[key] = future
        conn = await future
        conn.on_close = on_close
        return conn

    def _dial_of(self, conn_id: int) -> asyncio.Future[FakeConnection]:
        key = next(e.key for e in self.ledger.dial_entries() if e.conn_id == conn_id)
        return self.dials.pop(key)

    async def _make_happen(self, driver: ScriptedDriver, event: Event) -> None:
        if isinstance(event, REQUESTS):
            asked = event

            def as_the_client_asks(request_id: int) -> Event:
                # The driver's number for the request (the simulator's is the recording's:
                # a different numbering shows in the comparison).
                return dataclasses.replace(asked, request_id=request_id)

            self.acquired[event.request_id] = asyncio.ensure_future(
                driver.acquire(as_the_client_asks, 3600.0)
            )
        elif isinstance(event, MetadataReceived | ResponseReceived):
            lease = self.acquired.pop(event.request_id).result()
            metadata = event.metadata if isinstance(event, MetadataReceived) else None
            driver.done(lease, metadata)
        elif isinstance(event, RequestFailed | RequestWithdrawn):
            lease = self.acquired.pop(event.request_id).result()
            (driver.failed if isinstance(event, RequestFailed) else driver.withdraw)(lease)
        elif isinstance(event, ConnectionEstablished):
            conn = FakeConnection(lambda c, r: None, event.checks_identity)
            self.conns[event.conn_id] = conn
            self._dial_of(event.conn_id).set_result(conn)
        elif isinstance(event, IdentityChecked):
            check = self.conns[event.conn_id].check
            assert check is not None, f"{event!r}: the driver sent no check"
            confirmed = event.answer is IdentityAnswer.CONFIRMED
            check.set_result(_ApiVersionsAnswer(0 if confirmed else REBOOTSTRAP_REQUIRED))
        elif isinstance(event, ConnectionFailed):
            self._dial_of(event.conn_id).set_exception(OSError("refused (scripted)"))
        elif isinstance(event, ConnectionClosedByPeer):
            conn = self.conns.pop(event.conn_id)
            conn.open = False
            conn.on_close(conn, "peer (scripted)")
        elif isinstance(event, ClientClosed):
            await driver.aclose()
        elif isinstance(event, CoordinatorLost | InterestChanged):
            driver.feed(event)  # the client feeds these as they are
        else:
            raise AssertionError(f"no way to make {event!r} happen to the aio driver")


@dataclass(frozen=True)
class _ApiVersionsAnswer:
    error_code: int


def _end_of_run_tick(steps: list[Step], index: int) -> bool:
    """Whether step ``index`` is the simulator's end-of-run ``TimePassed``: the one just before
    the final ``ClientClosed``, at its time."""
    return (
        index == len(steps) - 2
        and isinstance(steps[-1][1], ClientClosed)
        and steps[index][0] == steps[-1][0]
    )


async def _settle() -> None:
    """Let the tasks the last step woke (a dial completing, a lease being taken) run."""
    for _ in range(5):
        await asyncio.sleep(0)
