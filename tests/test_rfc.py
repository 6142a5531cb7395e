"""The RFC's figures are the report's: every generated table and number in proposal/rfc.md
and in its appendices (docs/rfc-appendix-*.md) equals what `python -m connmgr_evidence.bench.rfc`
makes from the report the RFC cites, and that report is the newest in reports/ (see
proposal/README.md)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from connmgr_evidence.bench import rfc
from connmgr_evidence.bench.results.schema import ResultsError

TEXT = rfc.RFC.read_text()
APPENDICES = rfc.appendices()
FAMILY = {path: path.read_text() for path in (rfc.RFC, *APPENDICES)}
"""The RFC and its appendices: together they hold every generated figure and number."""


def home(figure: str) -> Path:
    """The one file of :data:`FAMILY` that shows ``figure``."""
    (found,) = [p for p, text in FAMILY.items() if f"<!-- fig:{figure} -->" in text]
    return found


@pytest.fixture(scope="module")
def cited() -> Path:
    return rfc.REPORTS / rfc.cited_report(TEXT)


def test_the_rfc_cites_the_newest_report(cited: Path) -> None:
    assert (cited / "index.md").exists(), f"{cited}: the cited report is not in the checkout"
    assert rfc.latest_report() == cited, (
        f"the RFC cites {cited.name} but {rfc.latest_report().name} is newer: "
        "run `python -m connmgr_evidence.bench.rfc` (or `connmgr bench`) to refresh it"
    )


def test_every_figure_and_number_matches_the_cited_report(cited: Path) -> None:
    assert rfc.differences(TEXT, cited) == []


def test_every_companion_proposal_matches_the_rfcs_report(cited: Path) -> None:
    # The KIP family and the FAQ cite numbers by the same markers, from the same report.
    for path in rfc.companions():
        text = path.read_text()
        assert "<!-- report:" not in text, f"{path.name} names a report of its own"
        assert rfc.differences(text, cited, path) == [], path.name


def test_a_companion_with_a_stale_number_is_caught(cited: Path, tmp_path: Path) -> None:
    shutil.copy(rfc.RFC, tmp_path / "rfc.md")
    (tmp_path / "README.md").write_text("`<!--v:NAME-->` markers are described here")
    kip = tmp_path / "kip-x.md"
    kip.write_text("Ratio <!--v:headline.real.aiokafka.peak_ratio-->9<!--/v-->.\n")
    assert rfc.companions(tmp_path / "rfc.md") == [kip]
    assert rfc.differences(kip.read_text(), cited, kip) != []
    assert rfc.refresh(cited, tmp_path / "rfc.md")
    assert rfc.differences(kip.read_text(), cited, kip) == []


def test_a_kip_appendix_is_a_companion_and_a_stale_number_there_is_caught(
    cited: Path, tmp_path: Path
) -> None:
    (tmp_path / "proposal").mkdir()
    (tmp_path / "docs").mkdir()
    rfc_copy = tmp_path / "proposal" / "rfc.md"
    shutil.copy(rfc.RFC, rfc_copy)
    appendix = tmp_path / "docs" / "kip-x-appendix.md"
    appendix.write_text("Ratio <!--v:headline.real.aiokafka.peak_ratio-->9<!--/v-->.\n")
    (tmp_path / "docs" / "other.md").write_text(
        "<!--v:headline.real.aiokafka.peak_ratio-->9<!--/v-->"
    )
    assert rfc.companions(rfc_copy) == [appendix]
    assert rfc.differences(appendix.read_text(), cited, appendix) != []
    assert rfc.refresh(cited, rfc_copy)
    assert rfc.differences(appendix.read_text(), cited, appendix) == []


def test_every_generated_figure_and_number_is_in_the_rfc_or_an_appendix() -> None:
    assert APPENDICES, "the RFC has no appendix in docs/"
    figures: list[str] = []
    closed: list[str] = []
    values: set[str] = set()
    for path, text in FAMILY.items():
        figures += re.findall(r"<!-- fig:([\w.-]+) -->", text)
        closed += re.findall(r"<!-- /fig:([\w.-]+) -->", text)
        values |= set(re.findall(r"<!--v:([\w.-]+)-->", text))
        assert "{{" not in text, path.name
    # Each figure is shown once, in one file; a number may be cited wherever it is argued.
    assert sorted(figures) == sorted(closed) == sorted(set(figures)), figures
    assert set(figures) == set(rfc.FIGURES)
    assert values == set(rfc.VALUES)


def test_every_plot_the_rfc_and_its_appendices_show_exists() -> None:
    assert re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", TEXT), "the RFC shows no plot"
    for path, text in FAMILY.items():
        for plot in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text):
            assert (path.parent / plot).resolve().is_file(), f"{path.name}: {plot}"


def test_a_number_typed_over_is_caught(cited: Path) -> None:
    match = re.search(r"<!--v:(headline\.real\.aiokafka\.peak_ratio)-->([^<]*)<!--/v-->", TEXT)
    assert match is not None
    typed = TEXT.replace(match.group(0), f"<!--v:{match.group(1)}-->{match.group(2)}1<!--/v-->")
    found = rfc.differences(typed, cited)
    assert len(found) == 1 and match.group(1) in found[0], found


def test_a_table_cell_edited_by_hand_is_caught(cited: Path) -> None:
    path = home("sockets-headline")
    text = FAMILY[path]
    start = text.index("<!-- fig:sockets-headline -->")
    row = text.index("\n| ", text.index("|---", start))  # the first data row
    edited = text[: row + 3] + "x" + text[row + 3 :]
    assert rfc.differences(edited, cited, path) == ["figure sockets-headline"]


def test_an_unknown_marker_is_an_error(cited: Path) -> None:
    with pytest.raises(rfc.RfcError, match="unknown markers"):
        rfc.render(TEXT + "\n<!--v:no.such.value-->1<!--/v-->\n", cited)


def test_a_broken_report_table_names_the_file(cited: Path, tmp_path: Path) -> None:
    copy = tmp_path / cited.name
    shutil.copytree(cited / "tables", copy / "tables")
    shutil.copy(cited / "index.md", copy / "index.md")
    (copy / "tables" / "headline.parquet").write_bytes(b"not parquet")
    with pytest.raises(ResultsError, match=r"headline\.parquet"):
        rfc.render(TEXT, copy)
    (copy / "tables" / "headline.parquet").unlink()
    with pytest.raises(rfc.RfcError, match=r"headline.*no such table"):
        rfc.render(TEXT, copy)


def test_check_and_refresh_from_the_command_line(cited: Path, tmp_path: Path) -> None:
    copy = tmp_path / "rfc.md"
    stale = TEXT.replace(
        re.search(r"<!--v:deep\.steps-->[^<]*<!--/v-->", TEXT).group(0),  # type: ignore[union-attr]
        "<!--v:deep.steps-->0<!--/v-->",
    )
    copy.write_text(stale)
    assert rfc.main(["--rfc", str(copy), "--check", "--report", str(cited)]) == 1
    assert rfc.main(["--rfc", str(copy), "--report", str(cited)]) == 0
    assert rfc.main(["--rfc", str(copy), "--check", "--report", str(cited)]) == 0
    # The copy lives elsewhere: only its plot paths differ from the RFC's.
    assert rfc.differences(copy.read_text(), cited, copy) == []
