"""Sources Spark cannot read without extra jars, read by the core's libraries in executors."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import fastavro
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.schema import from_avro
from airflow_lake.core.storage import open_storage

from .schema import exact_arrow_schema


def read_avro(spark: SparkSession, path: str, storage_options: dict | None = None) -> DataFrame:
    """Avro container files (a file, or a folder of `*.avro`) as a DataFrame, one file per
    Spark task (no spark-avro jar needed). The schema is the first file's writer schema."""
    root, names = path.rstrip("/"), []
    storage = open_storage(root, storage_options)
    if storage.is_dir(""):
        names = sorted(f.path for f in storage.list("") if f.path.endswith(".avro"))
    elif storage.exists(""):
        root, _, name = root.rpartition("/")
        names = [name]
        storage = open_storage(root or "/", storage_options)
    if not names:
        raise InvalidOptionError(f"source {path}: no .avro files there")
    with storage.fs.open_input_file(storage.full(names[0])) as f:
        schema = exact_arrow_schema(from_avro(fastavro.reader(f).writer_schema))
    tasks = spark.createDataFrame([(n,) for n in names], "name string").repartition(len(names))
    return tasks.mapInArrow(partial(_avro_batches, root or "/", storage_options, schema), from_arrow_schema(schema))


def _avro_batches(root: str, storage_options: dict | None, schema: pa.Schema,
                  batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    storage = open_storage(root, storage_options)
    for batch in batches:
        for name in batch.column(0).to_pylist():
            with storage.fs.open_input_file(storage.full(name)) as f:
                records = list(fastavro.reader(f))
            yield from pa.Table.from_pylist(records, schema=schema).to_batches()
