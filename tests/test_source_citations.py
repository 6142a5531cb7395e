"""Every ``File.java:line`` citation of ``proposal/`` and ``docs/`` against the sources of the
release it names (:mod:`connmgr_evidence.java.sources`).

The rules of reading a citation (its file, its release, the names its sentence gives) are
checked here on small documents and a fake jar, without Maven. The ``java`` tests fetch the
real sources jars through Maven (into ``~/.m2``) and check every citation: its file is in the
release, its lines are in the file, and a name its sentence gives stands within
``sources.NEAR`` lines of them; moved to its file's first line, each citation fails.
"""

from __future__ import annotations

import dataclasses
import zipfile
from functools import cache
from pathlib import Path

import pytest

from connmgr_evidence.java import sources

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted((ROOT / "proposal").glob("*.md")) + sorted((ROOT / "docs").glob("*.md"))
CITING = [p for p in DOCUMENTS if sources.checked(sources.parse_citations(p.read_text(), p.name))]


def _citations(path: Path) -> list[sources.Citation]:
    text = path.read_text(encoding="utf-8")
    return sources.checked(sources.parse_citations(text, path.relative_to(ROOT).as_posix()))


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@cache
def _release(version: str) -> sources.Release:
    return sources.Release(version)


# -- reading a document (no Maven) ---------------------------------------------------------

DOC = """\
Java sources are cited at Apache Kafka `4.3.1`; aiokafka at `v0.14.0`.

`leastLoadedNode` (`clients/src/main/java/org/apache/kafka/clients/NetworkClient.java:759`)
scans from a random offset (`randOffset`, `:771`). In 2.1.0 `leastLoadedNode`
(`…/clients/NetworkClient.java:643` at `2.1.0`) scans from a random offset (`:650`).
`bootstrap()` is awaited (`aiokafka/client.py:190`, `:196`). The ids are -1, -2, ...
(`Cluster.bootstrap`, `NetworkClient.java:10`). It says "Wait. Then dial" (`dial`,
`:20`). A lookup (`poll`), e.g. in the loop (`:30`).

- **`Selector`** (`common/network/Selector.java`). It closes idle ones
  (`maybeCloseOldestConnection`, `:L795-L811`).

Java sources are cited at Apache Kafka `2.2.0`. `Metadata.bootstrap` (`clients/Metadata.java:310`).
"""


def test_a_citation_takes_its_tag_else_what_it_continues_else_the_declaration() -> None:
    cs = sources.parse_citations(DOC, "doc.md")
    seen = [(c.path.rsplit("/", 1)[-1], c.start, c.end, c.revision) for c in cs]
    assert seen == [
        ("NetworkClient.java", 759, 759, "4.3.1"),
        ("NetworkClient.java", 771, 771, "4.3.1"),
        ("NetworkClient.java", 643, 643, "2.1.0"),
        ("NetworkClient.java", 650, 650, "2.1.0"),  # continues the 2.1.0 citation
        ("client.py", 190, 190, "4.3.1"),
        ("client.py", 196, 196, "4.3.1"),
        ("NetworkClient.java", 10, 10, "4.3.1"),
        ("NetworkClient.java", 20, 20, "4.3.1"),
        ("NetworkClient.java", 30, 30, "4.3.1"),
        ("Selector.java", 795, 811, "4.3.1"),  # the file named alone is what `:L795` cites
        ("Metadata.java", 310, 310, "2.2.0"),  # the second declaration holds from there on
    ]
    assert [c.extension for c in sources.checked(cs)] == ["java"] * 4 + ["java"] * 5
    # A bare name is the last path with that name: here the one `…/clients/` named.
    assert cs[6].path == "…/clients/NetworkClient.java"


def test_the_names_of_a_citation_are_the_code_its_sentence_gives() -> None:
    cs = sources.parse_citations(DOC, "doc.md")
    assert cs[0].names == ("leastLoadedNode", "randOffset")
    assert cs[2].names == ("leastLoadedNode",), "each sentence gives its own names"
    assert cs[6].names == ("bootstrap",), "an ellipsis does not end the sentence"
    assert cs[7].names == ("dial",), "a quoted sentence does not end it either"
    assert cs[8].names == ("poll",), "nor does e.g."
    assert cs[9].names == ("maybeCloseOldestConnection",), "the bold name is a sentence apart"
    assert sources.sentence_names(
        "`KafkaChannel.id`, `id`, `connection-close-*`, `max.age.ms`"
    ) == (
        "id",
        "connection-close",
        "max.age.ms",
    ), "a qualified short name counts, an unqualified one does not; keys are whole"


def test_a_continuation_with_nothing_before_it_is_an_error() -> None:
    with pytest.raises(sources.SourcesError, match="continues no citation"):
        sources.parse_citations("It is there (`:12`).", "doc.md")


def test_a_list_of_lines_in_one_span_is_reported_as_no_citation() -> None:
    text = "The entry (`ApiVersions.java:51,60`) and (`ApiVersions.java:51`, `:60`)."
    assert sources.malformed(text) == ["`ApiVersions.java:51,60`"]


