"""Apache Kafka's published sources, and the ``File.java:line`` citations that point into them.

The proposals (``proposal/``) and ``docs/`` cite Kafka's code as ``File.java:line`` at a named
release. This module answers, for such a citation, "does file F exist in release V and what is
line N", from the release's **sources jars** on Maven Central
(``org.apache.kafka:kafka-clients:V:jar:sources``; for broker-side files the ``kafka-server``,
``kafka-server-common``, ``kafka_2.13`` and ``generator`` artifacts; ``test-sources`` for tests).
Maven fetches each jar once, at the exact version named, into its local repository (``~/.m2``);
nothing is written into the project and nothing else is cached.

How a document names its citations and their release (what :func:`parse_citations` reads,
with the one regex :data:`CITATION`):

- A citation is a code span ```path:N``` or ```path:N-M``` (GitHub's ``:LN`` / ``:LN-LM`` are
  read the same). ```:N``` alone continues the file named just before it (cited, or named
  alone as ```path```), at that file's release.
- ``path`` is a repository path (``clients/src/main/java/org/apache/kafka/clients/X.java``,
  ``core/src/main/scala/kafka/server/X.scala``, ``clients/src/test/java/...``), a path under
  the clients' ``org/apache/kafka/`` (``clients/X.java``, ``…/clients/X.java``), or a bare
  file name, which means the last path with that name named earlier in the document, else
  the one file of that name in kafka-clients' sources.
- A citation's release is the ```V``` of an `` at `V` `` right after it; else, for ```:N```,
  the release of the file it continues; else the declaration in force, the sentence "Java
  sources are cited at Apache Kafka ```V```" (it holds from where it stands to the next one).

What a citation must satisfy (:func:`check_citation`): its file is in that release's jars, its
lines are in the file, and, the value check, one of the **names** its sentence gives in code
spans stands within :data:`NEAR` lines of the cited range (:func:`name_occurs`). A name is
taken from a code span that is a dotted name, optionally called (``leastLoadedNode``,
``DefaultMetadataUpdater.maybeUpdate``, ``KafkaChannel.ready()``): its last segment; or from a
lower-case key of words joined by dots or hyphens (``connections.max.idle.ms``,
``connection-count``, ``connection-close-*``): the whole key. Unqualified names shorter than
three characters are ignored. A sentence ends at ``.``, ``!`` or ``?`` before white space
(not in code, not in a quotation, not after ``e.g``/``i.e`` or another ``.``), at a blank
line, a list item, a heading or a table cell. A citation whose sentence names nothing cannot
be checked, and fails.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Final

from connmgr.errors import ConnMgrError
from connmgr_evidence.java.errors import JavaToolError, output_tail

__all__ = [
    "CHECKED_EXTENSIONS",
    "CITATION",
    "DECLARATION",
    "FILE_EXTENSIONS",
    "JAVA_PATCH_BASE",
    "MODULE_ARTIFACTS",
    "NEAR",
    "RELEASE",
    "Citation",
    "Release",
    "SourceFile",
    "SourcesError",
    "check_citation",
    "checked",
    "fetch_sources_jar",
    "malformed",
    "name_occurs",
    "parse_citations",
    "sentence_names",
    "sources_jar_path",
]

JAVA_PATCH_BASE: Final = "4.3.1"
"""The release the project's Java patch is based on, and the one the proposals cite."""

FILE_EXTENSIONS: Final = frozenset(
    {"c", "h", "java", "json", "md", "py", "scala", "sh", "toml", "txt", "xml", "yaml", "yml"}
)
"""What a file's name may end with in a citation: a dotted code name (``ClientUtils.resolve``)
is not a file."""

CHECKED_EXTENSIONS: Final = frozenset({"java", "json", "scala"})
"""The citations that are Kafka's (its message definitions included); the others are not
this module's business."""

