from __future__ import annotations

import re
from pathlib import Path

from connmgr.core.state import transitions_markdown
from connmgr.docblocks import block

DOCS = Path(__file__).parent.parent / "docs"


def test_architecture_doc_embeds_the_current_transition_table() -> None:
    text = (DOCS / "architecture.md").read_text()
    assert block(text, "transitions") == transitions_markdown()


# --- no document links outside the repository -----------------------------------------------
#
# Checked: every Markdown link or image `[text](target)` and reference definition
# `[label]: target` outside fenced code blocks, and every backticked path that starts with
# `../`; each must resolve (relative to its file, after `Path.resolve()`) inside the
# repository root. Absolute URLs (http, https, mailto) and in-page anchors are allowed; a
# target's `#anchor` is ignored; whether the file exists is not checked (KIP files link each
# other while they are written). Everywhere, code blocks included, the text may not contain
# a path of the machine the project is developed on or of its shared workspace
# (`FORBIDDEN`). Other absolute paths in commands (`--out /shared/reports`, a path on a Spark
# cluster) are not links and are not checked.

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("/work/", "../../shared", "shared/README.md")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_BACKTICKED = re.compile(r"`(\.\./[^`\s]*)`")
_ALLOWED_SCHEMES = ("http://", "https://", "mailto:")


def documents() -> list[Path]:
    found = [ROOT / "README.md"]
    for folder in ("proposal", "docs"):
        found += sorted((ROOT / folder).rglob("*.md"))
    return found


def outside_links(path: Path, text: str) -> list[str]:
    """Every link, backticked `../` path or forbidden string in `text` (the contents of
    `path`) that leads outside the repository, as `file:line: what`."""
    problems: list[str] = []
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        problems += [f"{where}: contains {bad!r}" for bad in FORBIDDEN if bad in line]
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced:
            continue
        targets = [("link", t) for t in _LINK.findall(line)]
        targets += [("link", t) for t in _REFERENCE.findall(line)]
        targets += [("backticked path", t) for t in _BACKTICKED.findall(line)]
        for kind, target in targets:
            if target.startswith(_ALLOWED_SCHEMES) or target.startswith("#"):
                continue
            if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target):
                problems.append(f"{where}: {kind} {target!r} uses a scheme other than http(s)")
                continue
            local = target.split("#", 1)[0]
            if not local:
                continue
            resolved = (path.parent / local).resolve()
            if not resolved.is_relative_to(ROOT):
                problems.append(f"{where}: {kind} {target!r} resolves outside the repository")
    return problems


def test_no_document_links_outside_the_repository() -> None:
    problems = [p for doc in documents() for p in outside_links(doc, doc.read_text())]
    assert problems == [], "\n".join(problems)


def test_the_link_check_finds_what_it_must() -> None:
    doc = ROOT / "docs" / "example.md"
    text = "\n".join(
        [
            "[ok](../proposal/rfc.md#safety) [web](https://example.org/a) [anchor](#faq)",
            "`../prototype/connmgr` and ![plot](../reports/x/plots/p.png)",
            "[up](../../elsewhere/README.md)",
            "see `../../shared/notes.md`",
            "[abs](/etc/passwd)",
            "[ref]: ../../outside.md",
            "```sh",
            "connmgr bench --out /shared/reports",
            "```",
            "files in /work/ are not the repository's",
        ]
    )
    assert outside_links(doc, text) == [
        "docs/example.md:3: link '../../elsewhere/README.md' resolves outside the repository",
        "docs/example.md:4: contains '../../shared'",
        "docs/example.md:4: backticked path '../../shared/notes.md'"
        " resolves outside the repository",
        "docs/example.md:5: link '/etc/passwd' resolves outside the repository",
        "docs/example.md:6: link '../../outside.md' resolves outside the repository",
        "docs/example.md:10: contains '/work/'",
    ]


def test_the_docs_index_lists_every_document() -> None:
    """``docs/README.md`` links every other page of ``docs/`` once, and nothing else there."""
    index = (DOCS / "README.md").read_text()
    linked = [t for t in _LINK.findall(index) if "/" not in t and t.endswith(".md")]
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md")
    assert sorted(linked) == pages


def test_the_benchmark_doc_names_the_rfc_s_report_as_the_rfc_s() -> None:
    """Each paragraph of ``docs/benchmarks.md`` that speaks of the report the RFC cites and
    names a run names the report ``proposal/rfc.md`` cites (its ``<!-- report: ... -->``
    line) first."""
    cited = re.search(r"<!-- report: (reports/\S+) -->", (ROOT / "proposal" / "rfc.md").read_text())
    assert cited is not None
    paragraphs = (DOCS / "benchmarks.md").read_text().split("\n\n")
    run = re.compile(r"reports/\d{8}T\d{6}Z-[0-9a-f]+")
    speaking = [p for p in paragraphs if re.search(r"RFC\s+cites", p) and run.search(p)]
    assert speaking, "docs/benchmarks.md no longer names the RFC's report"
    for paragraph in speaking:
        assert run.findall(paragraph)[0] == cited[1], paragraph
