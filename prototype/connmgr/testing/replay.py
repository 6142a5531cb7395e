"""One script, several drivers: record what the simulator fed a policy, then make the same
things happen to the aiokafka adapter's driver and record what *it* fed an identical policy.

The driver contract (:mod:`connmgr.core.driver`) says which event a driver feeds for what
happens to it. If both drivers keep it, the two recordings are equal event by event, and
so are the policy's actions (the policy is deterministic). The replay acts on the aio driver
only through the calls a real client makes -- ``acquire`` for a request, ``done`` for an
answer, the dialler's outcome for a connection, a connection's ``on_close`` -- on a clock
and a dialler the script controls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connmgr.aio.driver import Leased, PolicyDriver
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
    """The part of an aiokafka connection the driver touches; closing it is recorded."""

    def __init__(self, on_close: Callable[[Any, Any], None]) -> None:
        self.on_close = on_close
        self.open = True

    def send(self, request: Any, expect_response: bool = True) -> Any:
        raise AssertionError("the replay never writes on a connection")

    def close(self, reason: Any = None, exc: BaseException | None = None) -> None:
        self.open = False

    def connected(self) -> bool:
        return self.open


class ScriptedDriver(PolicyDriver):
    """The aio driver on the script's clock; wake-ups are the script's TimePassed events."""

    clock_ms = 0.0

    @property
    def now_ms(self) -> float:
        return self.clock_ms

    def wake_at(self, at_ms: float) -> None:
        pass  # the recorded TimePassed events are replayed at their times


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
        for now_ms, event, _ in steps:
            driver.clock_ms = now_ms
            await self._make_happen(driver, event)
            await _settle()
        # Requests still waiting when the client closed failed to their callers.
        await asyncio.gather(*self.acquired.values(), return_exceptions=True)
        return seen

    async def _dial(self, key: ConnectionKey, on_close: Callable[[Any, Any], None]) -> Any:
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
            rid = event.request_id

            def same_request(request_id: int) -> Event:
                if request_id != rid:
                    raise AssertionError(f"the driver numbered request {rid} as {request_id}")
                return event

            self.acquired[rid] = asyncio.ensure_future(driver.acquire(same_request, 3600.0))
        elif isinstance(event, MetadataReceived | ResponseReceived):
            lease = self.acquired.pop(event.request_id).result()
            metadata = event.metadata if isinstance(event, MetadataReceived) else None
            driver.done(lease, metadata)
        elif isinstance(event, RequestFailed | RequestWithdrawn):
            lease = self.acquired.pop(event.request_id).result()
            (driver.failed if isinstance(event, RequestFailed) else driver.withdraw)(lease)
        elif isinstance(event, ConnectionEstablished):
            conn = FakeConnection(lambda c, r: None)
            self.conns[event.conn_id] = conn
            self._dial_of(event.conn_id).set_result(conn)
        elif isinstance(event, ConnectionFailed):
            self._dial_of(event.conn_id).set_exception(OSError("refused (scripted)"))
        elif isinstance(event, ConnectionClosedByPeer):
            conn = self.conns.pop(event.conn_id)
            conn.open = False
            conn.on_close(conn, "peer (scripted)")
        elif isinstance(event, ClientClosed):
            await driver.aclose()
        elif isinstance(event, TimePassed | CoordinatorLost | InterestChanged):
            driver.feed(event)  # the client feeds these as they are
        else:
            raise AssertionError(f"no way to make {event!r} happen to the aio driver")


async def _settle() -> None:
    """Let the tasks the last step woke (a dial completing, a lease being taken) run."""
    for _ in range(5):
        await asyncio.sleep(0)
