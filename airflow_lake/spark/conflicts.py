"""The concurrent-insert check on Spark: the keys this write inserts, joined in executors with
the keys of the base files a concurrent commit wrote; the driver gets one clashing key back."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from functools import partial

import pyarrow as pa
from pyspark.sql import DataFrame

from airflow_lake.core.context import TableContext
from airflow_lake.core.index.simple import read_keys
from airflow_lake.core.merge import KEY
from airflow_lake.core.model import BaseFile
from airflow_lake.core.txn.conflicts import KeyClash

from .frames import PART, stage

THEIR_KEY = "_al_their_key"
THEIR_PART = "_al_their_partition"


def key_clash(spark, ctx: TableContext, new_keys: DataFrame, is_global: bool, where: str) -> KeyClash:
    """The commit's key clash check over `new_keys` (columns PART, KEY: the keys this write
    inserts), a distributed join: no key but the first clashing one reaches the driver."""

    def clash(files: dict[str, list[str]]) -> str | None:
        tasks = [(p, path) for p, paths in sorted(files.items()) for path in paths]
        task_df = spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task binary")
        task_df = task_df.repartition(max(1, min(len(tasks), spark.sparkContext.defaultParallelism * 4)))
        theirs = task_df.mapInArrow(partial(stored_key_batches, ctx), f"{THEIR_KEY} string, {THEIR_PART} string")
        cond = [new_keys[KEY] == theirs[THEIR_KEY]] + ([] if is_global else [new_keys[PART] == theirs[THEIR_PART]])
        hits = new_keys.join(theirs, on=cond, how="left_semi").select(KEY).limit(1)
        found = stage(lambda: hits.collect(), where, "checking concurrent inserts")
        return found[0][0] if found else None

    return clash


def stored_key_batches(ctx: TableContext, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record keys (and partition) of each base file task."""
    storage, keygen, populate = ctx.storage, ctx.keygen, ctx.config.populate_meta_fields
    for batch in batches:
        for raw in batch.column(0).to_pylist():
            partition, path = pickle.loads(raw)
            keys = read_keys(storage, BaseFile.parse(partition, path.rsplit("/", 1)[-1]), keygen, populate)
            n = len(keys)
            yield pa.record_batch([keys.cast(pa.string()), pa.repeat(pa.scalar(partition, pa.string()), n)],
                                  names=[THEIR_KEY, THEIR_PART])
