"""``connmgr estimate fleet FILE``: what a fleet, described in TOML, costs its brokers under
today's clients and under the proposal, against the provider's limits.

The description's schema is :mod:`.fleet_spec`'s; the model is the workload stage's
(:mod:`.fleet_model`). Per broker and per client model it prints the peak connections, the
peak connection attempts in one second, the handshakes in the hour and the TLS memory; then
the headroom against the provider's limits (how many times the fleet fits, how many more
clients that is, and which limit binds first), and each KIP alone as ratios.

Exit codes: 0 the estimate was printed; 2 a bad command line or a bad description (the
message names the file, line and field); 3 Spark was asked for (or needed) and could not
start.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from connmgr_evidence.bench.workloads.limits import TLS_BYTES_PER_CONNECTION, Scope
from connmgr_evidence.bench.workloads.report import headroom
from connmgr_evidence.bench.workloads.run import Cell

from .fleet_model import KIP_ALONE, MODELS, PROPOSAL, TODAY, ModelFigures, compose, figures
from .fleet_spec import FleetSpec, FleetSpecError, load_fleet

SPARK_THRESHOLD: Final = 2_000_000
"""Above this many clients (long-lived clients plus starts an hour, all classes), ``--engine
auto`` expands the fleet on Spark. In one process the expansion's memory grows with the
fleet (measured on the project's 2-core machine: 10,000 clients, eight client models: 7 s,
57 MB; 1,000,000 clients, two models: 35 s, 856 MB), so past about 2 million clients it no
longer fits a small machine, while Spark's driver stays small (1,000,000 clients: 99 MB, but
3.5 min on ``local[2]``: Spark pays where its executors are many)."""
PLAINTEXT_BYTES: Final = 250
"""Broker memory of a plaintext connection (the KIP-1015 discussion; TLS: 100 KB)."""
EXIT_OK, EXIT_USAGE, EXIT_SPARK = 0, 2, 3


def estimate(
    spec: FleetSpec,
    models: Sequence[str] = MODELS,
    *,
    engine: str = "auto",
    master: str | None = None,
) -> dict[str, Any]:
    """The estimate as the ``--json`` output has it (see ``docs/estimate.md``)."""
    started = time.perf_counter()
    use_spark = engine == "spark" or (engine == "auto" and spec.fleet_size > SPARK_THRESHOLD)
    results: dict[str, ModelFigures] = {}
    if use_spark:
        from connmgr_evidence.bench.runtime.spark import spark_session

        from .fleet_spark import spark_figures

        spark = spark_session(master, app="connmgr-estimate-fleet")
        for m in models:
            per, load = spark_figures(spark, compose(spec, m), spec.brokers)
            results[m] = ModelFigures(m, per, load)
    else:
        for m in models:
            results[m] = figures(spec, m)
    per_conn = TLS_BYTES_PER_CONNECTION if spec.tls else PLAINTEXT_BYTES
    limit = spec.provider.limit
    out: dict[str, Any] = {
        "fleet": spec.path,
        "brokers": spec.brokers,
        "clients": spec.fleet_size,
        "tls": spec.tls,
        "sasl": spec.sasl,
        "provider": {
            "name": spec.provider.name,
            "limit": limit.name,
            "scope": limit.scope.value,
            "connections": limit.connections,
            "attempts_per_s": None if limit.attempts_per_s >= 10**12 else limit.attempts_per_s,
            "ecku": spec.provider.ecku,
        },
        "engine": "spark" if use_spark else "numpy",
        "models": {},
    }
    for m, f in results.items():
        room = headroom(Cell("fleet", spec.brokers, m, spec.fleet_size, f.load, 0.0), limit)
        factor = _factor(f, spec)
        out["models"][m] = {
            "per_broker": [
                {
                    "broker": b.broker,
                    "peak_connections": b.peak_connections,
                    "peak_attempts_per_s": b.peak_attempts_per_s,
                    "handshakes_per_hour": b.handshakes,
                    "tls_memory_bytes": b.peak_connections * per_conn,
                }
                for b in f.brokers
            ],
            "busiest": {
                "peak_connections": f.load.peak_connections,
                "peak_attempts_per_s": f.load.peak_attempts,
                "p99_attempts_per_s": f.load.p99_attempts,
                "handshakes_per_hour": f.load.broker_handshakes,
            },
            "cluster": {
                "peak_connections": f.load.cluster_peak_connections,
                "peak_attempts_per_s": f.load.cluster_peak_attempts,
                "handshakes_per_hour": f.load.handshakes,
                "socket_seconds": f.load.socket_seconds,
            },
            "headroom": {
                "fits_times": factor,
                "max_clients": room.fleet,
                "more_clients": None if room.fleet < 0 else room.fleet - spec.fleet_size,
                "first_limit": room.binding,
                "over_limit": factor < 1.0,
            },
        }
    out["kip_alone"] = [
        {
            "label": label,
            "client": a,
            "against": b,
            "peak_connections": _ratio(results, a, b, "peak_connections"),
            "peak_attempts_per_s": _ratio(results, a, b, "peak_attempts"),
            "handshakes": _ratio(results, a, b, "handshakes"),
        }
        for label, a, b in KIP_ALONE
        if a in results and b in results
    ]
    out["wall_s"] = round(time.perf_counter() - started, 2)
    return out


def _factor(f: ModelFigures, spec: FleetSpec) -> float:
    """How many times the fleet fits within the provider's limits (below 1: over them)."""
    limit = spec.provider.limit
    load = f.load
    if limit.scope is Scope.BROKER:
        conns, attempts = load.peak_connections, load.peak_attempts
    else:
        conns, attempts = load.cluster_peak_connections, load.cluster_peak_attempts
    by_conns = math.inf if conns == 0 else limit.connections / conns
    by_attempts = math.inf if attempts == 0 else limit.attempts_per_s / attempts
    return round(min(by_conns, by_attempts), 3)


