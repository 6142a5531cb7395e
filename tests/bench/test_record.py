"""The typed records declare a result's columns once: the table columns, a record built
from a flat row and flattened back all come from the fields' annotations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

import pytest

from connmgr_evidence.bench.report.summaries import PairSummary
from connmgr_evidence.bench.results.record import Count, Flags, Keyed, MaybeReal, Record, Text
from connmgr_evidence.bench.results.schema import (
    BOOL,
    COLUMNS,
    DOUBLE,
    LONG,
    PAIR_KEYS,
    POINT_PARAMS,
    STRING,
)


@dataclass(frozen=True, slots=True)
class Side(Record):
    low: MaybeReal
    high: MaybeReal


@dataclass(frozen=True, slots=True)
class Example(Record):
    name: Text
    count: Count
    sides: Annotated[Mapping[str, Side], Keyed(("a", "b"), "{}_", Side)]
    per: Annotated[Mapping[str, float | None], Keyed(("x",), "per_{}", DOUBLE)]
    worse: Annotated[tuple[str, ...], Flags(("a", "b"), "worse_{}")]


FLAT = {
    "name": "n",
    "count": 2,
    "a_low": 1.0,
    "a_high": 2.0,
    "b_low": None,
    "b_high": 4.0,
    "per_x": 0.5,
    "worse_a": False,
    "worse_b": True,
}


def test_columns_follow_the_fields_in_order() -> None:
    assert Example.columns() == (
        ("name", STRING),
        ("count", LONG),
        ("a_low", DOUBLE),
        ("a_high", DOUBLE),
        ("b_low", DOUBLE),
        ("b_high", DOUBLE),
        ("per_x", DOUBLE),
        ("worse_a", BOOL),
        ("worse_b", BOOL),
    )


def test_a_flat_row_becomes_a_record_and_back() -> None:
    example = Example.from_record({**FLAT, "ignored": 1})
    assert example.sides["b"] == Side(None, 4.0)
    assert example.worse == ("b",)
    assert example.record() == FLAT
    assert list(example.record()) == [n for n, _ in Example.columns()]


def test_pick_keeps_the_declared_types_and_names_a_missing_column() -> None:
    assert Example.pick("worse_b", "name") == (("worse_b", BOOL), ("name", STRING))
    with pytest.raises(KeyError, match="Example has no column"):
        Example.pick("nope")


def test_a_field_without_its_column_is_refused() -> None:
    @dataclass(frozen=True, slots=True)
    class Bare(Record):
        name: str

    with pytest.raises(TypeError, match=r"Bare\.name: annotate it"):
        Bare.columns()


def test_the_point_parameters_are_the_results_schema_s_and_the_comparison_s() -> None:
    by_name = {c.name: c.type for c in COLUMNS}
    compared = dict(PairSummary.columns())
    assert POINT_PARAMS == (
        "scenario",
        "client",
        "brokers",
        "bootstrap_size",
        "leaders",
        "coordinator_shared",
        "idle_disabled",
        "rtt_ms",
    )
    assert all(compared[p] == by_name[p] for p in POINT_PARAMS)
    assert PAIR_KEYS == ("kind", "point", "repeat")
