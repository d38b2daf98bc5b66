"""The transaction's half that switches a Hudi 1.x table's metadata-table partitions on (built
from a scan of the table: the files listing, the record index, column and partition stats,
secondary indexes as Hudi's CREATE INDEX) and off (as Java switches one off). A mixin of
`Transaction`, beside `metadata_sync`: the same one place that creates and completes timeline
files."""

from __future__ import annotations

import logging

from .. import properties
from ..config import MetadataOptions, TableConfig, TableOptions
from ..errors import InvalidOptionError
from ..index.column_stats import COLUMN_STATS, PARTITION_STATS
from ..index.record_index import IndexLayout, located_keys
from ..index.secondary_index import MIN_GROUPS as SECONDARY_MIN_GROUPS
from ..index.secondary_index import SecondaryIndexDef, scan_values, supported_type
from ..index.secondary_index import init_files as secondary_init_files
from ..mdt_stats import (
    StatsLayout,
    chosen_stats_columns,
    define_column_stats,
    file_stats_records,
    init_stats,
    partition_stats_records,
)
from ..metadata_table import FILES as MDT_FILES
from ..metadata_table import (
    INIT_PREFIX,
    RECORD_INDEX,
    MdtStorage,
    inflight_partitions,
    listed_partitions,
)
from ..metadata_table import MDT as MDT_PATH
from ..metadata_writer import (
    METADATA_ENABLE,
    committed_files,
    define_record_index,
    define_secondary_index,
    how_to_rebuild,
    init_files,
    init_instant,
    init_record_index,
    maintained_partitions,
    maintained_secondary_definitions,
    mdt_properties,
    metadata_asked,
    record_index_group_count,
    switch_off,
    switch_off_unmaintained,
)
from ..metadata_writer import is_on as metadata_on
from ..schema import META_SCHEMA, from_avro
from ..timeline.active import ActiveTimeline
from ..timeline.avro_mdt import METADATA_RECORD_V8, METADATA_RECORD_V9
from ..timeline.avro_schemas import INDEX_PLAN, INDEXING_COMMIT_METADATA
from ..timeline.instant import COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, INDEXING, Instant, State
from ..timeline.metadata import read_avro, write_avro
from ..view import FileSystemView

log = logging.getLogger(__name__)

INFLIGHT_PARTITIONS = "hoodie.table.metadata.partitions.inflight"