CITATION: Final = re.compile(
    r"`(?P<path>(?:…/)?[\w./-]*\.(?:" + "|".join(sorted(FILE_EXTENSIONS)) + r"))?"
    r"(?::L?(?P<start>\d+)(?:-L?(?P<end>\d+))?)?`"
    r"(?:\s+at\s+`(?P<rev>[^`\s]+)`)?"
)
"""A citation ```path:N-M```, a continuation ```:N``` or a file named alone (```path```,
which sets the file later continuations cite), with an optional `` at `V` ``."""

DECLARATION: Final = re.compile(
    r"Java\s+sources\s+are\s+cited\s+at\s+Apache\s+Kafka\s+`(?P<rev>[^`]+)`"
)
"""The sentence that sets the release of the untagged citations after it."""

NEAR: Final = 2
"""How many lines before and after the cited range a name may stand on."""

RELEASE: Final = re.compile(r"^\d+\.\d+\.\d+$")
"""A release version; the only revisions a sources jar exists for."""

MODULE_ARTIFACTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "clients": "kafka-clients",
        "server": "kafka-server",
        "server-common": "kafka-server-common",
        "core": "kafka_2.13",
        "generator": "generator",
    }
)
"""Repository module -> the Maven artifact (group ``org.apache.kafka``) that ships its sources.
``core`` is the Scala 2.13 build, which 3.x and 4.x releases publish."""

_SPAN: Final = re.compile(r"`(?:[^`\n]|\n(?!\s*\n))+`")  # may wrap, within a paragraph
_QUOTE: Final = re.compile(r'"(?:[^"\n]|\n(?!\s*\n))*"')  # within a paragraph
_DOTTED_NAME: Final = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:\(.*\))?$")
_KEY: Final = re.compile(r"^[a-z][a-z0-9]*(?:[.-][a-z0-9]+)+$")
_MIN_NAME: Final = 3
_SENTENCE_END: Final = re.compile(
    r"(?<!e\.g)(?<!i\.e)(?<!\.)[.!?](?=\s)|\n\s*\n|\n\s*(?:[-*]|\d+\.)\s|\n#|\|"
)
_MAVEN_TIMEOUT_S: Final = 600.0


class SourcesError(ConnMgrError):
    """A sources jar could not be fetched or read, or a path names no file in it."""


# -- the sources jars ------------------------------------------------------------------------


def sources_jar_path(artifact: str, version: str, classifier: str = "sources") -> Path:
    """Where Maven keeps ``org.apache.kafka:<artifact>:<version>:jar:<classifier>`` locally."""
    repository = Path.home() / ".m2" / "repository"
    return (
        repository
        / "org"
        / "apache"
        / "kafka"
        / artifact
        / version
        / (f"{artifact}-{version}-{classifier}.jar")
    )


def fetch_sources_jar(
    artifact: str, version: str, classifier: str = "sources", *, timeout_s: float = _MAVEN_TIMEOUT_S
) -> Path:
    """The local path of ``org.apache.kafka:<artifact>:<version>:jar:<classifier>``
    (``sources`` or ``test-sources``), fetched with ``mvn dependency:get`` into ``~/.m2``
    unless it is there already.

    ``version`` must be a release (``4.3.1``): a sources jar is what Maven Central publishes
    for one, and a pinned version is what makes a line number mean something. Raises
    :class:`JavaToolError` if ``mvn`` is missing, :class:`SourcesError` if Maven cannot get
    the jar (the message carries the tail of its output).
    """
    if not RELEASE.match(version):
        raise SourcesError(f"{version!r} is not a release version (e.g. 4.3.1): no sources jar")
    jar = sources_jar_path(artifact, version, classifier)
    if jar.is_file():
        return jar
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JavaToolError(
            "`mvn` was not found: install Apache Maven 3.6 or newer (Debian/Ubuntu: "
            "`apt-get install maven`) to fetch Kafka's sources jars"
        )
    coordinates = f"org.apache.kafka:{artifact}:{version}:jar:{classifier}"
    command = [
        mvn,
        "-q",
        "-B",
        "-ntp",
        "-Dstyle.color=never",
        "dependency:get",
        f"-Dartifact={coordinates}",
        "-Dtransitive=false",
    ]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as e:
        raise SourcesError(f"Maven did not fetch {coordinates} within {timeout_s:.0f}s") from e
    if done.returncode != 0 or not jar.is_file():
        raise SourcesError(
            f"Maven could not fetch {coordinates} into {jar.parent} (exit {done.returncode}; "
            f"is {version} a release with sources?):\n{output_tail(done.stdout + done.stderr)}"
        )
    return jar


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file of a release's sources: ``lines[0]`` is line 1."""

    version: str
    artifact: str
    entry: str
    lines: tuple[str, ...]

    def line(self, number: int) -> str:
        """Line ``number`` (1-based); raises :class:`SourcesError` past either end."""
        if not 1 <= number <= len(self.lines):
            raise SourcesError(f"{self.entry} at {self.version} has no line {number}")
        return self.lines[number - 1]

    def window(self, start: int, end: int, near: int = NEAR) -> Iterator[tuple[int, str]]:
        """``(number, text)`` for lines ``start - near`` to ``end + near``, clipped."""
        for number in range(max(1, start - near), min(len(self.lines), end + near) + 1):
            yield number, self.lines[number - 1]


