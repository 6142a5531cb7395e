"""``python -m connmgr_evidence.bench.workloads``: the workload classes against provider limits."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from connmgr_evidence.bench.workloads import rfcblock
from connmgr_evidence.bench.workloads.classes import CLASSES
from connmgr_evidence.bench.workloads.compose import CLIENT_MODELS
from connmgr_evidence.bench.workloads.report import JSON_FILE, read_cells, write_report
from connmgr_evidence.bench.workloads.run import BROKERS, TEMPLATES, run_all

ROOT = Path(__file__).resolve().parents[4]
DEFAULT_OUT = ROOT / "reports" / "workloads"
PROPOSAL = ROOT / "proposal"


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers such as 3,6,30") from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: every cluster needs >= 2 brokers")
    return values


def _names(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        names = tuple(n for n in text.split(",") if n)
        unknown = [n for n in names if n not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(known)}")
        return names

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    classes = tuple(c.name for c in CLASSES)
    clients = tuple(m.name for m in CLIENT_MODELS)
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.workloads",
        description="Simulate each workload class (steady, serverless, autoscaling, pollers, "
        "restart, ip-change, reassignment) under today's clients and the proposal, compose "
        "each class's fleet, and report the busiest broker's connections, connection "
        "attempts per second, handshakes and TLS memory against Amazon MSK's and Confluent "
        "Cloud's published limits, with each KIP alone. Writes OUT/index.md and "
        "OUT/workloads.json, and refreshes the RFC Summary's table from them.",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="report folder")
    parser.add_argument("--classes", type=_names(classes), default=classes, help="comma list")
    parser.add_argument("--clients", type=_names(clients), default=clients, help="comma list")
    parser.add_argument("--brokers", type=_ints, default=BROKERS, help="cluster sizes (3,6,30)")
    parser.add_argument(
        "--templates", type=int, default=TEMPLATES, help="clients simulated per class and size"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=2, help="worker processes (1: none)")
    parser.add_argument(
        "--report-only", action="store_true", help="re-render OUT/index.md from OUT's JSON"
    )
    parser.add_argument(
        "--no-rfc", action="store_true", help="leave the proposals' workload tables alone"
    )
    args = parser.parse_args(argv)
    if args.templates < 1:
        parser.error("--templates must be >= 1")
    out: Path = args.out
    if args.report_only:
        if not (out / JSON_FILE).exists():
            parser.error(f"{out / JSON_FILE}: no workload report there to re-render")
        cells, settings = read_cells(out / JSON_FILE)
    else:
        from tqdm import tqdm

        settings = {
            "templates": args.templates,
            "seed": args.seed,
            "brokers": ",".join(map(str, args.brokers)),
        }
        started = time.perf_counter()
        total = len(args.classes) * len(args.brokers) * len(args.clients)
        with tqdm(total=total, desc="workload cells", unit="cell", file=sys.stderr) as bar:
            cells = run_all(
                classes=args.classes,
                brokers=args.brokers,
                clients=args.clients,
                templates=args.templates,
                seed=args.seed,
                processes=args.processes,
                progress=lambda done, _: bar.update(done - bar.n),
            )
        settings["wall_s"] = round(time.perf_counter() - started, 1)
    index = write_report(cells, settings, out)
    print(f"workload report: {index}")
    if not args.no_rfc and out.resolve() == DEFAULT_OUT.resolve():
        changed = rfcblock.refresh_all(PROPOSAL, out)
        print(f"{PROPOSAL}: workload tables {', '.join(changed) or 'unchanged'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
