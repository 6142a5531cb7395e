"""The 2019 articles' claims about the Java client (docs/baseline-behaviour.md B1: P1-P6,
C1-C6), checked against the real kafka-clients 2.1.0 on the embedded cluster.

``python -m connmgr_evidence.java.claims --out docs/java-2.1.0-claims.md`` runs the experiments and
writes the table; every row names the experiment (topology, settings) its evidence comes from.
Timers are shortened (idle and metadata ages of about a second) so that churn and idle expiry
show within seconds; the rules under test do not depend on the absolute values.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from connmgr.core.identity import COORDINATOR_ID_BASE
from connmgr.embedded import MockCluster
from connmgr.javalog import (
    node_id_of,
    parse_connection_events,
    parse_probe_phases,
    parse_sent_requests,
)
from connmgr_evidence.java.build import build_probe
from connmgr_evidence.java.crosscheck import cross_check
from connmgr_evidence.java.probe import kernel_sampler, run_probe
from connmgr_evidence.java.results import JavaRun

VERSION = "2.1.0"


@dataclass(frozen=True)
class Experiment:
    name: str
    client: str
    brokers: int
    leaders: tuple[int, ...]
    bootstrap: tuple[int, ...]
    extra: Mapping[str, str] = field(default_factory=dict)
    settle_ms: int = 1500
    records: int = 30
    coordinator: int | None = None
    wait_ms: int = 0
    """Wait after construction (and subscribe) before the first send or poll."""

    def describe(self) -> str:
        settings = ", ".join(f"{k}={v}" for k, v in self.extra.items()) or "defaults"
        return (
            f"`{self.name}`: {self.client}, {self.brokers} brokers, partitions led by "
            f"{list(self.leaders)}, bootstrap = brokers {list(self.bootstrap)}"
            + (f", coordinator {self.coordinator}" if self.coordinator else "")
            + f", {settings}, "
            + (f"{self.wait_ms} ms wait before the first poll, " if self.wait_ms else "")
            + f"idle {self.settle_ms} ms after the work"
        )


EXPERIMENTS = (
    Experiment("producer-6", "producer", 6, (4, 5, 6), (1, 2, 3)),
    Experiment(
        "producer-churn",
        "producer",
        6,
        (4, 5, 6),
        (1, 2, 3),
        {"metadata.max.age.ms": "1000", "connections.max.idle.ms": "700"},
        settle_ms=6000,
    ),
    Experiment(
        "producer-no-idle",
        "producer",
        6,
        (4, 5, 6),
        (1, 2, 3),
        {"metadata.max.age.ms": "1000", "connections.max.idle.ms": "-1"},
        settle_ms=4000,
    ),
    Experiment(
        "consumer-3",
        "consumer",
        3,
        (3, 1, 2),
        (1,),
        {"metadata.max.age.ms": "2000", "connections.max.idle.ms": "1500"},
        settle_ms=4500,
        coordinator=3,
        wait_ms=1500,
    ),
)


@dataclass
class Observation:
    experiment: Experiment
    run: JavaRun[Any]
    dials: list[tuple[int, datetime]]
    closes: list[tuple[int, datetime, str]]
    sent: list[tuple[datetime, str, int]]
    problems: list[str]
    phases: dict[str, tuple[datetime, datetime | None]]

    def dialled(self, node: int) -> int:
        return sum(1 for n, _ in self.dials if n == node)


def run_experiment(exp: Experiment, version: str = VERSION) -> Observation:
    build = build_probe(version)
    with MockCluster(exp.brokers, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.create_topic_with_leaders("t", list(exp.leaders))
        if exp.coordinator is not None:
            cluster.set_coordinator("group", "g", exp.coordinator)
        endpoints = cluster.endpoints()
        bootstrap = ",".join(f"{endpoints[b][0]}:{endpoints[b][1]}" for b in exp.bootstrap)
        if exp.client == "consumer":
            fill = run_probe(
                build,
                client="producer",
                bootstrap=bootstrap,
                topic="t",
                partitions=len(exp.leaders),
                records=exp.records,
                sample=kernel_sampler(endpoints),
                settle_ms=0,
            )
            assert fill.closed.records_acked == exp.records
        run = run_probe(
            build,
            client="consumer" if exp.client == "consumer" else "producer",
            bootstrap=bootstrap,
            topic="t",
            partitions=len(exp.leaders),
            records=exp.records,
            group="g" if exp.client == "consumer" else None,
            settle_ms=exp.settle_ms,
            extra=exp.extra,
            sample=kernel_sampler(endpoints),
            wait_ms=exp.wait_ms,
        )
    lines = run.log_path.read_text().splitlines()
    events = parse_connection_events(lines)
    dials = [(node_id_of(e.node), e.timestamp) for e in events if e.kind == "connect"]
    closes = [(node_id_of(e.node), e.timestamp, e.reason) for e in events if e.kind == "disconnect"]
    return Observation(
        exp,
        run,
        dials,
        closes,
        parse_sent_requests(lines),
        cross_check(run),
        parse_probe_phases(lines),
    )


@dataclass(frozen=True)
class Verdict:
    code: str
    claim: str
    verdict: str
    evidence: str


def judge(obs: Mapping[str, Observation]) -> list[Verdict]:
    """Each claim's verdict from the observations (no expected values are typed here)."""
    p6, churn, quiet, cons = (
        obs[n] for n in ("producer-6", "producer-churn", "producer-no-idle", "consumer-3")
    )
    out: list[Verdict] = []
    boot = sorted({n for n, _ in p6.dials if n < 0})
    first_md = next((node for _, api, node in p6.sent if api == "METADATA"), None)
    out.append(
        _v(
            "P1",
            "the producer connects to every bootstrap server; metadata goes to one",
            len(boot) == 3,
            len(boot) > 1,
            f"producer-6 dialled bootstrap nodes {boot} (of -1,-2,-3); first metadata to "
            f"{first_md}",
        )
    )
    idle_brokers = [b for b in range(1, 7) if b not in p6.experiment.leaders]
    idle_dialled = [b for b in idle_brokers if p6.dialled(b)]
    out.append(
        _v(
            "P2",
            "after the first metadata it connects to every broker",
            idle_dialled == idle_brokers,
            bool(idle_dialled),
            f"producer-6 dialled {len(idle_dialled)} of the {len(idle_brokers)} brokers "
            f"that lead nothing ({idle_dialled})",
        )
    )
    leaders = list(p6.experiment.leaders)
    out.append(
        _v(
            "P3",
            "a send to a partition whose leader has no connection opens one",
            all(p6.dialled(b) for b in leaders),
            False,
            f"producer-6 dialled leaders {[b for b in leaders if p6.dialled(b)]}",
        )
    )
    redials = {n: c for n, c in Counter(n for n, _ in churn.dials).items() if c > 1}
    out.append(
        _v(
            "P4",
            "metadata refresh re-opens idle-closed connections (churn)",
            bool(redials) and any(n not in leaders for n in redials),
            bool(redials),
            f"producer-churn re-dialled {redials or 'nothing'}; "
            f"{sum(1 for _, a, _ in churn.sent if a == 'METADATA')} metadata requests",
        )
    )
    closes_churn = len(churn.closes)
    closes_quiet = len(quiet.closes)
    out.append(
        _v(
            "P5",
            "idle connections close after connections.max.idle.ms; never with -1",
            closes_churn > 0 and closes_quiet == 0,
            closes_churn > 0 or closes_quiet == 0,
            f"producer-churn: {closes_churn} closes while running; producer-no-idle: "
            f"{closes_quiet} closes while running, {quiet.run.steady.connection_count} "
            "open at the steady point",
        )
    )
    ends = {name: o.run.closed.connection_count for name, o in obs.items()}
    out.append(
        _v(
            "P6",
            "close() closes everything",
            all(c == 0 for c in ends.values()),
            False,
            f"connection-count after close(): {ends}; kernel and log "
            "agree at the steady point" + _problems(obs),
        )
    )
    out.append(_c1(cons))
    first = cons.dials[0][0] if cons.dials else None
    on_first = {api for _, api, node in cons.sent if node == first}
    out.append(
        _v(
            "C2",
            "first poll: one connection to the bootstrap node; Metadata and FindCoordinator on it",
            first == -1 and {"METADATA", "FIND_COORDINATOR"} <= on_first,
            first == -1,
            f"consumer-3 first dial {first}; requests on it: {sorted(on_first)}",
        )
    )
    coord = COORDINATOR_ID_BASE - 3
    out.append(
        _v(
            "C3",
            "a separate coordinator connection with id 2147483647 - brokerId",
            # Re-dials of the coordinator connection come from the short idle setting (1.5 s,
            # below the 3 s heartbeat interval), not from the rule under test.
            cons.dialled(coord) >= 1 and cons.dialled(3) >= 1,
            False,
            f"consumer-3 dialled {coord} {cons.dialled(coord)}x and broker 3's data "
            f"connection {cons.dialled(3)}x (re-dials follow the 1.5 s idle expiry)",
        )
    )
    data = sorted(n for n, _ in cons.dials if 0 <= n < coord)
    out.append(
        _v(
            "C4",
            "one connection per leader broker, by real id",
            data == [1, 2, 3],
            False,
            f"consumer-3 data dials {data}",
        )
    )
    later = [
        a
        for t, a, n in cons.sent
        if n == -1
        and a not in ("API_VERSIONS",)
        and cons.dials
        and t > max(t0 for n0, t0 in cons.dials if n0 >= 0)
    ]
    boot_closed = any(n == -1 for n, _, _ in cons.closes)
    out.append(
        _v(
            "C5",
            "the bootstrap connection gets no more requests and idles out",
            not later and boot_closed,
            not later or boot_closed,
            f"consumer-3: requests on -1 after the broker connections: {later or 'none'}; "
            f"-1 closed while running: {boot_closed}",
        )
    )
    by_api = Counter((a, n) for _, a, n in cons.sent)
    beats = {n for (a, n) in by_api if a in ("HEARTBEAT", "OFFSET_COMMIT")}
    fetch = {n for (a, n) in by_api if a == "FETCH"}
    metadata = [n for _, a, n in cons.sent if a == "METADATA"]
    md = sorted(set(metadata[1:]))  # after the first (bootstrap) metadata request
    out.append(
        _v(
            "C6",
            "heartbeats and commits on the coordinator connection, fetches on "
            "leaders, metadata on a real node",
            beats == {coord} and fetch <= {1, 2, 3} and all(n >= 0 for n in md),
            beats == {coord},
            f"consumer-3: heartbeat/commit to {sorted(beats)}, fetch to {sorted(fetch)}, "
            f"metadata to {md}",
        )
    )
    return out


