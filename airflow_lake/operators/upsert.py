"""`UpsertOperator`: write a source (file or folder) to a table as one commit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lake.core.errors import TableNotFoundError
from airflow_lake.core.settings import check_table_settings
from airflow_lake.core.vocabulary import OPERATIONS, TABLE_TYPES
from airflow_lake.location import is_absolute
from airflow_lake.operators.base import (
    COMMON_TEMPLATE_FIELDS,
    LakeJobOperator,
    choice,
    fields,
    flag,
    mapping,
    none_if_empty,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

SOURCE_FORMATS = ("parquet", "json", "csv", "orc", "avro", "sql", "table")


class UpsertOperator(LakeJobOperator):
    """Writes `source` to the table as one commit with the `upsert` job (rows stay in Spark
    executors; the driver holds only the timeline).

    :param table_path: the table (templated; see `LakeJobOperator` for the common arguments).
    :param source: a file or folder (path or URI) of parquet, json, csv, orc or avro; a Spark
        SQL query with `source_format="sql"`; a table name with `source_format="table"` (templated).
    :param source_format: default: from the file extension, else parquet (templated).
    :param source_options: options of Spark's reader for the source's format, e.g. csv's
        `{"sep": ";", "dateFormat": "dd.MM.yyyy"}` (csv reads `header=true` unless given; templated).
    :param source_schema: the source's schema as a Spark DDL string (`"id STRING, ts LONG"`;
        templated). Without it, csv and json sources written to an existing table take the
        table's column types (csv is read as text, not inferred); a value that does not cast to
        its column's type fails the task naming the column and the value, before anything is written.
    :param operation: `upsert` (default), `insert`, `bulk_insert`, `delete`,
        `insert_overwrite`, `insert_overwrite_table` (any case).
    :param record_key: field or list of fields; with `precombine_field`, `partition_fields`
        (a list), `table_type` (`COPY_ON_WRITE` default, `MERGE_ON_READ`; also `COW`, `MOR`, in
        any case),
        `hive_style_partitioning` and `table_name`: the new table's settings with
        `create_if_missing` (templated, except the flags).
    :param create_if_missing: create the table when the path holds none (needs `record_key`).
        Without it a missing table fails the task. On an existing table every setting given
        (`record_key`, `precombine_field`, `partition_fields`, `table_type`, `table_name`,
        `hive_style_partitioning=True`) must equal the table's own, else the task fails before
        submitting anything, naming both values.
    :param table_options: `hoodie.*` write options for this write (templated).

    XCom: `{"instant", "operation", "inserts", "updates", "deletes", "files_written",
    "replaced_file_groups"}`; `inserts` counts records with new keys, `updates` incoming
    records matching a stored key, `replaced_file_groups` the file groups an insert_overwrite
    replaced. The table's Asset gets an event whose extra carries the instant, action and
    counts, unless the write wrote, deleted and replaced nothing.

    Failure: bad arguments fail at parse time or before submitting (`InvalidOptionError`); a
    failed job fails the task with the job's one-line error (table and instant) and leaves no
    visible commit. A retry of a task whose job already committed returns that commit and
    writes nothing again; one whose job is still running waits for it.
    """

    job = "upsert"
    template_fields: Sequence[str] = (*COMMON_TEMPLATE_FIELDS, "source", "source_format", "source_options",
                                      "source_schema", "record_key", "precombine_field", "partition_fields",
                                      "table_name")
    text_fields = (*LakeJobOperator.text_fields, "source", "source_format", "source_schema", "precombine_field",
                   "table_name")

    def __init__(self, *, table_path: str, source: str, source_format: str | None = None, operation: str = "upsert",
                 record_key: str | Sequence[str] | None = None, precombine_field: str | None = None,
                 partition_fields: Sequence[str] | str | None = None, table_type: str | None = None,
                 table_options: dict[str, Any] | None = None, create_if_missing: bool = False,
                 hive_style_partitioning: bool = False, table_name: str | None = None,
                 source_options: dict[str, Any] | None = None, source_schema: str | None = None, **kwargs) -> None:
        super().__init__(table_path=table_path, table_options=table_options, **kwargs)
        self.source = source
        self.source_format = source_format
        self.source_options = source_options
        self.source_schema = source_schema
        self.operation = choice(self, "operation", operation, OPERATIONS.spellings, OPERATIONS.find)
        self.record_key = record_key
        self.precombine_field = precombine_field
        self.partition_fields = partition_fields
        self.table_type = choice(self, "table_type", table_type, TABLE_TYPES.spellings, TABLE_TYPES.find)
        self.create_if_missing = flag(self, "create_if_missing", create_if_missing)
        self.hive_style_partitioning = flag(self, "hive_style_partitioning", hive_style_partitioning)
        self.table_name = table_name
        if self.create_if_missing and not record_key:
            raise self.invalid("create_if_missing=True needs record_key (the new table's key field)")
        if isinstance(source_format, str) and "{{" not in source_format:
            choice(self, "source_format", source_format, SOURCE_FORMATS, str.lower)

    def lineage_inputs(self) -> list[str]:
        """The source files as a lineage input: not a SQL query or a catalog table (no file
        dataset names them), nor a relative path (Spark reads it from its own working folder)."""
        fmt = self.source_format.lower() if isinstance(self.source_format, str) else None
        if not isinstance(self.source, str) or fmt in ("sql", "table") or not is_absolute(self.source):
            return []
        return [self.source]

    def job_args(self) -> list[str]:
        source = none_if_empty(self.source)
        if source is None:
            raise self.invalid("source is empty")
        fmt = choice(self, "source_format", none_if_empty(self.source_format), SOURCE_FORMATS, str.lower)
        args = ["--source", str(source), "--operation", self.operation]
        if fmt:
            args += ["--source-format", fmt]
        for key, value in mapping(self, "source_options", self.source_options).items():
            args += ["--source-option", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
        if none_if_empty(self.source_schema):
            args += ["--source-schema", str(self.source_schema)]
        settings = self.table_settings()
        try:
            existing = self.hook.get_table(self.table_path)
        except TableNotFoundError:
            if not self.create_if_missing:
                where = self.hook.resolve(self.table_path)
                raise TableNotFoundError(f"{type(self).__name__} {self.task_id}: table {where} does not exist; pass "
                                         "create_if_missing=True with record_key to create it") from None
        else:  # the core's rule, before anything is submitted: every setting given equals the table's
            check_table_settings(existing.storage.uri, existing.config, **settings)
        if self.create_if_missing:
            args.append("--create-if-missing")
            args += ["--record-key", fields(self, "record_key", self.record_key, required=True)]
            if self.table_type:
                args += ["--table-type", self.table_type]
            if none_if_empty(self.precombine_field):
                args += ["--precombine-field", str(self.precombine_field)]
            partitions = fields(self, "partition_fields", self.partition_fields)
            if partitions:
                args += ["--partition-fields", partitions]
            if self.hive_style_partitioning:
                args.append("--hive-style-partitioning")
            if none_if_empty(self.table_name):
                args += ["--table-name", str(self.table_name)]
        return args

    def table_settings(self) -> dict[str, Any]:
        """The table settings given (None: not given), as `check_table_settings` takes them."""
        return {"name": none_if_empty(self.table_name), "table_type": self.table_type,
                "record_key": fields(self, "record_key", self.record_key) or None,
                "precombine_field": none_if_empty(self.precombine_field),
                "partition_fields": fields(self, "partition_fields", self.partition_fields) or None,
                "hive_style_partitioning": self.hive_style_partitioning or None}

    def to_xcom(self, result: dict[str, Any], context: Context) -> dict[str, Any]:
        return {"instant": result.get("instant"), "operation": self.operation, "inserts": result.get("inserts"),
                "updates": result.get("updates"), "deletes": result.get("deletes"),
                "files_written": result.get("files_written"),
                "replaced_file_groups": result.get("replaced_file_groups", 0)}
