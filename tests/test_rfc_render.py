"""The RFC's renderer (:mod:`connmgr_evidence.bench.rfc`, :mod:`~connmgr_evidence.bench.rfc.values`,
:mod:`~connmgr_evidence.bench.rfc.report`) on a hand-built report whose numbers are known: every
rendered number and figure row is the one the report's table holds, formatted as the
report's Markdown tables format it, and nothing the figure leaves out shows.

``tests/test_rfc.py`` checks the committed RFC against its cited report; this checks that
rendering reads the right table, row and column in the first place.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from connmgr_evidence.bench import rfc
from connmgr_evidence.bench.rfc.values import REAL_POINTS

RUN = "20260101T000000Z-abc1234"
P, C = REAL_POINTS


def _real(point: str, scenario: str, baseline: str, mine: float, theirs: float) -> dict[str, Any]:
    """A real row of the sockets table: the proposal's counts ``mine`` (handshakes one less),
    the baseline's ``theirs``."""
    return {
        "kind": "real",
        "scenario": scenario,
        "brokers": 3,
        "point": point,
        "baseline": baseline,
        "repeats": 3,
        "opened_proposed": mine,
        "opened_baseline": theirs,
        "peak_proposed": mine,
        "peak_baseline": theirs,
        "steady_proposed": mine - 1.0,
        "steady_baseline": theirs - 1.0,
        "handshakes_proposed": mine + 1.0,
        "handshakes_baseline": theirs + 1.0,
        "peak_ratio": mine / theirs,
    }


def _headline(kind: str, baseline: str, peak_ratio: float, regressed: int) -> dict[str, Any]:
    return {
        "kind": kind,
        "baseline": baseline,
        "points": 8,
        "opened_ratio": 0.5,
        "peak_ratio": peak_ratio,
        "peak_ratio_worst": 0.75,
        "steady_ratio": 1.0,
        "ttfa_ms_ratio": None,
        "ttfc_ms_ratio": None,
        "throughput_rps_ratio": 1.019,
        "regressed_points": regressed,
    }


def _throughput(brokers: int, rtt: float, ratio: float, low: float) -> dict[str, Any]:
    return {
        "point": f"throughput-ab[brokers={brokers},records=500,rtt_ms={rtt}]",
        "baseline": "aiokafka",
        "throughput_rps_ratio": ratio,
        "throughput_rps_ratio_min": low,
    }


TABLES: dict[str, list[dict[str, Any]]] = {
    "sockets": [
        _real(P, "big-producer", "aiokafka", 4.0, 7.0),
        _real(P, "big-producer", "java-4.4.0", 4.0, 9.0),
        _real(C, "big-consumer", "aiokafka", 5.0, 6.0),
        _real(C, "big-consumer", "java-4.4.0", 5.0, 11.0),
        # Not a point the RFC shows: in no figure row, no value.
        _real(P.replace("rtt_ms=0.0", "rtt_ms=20.0"), "big-producer", "aiokafka", 40.0, 70.0),
    ],
    "headline": [
        _headline("real", "aiokafka", 4 / 7, 0),
        _headline("sim", "java-described", 0.123456, 1),  # history: left out of the figure
        _headline("sim", "java-today", 0.8181818, 2),
    ],
    "throughput": [
        _throughput(3, 0.0, 1.0194, 0.931),
        _throughput(3, 20.0, 0.9871, 0.5),
        _throughput(30, 0.0, 5.0, 5.0),  # brokers=30: not the RFC's 3-broker point
    ],
    "property-runs": [
        {"baseline": "java-today", "max_examples": 100, "step_count": 12, "examples": 100,
         "steps": 1180, "failures": 0},
        {"baseline": "aiokafka-today", "max_examples": 100, "step_count": 12, "examples": 97,
         "steps": 1100, "failures": 1},
    ],
    "mutants": [
        {"mutant": "m1", "expected": "a", "invariant": "a", "steps": 3, "examples": 5,
         "seconds": 0.5},
        {"mutant": "m2", "expected": "b", "invariant": None, "steps": 0, "examples": 100,
         "seconds": 12345.6},
        {"mutant": "m3", "expected": "c or d", "invariant": "d", "steps": 7, "examples": 2,
         "seconds": 1.25},
    ],
    "fleet": [
        {"policy": "proposed", "sockets_p99": 83, "sockets_max": 108},
        {"policy": "java-today", "sockets_p99": 100, "sockets_max": 4951},
    ],
    # Two regressions and a row a stated cost covers (rebalance against java-today, +1
    # opened), which the count leaves out.
    "regressions": [
        {"kind": "sim", "point": "a[]", "baseline": "java-today", "metric": "opened",
         "proposed": 5.0, "baseline_value": 4.0},
        {"kind": "sim", "point": "rebalance[]", "baseline": "java-today", "metric": "opened",
         "proposed": 13.0, "baseline_value": 12.0},
        {"kind": "sim", "point": "b[]", "baseline": "aiokafka-today", "metric": "peak",
         "proposed": 3.0, "baseline_value": 2.0},
    ],
}  # fmt: skip

