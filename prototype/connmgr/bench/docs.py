"""The docs' blocks generated from the code (:mod:`connmgr.docblocks`): the results schema's
columns, the comparison's columns, the stages' table and their names in run order. A test
compares each file's blocks with :func:`blocks`' text for them.

``python -m connmgr.bench.docs docs/results-schema.md docs/benchmarks.md docs/architecture.md``
rewrites them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from connmgr.bench.report.summaries import PairSummary
from connmgr.bench.results.schema import columns_markdown
from connmgr.bench.stages import stage_names, stages_markdown
from connmgr.docblocks import refresh


def comparison_columns() -> str:
    """The ``comparison`` table's columns and types, from :class:`PairSummary`."""
    lines = ["| column | type |", "|---|---|"]
    lines += [f"| `{name}` | {type_.value} |" for name, type_ in PairSummary.columns()]
    return "\n".join(lines)


BLOCKS: dict[str, Callable[[], str]] = {
    "columns": columns_markdown,
    "comparison-columns": comparison_columns,
    "stages": stages_markdown,
    "stage-names": stage_names,
}
"""Block name -> its content."""


def blocks(text: str) -> dict[str, str]:
    """The generated blocks ``text`` has (by their ``BEGIN`` marker), with their content."""
    return {name: make() for name, make in BLOCKS.items() if f"<!-- BEGIN {name} -->" in text}


def refresh_docs(path: Path) -> bool:
    """Rewrite every generated block of the Markdown file ``path``; True if it changed."""
    return refresh(path, blocks(path.read_text()))


DOCS = ("docs/results-schema.md", "docs/benchmarks.md", "docs/architecture.md")
"""The files with generated blocks, from the checkout's root."""


def main(argv: Sequence[str] | None = None) -> int:
    for name in sys.argv[1:] if argv is None else argv:
        print(f"{name}: {'updated' if refresh_docs(Path(name)) else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
