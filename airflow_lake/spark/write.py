"""Distributed writes: the core's write pipeline (`airflow_lake.core.write.pipeline`) on Spark
DataFrames, rows never on the driver. This module holds Spark's frame operations only: every
rule (checks, combine order, index lookup rule, moves, the plan, the targets) is the core's.

- key frame: only the key generator's input columns go to Python (an Arrow UDF with the core's
  `key_paths`), the payload stays in the JVM; when a column must be cast to the stored type, the
  core's `key_batches` conforms and checks the rows in `mapInArrow` instead;
- combine: a window keeping the first row per key by the core's order;
- tag: `tag.py` (joins); counts: aggregates collected to the driver (metadata only);
- targets: the core's functions as scalar Arrow UDFs on a few columns;
- execute: rows shuffled by target group, each group written by the core's `execute_group`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import partial

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type
from pyspark.sql.types import BinaryType

from airflow_lake.core.merge import KEY
from airflow_lake.core.ordering import ORDER, ordering_key_of
from airflow_lake.core.schema import META_FIELDS
from airflow_lake.core.write.client import WriteResult
from airflow_lake.core.write.keying import SOURCE_FILE, InputPlan, KeySpec, key_batches, key_paths
from airflow_lake.core.write.pipeline import write_frame as pipeline_write

from .conflicts import key_clash
from .frames import (
    BUCKET,
    DEL,
    LOC_F,
    LOC_P,
    PART,
    SEQ,
    SPREAD,
    STORED,
    group_results,
    partition_arrow_udf,
    scalar_arrow_udf,
    stage,
)
from .schema import arrow_schema_of, exact_arrow_schema
from .startup import SMALL_INPUT_BYTES
from .tag import tag

# a sequence number's bits from here up hold its input partition (Spark's row ids and
# `task_key_batches`), the bits below its place in that partition
_SEQ_PARTITION_SHIFT = 33
# the input's estimated bytes per partition `cluster` hashes it into (Spark's advisory size of a
# shuffle partition)
_CLUSTER_PARTITION_BYTES = 64 * 2**20
_UNKNOWN_BYTES = 2**60  # (Spark estimates what it cannot size at spark.sql.defaultSizeInBytes: 2^63 - 1)


def write(table, df: DataFrame, operation: str = "upsert", extra_metadata: dict[str, str] | None = None,
          ) -> WriteResult:
    """`table.write(df)` on `df`'s Spark (the same as a table opened with a `SparkEngine`)."""
    return write_frame(table, df, operation, extra_metadata)


def write_frame(table, df: DataFrame, operation: str, extra_metadata: dict[str, str] | None) -> WriteResult:
    """The core's write pipeline on `df`'s Spark (what `SparkEngine.write_frame` runs)."""
    return pipeline_write(table, SparkFrames(df.sparkSession, f"table {table.storage.uri}"), df, operation,
                          extra_metadata)


class SparkColumns:
    """The core's column algebra on Spark columns."""

    col = staticmethod(F.col)
    lit = staticmethod(F.lit)

    @staticmethod
    def valid(expr: Column) -> Column:
        return expr.isNotNull()

    @staticmethod
    def false_if_null(expr: Column) -> Column:
        return F.coalesce(expr, F.lit(False))

    @staticmethod
    def isin(expr: Column, values: list) -> Column:
        return expr.isin(values) if values else F.lit(False)


