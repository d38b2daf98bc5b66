"""The transaction's half that keeps a Hudi 1.x table's metadata table in step (v8 spec §5): the
MDT deltacommit of every data-table instant (the files listing, the record index's, column and
partition stats' log files), the MDT's own compaction and clean, its rollback and restore
(switching partitions on and off: `metadata_builds`). A mixin of `Transaction`: the same one
place that creates and completes timeline files."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import timedelta

import pyarrow as pa

from ..config import MetadataOptions, ServiceOptions, TableOptions
from ..errors import InvalidTableError, TimelineError
from ..index.column_stats import COLUMN_STATS, PARTITION_STATS, indexed_columns
from ..index.record_index import RecordIndex, located_keys
from ..index.record_index_update import resync
from ..index.secondary_index import resync as resync_secondary
from ..index.secondary_index import scan_values
from ..mdt_stats import (
    StatsLayout,
    column_stats_records,
    file_stats_records,
    partition_stats_records,
    stats_log_files,
)
from ..merge import KEY
from ..metadata_table import FILES as MDT_FILES
from ..metadata_table import MDT as MDT_PATH
from ..metadata_table import (
    RECORD_INDEX,
    has_files_partition,
    readable_instants,
)
from ..metadata_writer import (
    FilesChange,
    MetadataWriter,
    clean_due,
    clean_metadata,
    clean_plan,
    clean_retention,
    compacted_bases,
    compaction_due,
    files_change,
    logged_files,
    maintained_partitions,
    maintained_secondary_indexes,
    restore_change,
)
from ..metadata_writer import compaction_plan as metadata_compaction_plan
from ..metadata_writer import is_on as metadata_on
from ..model import BaseFile, WriteStat
from ..paths import relative_path
from ..schema import META_SCHEMA, arrow_schema_with_meta, from_avro
from ..timeline.active import ActiveTimeline
from ..timeline.clock import format_instant, instant_epoch_ms, parse_instant
from ..timeline.instant import CLEAN, COMPACTION, DELTA_COMMIT, ROLLBACK, Instant, State
from ..timeline.metadata import CommitMetadata
from ..timeline.payloads import (
    CleanerPlan,
    CompactionPlan,
    RollbackPlan,
)
from ..view import FileSystemView, list_partition_files
from ..vocabulary import CLEAN_POLICIES

log = logging.getLogger(__name__)


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
            if missing:  # (a rollback by an earlier version deleted a log file it merges: it cannot finish)
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
