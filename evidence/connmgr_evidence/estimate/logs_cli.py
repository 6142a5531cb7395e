"""``connmgr estimate logs PATH...``: the command line of :mod:`connmgr_evidence.estimate.logs`.

Exit codes: 0 every file was read; 1 some path was missing, binary or unreadable (each named
on stderr; the others' results are still printed); 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from connmgr_evidence.estimate.logs import ROLES, SPARK_THRESHOLD_BYTES, collect_files, estimate


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="connmgr estimate logs",
        description="Per-client connections from Java NetworkClient DEBUG logs, today and "
        "as the proposal would open and hold them.",
    )
    p.add_argument("paths", nargs="+", help="log files, directories (recursive), .gz files")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.add_argument("--plot", type=Path, help="write a PNG: opened by role, today vs proposal")
    p.add_argument(
        "--engine",
        choices=("auto", "local", "spark"),
        default="auto",
        help=f"where to parse: auto = Spark from {SPARK_THRESHOLD_BYTES // 2**20} MB of input",
    )
    p.add_argument("--master", help="Spark master (default local[*])")
    p.add_argument(
        "--progress",
        choices=("auto", "on", "off"),
        default="auto",
        help="a progress bar on stderr (auto: when stderr is a terminal)",
    )
    return p


def table(document: dict[str, Any], limit: int = 50) -> str:
    """The readable form: one row per client (the first ``limit``), then the totals."""
    head = (
        f"{'client':28} {'group':14} {'kind':10} {'boot':>4} {'coord':>5} {'brok':>4} "
        f"{'peak':>4} {'unused':>6} | {'prop. opened':>12} {'peak':>4}"
    )
    rows = [head, "-" * len(head)]

    def row(name: str, group: str, kind: str, rec: dict[str, Any], never: Any) -> str:
        o, p = rec["opened"], rec["proposal"]
        return (
            f"{name[:28]:28} {group[:14]:14} {kind[:10]:10} "
            + " ".join(f"{o[r]:>{w}}" for r, w in zip(ROLES, (4, 5, 4), strict=True))
            + f" {rec['peak']:>4} {never:>6} | {sum(p['opened'].values()):>12} {p['peak']:>4}"
        )

    clients = document["clients"]
    for c in clients[:limit]:
        rows.append(row(c["client_id"], c["group"] or "-", c["kind"], c, c["never_used"]))
    if len(clients) > limit:
        rows.append(f"... {len(clients) - limit} more clients (--json lists them all)")
    t = document["totals"]
    rows.append("-" * len(head))
    rows.append(row(f"total ({t['clients']} clients)", "", "", t, t["never_used"]))
    lived = t["bootstrap_lived_ms"]
    if lived["closed"]:
        rows.append(
            f"bootstrap connections: {lived['closed']} closed, after {lived['median'] / 1000:.1f} s"
            f" (median; longest {lived['max'] / 1000:.1f} s); {lived['open_at_end']} still open "
            "at the end of their logs"
        )
    else:
        rows.append(f"bootstrap connections: none closed; {lived['open_at_end']} open at the end")
    rows.append(
        f"lines {document['lines']}, skipped (not connection or request lines) "
        f"{document['skipped_lines']}, files {document['files']}, engine {document['engine']}"
    )
    return "\n".join(rows)


def plot(document: dict[str, Any], out: Path) -> None:
    """Connections opened by role, today against the proposal, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = document["totals"]
    today = [t["opened"][r] for r in ROLES]
    proposal = [t["proposal"]["opened"][r] for r in ROLES]
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = range(len(ROLES))
    ax.bar([x - 0.2 for x in xs], today, width=0.4, label="today (from the logs)")
    ax.bar([x + 0.2 for x in xs], proposal, width=0.4, label="proposal (replayed)")
    for x, (a, b) in enumerate(zip(today, proposal, strict=True)):
        ax.annotate(str(a), (x - 0.2, a), ha="center", va="bottom", fontsize=8)
        ax.annotate(str(b), (x + 0.2, b), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(list(xs), list(ROLES))
    ax.set_ylabel("connections opened")
    ax.set_title(
        f"{t['clients']} clients: peak held {t['peak']} today, {t['proposal']['peak']} proposed"
    )
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Run the command (see the module docstring for the exit codes)."""
    args = parser().parse_args(argv)
    files, missing = collect_files(args.paths)
    try:
        document = estimate(
            files,
            engine=args.engine,
            master=args.master,
            progress=args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty()),
        )
    except Exception as e:  # Spark could not start: say so, as the user asked for it
        from connmgr_evidence.bench.runtime.spark import SparkUnavailable

        if isinstance(e, SparkUnavailable):
            sys.stderr.write(f"connmgr estimate logs: {e}\n")
            return 2
        raise
    errors = sorted(missing + document["errors"])
    document["errors"] = errors
    for error in errors:
        sys.stderr.write(f"connmgr estimate logs: {error}\n")
    if args.json:
        json.dump(document, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(table(document) + "\n")
    if args.plot is not None:
        plot(document, args.plot)
    return 1 if errors else 0
