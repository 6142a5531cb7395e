"""The typed aggregates between the comparison's stages: a Spark row becomes a value and
back without losing or renaming a column, and the old import paths still name the same
objects."""

from __future__ import annotations

from typing import Any

from connmgr_evidence.bench.report import compare
from connmgr_evidence.bench.report.metrics import RULED_METRICS
from connmgr_evidence.bench.report.summaries import PairSummary, RoleSockets, regressions_of
from connmgr_evidence.bench.report.tables import (
    COMPARISON_COLUMNS,
    life_costs_table,
    life_table,
    roles_table,
)
from connmgr_evidence.bench.results.schema import LIFE_COLUMNS


def comparison_record(**worse: bool) -> dict[str, Any]:
    """A row as ``pair_summary`` returns it, every value distinct."""
    row: dict[str, Any] = {}
    for i, (name, _) in enumerate(COMPARISON_COLUMNS):
        row[name] = float(i) if name.endswith(("_ratio", "_min", "_max", "_proposed")) else i
    row |= {
        "kind": "sim",
        "scenario": "s",
        "point": "p",
        "subject": "proposed",
        "baseline": "b",
        "client": "producer",
        "coordinator_shared": False,
        "idle_disabled": True,
        "regressed": any(worse.values()),
    }
    row |= {f"worse_{m}": worse.get(m, False) for m in RULED_METRICS}
    return row


def test_a_pair_summary_keeps_every_comparison_column() -> None:
    record = comparison_record(peak=True, throughput_rps=True)
    summary = PairSummary.from_record(record)
    assert summary.worse == ("peak", "throughput_rps")
    assert summary.record() == record
    assert list(summary.record()) == [n for n, _ in COMPARISON_COLUMNS]


def test_regressions_from_values_and_from_mappings_agree() -> None:
    record = comparison_record(steady=True, ttfa_ms=True)
    from_map = regressions_of([record], 0.25)
    assert from_map == regressions_of([PairSummary.from_record(record)], 0.25)
    assert [r.metric for r in from_map] == ["steady", "ttfa_ms"]
    assert from_map[0].proposed == record["steady_proposed"]


def test_role_sockets_flatten_to_the_role_table_columns() -> None:
    record = {
        "kind": "sim",
        "scenario": "s",
        "point": "p",
        "policy": "proposed",
        "brokers": 3,
        "repeats": 2,
        **{f"{w}_{r}": 1.0 for w in ("opened", "steady") for r in ("bootstrap", "data")},
        "opened_coordination": None,
        "steady_coordination": None,
    }
    life = {c: float(i) for i, c in enumerate(LIFE_COLUMNS)}
    roles = RoleSockets.from_record({**record, **life})
    assert roles.opened["coordination"] is None
    (row,) = roles_table([roles]).records()
    assert row == record
    (row,) = life_table([roles]).records()
    assert row == {**{k: record[k] for k in row if k in record}, **life}


def test_life_costs_list_each_life_metric_the_proposal_spends_more_on() -> None:
    """A simulated pair whose proposed socket-seconds exceed the baseline's is listed with
    the roles that differ; handshakes equal: not listed; a real pair: never listed."""
    record = comparison_record()
    record |= {"socket_s_per_h_proposed": 7200.0, "socket_s_per_h_baseline": 3600.0}
    record |= {"handshakes_per_h_proposed": 4.0, "handshakes_per_h_baseline": 4.0}
    pair = PairSummary.from_record(record)
    base = {"kind": "sim", "scenario": "s", "point": "p", "brokers": 3, "repeats": 2}
    opened = {f"{w}_{r}": 1.0 for w in ("opened", "steady") for r in ("bootstrap", "data")}
    opened |= {"opened_coordination": 1.0, "steady_coordination": 1.0}

    def roles(policy: str, data: float, coordination: float) -> RoleSockets:
        life = dict.fromkeys(LIFE_COLUMNS, 0.0)
        life |= {"socket_s_per_h_data": data, "socket_s_per_h_coordination": coordination}
        return RoleSockets.from_record({**base, "policy": policy, **opened, **life})

    both = [roles("proposed", 3600.0, 3600.0), roles("b", 3600.0, 0.0)]
    (row,) = life_costs_table([pair], both).records()
    assert (row["metric"], row["excess"], row["where"]) == (
        "socket_s_per_h",
        3600.0,
        "coordination +3,600",
    )
    real = PairSummary.from_record({**record, "kind": "real"})
    assert life_costs_table([real], both).rows == ()
    cheaper = PairSummary.from_record({**record, "socket_s_per_h_proposed": 3600.0})
    assert life_costs_table([cheaper], both).rows == ()
    # A fraction of a socket-second is two policies dialling a few events apart: no cost.
    noise = PairSummary.from_record({**record, "socket_s_per_h_proposed": 3600.5})
    assert life_costs_table([noise], both).rows == ()


def test_the_comparison_s_names_are_those_of_its_stages() -> None:
    assert compare.load_results.__module__ == "connmgr_evidence.bench.report.load"
    assert compare.pair_summary.__module__ == "connmgr_evidence.bench.report.aggregation"
    for name in compare.__all__:
        assert getattr(compare, name) is not None, name


def test_the_headline_leads_with_todays_clients_and_the_client_hour() -> None:
    """java-described is history: its sentence comes after today's baselines whatever the
    alphabet says; each sentence starts with the per-client-hour ratios where measured."""
    from connmgr_evidence.bench.report.page import headline_markdown
    from connmgr_evidence.bench.report.table import make_table
    from connmgr_evidence.bench.report.tables import decision_table, headline_table, simulator_table

    columns = headline_table([]).columns

    def row(baseline: str, life: float | None) -> dict[str, Any]:
        r: dict[str, Any] = {n: 1.0 for n, _ in columns}
        r |= {"kind": "sim", "baseline": baseline, "points": 3, "regressed_points": 0}
        r |= {"ttfa_ms_ratio": None, "ttfc_ms_ratio": None, "throughput_rps_ratio": None}
        r |= {"socket_s_per_h_ratio": life, "handshakes_per_h_ratio": life}
        return r

    rows = [row("aiokafka-today", 0.5), row("java-described", 0.25), row("java-today", None)]
    table = make_table("headline", "t", "d", columns, rows)
    text = headline_markdown(table, decision_table(()), simulator_table(()))
    sentences = [line for line in text.splitlines() if line.startswith("- **")]
    assert [s.split("against ")[1].split("**")[0] for s in sentences] == [
        "aiokafka-today",
        "java-today",
        "java-described",
    ]
    assert "history" in sentences[2] and "history" not in sentences[0]
    assert sentences[0].split(": ", 1)[1].startswith("socket-seconds per client-hour 0.5")
    assert sentences[1].split(": ", 1)[1].startswith("peak sockets 1")
