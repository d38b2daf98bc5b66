"""A write's source as a DataFrame (`read_source`): files Spark reads itself with the caller's
reader options and schema, a query, a table; and sources Spark cannot read without extra jars,
read by the core's libraries in executors: Avro (no spark-avro jar), and files of any format on
an object store (`s3://`, `gs://`...) where Spark has no file system for it (no hadoop-aws
jars): the driver lists the files through the core's storage layer, each Spark task opens one
file with the same storage options and reads it with pyarrow (parquet, json lines, csv, orc)
or fastavro. Text sources (csv, json) read into an existing table take its column types
(`conform_to_table`): a value that does not cast is refused, naming the column and the value."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from urllib.parse import urlsplit

import fastavro
import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DateType,
    MapType,
    NullType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from airflow_lake.core.errors import InvalidOptionError, SchemaError
from airflow_lake.core.schema import from_avro
from airflow_lake.core.storage import Storage, open_storage

from .schema import exact_arrow_schema, spark_schema

# schemes Spark reads itself (its Hadoop file systems without extra jars)
SPARK_SCHEMES = ("", "file", "hdfs", "viewfs")
FORMATS = ("parquet", "json", "csv", "orc", "avro")
TEXT_FORMATS = ("csv", "json")  # their column types are read from text: the table's types are taken


def read_source(spark: SparkSession, source: str, fmt: str, *, storage_options: dict | None = None,
                reader_options: dict[str, str] | None = None, schema: str | None = None,
                table_schema: pa.Schema | None = None, where: str = "") -> DataFrame:
    """The source as a DataFrame, without bringing rows to the driver: a Spark SQL query
    (`sql`), a table name (`table`), or files in `fmt` read with Spark's reader `reader_options`
    (csv: `header=true` unless given) and `schema` (a Spark DDL string, `id STRING, ts LONG`).
    With the table's schema (`table_schema`, an existing table's) csv is read as text unless
    `inferSchema` or `schema` is given, and csv and json columns the table has are cast to its
    types (`conform_to_table`)."""
    if fmt == "sql":
        return spark.sql(source)
    if fmt == "table":
        return spark.table(source)
    options = {str(k): str(v) for k, v in (reader_options or {}).items()}
    if fmt == "csv":
        options.setdefault("header", "true")
        options.setdefault("inferSchema", "false" if table_schema is not None and len(table_schema) else "true")
    given = _ddl(spark, schema, where) if schema else None
    if read_by_core(source, fmt):  # avro, or files on an object store: the core's storage layer in executors
        if options and fmt != "csv" or set(options) - {"header", "inferSchema"}:
            raise InvalidOptionError(f"{where}: source {source}: reader options {sorted(options)} apply to Spark's "
                                     f"readers; {fmt} files here are read by the core (give a schema instead)")
        text = fmt == "csv" and options["inferSchema"].lower() == "false"
        df = read_files(spark, source, fmt, storage_options,
                        schema=to_arrow_schema(given) if given is not None else None, text=text)
    else:
        if fmt == "csv":  # RFC 4180, as the core reads csv (a quote in a quoted field doubled); Spark escapes with \
            options.setdefault("escape", '"')
        reader = spark.read.format(fmt).options(**options)
        try:
            df = (reader.schema(given) if given is not None else reader).load(source)
        except AnalysisException as e:
            if "UNABLE_TO_INFER_SCHEMA" not in str(e):
                raise
            if table_schema is None or not len(table_schema):  # a new table: nothing says its columns
                raise InvalidOptionError(f"{where}: source {source}: no {fmt} file there to read (an empty folder?), "
                                         "so no schema to create the table with; give a source schema") from None
            df = reader.schema(spark_schema(table_schema)).load(source)  # no rows: the table's columns
    if fmt in TEXT_FORMATS and table_schema is not None:
        df = conform_to_table(df, table_schema, f"{where}: source {source}", options)
    return df


def _ddl(spark: SparkSession, schema: str, where: str) -> StructType:
    """A Spark DDL schema string as a `StructType`, or an `InvalidOptionError` naming it."""
    try:
        return spark.createDataFrame([], schema).schema
    except Exception as e:  # noqa: BLE001 - pyspark raises its own parse error classes
        raise InvalidOptionError(f"{where}: source schema {schema!r} is not a Spark DDL schema "
                                 f"(e.g. 'id STRING, ts LONG'): {' '.join(str(e).split())[:300]}") from None


def conform_to_table(df: DataFrame, table_schema: pa.Schema, where: str,
                     reader_options: dict[str, str] | None = None) -> DataFrame:
    """`df` with each column the table has (names matched as Spark matches them, ignoring case)
    cast to the table's type where it differs (text to a date or timestamp by the reader's
    `dateFormat` / `timestampFormat` when given, as Spark's reader parses them); a value that
    does not cast (text that is no number, a number out of range) is a `SchemaError` naming the
    column, the value and both types, found in one pass over the source before anything is
    written. Other columns stay as read."""
    target = {f.name.lower(): f.dataType for f in spark_schema(table_schema).fields}
    casts = {f.name: target[f.name.lower()] for f in df.schema.fields
             if f.name.lower() in target and f.dataType != target[f.name.lower()]}
    if not casts:
        return df
    formats = {k.lower(): v for k, v in (reader_options or {}).items()}
    cast = {name: _cast(F.col(f"`{name}`"), df.schema[name].dataType, kind, formats) for name, kind in casts.items()}
    for name, expression in cast.items():
        try:  # (a cast Spark cannot even try, e.g. a struct to a map, fails when analysed)
            df.select(expression)
        except AnalysisException as e:
            raise SchemaError(f"{where}: column {name!r} cannot be cast from {df.schema[name].dataType.simpleString()} "
                              f"to the table's {casts[name].simpleString()}") from e
    lost = [F.first(F.when(_lost(F.col(f"`{name}`"), df.schema[name].dataType, kind, cast[name]),
                           F.col(f"`{name}`").cast("string")), ignorenulls=True).alias(name)
            for name, kind in casts.items()]
    found = df.select(*lost).first()
    for name, kind in casts.items():
        if found is not None and found[name] is not None:
            raise SchemaError(f"{where}: column {name!r} value {found[name]!r} cannot be cast from "
                              f"{df.schema[name].dataType.simpleString()} to the table's {kind.simpleString()}")
    return df.withColumns(cast)


def _lost(column, source: DataType, kind: DataType, cast):
    """Whether a value of `column` did not survive its `cast` to `kind`: null where it was not,
    at the top, in a struct's field, a list's element or a map's value (a map made of a struct:
    an entry dropped)."""
    lost = column.isNotNull() & cast.isNull()
    if isinstance(source, StructType) and isinstance(kind, StructType):
        given = {f.name.lower(): f for f in source.fields}
        for f in kind.fields:
            g = given.get(f.name.lower())
            if g is not None and g.dataType != f.dataType:
                lost = lost | (column.isNotNull() & _lost(column.getField(g.name), g.dataType, f.dataType,
                                                          cast.getField(f.name)))
    elif isinstance(source, StructType) and isinstance(kind, MapType) and isinstance(kind.keyType, StringType):
        for f in source.fields:
            value = column.getField(f.name)
            dropped = F.coalesce(~F.map_contains_key(cast, f.name), F.lit(False))
            lost = lost | (value.isNotNull() & (dropped | _lost(value, f.dataType, kind.valueType,
                                                                 cast.getItem(f.name))))
    elif isinstance(source, ArrayType) and isinstance(kind, ArrayType):  # (an element, pairwise)
        lost = lost | _any_lost(column, cast, source.elementType, kind.elementType)
    elif isinstance(source, MapType) and isinstance(kind, MapType):  # (a value: entries keep their order)
        lost = lost | _any_lost(F.map_values(column), F.map_values(cast), source.valueType, kind.valueType)
    return F.coalesce(lost, F.lit(False))


def _any_lost(given, cast, source: DataType, kind: DataType):
    """Whether an element of the array `given` did not survive its cast (`cast`, the array of
    the same elements cast to `kind`)."""
    pairs = F.zip_with(given, cast, lambda g, c: _lost(g, source, kind, c))
    return F.coalesce(F.exists(pairs, lambda x: x), F.lit(False))


def _cast(column, source: DataType, kind: DataType, formats: dict[str, str]):
    """`column` cast to `kind`, None where it does not cast; text to a date or timestamp by the
    reader's format option for it when given (Spark's pattern letters). Struct fields are
    matched by name, ignoring case, at every depth (Spark casts structs by position, and its
    JSON reader orders a struct's fields by name); a source field the table lacks stays, last.
    A struct becomes a map of its non-null fields (JSON objects of a map column)."""
    if source == kind:
        return column
    if isinstance(source, StructType) and isinstance(kind, StructType):
        given = {f.name.lower(): f for f in source.fields}
        fields = []
        for f in kind.fields:
            g = given.get(f.name.lower())
            value = F.lit(None).cast(f.dataType) if g is None else \
                _cast(column.getField(g.name), g.dataType, f.dataType, formats)
            fields.append(value.alias(f.name))
        known = {f.name.lower() for f in kind.fields}
        fields += [column.getField(f.name).alias(f.name) for f in source.fields if f.name.lower() not in known]
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    if isinstance(source, ArrayType) and isinstance(kind, ArrayType):
        return F.transform(column, lambda x: _cast(x, source.elementType, kind.elementType, formats))
    if isinstance(source, StructType) and isinstance(kind, MapType):  # (JSON objects are read as structs)
        entries = F.array(*[F.struct(_cast(F.lit(f.name), StringType(), kind.keyType, formats).alias("key"),
                                     _cast(column.getField(f.name), f.dataType, kind.valueType, formats).alias("value"))
                            for f in source.fields])
        return F.when(column.isNull(), F.lit(None)).otherwise(  # (a key absent from a row: no entry)
            F.map_from_entries(F.filter(entries, lambda e: e["value"].isNotNull())))
    if isinstance(source, (StringType, NullType)) and isinstance(kind, (StructType, ArrayType, MapType)):
        return F.lit(None).cast(kind)  # (a column JSON had only nulls in; any other text is refused)
    if isinstance(source, MapType) and isinstance(kind, MapType):
        keyed = column if source.keyType == kind.keyType else \
            F.transform_keys(column, lambda k, _: _cast(k, source.keyType, kind.keyType, formats))
        return F.transform_values(keyed, lambda _, v: _cast(v, source.valueType, kind.valueType, formats))
    if isinstance(source, StringType):
        if isinstance(kind, DateType) and formats.get("dateformat"):
            return F.try_to_date(column, formats["dateformat"])
        pattern = formats.get("timestampntzformat" if isinstance(kind, TimestampNTZType) else "timestampformat")
        if isinstance(kind, (TimestampType, TimestampNTZType)) and pattern:
            return F.try_to_timestamp(column, F.lit(pattern)).cast(kind)
    return column.try_cast(kind)


def read_by_core(path: str, fmt: str) -> bool:
    """Whether the source at `path` is read through the core (not Spark's own readers)."""
    return fmt == "avro" or (fmt in FORMATS and urlsplit(path).scheme.lower() not in SPARK_SCHEMES)


def read_files(spark: SparkSession, path: str, fmt: str, storage_options: dict | None = None, *,
               schema: pa.Schema | None = None, text: bool = False) -> DataFrame:
    """A file, or a folder of files (names starting with `_` or `.` skipped), in `fmt`, as a
    DataFrame, one file per Spark task. The schema is `schema`, else the first file's (with
    `text`, csv columns as strings); every file is cast to it (a file that cannot be is a
    `SchemaError` naming it)."""
    if fmt not in FORMATS:
        raise InvalidOptionError(f"source {path}: the core reads {FORMATS}, not {fmt!r}")
    root, names, storage = _files(path, storage_options, fmt)
    if schema is None:
        with storage.open_input(names[0]) as f:
            schema = _schema(fmt, f)
        if text:
            schema = pa.schema([pa.field(n, pa.string()) for n in schema.names])
    schema = exact_arrow_schema(schema)
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