INDEX = """# Benchmark report

## Sweep: how the run time scales with the grid

| grid points | wall time (s) |
|---:|---:|
| 500 | 8.4 |

## Grid

not this section
"""

TEXT = """# The RFC
<!-- report: reports/20250101T000000Z-old -->
Peaks at 3 brokers: proposed <!--v:real.proposed.big-producer.peak-->9<!--/v-->, aiokafka
<!--v:real.aiokafka.big-producer.peak-->9<!--/v-->; the consumer against 4.4.0:
{{real.java-4.4.0.big-consumer.peak}} (proposed {{real.proposed.big-consumer.peak}}).
Peak ratio <!--v:headline.real.aiokafka.peak_ratio-->9<!--/v-->, sim against java-today
<!--v:headline.sim.java-today.peak_ratio-->9<!--/v-->.
Throughput <!--v:throughput.rtt0.ratio-->9<!--/v--> (at worst
<!--v:throughput.rtt0.ratio_min-->9<!--/v-->), at 20 ms <!--v:throughput.rtt20.ratio-->9<!--/v-->.
Deep: <!--v:deep.examples-->9<!--/v--> examples, <!--v:deep.steps-->9<!--/v--> steps,
<!--v:deep.failures-->9<!--/v--> failures, <!--v:properties.max_examples-->9<!--/v--> x
<!--v:properties.step_count-->9<!--/v-->; <!--v:mutants.caught-->9<!--/v--> of
<!--v:mutants.count-->9<!--/v--> mutants caught. <!--v:regressions.count-->9<!--/v--> regressions.
Fleet: <!--v:fleet.clients-->9<!--/v--> clients, <!--v:fleet.brokers-->9<!--/v--> brokers,
<!--v:fleet.wall_s-->9<!--/v--> s; p99 <!--v:fleet.proposed.sockets_p99-->9<!--/v--> against
<!--v:fleet.java-today.sockets_p99-->9<!--/v-->.
Report <!--v:report.run_id-->9<!--/v-->.

![sockets](../reports/20250101T000000Z-old/plots/sockets-vs-brokers.png)

<!-- fig:real-sockets -->
<!-- fig:sockets-headline -->
| stale | table |
<!-- /fig:sockets-headline -->
<!-- fig:mutants-caught -->
<!-- fig:sweep-scaling -->
The end.
"""

VALUES = {
    "real.proposed.big-producer.peak": "4",
    "real.aiokafka.big-producer.peak": "7",
    "real.java-4.4.0.big-consumer.peak": "11",
    "real.proposed.big-consumer.peak": "5",
    "headline.real.aiokafka.peak_ratio": "0.5714",
    "headline.sim.java-today.peak_ratio": "0.8182",
    "throughput.rtt0.ratio": "1.019",
    "throughput.rtt0.ratio_min": "0.931",
    "throughput.rtt20.ratio": "0.9871",
    "deep.examples": "197",
    "deep.steps": "2280",
    "deep.failures": "1",
    "properties.max_examples": "100",
    "properties.step_count": "12",
    "mutants.caught": "2",
    "mutants.count": "3",
    "regressions.count": "2",
    "fleet.clients": "10000",
    "fleet.brokers": "1000",
    "fleet.wall_s": "183",
    "fleet.proposed.sockets_p99": "83",
    "fleet.java-today.sockets_p99": "100",
    "report.run_id": RUN,
}

