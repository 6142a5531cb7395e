"""The benchmark grid: ``benchmarks/grid.toml`` read, checked and expanded into points.

A grid file has one section per kind of run (``sim``, ``real``, ``throughput``, ``micro``,
``sweep``, ``linger``, ``fleet``, ``life``, ``properties``) and a ``quick`` table of overrides
(``"section.key" = value``) that ``connmgr bench --quick`` applies. Lists are axes; the
points of a section are the cross product of its axes. Every mistake (unknown section or
key, a wrong type, an empty axis, an unknown scenario, policy or client, a fleet that
cannot run) raises :class:`GridError` naming the file and the key. Points that cannot exist
(a coordinator separate from every leader on a cluster where every broker leads) are left
out and listed in :attr:`Grid.skipped`, so the report can say so.
"""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError, UnknownName
from connmgr.policies import POLICIES
from connmgr.sim.scenarios import SCENARIOS, get_scenario
from connmgr_evidence.bench.fleetplan import FleetSettings
from connmgr_evidence.bench.report.metrics import PAIRS
from connmgr_evidence.bench.results.rows import point_text
from connmgr_evidence.java.patched import KAFKA_VERSION, PATCHED_SUFFIX

DEFAULT_GRID = Path(__file__).resolve().parents[3] / "benchmarks" / "grid.toml"
"""The grid in a source checkout (``benchmarks/grid.toml``)."""

REAL_CLIENTS = ("proposed", "aiokafka", "librdkafka")
"""Real clients besides ``java-<kafka-clients version>`` (a release, or ``java-4.3.1-patched``,
the project's patched kafka-clients): the proposal, stock aiokafka and confluent-kafka's
librdkafka."""


class GridError(ConfigError):
    """The grid file is missing, malformed, or asks for something that does not exist."""


# Each section's keys, with the type and (for axes) whether a list is expected.
_SECTIONS: dict[str, dict[str, tuple[type, bool]]] = {
    "sim": {
        "scenarios": (str, True),
        "policies": (str, True),
        "brokers": (int, True),
        "bootstrap_size": (int, True),
        "leaders": (int, True),
        "partitions": (int, True),
        "topics": (int, True),
        "coordinator": (str, True),
        "idle": (str, True),
        "duration_ms": (int, False),
        "repeats": (int, False),
        "seed": (int, False),
        "named": (str, True),
        "workers": (int, False),
    },
    "real": {
        "scenarios": (str, True),
        "clients": (str, True),
        "brokers": (int, True),
        "coordinator": (str, True),
        "rtt_ms": (float, True),
        "records": (int, False),
        "repeats": (int, False),
        "seed": (int, False),
    },
    "throughput": {
        "brokers": (int, False),
        "records": (int, False),
        "rounds": (int, False),
        "rtt_ms": (float, True),
        "linger_ms": (int, False),
    },
    "micro": {"rounds": (int, False)},
    "sweep": {"sizes": (int, True), "seed": (int, False)},
    "linger": {
        "scenarios": (str, True),
        "values_ms": (int, True),
        "baselines": (str, True),
        "duration_ms": (int, False),
        "repeats": (int, False),
        "seed": (int, False),
    },
    "fleet": {
        "clients": (int, False),
        "brokers": (int, False),
        "restarts": (int, False),
        "down_ms": (int, False),
        "bucket_ms": (int, False),
        "seed": (int, False),
    },
    "tls": {
        "brokers": (int, False),
        "rtt_ms": (float, True),
        "connections": (int, False),
        "starts": (int, False),
        "java": (int, False),
    },
    "life": {
        "scenarios": (str, True),
        "clients": (str, True),
        "life_s": (int, False),
        "time_scale": (int, False),
        "records": (int, False),
        "repeats": (int, False),
        "concurrency": (int, False),
        "seed": (int, False),
    },
    "properties": {
        "baselines": (str, True),
        "examples": (int, False),
        "steps": (int, False),
        "mutants": (str, True),
        "mutant_examples": (int, False),
        "shrink": (str, False),
        "workers": (int, False),
    },
}
_GRID_SCENARIOS = ("big-producer", "big-consumer")
_IDLE = {"default": "0", "disabled": "1"}


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


