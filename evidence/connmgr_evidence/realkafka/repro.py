"""``python -m connmgr_evidence.realkafka.repro BUG``: reproduce one of the project's bug reports
against
kafka-clients on a real 3-node KRaft cluster (Kafka 4.4.0, its secure tier's forwarders), print
the table, exit 0 if the bug reproduced, 1 if it did not, 2 on bad arguments or a failure.

* ``double-bootstrap`` (``docs/bug-double-bootstrap.md``,
  :mod:`~connmgr_evidence.realkafka.bootstrap_dials`): a plain producer and group consumer dial two
  bootstrap servers per start. Reproduced when every run default 4.4.0 variant's median is 2
  bootstrap connections and every run 4.4.0 variant with the causes switched off
  (``producer-440-both-off``, ``consumer-440-push-off``) has a median of 1.
* ``admin-cluster-id`` (``docs/bug-admin-cluster-id.md``,
  :mod:`~connmgr_evidence.realkafka.admin_identity`): 4.4.0's admin client sends no ``ClusterId`` /
  ``NodeId`` to nodes it knows. Reproduced when every admin start opened a known-node connection
  and none of them carried the identity, while every known-node connection of every producer
  start carried it, with the ``NodeId`` of the broker it reached.

Needs java (17+) and mvn (the broker and client jars come from Maven Central into ``~/.m2``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from connmgr.errors import ConnMgrError
from connmgr_evidence.realkafka import KafkaCluster
from connmgr_evidence.realkafka.admin_identity import IdentityStart
from connmgr_evidence.realkafka.bootstrap_dials import VARIANTS, StartCount

__all__ = [
    "admin_reproduced",
    "admin_table",
    "double_bootstrap_reproduced",
    "double_bootstrap_table",
    "main",
]

_CAUSES_OFF = ("producer-440-both-off", "consumer-440-push-off")
_DEFAULTS = ("producer-440", "consumer-440")


def _median(values: Sequence[int]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def double_bootstrap_table(counts: Sequence[StartCount]) -> str:
    """A Markdown table: per variant, each start's connections (total, bootstrap, known), the
    client's own count, and how many known-node connections carried KIP-1242's identity."""
    rows = [
        "| client (configuration) | starts | connections per start | bootstrap per start "
        "| known-node per start | client's own count = forwarders' | known carrying "
        "ClusterId+NodeId |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in [v for v in VARIANTS if any(c.variant == v for c in counts)]:
        group = [c for c in counts if c.variant == name]
        rows.append(
            f"| {VARIANTS[name].label} | {len(group)} "
            f"| {', '.join(str(c.total) for c in group)} "
            f"| {', '.join(str(c.bootstrap) for c in group)} "
            f"| {', '.join(str(c.known) for c in group)} "
            f"| {sum(c.own == c.total for c in group)} of {len(group)} "
            f"| {sum(c.checked for c in group)} of {sum(c.known for c in group)} |"
        )
    return "\n".join(rows)


def double_bootstrap_reproduced(counts: Sequence[StartCount]) -> tuple[bool, str]:
    """(reproduced, why) by the rule of the module docstring."""
    by: dict[str, list[int]] = {}
    for c in counts:
        by.setdefault(c.variant, []).append(c.bootstrap)
    ran_defaults = [v for v in _DEFAULTS if v in by]
    if not ran_defaults:
        return False, f"none of {', '.join(_DEFAULTS)} ran: nothing to reproduce"
    wrong = [v for v in ran_defaults if _median(by[v]) != 2]
    wrong += [v for v in _CAUSES_OFF if v in by and _median(by[v]) != 1]
    if wrong:
        medians = ", ".join(f"{v} {_median(by[v]):g}" for v in wrong)
        return False, f"median bootstrap connections not as reported: {medians}"
    return True, (
        "4.4.0 dials two bootstrap servers per start by default"
        + (", one with the causes switched off" if any(v in by for v in _CAUSES_OFF) else "")
    )


def admin_table(starts: Sequence[IdentityStart]) -> str:
    """A Markdown table: per client start, each connection's broker, kind, ApiVersions version
    and identity fields as sent, and the client's own log's count of requests with them."""
    rows = [
        "| client 4.4.0 | start | connections (broker: bootstrap/known, ApiVersions vN, "
        "ClusterId, NodeId) | known carrying ClusterId+NodeId | client log: with / without |",
        "|---|---|---|---|---|",
    ]
    for s in starts:
        cells = "; ".join(
            f"{c.broker}: {'known' if c.known else 'bootstrap'}, v{c.api_version}, "
            f"{c.cluster_id or 'null'}, {c.node_id}"
            for c in s.connections
        )
        carried = sum(c.carries_identity for c in s.known)
        rows.append(
            f"| {s.client} | {s.index} | {cells} | {carried} of {len(s.known)} "
            f"| {len(s.census.checked)} / {len(s.census.unchecked)} |"
        )
    return "\n".join(rows)


def admin_reproduced(starts: Sequence[IdentityStart]) -> tuple[bool, str]:
    """(reproduced, why) by the rule of the module docstring."""
    admins = [s for s in starts if s.client == "admin"]
    producers = [s for s in starts if s.client == "producer"]
    if not admins:
        return False, "no admin start ran"
    if any(not s.known for s in admins):
        return False, "an admin start opened no connection to a known node"
    if any(c.carries_identity for s in admins for c in s.known):
        return False, "an admin start sent ClusterId and NodeId to a known node"
    if any(
        not s.known or not all(c.carries_identity and c.node_id == c.broker for c in s.known)
        for s in producers
    ):
        return False, "a producer start did not send its identity to every known node"
    return True, (
        f"the admin client sent no ClusterId/NodeId on any of its "
        f"{sum(len(s.known) for s in admins)} known-node connections"
        + (
            f"; the producer sent them on all {sum(len(s.known) for s in producers)} of its own"
            if producers
            else ""
        )
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.realkafka.repro",
        description=(
            "Reproduce a kafka-clients bug on a real 3-node Kafka 4.4.0 cluster (KRaft, "
            "loopback, counted and decoded at per-broker TCP forwarders on its PLAINTEXT "
            "client listener); print the table; exit 0 if it reproduced, 1 if not."
        ),
    )
    parser.add_argument("bug", choices=("double-bootstrap", "admin-cluster-id"))
    parser.add_argument(
        "--starts", type=int, default=5, metavar="N", help="starts per variant (default 5)"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        metavar="A,B",
        help=f"double-bootstrap: variants to run, in order (default all: {', '.join(VARIANTS)})",
    )
    parser.add_argument(
        "--logs", type=Path, default=None, metavar="DIR", help="the clients' logs (default: temp)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="FILE", help="also write every start as JSON"
    )
    return parser


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    """Run the command (see the module docstring); the exit status."""
    out = out or sys.stdout
    options = _parser().parse_args(argv)
    if options.starts < 1:
        print("repro: error: --starts must be >= 1", file=sys.stderr)
        return 2
    variants = [v for v in options.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"repro: error: unknown variants {unknown}", file=sys.stderr)
        return 2
    logs = options.logs or Path(tempfile.mkdtemp(prefix="connmgr-repro-"))
    try:
        ok, why, table, rows = _run(options.bug, variants, options.starts, logs, out)
    except ConnMgrError as exc:
        print(f"repro: error: {exc}", file=sys.stderr)
        return 2
    print(table, file=out)
    print(f"{'reproduced' if ok else 'NOT reproduced'}: {why} (logs: {logs})", file=out)
    if options.json is not None:
        options.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if ok else 1


def _run(
    bug: str, variants: Sequence[str], starts_per: int, logs: Path, out: TextIO
) -> tuple[bool, str, str, list[object]]:
    began = time.monotonic()
    with KafkaCluster(brokers=3, security=True) as cluster:
        print(f"cluster up ({cluster.version}) in {time.monotonic() - began:.0f} s", file=out)
        if bug == "double-bootstrap":
            from connmgr_evidence.realkafka import bootstrap_dials

            counts = bootstrap_dials.measure(
                cluster, variants=variants, starts=starts_per, logs=logs
            )
            table = double_bootstrap_table(counts)
            ok, why = double_bootstrap_reproduced(counts)
            rows: list[object] = [asdict(c) for c in counts]
        else:
            from connmgr_evidence.realkafka import admin_identity

            starts = admin_identity.measure(cluster, starts=starts_per, logs=logs)
            table = admin_table(starts)
            ok, why = admin_reproduced(starts)
            rows = [asdict(s) for s in starts]
    return ok, why, table, rows


if __name__ == "__main__":
    sys.exit(main())
