"""The patched-vs-stock report's arithmetic, on made-up runs (the runs themselves are tested
against the models in test_java_patched_vs_real.py)."""

from __future__ import annotations

import dataclasses

import pytest

from connmgr_evidence.bench.patchcompare import PATCHED, STOCK, Row, _order, render, summarise


def _row(variant: str, repeat: int, first_ms: float | None, **kw: object) -> Row:
    base = Row(
        tier="embedded",
        scenario="big-producer",
        variant=variant,
        repeat=repeat,
        brokers=1000,
        opened=5,
        peak=5,
        steady=5 if variant == STOCK else 3,
        bootstrap_closed=0 if variant == STOCK else 2,
        linger_closed=0,
        socket_s=8.0,
        handshakes=5,
        first_ms=first_ms,
        records_ok=True,
        model_sequence=True,
        model_counts=True,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_the_ratio_is_taken_per_interleaved_pair() -> None:
    rows = [
        _row(STOCK, 0, 100.0),
        _row(PATCHED, 0, 50.0),
        _row(PATCHED, 1, 300.0),
        _row(STOCK, 1, 100.0),
        _row(STOCK, 2, 400.0),
        _row(PATCHED, 2, 400.0),
    ]
    [line] = summarise(rows)
    # Per pair: 0.5, 3.0, 1.0 -> median 1.0; the ratio of the medians would be 300/100 = 3.
    assert (line["first_ratio"], line["first_ratio_min"], line["first_ratio_max"]) == (
        1.0,
        0.5,
        3.0,
    )
    assert line["pairs"] == 3
    assert (line["steady_stock"], line["steady_patched"]) == (5.0, 3.0)
    assert line["model_patched"] == "3/3 sequence, 3/3 counts"


def test_an_unpaired_run_gives_no_ratio() -> None:
    [line] = summarise([_row(STOCK, 0, 100.0), _row(PATCHED, 1, 50.0), _row(PATCHED, 0, None)])
    assert line["first_ratio"] is None and line["pairs"] == 0


def test_the_report_says_when_a_record_went_missing() -> None:
    rows = [_row(STOCK, 0, 1.0), _row(PATCHED, 0, 1.0, records_ok=False, model_counts=False)]
    text = render(
        summarise(rows), {"generated": "now", "repeats": 1, "seconds": 1.0, "commit": "x"}
    )
    assert "| embedded | big-producer | 1,000 | 5 / 5 | 5 / 5 | 5 / 3 | 0 / 2 | 0 / 0 |" in text
    assert "MISSING" in text and "1/1 sequence, 0/1 counts" in text


def test_counts_that_differ_between_runs_show_their_range() -> None:
    rows = [_row(STOCK, 0, 1.0), _row(STOCK, 1, 1.0, opened=6), _row(STOCK, 2, 1.0, opened=6)]
    rows += [_row(PATCHED, i, 1.0, linger_closed=i // 2) for i in range(3)]
    text = render(
        summarise(rows), {"generated": "now", "repeats": 3, "seconds": 1.0, "commit": "x"}
    )
    assert "| 1,000 | 6 (5-6) / 5 | 5 / 5 | 5 / 3 | 0 / 2 | 0 / 0 (0-1) |" in text


@pytest.mark.parametrize("repeats", [1, 4])
def test_each_variant_goes_first_in_half_the_pairs(repeats: int) -> None:
    order = list(_order(repeats))
    firsts = [order[i][1] for i in range(0, len(order), 2)]
    assert sorted(v for _, v in order) == sorted([STOCK, PATCHED] * repeats)
    assert firsts.count(STOCK) == (repeats + 1) // 2
