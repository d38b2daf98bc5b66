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

from typing import Any

from airflow_lake.core.vocabulary import OPERATIONS, TABLE_TYPES
from airflow_lake.spark import job, services

PARSER = job.parser("upsert", __doc__)
PARSER.add_argument("--source", required=True,
                    help="a file or folder (path or URI), a Spark SQL query, or a table name (see --source-format)")
PARSER.add_argument("--source-format", type=str.lower, choices=services.SOURCE_FORMATS,
                    help="default: from the file extension, else parquet")
PARSER.add_argument("--operation", default="upsert", type=OPERATIONS.normalise, choices=OPERATIONS.names)
PARSER.add_argument("--create-if-missing", action="store_true",
                    help="create the table when the path holds none (needs --record-key)")
PARSER.add_argument("--table-type", type=TABLE_TYPES.normalise, choices=TABLE_TYPES.names,
                    help="for a new table (default COPY_ON_WRITE)")
PARSER.add_argument("--record-key", metavar="F[,F]", help="for a new table: the record key field(s)")
PARSER.add_argument("--precombine-field", metavar="F", help="for a new table: the ordering field")
PARSER.add_argument("--partition-fields", metavar="A,B", help="for a new table: partition fields")
PARSER.add_argument("--hive-style-partitioning", action="store_true", help="for a new table: field=value folders")
PARSER.add_argument("--table-name", help="for a new table (default: the last folder of --table)")
PARSER.add_argument("--source-option", action="append", default=[], metavar="KEY=VALUE", type=job.key_value,
                    help="repeatable: an option of Spark's reader for the source's format (csv: header, sep, "
                         "dateFormat, inferSchema...; csv reads header=true unless given)")
PARSER.add_argument("--source-schema", metavar="DDL",
                    help="the source's schema as a Spark DDL string ('id STRING, ts LONG, dt STRING'); without it, "
                         "csv and json read into an existing table take the table's column types")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run in this process (the active SparkSession); the JSON result as a dict."""
    return job.execute(PARSER, services.upsert, argv)


if __name__ == "__main__":
    job.run(PARSER, services.upsert)
