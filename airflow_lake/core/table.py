"""`Table`: the facade users (and the Spark and Airflow layers) call."""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from . import properties
from .config import (
    COMPLEX_KEYGEN,
    CUSTOM_KEYGEN,
    DEFAULT_PAYLOAD,
    MERGER_STRATEGY,
    NONPARTITIONED_KEYGEN,
    OVERWRITE_PAYLOAD,
    SIMPLE_KEYGEN,
    TABLE_WRITE_DEFAULTS,
    TIMESTAMP_KEYGEN,
    MetadataOptions,
    TableConfig,
    TableOptions,
    WriteOptions,
    check_option_values,
    misspelt_options,
    options_value,
    unsupported_merge,
)
from .context import TableContext
from .engine import Engine, LocalEngine
from .errors import (
    InvalidOptionError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
    UnsupportedTableVersionError,
)
from .index import check_index_switch
from .keygen_timestamp import INPUT_TIMEZONE, OUTPUT_TIMEZONE, TIMEZONE, setting
from .keys import KEYGEN_CLASSES, WRITE_PARTITION_FIELD, KeyGenerator, declared_keygen, split_typed_fields
from .lock import LockProvider
from .metadata_writer import metadata_asked
from .paths import Deleter
from .read import Reader
from .schema import NAME_RULE, from_avro, is_avro_name
from .services import archive, clean, compaction, indexing, rollback, savepoint
from .settings import check_table_settings, table_type_name
from .storage import Storage, open_storage
from .timeline.active import ActiveTimeline, timeline_folder
from .timeline.archived import ArchivedTimeline
from .timeline.instant import Instant
from .txn.transaction import Transaction
from .txn.undo import RollbackResult
from .versions import WRITE_TABLE_VERSION, hudi1x_properties, write_table_version
from .vocabulary import COPY_ON_WRITE, MERGE_ON_READ, TABLE_TYPES
from .write.client import WriteResult
from .write.pipeline import write_arrow

log = logging.getLogger(__name__)
_INIT_FOLDERS = (".hoodie", ".hoodie/.schema", ".hoodie/archived", ".hoodie/.temp", ".hoodie/.aux",
                 ".hoodie/.aux/.bootstrap/.partitions", ".hoodie/.aux/.bootstrap/.fileids")
_LAYOUT_2_FOLDERS = (".hoodie/timeline", ".hoodie/timeline/history")


def _counted(method):
    """Log the storage calls of a table operation at DEBUG (`Storage.counting`)."""

    @functools.wraps(method)
    def run(self: Table, *args, **kwargs):
        what = kwargs.get("operation", "upsert") if method.__name__ == "write" else method.__name__
        with self.storage.counting(what):
            return method(self, *args, **kwargs)

    return run


