"""The workload classes' report: what each class's fleet costs its brokers under each client,
against the limits providers enforce, and what each KIP alone changes.

:func:`write_report` writes ``workloads.json`` (every cell: the run's settings and each
class x brokers x client's load) and ``index.md``; :func:`read_cells` reads the JSON back, so
the tables (and the RFC's summary block, :func:`rfc_summary`) are rendered from the committed
JSON alone.

Headroom (:func:`headroom`) is the largest fleet within a limit, scaled linearly from the
composed fleet: ``fleet x min(connections limit / peak connections, attempts limit / peak
attempts per second)``. Sums of independent clients grow linearly on average and their
peaks less than linearly, so the scaling errs on the small side.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.workloads.classes import CLASSES
from connmgr_evidence.bench.workloads.compose import JITTER_MS, BrokerLoad
from connmgr_evidence.bench.workloads.limits import (
    LIMITS,
    TLS_BYTES_PER_CONNECTION,
    TLS_SOURCE,
    ProviderLimit,
    Scope,
)
from connmgr_evidence.bench.workloads.run import Cell

JSON_FILE: Final = "workloads.json"
SUMMARY_BROKERS: Final = 6
"""The cluster size of the summary tables (every size is in the headroom table)."""
TODAY: Final = "java-today"
SUMMARY_CLIENTS: Final = ("java-today", "java-4.4", "proposed", "proposed-4.4")
KIP_ALONE: Final = (
    ("(b0) alone", "java-b0", TODAY),
    ("(b) rule 6 alone", "java-linger", TODAY),
    ("(b0) + rule 6 (the patch)", "java-patched", TODAY),
    ("the proposal, no KIP-1242", "proposed", TODAY),
    ("(d) on top (KIP-1242 brokers)", "proposed-4.4", "proposed"),
)
"""Each KIP's rows: (label, client, compared with)."""
METRICS: Final = (
    ("handshakes", "handshakes"),
    ("attempts", "attempts"),
    ("peak attempts/s", "peak_attempts"),
    ("peak conns", "peak_connections"),
    ("socket-s", "socket_seconds"),
)


@dataclass(frozen=True)
class Headroom:
    """The largest fleet within a limit, and which of its two caps binds first."""

    fleet: int
    binding: str
    """``connections`` or ``attempts/s``."""


def headroom(cell: Cell, limit: ProviderLimit) -> Headroom:
    """The largest fleet of ``cell``'s class within ``limit`` on ``cell``'s cluster: per
    broker for a per-broker limit, per eCKU (the whole cluster's) for a per-eCKU one."""
    load = cell.load
    if limit.scope is Scope.BROKER:
        conns, attempts = load.peak_connections, load.peak_attempts
    else:
        conns, attempts = load.cluster_peak_connections, load.cluster_peak_attempts
    by_conns = math.inf if conns == 0 else cell.fleet * limit.connections / conns
    by_attempts = math.inf if attempts == 0 else cell.fleet * limit.attempts_per_s / attempts
    if by_conns <= by_attempts:
        return Headroom(_whole(by_conns), "connections")
    return Headroom(_whole(by_attempts), "attempts/s")


def _whole(value: float) -> int:
    return -1 if math.isinf(value) else int(value)


