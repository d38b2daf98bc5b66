"""The transaction: the one place that creates and completes timeline files.

Every write and table service runs through a `Transaction`: under the table lock it repairs
the timeline (finishes interrupted rollbacks and restores, rolls back writes whose heartbeat
expired: Hudi's LAZY failed-writes policy), looks its run token up (a retry returns the
stored result; a live attempt with the token is waited for), creates its instant (requested,
then inflight) and starts its heartbeat; at the end it checks, again under the lock, that its
inflight file is still its own and that no concurrent commit clashes with it, then completes
the instant, or aborts: rolls back what the instant wrote. Rollback and restore instants are
created here too (`undo` finds and removes the files). The clock that judges heartbeats is
injectable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

import pyarrow as pa

from .. import properties
from ..config import MetadataOptions, ServiceOptions, TableConfig, TableOptions, WriteOptions
from ..context import TableContext
from ..engine import Engine
from ..errors import InvalidOptionError, InvalidTableError, TimelineError, WriteConflictError
from ..index.column_stats import COLUMN_STATS, PARTITION_STATS, indexed_columns
from ..index.record_index import RecordIndex, located_keys
from ..index.record_index_update import resync
from ..lock import LockProvider, lock_provider_name, table_lock
from ..metadata_table import FILES as MDT_FILES
from ..metadata_table import (
    INIT_PREFIX,
    RECORD_INDEX,
    MdtStorage,
    has_files_partition,
    listed_partitions,
    readable_instants,
)
from ..metadata_table import MDT as MDT_PATH
from ..metadata_writer import (
    METADATA_ENABLE,
    FilesChange,
    MetadataWriter,
    StatsLayout,
    absorbed,
    chosen_stats_columns,
    clean_due,
    clean_metadata,
    clean_plan,
    clean_retention,
    column_stats_records,
    committed_files,
    compacted_bases,
    compaction_due,
    define_column_stats,
    define_record_index,
    file_stats_records,
    files_change,
    init_files,
    init_instant,
    init_record_index,
    init_stats,
    logged_files,
    maintained_partitions,
    mdt_properties,
    partition_stats_records,
    record_index_group_count,
    restore_change,
    stats_log_files,
    switch_off,
    switch_off_unmaintained,
)
from ..metadata_writer import compaction_plan as metadata_compaction_plan
from ..metadata_writer import is_on as metadata_on
from ..model import WriteStat
from ..paths import Deleter, relative_path
from ..schema import from_avro
from ..timeline.active import ActiveTimeline, timeline_folder
from ..timeline.avro_mdt import METADATA_RECORD_V8, METADATA_RECORD_V9
from ..timeline.clock import format_instant, instant_epoch_ms, next_instant, parse_instant
from ..timeline.instant import CLEAN, COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, RESTORE, ROLLBACK, Instant, State
from ..timeline.metadata import CommitMetadata
from ..timeline.payloads import (
    CleanerPlan,
    CompactionPlan,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPlan,
)
from ..view import FileSystemView
from ..vocabulary import CLEAN_POLICIES
from . import undo
from .conflicts import ConflictCheck, find_conflict
from .heartbeat import Clock, Heartbeat, is_expired
from .markers import delete_markers

log = logging.getLogger(__name__)

sleep: Callable[[float], None] = time.sleep  # between looks at a running attempt (tests observe it)
MAX_POLL_S = 1.0


class Transaction:
    """One operation's hold on a table's timeline (see the module docstring). `ctx` says
    which table and with which write options, `engine` runs file deletions, `clock` judges
    heartbeats. `instant` is the instant this transaction created or took over, once it has."""

    def __init__(self, ctx: TableContext, engine: Engine, *, clock: Clock = time.time):
        self.ctx = ctx
        self.engine = engine
        self.clock = clock
        self.storage = ctx.storage
        self.config = ctx.config
        self.instant: str | None = None

    def option(self, option):
        return self.ctx.option(option)

    @property
    def timeline(self) -> ActiveTimeline:
        """The active timeline, listed now."""
        timeline = ActiveTimeline(self.storage, folder=timeline_folder(self.config.props))
        timeline.archive_folder = self.config.archive_folder
        timeline.zone = "UTC" if self.config.timezone == "UTC" else "LOCAL"
        return timeline

    def lock(self) -> LockProvider:
        """The table lock (`hoodie.write.lock.provider`, default `.hoodie/lock`): taken by every
        change, so a table version we do not write is refused here, before anything changes."""
        self.config.check_writable(self.storage.uri)
        return table_lock(self.storage, self.ctx.options, mode=self.option(WriteOptions.CONCURRENCY_MODE),
                          provider=lock_provider_name(self.storage.uri, self.ctx.options, self.config.props),
                          expire_ms=int(self.option(WriteOptions.LOCK_EXPIRE_MINUTES) * 60_000),
                          wait_ms=self.option(WriteOptions.LOCK_WAIT_MS))

    def deleter(self) -> Deleter:
        """Deletes table files as engine tasks (one per group of files)."""
        return Deleter(self.engine, self.ctx)

    def new_instant_time(self, timeline: ActiveTimeline | None = None) -> str:
        """A new instant, greater than every instant on the timeline (call under the lock)."""
        timeline = self.timeline if timeline is None else timeline
        last = max((t for i in timeline for t in (i.time, i.completion) if t), default=None)
        return next_instant(last, "UTC" if self.config.timezone == "UTC" else "LOCAL")

    # -- heartbeats ------------------------------------------------------------------------
    def is_expired(self, instant: str) -> bool:
        """Whether the heartbeat of `instant` has expired (its writer is gone), by this
        transaction's clock and the `hoodie.client.heartbeat.*` options."""
        return is_expired(self.storage, instant, self.option(WriteOptions.HEARTBEAT_INTERVAL_MS),
                          self.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES), self.clock)

    def beat(self, instant: str) -> Heartbeat:
        """Start the heartbeat of `instant` (stop it with `heartbeat.beating`)."""
        return Heartbeat(self.storage, instant, self.option(WriteOptions.HEARTBEAT_INTERVAL_MS), self.clock).start()

    # -- start: lock, repair, run token ----------------------------------------------------
    def repair(self) -> ActiveTimeline:
        """Under the lock: finish interrupted rollbacks and restores, roll back failed writes
        (expired heartbeats), drop marker folders of instants no longer pending; returns the
        timeline. One listing of `.hoodie/`: the repairs update it in memory."""
        timeline = self.timeline
        self.prepare_metadata_table()
        self.finish_rollbacks(timeline)
        self.finish_restores(timeline)
        undo.forget_rolled_back(self.storage, timeline)
        for target in self.failed_writes(timeline):
            self.rollback(timeline, target)
        pending = {i.time for i in timeline.pending()}
        for folder in self.storage.list_dirs(".hoodie/.temp"):
            if folder.rsplit("/", 1)[-1] not in pending:
                self.storage.delete_dir(folder)
        self.storage.sweep_temp_files()  # left by a process killed inside `create`
        return timeline

    def failed_writes(self, timeline: ActiveTimeline) -> list[Instant]:
        """Pending commit/deltacommit/replacecommit instants whose heartbeat has expired."""
        return [i for i in timeline.pending() if i.action in COMMIT_ACTIONS and self.is_expired(i.time)]

    @contextmanager
    def start(self, token: str | None, actions: Collection[str] | None = None, *,
              pending_done: bool = False) -> Iterator[tuple[ActiveTimeline, Instant | None]]:
        """Hold the table lock over the repaired timeline and the instant run token `token`
        already did (completed, of `actions`; with `pending_done`, a pending one too, e.g. a
        compaction plan), or None: this attempt goes on, still under the lock. While an attempt
        with `token` runs (pending, live heartbeat) it waits, polling without the lock, until
        that instant completes (its result is returned) or its heartbeat expires (a dead
        attempt: the repair rolls a write back, a service takes its plan over)."""
        interval = self.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
        poll = min(max(interval, 1) / 4000, MAX_POLL_S)
        while True:
            with self.lock():
                timeline = self.repair()
                found = timeline.find_token(token, pending=True, actions=actions) if token else None
                if found is None or found.is_completed or pending_done:
                    yield timeline, found
                    return
                if self.is_expired(found.time):
                    if found.action in COMMIT_ACTIONS:  # expired since `repair` looked: roll it back now
                        self.rollback(timeline, found)
                    yield timeline, None  # a dead attempt (or a plan nobody executes): the caller takes it over
                    return
            log.info("table %s: %s of run token %r is still running: waiting for it", self.storage.uri, found, token)
            sleep(poll)

    def drop_metadata_table(self) -> None:
        """Spec §1.4: a table version 6 with the metadata table on loses it before our first
        write (a Hudi 1.x table keeps it: `prepare_metadata_table`)."""
        if self.config.version >= 8:
            return
        partitions = self.config.get(TableOptions.METADATA_PARTITIONS)
        if not partitions and not self.storage.exists(".hoodie/metadata"):
            return
        if not self.option(WriteOptions.DROP_METADATA_TABLE):
            raise InvalidTableError(f"table {self.storage.uri} has a metadata table ({partitions!r}); "
                                    "airflow-lake does not maintain it and airflow_lake.metadata.table.drop=false")
        log.warning("table %s: disabling the metadata table (%s) before writing; Hudi rebuilds it "
                    "from a listing when re-enabled", self.storage.uri, partitions)
        self.config.props["hoodie.table.metadata.partitions"] = ""
        self.config.props.pop("hoodie.table.metadata.partitions.inflight", None)
        properties.save(self.storage, self.config)
        self.storage.delete_dir(".hoodie/metadata")

    # -- the instant -----------------------------------------------------------------------
    def request(self, timeline: ActiveTimeline, instant: Instant, content: bytes = b"", *,
                token: str | None = None) -> Instant:
        """Create `instant`'s first state file (requested; a savepoint starts inflight),
        recording the run token first (under the lock)."""
        created = timeline.create(instant, content, token=token)
        self.instant = instant.time
        return created

    def inflight(self, timeline: ActiveTimeline, requested: Instant, content: bytes = b"") -> Instant:
        """Move `requested` to inflight (its workload or plan as `content`)."""
        self.instant = requested.time
        return timeline.transition(requested, State.INFLIGHT, content)

    def check_still_owner(self, inflight: Instant, timeline: ActiveTimeline | None = None) -> None:
        """Before completing: our inflight file must still be there (not rolled back), in
        `timeline` (a listing taken under the lock) or on storage."""
        there = timeline.has_file(inflight.file_name) if timeline is not None \
            else self.storage.exists(f"{timeline_folder(self.config.props)}/{inflight.file_name}")
        if not there:
            raise TimelineError(f"table {self.storage.uri}: {inflight} was rolled back by another "
                                "writer while this write ran; nothing was committed")

    def commit(self, timeline: ActiveTimeline, inflight: Instant, content: bytes, *,
               conflicts: ConflictCheck | None = None, index_stats: Sequence[WriteStat] = (),
               column_ranges: dict[tuple[str, str], tuple] | None = None) -> None:
        """Under the lock: check that `inflight` is still ours and, given `conflicts`, that
        nothing committed or planned since this write started clashes with it (against a fresh
        listing; a clash rolls it back and raises WriteConflictError), then complete it with
        `content` (`index_stats`: the MDT index log files its tasks wrote, which its MDT
        deltacommit commits; `column_ranges`: the statistics of the files it wrote, for the
        column stats); its markers go after."""
        with self.lock():
            if conflicts is None:
                self.check_still_owner(inflight)
            else:
                timeline = timeline.reload()  # other writers' instants, for the conflict checks
                self.check_still_owner(inflight, timeline)
                conflict = find_conflict(self.storage.uri, timeline, inflight, conflicts)
                if conflict:
                    self.rollback(timeline, inflight)
                    raise WriteConflictError(conflict)
            self.sync_metadata_table(inflight, content, index_stats, column_ranges)
            timeline.transition(inflight, State.COMPLETED, content)
        delete_markers(self.storage, inflight.time)

    def complete(self, timeline: ActiveTimeline, instant: Instant, content: bytes) -> Instant:
        """Complete `instant` with `content`; the caller holds the table lock."""
        self.sync_metadata_table(instant, content)
        return timeline.transition(instant, State.COMPLETED, content)

    # -- the metadata table (Hudi 1.x tables) -------------------------------------------------
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
                    ranges: dict[tuple[str, str], tuple] | None) -> list[tuple[str, bytes, WriteStat]]:
        """The column and partition stats log files of the MDT deltacommit at `instant` (when
        the table keeps them): the written files' statistics, tombstones of the deleted ones,
        and the written partitions' statistics recomputed."""
        kept = maintained_partitions(self.storage, self.config.props)
        if COLUMN_STATS not in kept:
            return []
        avro = self.timeline.schema_avro(self.config.get(TableOptions.CREATE_SCHEMA))
        schema = from_avro(avro) if avro else pa.schema([])
        columns = tuple(indexed_columns(self.storage, self.config.props, schema) or ())
        layout = StatsLayout.of(self.storage, self.config.props, schema)
        schema_text = writer.schema_text()
        records = column_stats_records(change, ranges or {}, columns)
        files = stats_log_files(self.storage, instant, schema_text, COLUMN_STATS, records, layout)
        if PARTITION_STATS in kept and change.list_partitions:  # (a clean writes none: §5.5b)
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
        timeline.transition(requested, State.COMPLETED, meta.to_bytes())

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
        if by is not None and rb is None and absorbed(timeline, target):
            # merged into an MDT base file already: its files are deleted by a deltacommit at `by`
            # (tombstones, as Java turns a rollback's deleted files into MDT records)
            if deleted is None:
                deleted = logged_files(self.storage, logs.get(MDT_FILES, []), target)
            change = FilesChange(deleted=deleted, list_partitions=False)
            self.metadata_deltacommit(writer, timeline, by, change, self.resync_record_index(writer, by),
                                      self.stats_files(writer, by, change, None))
            return
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
            if timeline.contains(target) and (target == at or not absorbed(timeline, target)):
                self.rollback_metadata_table(writer, None, target)
        timeline = writer.timeline()
        change = restore_change(self.storage, self.timeline)
        self.metadata_deltacommit(writer, timeline, at, change, self.resync_record_index(writer, at),
                                  self.stats_files(writer, at, change, None))

    def resync_record_index(self, writer: MetadataWriter, instant: str) -> list[WriteStat]:
        """The record index brought in line with a scan of the table by log files of the MDT
        deltacommit at `instant` (after a rollback or restore undid writes an MDT compaction
        had merged: their index entries cannot be rolled back). A scan of every file group."""
        if RECORD_INDEX not in maintained_partitions(self.storage, self.config.props):
            return []
        timeline = self.timeline
        index = RecordIndex.open(self.storage, self.config.props, timeline)
        stats = resync(index, located_keys(self.ctx, timeline, self.engine), instant,
                       instant_epoch_ms(instant, self.config.timezone), writer.schema_text())
        log.info("table %s: record index brought in line with the table at %s (%d index file groups changed)",
                 self.storage.uri, instant, len(stats))
        return stats

    def prepare_metadata_table(self) -> None:
        """Under the lock, before anything changes, on a Hudi 1.x table: the MDT partitions we
        do not maintain are switched off as Java switches them off (with a warning); with
        `hoodie.metadata.enable=true` a table without the files partition gets it (built from
        a listing); with `false` the MDT is switched off (deleted, as Java does, with a warning)."""
        if self.config.version < 8:
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
        record_index = self.record_index_option()
        if (enable == "true" or record_index == "true") and not metadata_on(self.storage, self.config.props):
            self.build_metadata_table()
        column_stats = self.enable_option(MetadataOptions.COLUMN_STATS_ENABLE)
        if column_stats == "true" and not metadata_on(self.storage, self.config.props):
            self.build_metadata_table()
        kept = COLUMN_STATS in maintained_partitions(self.storage, self.config.props)
        if column_stats == "true" and not kept and self.quiet("column stats"):
            self.build_column_stats(self.enable_option(MetadataOptions.PARTITION_STATS_ENABLE) != "false")
        elif column_stats == "false" and kept:
            log.warning("table %s: %s=false switches the column and partition stats off (their metadata table "
                        "partitions are deleted, as Apache Hudi's writer does); =true rebuilds them",
                        self.storage.uri, MetadataOptions.COLUMN_STATS_ENABLE.key)
            switch_off(self.storage, self.config, [p for p in (COLUMN_STATS, PARTITION_STATS)
                                                   if p in listed_partitions(self.config.props)])
        kept = RECORD_INDEX in maintained_partitions(self.storage, self.config.props)
        if record_index == "true" and not kept and self.quiet("record index"):
            self.build_record_index()
        elif record_index == "false" and kept:
            log.warning("table %s: %s=false switches the record index off (its metadata table partition is deleted, "
                        "as Apache Hudi's writer does); =true rebuilds it from a scan", self.storage.uri,
                        MetadataOptions.RECORD_INDEX_ENABLE.key)
            switch_off(self.storage, self.config, [RECORD_INDEX])

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
        built = [COLUMN_STATS] + ([PARTITION_STATS] if partition_stats else [])
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

    def build_record_index(self) -> None:
        """The record index (the MDT's `record_index` partition), built from a scan of every
        live key at the next initialisation instant (§5.5, §5.6), then registered in
        `hoodie.table.metadata.partitions` (and, v9, in index.json); a build a crash left is
        started over."""
        storage = self.storage
        writer = self.metadata_writer()
        timeline = writer.timeline()
        for instant in [i for i in timeline.pending() if i.time.startswith(INIT_PREFIX)]:  # one that died
            timeline.delete_instant_files(instant.time)
        storage.delete_dir(f"{MDT_PATH}/{RECORD_INDEX}")
        located = located_keys(self.ctx, self.timeline, self.engine)
        groups = record_index_group_count(
            located.num_rows, self.option(MetadataOptions.RECORD_INDEX_MIN_GROUPS),
            self.option(MetadataOptions.RECORD_INDEX_MAX_GROUPS), self.option(MetadataOptions.RECORD_INDEX_GROWTH),
            self.option(MetadataOptions.RECORD_INDEX_MAX_GROUP_BYTES))
        instant = init_instant(timeline)
        files, meta = init_record_index(instant, located, groups, writer.schema_text(), self.config.timezone)
        requested = timeline.create(Instant(instant, DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition(requested, State.INFLIGHT)
        for path, data in files.items():
            storage.write(path, data)
        timeline.transition(inflight, State.COMPLETED, meta.to_bytes())
        if self.config.version >= 9:
            define_record_index(storage, self.config)
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

    def abort(self, instant: str | None = None) -> undo.RollbackResult | None:
        """Roll back what the pending `instant` (default: this transaction's) wrote, under the
        lock, leaving the table as before it; None when it is no longer pending."""
        instant = self.instant if instant is None else instant
        with self.lock():
            timeline = self.timeline
            current = next((i for i in timeline.pending() if i.time == instant), None)
            return None if current is None else self.rollback(timeline, current)

    # -- rollback and restore ----------------------------------------------------------------
    def rollback(self, timeline: ActiveTimeline, target: Instant, *, token: str | None = None) -> undo.RollbackResult:
        """Roll back `target` (pending, or completed) at a new rollback instant (under the
        lock), recording `token` for it. Files are deleted as engine tasks."""
        start = time.time()
        plan = undo.rollback_plan(self.storage, timeline, target)
        rb = Instant(self.new_instant_time(timeline), ROLLBACK, State.REQUESTED)
        timeline.create(rb, plan.to_bytes(), token=token)
        return self._run_rollback(timeline, rb, plan, start)

    def finish_rollbacks(self, timeline: ActiveTimeline) -> list[undo.RollbackResult]:
        """Complete rollbacks that a crash left requested or inflight (idempotent)."""
        done = []
        for rb in timeline.actions(ROLLBACK).pending():
            plan = RollbackPlan.from_bytes(timeline.read_details(rb.to(State.REQUESTED)))
            if plan is not None:
                done.append(self._run_rollback(timeline, rb, plan, time.time()))
        return done

    def _run_rollback(self, timeline: ActiveTimeline, rb: Instant, plan: RollbackPlan,
                      start: float) -> undo.RollbackResult:
        groups = undo.plan_files(self.storage, plan, rb.time)  # refuses a plan naming files outside the table
        if rb.state == State.REQUESTED:
            rb = timeline.transition(rb, State.INFLIGHT)
        writer = self.metadata_writer()

        def finish(metadata: RollbackMetadata) -> None:
            # the target is invisible by now: its MDT deltacommit is rolled back before the
            # rollback completes (§5.6), never while readers still see the target
            if writer is not None:
                deleted = {p: [f.rsplit("/", 1)[-1] for f in fs] for p, fs in metadata.deleted.items() if fs}
                self.rollback_metadata_table(writer, rb.time, plan.instant, deleted)
            timeline.transition(rb, State.COMPLETED, metadata.to_bytes())

        metadata = undo.undo(self.storage, timeline, plan, rb.time, start,
                             keep_plan=undo.is_compaction(timeline, plan.instant), deleter=self.deleter(),
                             groups=groups, finish=finish)
        result = undo.RollbackResult(rb.time, plan.instant, plan.action, metadata.files)
        log.info("table %s: rolled back %s %s at %s (%d files)", self.storage.uri, plan.action, plan.instant,
                 rb.time, len(result.files_deleted))
        return result

    def restore(self, timeline: ActiveTimeline, instant: Instant, plan: RestorePlan,
                plans: dict[str, RollbackPlan] | None = None) -> list[str]:
        """Execute the restore `instant` (requested or inflight) of `plan`: undo each instant
        after the savepoint that is still there, then complete it. Returns the instants undone."""
        start = time.time()
        if plans is None:  # a file outside the table refuses all, before any change
            plans = undo.restore_plans(self.storage, timeline, plan)
        if instant.state == State.REQUESTED:
            instant = timeline.transition(instant, State.INFLIGHT)
        per_instant: dict[str, tuple[RollbackMetadata, ...]] = {}
        done = []
        for target in plan.instants:
            rollback_plan = plans.get(target.time)
            if rollback_plan is None:  # already undone by an interrupted run
                per_instant[target.time] = ()
                continue
            per_instant[target.time] = (undo.undo(self.storage, timeline, rollback_plan, instant.time, start,
                                                  keep_plan=False, deleter=self.deleter()),)
            done.append(target.time)
        writer = self.metadata_writer()
        if writer is not None:
            self.restore_metadata_table(writer, instant.time, [i.time for i in plan.instants])
        metadata = RestoreMetadata(instant.time, plan, per_instant, int((time.time() - start) * 1000))
        timeline.transition(instant, State.COMPLETED, metadata.to_bytes())
        log.info("table %s: restored to savepoint %s (%d instants undone)", self.storage.uri, plan.savepoint,
                 len(done))
        return done

    def finish_restores(self, timeline: ActiveTimeline) -> None:
        """Complete restores that a crash left requested or inflight."""
        for pending in timeline.actions(RESTORE).pending():
            plan = RestorePlan.from_bytes(timeline.read_details(pending.to(State.REQUESTED)))
            if plan is not None:
                self.restore(timeline, pending, plan)
