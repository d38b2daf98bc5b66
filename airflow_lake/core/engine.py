"""Engines run per-file-group tasks: `LocalEngine` uses threads (pyarrow releases the GIL).

Functions handed to an engine are module-level (or partials of them) over picklable values
(a `TableContext`, task values), never closures over driver state: another engine runs them
in other processes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item; results in item order; the first error propagates."""

    def write_groups(self, fn: Callable[[pa.Table], R], rows: Any, key: str) -> list[R]:
        """Apply `fn` to the rows of each value of the integer column `key` (one call per
        group, all its rows); results in no particular order. `rows` is the engine's frame:
        an Arrow table locally, a DataFrame on Spark."""

    def owns(self, data: Any) -> bool:
        """Whether `data` is this engine's own frame (a Spark DataFrame on Spark), which
        `Table.write` hands to `write_frame` instead of reading it as Arrow."""

    def write_frame(self, table: Any, data: Any, operation: str, extra_metadata: dict[str, str] | None) -> Any:
        """Write a frame this engine `owns` to `table` as one commit; a `WriteResult`."""


# a task this long sends the tasks after it to the thread pool (`LocalEngine.map`)
QUICK_TASK_SECONDS = 0.005


class LocalEngine:
    """Runs tasks in a thread pool of `parallelism` workers (default: the CPU count), quick
    ones in the calling thread (`map`)."""

    def __init__(self, parallelism: int = 0):
        self.parallelism = parallelism or os.cpu_count() or 1
        self._slow = True  # whether the last task measured took `QUICK_TASK_SECONDS` or longer

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Tasks run in the pool after a task of at least `QUICK_TASK_SECONDS`, else in this
        thread (until one takes that long: the rest then go to the pool). Threads gain
        nothing on tasks that short, a small table's: handing the GIL between them costs more
        than they overlap (the write model tests spent 15% more CPU in threads)."""
        items = list(items)
        if len(items) <= 1 or self.parallelism == 1:
            return [fn(i) for i in items]
        results: list[R] = []
        if not self._slow:
            for item in items:
                start = time.perf_counter()
                results.append(fn(item))
                if time.perf_counter() - start >= QUICK_TASK_SECONDS:
                    self._slow = True
                    break
        rest = items[len(results) :]
        if rest:
            took: list[float] = []
            with ThreadPoolExecutor(min(self.parallelism, len(rest))) as pool:
                results.extend(pool.map(partial(_timed, fn, took), rest))
            self._slow = max(took) >= QUICK_TASK_SECONDS
        return results

    def write_groups(self, fn: Callable[[pa.Table], R], rows: pa.Table, key: str) -> list[R]:
        """The table ordered by `key` (a stable sort: a group's rows keep their order; no
        gather when it is already ordered), each group a zero-copy slice; results in key order."""
        return self.map(fn, group_slices(rows, key, self))

    def owns(self, data: Any) -> bool:
        """No frame of its own: every input is read as Arrow."""
        return False

    def write_frame(self, table: Any, data: Any, operation: str, extra_metadata: dict[str, str] | None) -> Any:
        raise TypeError("LocalEngine owns no frame type; Table.write reads its input as Arrow")


def _timed(fn: Callable[[T], R], took: list[float], item: T) -> R:
    start = time.perf_counter()
    try:
        return fn(item)
    finally:
        took.append(time.perf_counter() - start)


def group_slices(rows: pa.Table, key: str, engine: Engine | None = None) -> list[pa.Table]:
    """`rows` cut into one slice per value of the integer column `key`, in key order (columns
    gathered by `engine` when the rows must be reordered)."""
    codes = rows.column(key).to_numpy()
    if not len(codes):
        return []
    if (codes[1:] < codes[:-1]).any():
        order = pa.array(np.argsort(codes, kind="stable"))
        codes = codes[order.to_numpy()]
        columns = engine.map(partial(take_column, order), rows.columns) if engine is not None else \
            [c.take(order) for c in rows.columns]
        rows = pa.Table.from_arrays(columns, schema=rows.schema)
    starts = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [len(codes)]])
    return [rows.slice(s, e - s) for s, e in zip(starts[:-1], starts[1:], strict=True)]


def take_column(indices: pa.Array, column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """`column` gathered at `indices` (a column task of a parallel gather)."""
    return column.take(indices)
