"""What the comparison report shows, by the names it has always been imported under.

The report's parts live in modules of their own: the metrics and regression rules
(:mod:`connmgr.bench.metrics`), the typed aggregates and regressions
(:mod:`connmgr.bench.summaries`), the micro-benchmark files (:mod:`connmgr.bench.micro`), the
table type and its files (:mod:`connmgr.bench.table`), the tables
(:mod:`connmgr.bench.tables`) and the page (:mod:`connmgr.bench.page`). This module
re-exports their public names, and keeps the command that refreshes the schema's table in
the docs::

    python -m connmgr.bench.report docs/results-schema.md
"""

from __future__ import annotations

from pathlib import Path

from connmgr.bench.metrics import (
    METRICS,
    PROPOSED,
    RULED_METRICS,
    SOCKET_METRICS,
    THROUGHPUT_METRICS,
    TIMING_METRICS,
    regression_rules,
)
from connmgr.bench.micro import MicroBenchmark, MicroFile
from connmgr.bench.page import (
    EMBED_MAX_ROWS,
    Page,
    headline_markdown,
    regressions_markdown,
    render_index,
    what_ran_markdown,
)
from connmgr.bench.schema import columns_markdown, update_columns_doc
from connmgr.bench.summaries import Regression, regressions_of
from connmgr.bench.table import (
    MISSING,
    Table,
    TableFiles,
    arrow_schema,
    arrow_table,
    format_cell,
    make_table,
    markdown_table,
    write_table,
)
from connmgr.bench.tables import (
    COMPARISON_COLUMNS,
    brokers_table,
    comparison_table,
    decision_table,
    headline_table,
    latency_table,
    other_micro_table,
    regressions_table,
    roles_table,
    runs_table,
    simulator_table,
    sockets_table,
    sweep_savings_table,
    throughput_table,
)

__all__ = [
    "COMPARISON_COLUMNS",
    "EMBED_MAX_ROWS",
    "METRICS",
    "MISSING",
    "PROPOSED",
    "RULED_METRICS",
    "SOCKET_METRICS",
    "THROUGHPUT_METRICS",
    "TIMING_METRICS",
    "MicroBenchmark",
    "MicroFile",
    "Page",
    "Regression",
    "Table",
    "TableFiles",
    "arrow_schema",
    "arrow_table",
    "brokers_table",
    "columns_markdown",
    "comparison_table",
    "decision_table",
    "format_cell",
    "headline_markdown",
    "headline_table",
    "latency_table",
    "make_table",
    "markdown_table",
    "other_micro_table",
    "regression_rules",
    "regressions_markdown",
    "regressions_of",
    "regressions_table",
    "render_index",
    "roles_table",
    "runs_table",
    "simulator_table",
    "sockets_table",
    "sweep_savings_table",
    "throughput_table",
    "update_columns_doc",
    "what_ran_markdown",
    "write_table",
]

if __name__ == "__main__":  # python -m connmgr.bench.report docs/results-schema.md
    import sys

    for name in sys.argv[1:]:
        print(f"{name}: {'updated' if update_columns_doc(Path(name)) else 'up to date'}")
