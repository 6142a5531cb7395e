"""The RFC Summary's workload table, generated from ``reports/workloads/workloads.json``.

The block sits between ``<!-- workloads:summary -->`` and ``<!-- /workloads:summary -->`` in
``proposal/rfc.md``; :func:`refresh` rewrites it from the committed JSON, and
``tests/bench/test_workloads.py`` fails when the RFC's block differs from it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from connmgr.bench.workloads.report import JSON_FILE, read_cells, rfc_summary

START: Final = "<!-- workloads:summary -->"
END: Final = "<!-- /workloads:summary -->"
_BLOCK = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)


def rendered(report: Path) -> str:
    """The block as the report's JSON gives it, markers included."""
    cells, _ = read_cells(report / JSON_FILE)
    return f"{START}\n{rfc_summary(cells)}{END}"


def current(rfc: Path) -> str:
    """The block as ``rfc`` has it; ValueError if it has none."""
    found = _BLOCK.search(rfc.read_text())
    if found is None:
        raise ValueError(f"{rfc}: no {START} ... {END} block")
    return found.group(0)


def refresh(rfc: Path, report: Path) -> bool:
    """Rewrite ``rfc``'s block from ``report``; whether it changed."""
    text = rfc.read_text()
    block = rendered(report)
    if _BLOCK.search(text) is None:
        raise ValueError(f"{rfc}: no {START} ... {END} block to refresh")
    new = _BLOCK.sub(lambda _: block, text)
    if new != text:
        rfc.write_text(new)
    return new != text
