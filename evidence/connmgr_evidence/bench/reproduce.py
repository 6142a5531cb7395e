"""Do two reports count the same sockets? Compares the socket counts of the points two runs
of ``connmgr bench`` share, exactly: a ``--quick`` run shares the named scenarios and some
real points with a full one.

    python -m connmgr_evidence.bench.reproduce reports/<committed-run> reports/<new-run>

Simulated runs are deterministic given their seed, so where both reports keep their raw
simulated rows (``raw/results/sim.parquet``, committed with a report) they are compared run by
run: each (point, policy, repeat) both have, its opened, failed, peak, steady and handshakes.
A quick run's two repeats are then the full run's first two, not a median of two seeds against
one of three. Everything else (real clients, whose random picks are not seeded, and reports
without raw rows) is compared by the medians of the report's sockets table.

Exit 0 when every shared row agrees, 1 when one differs (each listed), 2 when the runs share
no row or a report is missing. Timings are not compared: they are measurements, not counts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

COUNTS = (
    "opened_proposed",
    "opened_baseline",
    "peak_proposed",
    "peak_baseline",
    "steady_proposed",
    "steady_baseline",
    "handshakes_proposed",
    "handshakes_baseline",
)
"""The socket counts of one (kind, point, baseline) row of ``tables/sockets.parquet``."""

RUN_COUNTS = ("opened", "failed", "peak", "steady", "handshakes")
"""The counts of one simulated run (a row of the results schema)."""

SIM_RESULTS = Path("raw") / "results" / "sim.parquet"

Row = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reproduction:
    shared: int
    """Rows both reports have."""
    differing: tuple[str, ...]
    """One line per shared row whose counts differ."""
    only_old: int
    only_new: int


def socket_rows(run_dir: Path) -> dict[Row, dict[str, float]]:
    """(kind, point, baseline) -> counts, from a report's ``tables/sockets.parquet``."""
    path = run_dir / "tables" / "sockets.parquet"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a report of connmgr bench (no sockets table)")
    rows: dict[Row, dict[str, float]] = {}
    for r in pq.read_table(path).to_pylist():
        rows[(r["kind"], r["point"], r["baseline"])] = {c: r[c] for c in COUNTS}
    return rows


def run_rows(run_dir: Path) -> dict[Row, dict[str, float]] | None:
    """("sim run", point, policy, "repeat N") -> counts of every simulated run the report
    kept (None: it kept none)."""
    path = run_dir / SIM_RESULTS
    if not path.is_file():
        return None
    return {
        ("sim run", r["point"], r["policy"], f"repeat {r['repeat']}"): {c: r[c] for c in RUN_COUNTS}
        for r in pq.read_table(path, columns=["point", "policy", "repeat", *RUN_COUNTS]).to_pylist()
    }


def counted(run_dir: Path, runs: bool) -> dict[Row, dict[str, float]]:
    """What :func:`compare` compares: with ``runs``, the simulated runs one by one and the
    sockets table's other kinds; without, the whole sockets table."""
    table = socket_rows(run_dir)
    if not runs:
        return table
    simulated = run_rows(run_dir)
    assert simulated is not None
    return {**simulated, **{k: v for k, v in table.items() if k[0] != "sim"}}


def compare(old: Path, new: Path) -> Reproduction:
    runs = run_rows(old) is not None and run_rows(new) is not None
    before, after = counted(old, runs), counted(new, runs)
    shared = sorted(set(before) & set(after))
    differing = []
    for row in shared:
        changed = [
            f"{c} {before[row][c]:g} -> {after[row][c]:g}"
            for c in before[row]
            if before[row][c] != after[row][c]
        ]
        if changed:
            differing.append(f"{_name(row)}: " + ", ".join(changed))
    return Reproduction(
        len(shared), tuple(differing), len(set(before) - set(after)), len(set(after) - set(before))
    )


def _name(row: Row) -> str:
    if row[0] == "sim run":
        return f"sim run {row[1]} {row[2]} {row[3]}"
    return f"{row[0]} {row[1]} vs {row[2]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.reproduce",
        description="Compare the socket counts two connmgr bench reports share, exactly.",
    )
    parser.add_argument("old", type=Path, help="a report directory (OUT/<run-id>)")
    parser.add_argument("new", type=Path, help="another report directory")
    args = parser.parse_args(argv)
    try:
        result = compare(args.old, args.new)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{result.shared} shared rows; {len(result.differing)} differ; "
        f"{result.only_old} only in {args.old.name}, {result.only_new} only in {args.new.name}"
    )
    for line in result.differing:
        print(f"  {line}")
    if result.shared == 0:
        return 2
    return 1 if result.differing else 0


if __name__ == "__main__":
    sys.exit(main())
