"""The workload tables the proposals show, generated from ``reports/workloads/workloads.json``.

Each block sits between ``<!-- workloads:NAME -->`` and ``<!-- /workloads:NAME -->`` in one
file of ``proposal/`` or of a KIP's appendix in ``docs/`` (:data:`BLOCKS`): the RFC Summary's
table and each KIP's gain and cost per class there, each KIP's rows in its Motivation, and
the whole proposal's rows in KIP (b)'s appendix. :func:`refresh_all` rewrites them from the
committed JSON, and
``tests/bench/test_workloads.py`` fails when a file's block differs from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from connmgr_evidence.bench.workloads.report import (
    JSON_FILE,
    kip_gains,
    kip_rows,
    over_today_block,
    read_cells,
    rfc_summary,
)
from connmgr_evidence.bench.workloads.run import Cell


@dataclass(frozen=True)
class Block:
    """A generated block: its name, the file it is in (a path relative to ``proposal/``; a
    KIP's appendix is ``../docs/kip-<x>-appendix.md``), what renders it."""

    name: str
    file: str
    render: Callable[[Sequence[Cell]], str]

    @property
    def start(self) -> str:
        return f"<!-- workloads:{self.name} -->"

    @property
    def end(self) -> str:
        return f"<!-- /workloads:{self.name} -->"

    def pattern(self) -> re.Pattern[str]:
        return re.compile(re.escape(self.start) + r"\n.*?" + re.escape(self.end), re.S)


BLOCKS: Final = (
    Block("summary", "rfc.md", rfc_summary),
    Block(
        "kip-b0",
        "kip-b0-close-bootstrap-connection.md",
        lambda c: kip_rows(c, "java-b0", "java-today"),
    ),
    Block(
        "kip-b-rule-6",
        "kip-b-connection-lifecycle.md",
        lambda c: kip_rows(c, "java-linger", "java-today"),
    ),
    Block(
        "kip-b-proposal",
        "../docs/kip-b-appendix.md",
        lambda c: kip_rows(c, "proposed", "java-today"),
    ),
    Block("kip-d", "kip-d-broker-identity.md", lambda c: kip_rows(c, "proposed-4.4", "proposed")),
    Block("costs", "rfc.md", over_today_block),
    Block("gains-b0", "rfc.md", lambda c: kip_gains(c, "java-b0", "java-today")),
    Block("gains-b-rule-6", "rfc.md", lambda c: kip_gains(c, "java-linger", "java-today")),
    Block("gains-patch", "rfc.md", lambda c: kip_gains(c, "java-patched", "java-today")),
    Block("gains-proposal", "rfc.md", lambda c: kip_gains(c, "proposed", "java-today")),
    Block("gains-d", "rfc.md", lambda c: kip_gains(c, "proposed-4.4", "proposed")),
)
START: Final = BLOCKS[0].start


def rendered(block: Block, report: Path) -> str:
    """``block`` as the report's JSON gives it, markers included."""
    cells, _ = read_cells(report / JSON_FILE)
    return f"{block.start}\n{block.render(cells)}{block.end}"


def current(block: Block, proposal: Path) -> str:
    """``block`` as its file under ``proposal`` has it; ValueError if it has none."""
    path = proposal / block.file
    found = block.pattern().search(path.read_text())
    if found is None:
        raise ValueError(f"{path}: no {block.start} ... {block.end} block")
    return found.group(0)


def refresh_all(proposal: Path, report: Path) -> list[str]:
    """Rewrite every block from ``report``; the names of those that changed."""
    changed = []
    for block in BLOCKS:
        path = proposal / block.file
        text = path.read_text()
        found = block.pattern().search(text)
        if found is None:
            raise ValueError(f"{path}: no {block.start} ... {block.end} block to refresh")
        new = text[: found.start()] + rendered(block, report) + text[found.end() :]
        if new != text:
            path.write_text(new)
            changed.append(block.name)
    return changed