def test_a_name_stands_on_a_line_as_a_whole_word_or_as_the_constant_kafka_spells() -> None:
    assert sources.name_occurs("poll", "selector.poll(timeout);")
    assert not sources.name_occurs("poll", "pollSelectionKeys(keys);")
    assert sources.name_occurs("none", "MetadataRecoveryStrategy.NONE.name")
    assert sources.name_occurs("metadata.max.age.ms", 'String X = "metadata.max.age.ms";')
    assert sources.name_occurs("connections.max.idle.ms", ".define(CONNECTIONS_MAX_IDLE_MS_CONFIG,")
    assert not sources.name_occurs("Node", "Node2 node = null;")


@pytest.fixture
def fake_release(tmp_path: Path) -> sources.Release:
    """A release whose jars hold a few files: ``Thing.java`` is numbered so that line N
    reads ``lineN``, with ``target`` on line 50."""
    lines = "\n".join("target();" if n == 50 else f"line{n};" for n in range(1, 101))
    jars = {
        ("kafka-clients", "sources"): {
            "org/apache/kafka/clients/Thing.java": lines,
            "org/apache/kafka/common/Twin.java": "a",
            "org/apache/kafka/clients/Twin.java": "b",
        },
        ("kafka-clients", "test-sources"): {"org/apache/kafka/clients/ThingTest.java": lines},
        ("kafka_2.13", "sources"): {"kafka/server/KafkaApis.scala": lines},
    }
    for (artifact, classifier), files in jars.items():
        with zipfile.ZipFile(tmp_path / f"{artifact}-{classifier}.jar", "w") as z:
            for name, text in files.items():
                z.writestr(name, text)

    def fetch(artifact: str, version: str, classifier: str) -> Path:
        return tmp_path / f"{artifact}-{classifier}.jar"

    return sources.Release("9.9.9", fetch=fetch)


def test_a_path_is_found_in_the_jar_of_its_module(fake_release: sources.Release) -> None:
    locate = fake_release.locate
    thing = ("kafka-clients", "sources", "org/apache/kafka/clients/Thing.java")
    assert locate("clients/src/main/java/org/apache/kafka/clients/Thing.java") == thing
    assert locate("…/clients/Thing.java") == thing
    assert locate("clients/Thing.java") == thing
    assert locate("Thing.java") == thing
    assert locate("clients/src/test/java/org/apache/kafka/clients/ThingTest.java")[1] == (
        "test-sources"
    )
    assert locate("core/src/main/scala/kafka/server/KafkaApis.scala")[0] == "kafka_2.13"
    with pytest.raises(sources.SourcesError, match="2 files"):
        locate("Twin.java")
    with pytest.raises(sources.SourcesError, match="not in"):
        locate("clients/Other.java")


@pytest.mark.parametrize(
    ("start", "end", "holds"),
    [(50, 50, True), (48, 48, True), (52, 52, True), (40, 47, False), (53, 60, False)],
)
def test_a_citation_holds_when_a_name_is_within_near_lines(
    fake_release: sources.Release, start: int, end: int, holds: bool
) -> None:
    assert sources.NEAR == 2
    citation = sources.Citation(
        "doc.md", 1, "", "clients/Thing.java", start, end, "9.9.9", ("target",)
    )
    assert (sources.check_citation(citation, fake_release) is None) is holds


def test_a_citation_past_the_end_or_naming_nothing_fails(fake_release: sources.Release) -> None:
    past = sources.Citation("doc.md", 1, "", "clients/Thing.java", 99, 101, "9.9.9", ("line99",))
    assert "has 100" in (sources.check_citation(past, fake_release) or "")
    mute = dataclasses.replace(past, start=50, end=50, names=())
    assert "names no code" in (sources.check_citation(mute, fake_release) or "")


# -- the documents (no Maven) --------------------------------------------------------------


@pytest.mark.parametrize("path", DOCUMENTS, ids=_id)
def test_every_citation_of_kafka_names_a_release_and_some_code(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert sources.malformed(text) == [], f"{_id(path)}: spans no check reads"
    for c in _citations(path):
        assert c.revision is not None and sources.RELEASE.match(c.revision), (
            f"{c}: not at a release with a sources jar (declare one: 'Java sources are cited "
            "at Apache Kafka `V`', or tag the citation `at `V``)"
        )
        assert c.names, f"{c}: its sentence names no code to check the line against"


# -- against the sources jars (Maven) ------------------------------------------------------


@pytest.mark.java
@pytest.mark.parametrize("path", CITING, ids=_id)
def test_every_citation_holds_in_the_release_it_names(path: Path) -> None:
    problems = [
        f"{c} {c.text}: {problem}"
        for c in _citations(path)
        if (problem := sources.check_citation(c, _release(c.revision or ""))) is not None
    ]
    assert problems == [], "\n".join(problems)


@pytest.mark.java
def test_each_citation_moved_to_its_files_first_line_fails() -> None:
    """The check depends on the line: at line 1 (the licence header) no citation holds."""
    for path in CITING:
        for c in _citations(path):
            moved = dataclasses.replace(c, start=1, end=1)
            assert sources.check_citation(moved, _release(c.revision or "")) is not None, str(c)


@pytest.mark.java
def test_a_release_without_a_sources_jar_is_refused() -> None:
    # kafka-clients 4.4.0 is on Maven Central without sources.
    with pytest.raises(sources.SourcesError, match=r"kafka-clients:4\.4\.0:jar:sources"):
        sources.fetch_sources_jar("kafka-clients", "4.4.0")
    with pytest.raises(sources.SourcesError, match="not a release"):
        sources.Release("1eb7644349c")