class Release:
    """The sources of one Apache Kafka release, read from its sources jars on demand.

    ``fetch(artifact, version, classifier)`` gets a jar's local path (default
    :func:`fetch_sources_jar`); each jar is fetched at most once per instance, and only when a
    cited path needs it.
    """

    def __init__(self, version: str, fetch: Callable[[str, str, str], Path] | None = None) -> None:
        if not RELEASE.match(version):
            raise SourcesError(f"{version!r} is not a release version (e.g. 4.3.1)")
        self.version = version
        self._fetch = fetch or fetch_sources_jar
        self._jars: dict[tuple[str, str], tuple[Path, frozenset[str]]] = {}
        self._files: dict[str, SourceFile] = {}

    def entries(self, artifact: str, classifier: str = "sources") -> frozenset[str]:
        """Every file name (``org/apache/kafka/clients/NetworkClient.java``) in the jar."""
        return self._jar(artifact, classifier)[1]

    def _jar(self, artifact: str, classifier: str) -> tuple[Path, frozenset[str]]:
        key = (artifact, classifier)
        if key not in self._jars:
            jar = self._fetch(artifact, self.version, classifier)
            try:
                with zipfile.ZipFile(jar) as z:
                    names = frozenset(n for n in z.namelist() if not n.endswith("/"))
            except (OSError, zipfile.BadZipFile) as e:
                raise SourcesError(f"cannot read {jar}: {e}") from e
            self._jars[key] = (jar, names)
        return self._jars[key]

    def locate(self, path: str) -> tuple[str, str, str]:
        """``(artifact, classifier, entry)`` of a cited path (the forms are in the module's
        docstring; ``<module>/src/test/...`` is in the ``test-sources`` jar).

        Raises :class:`SourcesError` if no file, or more than one, answers to it.
        """
        bare = path.removeprefix("…/")
        repo_path = re.match(
            r"(?P<module>[\w-]+)/src/(?P<set>main|test)/(?:java|scala|resources)/(?P<entry>.+)$",
            bare,
        )
        if repo_path is not None:
            module = repo_path["module"]
            if module not in MODULE_ARTIFACTS:
                raise SourcesError(f"{path}: no sources artifact known for module {module!r}")
            artifact, entry = MODULE_ARTIFACTS[module], repo_path["entry"]
            classifier = "sources" if repo_path["set"] == "main" else "test-sources"
            if entry not in self.entries(artifact, classifier):
                raise SourcesError(f"{path}: {entry} is not in {artifact} {self.version}")
            return artifact, classifier, entry
        artifact = MODULE_ARTIFACTS["clients"]
        if "/" in bare:
            entry = "org/apache/kafka/" + bare
            if entry not in self.entries(artifact):
                raise SourcesError(f"{path}: {entry} is not in {artifact} {self.version}")
            return artifact, "sources", entry
        found = sorted(e for e in self.entries(artifact) if e.rsplit("/", 1)[-1] == bare)
        if len(found) != 1:
            what = "no file" if not found else f"{len(found)} files ({', '.join(found)})"
            raise SourcesError(f"{path}: {what} of that name in {artifact} {self.version}")
        return artifact, "sources", found[0]

    def file(self, path: str) -> SourceFile:
        """The cited file's lines; raises :class:`SourcesError` if it is not in the release."""
        if path not in self._files:
            artifact, classifier, entry = self.locate(path)
            with zipfile.ZipFile(self._jar(artifact, classifier)[0]) as z:
                text = z.read(entry).decode("utf-8")
            self._files[path] = SourceFile(self.version, artifact, entry, tuple(text.splitlines()))
        return self._files[path]


