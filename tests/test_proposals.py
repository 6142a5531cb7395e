"""The family of proposals in proposal/ (issue 19): each KIP has every section of the KIP
template in order, a main text of at most 3,000 words (derivations, measurements and history
go to its appendix, docs/kip-<x>-appendix.md, which it links), a Java design that names the
classes it changes with citations, a Test Plan that names tests of this project that exist;
the protocol proposal has a message schema in Kafka's style and a security analysis; no
headline figure or number uses the articles' model or a timing ratio across runtimes; Kafka's
sources are cited at the release the Java patch is based on, in the KIPs and their appendices
(the citations themselves: tests/test_source_citations.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from connmgr_evidence.bench import rfc
from connmgr_evidence.java import sources

PROPOSALS = rfc.RFC.parent
ROOT = PROPOSALS.parent
KIPS = sorted(PROPOSALS.glob("kip-*.md"))
APPENDICES = sorted((ROOT / "docs").glob("kip-*-appendix.md"))
MAX_WORDS = 3000
SECTIONS = (
    "Status",
    "Motivation",
    "Public Interfaces",
    "Proposed Changes",
    "Compatibility, Deprecation, and Migration Plan",
    "Test Plan",
    "Rejected Alternatives",
)


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match is not None, f"no section {title!r}"
    return match.group(1)


def test_the_family_is_there_and_the_readme_lists_every_proposal() -> None:
    names = {p.name for p in KIPS}
    assert {
        "kip-a-endpoint-identity.md",
        "kip-b-connection-lifecycle.md",
        "kip-c-connection-metrics.md",
        "kip-d-broker-identity.md",
        "kip-e-socket-budget.md",
    } <= names
    readme = (PROPOSALS / "README.md").read_text()
    for name in names:
        assert f"]({name})" in readme, f"proposal/README.md does not link {name}"


@pytest.mark.parametrize("kip", KIPS, ids=lambda p: p.stem)
def test_each_kip_has_the_template_sections_in_order(kip: Path) -> None:
    text = kip.read_text()
    found = re.findall(r"^## (.+)$", text, re.M)
    assert [s for s in found if s in SECTIONS] == list(SECTIONS), found


@pytest.mark.parametrize("kip", KIPS, ids=lambda p: p.stem)
def test_each_kip_main_text_is_short_enough_to_read(kip: Path) -> None:
    # Words as `wc -w` counts them: runs of non-space characters, markers and tables included.
    words = len(kip.read_text().split())
    assert words <= MAX_WORDS, f"{kip.name}: {words} words; move detail to its appendix"


def test_each_appendix_belongs_to_a_kip_that_links_it() -> None:
    assert APPENDICES, "no docs/kip-*-appendix.md"
    for appendix in APPENDICES:
        stem = appendix.name.removesuffix("-appendix.md")  # kip-b, kip-b0, ...
        (kip,) = [k for k in KIPS if k.stem.split("-")[1] == stem.split("-")[1]]
        assert f"](../docs/{appendix.name}" in kip.read_text(), (
            f"{kip.name} links no {appendix.name}"
        )
        assert f"](../proposal/{kip.name}" in appendix.read_text(), f"{appendix.name} names no KIP"


def _proposes_nothing(kip: Path) -> bool:
    """A rejected or withdrawn proposal proposes no change; it still says where one would live."""
    return _section(kip.read_text(), "Status").lstrip().startswith(("**Rejected", "**Withdrawn"))


@pytest.mark.parametrize("kip", KIPS, ids=lambda p: p.stem)
def test_each_java_design_names_the_classes_it_changes_with_citations(kip: Path) -> None:
    changes = _section(kip.read_text(), "Proposed Changes")
    assert "### Java design" in changes
    design = changes[changes.index("### Java design") :]
    # Citations as tests/test_source_citations.py checks them against Kafka's sources.
    cited = {
        f"{c.path.rsplit('/', 1)[-1]}:{c.start}-{c.end}"
        for c in sources.checked(sources.parse_citations(design, kip.name))
    }
    assert len(cited) >= (1 if _proposes_nothing(kip) else 3), (
        f"{kip.name}: Java design cites {sorted(cited)}"
    )


@pytest.mark.parametrize("kip", KIPS, ids=lambda p: p.stem)
def test_each_test_plan_names_tests_that_exist(kip: Path) -> None:
    plan = _section(kip.read_text(), "Test Plan")
    named = set(re.findall(r"`(tests/[\w/.-]+\.py)(?:::(\w+))?", plan))
    assert named, f"{kip.name}: the Test Plan names no test of this project"
    for path, test in named:
        source = ROOT / path
        assert source.is_file(), f"{kip.name}: {path} does not exist"
        if test:
            defined = rf"\b(def|class) {test}\b|^{test}\b.*="
            assert re.search(defined, source.read_text(), re.M), (
                f"{kip.name}: {path}::{test} does not exist"
            )


def test_the_protocol_proposal_has_a_schema_and_a_security_analysis() -> None:
    text = (PROPOSALS / "kip-d-broker-identity.md").read_text()
    blocks = re.findall(r"```json\n(.*?)```", text, re.S)
    assert blocks, "no JSON message schema"
    fields = []
    for block in blocks:
        # Kafka's message files carry // comments; the rest is JSON.
        body = "\n".join(line for line in block.splitlines() if not line.strip().startswith("//"))
        body = body.strip().rstrip(",")
        if not body:
            continue  # a comment block only
        # An excerpt of a message file's "fields" list: objects separated by commas.
        parsed = json.loads(body if body.startswith("[") else "[" + body + "]")
        fields += parsed
    tagged = [f for f in fields if isinstance(f, dict) and "taggedVersions" in f]
    assert tagged and all({"name", "type", "versions", "tag", "about"} <= set(f) for f in tagged)
    assert "### Security analysis" in text
    assert "SASL" in _section(text, "Proposed Changes")


def test_no_headline_uses_the_articles_model_or_a_cross_runtime_timing_ratio() -> None:
    # The RFC and its appendices show every figure (tests/test_rfc.py); each figure once.
    text = "".join(p.read_text() for p in (rfc.RFC, *rfc.appendices()))
    for name in ("sockets-headline", "life-headline"):
        figure = text[text.index(f"<!-- fig:{name} -->") : text.index(f"<!-- /fig:{name} -->")]
        assert "| java-described |" not in figure, name
    for path in (rfc.RFC, *rfc.companions()):
        for value in re.findall(r"<!--v:([\w.-]+)-->", path.read_text()):
            if value.startswith("headline."):
                assert "java-described" not in value, f"{path.name}: {value}"
            timing = any(t in value for t in ("latency", "ttfa", "ttfc", "first-ack"))
            other_runtime = any(c in value for c in ("java", "librdkafka"))
            assert not (timing and other_runtime and value.endswith("ratio")), (
                f"{path.name}: {value} is a timing ratio across runtimes"
            )


@pytest.mark.parametrize(
    "path", [*sorted(PROPOSALS.glob("*.md")), *APPENDICES], ids=lambda p: p.name
)
def test_the_proposals_cite_kafka_at_the_release_the_java_patch_is_based_on(path: Path) -> None:
    text = path.read_text()
    for c in sources.checked(sources.parse_citations(text, path.name)):
        assert c.revision == sources.JAVA_PATCH_BASE, (
            f"{c}: the proposals cite Kafka {sources.JAVA_PATCH_BASE}, the base of the Java patch"
        )
