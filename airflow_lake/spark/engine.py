"""`SparkEngine`: the core's `Engine` protocol on Spark executors."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from airflow_lake.core.engine import group_slices

from .frames import group_results

T = TypeVar("T")
R = TypeVar("R")
log = logging.getLogger(__name__)


class SparkEngine:
    """Runs each task value as one Spark task (one partition per value, so every executor
    core takes work). Task values and results must be small: file-group operations, file
    paths, write stats; rows never travel through the driver. While a map runs, its tasks
    done / total are logged at INFO every `progress_seconds` (from Spark's status tracker).

    `spark` may be a function that starts the session: it is called when the engine first needs
    Spark, so work done on the driver alone (planning, the timeline) starts no SparkContext."""

    def __init__(self, spark: SparkSession | Callable[[], SparkSession], parallelism: int = 0,
                 progress_seconds: float = 10.0):
        self._spark, self._start = (spark, None) if isinstance(spark, SparkSession) else (None, spark)
        self.parallelism = parallelism
        self.progress_seconds = progress_seconds

    @property
    def spark(self) -> SparkSession:
        """The session (started now if it was left to the first use)."""
        if self._spark is None:
            self._spark = self._start()
        return self._spark

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item in executors; results in item order."""
        items = list(items)
        if not items:
            return []
        what = getattr(getattr(fn, "func", fn), "__name__", "task").strip("_<>").replace("_", " ")
        sc = self.spark.sparkContext
        group = f"airflow-lake-{uuid.uuid4().hex[:12]}"
        sc.setJobGroup(group, f"airflow-lake: {what}", interruptOnCancel=False)
        done = threading.Event()
        start = time.monotonic()
        log.info("%s: %d tasks", what, len(items))
        reporter = threading.Thread(target=self._report, args=(group, what, len(items), done, start), daemon=True)
        reporter.start()
        try:
            slices = min(len(items), self.parallelism) if self.parallelism else len(items)
            rdd = sc.parallelize(list(enumerate(items)), slices)
            out = rdd.map(lambda pair: (pair[0], fn(pair[1]))).collect()
        finally:
            done.set()
            sc.setLocalProperty("spark.jobGroup.id", None)  # later jobs of this thread are not in the group
        log.info("%s: %d/%d done (%.1f s)", what, len(items), len(items), time.monotonic() - start)
        return [r for _, r in sorted(out, key=lambda pair: pair[0])]

    def write_groups(self, fn: Callable[[pa.Table], R], rows: DataFrame | pa.Table, key: str,
                     groups: int = 0) -> list[R]:
        """Apply `fn` to the rows of each value of `key`: a DataFrame's groups in executors
        (`group_results`: hashed by `key`, one shuffle partition per group when `groups` is
        given), the results pickled back; an Arrow table's groups as tasks of `map`."""
        if isinstance(rows, pa.Table):
            return self.map(fn, group_slices(rows, key))
        return group_results(fn, rows, key, groups)

    def owns(self, data: object) -> bool:
        """A Spark DataFrame is written by `write_frame`, its rows staying in executors."""
        return isinstance(data, DataFrame)

    def write_frame(self, table, data: DataFrame, operation: str, extra_metadata: dict[str, str] | None):
        """Write the DataFrame to `table` as one commit (`airflow_lake.spark.write`'s distributed
        path); a `WriteResult`."""
        from .write import write_frame

        return write_frame(table, data, operation, extra_metadata)

    def _report(self, group: str, what: str, total: int, done: threading.Event, start: float) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not done.wait(self.progress_seconds):
            finished = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else []:
                    stage = tracker.getStageInfo(stage_id)
                    finished += stage.numCompletedTasks if stage else 0
            log.info("%s: %d/%d done (%.1f s)", what, min(finished, total), total, time.monotonic() - start)

