"""The grid file's types and checks that stages use: a stage's settings (:class:`Setting`),
the expanded :class:`Grid`, and the parsers of its entries. :mod:`connmgr_evidence.bench.grid`
loads a grid file with them and the stages' sections; the stages import this module, not
that one, so the loader depends on the stages and never the other way round."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from connmgr.errors import ConfigError
from connmgr.sim.scenarios import get_scenario
from connmgr_evidence.bench.report.metrics import PAIRS
from connmgr_evidence.bench.results.rows import point_text
from connmgr_evidence.java.patched import KAFKA_VERSION, PATCHED_SUFFIX

DEFAULT_GRID = Path(__file__).resolve().parents[3] / "benchmarks" / "grid.toml"
"""The grid in a source checkout (``benchmarks/grid.toml``)."""

REAL_CLIENTS = ("proposed", "aiokafka", "librdkafka")
"""Real clients besides ``java-<kafka-clients version>`` (a release, or ``java-4.3.1-patched``,
the project's patched kafka-clients): the proposal, stock aiokafka and confluent-kafka's
librdkafka."""


class Setting(NamedTuple):
    """One key of a stage's grid section: the type of its value, and whether the value is
    an axis (a non-empty list of that type; the section's points are the cross product of
    its axes) or one value. Numbers are never negative, and a key named in
    :data:`connmgr_evidence.bench.grid.POSITIVE` is at least 1."""

    kind: type
    axis: bool = False


class GridError(ConfigError):
    """The grid file is missing, malformed, or asks for something that does not exist."""


GRID_SCENARIOS = ("big-producer", "big-consumer")
"""The scenarios whose parameters the ``[sim]`` and ``[real]`` axes are."""
IDLE = {"default": "0", "disabled": "1"}
"""``[sim] idle`` -> the ``client_idle_disabled`` parameter."""
COORDINATORS = ("auto", "shared", "separate")
"""``coordinator`` of ``[sim]`` and ``[real]``."""
POSITIVE = frozenset(
    {"brokers", "leaders", "topics", "bootstrap_size", "records", "rounds", "sizes"}
    | {"repeats", "duration_ms", "examples", "steps", "mutant_examples", "workers"}
    | {"life_s", "time_scale", "concurrency"}
)
"""Keys (in any section) whose values must be at least 1."""


@dataclass(frozen=True)
class SimPoint:
    """One simulated point: a scenario with parameters (``--set`` strings), run by every
    policy of the grid, ``repeats`` times."""

    scenario: str
    params: Mapping[str, str]
    idle_disabled: bool

    @property
    def point(self) -> str:
        return point_text(self.scenario, self.params)


@dataclass(frozen=True)
class RealPoint:
    """One real-client point: a scenario with parameters, run by every client of the grid."""

    scenario: str
    params: Mapping[str, str]
    rtt_ms: float

    @property
    def point(self) -> str:
        return point_text(self.scenario, self.params)


@dataclass(frozen=True)
class Grid:
    source: Path
    quick: bool
    values: Mapping[str, Mapping[str, Any]]
    sim_points: tuple[SimPoint, ...]
    real_points: tuple[RealPoint, ...]
    skipped: tuple[str, ...] = field(default=())

    def get(self, section: str, key: str) -> Any:
        return self.values[section][key]

    @property
    def policies(self) -> tuple[str, ...]:
        return tuple(self.get("sim", "policies"))

    @property
    def clients(self) -> tuple[str, ...]:
        return tuple(self.get("real", "clients"))

    @property
    def shown_source(self) -> str:
        """The grid file as a report shows it: relative to the checkout when it is the
        checkout's, so that a committed report names no path of the machine it ran on."""
        try:
            return self.source.resolve().relative_to(DEFAULT_GRID.parents[1]).as_posix()
        except ValueError:
            return str(self.source)

    def describe(self) -> str:
        """A few lines saying how big the grid is."""
        sim_runs = len(self.sim_points) * len(self.policies) * self.get("sim", "repeats")
        real_runs = len(self.real_points) * len(self.clients) * self.get("real", "repeats")
        turns = 2 * self.get("throughput", "rounds") * len(self.get("throughput", "rtt_ms"))
        return (
            f"grid {self.shown_source}{' (--quick)' if self.quick else ''}: "
            f"{len(self.sim_points)} simulated points x {len(self.policies)} policies x "
            f"{self.get('sim', 'repeats')} repeats = {sim_runs} simulations; "
            f"{len(self.real_points)} real points x {len(self.clients)} clients x "
            f"{self.get('real', 'repeats')} repeats = {real_runs} real runs; "
            f"{turns} throughput turns; sweep sizes {list(self.get('sweep', 'sizes'))}; "
            f"property runs {len(self.get('properties', 'baselines'))} x "
            f"{self.get('properties', 'examples'):,} examples, "
            f"{len(self.get('properties', 'mutants'))} mutant searches; "
            f"linger {len(self.get('linger', 'scenarios'))} scenarios x "
            f"({len(self.get('linger', 'values_ms'))} values + "
            f"{len(self.get('linger', 'baselines'))} baselines) x "
            f"{self.get('linger', 'repeats')} repeats; "
            f"fleet {self.get('fleet', 'clients'):,} clients x "
            f"{self.get('fleet', 'brokers'):,} brokers, {self.get('fleet', 'restarts')} "
            f"restarted; TLS {self.get('tls', 'connections')} handshakes x 3 protocols x "
            f"{len(self.get('tls', 'rtt_ms'))} RTTs on {self.get('tls', 'brokers')} real brokers; "
            f"life {len(self.get('life', 'scenarios'))} scenarios x "
            f"{len(self.get('life', 'clients'))} clients x {self.get('life', 'repeats')} "
            f"repeats, {self.get('life', 'life_s')} s each at scale "
            f"{self.get('life', 'time_scale')}"
            + (f"; {len(self.skipped)} impossible points skipped" if self.skipped else "")
        )


def real_jobs(grid: Grid) -> list[tuple[RealPoint, str, int]]:
    """The real runs in the order they run: per point, per repeat, every client of the grid,
    so that the clients of a pair run one after the other at each repeat. A pair of
    :data:`~connmgr_evidence.bench.report.metrics.PAIRS` whose two clients are both in the grid
    takes turns
    going first (in the grid's order at even repeats, swapped at odd ones), so that running
    second (the first one's files already in the page cache) falls on both."""
    jobs = []
    for point in grid.real_points:
        for r in range(grid.get("real", "repeats")):
            order = list(grid.clients)
            for subject, baseline in PAIRS:
                if r % 2 and subject in order and baseline in order:
                    i, j = order.index(subject), order.index(baseline)
                    order[i], order[j] = order[j], order[i]
            jobs += [(point, client, r) for client in order]
    return jobs


def java_version(client: str) -> str | None:
    """``"2.1.0"`` for the client ``"java-2.1.0"``, None for any other client."""
    return client.removeprefix("java-") if client.startswith("java-") else None


def _check(source: Path, key: str, value: Any, kind: type, is_axis: bool) -> Any:
    if value is None:
        raise GridError(f"{source}: {key} is missing")
    items = value if is_axis else [value]
    # Every axis needs a value; the named scenarios may be none.
    if is_axis and (not isinstance(value, list) or (not value and key != "sim.named")):
        raise GridError(f"{source}: {key} must be a non-empty list, got {value!r}")
    for item in items:
        ok = (
            isinstance(item, int | float) and not isinstance(item, bool)
            if kind is float
            else isinstance(item, kind) and not isinstance(item, bool)
        )
        if not ok:
            raise GridError(f"{source}: {key} = {item!r} is not {kind.__name__}")
        if kind in (int, float) and item < 0:
            raise GridError(f"{source}: {key} = {item!r} must be >= 0")
    if is_axis and len({repr(i) for i in items}) != len(items):
        raise GridError(f"{source}: {key} repeats a value: {value!r}")
    if key.rsplit(".", 1)[-1] in POSITIVE and any(i < 1 for i in items):
        raise GridError(f"{source}: {key} = {value!r} must be >= 1")
    return list(items) if is_axis else value


def check_known(key: str, given: Sequence[str], known: Sequence[str]) -> None:
    """A :class:`ConfigError` if the grid's ``key`` names anything not in ``known``."""
    bad = [g for g in given if g not in known]
    if bad:
        raise ConfigError(f"{key} has unknown {bad}; choose from {list(known)}")


def parse_entry(entry: str) -> tuple[str, dict[str, str]]:
    """A scenario entry of the grid (``[linger]``, ``[life]``): ``"big-producer brokers=100"``
    -> ``("big-producer", {"brokers": "100"})``; a :class:`ConfigError` for a word that is not
    ``key=value``."""
    name, *words = entry.split()
    params: dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"scenario entry {entry!r}: {word!r} is not key=value")
        params[key] = value
    return name, params