FIGURES = {
    "real-sockets": f"""| scenario | client | opened | peak | steady | handshakes |
|---|---|---:|---:|---:|---:|
| big-producer | proposed | 4 | 4 | 3 | 5 |
| big-producer | aiokafka | 7 | 7 | 6 | 8 |
| big-producer | java-4.4.0 | 9 | 9 | 8 | 10 |
| big-consumer | proposed | 5 | 5 | 4 | 6 |
| big-consumer | aiokafka | 6 | 6 | 5 | 7 |
| big-consumer | java-4.4.0 | 11 | 11 | 10 | 12 |

*Source: `reports/{RUN}/tables/sockets.md`, points `{P}`, `{C}`; medians over repeats.*""",
    "sockets-headline": "| kind | baseline | points | opened_ratio | peak_ratio "
    + f"""| peak_ratio_worst | steady_ratio | ttfa_ms_ratio | ttfc_ms_ratio | throughput_rps_ratio \
| regressed_points |
|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|
| real | aiokafka | 8 | 0.5 | 0.5714 | 0.75 | 1 | — | — | 1.019 | 0 |
| sim | java-today | 8 | 0.5 | 0.8182 | 0.75 | 1 | — | — | 1.019 | 2 |

*Source: `reports/{RUN}/tables/headline.md` (java-described, the articles' model, is \
history: its rows are in the report).*""",
    "mutants-caught": f"""| mutant | expected | invariant | steps | examples | seconds |
|---|---|---|---:|---:|---:|
| m1 | a | a | 3 | 5 | 0.5 |
| m2 | b | — | 0 | 100 | 12,346 |
| m3 | c or d | d | 7 | 2 | 1.25 |

*Source: `reports/{RUN}/tables/mutants.md`.*""",
    "sweep-scaling": f"""| grid points | wall time (s) |
|---:|---:|
| 500 | 8.4 |

*Source: `reports/{RUN}/index.md`.*""",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("checkout")
    report = root / "reports" / RUN
    (report / "tables").mkdir(parents=True)
    (report / "raw").mkdir()
    for name, rows in TABLES.items():
        pq.write_table(pa.Table.from_pylist(rows), report / "tables" / f"{name}.parquet")
    settings = {"clients": 10_000, "brokers": 1_000, "restarts": 10}
    (report / "raw" / "fleet.json").write_text(json.dumps({"settings": settings, "wall_s": 182.6}))
    (report / "index.md").write_text(INDEX)
    (root / "proposal").mkdir()
    return rfc.render(TEXT, report, root / "proposal" / "rfc.md")


def test_every_number_is_the_one_its_table_holds(rendered: str) -> None:
    found = re.findall(r"<!--v:([\w.-]+)-->(.*?)<!--/v-->", rendered)
    assert dict(found) == VALUES
    assert len(found) == TEXT.count("<!--v:") + TEXT.count("{{")
    assert "{{" not in rendered


def test_every_figure_shows_its_rows_and_names_its_source(rendered: str) -> None:
    found = dict(re.findall(r"<!-- fig:([\w.-]+) -->\n(.*?)\n<!-- /fig:\1 -->", rendered, re.S))
    assert found == FIGURES
    assert "stale" not in rendered and "not this section" not in rendered
    assert rendered.endswith("\nThe end.\n")


def test_the_cited_report_and_plot_paths_follow_the_report(rendered: str) -> None:
    assert rfc.cited_report(rendered) == RUN
    assert f"![sockets](../reports/{RUN}/plots/sockets-vs-brokers.png)" in rendered
    assert "20250101T000000Z-old" not in rendered
