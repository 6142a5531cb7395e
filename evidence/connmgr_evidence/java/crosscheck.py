"""The reconciliation of a Java run: the log, the client's metrics and the kernel must agree.

Three views of the same connections:

* the **log** (:mod:`connmgr_evidence.java.accounting`): dials, establishments and disconnects, and
  whatever the client's close() closed without a line;
* the client's **metrics** ``connection-creation-total`` (successful connects only),
  ``connection-close-total`` (every registered socket closed, failed dials included) and
  ``connection-count`` (registered sockets, dials in progress included);
* the **kernel**: the JVM's TCP sockets to the brokers while it sits in its steady state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connmgr.errors import ConnMgrError
from connmgr_evidence.java.results import JavaRun

__all__ = ["JavaAccountingMismatch", "cross_check"]


class JavaAccountingMismatch(ConnMgrError):
    """The log, the client's metrics and the kernel disagree about the connections of a run
    (raised by :func:`run_probe` with ``verify=True``). ``problems`` lists every disagreement;
    ``run`` is the complete run, for inspection."""

    def __init__(self, problems: Sequence[str], run: JavaRun[Any]) -> None:
        super().__init__(
            f"Java client {run.version} {run.client}: log, metrics and kernel disagree:\n  "
            + "\n  ".join(problems)
            + f"\n(log: {run.log_path})"
        )
        self.problems = list(problems)
        self.run = run


def cross_check(run: JavaRun[Any]) -> list[str]:
    """Every disagreement between the log, the client's metrics and the kernel; empty when the
    run is consistent.

    At the steady line and at the end:

    * connections established in the log (``Completed connection``) == the metric
      ``connection-creation-total`` (a failed dial logs ``Initiating`` but is never created),
      with no dial still in progress at the steady line;
    * established-then-closed connections + failed dials that had registered a socket ==
      ``connection-close-total`` (the metric counts every registered socket it closes; at the
      end this includes the connections closed by the client's close(), which logs nothing per
      connection);
    * open connections in the log == ``connection-count`` (0 at the end);

    and while the caller sampled: the kernel's count (from ``run.sample``, see
    :attr:`JavaRun.kernel_count`) == the log's open connections at some instant between the
    steady line and the release. Also: the producer had every record acked, the consumer read
    exactly the records asked for.
    """
    problems: list[str] = []
    for label, account, report in (
        ("steady", run.steady_account, run.steady),
        ("closed", run.final_account, run.closed),
    ):
        if account.established != report.connection_creation_total:
            problems.append(
                f"{label}: log shows {account.established} connections established "
                f"({account.opened} dials, {account.failed} failed), "
                f"connection-creation-total is {report.connection_creation_total}"
            )
        pending = account.opened - account.established - account.failed
        if label == "steady" and pending:
            # Not a steady state: a dial in flight makes the kernel comparison a race.
            problems.append(f"steady: {pending} dials still in progress at the steady line")
        if account.metric_closes != report.connection_close_total:
            problems.append(
                f"{label}: log shows {account.closed} closed + "
                f"{account.failed - account.connect_errors} failed with a socket, "
                f"connection-close-total is {report.connection_close_total}"
            )
        expected_count = account.open if label == "steady" else 0
        if expected_count != report.connection_count:
            problems.append(
                f"{label}: log shows {expected_count} connections open, connection-count is "
                f"{report.connection_count}"
            )
    kernel = run.kernel_count
    if kernel is not None and kernel not in run.open_during_sample:
        problems.append(
            f"kernel: {kernel} live sockets to the brokers, the log shows "
            f"{sorted(run.open_during_sample)} open while sampling"
        )
    if run.client == "producer":
        # A living producer (--life-every-ms) sends more than it was asked to: every record
        # it sent must be acked, and it must have sent the requested ones at least.
        sent, acked = run.closed.records_sent, run.closed.records_acked
        if acked != sent or sent < run.records_requested:
            problems.append(f"records: {acked} of {sent} acked ({run.records_requested} requested)")
    elif run.closed.records_consumed != run.records_requested:
        problems.append(
            f"records: consumed {run.closed.records_consumed}, expected {run.records_requested}"
        )
    return problems
