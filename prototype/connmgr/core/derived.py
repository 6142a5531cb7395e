"""What a policy derives from its facts and its connections, kept until they change.

A policy's decisions read the same derivations many times between two changes (the leaders
in use, which brokers a coordinator needs, the connections a role keeps, the hot path's
routes); :class:`Derived` holds them and drops them when what they derive from changes.

Invalidation cannot be forgotten because no caller places it: what a derivation may read
changes only through writers that call :meth:`Derived.changed` (or
:meth:`~Derived.facts_changed`) themselves --

* a connection record's state and identity check: :meth:`Connection.move
  <connmgr.core.connections.Connection.move>`, :attr:`Connection.checking
  <connmgr.core.connections.Connection.checking>`;
* the records' table: every writing method of :class:`~connmgr.core.connections.ConnectionTable`;
* the facts: the ``metadata`` and ``interest`` setters (:mod:`connmgr.core.facts`) and the
  :class:`~connmgr.core.coordinator.CoordinatorTable`'s ``place`` and ``forget``.

tests/test_derived_wiring.py holds each writer to it, and tests/test_hot_path.py runs every
scenario with :class:`Uncached` (nothing kept) against the cached policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    from connmgr.core.connections import Connection
    from connmgr.core.request import ToBroker

T = TypeVar("T")


class Derived:
    """Derivations of a policy's state, each computed at most once per state.

    Two lifetimes: :meth:`of_facts` values derive only from the facts the client reports
    (metadata, interest, coordinators) and survive connection changes; :meth:`of_state`
    values derive from anything and go at every change. :attr:`routes` holds the hot path's
    routes (see :mod:`connmgr.core.policy`), a state derivation too. :attr:`generation`
    counts the changes, so the caller of a hook can tell whether the hook changed anything.
    """

    __slots__ = ("_facts", "_marks", "_state", "generation", "routes")

    def __init__(self) -> None:
        self.generation = 0
        self._facts: dict[str, object] = {}
        self._state: dict[str, object] = {}
        self._marks: set[str] = set()
        self.routes: dict[int, tuple[Connection, ToBroker]] = {}
        """Broker id -> the READY connection ``place`` chose for it in this state, and the
        target value the requests that take the route share."""

    def changed(self, *, facts: bool = False) -> None:
        """A connection record changed, or (``facts``) the metadata, the interest or a
        coordinator did: what derived from it is dropped."""
        self.generation += 1
        self._state.clear()
        self._marks.clear()
        if self.routes:
            self.routes = {}
        if facts:
            self._facts.clear()

    def facts_changed(self) -> None:
        """The metadata, the interest or a coordinator changed: :meth:`changed` with
        ``facts``."""
        self.changed(facts=True)

    def of_facts(self, name: str, compute: Callable[[], T]) -> T:
        """The value ``name``, from ``compute()`` once per set of facts."""
        try:
            return cast(T, self._facts[name])
        except KeyError:
            value = self._facts[name] = compute()
            return value

    def of_state(self, name: str, compute: Callable[[], T]) -> T:
        """The value ``name``, from ``compute()`` once per state."""
        try:
            return cast(T, self._state[name])
        except KeyError:
            value = self._state[name] = compute()
            return value

    def done(self, name: str) -> bool:
        """Whether :meth:`mark` was called with ``name`` since the last change (a piece of
        work whose outcome cannot differ until something changes)."""
        return name in self._marks

    def mark(self, name: str) -> None:
        self._marks.add(name)


class Uncached(Derived):
    """Derivations computed afresh at every read, no piece of work ever marked done: a
    policy with these (and ``stable_broker_routes`` off) takes every decision from its
    state as it is. Differential tests run it against the cached policy."""

    __slots__ = ()

    def of_facts(self, name: str, compute: Callable[[], T]) -> T:
        return compute()

    def of_state(self, name: str, compute: Callable[[], T]) -> T:
        return compute()

    def done(self, name: str) -> bool:
        return False

    def mark(self, name: str) -> None:
        pass