class SparkFrames:
    """The pipeline's frame operations on DataFrames (`FrameOps`); actions that fail in an
    executor raise the core's error (`stage`), naming the table (`where`)."""

    columns = SparkColumns()
    trusts_filters = False  # (`tag.py` confirms every candidate: no key travels to the driver in stats)
    eager = False  # (the input stage's pass over the rows runs before the lock)

    def __init__(self, spark: SparkSession, where: str):
        self.spark = spark
        self.where = where
        self._source: DataFrame | None = None

    def source(self, data: DataFrame) -> DataFrame:
        return data

    def schema(self, data: DataFrame) -> pa.Schema:
        return arrow_schema_of(data.schema)

    def key_frame(self, data: DataFrame, plan: InputPlan) -> tuple[DataFrame, tuple[str, ...]]:
        df = data.withColumnsRenamed(plan.renames) if plan.renames else data
        source = df.drop(*[c for c in df.columns if c in META_FIELDS])
        source_file = _source_file(source)
        work = plan.work_fields + ([pa.field(SOURCE_FILE, pa.string())] if source_file is not None else [])
        spec = replace(plan.spec, out_schema=exact_arrow_schema(pa.schema(list(plan.spec.data_schema) + work)))
        if source_file is not None:
            source = source.withColumn(SOURCE_FILE, source_file)
        self._source = source  # (the input partitions sequence numbers count in)
        positions = ((SOURCE_FILE,) if source_file is not None else ()) + (SEQ,)
        if plan.stored_as_is:
            return _key_columns(spec, source, plan), positions
        # columns the table stores as other types: cast (and checked) by the core, in executors
        return source.mapInArrow(partial(task_key_batches, spec), from_arrow_schema(spec.out_schema)), positions

    def cluster(self, frame: DataFrame, by: list[str]) -> DataFrame:
        # hashed into a fixed number of partitions (left to adaptive execution, the cached
        # frame's partitions are coalesced and the joins by `by` shuffle it again): one shuffle of
        # the whole rows, where the batch check shuffled the keys, the tagging join the key
        # columns and the routes' join the whole rows (1M rows into 5M: 33.4-35.9 -> 30.4-31.1 s);
        # sorted by `by` within them, the tagging join and the routes' join sort none of their
        # rows (28.1-30.6 -> 26.4-28.4 s, medians 28.4 -> 27.2 s over five runs each)
        n = _cluster_partitions(self.spark, frame)
        return frame if n is None else frame.repartition(n, *by).sortWithinPartitions(*by)

    def cache(self, frame: DataFrame) -> DataFrame:
        return frame.persist()

    def release(self, frame: DataFrame) -> None:
        frame.unpersist()

    def partition_counts(self, frame: DataFrame, *, distinct: bool = True) -> list[tuple[str, int, int | None]]:
        # (the first pass over the rows: a key error names its row's sequence number)
        found = F.count_distinct(KEY) if distinct else F.lit(None).cast("long")  # (distinct: two shuffles)
        rows = stage(lambda: frame.groupBy(PART).agg(F.count(F.lit(1)), found).collect(),
                     self.where, "checking the batch", row_of=self._input_row)
        return [tuple(r) for r in rows]

    def _input_row(self, seq: int) -> int:
        """The place in the input of the row with sequence number `seq`: the rows of the input
        partitions before its own, counted in tasks over the same partitions (an error's path
        only), and its place in its own."""
        partition, place = seq >> _SEQ_PARTITION_SHIFT, seq & ((1 << _SEQ_PARTITION_SHIFT) - 1)
        if partition == 0 or self._source is None:
            return place
        counts = self._source.mapInArrow(_partition_rows, "partition long, num_rows long")
        before = counts.filter(F.col("partition") < partition).agg(F.sum("num_rows")).collect()[0][0]
        return int(before or 0) + place

    def keep_first(self, frame: DataFrame, by: list[str], order: list[str]) -> DataFrame:
        window = Window.partitionBy(*by).orderBy(*[F.col(c).desc_nulls_last() for c in order])
        ranked = frame.withColumn("_al_rank", F.row_number().over(window)).filter(F.col("_al_rank") == 1)
        return ranked.drop("_al_rank")

    def tag(self, table, view, frame: DataFrame, parts, is_global: bool, index_type: str, where: str, *,
            trust_filters: bool = False):
        tagged = tag(self.spark, table, view, frame, parts, is_global, index_type, where)
        return tagged.rows, tagged.cached, tagged.stats

    def routing_columns(self, frame: DataFrame, columns: list[str]) -> DataFrame:
        return frame.select(*columns)

    def with_routes(self, frame: DataFrame, routes: DataFrame, by: list[str]) -> DataFrame:
        # the rows' payload joined to their routes by key: a batch placed by key (`cluster`) is
        # read in place and in order; the routes, narrow, are shuffled to it (an Arrow UDF's output
        # has no known partitioning), unless adaptive execution broadcasts them. (A shuffled hash
        # join forced here, or in the tagging, ran out of memory building a large batch's table on
        # a 1 GiB driver: sort-merge joins spill instead.)
        payload = frame.select(*[c for c in frame.columns if c not in routes.columns or c in by])
        return payload.join(routes, on=by, how="inner")

    def untagged(self, frame: DataFrame) -> DataFrame:
        return frame.withColumns({c: F.lit(None).cast("string") for c in (LOC_P, LOC_F, STORED)})

    def filter(self, frame: DataFrame, predicate: Column) -> DataFrame:
        return frame.filter(predicate)

    def move(self, frame: DataFrame, moved: Column, ordering: str | None) -> DataFrame:
        rows = frame.withColumn("_al_moved", moved)
        flag = F.col("_al_moved")
        deletes = rows.filter(flag).withColumn(DEL, F.lit(True)).withColumn(PART, F.col(LOC_P))
        if ordering:
            deletes = deletes.withColumn(ordering, F.lit(None).cast(rows.schema[ordering].dataType))
        inserts = rows.withColumn(LOC_F, F.when(flag, F.lit(None)).otherwise(F.col(LOC_F))) \
            .withColumn(LOC_P, F.when(flag, F.lit(None)).otherwise(F.col(LOC_P)))
        return inserts.unionByName(deletes).drop("_al_moved")

    def insert_spread(self, frame: DataFrame) -> DataFrame:
        # the partition the insert is cached in: `with_partition_udf` ranks each partition's
        # inserts in one task as it routes them (a window ranking them by input partition shuffled
        # and sorted them, and the routes were the union of two frames)
        return frame.withColumn(SPREAD, F.when(F.col(LOC_F).isNull(), F.spark_partition_id().cast("long")))

    def location_counts(self, frame: DataFrame) -> list[tuple]:
        new_part = F.when(F.col(LOC_F).isNull(), F.col(PART)).alias("_al_new_partition")
        rows = stage(lambda: frame.groupBy(LOC_P, LOC_F, new_part, SPREAD).count().collect(), self.where, "counting")
        return [tuple(r) for r in rows]

    def bucket_counts(self, frame: DataFrame) -> list[tuple[str, int, int, int]]:
        rows = stage(lambda: frame.groupBy(PART, BUCKET).agg(
            F.count(F.lit(1)), F.sum(F.when(F.col(DEL), 0).otherwise(1))).collect(), self.where, "counting")
        return [tuple(r) for r in rows]

    def with_udf(self, frame: DataFrame, name: str, fn, inputs: list[str], arrow_type: pa.DataType) -> DataFrame:
        return frame.withColumn(name, scalar_arrow_udf(fn, from_arrow_type(arrow_type))(*inputs))

    def with_partition_udf(self, frame: DataFrame, name: str, fn, inputs: list[str],
                           arrow_type: pa.DataType) -> DataFrame:
        return frame.withColumn(name, partition_arrow_udf(fn, from_arrow_type(arrow_type))(*inputs))

    def project(self, frame: DataFrame, columns: list[str]) -> DataFrame:
        return frame.select(*columns)

    def first_rows(self, frame: DataFrame, columns: list[str], n: int) -> list[tuple]:
        return [tuple(r) for r in stage(lambda: frame.select(*columns).limit(n).collect(), self.where, "checking keys")]

    def union(self, frame: DataFrame, other: DataFrame) -> DataFrame:
        types = {f.name: f.dataType for f in frame.schema.fields}
        return frame.unionByName(other.select(*[F.col(c).cast(types[c]).alias(c) for c in frame.columns]))

    def write_groups(self, fn, frame: DataFrame, key: str, groups: int) -> list:
        return stage(lambda: group_results(fn, frame, key, groups), self.where, "writing file groups")

    def task_frame(self, fn, items: list, schema: pa.Schema) -> DataFrame:
        if not items:
            return self.spark.createDataFrame([], from_arrow_schema(schema))
        tasks = min(len(items), max(1, self.spark.sparkContext.defaultParallelism * 2))
        return self.spark.range(len(items), numPartitions=tasks).mapInArrow(
            partial(_item_rows, fn, list(items), schema), from_arrow_schema(schema))

    def key_clash(self, ctx, new_keys: DataFrame, is_global: bool, where: str):
        return key_clash(self.spark, ctx, new_keys.select(PART, KEY), is_global, where)


