"""Every writer of what a policy derives from drops the derivations itself.

:mod:`connmgr.core.derived` keeps what a policy's decisions derive from its state until that
state changes; a writer that forgot to say so would leave a stale derivation behind, which
only a long search might find. So no caller places an invalidation: the writers do. These
tests hold each writer to it, one test per writer, and hold the list of writers to the
classes' methods, so a new method must say whether it writes. (tests/test_hot_path.py runs
every scenario with nothing cached against the cached policy, end to end.)
"""

from __future__ import annotations

import ast
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import connmgr
from connmgr.core import (
    BrokerInfo,
    ClusterMetadata,
    CoordinatorKind,
    CoordinatorRef,
    Endpoint,
    PolicyConfig,
    TopicPartition,
    parse_bootstrap,
)
from connmgr.core.connections import Connection, ConnectionTable
from connmgr.core.coordinator import CoordinatorTable
from connmgr.core.derived import Derived, Uncached
from connmgr.core.identity import BrokerNode, ConnectionKey, Purpose
from connmgr.core.state import Trigger
from connmgr.policies import ProposedPolicy

KEY = ConnectionKey(Endpoint("localhost", 9091), BrokerNode(1), Purpose.DATA)
OTHER = ConnectionKey(Endpoint("localhost", 9092), BrokerNode(2), Purpose.DATA)
GROUP = CoordinatorRef(CoordinatorKind.GROUP, "g")


def drops(derived: Derived, write: Callable[[], object], *, facts: bool = False) -> bool:
    """Whether ``write()`` drops what ``derived`` holds (of the facts too, with ``facts``)."""
    derived.of_state("s", object)
    derived.of_facts("f", object)
    derived.mark("done")
    state, fact, generation = (
        derived.of_state("s", object),
        derived.of_facts("f", object),
        (derived.generation),
    )
    write()
    state_dropped = derived.of_state("s", object) is not state
    facts_dropped = derived.of_facts("f", object) is not fact
    return (
        derived.generation > generation
        and state_dropped
        and not derived.done("done")
        and (facts_dropped or not facts)
    )


def table_with(derived: Derived) -> tuple[ConnectionTable, Connection]:
    table = ConnectionTable(derived.changed)
    return table, table.create(KEY, 0.0)


# --- the connection records ---------------------------------------------------------------


def test_move_drops_the_derivations() -> None:
    derived = Derived()
    _, conn = table_with(derived)
    assert drops(derived, lambda: conn.move(Trigger.DIAL))


def test_an_identity_check_drops_the_derivations() -> None:
    derived = Derived()
    _, conn = table_with(derived)
    assert drops(derived, lambda: setattr(conn, "checking", 7))
    assert conn.checking == 7
    assert drops(derived, lambda: setattr(conn, "checking", None))


def test_load_is_no_change() -> None:
    """A request sent or answered changes nothing derived (the hot path relies on it)."""
    derived = Derived()
    _, conn = table_with(derived)
    generation = derived.generation
    conn.last_used_ms = 5.0
    conn.waiting.append(object())  # type: ignore[arg-type]
    assert derived.generation == generation


# --- the table ------------------------------------------------------------------------------

TABLE_READERS = {
    "get",
    "issued",
    "live",
    "live_for_node",
    "records",
    "all",
    "in_backoff",
    "retry_times",
}


def _create(table: ConnectionTable, conn: Connection) -> None:
    table.create(OTHER, 1.0)


def _rekey(table: ConnectionTable, conn: Connection) -> None:
    table.rekey(conn, OTHER)


def _failed(table: ConnectionTable, conn: Connection) -> None:
    conn.move(Trigger.DIAL)
    conn.move(Trigger.FAIL)
    table.failed(conn)


def _forget(table: ConnectionTable, conn: Connection) -> None:
    table.forget(conn)


def _retire(table: ConnectionTable, conn: Connection) -> None:
    _failed(table, conn)
    table.retire(conn)


def _clear_failed(table: ConnectionTable, conn: Connection) -> None:
    _failed(table, conn)
    table.clear_failed()


TABLE_WRITERS: dict[str, Callable[[ConnectionTable, Connection], None]] = {
    "create": _create,
    "rekey": _rekey,
    "failed": _failed,
    "forget": _forget,
    "retire": _retire,
    "clear_failed": _clear_failed,
}


@pytest.mark.parametrize("writer", sorted(TABLE_WRITERS))
def test_every_table_writer_drops_the_derivations(writer: str) -> None:
    derived = Derived()
    table, conn = table_with(derived)
    prepare = {"retire": _failed, "clear_failed": _failed}.get(writer)
    if prepare is not None:
        prepare(table, conn)
    write = {"retire": lambda: table.retire(conn), "clear_failed": table.clear_failed}.get(
        writer, lambda: TABLE_WRITERS[writer](table, conn)
    )
    assert drops(derived, write)


