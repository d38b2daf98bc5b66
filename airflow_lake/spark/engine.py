"""`SparkEngine`: the core's `Engine` protocol on Spark executors."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from pyspark.sql import SparkSession

T = TypeVar("T")
R = TypeVar("R")


class SparkEngine:
    """Runs each task value as one Spark task (one partition per value, so every executor
    core takes work). Task values and results must be small: file-group operations, file
    paths, write stats; rows never travel through the driver."""

    def __init__(self, spark: SparkSession, parallelism: int = 0):
        self.spark = spark
        self.parallelism = parallelism

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Apply `fn` to every item in executors; results in item order."""
        items = list(items)
        if not items:
            return []
        slices = min(len(items), self.parallelism) if self.parallelism else len(items)
        rdd = self.spark.sparkContext.parallelize(list(enumerate(items)), slices)
        out = rdd.map(lambda pair: (pair[0], fn(pair[1]))).collect()
        return [r for _, r in sorted(out, key=lambda pair: pair[0])]