# -- citations -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Citation:
    """One ``path:N-M`` citation of a document, with what the document says about it.

    ``path`` is the file as the document names it (a continuation's or bare name's path
    resolved as the module docstring says), ``revision`` the release it is cited at (None if
    the document names none), ``names`` the names its sentence gives (see
    :func:`sentence_names`), ``line`` the document line the citation starts on.
    """

    document: str
    line: int
    text: str
    path: str
    start: int
    end: int
    revision: str | None
    names: tuple[str, ...]

    @property
    def extension(self) -> str:
        """``java``, ``scala``, ``py``, ``c``, ``md``...: which citations are Kafka's code."""
        return self.path.rsplit(".", 1)[-1]

    def __str__(self) -> str:
        at = f" at {self.revision}" if self.revision else ""
        return f"{self.document}:{self.line}: {self.path}:{self.start}-{self.end}{at}"


def _masked(text: str) -> str:
    """``text`` with the inside of every code span and quotation blanked, so that the
    punctuation in code or in a quoted sentence ends no sentence of the document."""

    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", "x", m[0])

    return _QUOTE.sub(blank, _SPAN.sub(blank, text))


def sentence_names(sentence: str) -> tuple[str, ...]:
    """The names a sentence gives in code spans, in order, without repeats: the last segment
    of a dotted (optionally called) name, or a whole configuration key; citations, paths and
    names under :data:`_MIN_NAME` characters are not names."""
    names: list[str] = []
    for span in _SPAN.finditer(sentence):
        code = " ".join(span[0][1:-1].split()).removesuffix("-*")  # `connection-close-*`
        if CITATION.fullmatch(span[0]) or "/" in code:
            continue
        qualified = ""
        if _KEY.match(code):
            name = code
        elif _DOTTED_NAME.match(code):
            qualified, _, name = code.split("(", 1)[0].rpartition(".")
        else:
            continue
        if (len(name) >= _MIN_NAME or qualified) and name not in names:
            names.append(name)
    return tuple(names)


def parse_citations(text: str, document: str) -> list[Citation]:
    """Every citation in ``text`` (a Markdown document named ``document``), in order, each
    with its resolved path, its release and its sentence's names.

    Raises :class:`SourcesError` for a continuation ```:N``` with no file before it."""
    masked = _masked(text)
    ends = [m.end() for m in _SENTENCE_END.finditer(masked)]
    declarations = [(m.start(), m["rev"]) for m in DECLARATION.finditer(text)]
    citations: list[Citation] = []
    last_path_by_name: dict[str, str] = {}
    current: tuple[str, str | None] | None = None  # the file a continuation cites, and when
    for m in CITATION.finditer(text):
        path, revision = m["path"], m["rev"]
        if path is None and m["start"] is None:
            continue  # an empty code span
        if path is None:
            if current is None:
                raise SourcesError(f"{document}: {m[0]!r} continues no citation")
            path, revision = current[0], revision or current[1]
        elif "/" in path:
            last_path_by_name[path.rsplit("/", 1)[-1]] = path
        else:
            path = last_path_by_name.get(path, path)
        declared = [rev for at, rev in declarations if at < m.start()]
        revision = revision or (declared[-1] if declared else None)
        current = (path, revision)
        if m["start"] is None:
            continue  # a file named without a line: only what later continuations cite
        start = int(m["start"])
        before = max((e for e in ends if e <= m.start()), default=0)
        after = min((e for e in ends if e > m.end()), default=len(text))
        citations.append(
            Citation(
                document=document,
                line=text.count("\n", 0, m.start()) + 1,
                text=m[0],
                path=path,
                start=start,
                end=int(m["end"]) if m["end"] else start,
                revision=revision,
                names=sentence_names(text[before:after]),
            )
        )
    return citations