class Table:
    """A Hudi table (version 6) at a path or URI.

    `options` holds write-time `hoodie.*` settings (index type, file sizes, bloom filter,
    heartbeat...) for this handle; table properties come from `hoodie.properties`.
    """

    def __init__(self, storage: Storage, config: TableConfig, options: dict[str, Any] | None = None,
                 engine: Engine | None = None, storage_options: dict[str, Any] | None = None):
        self.storage = storage
        self.config = config
        self.options = dict(options or {})
        self.storage_options = dict(storage_options or {})
        self.engine = engine or LocalEngine(self.option(WriteOptions.PARALLELISM))
        self.keygen = KeyGenerator.for_table(config, storage.uri, self.options)

    def __repr__(self) -> str:
        return f"Table({self.storage.uri!r}, {self.config.table_type})"

    # -- lifecycle -------------------------------------------------------------------------
    @staticmethod
    def create(path: str, *, name: str, table_type: str | None = None, record_key: str | list[str],
               precombine_field: str | list[str] | None = None, partition_fields: str | list[str] | tuple = (),
               hive_style_partitioning: bool = False, options: dict[str, Any] | None = None,
               storage_options: dict[str, Any] | None = None) -> Table:
        """Create an empty table (hoodie.properties and the meta folders).

        `options` may name the key generator (`hoodie.table.keygenerator.class`) and its
        `hoodie.keygen.timebased.*` settings; they are kept in hoodie.properties, where Java
        writers find them too. CustomKeyGenerator fields are given typed
        (`partition_fields=["ts:TIMESTAMP", "city:SIMPLE"]`). Several ordering fields
        (`precombine_field="a,b"` or a list, compared as a tuple) need table version 9
        (`hoodie.write.table.version=9`). `hoodie.metadata.enable=true` (or an MDT index's
        `*.enable=true`) builds the metadata table and that index now (version 8 or 9; refused on
        version 6). A table setting among `options` (`hoodie.table.type`, `hoodie.table.recordkey.fields`...,
        or the Spark writer's key) fills an argument not given and must equal one given; the type is
        COPY_ON_WRITE unless given. `storage_options` configure the file system as in `open`."""
        storage = open_storage(path, storage_options)
        blocker = storage.file_in_the_way()
        if blocker is not None:
            raise InvalidOptionError(f"table {storage.uri}: cannot create a table there, {blocker} is a "
                                     "regular file, not a folder")
        if storage.exists(".hoodie/hoodie.properties"):
            raise TableExistsError(f"{storage.uri} already holds a Hudi table")
        left = properties.timeline_left(storage)
        if left is not None:
            raise TableExistsError(f"{storage.uri} holds a Hudi table's timeline ({left}...) without its "
                                   f"{properties.PROPERTIES}: restore that file rather than create a table over it")
        uri = storage.uri
        options = _options_dict(uri, options)
        table_type = _writer_alias(uri, options, ("hoodie.datasource.write.table.type", TableOptions.TYPE.key),
                                   table_type, "table_type", same=table_type_name)
        table_type = TABLE_TYPES.parse(table_type or COPY_ON_WRITE, f"table {uri}", "table_type")
        name = _writer_alias(uri, options, ("hoodie.datasource.write.table.name", TableOptions.NAME.key), name, "name")
        precombine_keys = ("hoodie.datasource.write.precombine.field", TableOptions.PRECOMBINE_FIELD.key,
                           TableOptions.ORDERING_FIELDS.key)
        precombine_field = ",".join(_as_list(uri, "precombine_field", precombine_field))
        precombine_field = _writer_alias(uri, options, precombine_keys, precombine_field, "precombine_field")
        ordering = _as_list(uri, "precombine_field", precombine_field)
        precombine_field = ",".join(ordering) or None
        record_key = _writer_alias(uri, options, ("hoodie.datasource.write.recordkey.field",
                                                  TableOptions.RECORD_KEY_FIELDS.key),
                                   ",".join(_as_list(uri, "record_key", record_key)), "record_key")
        partition_fields = ",".join(_as_list(uri, "partition_fields", partition_fields))
        partition_fields = _writer_alias(uri, options, (TableOptions.PARTITION_FIELDS.key,), partition_fields,
                                         "partition_fields", names_only=True)
        partition_fields = _writer_alias(uri, options, (WRITE_PARTITION_FIELD,), partition_fields, "partition_fields",
                                         names_only=True, keep=True)
        for writer_key, table_key in _WRITER_TABLE_KEYS.items():  # the writer's names for table settings
            if writer_key in options:
                value = str(options.pop(writer_key))
                if str(options.get(table_key, value)) != value:
                    raise InvalidOptionError(f"table {storage.uri}: {writer_key}={value!r} contradicts "
                                             f"{table_key}={options[table_key]!r}")
                options[table_key] = value
        keys = _as_list(uri, "record_key", record_key)
        typed = split_typed_fields(partition_fields)
        parts = [name for name, _ in typed]
        if not keys:
            raise InvalidOptionError(f"table {storage.uri}: record_key is required")
        _check_names(storage.uri, name, keys + parts + ordering)
        nested = [f for f in ordering if "." in f]
        if nested:
            raise UnsupportedFeatureError(f"table {uri}: precombine_field {nested[0]!r} is a nested field: "
                                          "airflow-lake orders records by top-level fields only (nested key and "
                                          "partition fields work); nothing was created")
        keygen = NONPARTITIONED_KEYGEN if not parts else (
            COMPLEX_KEYGEN if len(keys) > 1 or len(parts) > 1 else SIMPLE_KEYGEN)
        props = {
            "hoodie.table.name": name,
            "hoodie.database.name": "default",
            "hoodie.table.type": table_type,
            "hoodie.table.version": "6",
            "hoodie.timeline.layout.version": "1",
            "hoodie.table.recordkey.fields": ",".join(keys),
            "hoodie.table.keygenerator.class": keygen,
            "hoodie.datasource.write.hive_style_partitioning": str(bool(hive_style_partitioning)).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.populate.meta.fields": "true",
            "hoodie.table.timeline.timezone": "UTC",
            "hoodie.compaction.payload.class": DEFAULT_PAYLOAD if precombine_field else OVERWRITE_PAYLOAD,
        }
        if precombine_field:
            props["hoodie.table.precombine.field"] = precombine_field
        if parts:
            props["hoodie.table.partition.fields"] = ",".join(parts)
        if table_type == MERGE_ON_READ:
            props["hoodie.compaction.record.merger.strategy"] = MERGER_STRATEGY
        if any(kind for _, kind in typed):
            props["hoodie.table.keygenerator.class"] = CUSTOM_KEYGEN
            props[WRITE_PARTITION_FIELD] = ",".join(f"{n}:{k}" if k else n for n, k in typed)
        write_options = {}
        for key, value in (options or {}).items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            if _is_table_property(key):
                props[key] = text
            else:
                write_options[key] = value
        _complete_keygen_props(storage.uri, props)
        version = write_table_version(storage.uri, write_options)
        _check_derived(uri, options, version)
        check_option_values(f"table {uri}", options)
        asked = metadata_asked(write_options)
        if asked and version == 6:
            raise UnsupportedFeatureError(f"table {storage.uri}: {asked[0]}=true: airflow-lake keeps no metadata table "
                                          "on a version 6 table; create it with hoodie.write.table.version=9 (or 8)")
        if len(ordering) > 1 and version != 9:
            raise InvalidOptionError(f"table {storage.uri}: several ordering fields {ordering} need table version 9 "
                                     f"(hoodie.write.table.version=9); version {version} has one precombine field")
        if version != 6:
            props = hudi1x_properties(props, version)
            if str(write_options.get(MetadataOptions.COLUMN_STATS_ENABLE.key, "")).strip().lower() == "true":
                # no schema yet to choose their columns from: the first write that has one builds them
                props.update({k: str(write_options[k]) for k in MetadataOptions.STATS_ASKED_AT_CREATE
                              if k in write_options})
        props.setdefault(WriteOptions.INDEX_TYPE.key, WriteOptions.INDEX_TYPE.default)  # the index it is written with
        problem = unsupported_merge(props, write_options, write=True)
        if problem:
            raise UnsupportedFeatureError(f"table {storage.uri}: {problem} is not implemented by airflow-lake "
                                          "(DefaultHoodieRecordPayload and OverwriteWithLatestAvroPayload are)")
        KeyGenerator.for_table(TableConfig(props), storage.uri, write_options).check_writable()
        for folder in _INIT_FOLDERS + (_LAYOUT_2_FOLDERS if version != 6 else ()):
            storage.mkdirs(folder)
        config = TableConfig(props)
        properties.save(storage, config, create=True)
        table = Table(storage, config, write_options, storage_options=storage_options)
        if asked:  # the metadata table (and the indexes asked for) built now, kept by every write after
            txn = table.transaction()
            with txn.lock():
                txn.repair()
        return table

    @staticmethod
    def open(path: str, *, options: dict[str, Any] | None = None, engine: Engine | None = None,
             storage_options: dict[str, Any] | None = None) -> Table:
        """Open an existing table; `TableNotFoundError` if the path holds none.
        `storage_options` configure the file system (`aws_access_key_id`, `aws_region`,
        `aws_endpoint_url`... or pyarrow's S3/GCS/HDFS/Azure keywords; docs/object-stores.md)."""
        storage = open_storage(path, storage_options)
        options = _options_dict(storage.uri, options)
        check_table_exists(storage)
        config = properties.load(storage)
        if (config.version > 6 and config.version not in (8, 9)) or config.timeline_layout not in (1, 2):
            raise UnsupportedTableVersionError(
                f"table {storage.uri}: table version {config.version} (timeline layout {config.timeline_layout}) is "
                "not one airflow-lake knows; it reads table versions 6, 8 and 9 and writes version 6")
        if config.version < 6:
            log.warning("table %s: table version %s is older than 6; reading it as version 6", storage.uri,
                        config.version)
        return Table(storage, config, options, engine, storage_options)

    @staticmethod
    def open_or_create(path: str, *, name: str | None = None, table_type: str | None = None,
                       record_key: str | list[str] | None = None, precombine_field: str | None = None,
                       partition_fields: str | list[str] | tuple | None = None,
                       hive_style_partitioning: bool | None = None, options: dict[str, Any] | None = None,
                       storage_options: dict[str, Any] | None = None, engine: Engine | None = None,
                       ) -> tuple[Table, bool]:
        """The table at `path` and False, refusing any setting given (None: not given) that
        differs from the table's own; or, when the path holds none, a table created from them
        (name: the last folder of `path`; type: COPY_ON_WRITE) and True."""
        settings = {"name": name, "table_type": table_type, "record_key": record_key,
                    "precombine_field": precombine_field, "partition_fields": partition_fields,
                    "hive_style_partitioning": hive_style_partitioning}
        try:
            table = Table.open(path, options=options, engine=engine, storage_options=storage_options)
        except TableNotFoundError:
            try:
                return Table._create_from(path, settings, options, storage_options, engine), True
            except TableExistsError:  # another writer created it meanwhile: taken as if it had been there
                table = Table.open(path, options=options, engine=engine, storage_options=storage_options)
        check_table_settings(table.storage.uri, table.config, options=options, **settings)
        return table, False

    @staticmethod
    def _create_from(path: str, settings: dict[str, Any], options: dict[str, Any] | None,
                     storage_options: dict[str, Any] | None, engine: Engine | None) -> Table:
        if not settings["record_key"]:
            raise TableNotFoundError(f"table {path}: there is no table there to open, and creating one needs "
                                     "a record key")
        name = settings["name"] or path.rstrip("/").rsplit("/", 1)[-1] or "table"
        table = Table.create(path, name=name, table_type=settings["table_type"],
                             record_key=settings["record_key"], precombine_field=settings["precombine_field"],
                             partition_fields=settings["partition_fields"] or (),
                             hive_style_partitioning=bool(settings["hive_style_partitioning"]), options=options,
                             storage_options=storage_options)
        return table if engine is None else Table(table.storage, table.config, table.options, engine, storage_options)

    # -- options, schema, timeline ---------------------------------------------------------
    def context(self) -> TableContext:
        """This table as a picklable value for tasks that run elsewhere."""
        return TableContext.of(self)

    def transaction(self) -> Transaction:
        """A transaction on this table (lock, repair, instants, commit, abort) for one
        operation, with this handle's options and engine."""
        return Transaction(self.context(), self.engine)

    def deleter(self) -> Deleter:
        """Deletes table files as this table's engine tasks (services and rollbacks use it)."""
        return Deleter(self.engine, self.context())

    def option(self, option) -> Any:
        return options_value(self.options, option, self.config.props)

    @property
    def timeline(self) -> ActiveTimeline:
        """The active timeline, scanned now (each access lists `.hoodie/`: an operation takes
        one and passes it along)."""
        timeline = ActiveTimeline(self.storage, folder=timeline_folder(self.config.props))
        timeline.archive_folder = self.config.archive_folder
        timeline.zone = "UTC" if self.config.timezone == "UTC" else "LOCAL"
        return timeline

    def schema_avro(self, timeline: ActiveTimeline | None = None) -> dict | None:
        """The table's Avro schema (no meta fields): latest commit's, else the create schema."""
        timeline = self.timeline if timeline is None else timeline
        return timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA))

    def schema(self) -> pa.Schema:
        """The table's Arrow schema without meta fields (empty before the first commit)."""
        avro = self.schema_avro()
        return from_avro(avro) if avro else pa.schema([])

    # -- writes ----------------------------------------------------------------------------
    def check_merge_support(self, what: str, *, write: bool = False) -> None:
        """Refuse `what` when records would merge by a payload or merger we do not implement."""
        problem = unsupported_merge(self.config.props, self.options, write=write)
        if problem:
            raise UnsupportedFeatureError(
                f"table {self.storage.uri}: {what} needs record merging with {problem}, which airflow-lake does not "
                "implement (DefaultHoodieRecordPayload and OverwriteWithLatestAvroPayload with the default merger); "
                "refusing rather than merging differently from Apache Hudi"
                + ("" if write else "; read-optimized reads work"))

    def check_options(self) -> None:
        """Refuse, before an operation touches the timeline, an option value it cannot take
        (this handle's options, and the writer settings the table keeps as its defaults)."""
        kept = {k: v for k, v in self.config.props.items() if k in TABLE_WRITE_DEFAULTS}
        check_option_values(f"table {self.storage.uri}", kept, self.options)

    def check_write_support(self) -> None:
        """Before a write touches the timeline: option values, the key generator and merge
        settings we implement."""
        self.check_options()
        self.check_merge_support("a write", write=True)
        asked = self.options.get(WRITE_TABLE_VERSION)
        if asked is not None and str(asked).strip() != str(self.config.version):
            raise InvalidOptionError(f"table {self.storage.uri}: {WRITE_TABLE_VERSION}={asked!r} differs from the "
                                     f"table's version {self.config.version}; airflow-lake never upgrades or "
                                     "downgrades a table (nothing was written)")
        self.keygen.check_writable()
        check_index_switch(self.storage.uri, self.config.props, self.options)
        check_table_settings(self.storage.uri, self.config, options=self.options)
        for key, fields in (("hoodie.datasource.write.recordkey.field", self.config.record_key_fields),
                            (WRITE_PARTITION_FIELD, self.config.partition_fields)):
            given = self.options.get(key)
            if given is not None and [n for n, _ in split_typed_fields(str(given))] != list(fields):
                raise InvalidOptionError(f"table {self.storage.uri}: write option {key}={given!r} names other "
                                         f"fields than the table's {fields}; the table's are used by every writer")

    @_counted
    def write(self, data, *, operation: str = "upsert", extra_metadata: dict[str, str] | None = None) -> WriteResult:
        """Write one batch as one commit. Operations: insert, upsert, bulk_insert, delete,
        insert_overwrite, insert_overwrite_table. A frame the engine owns (a Spark DataFrame on
        a SparkEngine) is written by the engine, its rows never on this process; any other
        input is read as Arrow."""
        owns = getattr(self.engine, "owns", None)  # (engines written before `owns` own no frame)
        if owns is not None and owns(data):
            return self.engine.write_frame(self, data, operation, extra_metadata)
        return write_arrow(self, data, operation, extra_metadata)

    # -- reads -----------------------------------------------------------------------------
    @_counted
    def read(self, *, as_of: str | None = None, columns: list[str] | None = None, filters=None,
             query_type: str = "snapshot") -> pa.Table:
        """Snapshot (or as-of) read with the five meta columns; `filters` as pyarrow's DNF."""
        return Reader(self, self.engine).snapshot(as_of=as_of, columns=columns, filters=filters,
                                                  query_type=query_type)

    @_counted
    def read_incremental(self, start: str | None, end: str | None = None, *, columns: list[str] | None = None,
                         filters=None, holes: str = "FAIL") -> pa.Table:
        """Rows whose latest write is a commit in (start, end]; start None: from the beginning
        (an `InstantSensor`'s first `previous_watermark`), end None: to the latest commit."""
        return Reader(self, self.engine).incremental(start, end, columns=columns, filters=filters, holes=holes)

    # -- table services --------------------------------------------------------------------
    @_counted
    def plan_compaction(self, *, instant: str | None = None, strategy: str | None = None,
                        max_delta_commits: int | None = None, max_delta_seconds: int | None = None,
                        target_io_mb: int | None = None,
                        extra_metadata: dict[str, str] | None = None) -> compaction.CompactionDecision:
        """Schedule a compaction plan if due; the decision says which instant, or why not."""
        self.check_options()
        self.check_merge_support("compaction")
        return compaction.schedule(self.transaction(), instant=instant, strategy=strategy,
                                   max_delta_commits=max_delta_commits, max_delta_seconds=max_delta_seconds,
                                   target_io_mb=target_io_mb, extra_metadata=extra_metadata)

    def schedule_compaction(self, **kwargs) -> str | None:
        """Write `T.compaction.requested` and return T, or None when nothing qualifies.
        Keywords: instant, strategy (NUM_COMMITS, NUM_COMMITS_AFTER_LAST_REQUEST, TIME_ELAPSED,
        NUM_AND_TIME, NUM_OR_TIME), max_delta_commits, max_delta_seconds, target_io_mb,
        extra_metadata."""
        return self.plan_compaction(**kwargs).instant

    @_counted
    def run_compaction(self, instant: str | None = None, *, order: str = "FIFO",
                       extra_metadata: dict[str, str] | None = None) -> compaction.CompactionResult:
        """Execute the given pending compaction plan, or the oldest (FIFO) / newest (LIFO)."""
        self.check_options()
        self.check_merge_support("compaction")
        return compaction.run(self.transaction(), instant, order=order, extra_metadata=extra_metadata)

    @_counted
    def clean(self, *, policy: str | None = None, retained: int | None = None, dry_run: bool = False,
              extra_metadata: dict[str, str] | None = None) -> clean.CleanResult:
        """Delete file slices outside the retained window (plan, delete, `T.clean`); `policy`
        (default: `hoodie.cleaner.policy`, else KEEP_LATEST_COMMITS) in any case."""
        self.check_options()
        return clean.clean(self.transaction(), policy=policy, retained=retained, dry_run=dry_run,
                           extra_metadata=extra_metadata)

    @_counted
    def archive(self, *, min_commits: int | None = None, max_commits: int | None = None, batch: int | None = None,
                extra_metadata: dict[str, str] | None = None) -> archive.ArchiveResult:
        """Move the oldest completed instants to the archived timeline: once more than
        `max_commits` commits are active, down to `min_commits` (defaults: the table's
        `hoodie.keep.max.commits` and `hoodie.keep.min.commits` options, else 30 and 20)."""
        self.check_options()
        return archive.archive(self.transaction(), min_commits=min_commits, max_commits=max_commits, batch=batch,
                               extra_metadata=extra_metadata)

    @property
    def archived_timeline(self) -> ArchivedTimeline:
        return ArchivedTimeline(self.storage, self.config.archive_folder)

    @_counted
    def rollback(self, instant: str, *, extra_metadata: dict[str, str] | None = None) -> RollbackResult:
        """Roll back a pending write or compaction, or the latest completed write. A run token
        in `extra_metadata` is recorded in the token index (rollback metadata has no field for it)."""
        return rollback.rollback(self.transaction(), instant, extra_metadata=extra_metadata)

    @_counted
    def savepoint(self, instant: str, *, user: str | None = None, comments: str = "",
                  extra_metadata: dict[str, str] | None = None) -> str:
        """Protect the files of completed commit `instant` from clean and archive."""
        return savepoint.savepoint(self.transaction(), instant, user=user, comments=comments,
                                   extra_metadata=extra_metadata)

    @_counted
    def delete_savepoint(self, instant: str) -> str:
        """Delete the savepoint `instant`: clean and archive treat its commit like any other."""
        return savepoint.delete_savepoint(self.transaction(), instant)

    @_counted
    def restore(self, instant: str, *, extra_metadata: dict[str, str] | None = None) -> savepoint.RestoreResult:
        """Roll the table back to the savepoint `instant`."""
        return savepoint.restore(self.transaction(), instant, extra_metadata=extra_metadata)

    # -- secondary indexes -----------------------------------------------------------------
    @_counted
    def create_index(self, name: str, column: str, *,
                     extra_metadata: dict[str, str] | None = None) -> indexing.IndexResult:
        """Hudi's `CREATE INDEX name ON table (column)`: a secondary index on `column` built
        from the latest snapshot (the `indexing` action), kept current by every later write and
        used by `read(filters=[(column, "=", v)])`. Needs the record index."""
        return indexing.create_index(self.transaction(), name, column, extra_metadata=extra_metadata)

    @_counted
    def drop_index(self, name: str) -> str:
        """Hudi's `DROP INDEX name ON table`; returns the metadata-table partition removed."""
        return indexing.drop_index(self.transaction(), name)

    def indexes(self) -> list[dict]:
        """The table's secondary indexes (name, column, version, listed, maintained)."""
        return indexing.list_indexes(self.transaction())

    # -- the transaction's steps, for callers that hold a table ------------------------------
    def lock(self) -> LockProvider:
        """The table lock of one operation (`hoodie.write.lock.provider`, default `.hoodie/lock`)."""
        return self.transaction().lock().provider

    def new_instant_time(self, timeline: ActiveTimeline | None = None) -> str:
        """A new instant, greater than every instant on the timeline (call under the lock)."""
        return self.transaction().new_instant_time(timeline)

    def repair_timeline(self) -> ActiveTimeline:
        """Under the lock: finish interrupted rollbacks and restores, roll back failed writes
        (expired heartbeats), drop marker folders of instants no longer pending; returns the
        timeline (`Transaction.repair`)."""
        return self.transaction().repair()

    def check_still_owner(self, inflight: Instant, timeline: ActiveTimeline | None = None) -> None:
        """Before completing: our inflight file must still be there (not rolled back), in
        `timeline` (a listing taken under the lock) or on storage."""
        self.transaction().check_still_owner(inflight, timeline)

    def prepare_for_write(self) -> None:
        """Spec §1.4: a table with the metadata table on loses it before our first write."""
        self.transaction().drop_metadata_table()

