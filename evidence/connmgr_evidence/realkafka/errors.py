"""What goes wrong with the real cluster: the error types, and the output tail they end with."""

from __future__ import annotations

from typing import Final

from connmgr.errors import ConnMgrError

__all__ = ["MissingTool", "PortTaken", "RealKafkaError", "output_tail"]

LOG_TAIL_LINES: Final = 40


class RealKafkaError(ConnMgrError):
    """The real cluster could not be resolved, started, queried or shaped as asked.

    The message says what went wrong and, where a process failed, ends with the tail of its
    output or log.
    """


class MissingTool(RealKafkaError):
    """``java`` or ``mvn`` is not installed (or too old); the message names what to install."""


class PortTaken(RealKafkaError):
    """A node could not bind a reserved port (another process took it first); start retries."""


def output_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, indented for an error message."""
    kept = text.rstrip().splitlines()[-lines:]
    return "\n".join("    " + line for line in kept) if kept else "    (no output)"
