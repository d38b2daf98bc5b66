"""Engines run per-file-group tasks: `LocalEngine` uses threads (pyarrow releases the GIL)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Engine(Protocol):
    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item; results in item order; the first error propagates."""


class LocalEngine:
    """Runs tasks in a thread pool of `parallelism` workers (default: the CPU count)."""

    def __init__(self, parallelism: int = 0):
        self.parallelism = parallelism or os.cpu_count() or 1

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        items = list(items)
        if len(items) <= 1 or self.parallelism == 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(min(self.parallelism, len(items))) as pool:
            return list(pool.map(fn, items))
