"""``python -m connmgr_evidence.bench.longrun``: the long run from the command line.

A benchmark, not a test: it takes ``--minutes`` of client life (60 by default) plus the
cluster's start and the clients' close, writes the report to ``--out`` and exits 0, or 1 if
anything went wrong (a client failed, a phase failed, a record was lost or duplicated): the
report is written either way and says what.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from connmgr_evidence.bench.longrun.drive import run_longrun
from connmgr_evidence.bench.longrun.plan import BROKERS, LongRunSettings
from connmgr_evidence.bench.longrun.report import write_report
from connmgr_evidence.java.patched import SWITCHES

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="connmgr longrun",
        description=(
            "The long run: kafka-clients 4.3.1 stock and patched (with "
            + ", ".join(f"{k}={v}" for k, v in SWITCHES.items())
            + "), side by side on a real 3-broker KRaft cluster over "
            "SASL_SSL, each variant a producer, two classic and two KIP-848 consumers, an "
            "admin client and a transactional producer. A rolling restart of every broker at "
            "1/3 of the life, one broker moved to new ports at 2/3. Samples every client "
            "JVM's sockets (kernel) and every broker's connection count (JMX); writes "
            "index.md, CSV time series, summary.json and plots. Takes --minutes plus one to "
            "two minutes; needs Java 17+ and Maven."
        ),
    )
    p.add_argument("--minutes", type=float, default=60.0, help="client life (default 60)")
    p.add_argument(
        "--start-s",
        type=float,
        default=120.0,
        help=(
            "seconds the client JVMs are given to start and get past their bootstrap; every "
            "life ends --start-s plus --minutes after the launch (default 120)"
        ),
    )
    p.add_argument(
        "--overtime-s",
        type=float,
        default=0.0,
        help=(
            "seconds the lives may go on past their end until every variant has dialled the "
            "moved broker at its new port (default 0: they end on time)"
        ),
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("reports/longrun"),
        help="report directory (default reports/longrun)",
    )
    p.add_argument("--rtt-ms", type=float, default=0.0, help="injected round trip (default 0)")
    p.add_argument("--sample-s", type=float, default=5.0, help="sampling period (default 5)")
    p.add_argument(
        "--record-every-ms",
        type=int,
        default=100,
        help="producer period (default 100: 10 records/s)",
    )
    p.add_argument(
        "--move", type=int, default=3, choices=BROKERS, help="the broker moved (default 3)"
    )
    p.add_argument(
        "--keep-logs", type=Path, default=None, help="keep the clients' logs in this directory"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = LongRunSettings(
        minutes=args.minutes,
        start_s=args.start_s,
        overtime_s=args.overtime_s,
        out=args.out,
        rtt_ms=args.rtt_ms,
        sample_s=args.sample_s,
        record_every_ms=args.record_every_ms,
        move=args.move,
        keep_logs=args.keep_logs,
    )
    result = run_longrun(settings)
    index = write_report(result, settings.out)
    print(index)
    for problem in result.problems:
        print(f"problem: {problem}", file=sys.stderr)
    return 1 if result.problems else 0