def _ratio(results: dict[str, ModelFigures], a: str, b: str, field: str) -> float | None:
    x, y = getattr(results[a].load, field), getattr(results[b].load, field)
    return None if y == 0 else round(x / y, 3)


def render(out: dict[str, Any]) -> str:
    """The readable tables of :func:`estimate`'s result."""
    models = list(out["models"])
    lines = [
        f"fleet {out['fleet']}: {out['clients']:,} clients and starts an hour on "
        f"{out['brokers']} brokers ({'TLS' if out['tls'] else 'plaintext'}, SASL "
        f"{out['sasl']}); {out['engine']}, {out['wall_s']} s",
        "",
    ]
    columns = [
        ("peak connections", "peak_connections", "{:,}"),
        ("peak connection attempts in one second", "peak_attempts_per_s", "{:,}"),
        ("handshakes in the hour", "handshakes_per_hour", "{:,}"),
        ("TLS memory at the peak (MB)", "tls_memory_bytes", "mb"),
    ]
    for title, key, fmt in columns:
        lines.append(f"{title}, per broker:")
        lines.append(_row(["broker", *models]))
        brokers = [b["broker"] for b in out["models"][models[0]]["per_broker"]]
        for i, b in enumerate(brokers):
            cells = []
            for m in models:
                v = out["models"][m]["per_broker"][i][key]
                cells.append(f"{v / 1e6:,.1f}" if fmt == "mb" else fmt.format(v))
            lines.append(_row([str(b), *cells]))
        lines.append("")
    p = out["provider"]
    rate = "no rate cap" if p["attempts_per_s"] is None else f"{p['attempts_per_s']:,}/s"
    lines.append(
        f"headroom against {p['limit']} ({p['scope']}: {p['connections']:,} connections, {rate}):"
    )
    lines.append(_row(["client", "fits x", "max clients", "more clients", "first limit hit"]))
    for m in models:
        h = out["models"][m]["headroom"]
        more = "-" if h["more_clients"] is None else f"{h['more_clients']:,}"
        lines.append(
            _row(
                [
                    m,
                    f"{h['fits_times']:.2f}" + (" OVER" if h["over_limit"] else ""),
                    f"{h['max_clients']:,}",
                    more,
                    h["first_limit"],
                ]
            )
        )
    if out["kip_alone"]:
        lines += ["", "each KIP alone (ratio to what it is compared with; below 1 saves):"]
        lines.append(_row(["", "against", "peak conns", "peak attempts/s", "handshakes"]))
        for k in out["kip_alone"]:
            lines.append(
                _row(
                    [
                        k["label"],
                        k["against"],
                        *(
                            "-" if k[f] is None else f"{k[f]:.2f}"
                            for f in ("peak_connections", "peak_attempts_per_s", "handshakes")
                        ),
                    ]
                )
            )
    lines += [
        "",
        "today: "
        + ", ".join(m for m in TODAY if m in models)
        + "; the proposal: "
        + ", ".join(m for m in PROPOSAL if m in models)
        + ". librdkafka has no model in the simulator: it is not estimated.",
    ]
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str]) -> str:
    return "  ".join(c.rjust(14) if i else c.ljust(30) for i, c in enumerate(cells))


