"""The RFC's figures, generated from a benchmark report (``python -m connmgr_evidence.bench.rfc``).

Every measured number in ``proposal/rfc.md``, in its appendices (``docs/rfc-appendix-*.md``,
:func:`appendices`) and in the other proposals sits between markers this module owns, so it
is regenerated, never typed:

- a figure (a table) is the text between ``<!-- fig:NAME -->`` and ``<!-- /fig:NAME -->``;
- a number in a sentence is ``<!--v:NAME-->VALUE<!--/v-->`` (HTML comments do not render,
  so the RFC reads as plain Markdown);
- the report the RFC cites is named once, ``<!-- report: reports/RUN-ID -->``, and every plot
  path ``../reports/RUN-ID/plots/...`` follows it.

:func:`render` fills all of them from one report directory (``OUT/<run-id>``); the main job
calls :func:`refresh` after a run into the checkout's ``reports/``. A figure's source is a
report table (``tables/NAME.parquet``, formatted as the report's own Markdown tables format
it), except those that come from the code or the repository: the connection state table
(:func:`connmgr.core.state.transitions_markdown`), the 2.1.0 claim table
(``docs/java-2.1.0-claims.md``) and the stated costs (:data:`connmgr.costs.STATED_COSTS`,
measured from the report's ``comparison`` table, so that a report written before its
``stated-costs`` table existed gives them too). The ``regressions`` figure leaves out the
rows a stated cost covers, as the comparison now does (:mod:`connmgr_evidence.bench.report.stated`).
``tests/test_rfc.py`` fails if the committed RFC differs from what its cited report gives.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from connmgr_evidence.bench.report.stated import stated_costs_table
from connmgr_evidence.bench.report.table import format_cell, markdown_table
from connmgr_evidence.bench.results.schema import ColumnType, ResultsError
from connmgr_evidence.bench.rfc.report import REPORTS as REPORTS
from connmgr_evidence.bench.rfc.report import RFC as RFC
from connmgr_evidence.bench.rfc.report import ROOT, Report, RfcError, latest_report
from connmgr_evidence.bench.rfc.values import REAL_POINTS as REAL_POINTS
from connmgr_evidence.bench.rfc.values import VALUES as VALUES
from connmgr_evidence.bench.rfc.values import is_stated

CLAIMS = ROOT / "docs" / "java-2.1.0-claims.md"

_FIG = re.compile(r"<!-- fig:([\w.-]+) -->\n(?:.*?<!-- /fig:\1 -->\n)?", re.S)
_VALUE = re.compile(r"<!--v:([\w.-]+)-->.*?<!--/v-->|\{\{([\w.-]+)\}\}")
_REPORT = re.compile(r"<!-- report: (\S+) -->")
_PLOT = re.compile(r"\.\./reports/[^/\s)]+/plots/")


# --------------------------------------------------------------------------- fragments


def _table(
    report: Report,
    table: str,
    columns: str,
    *,
    keep: Callable[[Mapping[str, Any]], bool] = lambda _: True,
    note: str = "",
) -> str:
    """``columns`` (space-separated) of ``table``'s rows that ``keep`` keeps, and its source."""
    types = report.types(table)
    cols = columns.split()
    numeric = (ColumnType.LONG, ColumnType.DOUBLE)
    lines = [
        "| " + " | ".join(cols) + " |",
        "|" + "|".join("---:" if types[c] in numeric else "---" for c in cols) + "|",
    ]
    rows = [r for r in report.rows(table) if keep(r)]
    lines += ["| " + " | ".join(format_cell(r[c], types[c]) for c in cols) + " |" for r in rows]
    body = "\n".join(lines) if rows else "None."
    source = f"*Source: `reports/{report.run_id}/tables/{table}.md`{note}.*"
    return f"{body}\n\n{source}"