def write_report(cells: Sequence[Cell], settings: Mapping[str, Any], out: Path) -> Path:
    """``out/workloads.json`` and ``out/index.md``; returns the Markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "settings": dict(settings),
        "cells": [
            {
                "workload": c.workload,
                "brokers": c.brokers,
                "client": c.client,
                "fleet": c.fleet,
                "cpu_s": round(c.cpu_s, 3),
                "load": asdict(c.load),
            }
            for c in cells
        ],
    }
    (out / JSON_FILE).write_text(json.dumps(data, indent=1) + "\n")
    index = out / "index.md"
    index.write_text(render_index(cells, settings))
    return index


def read_cells(path: Path) -> tuple[list[Cell], dict[str, Any]]:
    """The cells and settings :func:`write_report` wrote to ``path`` (``workloads.json``)."""
    data = json.loads(path.read_text())
    cells = [
        Cell(
            c["workload"],
            c["brokers"],
            c["client"],
            c["fleet"],
            BrokerLoad(**c["load"]),
            c["cpu_s"],
        )
        for c in data["cells"]
    ]
    return cells, data["settings"]


def _index(cells: Sequence[Cell]) -> dict[tuple[str, int, str], Cell]:
    return {(c.workload, c.brokers, c.client): c for c in cells}


def _n(value: float) -> str:
    """A figure as the tables print it: whole numbers with thousands separators, others to
    one decimal."""
    rounded = round(value, 1)
    if rounded == int(rounded):
        return f"{int(rounded):,}"
    return f"{rounded:,.1f}"


def _ratio(a: float, b: float) -> str:
    if b == 0:
        return "=" if a == 0 else "new"
    return f"{a / b:.2f}"


def _mib(connections: int) -> str:
    return f"{connections * TLS_BYTES_PER_CONNECTION / 2**20:,.0f} MiB"


def summary_table(cells: Sequence[Cell], brokers: int = SUMMARY_BROKERS) -> str:
    """Per class, today's Java clients against the proposal on ``brokers`` brokers: the
    busiest broker's peak connections and attempts per second, handshakes in the hour, its
    TLS memory, and the headroom under each provider limit."""
    by = _index(cells)
    limits = " | ".join(f"{lim.name} ({lim.scope.value})" for lim in LIMITS)
    lines = [
        f"| class (fleet) | client | peak conns / broker | peak attempts/s / broker (p99) "
        f"| handshakes / h | TLS memory / broker | headroom: {limits} |",
        "|---|---|---:|---:|---:|---:|" + "---:|" * len(LIMITS),
    ]
    for cls in CLASSES:
        for client in SUMMARY_CLIENTS:
            cell = by.get((cls.name, brokers, client))
            if cell is None:
                continue
            load = cell.load
            rooms = " | ".join(_room(headroom(cell, lim)) for lim in LIMITS)
            first = (
                f"{cls.name} ({cell.fleet:,} {cls.unit})" if client == SUMMARY_CLIENTS[0] else ""
            )
            lines.append(
                f"| {first} | {client} | {load.peak_connections:,} | "
                f"{load.peak_attempts:,} ({_n(load.p99_attempts)}) | {load.handshakes:,} | "
                f"{_mib(load.peak_connections)} | {rooms} |"
            )
    return "\n".join(lines) + "\n"


def _room(room: Headroom) -> str:
    if room.fleet < 0:
        return "no limit reached"
    return f"{room.fleet:,} ({'conns' if room.binding == 'connections' else 'att/s'})"


def headroom_table(cells: Sequence[Cell], clients: Sequence[str]) -> str:
    """The largest fleet per class, cluster size, client and limit."""
    by = _index(cells)
    sizes = sorted({c.brokers for c in cells})
    head = " | ".join(f"{lim.name}, {b} brokers" for lim in LIMITS for b in sizes)
    lines = [f"| class | client | {head} |", "|---|---|" + "---:|" * (len(LIMITS) * len(sizes))]
    for cls in CLASSES:
        for client in clients:
            row = []
            for lim in LIMITS:
                for b in sizes:
                    cell = by.get((cls.name, b, client))
                    row.append("" if cell is None else _room(headroom(cell, lim)))
            if any(row):
                lines.append(f"| {cls.name} | {client} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def kip_table(cells: Sequence[Cell], brokers: int = SUMMARY_BROKERS) -> str:
    """Each KIP alone, per class on ``brokers`` brokers: its client's figures over the
    client it is compared with (below 1: it saves)."""
    by = _index(cells)
    names = " | ".join(m for m, _ in METRICS)
    lines = [f"| class | KIP | vs | {names} |", "|---|---|---|" + "---:|" * len(METRICS)]
    for cls in CLASSES:
        for label, client, base in KIP_ALONE:
            a, b = by.get((cls.name, brokers, client)), by.get((cls.name, brokers, base))
            if a is None or b is None:
                continue
            ratios = " | ".join(_ratio(getattr(a.load, f), getattr(b.load, f)) for _, f in METRICS)
            lines.append(f"| {cls.name} | {label} | {base} | {ratios} |")
    return "\n".join(lines) + "\n"


_COST_FIELDS: Final = ("handshakes", "attempts", "peak_attempts")
"""What a KIP must not do more of than the client it is compared with."""


def _kip_classes(
    cells: Sequence[Cell], client: str, base: str, brokers: int
) -> list[tuple[str, list[tuple[str, str, float, float]]]]:
    """Per class with both cells: (class, [(label, field, client's, base's) per metric])."""
    by = _index(cells)
    found = []
    for cls in CLASSES:
        a, b = by.get((cls.name, brokers, client)), by.get((cls.name, brokers, base))
        if a is None or b is None:
            continue
        found.append(
            (cls.name, [(m, f, getattr(a.load, f), getattr(b.load, f)) for m, f in METRICS])
        )
    return found


def _worse(values: list[tuple[str, str, float, float]]) -> list[str]:
    """The cost metrics where the client does more than its base, as ``label 1.003x``."""
    return [f"{m} {x / y:.3f}x" for m, f, x, y in values if f in _COST_FIELDS and y and x > y]


def kip_rows(cells: Sequence[Cell], client: str, base: str, brokers: int = SUMMARY_BROKERS) -> str:
    """One KIP's rows of :func:`kip_table` (``client`` over ``base`` per class), and a line
    naming the classes where it pays (a ratio at or below 0.95) and where it costs (more
    handshakes, attempts or peak attempts per second than ``base``)."""
    names = " | ".join(m for m, _ in METRICS)
    lines = [f"| class ({brokers} brokers) | {names} |", "|---|" + "---:|" * len(METRICS)]
    pays, costs = [], []
    for name, values in _kip_classes(cells, client, base, brokers):
        lines.append(f"| {name} | " + " | ".join(_ratio(x, y) for _, _, x, y in values) + " |")
        if any(y and x / y <= 0.95 for _, _, x, y in values):
            pays.append(name)
        worse = _worse(values)
        if worse:
            costs.append(f"{name} ({', '.join(worse)})")
    lines += [
        "",
        f"`{client}` over `{base}`. Pays (a ratio at or below 0.95) in: "
        f"{', '.join(pays) or 'no class'}. Costs (more handshakes, attempts or peak attempts "
        f"per second) in: "
        f"{'; '.join(costs) or 'no class'}.",
    ]
    return "\n".join(lines) + "\n"


def kip_gains(cells: Sequence[Cell], client: str, base: str, brokers: int = SUMMARY_BROKERS) -> str:
    """One KIP's gain and cost per class in a sentence, for the RFC's Summary: the classes
    :func:`kip_rows` says it pays in, each with its ratios at or below 0.95, and those it
    costs in, each with its excesses (the same classes, the same figures as the KIP's
    table)."""
    pays, costs = [], []
    for name, values in _kip_classes(cells, client, base, brokers):
        gains = [f"{m} {_ratio(x, y)}" for m, _, x, y in values if y and x / y <= 0.95]
        if gains:
            pays.append(f"{name} ({', '.join(gains)})")
        worse = _worse(values)
        if worse:
            costs.append(f"{name} ({', '.join(worse)})")
    return (
        f"`{client}` over `{base}`, {brokers} brokers, ratios: pays in "
        f"{'; '.join(pays) or 'no class'}. Costs in {'; '.join(costs) or 'no class'}.\n"
    )


EXCESS_METRICS: Final = (
    ("handshakes", "handshakes"),
    ("attempts", "attempts"),
    ("peak attempts/s", "peak_attempts"),
)
"""What the proposal must not do more of than today's Java client (issue's goal: at most
1.00x), each line of :func:`over_today` naming those it does more of."""


def over_today(cells: Sequence[Cell], client: str = "proposed") -> list[str]:
    """Where ``client`` makes more handshakes, connection attempts or peak attempts per
    second than java-today: one line per (class, brokers), each such figure with java-today's
    and the ratio, then what it buys there (socket-seconds and peak connections over
    java-today's)."""
    by = _index(cells)
    out = []
    for c in cells:
        if c.client != client:
            continue
        base = by.get((c.workload, c.brokers, TODAY))
        if base is None:
            continue
        worse = [
            f"{label} {mine:,} against {theirs:,} ({mine / theirs:.3f}x)"
            for label, field in EXCESS_METRICS
            for mine, theirs in [(getattr(c.load, field), getattr(base.load, field))]
            if mine > theirs
        ]
        if worse:
            buys = (
                f"socket-seconds {_ratio(c.load.socket_seconds, base.load.socket_seconds)}x, "
                f"peak connections "
                f"{_ratio(c.load.peak_connections, base.load.peak_connections)}x"
            )
            out.append(f"{c.workload}, {c.brokers} brokers: {'; '.join(worse)}; for {buys}")
    return out


def over_today_block(cells: Sequence[Cell]) -> str:
    """The RFC Costs section's list: every (class, cluster size) where the proposal, on
    brokers without and with KIP-1242, makes more handshakes or connection attempts than
    java-today, with both figures; or a line saying there is none."""
    lines = [f"- `proposed`: {line}" for line in over_today(cells)]
    lines += [f"- `proposed-4.4`: {line}" for line in over_today(cells, "proposed-4.4")]
    return (
        "\n".join(lines or ["- nowhere: every class, every cluster size, at most java-today's"])
        + "\n"
    )


def render_index(cells: Sequence[Cell], settings: Mapping[str, Any]) -> str:
    """The report's Markdown."""
    clients = list(dict.fromkeys(c.client for c in cells))
    lines = [
        "# Workload classes against provider limits",
        "",
        "Generated by `python -m connmgr_evidence.bench.workloads` (do not edit by hand). "
        f"Settings: {', '.join(f'{k} = {v}' for k, v in settings.items())}.",
        "",
        "Each class's fleet is composed from drawn clients, each simulated for the hour under "
        "every client model (`docs/workloads.md`): the busiest broker's most connections at "
        "once, its most connection attempts in one second of the hour (and the 99th "
        "percentile over the hour's seconds), the handshakes of the hour at all brokers, and "
        f"the TLS memory of the busiest broker's peak at {TLS_BYTES_PER_CONNECTION // 1000} KB "
        f"a connection ({TLS_SOURCE}). Copies of a churn class's clients start within "
        f"{JITTER_MS / 1000:g} s of each other: a restart's reconnect storm hits the broker "
        "within that second, for every client model alike.",
        "",
        f"## Summary ({SUMMARY_BROKERS} brokers)",
        "",
        "Headroom: the largest fleet (in the class's unit) the cluster serves within the "
        "limit, and which cap binds first (conns: connections; att/s: connection attempts per "
        "second). A per-eCKU limit counts the whole cluster's connections and attempts, per "
        "eCKU.",
        "",
        summary_table(cells),
        "## Headroom, every cluster size",
        "",
        headroom_table(cells, clients),
        f"## Each KIP alone ({SUMMARY_BROKERS} brokers)",
        "",
        "Ratios of the KIP's client over the client it is compared with: below 1 it saves. "
        "`java-b0` and `java-linger` are today's Java client with one switch of the patch on; "
        "(d) is the proposal on brokers that answer KIP-1242 over the proposal on brokers that "
        "do not.",
        "",
        kip_table(cells),
        "## Where the proposal makes more handshakes or attempts than java-today",
        "",
    ]
    lines.append(over_today_block(cells).rstrip("\n"))
    lines += [
        "",
        "## Limits",
        "",
        "| limit | scope | connections | connection attempts / s | source |",
        "|---|---|---:|---:|---|",
    ]
    lines += [
        f"| {lim.name} | {lim.scope.value} | {lim.connections:,} | {lim.attempts_per_s:,} | "
        f"{lim.source} |"
        for lim in LIMITS
    ]
    lines += ["", "## Classes", ""]
    lines += [f"- `{c.name}`: {c.summary} ({c.fleet:,} {c.unit})." for c in CLASSES]
    return "\n".join(lines) + "\n"


def rfc_summary(cells: Sequence[Cell]) -> str:
    """The RFC Summary's first table: per class on :data:`SUMMARY_BROKERS` brokers, java-today
    and kafka-clients 4.4.0 against the proposal with and without KIP-1242 brokers."""
    return summary_table(cells)