def plot(out: dict[str, Any], path: Path) -> None:
    """Peak connections per broker, one bar per client model, with the provider's per-broker
    connection limit as a line (a per-eCKU limit is cluster-wide: not drawn per broker)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(out["models"])
    brokers = [b["broker"] for b in out["models"][models[0]]["per_broker"]]
    fig, ax = plt.subplots(figsize=(max(7.5, 0.6 * len(brokers) * len(models) / 3), 4.0))
    width = 0.8 / len(models)
    for k, m in enumerate(models):
        ys = [b["peak_connections"] for b in out["models"][m]["per_broker"]]
        ax.bar([x + k * width for x in range(len(brokers))], ys, width, label=m)
    p = out["provider"]
    if p["scope"] == Scope.BROKER.value:
        ax.axhline(p["connections"], color="black", linestyle="--", label=p["limit"])
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(brokers))], [str(b) for b in brokers])
    ax.set_xlabel("broker")
    ax.set_ylabel("peak connections")
    ax.set_title(f"{Path(out['fleet']).name}: peak connections per broker")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="connmgr estimate fleet",
        description="Estimate what a fleet costs its brokers under today's clients (Java "
        "4.x as measured, aiokafka) and under the proposal, and each KIP alone: per broker "
        "the peak connections, the peak connection attempts in one second, the handshakes "
        "in the hour and the TLS memory, and the headroom against the provider's limits "
        "(MSK IAM, Confluent Standard / Enterprise per eCKU, or self-managed "
        "max.connections). FILE is a TOML fleet description (docs/estimate.md; "
        "examples/fleet-*.toml). The model is the workload stage's "
        "(python -m connmgr_evidence.bench.workloads). Exit codes: 0 printed; 2 bad command "
        "line or "
        "description; 3 Spark could not start.",
    )
    parser.add_argument("file", type=Path, metavar="FILE", help="the fleet description (TOML)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="draw peak connections per broker")
    parser.add_argument(
        "--clients",
        default=",".join(MODELS),
        help=f"client models, comma-separated (default: all: {','.join(MODELS)})",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "numpy", "spark"),
        default="auto",
        help=f"auto: Spark above {SPARK_THRESHOLD:,} clients and starts an hour, else in "
        "this process",
    )
    parser.add_argument(
        "--master", default=None, help="Spark master (default local[*]); implies Spark use"
    )
    args = parser.parse_args(argv)
    models = [m for m in args.clients.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        parser.error(f"--clients: unknown {unknown}; valid: {', '.join(MODELS)}")
    engine = "spark" if args.master and args.engine == "auto" else args.engine
    try:
        spec = load_fleet(args.file)
    except FleetSpecError as exc:
        print(f"connmgr estimate fleet: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        out = estimate(spec, models, engine=engine, master=args.master)
    except FleetSpecError as exc:
        print(f"connmgr estimate fleet: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        from connmgr_evidence.bench.runtime.spark import SparkUnavailable

        if isinstance(exc, SparkUnavailable):
            print(f"connmgr estimate fleet: Spark: {exc}", file=sys.stderr)
            return EXIT_SPARK
        raise
    if args.plot:
        plot(out, args.plot)
    print(
        json.dumps(out, indent=1) if args.json else render(out), end="" if not args.json else "\n"
    )
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