def _real_at(point_prefix: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda r: r["kind"] == "real" and str(r["point"]).startswith(point_prefix)


NAMED = (
    "seed-producer",
    "seed-consumer",
    "k8s-endpoint-change",
    "shared-endpoint",
    "idle-disabled",
)


HISTORY = ("java-described",)
"""Baselines the headline figures leave out: the 2018-2019 articles' model, which the real
2.1.0 client already contradicts; the report keeps its rows and the Motivation shows it."""
_HISTORY_NOTE = " (java-described, the articles' model, is history: its rows are in the report)"

CHURN = ("rolling-restart", "reassignment", "rebalance", "short-lived", "ip-change")
"""The churn scenarios of the simulated grid (``connmgr.sim.churn``)."""

LINGER_SHOWN = (
    "k8s-endpoint-change",
    "rolling-restart",
    "reassignment",
    "rebalance",
    "rebalance rebalance_interval_ms=120000",
    "ip-change",
)
"""The linger stage's scenarios the RFC shows (those where a connection becomes unneeded;
the report's ``linger`` table has every one)."""


def _real_sockets(report: Report) -> str:
    """One row per (scenario, client) at :data:`REAL_POINTS`, the proposal first."""
    lines = [
        "| scenario | client | opened | peak | steady | handshakes |",
        "|---|---|---:|---:|---:|---:|",
    ]
    types = report.types("sockets")
    for point in REAL_POINTS:
        rows = [r for r in report.rows("sockets") if r["kind"] == "real" and r["point"] == point]
        if not rows:
            raise RfcError(f"{report.path}/tables/sockets: no real rows at {point}")
        metrics = ("opened", "peak", "steady", "handshakes")
        for client, side, row in [
            ("proposed", "proposed", rows[0]),
            *((r["baseline"], "baseline", r) for r in rows),
        ]:
            cells = [format_cell(row[f"{m}_{side}"], types[f"{m}_{side}"]) for m in metrics]
            lines.append(f"| {row['scenario']} | {client} | " + " | ".join(cells) + " |")
    return (
        "\n".join(lines)
        + f"\n\n*Source: `reports/{report.run_id}/tables/sockets.md`, points "
        + ", ".join(f"`{p}`" for p in REAL_POINTS)
        + "; medians over repeats.*"
    )


def _claims(_: Report) -> str:
    text = CLAIMS.read_text()
    table = "\n".join(line for line in text.splitlines() if line.startswith("|"))
    return (
        f"{table}\n\n*Source: `docs/java-2.1.0-claims.md` "
        "(`python -m connmgr_evidence.java.claims`).*"
    )


def _stated_costs(report: Report) -> str:
    """Every stated cost with its figures in the report (its ``comparison`` table)."""
    table = stated_costs_table(report.rows("comparison"))
    shown = ("scenario", "baseline", "metric", "stated_excess", "proposed", "baseline_value")
    keep = [i for i, (name, _) in enumerate(table.columns) if name in (*shown, "reason")]
    picked = replace(
        table,
        columns=tuple(table.columns[i] for i in keep),
        rows=tuple(tuple(row[i] for i in keep) for row in table.rows),
    )
    return (
        f"{markdown_table(picked)}\n\n*Source: `prototype/connmgr/costs.py` (`STATED_COSTS`); "
        f"`proposed` and `baseline_value` from `reports/{report.run_id}/tables/comparison.md` "
        "(kind `sim`, the scenario's point at its defaults).*"
    )


def _state_table(_: Report) -> str:
    from connmgr.core.state import transitions_markdown

    return f"{transitions_markdown()}\n\n*Source: `connmgr.core.state.TRANSITIONS`.*"


FIGURES: dict[str, Callable[[Report], str]] = {
    "java-2.1.0-claims": _claims,
    "state-table": _state_table,
    "real-sockets": _real_sockets,
    "real-sockets-by-role": lambda r: _table(
        r,
        "sockets-by-role",
        "scenario policy opened_bootstrap opened_data opened_coordination steady_bootstrap "
        "steady_data steady_coordination",
        keep=lambda row: row["kind"] == "real" and row["point"] in REAL_POINTS,
    ),
    "sockets-headline": lambda r: _table(
        r,
        "headline",
        "kind baseline points opened_ratio peak_ratio peak_ratio_worst steady_ratio "
        "ttfa_ms_ratio ttfc_ms_ratio throughput_rps_ratio regressed_points",
        keep=lambda row: row["baseline"] not in HISTORY,
        note=_HISTORY_NOTE,
    ),
    "regressions": lambda r: _table(
        r,
        "regressions",
        "kind point baseline metric proposed baseline_value ratio rule",
        keep=lambda row: not is_stated(row),
        note=" (rows a stated cost covers left out: figure `stated-costs`)",
    ),
    "stated-costs": _stated_costs,
    "sim-named-scenarios": lambda r: _table(
        r,
        "sockets",
        "scenario baseline opened_proposed opened_baseline peak_proposed peak_baseline "
        "steady_proposed steady_baseline",
        keep=lambda row: row["kind"] == "sim" and row["scenario"] in NAMED,
    ),
    "latency-by-rtt": lambda r: _table(
        r,
        "latency",
        "metric scenario rtt_ms baseline repeats proposed_ms baseline_ms ratio ratio_min ratio_max",
        keep=lambda row: (
            "[brokers=3," in str(row["point"])
            # The proposal's rows: a report since the Java pair also has the patched client's.
            and row.get("subject", "proposed") == "proposed"
        ),
        note=", 3-broker points (every point is in that table)",
    ),
    "throughput-ab": lambda r: _table(
        r,
        "throughput",
        "point baseline repeats throughput_rps_proposed throughput_rps_baseline "
        "throughput_rps_ratio throughput_rps_ratio_min throughput_rps_ratio_max",
    ),
    "sweep-savings": lambda r: _table(
        r,
        "sweep-savings",
        "baseline brokers points opened_saving peak_saving steady_saving regressed_points",
    ),
    "life-headline": lambda r: _table(
        r,
        "headline",
        "kind baseline points socket_s_per_h_ratio handshakes_per_h_ratio opened_ratio "
        "peak_ratio steady_ratio regressed_points",
        keep=lambda row: row["kind"] != "real" and row["baseline"] not in HISTORY,
        note=" (kind `real`, whose horizon is a run's seconds of start-up, left out;"
        + " "
        + _HISTORY_NOTE[2:],
    ),
    "churn-scenarios": lambda r: _table(
        r,
        "sockets",
        "scenario baseline opened_proposed opened_baseline peak_proposed peak_baseline "
        "steady_proposed steady_baseline",
        keep=lambda row: (
            row["kind"] == "sim" and row["scenario"] in CHURN and row["baseline"] not in HISTORY
        ),
        note=_HISTORY_NOTE,
    ),
    "life-costs": lambda r: _table(
        r,
        "life-costs",
        "point baseline metric proposed baseline_value excess where",
    ),
    "linger-tradeoff": lambda r: _table(
        r,
        "linger",
        "scenario setting socket_s_per_h handshakes_per_h opened steady stale_wait_ms",
        keep=lambda row: row["scenario"] in LINGER_SHOWN,
        note=" (the scenarios where a connection becomes unneeded; every one is there)",
    ),
    "fleet": lambda r: _table(
        r,
        "fleet",
        "policy sockets_mean sockets_p50 sockets_p99 sockets_max handshakes "
        "handshakes_restart peak_per_s_restart calm_per_s peak_per_s refused",
    ),
    "tls-cost": lambda r: _table(
        r,
        "tls-cost",
        "protocol round_trips fixed_ms broker_cpu_ms cpu_connections setup_ms_at_20",
    ),
    "tls-first-ack": lambda r: _table(
        r,
        "tls-first-ack",
        "rtt_ms client starts acked ttfa_ms ttfa_ms_min ttfa_ms_max sockets ratio",
    ),
    "handshake-price": lambda r: _table(
        r,
        "handshake-price",
        "kind policy runs handshakes_per_h broker_cpu_ms_per_h setup_ms_per_h",
        keep=lambda row: row["policy"] != "java-described",
        note=" (java-described, the articles' model, is in the report)",
    ),
    "real-life": lambda r: _table(
        r,
        "real-life",
        "scenario client socket_s_per_h handshakes_per_h socket_s_per_h_ratio "
        "handshakes_per_h_ratio opened steady",
    ),
    "decision-cost": lambda r: _table(
        r, "decision-cost", "policy rounds decisions mean_us median_us min_us"
    ),
    "simulator-speed": lambda r: _table(
        r, "simulator-speed", "policy rounds events events_per_s events_per_s_median"
    ),
    "sweep-scaling": lambda r: (
        r.section("Sweep: how the run time scales with the grid")
        + f"\n\n*Source: `reports/{r.run_id}/index.md`.*"
    ),
    "mutants-caught": lambda r: _table(
        r, "mutants", "mutant expected invariant steps examples seconds"
    ),
    "deep-runs": lambda r: _table(
        r,
        "property-runs",
        "baseline max_examples step_count examples steps failures seconds result",
    ),
}


# --------------------------------------------------------------------------- render


def render(text: str, report_dir: Path, rfc_path: Path = RFC) -> str:
    """``text`` with every figure, value, the cited report and the plot paths taken from
    the report in ``report_dir``. Raises :class:`RfcError` for a marker this module does
    not know and for a figure the report cannot give."""
    report = Report(report_dir)
    unknown = sorted(
        {m.group(1) for m in _FIG.finditer(text)} - set(FIGURES)
        | {m.group(1) or m.group(2) for m in _VALUE.finditer(text)} - set(VALUES)
    )
    if unknown:
        raise RfcError(
            f"{rfc_path}: unknown markers {unknown}; known: see connmgr_evidence.bench.rfc"
        )

    def figure(m: re.Match[str]) -> str:
        name = m.group(1)
        return f"<!-- fig:{name} -->\n{FIGURES[name](report).rstrip()}\n<!-- /fig:{name} -->\n"

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return f"<!--v:{name}-->{VALUES[name](report)}<!--/v-->"

    relative = Path(os.path.relpath(report_dir.resolve(), rfc_path.resolve().parent)).as_posix()
    text = _FIG.sub(figure, text)
    text = _VALUE.sub(value, text)
    text = _REPORT.sub(f"<!-- report: reports/{report.run_id} -->", text)
    return _PLOT.sub(f"{relative}/plots/", text)


def cited_report(text: str) -> str:
    """The run id the RFC cites (``<!-- report: reports/RUN-ID -->``)."""
    match = _REPORT.search(text)
    if match is None:
        raise RfcError("the RFC names no report (a line `<!-- report: reports/RUN-ID -->`)")
    return Path(match.group(1)).name


def differences(text: str, report_dir: Path, rfc_path: Path = RFC) -> list[str]:
    """Every figure and value of ``text`` that differs from what the report gives."""
    want = render(text, report_dir, rfc_path)
    got_figs = {m.group(1): m.group(0) for m in _FIG.finditer(text)}
    want_figs = {m.group(1): m.group(0) for m in _FIG.finditer(want)}
    found = [f"figure {name}" for name in want_figs if got_figs.get(name) != want_figs[name]]
    got_values = [m.group(0) for m in _VALUE.finditer(text)]
    want_values = [m.group(0) for m in _VALUE.finditer(want)]
    found += [
        f"value {g} (report: {w})" for g, w in zip(got_values, want_values, strict=True) if g != w
    ]
    if not found and want != text:
        found.append("the cited report or a plot path")
    return found


APPENDIX_GLOB = "rfc-appendix-*.md"
"""The RFC's appendices, in ``docs/`` beside the RFC's folder: derivations, measurement
details and long tables that the RFC links instead of carrying."""


def appendices(rfc_path: Path = RFC) -> list[Path]:
    """The RFC's appendices (``docs/rfc-appendix-*.md`` of the checkout ``rfc_path`` is in),
    in name order; none for an RFC outside a checkout's ``proposal/`` folder."""
    return sorted((rfc_path.parent.parent / "docs").glob(APPENDIX_GLOB))


KIP_APPENDIX_GLOB = "kip-*-appendix.md"
"""Each KIP's appendix, in ``docs/`` beside the proposals' folder: what a KIP links instead of
carrying (derivations, measurements, history)."""


def kip_appendices(rfc_path: Path = RFC) -> list[Path]:
    """The KIPs' appendices (``docs/kip-*-appendix.md`` of the checkout ``rfc_path`` is in),
    in name order; none for an RFC outside a checkout's ``proposal/`` folder."""
    return sorted((rfc_path.parent.parent / "docs").glob(KIP_APPENDIX_GLOB))


def companions(rfc_path: Path = RFC) -> list[Path]:
    """The other documents that cite generated numbers: the proposals beside ``rfc_path``
    (``proposal/kip-*.md``, the FAQ, ...: every ``*.md`` there but the RFC and the README,
    which describes the markers), in name order, then the RFC's :func:`appendices`, then the
    KIPs' :func:`kip_appendices`. They name no report of their own: they are rendered from
    the one the RFC cites, so the family never mixes two runs, and a number moved from a
    document to its appendix stays checked. The RFC and its appendices together hold every
    figure and value this module knows (``tests/test_rfc.py``)."""
    beside = sorted(
        path
        for path in rfc_path.parent.glob("*.md")
        if path.name not in (rfc_path.name, "README.md")
    )
    return [
        path
        for path in (*beside, *appendices(rfc_path), *kip_appendices(rfc_path))
        if _VALUE.search(path.read_text()) or _FIG.search(path.read_text())
    ]


def refresh(report_dir: Path, rfc_path: Path = RFC) -> bool:
    """Rewrite ``rfc_path`` and its :func:`companions` from ``report_dir``; True if anything
    changed."""
    changed = False
    for path in (rfc_path, *companions(rfc_path)):
        text = path.read_text()
        new = render(text, report_dir, path)
        if new != text:
            path.write_text(new)
            changed = True
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.rfc",
        description="Fill the RFC's generated figures and numbers from a benchmark report "
        "(default: the newest run under reports/ that has a report).",
    )
    parser.add_argument("--report", type=Path, help="a report directory, OUT/<run-id>")
    parser.add_argument("--rfc", type=Path, default=RFC, help=f"the RFC (default: {RFC})")
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 and list what differs from the report the RFC cites",
    )
    args = parser.parse_args(argv)
    try:
        text = args.rfc.read_text()
        if args.check:
            report = args.report or REPORTS / cited_report(text)
            diff = [
                f"{path}: {line}"
                for path in (args.rfc, *companions(args.rfc))
                for line in differences(path.read_text(), report, path)
            ]
            for line in diff:
                print(line, file=sys.stderr)
            if diff:
                return 1
            checked = 1 + len(companions(args.rfc))
            print(f"{args.rfc}: {checked} files match {report}")
            return 0
        report = args.report or latest_report()
        changed = refresh(report, args.rfc)
    except (RfcError, ResultsError, OSError) as e:
        print(f"connmgr_evidence.bench.rfc: {e}", file=sys.stderr)
        return 2
    print(f"{args.rfc}: {'refreshed from' if changed else 'already matches'} {report}")
    return 0