def is_java(client: str) -> bool:
    """``java-<release>`` (digits and dots), or the patched release ``java-4.3.1-patched``."""
    version = java_version(client)
    if version is None:
        return False
    if version.endswith(PATCHED_SUFFIX):
        # Only the release the patch applies to has a patched build.
        return version == KAFKA_VERSION + PATCHED_SUFFIX
    return all(p.isdigit() for p in version.split(".")) and "." in version


def is_real_client(client: str) -> bool:
    """A real client of the grid: one of :data:`REAL_CLIENTS` or a Java release."""
    return client in REAL_CLIENTS or is_java(client)


def _possible(scenario: str, params: Mapping[str, str]) -> str | None:
    """None if the point can be built, else why not."""
    try:
        get_scenario(scenario).spec(params)
    except ConfigError as e:
        return str(e)
    return None


def _sim_points(sim: Mapping[str, Any]) -> tuple[list[SimPoint], list[str]]:
    points: list[SimPoint] = []
    skipped: list[str] = []
    axes = ("brokers", "bootstrap_size", "leaders", "partitions", "topics", "coordinator", "idle")
    for scenario in sim["scenarios"]:
        for combo in itertools.product(*(sim[a] for a in axes)):
            chosen = dict(zip(axes, combo, strict=True))
            idle = chosen.pop("idle")
            params = {k: str(v) for k, v in chosen.items()}
            params["client_idle_disabled"] = IDLE[idle]
            params["duration_ms"] = str(sim["duration_ms"])
            why = _possible(scenario, params)
            if why:
                skipped.append(f"sim {point_text(scenario, params)}: {why}")
                continue
            points.append(SimPoint(scenario, params, idle == "disabled"))
    for name in sim["named"]:
        spec = get_scenario(name).spec({})
        idle = spec.policy_defaults.get("connections_max_idle_ms") == "-1"
        points.append(SimPoint(name, {}, idle))
    return points, skipped


def _real_points(real: Mapping[str, Any]) -> tuple[list[RealPoint], list[str]]:
    points: list[RealPoint] = []
    skipped: list[str] = []
    for scenario in real["scenarios"]:
        for brokers, coordinator, rtt in itertools.product(
            real["brokers"], real["coordinator"], real["rtt_ms"]
        ):
            params = {
                "brokers": str(brokers),
                "coordinator": coordinator,
                "rtt_ms": str(float(rtt)),
            }
            why = _possible(scenario, params)
            if why:
                skipped.append(f"real {point_text(scenario, params)}: {why}")
                continue
            points.append(RealPoint(scenario, params, float(rtt)))
    return points, skipped
