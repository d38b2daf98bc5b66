"""The transaction's half that keeps a Hudi 1.x table's metadata table in step (v8 spec §5): the
MDT deltacommit of every data-table instant (the files listing, the record index's, column and
partition stats' log files), the MDT's own compaction and clean, its rollback and restore, and
switching its partitions on (built from a scan) and off. A mixin of `Transaction`: the same one
place that creates and completes timeline files."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta

import pyarrow as pa

from .. import properties
from ..config import MetadataOptions, ServiceOptions, TableConfig, TableOptions
from ..errors import InvalidOptionError, InvalidTableError, TimelineError
from ..index.column_stats import COLUMN_STATS, PARTITION_STATS, indexed_columns
from ..index.record_index import IndexLayout, RecordIndex, located_keys
from ..index.record_index_update import resync
from ..index.secondary_index import MIN_GROUPS as SECONDARY_MIN_GROUPS
from ..index.secondary_index import SecondaryIndexDef, scan_values, supported_type
from ..index.secondary_index import init_files as secondary_init_files
from ..index.secondary_index import resync as resync_secondary
from ..mdt_stats import (
    StatsLayout,
    chosen_stats_columns,
    column_stats_records,
    define_column_stats,
    file_stats_records,
    init_stats,
    partition_stats_records,
    stats_log_files,
)
from ..merge import KEY
from ..metadata_table import FILES as MDT_FILES
from ..metadata_table import (
    INIT_PREFIX,
    RECORD_INDEX,
    MdtStorage,
    has_files_partition,
    inflight_partitions,
    listed_partitions,
    readable_instants,
)
from ..metadata_table import MDT as MDT_PATH
from ..metadata_writer import (
    METADATA_ENABLE,
    FilesChange,
    MetadataWriter,
    clean_due,
    clean_metadata,
    clean_plan,
    clean_retention,
    committed_files,
    compacted_bases,
    compaction_due,
    define_record_index,
    define_secondary_index,
    files_change,
    how_to_rebuild,
    init_files,
    init_instant,
    init_record_index,
    logged_files,
    maintained_partitions,
    maintained_secondary_definitions,
    maintained_secondary_indexes,
    mdt_properties,
    metadata_asked,
    record_index_group_count,
    restore_change,
    switch_off,
    switch_off_unmaintained,
)
from ..metadata_writer import compaction_plan as metadata_compaction_plan
from ..metadata_writer import is_on as metadata_on
from ..model import BaseFile, WriteStat
from ..paths import relative_path
from ..schema import META_SCHEMA, arrow_schema_with_meta, from_avro
from ..timeline.active import ActiveTimeline
from ..timeline.avro_mdt import METADATA_RECORD_V8, METADATA_RECORD_V9
from ..timeline.avro_schemas import INDEX_PLAN, INDEXING_COMMIT_METADATA
from ..timeline.clock import format_instant, instant_epoch_ms, parse_instant
from ..timeline.instant import CLEAN, COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, INDEXING, ROLLBACK, Instant, State
from ..timeline.metadata import CommitMetadata, read_avro, write_avro
from ..timeline.payloads import (
    CleanerPlan,
    CompactionPlan,
    RollbackPlan,
)
from ..view import FileSystemView, list_partition_files
from ..vocabulary import CLEAN_POLICIES

log = logging.getLogger(__name__)

INFLIGHT_PARTITIONS = "hoodie.table.metadata.partitions.inflight"


class MetadataTableSync:
    """`Transaction`'s metadata-table methods (they use its storage, config, options, timeline,
    clock and engine)."""

    def metadata_writer(self, *, require_files: bool = True) -> MetadataWriter | None:
        """The writer of this table's metadata table, when readers list files through it (a
        version 8 or 9 table with the `files` partition)."""
        if self.config.version < 8:
            return None
        if require_files and not metadata_on(self.storage, self.config.props):
            if has_files_partition(self.config.props):  # listed, but there is no metadata table to keep
                raise InvalidTableError(
                    f"table {self.storage.uri}: hoodie.table.metadata.partitions lists files but .hoodie/metadata "
                    "holds no metadata table; Hudi readers would miss files: write with hoodie.metadata.enable=true "
                    "to rebuild it, or =false to switch it off (nothing was changed)")
            return None
        return MetadataWriter(self.storage, "UTC" if self.config.timezone == "UTC" else "LOCAL")

    def sync_metadata_table(self, instant: Instant, content: bytes, index_stats: Sequence[WriteStat] = (),
                            column_ranges: dict[tuple[str, str], tuple] | None = None) -> None:
        """Before `instant` completes: its MDT deltacommit at the same instant, completed (v8
        spec §2.4: a reader never sees a data commit whose files the MDT lacks), committing the
        index log files `index_stats` name too."""
        writer = self.metadata_writer()
        change = files_change(instant, content) if writer is not None else None
        if change is None:
            return
        timeline = writer.timeline()
        if timeline.contains(instant.time):  # left by a crash: this instant's commit is being redone
            self.rollback_metadata_table(writer, None, instant.time)
            timeline = writer.timeline()
        self.metadata_deltacommit(writer, timeline, instant.time, change, index_stats,
                                  self.stats_files(writer, instant.time, change, column_ranges))
        self.clean_metadata_table(writer)
        self.compact_metadata_table(writer, instant.time)

    def metadata_deltacommit(self, writer: MetadataWriter, timeline: ActiveTimeline, instant: str,
                             change: FilesChange, index_stats: Sequence[WriteStat] = (),
                             stats_files: Sequence[tuple[str, bytes, WriteStat]] = ()) -> None:
        """The MDT deltacommit at `instant` recording `change`: requested, inflight, its log
        files, completed (with the index log files already written, `index_stats`)."""
        path, block, meta = writer.deltacommit(instant, change, index_stats, stats_files)
        requested = timeline.create(Instant(instant, DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition(requested, State.INFLIGHT, CommitMetadata("UPSERT_PREPPED").to_bytes())
        for stats_path, data, _ in stats_files:
            self.storage.write(stats_path, data)
        self.storage.write(path, block)
        timeline.transition(inflight, State.COMPLETED, meta.to_bytes())

    def stats_files(self, writer: MetadataWriter, instant: str, change: FilesChange,
                    ranges: dict[tuple[str, str], tuple] | None, *,
                    resync: bool = False) -> list[tuple[str, bytes, WriteStat]]:
        """The column and partition stats log files of the MDT deltacommit at `instant` (when
        the table keeps them): the written files' statistics, tombstones of the deleted ones,
        and the written partitions' statistics recomputed. `resync` (a rollback or restore that
        undid writes an MDT base file holds): the statistics of every live file of the changed
        partitions, from their footers, and their partition stats as tight bounds, since
        files an index build never saw may be live again."""
        kept = maintained_partitions(self.storage, self.config.props)
        if COLUMN_STATS not in kept:
            return []
        avro = self.timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA))
        schema = from_avro(avro) if avro else pa.schema([])
        columns = tuple(indexed_columns(self.storage, self.config.props, schema) or ())
        layout = StatsLayout.of(self.storage, self.config.props, schema)
        schema_text = writer.schema_text()
        records = column_stats_records(change.deleted, ranges or {}, columns)
        live: list = []
        if resync:
            changed = sorted(set(change.deleted) | set(change.written))
            listed = list_partition_files(self.storage, changed)
            view = FileSystemView(self.storage, self.timeline, partition_files=listed)
            live = [(k, r) for k, (_, r) in sorted(file_stats_records(self.storage, view, list(columns)).items())]
            records += live
        files = stats_log_files(self.storage, instant, schema_text, COLUMN_STATS, records, layout)
        if PARTITION_STATS in kept and resync:
            tight = partition_stats_records(changed, live, columns, tight=True)
            files += stats_log_files(self.storage, instant, schema_text, PARTITION_STATS, tight, layout)
        elif PARTITION_STATS in kept and change.list_partitions:  # (a clean writes none: §5.5b)
            written = partition_stats_records(sorted(change.written), records, columns)
            files += stats_log_files(self.storage, instant, schema_text, PARTITION_STATS, written, layout)
        return files

    def clean_metadata_table(self, writer: MetadataWriter) -> None:
        """Finish an MDT clean a crash left pending; else, once 3 MDT instants followed its latest
        compaction, clean the MDT's old file slices at a new instant (§5.8), retaining per the
        data table's clean policy as Java's writer derives it."""
        timeline = writer.timeline()
        pending = [i for i in timeline.pending() if i.action == CLEAN]
        if pending:
            instant = pending[0]
            plan = CleanerPlan.from_bytes(timeline.read_details(instant.to(State.REQUESTED)))
        else:
            if not clean_due(timeline):
                return
            policy = CLEAN_POLICIES.parse(self.option(ServiceOptions.CLEAN_POLICY), f"table {self.storage.uri}",
                                          ServiceOptions.CLEAN_POLICY.key)
            plan = clean_plan(self.storage, timeline, policy,
                              clean_retention(policy, self.option(ServiceOptions.RETAINED[policy])),
                              maintained_partitions(self.storage, self.config.props))
            if plan is None:
                return
            instant = timeline.create(Instant(self.new_instant_time(timeline), CLEAN, State.REQUESTED), plan.to_bytes())
        start = time.time()
        paths = [relative_path(self.storage, f, instant=instant.time, what="metadata table clean plan file")
                 for files in plan.files.values() for f in files]  # refused before anything changes
        if any(not p.startswith(f"{MDT_PATH}/") for p in paths):
            raise TimelineError(f"table {self.storage.uri}: metadata table clean {instant.time} names files outside "
                                f"{MDT_PATH}: {[p for p in paths if not p.startswith(MDT_PATH)][:3]}; refused")
        if instant.state == State.REQUESTED:
            instant = timeline.transition(instant, State.INFLIGHT, plan.to_bytes())
        for path in paths:
            self.storage.delete(path)
        timeline.transition(instant, State.COMPLETED, clean_metadata(instant.time, plan, start).to_bytes())

    def compact_metadata_table(self, writer: MetadataWriter, pending_data: str) -> None:
        """Finish an MDT compaction a crash left pending; else, when enough MDT deltacommits
        followed the last one, compact the MDT's file groups at `pending_data` minus 1 ms (v8
        spec §5.8: the MDT deltacommit of the data instant still completing stays out of it)."""
        timeline = writer.timeline()
        pending = [i for i in timeline.pending() if i.action == COMPACTION]
        if pending:
            plan = CompactionPlan.from_bytes(timeline.read_details(pending[0].to(State.REQUESTED)))
            requested = pending[0]
            missing = [f"{MDT_PATH}/{op.partition}/{name}" for op in plan.operations
                       for name in ([op.data_file] if op.data_file else []) + list(op.delta_files)
                       if not self.storage.exists(f"{MDT_PATH}/{op.partition}/{name}")]
            if missing:  # (a rollback before this fix deleted a log file it merges: it cannot finish)
                log.warning("table %s: the metadata table's pending compaction %s merges files that are gone (%s); "
                            "it is undone", self.storage.uri, requested.time, missing[:3])
                self.drop_metadata_compaction(writer)
                return
        else:
            if not compaction_due(timeline, int(self.option(MetadataOptions.COMPACT_MAX_DELTA_COMMITS))):
                return
            # before the earliest data instant still pending whose MDT deltacommit completed
            # (this one included): no compacted base absorbs a deltacommit that may be rolled back
            synced = {i.time for i in timeline.completed() if i.action == DELTA_COMMIT}
            earliest = min([pending_data] + [i.time for i in self.timeline.pending() if i.time in synced])
            at = format_instant(parse_instant(earliest) - timedelta(milliseconds=1))
            if timeline.contains(at) or any(i.time > at for i in timeline if i.action == COMPACTION):
                return  # (an instant there already: the next commit compacts)
            plan = metadata_compaction_plan(self.storage, timeline, at,
                                            tuple(maintained_partitions(self.storage, self.config.props)))
            requested = timeline.create(Instant(at, COMPACTION, State.REQUESTED), plan.to_bytes())
        if requested.state == State.REQUESTED:
            requested = timeline.transition(requested, State.INFLIGHT)
        valid = readable_instants(timeline, self.timeline)
        avro = self.timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA))
        layout = StatsLayout.of(self.storage, self.config.props, from_avro(avro) if avro else pa.schema([]))
        files, meta = compacted_bases(self.storage, timeline, plan, requested.time, writer.schema_text(), valid,
                                      layout)
        for path, data in files:
            self.storage.write(path, data)
        self.check_lock()  # (a holder frozen past the lock's expiry: another may have undone this compaction)
        timeline.transition(requested, State.COMPLETED, meta.to_bytes())

    def drop_metadata_compaction(self, writer: MetadataWriter) -> None:
        """Undo the MDT compactions a crash left pending (the base files they wrote, their state
        files): a rollback or restore is about to delete the log files of a deltacommit their
        plan merges. The MDT is compacted again when next due."""
        timeline = writer.timeline()
        for pending in [i for i in timeline.pending() if i.action == COMPACTION]:
            for partition in writer.partitions():
                for st in self.storage.list(f"{MDT_PATH}/{partition}"):
                    base = BaseFile.parse(f"{MDT_PATH}/{partition}", st.name)
                    if base is not None and base.instant == pending.time:
                        self.storage.delete(st.path)
            timeline.delete_instant_files(pending.time)
            log.info("table %s: the metadata table's pending compaction %s is undone", self.storage.uri, pending.time)

    def rollback_metadata_table(self, writer: MetadataWriter, by: str | None, target: str,
                                deleted: dict[str, list[str]] | None = None) -> None:
        """Roll back the MDT deltacommit of data-table instant `target`, if the MDT has one: its
        log files and state files deleted, recorded (`by`) as an MDT rollback instant (§5.6).
        Once an MDT compaction absorbed it, the data files the rollback `deleted` (partition ->
        names) are tombstoned by an MDT deltacommit at `by` instead."""
        timeline = writer.timeline()
        rb = next((i for i in timeline.pending() if i.time == by and i.action == ROLLBACK), None) if by else None
        if not timeline.contains(target) and rb is None:
            for path in (p for paths in writer.written_by(target).values() for p in paths):
                self.storage.delete(path)  # index log files its tasks wrote before it failed
            return
        start = time.time()
        logs = writer.written_by(target)
        if by is not None and rb is None and writer.absorbed(timeline, target):
            # merged into an MDT base file already: its files are deleted by a deltacommit at `by`
            # (tombstones, as Java turns a rollback's deleted files into MDT records)
            if timeline.contains(by):  # (a crash left that deltacommit, done or not: it is done again)
                self.rollback_metadata_table(writer, None, by)
                timeline = writer.timeline()
            if deleted is None:
                deleted = logged_files(self.storage, logs.get(MDT_FILES, []), target)
            change = FilesChange(deleted=deleted, list_partitions=False)
            self.metadata_deltacommit(writer, timeline, by, change, self.resync_indexes(writer, by),
                                      self.stats_files(writer, by, change, None, resync=True))
            return
        # (a pending MDT compaction may merge the log files about to go: it could never finish)
        self.drop_metadata_compaction(writer)
        timeline = writer.timeline()
        if rb is not None:  # an MDT rollback a crash left pending: finish it
            plan = RollbackPlan.from_bytes(timeline.read_details(rb.to(State.REQUESTED)))
            current = Instant(plan.instant, plan.action, State.COMPLETED)
        else:
            current, plan = writer.rollback_plan(timeline, target)
            if by is not None:
                rb = timeline.create(Instant(by, ROLLBACK, State.REQUESTED), plan.to_bytes())
        if rb is not None and rb.state == State.REQUESTED:
            rb = timeline.transition(rb, State.INFLIGHT)
        for path in (p for paths in logs.values() for p in paths):
            self.storage.delete(path)
        timeline.delete_instant_files(target)
        if rb is not None:
            timeline.transition(rb, State.COMPLETED, writer.rollback_metadata(by, current, plan, start).to_bytes())

    def restore_metadata_table(self, writer: MetadataWriter, at: str, undone: list[str]) -> None:
        """Before the restore at `at` completes: the MDT deltacommits of the `undone` instants are
        rolled back (those an MDT compaction has not absorbed), then an MDT deltacommit at `at`
        brings the listing in line with the restored files (Java's restore sync: the absorbed
        ones' files deleted, files cleaned after the savepoint, ...). Idempotent: a restore a
        crash interrupted redoes it."""
        timeline = writer.timeline()
        for target in undone + [at]:  # (`at`: a sync a crash left before the restore completed)
            if timeline.contains(target) and (target == at or not writer.absorbed(timeline, target)):
                self.rollback_metadata_table(writer, None, target)
        timeline = writer.timeline()
        change = restore_change(self.storage, self.timeline)
        self.metadata_deltacommit(writer, timeline, at, change, self.resync_indexes(writer, at),
                                  self.stats_files(writer, at, change, None, resync=True))

    def resync_indexes(self, writer: MetadataWriter, instant: str) -> list[WriteStat]:
        """The record index and the secondary indexes brought in line with a scan of the table
        by log files of the MDT deltacommit at `instant` (after a rollback or restore undid
        writes an MDT compaction had merged: their index entries cannot be rolled back). A scan
        of every file group."""
        if RECORD_INDEX not in maintained_partitions(self.storage, self.config.props):
            return []
        timeline = self.timeline
        index = RecordIndex.open(self.storage, self.config.props, timeline)
        stats = resync(index, located_keys(self.ctx, timeline, self.engine), instant,
                       instant_epoch_ms(instant, self.config.timezone), writer.schema_text())
        log.info("table %s: record index brought in line with the table at %s (%d index file groups changed)",
                 self.storage.uri, instant, len(stats))
        secondary = maintained_secondary_indexes(self.storage, self.config.props, timeline)
        if secondary:
            columns = [si.defn.column for si in secondary]
            schema = self.table_schema()
            if len(schema) == len(META_SCHEMA):  # (every commit undone: no schema, and no record to index)
                rows = pa.schema([pa.field(c, pa.string()) for c in [KEY, *dict.fromkeys(columns)]]).empty_table()
            else:  # (one scan for every index)
                rows = scan_values(self.ctx, FileSystemView(self.storage, timeline), columns, schema, self.engine)
            for si in secondary:
                changed = resync_secondary(si, rows, instant, writer.schema_text())
                log.info("table %s: secondary index %s brought in line with the table at %s (%d index file groups "
                         "changed)", self.storage.uri, si.defn.partition, instant, len(changed))
                stats += changed
        return stats

    def table_schema(self) -> pa.Schema:
        """The table's schema with its meta fields first (from the latest commit)."""
        return arrow_schema_with_meta(self.timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA)))

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
