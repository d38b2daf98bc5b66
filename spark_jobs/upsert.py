"""Write a source to a table as one commit, distributed: the source's rows stay in executors
(keys computed there, looked up against each file group in a task, each file group written
by an executor); the driver holds the timeline and the write stats.

Operations: upsert (default), insert, bulk_insert, delete, insert_overwrite,
insert_overwrite_table. The source is a file or folder of parquet, json, csv or orc (read by
Spark) or avro (read by the core with fastavro, in executors), a Spark SQL query
(`--source-format sql`) or a table name (`--source-format table`). With `--create-if-missing`
a new table is created from `--record-key`, `--precombine-field`, `--partition-fields` and
`--table-type`; on an existing table, each of these settings given must equal the table's own
(the job fails before writing, naming both values, otherwise).
"""

from __future__ import annotations

import os
from typing import Any

from airflow_lake.core.errors import InvalidOptionError, TableNotFoundError
from airflow_lake.core.settings import check_table_settings
from airflow_lake.core.table import Table
from airflow_lake.core.write.client import WriteResult
from airflow_lake.core.write.prepare import OPERATIONS
from airflow_lake.spark import job

FORMATS = ("parquet", "json", "csv", "orc", "avro", "sql", "table")

PARSER = job.parser("upsert", __doc__)
PARSER.add_argument("--source", required=True,
                    help="a file or folder (path or URI), a Spark SQL query, or a table name (see --source-format)")
PARSER.add_argument("--source-format", type=str.lower, choices=FORMATS,
                    help="default: from the file extension, else parquet")
PARSER.add_argument("--operation", default="upsert", choices=OPERATIONS)
PARSER.add_argument("--create-if-missing", action="store_true",
                    help="create the table when the path holds none (needs --record-key)")
PARSER.add_argument("--table-type", type=str.upper, choices=("COPY_ON_WRITE", "MERGE_ON_READ"),
                    help="for a new table (default COPY_ON_WRITE)")
PARSER.add_argument("--record-key", metavar="F[,F]", help="for a new table: the record key field(s)")
PARSER.add_argument("--precombine-field", metavar="F", help="for a new table: the ordering field")
PARSER.add_argument("--partition-fields", metavar="A,B", help="for a new table: partition fields")
PARSER.add_argument("--hive-style-partitioning", action="store_true", help="for a new table: field=value folders")
PARSER.add_argument("--table-name", help="for a new table (default: the last folder of --table)")


def source_format(source: str, given: str | None) -> str:
    if given:
        return given
    ext = os.path.splitext(source.rstrip("/"))[1].lower().lstrip(".")
    return {"jsonl": "json", "ndjson": "json"}.get(ext, ext if ext in FORMATS else "parquet")


def read_source(spark, source: str, fmt: str, storage_options: dict | None = None):
    """The source as a DataFrame, without bringing rows to the driver."""
    if fmt == "sql":
        return spark.sql(source)
    if fmt == "table":
        return spark.table(source)
    from airflow_lake.spark.sources import read_by_core, read_files

    if read_by_core(source, fmt):  # avro, or files on an object store: the core's storage layer in executors
        return read_files(spark, source, fmt, storage_options)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(source)


def body(run: job.JobRun) -> dict[str, Any]:
    from airflow_lake.spark import session, write

    a = run.args
    spark = session("airflow-lake upsert")
    created = False
    settings = {"name": a.table_name, "table_type": a.table_type, "record_key": a.record_key,
                "precombine_field": a.precombine_field, "partition_fields": a.partition_fields,
                "hive_style_partitioning": a.hive_style_partitioning or None}
    if a.create_if_missing:
        try:  # an existing table must have the settings given; a new one is created from them
            new, created = Table.open_or_create(a.table, **settings, options=run.table_options,
                                                storage_options=run.storage_options)
        except TableNotFoundError:
            if a.record_key:
                raise
            raise InvalidOptionError(f"table {a.table}: --create-if-missing needs --record-key") from None
        if created:
            job.log.info("upsert: created %s table %s (%s)", new.config.table_type, a.table, new.config.name)
    table = run.open_table()
    check_table_settings(table.storage.uri, table.config, **settings)
    fmt = source_format(a.source, a.source_format)
    job.log.info("upsert: %s of %s source %s", a.operation, fmt, a.source)
    df = read_source(spark, a.source, fmt, run.storage_options)
    result = write(table, df, a.operation, run.extra_metadata)
    job.log.info("upsert: %s %s: %d inserts, %d updates, %d deletes in %d files", a.operation, result.instant,
                 result.num_inserts, result.num_updates, result.num_deletes, len(result.files))
    return run.result(action=table.timeline.get(result.instant).action, operation=a.operation,
                      **write_counts(result), table_created=created)


def write_counts(result: WriteResult) -> dict[str, Any]:
    """The result line's account of one write: its instant and counts, with the file groups
    an insert_overwrite(_table) replaced (an overwrite by an empty source writes no record yet
    changes the table)."""
    return {"instant": result.instant, "inserts": result.num_inserts, "updates": result.num_updates,
            "deletes": result.num_deletes, "files_written": len(result.files), "records_written": result.num_writes,
            "replaced_file_groups": result.replaced_file_groups, "partitions": len(result.partitions),
            "already_done": result.already_done}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, body, argv)


if __name__ == "__main__":
    job.run(PARSER, body)