class MetadataTableBuilds:
    """`Transaction`'s methods building and switching off metadata-table partitions (they use
    its storage, config, options, timeline, clock and engine, and `MetadataTableSync`'s)."""

    def prepare_metadata_table(self) -> None:
        """Under the lock, before anything changes, on a Hudi 1.x table: the MDT partitions we
        do not maintain are switched off as Java switches them off (with a warning); with
        `hoodie.metadata.enable=true` a table without the files partition gets it (built from
        a listing); with `false` the MDT is switched off (deleted, as Java does, with a warning)."""
        if self.config.version < 8:
            asked = metadata_asked(self.ctx.options)
            if asked:  # (Java writers set it by habit: said, not refused)
                log.warning("table %s: %s=true is not honoured: airflow-lake keeps no metadata table on a version %d "
                            "table (a version 9 or 8 table has one)", self.storage.uri, asked[0], self.config.version)
            return
        # the properties as they are now (another writer may have built or dropped the MDT)
        fresh = properties.load(self.storage).props
        self.config.props.clear()
        self.config.props.update(fresh)
        enable = str(self.ctx.options.get(METADATA_ENABLE, "")).strip().lower()
        if enable == "false":
            self.switch_off_metadata_table()
            return
        switch_off_unmaintained(self.storage, self.config)
        self.switch_off_unsupported_secondary()
        record_index = self.record_index_option()
        partitioned = self.enable_option(MetadataOptions.PARTITIONED_RECORD_INDEX_ENABLE)
        if partitioned == "true" and self.config.version < 9:
            raise InvalidOptionError(f"table {self.storage.uri}: {MetadataOptions.PARTITIONED_RECORD_INDEX_ENABLE.key}"
                                     f"=true needs table version 9 (this one is {self.config.version}); nothing was "
                                     f"changed")
        if "true" in (enable, record_index, partitioned) and not metadata_on(self.storage, self.config.props):
            self.build_metadata_table()
        column_stats = self.enable_option(MetadataOptions.COLUMN_STATS_ENABLE)
        if column_stats == "true" and not metadata_on(self.storage, self.config.props):
            self.build_metadata_table()
        kept = COLUMN_STATS in maintained_partitions(self.storage, self.config.props)
        if column_stats == "true" and not kept and self.quiet("column stats"):
            self.build_column_stats(self.enable_option(MetadataOptions.PARTITION_STATS_ENABLE) != "false")
        elif column_stats == "false" and not kept and any(k in self.config.props
                                                          for k in MetadataOptions.STATS_ASKED_AT_CREATE):
            for key in MetadataOptions.STATS_ASKED_AT_CREATE:  # asked for at creation, not built, now not asked
                self.config.props.pop(key, None)
            properties.save(self.storage, self.config)
        elif column_stats == "false" and kept:
            log.warning("table %s: %s=false switches the column and partition stats off (their metadata table "
                        "partitions are deleted, as Apache Hudi's writer does); =true rebuilds them",
                        self.storage.uri, MetadataOptions.COLUMN_STATS_ENABLE.key)
            for key in MetadataOptions.STATS_ASKED_AT_CREATE:  # (no longer asked for)
                self.config.props.pop(key, None)
            switch_off(self.storage, self.config, [p for p in (COLUMN_STATS, PARTITION_STATS)
                                                   if p in listed_partitions(self.config.props)])
        kept = RECORD_INDEX in maintained_partitions(self.storage, self.config.props)
        if "true" in (record_index, partitioned) and not kept and self.quiet("record index"):
            self.build_record_index(partitioned=partitioned == "true" and record_index != "true")
        elif "false" in (record_index, partitioned) and kept and "true" not in (record_index, partitioned):
            log.warning("table %s: %s=false switches the record index off (its metadata table partition is deleted, "
                        "as Apache Hudi's writer does); =true rebuilds it from a scan", self.storage.uri,
                        MetadataOptions.RECORD_INDEX_ENABLE.key)
            switch_off(self.storage, self.config, [RECORD_INDEX])
            switch_off_unmaintained(self.storage, self.config)  # the secondary indexes resolved through it

    def switch_off_unsupported_secondary(self) -> None:
        """Secondary indexes on a column the table no longer has, or of a type whose text form
        we do not write as Java does, switched off (warned) rather than kept wrong."""
        indexes = maintained_secondary_definitions(self.storage, self.config.props)
        if not indexes:
            return
        schema = self.table_schema()
        if len(schema) == len(META_SCHEMA):  # (no schema to judge by: nothing is switched off)
            return
        off = [d.partition for d in indexes
               if d.column not in schema.names or not supported_type(schema.field(d.column).type)]
        for partition in off:
            log.warning("table %s: switching off the metadata table's %s partition: airflow-lake does not keep a "
                        "secondary index on this column's type current; Hudi rebuilds it with %s", self.storage.uri,
                        partition, how_to_rebuild(partition))
        switch_off(self.storage, self.config, off)

    def finish_indexing(self, timeline: ActiveTimeline) -> None:
        """Under the lock: an `indexing` instant left pending (our index builds run under the
        lock, so its builder died) is undone: the partitions its plan builds switched off, its
        MDT deltacommit rolled back, its instant files deleted."""
        pending = [i for i in timeline.pending() if i.action == INDEXING]
        if not pending or self.config.version < 8:
            return
        writer = self.metadata_writer(require_files=False)
        for instant in pending:
            plan = read_avro(timeline.read_details(instant.to(State.REQUESTED))) or {}
            building = [i.get("metadataPartitionPath") for i in plan.get("indexPartitionInfos") or []]
            log.warning("table %s: the index build %s (%s) did not finish; it is undone (build the index again)",
                        self.storage.uri, instant.time, ", ".join(p for p in building if p))
            switch_off(self.storage, self.config, [p for p in building if p and p != MDT_FILES])
            if writer is not None and self.storage.exists(MDT_PATH):
                self.rollback_metadata_table(writer, None, instant.time)
            timeline.delete_instant_files(instant.time)

    def build_secondary_index(self, timeline: ActiveTimeline, defn: SecondaryIndexDef, token: str | None,
                              ) -> tuple[str, int]:
        """Hudi's CREATE INDEX (v8 spec §5.5c, the `indexing` action) under the lock, nothing
        else in flight: the definition in index.json and the partition inflight, the plan at a
        new instant T, the partition built from a scan of the latest slices in the MDT
        deltacommit at T, listed, then T completed. Returns T and the number of entries."""
        storage, writer = self.storage, self.metadata_writer()
        upto = timeline.writes().completed().last
        define_secondary_index(storage, self.config, defn)
        inflight_parts = inflight_partitions(self.config.props)
        self.config.props[INFLIGHT_PARTITIONS] = ",".join(sorted(set(inflight_parts) | {defn.partition}))
        properties.save(storage, self.config)
        instant = self.new_instant_time(timeline)
        info = {"version": 1, "metadataPartitionPath": defn.partition,
                "indexUptoInstant": upto.time if upto else instant, "extraMetadata": {}}
        requested = self.request(timeline, Instant(instant, INDEXING, State.REQUESTED),
                                 write_avro(INDEX_PLAN, {"version": 1, "indexPartitionInfos": [info]}), token=token)
        inflight = self.inflight(timeline, requested)
        rows = scan_values(self.ctx, FileSystemView(storage, timeline), [defn.column], self.table_schema(),
                           self.engine)
        groups = max(SECONDARY_MIN_GROUPS, record_index_group_count(
            rows.num_rows, SECONDARY_MIN_GROUPS, self.option(MetadataOptions.RECORD_INDEX_MAX_GROUPS),
            self.option(MetadataOptions.RECORD_INDEX_GROWTH),
            self.option(MetadataOptions.RECORD_INDEX_MAX_GROUP_BYTES)))
        storage.delete_dir(f"{MDT_PATH}/{defn.partition}")
        files, meta = secondary_init_files(defn, instant, rows, groups, writer.schema_text())
        mdt = writer.timeline()
        mdt_inflight = mdt.transition(mdt.create(Instant(instant, DELTA_COMMIT, State.REQUESTED)), State.INFLIGHT)
        for path, data in files.items():
            storage.write(path, data)
        mdt.transition(mdt_inflight, State.COMPLETED, meta.to_bytes())
        listed = listed_partitions(self.config.props)
        self.config.props["hoodie.table.metadata.partitions"] = ",".join(sorted(set(listed) | {defn.partition}))
        self.config.props[INFLIGHT_PARTITIONS] = ",".join(p for p in inflight_parts if p != defn.partition)
        properties.save(storage, self.config)
        self.complete(timeline, inflight, write_avro(INDEXING_COMMIT_METADATA, {
            "version": 1, "operationType": None, "indexPartitionInfos": [info]}))
        log.info("table %s: built secondary index %s on %s at %s: %d entries in %d file groups", storage.uri,
                 defn.partition, defn.column, instant, rows.num_rows, groups)
        return instant, rows.num_rows

    def drop_secondary_index(self, partition: str) -> None:
        """Hudi's DROP INDEX: the index's definition, its listing and its partition removed
        (no timeline instant, as Java's `dropIndex`)."""
        log.warning("table %s: dropping secondary index %s (its metadata table partition is deleted)",
                    self.storage.uri, partition)
        switch_off(self.storage, self.config, [partition])

    def quiet(self, what: str) -> bool:
        """Whether an index may be built now: no other write or compaction in flight (one that
        began before the index existed would commit files it does not index); else warned,
        and the next write that asks builds it."""
        busy = [i.time for i in self.timeline.pending()
                if i.action in (*COMMIT_ACTIONS, COMPACTION) and not self.is_expired(i.time)]
        if busy:
            log.warning("table %s: the %s is built once no other write is in flight (pending: %s); this write "
                        "goes on without it", self.storage.uri, what, ", ".join(busy[:3]))
        return not busy

    def enable_option(self, option) -> str:
        """`true`, `false` or "" (not given) of a write's `*.enable` option (refused otherwise,
        before anything changes)."""
        value = str(self.option(option) or "").strip().lower()
        if value not in ("", "true", "false"):
            raise InvalidOptionError(f"table {self.storage.uri}: {option.key}={value!r} is not true or false; "
                                     "nothing was changed")
        return value

    def build_column_stats(self, partition_stats: bool) -> None:
        """The column stats (and, with `partition_stats`, the partition stats) partitions, built
        from the statistics of every file of the latest file slices (base files: their footers;
        log files: their records) at the next initialisation instants (§5.5a, §5.5b, §5.6),
        their `index.json` definition written, then registered; a build a crash left is started
        over."""
        storage = self.storage
        avro = self.timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA))
        if not avro:  # no column yet to choose from: the first write that brings some builds them
            log.info("table %s: the column stats are built by the first write after the table has a schema",
                     storage.uri)
            return
        schema = from_avro(avro)
        try:
            columns = chosen_stats_columns(schema, self.option(MetadataOptions.COLUMN_STATS_COLUMNS),
                                           self.option(MetadataOptions.COLUMN_STATS_MAX_COLUMNS))
        except ValueError as e:
            raise InvalidOptionError(f"table {storage.uri}: {MetadataOptions.COLUMN_STATS_COLUMNS.key}: {e}; nothing "
                                     "was changed") from e
        writer = self.metadata_writer()
        timeline = writer.timeline()
        for instant in [i for i in timeline.pending() if i.time.startswith(INIT_PREFIX)]:  # one that died
            timeline.delete_instant_files(instant.time)
        # (partition stats are kept for partitioned tables only, as Hudi keeps them: spec §5.5b)
        built = [COLUMN_STATS] + ([PARTITION_STATS] if partition_stats and self.config.partition_fields else [])
        for partition in built:
            storage.delete_dir(f"{MDT_PATH}/{partition}")
        define_column_stats(storage, self.config, columns)
        layout = StatsLayout.of(storage, self.config.props, schema)
        records = file_stats_records(storage, FileSystemView(storage, self.timeline), columns)
        schema_text = writer.schema_text()
        groups = {COLUMN_STATS: self.option(MetadataOptions.COLUMN_STATS_GROUPS),
                  PARTITION_STATS: self.option(MetadataOptions.PARTITION_STATS_GROUPS)}
        file_rows = [(k, r) for k, (_, r) in sorted(records.items())]
        for partition in built:
            rows = file_rows if partition == COLUMN_STATS else partition_stats_records(
                sorted({p for p, _ in records.values()}), file_rows, tuple(columns), tight=True)
            instant = init_instant(timeline)
            files, meta = init_stats(instant, partition, rows, groups[partition], layout, schema_text)
            requested = timeline.create(Instant(instant, DELTA_COMMIT, State.REQUESTED))
            inflight = timeline.transition(requested, State.INFLIGHT)
            for path, data in files.items():
                storage.write(path, data)
            timeline.transition(inflight, State.COMPLETED, meta.to_bytes())
            timeline = writer.timeline()
        listed = listed_partitions(self.config.props)
        self.config.props["hoodie.table.metadata.partitions"] = ",".join(sorted(set(listed) | set(built)))
        for key in MetadataOptions.STATS_ASKED_AT_CREATE:  # (asked for at creation: done)
            self.config.props.pop(key, None)
        properties.save(storage, self.config)
        log.info("table %s: built the %s of %d columns from %d file statistics", storage.uri, " and ".join(built),
                 len(columns), len(records) // max(1, len(columns)))

    def record_index_option(self) -> str:
        """`true`, `false` or "" (not given): whether the write asks for the record index."""
        value = self.option(MetadataOptions.RECORD_INDEX_ENABLE) or \
            self.ctx.options.get("hoodie.metadata.global.record.level.index.enable", "")
        value = str(value).strip().lower()
        if value not in ("", "true", "false"):
            raise InvalidOptionError(f"table {self.storage.uri}: {MetadataOptions.RECORD_INDEX_ENABLE.key}="
                                     f"{value!r} is not true or false; nothing was changed")
        return value

    def build_record_index(self, partitioned: bool = False) -> None:
        """The record index (the MDT's `record_index` partition), built from a scan of every
        live key at the next initialisation instant (§5.5, §5.6), then registered in
        `hoodie.table.metadata.partitions` (and, v9, in index.json); a build a crash left is
        started over. `partitioned`: Hudi 1.1's per-partition form, each data partition's
        number of groups estimated from its keys (between the record.level.index min and max)."""
        storage = self.storage
        writer = self.metadata_writer()
        timeline = writer.timeline()
        for instant in [i for i in timeline.pending() if i.time.startswith(INIT_PREFIX)]:  # one that died
            timeline.delete_instant_files(instant.time)
        storage.delete_dir(f"{MDT_PATH}/{RECORD_INDEX}")
        located = located_keys(self.ctx, self.timeline, self.engine)
        growth, size = (self.option(MetadataOptions.RECORD_INDEX_GROWTH),
                        self.option(MetadataOptions.RECORD_INDEX_MAX_GROUP_BYTES))
        if partitioned:
            counts = located.group_by("partition").aggregate([("key", "count")])
            per = dict(zip(counts["partition"].to_pylist(), counts["key_count"].to_pylist(), strict=True))
            layout = IndexLayout(tuple(record_index_group_count(
                per[p], self.option(MetadataOptions.PARTITIONED_RECORD_INDEX_MIN_GROUPS),
                self.option(MetadataOptions.PARTITIONED_RECORD_INDEX_MAX_GROUPS), growth, size)
                for p in sorted(per)), tuple(sorted(per)))
        else:
            layout = IndexLayout((record_index_group_count(
                located.num_rows, self.option(MetadataOptions.RECORD_INDEX_MIN_GROUPS),
                self.option(MetadataOptions.RECORD_INDEX_MAX_GROUPS), growth, size),))
        groups = layout.num_groups
        instant = init_instant(timeline)
        files, meta = init_record_index(instant, located, layout, writer.schema_text(), self.config.timezone)
        requested = timeline.create(Instant(instant, DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition(requested, State.INFLIGHT)
        for path, data in files.items():
            storage.write(path, data)
        timeline.transition(inflight, State.COMPLETED, meta.to_bytes())
        if self.config.version >= 9:
            define_record_index(storage, self.config, partitioned)
        listed = [p.strip() for p in self.config.get(TableOptions.METADATA_PARTITIONS).split(",") if p.strip()]
        self.config.props["hoodie.table.metadata.partitions"] = ",".join(sorted(set(listed) | {RECORD_INDEX}))
        properties.save(storage, self.config)
        log.info("table %s: built the record index at %s: %d keys in %d file groups", storage.uri, instant,
                 located.num_rows, groups)

    def switch_off_metadata_table(self) -> None:
        """`hoodie.metadata.enable=false`: as Java's writer, drop the MDT and its partitions."""
        partitions = self.config.get(TableOptions.METADATA_PARTITIONS)
        if not partitions and not self.storage.exists(MDT_PATH):
            return
        log.warning("table %s: hoodie.metadata.enable=false switches the metadata table off (%s): it is deleted, "
                    "as Apache Hudi's writer does; Hudi rebuilds it from a listing when enabled again",
                    self.storage.uri, partitions or "no partition")
        self.config.props["hoodie.table.metadata.partitions"] = ""
        self.config.props["hoodie.table.metadata.partitions.inflight"] = ""
        properties.save(self.storage, self.config)
        self.storage.delete_dir(MDT_PATH)

    def build_metadata_table(self) -> None:
        """The files partition of the MDT (and the MDT itself when there is none), built from a
        listing of the committed data files at the next initialisation instant (v8 spec §5.6),
        then registered in `hoodie.table.metadata.partitions`."""
        storage = self.storage
        if not storage.exists(f"{MDT_PATH}/.hoodie/hoodie.properties"):
            storage.delete_dir(MDT_PATH)  # (a crash while creating it)
            for folder in (".hoodie/timeline", ".hoodie/timeline/history"):
                storage.mkdirs(f"{MDT_PATH}/{folder}")
            properties.save(MdtStorage(storage), TableConfig(mdt_properties(self.config)), create=True)
        writer = self.metadata_writer(require_files=False)
        timeline = writer.timeline()
        for instant in [i for i in timeline if i.time.startswith(INIT_PREFIX)]:  # an initialisation that died
            timeline.delete_instant_files(instant.time)
        storage.delete_dir(f"{MDT_PATH}/{MDT_FILES}")
        instant = init_instant(timeline)
        schema = METADATA_RECORD_V8 if self.config.version == 8 else METADATA_RECORD_V9
        files, meta = init_files(instant, committed_files(storage, self.timeline), schema)
        requested = timeline.create(Instant(instant, DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition(requested, State.INFLIGHT)
        for path, data in files.items():
            storage.write(path, data)
        timeline.transition(inflight, State.COMPLETED, meta.to_bytes())
        listed = [p.strip() for p in self.config.get(TableOptions.METADATA_PARTITIONS).split(",") if p.strip()]
        self.config.props["hoodie.table.metadata.partitions"] = ",".join(sorted(set(listed) | {MDT_FILES}))
        properties.save(storage, self.config)
        log.info("table %s: built the metadata table's files partition at %s", storage.uri, instant)
