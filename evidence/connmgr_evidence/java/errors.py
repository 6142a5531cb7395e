"""What goes wrong with the Java client probe: missing tools, a failed build, a failed run."""

from __future__ import annotations

import re
from typing import Final

from connmgr.errors import ConnMgrError

__all__ = ["JavaBuildError", "JavaProbeError", "JavaToolError", "output_tail", "strip_ansi"]

TAIL_LINES: Final = 40
_ANSI_RE: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class JavaToolError(ConnMgrError):
    """``java`` or ``mvn`` is missing or unusable; the message says what to install."""


class JavaBuildError(JavaToolError):
    """Maven failed to build the probe; the message ends with the tail of Maven's output."""


class JavaProbeError(ConnMgrError):
    """The probe run failed: it reported ``{"phase": "error"}``, exited non-zero, printed
    something unexpected or timed out. The message carries the probe's error, the tail of its
    stderr and the tail of the client log."""


def strip_ansi(text: str) -> str:
    """``text`` without terminal colour codes (Maven's, when it colours anyway)."""
    return _ANSI_RE.sub("", text)


def output_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``, colour codes removed, for an error message."""
    return "\n".join(strip_ansi(text).strip().splitlines()[-lines:])
