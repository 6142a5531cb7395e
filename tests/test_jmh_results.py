"""The JMH runner's arithmetic (:mod:`connmgr_evidence.java.jmh`) on a tiny fixture: two rounds'
result
files pool into one estimate per case, the half-width is Student's t at 99.9 %, the ratios to
stock carry both ends' errors, and the report names the goal each variant is held to. The
runner itself (Maven, JMH, minutes of measurement) is not run here."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from connmgr_evidence.java.jmh import interleaved
from connmgr_evidence.java.jmhresults import (
    Case,
    Estimate,
    estimate,
    goal_for,
    parse_jmh_json,
    ratio,
    render_index,
    results_document,
    student_t_quantile,
    summarize,
)

FIXTURES = Path(__file__).parent / "fixtures" / "jmh"


def _samples() -> dict[tuple[Case, str], list[list[float]]]:
    samples: dict[tuple[Case, str], list[list[float]]] = {}
    for name in ("round1.json", "round2.json"):
        parse_jmh_json((FIXTURES / name).read_text(encoding="utf-8"), samples)
    return samples


def test_student_t_quantiles_match_the_tables() -> None:
    assert student_t_quantile(0.975, 10) == pytest.approx(2.228, abs=5e-4)
    assert student_t_quantile(0.9995, 5) == pytest.approx(6.869, abs=5e-4)
    assert student_t_quantile(0.9995, 14) == pytest.approx(4.140, abs=5e-4)


def test_two_rounds_pool_into_one_case_per_variant_with_every_fork() -> None:
    samples = _samples()
    stock = Case("poll", "1000/50", "stock")
    assert samples[(stock, "time")] == [[100.0, 102.0, 98.0], [100.0, 98.0, 102.0]]
    assert samples[(stock, "alloc")] == [[800.0] * 3, [800.0] * 3]
    assert {c.variant for c, _ in samples} == {"stock", "off"}


def test_estimate_is_the_pooled_mean_with_a_t_half_width() -> None:
    e = estimate([[100.0, 102.0, 98.0], [100.0, 98.0, 102.0]], "ns/op")
    # six samples: mean 100, sample variance 3.2, t(0.9995, 5) = 6.869
    assert (e.mean, e.samples, e.forks) == (100.0, 6, 2)
    assert e.error == pytest.approx(6.869 * math.sqrt(3.2 / 6), rel=1e-3)
    one = estimate([[5.0]], "B/op")
    assert one.mean == 5.0 and math.isnan(one.error)


def test_ratio_propagates_both_errors_and_survives_a_zero_numerator() -> None:
    r = ratio(Estimate(110.0, 11.0, 6, 2, "ns/op"), Estimate(100.0, 5.0, 6, 2, "ns/op"))
    assert r.value == pytest.approx(1.1)
    assert r.error == pytest.approx(1.1 * math.hypot(0.1, 0.05))
    zero = ratio(Estimate(0.0, 0.0, 6, 2, "B/op"), Estimate(800.0, 0.0, 6, 2, "B/op"))
    assert (zero.value, zero.error) == (0.0, 0.0)
    assert math.isnan(
        ratio(Estimate(0.0, 0.0, 6, 2, "B/op"), Estimate(0.0, 0.0, 6, 2, "B/op")).value
    )


def test_summary_gives_ratios_to_stock_for_the_other_variants_only() -> None:
    rows = summarize(_samples())
    assert [r.case.variant for r in rows] == ["stock", "off"]
    stock, off = rows
    assert stock.ratios == {}
    assert off.ratios["time"].value == pytest.approx(1.01)
    assert off.ratios["cpu"].value == pytest.approx(1.02)
    assert off.ratios["alloc"].value == pytest.approx(1.0)
    assert off.ratios["alloc"].error == 0.0


def test_goals_and_the_report() -> None:
    assert goal_for("off") == 1.02 and goal_for("on-0013") == 1.10 and goal_for("stock") is None
    rows = summarize(_samples())
    meta = {"date": "2026-11-29T00:00:00Z", "rounds": 2, "variants": {"stock": "s", "off": "o"}}
    index = render_index(rows, meta)
    assert "| 1000/50 | off | 101.0 ± " in index
    assert "| 1.020 ± 0.000 |" in index and "≤ 1.02" in index
    doc = results_document(rows, meta)
    assert doc["results"][1]["ratios_to_stock"]["cpu"]["value"] == pytest.approx(1.02)


def test_interleaving_rotates_the_first_variant_each_round() -> None:
    order = interleaved(["stock", "off", "on"], 2)
    assert order == [
        (0, "stock"),
        (0, "off"),
        (0, "on"),
        (1, "off"),
        (1, "on"),
        (1, "stock"),
    ]
