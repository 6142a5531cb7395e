"""The process pools of the main job's CPU-bound stages (simulated grid, linger, properties).

They run beside the scaled real lives, which run on a thread of the same process
(:class:`~connmgr_evidence.bench.stages.Phase`). So the pools are *spawned*, not forked (that thread
may hold a lock at the moment of a fork), and their workers run at :data:`NICE` so that the lives'
clients get the CPU when they need it: nothing in a life is timed, but its clients must keep
their heartbeats.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

NICE = 10
"""How much lower than the main job the pools' workers run."""


def background_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes at :data:`NICE`."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=os.nice,
        initargs=(NICE,),
    )


def pooled_map(
    work: Callable[[Any], T],
    jobs: Sequence[Any],
    workers: int,
    progress: Callable[[Iterator[T], int], Iterator[T]] = lambda it, _: it,
) -> list[T]:
    """``[work(job) for job in jobs]``, in order, on ``workers`` processes (in this process
    when ``workers`` is 1); ``progress`` wraps the results as they come (a progress bar).

    For seeded runs in virtual time: each result is the same whatever process computed it.
    ``work`` must be a module-level function (it is pickled by reference).
    """
    if workers <= 1 or len(jobs) <= 1:
        return list(progress(map(work, jobs), len(jobs)))
    with background_pool(workers) as pool:
        # Chunks of a few dozen keep the pickling overhead small next to the runs.
        chunk = max(1, min(32, len(jobs) // (8 * workers)))
        return list(progress(pool.map(work, jobs, chunksize=chunk), len(jobs)))


def bar(items: Iterable[T], total: int, desc: str, show: bool) -> Iterator[T]:
    """``items`` through a progress bar named ``desc`` (none unless ``show``)."""
    from tqdm import tqdm

    yield from tqdm(items, total=total, desc=desc, unit="run", disable=not show, leave=True)


def pooled(
    work: Callable[[Any], T], jobs: Sequence[Any], desc: str, show: bool, workers: int
) -> list[T]:
    """:func:`pooled_map` with a progress bar named ``desc``."""
    return pooled_map(work, jobs, workers, lambda it, total: bar(it, total, desc, show))