def load_grid(path: Path | None = None, *, quick: bool = False) -> Grid:
    """Read, check and expand the grid at ``path`` (``benchmarks/grid.toml`` by default)."""
    source = path or DEFAULT_GRID
    try:
        raw = tomllib.loads(source.read_text())
    except FileNotFoundError:
        raise GridError(f"{source}: no such grid file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GridError(f"{source}: cannot read the grid file ({e})") from e
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{source}: not valid TOML ({e})") from e
    overrides = raw.pop("quick", {})
    unknown = sorted(set(raw) - set(_SECTIONS))
    if unknown:
        raise GridError(f"{source}: unknown sections {unknown}; expected {sorted(_SECTIONS)}")
    values: dict[str, dict[str, Any]] = {}
    for section, keys in _SECTIONS.items():
        table = raw.get(section)
        if not isinstance(table, dict):
            raise GridError(f"{source}: missing section [{section}]")
        values[section] = {
            key: _check(source, f"{section}.{key}", table.get(key), *spec)
            for key, spec in keys.items()
        }
        extra = sorted(set(table) - set(keys))
        if extra:
            raise GridError(f"{source}: [{section}] has unknown keys {extra}")
    if quick:
        if not isinstance(overrides, dict):
            raise GridError(f'{source}: [quick] must be a table of "section.key" = value')
        for dotted, value in overrides.items():
            section, _, key = dotted.partition(".")
            if section not in _SECTIONS or key not in _SECTIONS[section]:
                raise GridError(f"{source}: [quick] overrides unknown key {dotted!r}")
            values[section][key] = _check(
                source, f"quick {dotted}", value, *_SECTIONS[section][key]
            )
    _check_names(source, values)
    sim_points, skipped = _sim_points(values["sim"])
    real_points, real_skipped = _real_points(values["real"])
    if not sim_points and not real_points:
        raise GridError(f"{source}: the grid is empty (every point was impossible)")
    return Grid(
        source, quick, values, tuple(sim_points), tuple(real_points), (*skipped, *real_skipped)
    )


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
    positive = {"brokers", "leaders", "topics", "bootstrap_size", "records", "rounds", "sizes"}
    positive |= {"repeats", "duration_ms", "examples", "steps", "mutant_examples", "workers"}
    positive |= {"life_s", "time_scale", "concurrency"}
    if key.rsplit(".", 1)[-1] in positive and any(i < 1 for i in items):
        raise GridError(f"{source}: {key} = {value!r} must be >= 1")
    return list(items) if is_axis else value


def _check_names(source: Path, values: Mapping[str, Mapping[str, Any]]) -> None:
    # Imported here: the property stage needs Hypothesis, the rest of the grid does not.
    from connmgr.testing.evidence import BASELINES, MUTANTS, Shrinking

    def need(key: str, given: Sequence[str], known: Sequence[str]) -> None:
        bad = [g for g in given if g not in known]
        if bad:
            raise GridError(f"{source}: {key} has unknown {bad}; choose from {list(known)}")

    need("sim.scenarios", values["sim"]["scenarios"], _GRID_SCENARIOS)
    need("real.scenarios", values["real"]["scenarios"], _GRID_SCENARIOS)
    need("sim.named", values["sim"]["named"], sorted(SCENARIOS))
    need("sim.policies", values["sim"]["policies"], list(POLICIES))
    need("properties.baselines", values["properties"]["baselines"], list(BASELINES))
    need("properties.mutants", values["properties"]["mutants"], list(MUTANTS))
    need("properties.shrink", [values["properties"]["shrink"]], [s.value for s in Shrinking])
    need("sim.idle", values["sim"]["idle"], list(_IDLE))
    baselines = [p for p in POLICIES if p != "proposed"]
    need("linger.baselines", values["linger"]["baselines"], baselines)
    for entry in values["linger"]["scenarios"]:
        _check_linger_entry(source, entry)
    _check_fleet(source, values["fleet"])
    _check_tls(source, values["tls"])
    need("sim.coordinator", values["sim"]["coordinator"], ["auto", "shared", "separate"])
    need("real.coordinator", values["real"]["coordinator"], ["auto", "shared", "separate"])
    if "proposed" not in values["sim"]["policies"]:
        raise GridError(f"{source}: sim.policies must include proposed (what is compared)")
    clients = values["real"]["clients"]
    bad = [c for c in clients if c not in REAL_CLIENTS and not _is_java(c)]
    if bad:
        raise GridError(
            f"{source}: real.clients has unknown {bad}; choose from proposed, aiokafka, "
            "librdkafka, java-<kafka-clients version> (e.g. java-4.4.0) or "
            f"java-{KAFKA_VERSION}{PATCHED_SUFFIX}"
        )
    if "proposed" not in clients:
        raise GridError(f"{source}: real.clients must include proposed (what is compared)")
    for subject, baseline in PAIRS:
        if subject in clients and baseline not in clients:
            raise GridError(
                f"{source}: real.clients has {subject} without {baseline}, the client it is "
                "compared with run by run"
            )
    _check_life(source, values["life"])


def _check_tls(source: Path, tls: Mapping[str, Any]) -> None:
    # The brokers' CPU per handshake is measured at RTT 0, and the cost is a line through
    # the medians at two RTTs at least.
    if 0 not in tls["rtt_ms"] or len(tls["rtt_ms"]) < 2:
        raise GridError(
            f"{source}: tls.rtt_ms must include 0 and one more RTT, got {tls['rtt_ms']}"
        )
    if tls["java"] not in (0, 1):
        raise GridError(f"{source}: tls.java must be 0 or 1, got {tls['java']!r}")
    for key in ("brokers", "connections", "starts"):
        if tls[key] < 1:
            raise GridError(f"{source}: tls.{key} must be >= 1, got {tls[key]!r}")


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


def _check_linger_entry(source: Path, entry: str) -> None:
    """A ``[linger]`` scenario entry names a scenario and parameters it can be built with."""
    try:
        name, params = parse_entry(entry)
        get_scenario(name).spec(params)
    except (ConfigError, UnknownName) as e:
        raise GridError(f"{source}: linger.scenarios {entry!r}: {e}") from e


def _check_life(source: Path, values: Mapping[str, Any]) -> None:
    """The ``[life]`` section's clients exist and include the proposal, and each scenario
    entry is a scenario with parameters and run options it can be run with (a rolling
    restart that fits the life)."""
    from connmgr_evidence.realrun.run import RUN_OPTIONS, check_life_settings

    bad = [c for c in values["clients"] if c not in REAL_CLIENTS and not _is_java(c)]
    if bad or "proposed" not in values["clients"]:
        raise GridError(
            f"{source}: life.clients must include proposed and name only proposed, aiokafka, "
            f"librdkafka or java-<kafka-clients version> (unknown: {bad})"
        )
    for entry in values["scenarios"]:
        try:
            name, params = parse_entry(entry)
            rest = {k: v for k, v in params.items() if k not in RUN_OPTIONS}
            get_scenario(name).spec(rest)
            check_life_settings(
                name,
                {
                    **params,
                    "life_s": str(values["life_s"]),
                    "time_scale": str(values["time_scale"]),
                },
            )
        except (ConfigError, UnknownName) as e:
            raise GridError(f"{source}: life.scenarios {entry!r}: {e}") from e


def _check_fleet(source: Path, values: Mapping[str, Any]) -> None:
    """The ``[fleet]`` section describes a fleet that can run (restarts fit the hour...)."""
    try:
        FleetSettings.from_values(values)
    except ConfigError as e:
        raise GridError(f"{source}: [fleet] {e}") from e


def _is_java(client: str) -> bool:
    """``java-<release>`` (digits and dots), or the patched release ``java-4.3.1-patched``."""
    version = java_version(client)
    if version is None:
        return False
    if version.endswith(PATCHED_SUFFIX):
        # Only the release the patch applies to has a patched build.
        return version == KAFKA_VERSION + PATCHED_SUFFIX
    return all(p.isdigit() for p in version.split(".")) and "." in version


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
            params["client_idle_disabled"] = _IDLE[idle]
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
