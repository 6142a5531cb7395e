"""Run every workload class on every cluster size under every client model, in worker
processes: one task per (class, brokers, client model), each drawing its clients from the
seed (nothing but names and numbers crosses to a worker)."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from connmgr_evidence.bench.workloads.classes import CLASSES, workload_class
from connmgr_evidence.bench.workloads.compose import (
    CLIENT_MODELS,
    MODEL_NAMED,
    BrokerLoad,
    measure,
    replica_starts,
    simulate,
)

BROKERS: Final = (3, 6, 30)
"""The cluster sizes the headroom is given for."""
TEMPLATES: Final = 30
CLASS_NAMES: Final = tuple(c.name for c in CLASSES)
MODEL_NAMES: Final = tuple(m.name for m in CLIENT_MODELS)
"""Clients drawn and simulated per class, cluster size and client model."""


@dataclass(frozen=True)
class Cell:
    """One class's fleet on one cluster under one client model."""

    workload: str
    brokers: int
    client: str
    fleet: int
    load: BrokerLoad
    cpu_s: float


def run_cell(workload: str, brokers: int, client: str, templates: int, seed: int) -> Cell:
    """Draw ``templates`` clients of ``workload`` over ``brokers`` brokers, simulate each under
    ``client``, and compose the class's fleet from them."""
    started = time.process_time()
    cls = workload_class(workload)
    model = MODEL_NAMED[client]
    lives = [simulate(cls.draw(i, brokers, seed), model) for i in range(templates)]
    drawn = [cls.draw(i, brokers, seed) for i in range(templates)]
    shifts = replica_starts(cls, drawn, cls.fleet, seed)
    load = measure(lives, shifts, brokers)
    return Cell(workload, brokers, client, cls.fleet, load, time.process_time() - started)


def _run(args: tuple[str, int, str, int, int]) -> Cell:
    return run_cell(*args)


def run_all(
    *,
    classes: Sequence[str] = CLASS_NAMES,
    brokers: Sequence[int] = BROKERS,
    clients: Sequence[str] = MODEL_NAMES,
    templates: int = TEMPLATES,
    seed: int = 0,
    processes: int = 2,
    progress: Callable[[int, int], None] | None = None,
) -> list[Cell]:
    """Every (class, brokers, client) cell, in that order. ``processes`` worker processes
    (1: in this one); ``progress(done, total)`` after each cell."""
    for name in classes:
        workload_class(name)  # an unknown class fails here, with the known ones named
    for client in clients:
        if client not in MODEL_NAMED:
            raise KeyError(f"unknown client model {client!r}; known: {', '.join(MODEL_NAMED)}")
    tasks = [(w, b, c, templates, seed) for w in classes for b in brokers for c in clients]
    cells: dict[tuple[str, int, str], Cell] = {}

    def collect(done: Iterable[Cell]) -> None:
        for cell in done:
            cells[(cell.workload, cell.brokers, cell.client)] = cell
            if progress is not None:
                progress(len(cells), len(tasks))

    if processes <= 1:
        collect(map(_run, tasks))
    else:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            collect(pool.imap_unordered(_run, tasks))
    return [cells[(w, b, c)] for w, b, c, _, _ in tasks]
