"""`read_table`: a Hudi table (ours or Apache Hudi's) as a Spark DataFrame, no Hudi bundle.

The driver plans the read from metadata only (timeline, listings, schema: the core's
`ReadPlan`) and never holds rows. The slice tasks become a DataFrame of small pickled values,
one row per file group, and `mapInArrow` reads each in an executor with the core's
`read_slice`, the same file-group reader local reads, writes and compaction use.
"""

from __future__ import annotations

import functools
import heapq
import pickle
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import BinaryType, StructField, StructType

from airflow_lake.core.context import TableContext
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.read import Reader, ReadPlan, SliceRead, read_slice, removed_while_reading
from airflow_lake.core.table import Table

from .schema import spark_arrow_schema, spark_schema, to_spark_arrow

TASK_SCHEMA = StructType([StructField("task", BinaryType(), nullable=False)])
MAX_PARTITIONS = "spark.sql.files.maxPartitionNum"


def read_table(spark: SparkSession, path: str, *, query_type: str = "snapshot", as_of: str | None = None,
               start: str | None = None, end: str | None = None, columns: list[str] | None = None,
               filters=None, holes: str = "FAIL", storage_options: dict[str, Any] | None = None) -> DataFrame:
    """Read a table: snapshot or read-optimized (`query_type`), time travel (`as_of`), or
    incremental (`start`, optional `end`: rows whose latest write is a commit in (start, end]).

    `columns` and `filters` (pyarrow DNF, e.g. `[("city", "=", "sao_paulo")]`) are pushed into
    the plan: partitions that cannot match are never listed as tasks, and only the needed
    columns are read. Each file group is one Spark task (at most `spark.sql.files.maxPartitionNum`
    tasks when set, file groups packed by size)."""
    table = Table.open(path, storage_options=storage_options)
    reader = Reader(table)
    if start is not None:
        if query_type != "snapshot" or as_of is not None:
            raise InvalidOptionError(f"table {table.storage.uri}: an incremental read (start=...) takes neither "
                                     "as_of nor a read_optimized query_type")
        plan = reader.plan_incremental(start, end, columns=columns, filters=filters, holes=holes)
    else:
        if end is not None:
            raise InvalidOptionError(f"table {table.storage.uri}: end={end!r} needs start= (an incremental read)")
        plan = reader.plan_snapshot(as_of=as_of, columns=columns, filters=filters, query_type=query_type)
    return plan_frame(spark, table.context(), plan)


def plan_frame(spark: SparkSession, ctx: TableContext, plan: ReadPlan) -> DataFrame:
    """The DataFrame of a read plan: tasks spread over executors, rows read there."""
    schema = spark_schema(plan.output)
    if not plan.tasks:
        return spark.createDataFrame([], schema)
    limit = spark.conf.get(MAX_PARTITIONS, None)
    bins = balance(plan.tasks, int(limit) if limit else len(plan.tasks))
    rows = [[(pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL),) for task in tasks] for tasks in bins]
    tasks = spark.createDataFrame(spark.sparkContext.parallelize(rows, len(rows)).flatMap(_rows), TASK_SCHEMA)
    read = functools.partial(_read_tasks, ctx, plan.schema, spark_arrow_schema(plan.output), plan.as_of)
    return tasks.mapInArrow(read, schema)


def balance(tasks: Sequence[SliceRead], partitions: int) -> list[list[SliceRead]]:
    """Tasks in at most `partitions` groups of similar size in bytes (largest first onto the
    lightest group); one task per group when there are no more tasks than groups."""
    if len(tasks) <= partitions:
        return [[t] for t in tasks]
    heap = [(0, i) for i in range(max(partitions, 1))]
    bins: list[list[SliceRead]] = [[] for _ in heap]
    for task in sorted(tasks, key=lambda t: -t.size):
        load, i = heapq.heappop(heap)
        bins[i].append(task)
        heapq.heappush(heap, (load + task.size, i))
    return [b for b in bins if b]


def _rows(group: list) -> list:
    return group


def _read_tasks(ctx: TableContext, schema: pa.Schema, target: pa.Schema, as_of: str | None,
                batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In an executor: read each slice task of the input batches, in Spark's Arrow types."""
    for batch in batches:
        for blob in batch.column(0).to_pylist():  # one value per file group, not per row
            task = pickle.loads(blob)
            try:
                rows = read_slice(ctx, task, schema)
            except FileNotFoundError as e:
                raise removed_while_reading(ctx.uri, as_of, e) from e
            if rows.num_rows:
                yield from to_spark_arrow(rows, target).to_batches()
