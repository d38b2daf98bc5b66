"""Arrow <-> Spark types for the reader: the Spark schema of a table, and the exact Arrow
schema `mapInArrow` must yield for it (Spark checks int32 vs int64, timestamp units, ...)."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type, to_arrow_schema
from pyspark.sql.types import StructField, StructType

from airflow_lake.core.errors import UnsupportedFeatureError

SPARK_TIMEZONE = "UTC"  # Spark's TimestampType holds UTC instants; the zone of the Arrow type is a label


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark schema of an Arrow schema: strings, integers, floats, booleans, decimals,
    dates, timestamps (with a zone: TimestampType; without: TimestampNTZType), binary, lists,
    structs and maps, nested."""
    fields = []
    for f in schema:
        try:
            spark_type = from_arrow_type(f.type, prefer_timestamp_ntz=True)
        except Exception as e:  # pyspark raises its own type error class
            raise UnsupportedFeatureError(f"column {f.name!r}: Arrow type {f.type} has no Spark type") from e
        fields.append(StructField(f.name, spark_type, nullable=f.nullable))
    return StructType(fields)


def spark_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark expects back from `mapInArrow` for `spark_schema(schema)`."""
    return to_arrow_schema(spark_schema(schema), timezone=SPARK_TIMEZONE)


def to_spark_arrow(table: pa.Table, target: pa.Schema) -> pa.Table:
    """`table` cast to `target` (from `spark_arrow_schema`): a no-op when the types already match."""
    if table.schema.equals(target, check_metadata=False):
        return table
    return table.replace_schema_metadata(None).cast(target)


def arrow_schema_of(spark_schema: StructType) -> pa.Schema:
    """The Arrow schema of a Spark schema (UTC timestamps, no large types)."""
    return to_arrow_schema(spark_schema, timezone=SPARK_TIMEZONE, prefers_large_types=False)


def exact_arrow_schema(schema: pa.Schema) -> pa.Schema:
    """The Arrow schema Spark expects back for the Spark schema `schema` converts to."""
    return arrow_schema_of(from_arrow_schema(schema))