def _check_names(uri: str, name: str, fields: list[str]) -> None:
    """The table name must be non-empty without '/', '\\' or control characters (other
    characters become '__' in the Avro record name, as Apache Hudi's Spark writer does);
    key, partition and precombine fields (dotted paths) must be valid Avro names."""
    if not name or re.search(r"[/\\\x00-\x1f\x7f]", name):
        raise InvalidOptionError(f"table {uri}: invalid table name {name!r} (it must be non-empty, "
                                 "without '/', '\\' or control characters)")
    for field in fields:
        bad = next((part for part in field.split(".") if not is_avro_name(part)), None)
        if bad is not None:
            raise InvalidOptionError(f"table {uri}: field {field!r} is not a valid column name ({NAME_RULE}; "
                                     f"{bad!r} is not)")


def _as_list(uri: str, argument: str, value: Any) -> list[str]:
    """Field names given as text (comma separated) or a list of texts."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    raise InvalidOptionError(f"table {uri}: {argument}={value!r} is not a field name or a list of them")


def check_table_exists(storage: Storage) -> None:
    """`TableNotFoundError` unless `storage` holds a table (`.hoodie`), naming a bucket that
    does not exist as such."""
    if storage.exists(".hoodie"):
        return
    bucket = storage.missing_bucket()
    why = f"bucket {bucket!r} does not exist (or these credentials cannot see it)" if bucket else "no .hoodie folder"
    raise TableNotFoundError(f"{storage.uri} is not a Hudi table: {why}")


def _options_dict(uri: str, options: Any) -> dict[str, Any]:
    """`options` as a dict with text keys (None: none)."""
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise InvalidOptionError(f"table {uri}: options={options!r} is not a mapping of option keys to values")
    for key, meant in misspelt_options(options):
        log.warning("table %s: option %s is not one airflow-lake reads, so it has no effect; did you mean %s?",
                    uri, key, meant)
    return dict(options)


# table properties airflow-lake derives, which a caller may not set to anything else
_DERIVED = (TableOptions.VERSION.key, TableOptions.TIMELINE_LAYOUT.key, TableOptions.METADATA_PARTITIONS.key,
            "hoodie.table.metadata.partitions.inflight", TableOptions.CHECKSUM.key)


def _check_derived(uri: str, options: dict[str, Any], version: int) -> None:
    """Refuse a table property among `options` that airflow-lake derives, unless it is what
    the table gets (its version from `hoodie.write.table.version`, the layout that version has)."""
    derived = {TableOptions.VERSION.key: str(version), TableOptions.TIMELINE_LAYOUT.key: "1" if version == 6 else "2"}
    for key in _DERIVED:
        if key in options and str(options[key]).strip() != derived.get(key):
            how = (f"; the table version is chosen by {WRITE_TABLE_VERSION} (6, 8 or 9), and sets the timeline "
                   "layout (1 for 6, 2 for 8 and 9)" if key in derived else "; the metadata table's writer keeps it")
            raise InvalidOptionError(f"table {uri}: {key}={options[key]!r} is not a setting to give at creation{how}; "
                                     "nothing was created")


# Write settings given at create time are kept with the table as its defaults (config.py).
_SHARED_WRITE_KEYS = TABLE_WRITE_DEFAULTS


def _complete_keygen_props(uri: str, props: dict[str, str]) -> None:
    """Key generator properties of a table we create: a known class, and for timestamp
    partitions a recorded time zone (UTC unless given), so that every writer, Java's too,
    names partitions alike instead of using its JVM's zone."""
    declared = declared_keygen(props)
    keygen = KEYGEN_CLASSES.get(declared)
    if keygen is None:
        raise UnsupportedFeatureError(f"table {uri}: key generator {declared} is not implemented by airflow-lake")
    typed = split_typed_fields(props.get(WRITE_PARTITION_FIELD, ""))
    timestamp = keygen == TIMESTAMP_KEYGEN or (keygen == CUSTOM_KEYGEN and any(k == "TIMESTAMP" for _, k in typed))
    if timestamp and all(setting(props, k) is None for k in (TIMEZONE, INPUT_TIMEZONE, OUTPUT_TIMEZONE)):
        props[INPUT_TIMEZONE] = "UTC"
        props[OUTPUT_TIMEZONE] = "UTC"