def _item_rows(fn, items: list, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`task_frame`'s task: the rows of `fn` for the items its batches of ids name."""
    for batch in batches:
        for i in batch.column(0).to_pylist():
            yield from fn(items[i]).cast(schema).to_batches()


def _key_columns(spec: KeySpec, source: DataFrame, plan: InputPlan) -> DataFrame:
    """The key frame with the payload left in the JVM: only the key generator's input columns go
    to Python (an Arrow UDF returning record key and partition path); columns the table has
    and the data lacks are nulls; the sequence number is Spark's row id (increasing in input
    order within and across partitions)."""
    inputs = plan.key_inputs
    keys_type = from_arrow_schema(pa.schema([pa.field(KEY, pa.string()), pa.field(PART, pa.string()),
                                             pa.field(DEL, pa.bool_())]))
    udf = scalar_arrow_udf(partial(key_paths, spec, (*inputs, SEQ)), keys_type)  # (a key error names SEQ)
    types = from_arrow_schema(spec.data_schema)
    incoming = plan.incoming.names
    data = [F.col(f.name) if f.name in incoming else F.lit(None).cast(types[f.name].dataType).alias(f.name)
            for f in spec.data_schema]
    origin = [SOURCE_FILE] if SOURCE_FILE in source.columns else []
    numbered = source.withColumn(SEQ, F.monotonically_increasing_id())
    fields = spec.ordering_fields  # several: the key of the tuple (an Arrow UDF of their columns)
    order = [scalar_arrow_udf(partial(ordering_key_of, fields), BinaryType())(*fields).alias(ORDER)] if fields else []
    keyed = numbered.select(*data, udf(*inputs, SEQ).alias("_al_keys"), SEQ, *order, *origin)
    return keyed.select(*spec.data_schema.names, *[F.col(f"_al_keys.{c}").alias(c) for c in (KEY, PART, DEL)],
                        SEQ, *([ORDER] if fields else []), *origin)


def _cluster_partitions(spark: SparkSession, frame: DataFrame) -> int | None:
    """How many partitions `cluster` hashes `frame` into: one per `_CLUSTER_PARTITION_BYTES` of
    the size Spark's optimizer estimates for it (planning only: asking the frame's RDD for its
    partitions would run the shuffles of a source that has some, a join's), at least two per
    core, at most `spark.sql.shuffle.partitions`. None for a small input: it is left as it is
    (each task would cost more than its rows; adaptive execution plans its joins, and spreads
    a large side, a big table's stored keys, over as many tasks as that side needs)."""
    least = 2 * spark.sparkContext.defaultParallelism
    try:  # (the classic DataFrame's plan; pyspark has no public accessor for its statistics)
        size = int(frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes())
    except Exception:  # noqa: BLE001  (a Spark without it: the least)
        size = 0
    if size >= _UNKNOWN_BYTES:  # rows Spark cannot size (an RDD's, the core's file readers'): the least
        size = 0
    if 0 < size < SMALL_INPUT_BYTES:  # (a few thousand rows)
        return None
    most = int(spark.conf.get("spark.sql.shuffle.partitions", "200") or 200)
    return max(1, min(max(least, -(-size // _CLUSTER_PARTITION_BYTES)), most))


def _source_file(df: DataFrame) -> Column | None:
    """The file each row was read from, for a DataFrame read by Spark's file sources (whose
    partitions are packed by file size, largest first, not in the files' order); else None."""
    try:
        if not df.inputFiles():  # not read from files (an Arrow table, a query...): nothing to ask
            return None
        df.select(F.col("_metadata.file_path"))
    except AnalysisException:
        return None
    return F.col("_metadata.file_path")


# -- executor functions (module level: they travel as values) -----------------------------------
def _partition_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The task's partition id and its number of rows."""
    from pyspark import TaskContext

    context = TaskContext.get()
    n = sum(b.num_rows for b in batches)
    yield pa.record_batch({"partition": [context.partitionId() if context else 0], "num_rows": [n]})


def task_key_batches(spec: KeySpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The core's `key_batches` in a Spark task: sequence numbers start at the task's partition
    id << 33, as Spark's row ids (increasing in input order across partitions)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return key_batches(spec, batches, seq_base=(context.partitionId() if context else 0) << _SEQ_PARTITION_SHIFT)

