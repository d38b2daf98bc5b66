"""The executors' Python worker daemon for local masters (`spark.python.daemon.module`, set by
`session()`): pyspark's own daemon, started on the installed, compiled pyspark when it is the
same code as Spark's zip (`pythonpath`), so neither the daemon nor the workers it forks compile
pyspark from source; and its reused workers freeze what outlives each task (`freezing`)."""

from __future__ import annotations

import gc
from collections.abc import Callable

from airflow_lake.spark.pythonpath import prefer_installed_pyspark


def freezing(worker: Callable[..., int]) -> Callable[..., int]:
    """pyspark's per-task `worker(sock, authenticated)`, after which the objects still alive are
    moved out of the collector's reach (`gc.freeze()`) once the task's garbage is collected.

    A reused worker runs a full `gc.collect()` after every task (pyspark's daemon), which walks
    every object the worker holds: the modules it imported (pyspark, pyarrow, airflow-lake) and
    their data. That was about 12 ms of CPU per task, 85-90% of a small task's Python time; a
    write runs dozens of tasks. Frozen, each collection walks only what the last task made.
    (Objects frozen are still freed when no longer referenced; only a reference cycle formed
    later among them waits for the worker's exit.)"""

    def run(sock, authenticated: bool) -> int:
        code = worker(sock, authenticated)  # (a worker that failed exits after it)
        gc.collect()
        gc.freeze()
        return code

    return run


if __name__ == "__main__":
    prefer_installed_pyspark()
    from pyspark import daemon

    daemon.worker = freezing(daemon.worker)
    daemon.manager()
