"""``estimate jmx`` on a committed export whose figures are derived by hand.

``tests/fixtures/estimate/jmx-restart.csv``: two brokers sampled every 10 s from t=1000.
Broker 1 has one listener on two network processors (counts 10+10, totals only); broker 2
one listener already summed over its processors (rates given), plus a broker-wide row at
t=1000 (999) that must not count, as the listener row is there. Broker 2 is unreadable at
1030 (down) and back at 1040.

By hand:
* broker 1's connections 20, 20, 20, 60, 40, 40, 40: peak 60 at 1030; its rate from the
  totals, (72+72 - 22-22) / 10 s = 10.0/s at 1030, 0.2/s elsewhere: median 0.2, threshold
  max(10, 5 x 0.2) = 10, so 1030 alone is a storm (rate >= threshold), 10/s x 10 s = 100
  connections created;
* broker 2's connections 40, 40, 40, down, 30, 45, 45: peak 45 first at 1050; rates 0.5,
  0.5, 0.5, 3, 12, 0.5 (median 0.5, threshold 10): 1050 alone is a storm, 12 x 10 s = 120;
* one restart: broker 2, down at 1030, back at 1040; both storms meet it (broker 1's during
  the outage, broker 2's 10 s after it is back, within the 120-s window);
* the cluster, each broker's latest count summed (a down broker 0): 60, 60, 60, 60, 70, 85,
  85: peak 85 at 1050.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connmgr_evidence.estimate import jmx
from connmgr_evidence.estimate.jmx_export import ExportError, parse_export, read_export

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "estimate" / "jmx-restart.csv"


def test_hand_derived_peaks_restarts_and_storms() -> None:
    out = jmx.analyse(read_export(FIXTURE))
    assert out["brokers"][1]["peak_connections"] == 60
    assert out["brokers"][1]["at"] == 1030
    assert out["brokers"][2]["peak_connections"] == 45
    assert out["brokers"][2]["at"] == 1050
    assert out["cluster"] == {"peak_connections": 85, "at": 1050}
    assert out["restarts"] == [{"broker": 2, "down_s": 1030.0, "back_s": 1040.0}]
    storms = [
        (s["broker"], s["start_s"], s["end_s"], s["samples"], s["peak_rate"], s["created"])
        for s in out["storms"]
    ]
    assert storms == [
        (1, 1030, 1030, 1, pytest.approx(10.0), pytest.approx(100.0)),
        (2, 1050, 1050, 1, 12.0, 120.0),
    ]
    assert all(s["restart"]["broker"] == 2 for s in out["storms"])


def test_a_higher_floor_leaves_only_the_return_storm() -> None:
    out = jmx.analyse(read_export(FIXTURE), min_rate=11.0)
    assert [s["broker"] for s in out["storms"]] == [2]


def test_json_export_reads_as_the_csv() -> None:
    rows = read_export(FIXTURE)
    as_json = json.dumps(
        {
            "samples": [
                {
                    "time": r.t_s,
                    "broker": r.broker,
                    "listener": r.listener,
                    "network_processor": r.processor or None,
                    "connection_count": r.count,
                    "connection_creation_rate": r.rate,
                    "connection_creation_total": r.total,
                    "up": r.up,
                }
                for r in rows
            ]
        }
    )
    again = jmx.analyse(parse_export(as_json, "x.json", json_format=True))
    first = jmx.analyse(rows)
    assert again["brokers"] == first["brokers"]
    assert again["storms"] == first["storms"]


def test_csv_round_trip_keeps_every_count(tmp_path: Path) -> None:
    rows = read_export(FIXTURE)
    copy = tmp_path / "copy.csv"
    jmx.write_csv(rows, copy)
    assert jmx.analyse(read_export(copy))["series"] == jmx.analyse(rows)["series"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "time,broker,connection_count\n1000,1,5\n1010,x,5\n",
            "x.csv:3: broker: expected an integer",
        ),
        (
            "time,broker,connection_count\n1000,1,-5\n",
            "x.csv:2: connection_count: expected a number >= 0",
        ),
        ("time,broker,conns\n", "x.csv:1: unknown column 'conns'"),
        ("time,broker\n", "x.csv:1: connection_count: missing column"),
        ("time,broker,connection_count\nyesterday,1,5\n", "x.csv:2: time: expected ISO-8601"),
        ("time,broker,connection_count\n1000,1,\n", "x.csv:2: connection_count: missing"),
    ],
)
def test_bad_exports_name_file_line_and_field(text: str, message: str) -> None:
    with pytest.raises(ExportError) as info:
        parse_export(text, "x.csv")
    assert message in str(info.value)


def test_cli_prints_and_exits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert jmx.main([str(FIXTURE), "--no-predict"]) == 0
    text = capsys.readouterr().out
    assert "broker 2: down at 30 s, back at 40 s" in text
    bad = tmp_path / "bad.csv"
    bad.write_text("time,broker,connection_count\n1000,1,five\n")
    assert jmx.main([str(bad)]) == 2
    assert f"{bad}:2: connection_count" in capsys.readouterr().err


def test_prediction_with_a_fleet_description(capsys: pytest.CaptureFixture[str]) -> None:
    fleet = Path(__file__).resolve().parents[2] / "examples" / "fleet-stage-steady.toml"
    assert jmx.main([str(FIXTURE), "--json", "--fleet", str(fleet), "--today", "java-today"]) == 0
    out = json.loads(capsys.readouterr().out)
    p = out["prediction"]
    assert p["mix"].startswith("from ")
    # reports/workloads: steady, 3 brokers: java-today 38,999 cluster-wide, proposed 27,000.
    assert p["models"]["java-today"]["cluster_peak_connections"] == 38_999
    assert p["models"]["proposed"]["cluster_peak_connections"] == 27_000


def test_a_counter_reset_is_a_restart_and_its_new_total_what_it_created() -> None:
    # Broker 1: total 100, then 20 ten seconds later with no unreadable sample between: a
    # new JVM that has created 20 since (2.0/s over the 10 s). Broker 2: total 100, down,
    # then 30: 30 created over the 20 s since its last readable sample (1.5/s).
    text = (
        "time,broker,listener,connection_count,connection_creation_total,up\n"
        "1000,1,PLAINTEXT,5,100,true\n"
        "1010,1,PLAINTEXT,5,20,true\n"
        "1000,2,PLAINTEXT,5,100,true\n"
        "1010,2,,,,false\n"
        "1020,2,PLAINTEXT,5,30,true\n"
    )
    out = jmx.analyse(parse_export(text, "reset.csv"))
    assert out["brokers"][1]["peak_creation_rate"] == 2.0
    assert out["brokers"][2]["peak_creation_rate"] == 1.5
    assert out["restarts"] == [
        {"broker": 1, "down_s": 1000.0, "back_s": 1010.0},
        {"broker": 2, "down_s": 1010.0, "back_s": 1020.0},
    ]
