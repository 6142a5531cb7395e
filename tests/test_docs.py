from __future__ import annotations

from pathlib import Path

from connmgr.core.state import transitions_markdown

DOCS = Path(__file__).parent.parent / "docs"


def test_architecture_doc_embeds_the_current_transition_table() -> None:
    text = (DOCS / "architecture.md").read_text()
    block = text.split("<!-- BEGIN transitions -->\n", 1)[1].split("\n<!-- END transitions -->")[0]
    assert block == transitions_markdown()