def name_occurs(name: str, line: str) -> bool:
    """Whether ``name`` stands on ``line`` as a whole word (not inside a longer identifier).

    Two spellings of the same thing count too, because Kafka's code spells them so: a
    lower-case name also as its upper-case constant (``use_all_dns_ips``, ``USE_ALL_DNS_IPS``),
    and a configuration key as its literal text anywhere or as its ``_CONFIG`` constant
    (``connections.max.idle.ms``, ``CONNECTIONS_MAX_IDLE_MS_CONFIG``)."""
    if _KEY.match(name):
        if name in line:
            return True
        spellings = [name.replace(".", "_").replace("-", "_").upper() + "_CONFIG"]
    else:
        spellings = [name, name.upper()] if re.fullmatch(r"[a-z][a-z0-9_]*", name) else [name]
    return any(re.search(rf"(?<![\w$]){re.escape(s)}(?![\w$])", line) for s in spellings)


def check_citation(citation: Citation, release: Release) -> str | None:
    """None if ``citation`` holds in ``release``, else what is wrong: the file is missing,
    the range is out of the file, the sentence names nothing, or no name the sentence gives
    occurs within :data:`NEAR` lines of the range."""
    try:
        source = release.file(citation.path)
    except SourcesError as e:
        return str(e)
    if citation.end < citation.start or citation.end > len(source.lines):
        return f"lines {citation.start}-{citation.end}, but {source.entry} has {len(source.lines)}"
    if not citation.names:
        return "its sentence names no code (a `method`, `field` or `config.key`) to check"
    window = list(source.window(citation.start, citation.end))
    if any(name_occurs(n, line) for n in citation.names for _, line in window):
        return None
    shown = "\n".join(f"  {n:>5}: {line}" for n, line in window)
    return f"none of {list(citation.names)} is within {NEAR} lines of the range:\n{shown}"


def checked(citations: list[Citation]) -> list[Citation]:
    """The citations of Kafka's sources (:data:`CHECKED_EXTENSIONS`)."""
    return [c for c in citations if c.extension in CHECKED_EXTENSIONS]


def malformed(text: str) -> list[str]:
    """The code spans of ``text`` that name a line of a Kafka source but are no citation
    :data:`CITATION` reads (``ApiVersions.java:51,60``), so no check would see them."""
    cited = re.compile(r"\.(?:" + "|".join(sorted(CHECKED_EXTENSIONS)) + r"):")
    return [m[0] for m in _SPAN.finditer(text) if cited.search(m[0]) and not CITATION.match(m[0])]


def main(argv: list[str] | None = None) -> int:
    """``python -m connmgr_evidence.java.sources DOC.md...``: check every citation of Kafka's
    sources
    (fetching the jars it needs) and print the ones that fail; exit 1 if any does."""
    releases: dict[str, Release] = {}
    failures = 0
    for name in argv if argv is not None else sys.argv[1:]:
        for c in checked(parse_citations(Path(name).read_text(encoding="utf-8"), name)):
            if c.revision is None or not RELEASE.match(c.revision):
                problem: str | None = f"cited at {c.revision!r}, not a release"
            else:
                release = releases.setdefault(c.revision, Release(c.revision))
                problem = check_citation(c, release)
            if problem is not None:
                failures += 1
                print(f"{c} {c.text}: {problem}")
    print(f"{failures} failing citation(s)", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
