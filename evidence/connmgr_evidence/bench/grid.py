"""The benchmark grid: ``benchmarks/grid.toml`` read, checked and expanded into points.

A grid file has one section per stage of the main job (:mod:`connmgr_evidence.bench.stages`: each
stage declares its section, its keys and their types, and checks its values; :func:`sections`
gathers them) and a ``quick`` table of overrides (``"section.key" = value``) that
``connmgr bench --quick`` applies. Lists are axes; the
points of a section are the cross product of its axes. Every mistake (unknown section or
key, a wrong type, an empty axis, an unknown scenario, policy or client, a fleet that
cannot run) raises :class:`GridError` naming the file and the key. Points that cannot exist
(a coordinator separate from every leader on a cluster where every broker leads) are left
out and listed in :attr:`Grid.skipped`, so the report can say so.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from connmgr.errors import ConfigError
from connmgr_evidence.bench.gridfile import (
    COORDINATORS as COORDINATORS,
)
from connmgr_evidence.bench.gridfile import (
    DEFAULT_GRID as DEFAULT_GRID,
)
from connmgr_evidence.bench.gridfile import (
    GRID_SCENARIOS as GRID_SCENARIOS,
)
from connmgr_evidence.bench.gridfile import (
    IDLE as IDLE,
)
from connmgr_evidence.bench.gridfile import (
    POSITIVE as POSITIVE,
)
from connmgr_evidence.bench.gridfile import (
    REAL_CLIENTS as REAL_CLIENTS,
)
from connmgr_evidence.bench.gridfile import (
    Grid as Grid,
)
from connmgr_evidence.bench.gridfile import (
    GridError as GridError,
)
from connmgr_evidence.bench.gridfile import (
    RealPoint as RealPoint,
)
from connmgr_evidence.bench.gridfile import (
    Setting as Setting,
)
from connmgr_evidence.bench.gridfile import (
    SimPoint as SimPoint,
)
from connmgr_evidence.bench.gridfile import _check, _real_points, _sim_points
from connmgr_evidence.bench.gridfile import (
    check_known as check_known,
)
from connmgr_evidence.bench.gridfile import (
    is_java as is_java,
)
from connmgr_evidence.bench.gridfile import (
    is_real_client as is_real_client,
)
from connmgr_evidence.bench.gridfile import (
    java_version as java_version,
)
from connmgr_evidence.bench.gridfile import (
    parse_entry as parse_entry,
)
from connmgr_evidence.bench.gridfile import (
    real_jobs as real_jobs,
)


def sections() -> dict[str, dict[str, Setting]]:
    """Each grid section's keys and their types, as the stages declare them (each stage's
    ``section`` and ``settings``), in the stages' run order."""
    from connmgr_evidence.bench.stages import stages

    return {s.section: dict(s.settings) for s in stages()}


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
    known = sections()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise GridError(f"{source}: unknown sections {unknown}; expected {sorted(known)}")
    values: dict[str, dict[str, Any]] = {}
    for section, keys in known.items():
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
            if section not in known or key not in known[section]:
                raise GridError(f"{source}: [quick] overrides unknown key {dotted!r}")
            values[section][key] = _check(source, f"quick {dotted}", value, *known[section][key])
    _check_stages(source, values)
    sim_points, skipped = _sim_points(values["sim"])
    real_points, real_skipped = _real_points(values["real"])
    if not sim_points and not real_points:
        raise GridError(f"{source}: the grid is empty (every point was impossible)")
    return Grid(
        source, quick, values, tuple(sim_points), tuple(real_points), (*skipped, *real_skipped)
    )


def _check_stages(source: Path, values: Mapping[str, Mapping[str, Any]]) -> None:
    """Each stage checks its section's values (:meth:`~connmgr_evidence.bench.stages.Stage.check`);
    a :class:`ConfigError` becomes a :class:`GridError` naming the file."""
    from connmgr_evidence.bench.stages import stages

    for stage in stages():
        try:
            stage.check(values[stage.section])
        except GridError:
            raise
        except ConfigError as e:
            raise GridError(f"{source}: {e}") from e
