"""``python -m connmgr.bench.report DOC...``: refresh the results schema's generated
blocks in each Markdown file named (``docs/results-schema.md``)."""

from __future__ import annotations

import sys
from pathlib import Path

from connmgr.bench.results.schema import update_columns_doc

for name in sys.argv[1:]:
    print(f"{name}: {'updated' if update_columns_doc(Path(name)) else 'up to date'}")
