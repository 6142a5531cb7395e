"""``python -m connmgr_evidence.bench.serverless``: start a 3-broker KRaft cluster with TLS and
SASL,
run short-lived producers of each variant (:func:`connmgr_evidence.realkafka.serverless.measure`)
and
write the report.

A benchmark, not a test. It stops by itself: ``--starts`` per variant, each start bounded by
:data:`~connmgr_evidence.realkafka.serverless.START_TIMEOUT_S`. Exit status: 0 when every record was
acknowledged and read back exactly once and every count agreed
(:func:`~connmgr_evidence.bench.serverless.figures.problems`); 1 otherwise (the report is written
either way and names each problem); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from connmgr_evidence.bench.serverless.figures import problems
from connmgr_evidence.bench.serverless.report import as_json, render
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.serverless import VARIANTS, measure

__all__ = ["main", "parser"]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 1")
    return value


def _rtt(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of ms >= 0") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text}: must be >= 0")
    return value


def _variants(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in VARIANTS]
    if not names or unknown or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated, each once, from {', '.join(VARIANTS)}"
        )
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.bench.serverless",
        description=(
            "Short-lived producers on a real 3-broker Kafka 4.4 cluster (KRaft, SASL_SSL "
            "listener behind counting forwarders): each start builds a producer, sends a few "
            "records (acks=all) and closes it, one start after another, for stock aiokafka, "
            "the drop-in (KIP-1242 adoption on), kafka-clients 4.4.0 and the patched "
            "kafka-clients 4.3.1 (switches on; the Java producers in one long-lived probe "
            "JVM). Counts connection attempts per start and per second at each broker at the "
            "forwarders, peak concurrent connections, and reads every record back. Writes "
            "index.md and serverless.json to --out. Exit 1 if a record was lost or duplicated "
            "or a count disagreed."
        ),
    )
    p.add_argument(
        "--starts", type=_positive, default=200, help="producer starts per variant (default 200)"
    )
    p.add_argument(
        "--records",
        type=_positive,
        default=3,
        help="records each start sends, round-robin over the 3 partitions (default 3)",
    )
    p.add_argument(
        "--variants",
        type=_variants,
        default=VARIANTS,
        help=f"variants, in run order (default {','.join(VARIANTS)})",
    )
    p.add_argument(
        "--protocol",
        choices=("SASL_SSL", "SSL", "PLAINTEXT"),
        default="SASL_SSL",
        help="listener (default SASL_SSL; PLAINTEXT is the forwarded CLIENT listener)",
    )
    p.add_argument("--rtt-ms", type=_rtt, default=0.0, help="RTT the forwarders inject (default 0)")
    p.add_argument(
        "--java-logs",
        type=Path,
        default=None,
        help="keep the Java clients' NetworkClient logs here (default: a temporary directory)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("reports/serverless"),
        help="report directory (default reports/serverless)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    logs: Path = args.java_logs or Path(tempfile.mkdtemp(prefix="connmgr-serverless-"))
    logs.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    total = args.starts * len(args.variants)
    with KafkaCluster(brokers=3, security=True) as cluster, tqdm(total=total, unit="start") as bar:

        def progress(variant: str) -> None:
            bar.set_postfix_str(variant)
            bar.update()

        run = measure(
            cluster,
            variants=args.variants,
            starts=args.starts,
            records_per_start=args.records,
            protocol=args.protocol,
            rtt_ms=args.rtt_ms,
            logs=logs,
            progress=progress,
        )
    took = time.monotonic() - began
    (out / "serverless.json").write_text(json.dumps(as_json(run, took_s=took), indent=1) + "\n")
    (out / "index.md").write_text(render(run, took_s=took))
    found = problems(run)
    for problem in found:
        print(f"serverless: {problem}", file=sys.stderr)
    print(f"serverless: {total} starts in {took:.0f} s; report in {out}/index.md")
    return 1 if found else 0
