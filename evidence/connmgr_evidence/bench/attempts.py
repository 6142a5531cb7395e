"""A run of the main job tried a bounded number of times, its failures kept as reasons.

A real run (a client on a fresh embedded cluster) can fail for a reason that is the machine's
or the cluster's, not the client's: a broker slow to come back in a rolling restart on a
loaded machine, a request fenced by a leader epoch that moved meanwhile, a run that ends
past its deadline. Such a failure is *retriable*: the run is tried again, up to a bound,
and every failed attempt's reason is kept, so that the results count the retries. When the
last attempt fails too, the caller records the run as failed with its reason; it is never
the whole job's abort. A failure that is not retriable (a bug: any other exception) is
raised at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from connmgr.errors import ConnMgrError

T = TypeVar("T")

RETRIABLE: tuple[type[BaseException], ...] = (ConnMgrError, TimeoutError)
"""What a failed real run raises when the run, not the code, failed: the run's own errors
(a probe that exited non-zero, a kernel check that failed, a cluster that did not start) and
a deadline passed."""


@dataclass(frozen=True)
class Attempted(Generic[T]):
    """The result of :func:`attempt`: the value of the attempt that succeeded (``ok``), or
    none; and the reason of every attempt that failed, in order."""

    ok: bool
    value: T | None
    failures: tuple[str, ...]

    @property
    def attempts(self) -> int:
        """How many times the work ran."""
        return len(self.failures) + (1 if self.ok else 0)

    @property
    def reason(self) -> str:
        """The last failure's reason ("" if none failed)."""
        return self.failures[-1] if self.failures else ""

    def get(self) -> T:
        """The value; a :class:`ValueError` if every attempt failed."""
        if not self.ok:
            raise ValueError(f"every attempt failed; the last: {self.reason}")
        return self.value  # type: ignore[return-value]


def attempt(
    work: Callable[[], T],
    attempts: int,
    *,
    label: str = "run",
    log: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
) -> Attempted[T]:
    """Run ``work`` until it returns, at most ``attempts`` times (>= 1). An exception of
    :data:`RETRIABLE` is a failed attempt: its reason (the first line of its message, or the
    deadline ``timeout_s`` for a bare :class:`TimeoutError`) is kept and, with ``label``,
    passed to ``log``; any other exception propagates at once."""
    if attempts < 1:
        raise ValueError(f"attempts must be >= 1, got {attempts}")
    failures: list[str] = []
    for n in range(1, attempts + 1):
        try:
            return Attempted(True, work(), tuple(failures))
        except RETRIABLE as e:
            why = str(e).strip() or (
                f"no result within {timeout_s:.0f} s" if timeout_s is not None else type(e).__name__
            )
            reason = why.splitlines()[0]
            failures.append(reason)
            if log is not None:
                more = "trying again" if n < attempts else "giving up"
                log(f"{label}: attempt {n} of {attempts} failed ({reason}); {more}")
    return Attempted(False, None, tuple(failures))