def test_the_table_methods_are_each_a_reader_or_a_writer() -> None:
    public = {n for n in vars(ConnectionTable) if not n.startswith("_")}
    assert public == TABLE_READERS | set(TABLE_WRITERS), (
        "a ConnectionTable method was added or removed: list it in TABLE_READERS, or in "
        "TABLE_WRITERS with a test that it drops the derivations"
    )


# --- the facts ------------------------------------------------------------------------------


def test_a_coordinator_placed_or_moved_drops_the_facts() -> None:
    derived = Derived()
    coordinators = CoordinatorTable(derived.facts_changed)
    assert drops(derived, lambda: coordinators.place(GROUP, 1), facts=True)
    assert drops(derived, lambda: coordinators.place(GROUP, 2), facts=True)
    generation = derived.generation
    assert coordinators.place(GROUP, 2) == 2  # where it was: no change
    assert derived.generation == generation


def test_a_coordinator_forgotten_drops_the_facts() -> None:
    derived = Derived()
    coordinators = CoordinatorTable(derived.facts_changed)
    coordinators.place(GROUP, 1)
    assert drops(derived, lambda: coordinators.forget(GROUP), facts=True)
    generation = derived.generation
    assert coordinators.forget(GROUP) is None  # not known: no change
    assert derived.generation == generation


def _policy() -> ProposedPolicy:
    config = PolicyConfig(bootstrap=parse_bootstrap("localhost:9091"), bootstrap_offset=0)
    return ProposedPolicy(config, random.Random(1))


def test_new_metadata_drops_the_facts() -> None:
    p = _policy()
    md = ClusterMetadata.build("c1", [BrokerInfo(1, KEY.endpoint)], {TopicPartition("t", 0): 1})
    assert drops(p.derived, lambda: setattr(p, "metadata", md), facts=True)
    assert p.metadata is md


def test_the_same_metadata_again_keeps_what_derived_from_it() -> None:
    """An unchanged cluster's refresh (the same immutable object) is no change; an equal
    but new object still counts as one (only identity is cheap enough to check)."""
    p = _policy()
    md = ClusterMetadata.build("c1", [BrokerInfo(1, KEY.endpoint)], {TopicPartition("t", 0): 1})
    p.metadata = md
    fact = p.derived.of_facts("f", object)
    p.metadata = md
    assert p.derived.of_facts("f", object) is fact
    again = ClusterMetadata.build("c1", [BrokerInfo(1, KEY.endpoint)], {TopicPartition("t", 0): 1})
    assert again == md
    assert drops(p.derived, lambda: setattr(p, "metadata", again), facts=True)


def test_the_same_interest_again_keeps_what_derived_from_it() -> None:
    p = _policy()
    interest = frozenset({TopicPartition("t", 0)})
    p.interest = interest
    fact = p.derived.of_facts("f", object)
    p.interest = interest
    assert p.derived.of_facts("f", object) is fact


def test_new_interest_drops_the_facts() -> None:
    p = _policy()
    interest = frozenset({TopicPartition("t", 0)})
    assert drops(p.derived, lambda: setattr(p, "interest", interest), facts=True)
    assert p.interest == interest


def test_the_policy_derives_through_its_derived_type() -> None:
    class Plain(ProposedPolicy):
        derived_type = Uncached

    config = PolicyConfig(bootstrap=parse_bootstrap("localhost:9091"), bootstrap_offset=0)
    p = Plain(config, random.Random(1))
    assert type(p.derived) is Uncached
    calls: list[int] = []
    for _ in range(2):
        p.derived.of_facts("x", lambda: calls.append(1))
    p.derived.mark("done")
    assert len(calls) == 2 and not p.derived.done("done")


# --- nobody else invalidates ------------------------------------------------------------------

INVALIDATORS = {
    "core/connections.py",  # the records and their table
    "core/coordinator.py",  # the coordinators
    "core/facts.py",  # the metadata and interest setters
    "core/policy.py",  # hands facts_changed to the coordinators' table
    "core/execution.py",  # hands Derived.changed to the table it builds, calls none
}
"""The modules that name :meth:`Derived.changed` or ``facts_changed``."""


def test_only_the_writers_invalidate() -> None:
    """A call placed by hand elsewhere is what this design removed: a new writer belongs in
    one of the writer classes (with its test above), not beside a caller."""
    package = Path(connmgr.__file__).parent
    calling = set()
    for path in [*(package / "core").rglob("*.py"), *(package / "policies").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("changed", "facts_changed", "_on_change")
                and path.name != "derived.py"
            ):
                calling.add(str(path.relative_to(package)))
    assert calling == INVALIDATORS
