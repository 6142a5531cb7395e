"""One Spark job of the main job, watched: its job group, a progress callback polled from
Spark's status tracker, and a Spark failure turned into the job's one-line error.

The sweep and the fleet view each run their work as one Spark job inside
:func:`spark_job`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

from connmgr_evidence.bench.runtime.spark import job_failure

Progress = Callable[[int, int], None]
"""``progress(done, total)``: tasks of a watched Spark job completed, out of all."""

_GROUPS = itertools.count(1)


@contextlib.contextmanager
def spark_job(sc: Any, description: str, progress: Progress | None) -> Iterator[None]:
    """Run the body's Spark actions as one job group named after ``description``, with
    ``progress`` called about once a second while its tasks run. A failure Spark reports
    (py4j or pyspark) becomes :class:`~connmgr_evidence.bench.runtime.spark.SparkJobFailed`; the
    group is
    cleared and the watcher stopped however the body ends."""
    group = f"connmgr-{next(_GROUPS)}-{id(sc)}"
    sc.setJobGroup(group, description, interruptOnCancel=False)
    watcher = ProgressWatcher(sc, group, progress) if progress is not None else None
    try:
        yield
    except Exception as e:  # py4j carries Spark's failures; say which task error it was
        if type(e).__module__.startswith(("py4j", "pyspark")):
            raise job_failure(e) from e
        raise
    finally:
        if watcher is not None:
            watcher.stop()
        sc.setLocalProperty("spark.jobGroup.id", None)


class ProgressWatcher:
    """Polls Spark's status tracker for the tasks of one job group, in a daemon thread, and
    calls ``progress(done, total)`` when they change (the sweep's and the fleet's bars)."""

    def __init__(self, sc: Any, group: str, progress: Progress, every_s: float = 1.0) -> None:
        self._sc = sc
        self._group = group
        self._progress = progress
        self._every_s = every_s
        self._stopped = threading.Event()
        self._last: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._run, name="sweep-progress", daemon=True)
        self._thread.start()

    def _tasks(self) -> tuple[int, int]:
        tracker = self._sc.statusTracker()
        done = total = 0
        for job_id in tracker.getJobIdsForGroup(self._group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
                    total += stage.numTasks
        return done, total

    def _report(self) -> None:
        now = self._tasks()
        if now != self._last and now[1] > 0:
            self._last = now
            self._progress(*now)

    def _run(self) -> None:
        while not self._stopped.wait(self._every_s):
            self._report()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()
        self._report()  # the final count, once the job is over
