"""The docs' blocks generated from the code (:mod:`connmgr.docblocks`): the results schema's
columns, the comparison's columns, the stages' table and their names in run order. A test
compares each file's blocks with :func:`blocks`' text for them.

``python -m connmgr_evidence.bench.docs [FILE...]`` rewrites them (by default in :data:`DOCS`, from
the
checkout's root).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from connmgr.docblocks import refresh
from connmgr_evidence.bench.report.summaries import PairSummary
from connmgr_evidence.bench.results.schema import columns_markdown
from connmgr_evidence.bench.stages import stage_names, stages_markdown


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
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.docs",
        description="Rewrite the blocks generated from the code in each Markdown file.",
    )
    parser.add_argument("files", nargs="*", type=Path, default=[Path(d) for d in DOCS])
    for path in parser.parse_args(argv).files:
        print(f"{path}: {'updated' if refresh_docs(path) else 'up to date'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