def _c1(cons: Observation) -> Verdict:
    """C1 from the probe's wait phase: dials between construct+subscribe and the first poll."""
    claim = "no connection at construction, subscribe() or assign()"
    wait = cons.phases.get("wait")
    if wait is None or wait[1] is None:
        return Verdict("C1", claim, "not measured", "consumer-3 logged no complete wait phase")
    begin, end = wait[0], wait[1]
    assert end is not None
    during = [n for n, t in cons.dials if begin <= t <= end]
    first = min((t for _, t in cons.dials), default=None)
    after = f"{(first - end).total_seconds() * 1000:.0f} ms after it" if first else "never"
    return _v(
        "C1",
        claim,
        not during,
        False,
        f"consumer-3: {len(during)} dials during the {cons.experiment.wait_ms} ms wait "
        f"after construct+subscribe; first dial {after}",
    )


def _v(code: str, claim: str, yes: bool, partly: bool, evidence: str) -> Verdict:
    verdict = "observed" if yes else "partly" if partly else "not observed"
    return Verdict(code, claim, verdict, evidence)


def _problems(obs: Mapping[str, Observation]) -> str:
    bad = {name: o.problems for name, o in obs.items() if o.problems}
    return f" (accounting problems: {bad})" if bad else ""


def render(verdicts: Sequence[Verdict], obs: Mapping[str, Observation], version: str) -> str:
    lines = [
        f"# The 2019 articles' claims against the real kafka-clients {version}",
        "",
        "Generated by `python -m connmgr_evidence.java.claims --out docs/java-2.1.0-claims.md`: "
        "the real "
        f"Java client (org.apache.kafka:kafka-clients {version}, built by the Maven probe in "
        "`benchmarks/java-probe`) on the embedded cluster; connections read from its "
        "NetworkClient log and checked against its own metrics and the kernel. "
        "`java-described` models the claims as the articles state them.",
        "",
        "| claim | the articles say | verdict | evidence |",
        "|---|---|---|---|",
    ]
    lines += [f"| {v.code} | {v.claim} | {v.verdict} | {v.evidence} |" for v in verdicts]
    lines += ["", "## Experiments", ""]
    lines += [f"- {o.experiment.describe()}" for o in obs.values()]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m connmgr_evidence.java.claims",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--out", type=Path, help="write the Markdown table here (else stdout)")
    parser.add_argument("--kafka-clients", default=VERSION, metavar="VERSION")
    args = parser.parse_args(argv)
    obs = {exp.name: run_experiment(exp, args.kafka_clients) for exp in EXPERIMENTS}
    text = render(judge(obs), obs, args.kafka_clients)
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