# The writer's (Spark datasource) names of settings the table keeps under its own key.
_WRITER_TABLE_KEYS = {
    "hoodie.datasource.write.keygenerator.class": "hoodie.table.keygenerator.class",
    "hoodie.datasource.write.keygenerator.type": "hoodie.table.keygenerator.type",
    "hoodie.datasource.write.payload.class": "hoodie.compaction.payload.class",
}
# Of the writer's `hoodie.datasource.write.*` settings, these are table properties (as Java keeps them).
_WRITER_TABLE_PROPERTIES = {"hoodie.datasource.write.hive_style_partitioning",
                            "hoodie.datasource.write.partitionpath.urlencode",
                            "hoodie.datasource.write.drop.partition.columns", WRITE_PARTITION_FIELD}


def _writer_alias(uri: str, options: dict[str, Any], keys: tuple[str, ...], given: str | None, argument: str, *,
                  names_only: bool = False, keep: bool = False, same: Callable[[str], str] | None = None) -> str | None:
    """Options (the writer's key, the table's) naming what an argument names: each fills the
    argument when it is not given and must agree with it when it is (or with the option that
    filled it). Returns the argument's value; the options are removed unless `keep`."""
    source = argument
    for key in keys:
        if key not in options:
            continue
        value = str(options[key]) if keep else str(options.pop(key))
        if same is not None:
            value_names, given_names = same(value), same(given or "")
        else:
            value_names = ",".join(n for n, _ in split_typed_fields(value)) if names_only else value
            given_names = ",".join(n for n, _ in split_typed_fields(given or "")) if names_only else (given or "")
        if given and value_names.replace(" ", "") != given_names.replace(" ", ""):
            raise InvalidOptionError(f"table {uri}: {key}={value!r} contradicts {source}={given!r}")
        if not given:
            given, source = value, key
    return given


def _is_table_property(key: str) -> bool:
    known = {getattr(TableOptions, n).key for n in dir(TableOptions) if n.isupper()}
    if key in known or key in _SHARED_WRITE_KEYS or key in _WRITER_TABLE_PROPERTIES:
        return True
    return key.startswith(("hoodie.table.", "hoodie.keygen."))
