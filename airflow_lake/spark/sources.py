"""Sources Spark cannot read without extra jars, read by the core's libraries in executors:
Avro (no spark-avro jar), and files of any format on an object store (`s3://`, `gs://`...)
where Spark has no file system for it (no hadoop-aws jars): the driver lists the files
through the core's storage layer, each Spark task opens one file with the same storage
options and reads it with pyarrow (parquet, json lines, csv, orc) or fastavro."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from urllib.parse import urlsplit

import fastavro
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from airflow_lake.core.errors import InvalidOptionError, SchemaError
from airflow_lake.core.schema import from_avro
from airflow_lake.core.storage import Storage, open_storage

from .schema import exact_arrow_schema

# schemes Spark reads itself (its Hadoop file systems without extra jars)
SPARK_SCHEMES = ("", "file", "hdfs", "viewfs")
FORMATS = ("parquet", "json", "csv", "orc", "avro")


def read_by_core(path: str, fmt: str) -> bool:
    """Whether the source at `path` is read through the core (not Spark's own readers)."""
    return fmt == "avro" or (fmt in FORMATS and urlsplit(path).scheme.lower() not in SPARK_SCHEMES)


def read_files(spark: SparkSession, path: str, fmt: str, storage_options: dict | None = None) -> DataFrame:
    """A file, or a folder of files (names starting with `_` or `.` skipped), in `fmt`, as a
    DataFrame, one file per Spark task. The schema is the first file's; every file is cast
    to it (a file that cannot be is a `SchemaError` naming it)."""
    if fmt not in FORMATS:
        raise InvalidOptionError(f"source {path}: the core reads {FORMATS}, not {fmt!r}")
    root, names, storage = _files(path, storage_options, fmt)
    with storage.open_input(names[0]) as f:
        schema = exact_arrow_schema(_schema(fmt, f))
    # one file per partition, in path order: the DataFrame's row order is the files' (the
    # source order the combine rule uses), which a round-robin repartition would rotate
    tasks = spark.createDataFrame(spark.sparkContext.parallelize([(n,) for n in names], len(names)), "name string")
    return tasks.mapInArrow(partial(_file_batches, root, storage_options, fmt, schema), from_arrow_schema(schema))


def read_avro(spark: SparkSession, path: str, storage_options: dict | None = None) -> DataFrame:
    """Avro container files (a file, or a folder of `*.avro`) as a DataFrame."""
    return read_files(spark, path, "avro", storage_options)


def _files(path: str, storage_options: dict | None, fmt: str) -> tuple[str, list[str], Storage]:
    root = path.rstrip("/")
    storage = open_storage(root, storage_options)
    names: list[str] = []
    if storage.is_dir(""):
        names = sorted(f.path for f in storage.list("")
                       if not f.name.startswith(("_", ".")) and (fmt != "avro" or f.name.endswith(".avro")))
    elif storage.exists(""):
        root, _, name = root.rpartition("/")
        names = [name]
        storage = open_storage(root or "/", storage_options)
    if not names:
        raise InvalidOptionError(f"source {path}: no {fmt} files there")
    return root or "/", names, storage


def _schema(fmt: str, f) -> pa.Schema:
    if fmt == "avro":
        return from_avro(fastavro.reader(f).writer_schema)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_schema(f)
    if fmt == "orc":
        import pyarrow.orc as orc

        return orc.ORCFile(f).schema
    return _read(fmt, f).schema  # csv and json: inferred from the first file


def _read(fmt: str, f, schema: pa.Schema | None = None) -> pa.Table:
    if fmt == "avro":
        return pa.Table.from_pylist(list(fastavro.reader(f)), schema=schema)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(f)
    if fmt == "orc":
        import pyarrow.orc as orc

        return orc.ORCFile(f).read()
    if fmt == "csv":
        import pyarrow.csv as pacsv

        convert = pacsv.ConvertOptions(column_types=schema) if schema is not None else None
        return pacsv.read_csv(f, convert_options=convert)
    import pyarrow.json as pajson

    return pajson.read_json(f, parse_options=pajson.ParseOptions(explicit_schema=schema) if schema else None)


def _file_batches(root: str, storage_options: dict | None, fmt: str, schema: pa.Schema,
                  batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    storage = open_storage(root, storage_options)
    for batch in batches:
        for name in batch.column(0).to_pylist():
            with storage.open_input(name) as f:
                table = _read(fmt, f, schema)
            try:
                table = table.select(schema.names).cast(schema)
            except (KeyError, ValueError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaError(f"source {root}/{name}: does not match the first file's schema "
                                  f"({schema}): {e}") from e
            yield from table.to_batches()
