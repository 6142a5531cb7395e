"""The reconciliation of a librdkafka run: its log, its statistics and the kernel must agree.

Three views of the same sockets:

* the **log** (:mod:`.account`): every dial, establishment and close, per broker handle;
* the client's **statistics** (``statistics.interval.ms``, ``stats_cb``): per broker handle
  ``connects`` (connection attempts, with or without a socket), ``disconnects`` (sockets
  closed in UP or later) and ``state`` -- a handle that has been decommissioned (the
  bootstrap handles, once metadata names the brokers) has no entry any more;
* the **kernel**: this process's live TCP sockets to the brokers' listeners
  (:func:`connmgr.aio.kernel.verify_against_kernel`: remote address only, so the embedded
  mock cluster's accepted sockets in the same process are not counted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from connmgr.aio.kernel import AccountingMismatch, verify_against_kernel
from connmgr.errors import ConnMgrError
from connmgr.kernel import Address
from connmgr.ledger import ConnectionLedger
from connmgr_evidence.realrun.librdkafka.account import LogAccount
from connmgr_evidence.realrun.librdkafka.log import NO_SOCKET

__all__ = ["LibrdkafkaMismatch", "stats_problems", "verify_with_kernel"]


class LibrdkafkaMismatch(ConnMgrError):
    """A librdkafka client's log does not account for its connections: a line the replay
    could not place, or a statistics report that disagrees; ``problems`` lists each."""

    def __init__(self, phase: str, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"librdkafka {phase}: its log and its statistics disagree:\n  "
            + "\n  ".join(self.problems)
        )


def stats_problems(stats: Mapping[str, Any], account: LogAccount) -> list[str]:
    """Every disagreement between one statistics report and the log replayed so far; empty
    when they agree.

    For every broker handle in the report (the internal one aside, which never connects):
    ``connects`` == the ledger's dials of that handle + its attempts that opened no socket;
    ``disconnects`` == its sockets the log closed in UP or later; its ``state`` holds a socket
    exactly when the ledger has one open for it. A handle the log knows that the report
    does not list (decommissioned) must have no socket open. And the replay itself must have
    placed every line (:attr:`LogAccount.problems`).
    """
    problems = list(account.problems)
    brokers: Mapping[str, Mapping[str, Any]] = stats.get("brokers", {})
    listed: set[str] = set()
    for entry in brokers.values():
        name = str(entry["name"])
        if entry.get("source") == "internal":
            continue
        listed.add(name)
        tally = account.handles.get(name)
        dials = tally.dials if tally else 0
        no_socket = tally.no_socket if tally else 0
        if entry["connects"] != dials + no_socket:
            problems.append(
                f"{name}: statistics say {entry['connects']} connects, the log {dials} dials "
                f"+ {no_socket} attempts without a socket"
            )
        closed = tally.disconnects if tally else 0
        if entry["disconnects"] != closed:
            problems.append(
                f"{name}: statistics say {entry['disconnects']} disconnects, the log closed "
                f"{closed} connections in UP or later"
            )
        holds = entry["state"] not in NO_SOCKET
        open_in_log = tally is not None and tally.open_conn is not None
        if holds != open_in_log:
            problems.append(
                f"{name}: statistics say state {entry['state']}, the log has "
                f"{'a' if open_in_log else 'no'} connection open"
            )
    for name, tally in account.handles.items():
        if name not in listed and tally.open_conn is not None:
            problems.append(f"{name}: not in the statistics (gone) but open in the log")
    return problems


def verify_with_kernel(
    ledger: ConnectionLedger,
    listeners: Mapping[int, Address],
    serve: Callable[[float], object],
    *,
    phase: str,
    settle_s: float = 1.0,
) -> None:
    """Check that ``ledger``'s open connections are exactly this process's live sockets to
    the brokers (as :func:`verify_against_kernel`), serving the client's queue with
    ``serve`` (``poll(timeout_s)``) between attempts: a librdkafka ledger only learns of a
    socket's change when its log line is served. Retries every 20 ms for up to
    ``settle_s``, then raises :class:`AccountingMismatch` naming the phase and the phantom
    and missed sockets."""
    deadline = time.monotonic() + settle_s
    while True:
        try:
            verify_against_kernel(ledger, listeners, settle_s=0.0)
            return
        except AccountingMismatch as e:
            if time.monotonic() >= deadline:
                raise AccountingMismatch(
                    f"librdkafka {phase}, log queue served for {settle_s:.1f}s: {e}",
                    e.phantom,
                    e.missed,
                ) from e
        serve(0.02)
