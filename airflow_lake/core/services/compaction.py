"""MOR compaction: schedule a plan (`T.compaction.requested`), then execute it as `T.commit`.

Scheduling is a write: under the table lock it rolls back failed writes, then refuses while
any write is in flight (an earlier write could still add log files) or when the instant is
not newer than everything on the timeline. Execution marks the plan inflight, merges each
slice (base + the plan's log files) into a new base file named with T, one task per
operation, and completes `T.commit` with `compacted: true`. Writers go on meanwhile: their
log files start the slice based at T. A plan left inflight by a dead executor is rolled
back (its plan kept) and run again.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from dataclasses import dataclass, field, replace
from functools import partial

import pyarrow as pa

from ..config import Option, ServiceOptions, TableOptions, WriteOptions, pyarrow_codec
from ..context import TableContext
from ..errors import CorruptLogError, InstantNotFoundError, InvalidOptionError, WriteConflictError
from ..formats.log import DataBlock
from ..formats.parquet import BloomSettings, prior_keys, write_base_file
from ..index.column_stats import base_ranges
from ..metadata_writer import stats_columns, written_ranges
from ..model import BaseFile, WriteStat
from ..paths import relative_path
from ..schema import META_FIELDS, from_avro, with_meta_fields
from ..slice_reader import Damage, DamagePolicy, SliceQuery, SliceRead, Visibility, read_file_group
from ..timeline import tokens
from ..timeline.clock import parse_instant
from ..timeline.instant import COMMIT, COMPACTION, DELTA_COMMIT, Instant, State, check_instant_time
from ..timeline.metadata import CommitMetadata
from ..timeline.payloads import CompactionOperation, CompactionPlan
from ..txn.heartbeat import beating
from ..txn.markers import CREATE, create_marker
from ..txn.transaction import Transaction
from ..txn.undo import is_compaction
from ..view import FileSystemView
from ..vocabulary import COMPACTION_ORDERS, COMPACTION_TRIGGERS

log = logging.getLogger(__name__)

TRIGGER = ServiceOptions.COMPACTION_TRIGGER
MAX_DELTA_COMMITS = ServiceOptions.MAX_DELTA_COMMITS
MAX_DELTA_SECONDS = ServiceOptions.MAX_DELTA_SECONDS
TARGET_IO_MB = Option("hoodie.compaction.target.io", 512000, int, minimum=0)
LOG_SIZE_THRESHOLD = Option("hoodie.compaction.logfile.size.threshold", 0, int, minimum=0)
SKIP_CORRUPT = Option("airflow_lake.compaction.skip.corrupt.blocks", False, bool,
                      "compact past damaged log blocks of completed instants (their records are lost); "
                      "Java's scanner has no such switch: it always skips them")
SKIPPED_KEY = "airflow_lake.compaction.skipped.corrupt.blocks"  # extraMetadata: JSON list of what was skipped
MB = 1024 * 1024


@dataclass
class CompactionDecision:
    """The answer of scheduling: the plan's instant, or None and why not."""

    instant: str | None
    reason: str
    operations: int = 0


@dataclass
class CompactionResult:
    instant: str
    operations: int = 0
    records_written: int = 0
    log_records: int = 0
    files: list[str] = field(default_factory=list)
    already_done: bool = False
    # the plan named was completed before, not by this run (its token): this call changed nothing
    completed_elsewhere: bool = False


def _completed_compactions(timeline) -> list[str]:
    return [i.time for i in timeline.actions(COMMIT).completed() if is_compaction(timeline, i.time)]


def trigger_figures(timeline, now: str, *, after_request: bool = False) -> tuple[int, float, str | None]:
    """What a compaction trigger is judged by at `now`: completed delta commits since the
    latest compaction (`after_request`: since the latest compaction requested or done), the
    seconds since then (or since the first delta commit), and that instant."""
    deltas = timeline.actions(DELTA_COMMIT).completed().times
    done = _completed_compactions(timeline)
    since = done[-1] if done else None
    if after_request:
        requested = sorted(done + [i.time for i in timeline.actions(COMPACTION).pending()])
        since = requested[-1] if requested else None
    count = len([d for d in deltas if since is None or d > since])
    reference = since or (deltas[0] if deltas else None)
    elapsed = (parse_instant(now) - parse_instant(reference)).total_seconds() if reference else 0.0
    return count, elapsed, since


def trigger_holds(strategy: str, commits: int, seconds: float, max_commits: int, max_seconds: int) -> bool:
    """Whether the compaction trigger `strategy` holds for these figures (`trigger_figures`)."""
    num_ok, time_ok = commits >= max_commits, seconds >= max_seconds
    return {"NUM_COMMITS": num_ok, "NUM_COMMITS_AFTER_LAST_REQUEST": num_ok, "TIME_ELAPSED": time_ok,
            "NUM_AND_TIME": num_ok and time_ok, "NUM_OR_TIME": num_ok or time_ok}[strategy]


def _trigger_met(timeline, strategy: str, max_commits: int, max_seconds: int, now: str) -> tuple[bool, str]:
    count, elapsed, since = trigger_figures(timeline, now, after_request=strategy == "NUM_COMMITS_AFTER_LAST_REQUEST")
    commits = f"{count} delta commits since {since or 'the start'} (need {max_commits})"
    time_ = f"{_duration(elapsed)} elapsed (need {_duration(max_seconds)})"
    judged = {"NUM_COMMITS": [commits], "NUM_COMMITS_AFTER_LAST_REQUEST": [commits], "TIME_ELAPSED": [time_]}
    why = ", ".join(judged.get(strategy, [commits, time_]))  # (what the strategy judges by)
    return trigger_holds(strategy, count, elapsed, max_commits, max_seconds), why


def _duration(seconds: float) -> str:
    """Seconds as a person reads them (`45 s`, `3.2 h`, `12.5 d`)."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def compactable_slices(view: FileSystemView, threshold: int) -> list[tuple]:
    """The latest slices a plan may take, as `(file group, slice, log bytes)`: those with log
    files of at least `threshold` bytes in all, in no pending plan, not a log-only slice after
    an earlier one."""
    out = []
    for group in view.file_groups():
        if view.pending_compaction_of(group.partition, group.file_id):
            continue
        sl = group.slices[-1]
        if not sl.log_files or (sl.base_file is None and len(group.slices) > 1):
            continue
        log_size = sum(lf.size for lf in sl.log_files)
        if log_size >= threshold:
            out.append((group, sl, log_size))
    return out


def _operations(txn: Transaction, view: FileSystemView, target_io_mb: int, threshold: int) -> list[CompactionOperation]:
    """LogFileSizeBasedCompactionStrategy bounded by target IO: largest log sizes first."""
    max_file = txn.option(WriteOptions.MAX_FILE_SIZE)
    ops = []
    for group, sl, log_size in compactable_slices(view, threshold):
        base_size = sl.base_file.size if sl.base_file else 0
        read_mb = (base_size + log_size) / MB
        write_mb = (base_size if sl.base_file else max_file) / MB
        ops.append(CompactionOperation(
            group.partition, group.file_id, sl.base_instant, sl.base_file.name if sl.base_file else None,
            tuple(lf.name for lf in sl.log_files),
            {"TOTAL_LOG_FILES_SIZE": float(log_size), "TOTAL_IO_READ_MB": read_mb, "TOTAL_IO_WRITE_MB": write_mb,
             "TOTAL_IO_MB": read_mb + write_mb, "TOTAL_LOG_FILES": float(len(sl.log_files))}))
    ops.sort(key=lambda o: -o.log_files_size)
    chosen, io = [], 0.0
    for op in ops:
        if io >= target_io_mb:
            break
        chosen.append(op)
        io += op.io_mb
    return chosen


def no_pending_plan(uri: str) -> InstantNotFoundError:
    """The answer to running "the next pending plan" when none is pending (on every engine)."""
    return InstantNotFoundError(f"table {uri}: no pending compaction plan to run")


def not_merge_on_read(config) -> str | None:
    """Why compaction cannot apply to a table of this configuration (a COPY_ON_WRITE table
    merges at write time and has no log files), else None. Apache Hudi refuses it alike
    (`HoodieNotSupportedException` from a copy-on-write table's compaction)."""
    if config.is_mor:
        return None
    return (f"is a {config.table_type} table: compaction applies to MERGE_ON_READ tables only (a COPY_ON_WRITE "
            "table merges at write time and has no log files to compact); remove this task or point it at a "
            "MERGE_ON_READ table")


def check_merge_on_read(config, uri: str) -> None:
    """`InvalidOptionError` naming the table when compaction cannot apply to it."""
    problem = not_merge_on_read(config)
    if problem:
        raise InvalidOptionError(f"table {uri}: {problem}")


def schedule(txn: Transaction, *, instant: str | None = None, strategy: str | None = None,
             max_delta_commits: int | None = None, max_delta_seconds: int | None = None,
             target_io_mb: int | None = None, extra_metadata: dict[str, str] | None = None) -> CompactionDecision:
    """Write a compaction plan if the trigger holds and some slice has log files."""
    uri = txn.storage.uri
    check_merge_on_read(txn.config, uri)
    strategy = COMPACTION_TRIGGERS.parse(strategy or txn.option(TRIGGER), f"table {uri}",
                                         None if strategy else TRIGGER.key)
    where = f"table {uri}"
    max_commits = txn.option(MAX_DELTA_COMMITS) if max_delta_commits is None else \
        MAX_DELTA_COMMITS.parse(max_delta_commits, where, "max_delta_commits")
    max_seconds = txn.option(MAX_DELTA_SECONDS) if max_delta_seconds is None else \
        MAX_DELTA_SECONDS.parse(max_delta_seconds, where, "max_delta_seconds")
    io = txn.option(TARGET_IO_MB) if target_io_mb is None else TARGET_IO_MB.parse(target_io_mb, where, "target_io_mb")
    if instant is not None:
        check_instant_time(instant, txn.storage.uri)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (COMMIT,), pending_done=True) as (timeline, done):
        if done is not None:
            return CompactionDecision(done.time, "already scheduled by this run")
        pending = [i for i in timeline.commits().pending()]
        if pending:
            return CompactionDecision(None, f"write {pending[0].time} ({pending[0].action}) is still in flight")
        t = instant or txn.new_instant_time(timeline)
        later = [i.time for i in timeline if i.time >= t]
        if later:
            return CompactionDecision(None, f"instant {t} is not after {later[-1]} on the timeline")
        met, why = _trigger_met(timeline, strategy, max_commits, max_seconds, t)
        if not met:
            return CompactionDecision(None, f"trigger {strategy} not met: {why}")
        view = FileSystemView(txn.storage, timeline)
        ops = _operations(txn, view, io, txn.option(LOG_SIZE_THRESHOLD))
        if not ops:
            return CompactionDecision(None, "no file slice has log files to compact")
        txn.request(timeline, Instant(t, COMPACTION, State.REQUESTED),
                        CompactionPlan(tuple(ops), extra_metadata or None).to_bytes(), token=token)
    log.info("table %s: scheduled compaction %s of %d file groups", uri, t, len(ops))
    return CompactionDecision(t, f"scheduled ({why})", len(ops))


def _plan_of(timeline, time_: str) -> CompactionPlan:
    return CompactionPlan.from_bytes(timeline.read_details(Instant(time_, COMPACTION, State.REQUESTED)))


def check_plan_paths(storage, plan: CompactionPlan, instant: str) -> None:
    """Refuse (PathEscapeError naming the table, the instant and the path) a plan whose
    partitions or files lie outside the table."""
    for op in plan.operations:
        relative_path(storage, op.partition, instant=instant, what="compaction plan partition")
        for path in [*(posixpath.join(op.partition, name) for name in op.file_names()), *op.recorded]:
            relative_path(storage, path, instant=instant, what="compaction plan file")


def run(txn: Transaction, instant: str | None = None, *, order: str = "FIFO",
        extra_metadata: dict[str, str] | None = None) -> CompactionResult:
    """Execute a compaction plan (the given one, else the oldest or newest pending one)."""
    uri = txn.storage.uri
    check_merge_on_read(txn.config, uri)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (COMMIT,)) as (timeline, done):
        pending = timeline.actions(COMPACTION).pending().instants
        if done is not None and instant in (None, done.time):  # a retry: this run's compaction is done
            return _stored_result(timeline.stored_commit_metadata(done), done.time)
        if instant is not None:
            check_instant_time(instant, uri)
            if instant in _completed_compactions(timeline):
                return replace(_stored_result(timeline.commit_metadata(timeline.get(instant)), instant),
                               completed_elsewhere=True)
            chosen = next((i for i in pending if i.time == instant), None)
            if chosen is None:
                raise InstantNotFoundError(f"table {uri}: no pending compaction {instant}")
        else:
            order = COMPACTION_ORDERS.parse(order, f"table {uri}")
            if not pending:
                raise no_pending_plan(uri)
            chosen = pending[0] if order == "FIFO" else pending[-1]
        check_plan_paths(txn.storage, _plan_of(timeline, chosen.time), chosen.time)
        if chosen.state == State.INFLIGHT:
            if not txn.is_expired(chosen.time):
                raise WriteConflictError(f"table {uri}: compaction {chosen.time} is being executed by another task")
            txn.rollback(timeline, chosen)
        requested = Instant(chosen.time, COMPACTION, State.REQUESTED)
        tokens.record(txn.storage, token, chosen.time, COMPACTION)
        inflight = txn.inflight(timeline, requested)
        heartbeat = txn.beat(chosen.time)
    with beating(heartbeat):
        return _execute(txn, timeline, inflight, extra_metadata)


def _stored_result(meta, instant: str) -> CompactionResult:
    """What the completed compaction `instant` did, from its commit metadata."""
    stats = meta.stats()
    return CompactionResult(instant, len(stats), sum(s.num_writes for s in stats), sum(s.log_records for s in stats),
                            files=[s.path for s in stats], already_done=True)


@dataclass(frozen=True)
class CompactionJob:
    """What every operation of one compaction shares; travels to the tasks with each one."""

    ctx: TableContext
    instant: str
    schema: pa.Schema  # meta fields + table schema
    avro: dict | None
    bloom: BloomSettings | None
    visible: Visibility  # log blocks merged: committed before the compaction instant
    skip_corrupt: bool
    stats_columns: tuple[str, ...] | None = None  # the metadata table's column_stats columns (None: off)


def compact_operation(job: CompactionJob, indexed: tuple[int, CompactionOperation]) -> tuple[WriteStat, list[Damage]]:
    """Merge one plan operation (a base file and its log files) into a new base file named
    with the compaction instant. Runs in an engine task: it gets values, never the Table."""
    n, op = indexed
    ctx, t = job.ctx, job.instant
    storage = ctx.storage
    start = time.monotonic()
    partition = op.partition
    prefix = f"{partition}/" if partition else ""
    base_name = op.data_file
    task = SliceRead(partition, op.file_id, prefix + base_name if base_name else None, op.base_instant,
                     tuple(prefix + name for name in op.delta_files), 0, job.visible, SliceQuery())
    # the plan's log files must all be there; without meta fields the stored (null) meta values
    # are written as they were, as Java does
    read = read_file_group(ctx, task, job.schema, damage=DamagePolicy.SKIP if job.skip_corrupt else DamagePolicy.REPORT,
                           logs_must_exist=True)
    _refuse_or_warn(job, op, read.damaged)
    merged = read.rows
    token = f"{n}-{int(t[-9:])}-{n}"
    new = BaseFile(partition, op.file_id, token, t)
    merged = merged.set_column(4, META_FIELDS[4], pa.repeat(pa.scalar(new.name, pa.string()), merged.num_rows))
    create_marker(storage, t, new.path, CREATE)
    prior = None  # base order is kept: extend the base file's bloom filter when no row went
    if job.bloom is not None and base_name and not read.base_rows_dropped:
        prior = prior_keys(storage, prefix + base_name, read.base_rows, job.bloom)
    footers: list | None = [] if job.stats_columns else None
    codec = pyarrow_codec(ctx.option(WriteOptions.COMPRESSION))
    size = write_base_file(storage, new.path, merged, with_meta_fields(job.avro), bloom=job.bloom,
                           compression=codec, prior=prior, collect=footers)
    log_records = sum(b.records([META_FIELDS[2]]).num_rows if isinstance(b, DataBlock) else len(b.keys)
                      for b in read.blocks)
    stat = WriteStat(op.file_id, partition, new.path, op.base_instant or "null",
                     num_writes=merged.num_rows, num_update_writes=log_records, total_write_bytes=size,
                     file_size=size, upsert_ms=int((time.monotonic() - start) * 1000),
                     log_records=log_records, log_files=len(op.delta_files), log_size=read.log_size,
                     updated_compacted=log_records, log_blocks=len(read.blocks),
                     column_ranges=base_ranges(job.stats_columns, new.name, footers))
    return stat, read.damaged


def _refuse_or_warn(job: CompactionJob, op: CompactionOperation, damaged: list[Damage]) -> None:
    """Damaged blocks stop the compaction (their records would be lost for good) unless it was
    told to compact without them (then each is logged, and recorded in the commit)."""
    uri, t = job.ctx.uri, job.instant
    for d in damaged:
        if not job.skip_corrupt:
            raise CorruptLogError(
                f"table {uri}: compaction {t} of file group {op.file_id}: {d.describe()}; compacting would "
                f"lose its records for good. Restore the file, or set {SKIP_CORRUPT.key}=true to compact "
                "without the block")
        log.warning("table %s: compaction %s skips a block (%s=true): %s", uri, t, SKIP_CORRUPT.key,
                    d.describe())


def _execute(txn: Transaction, timeline, inflight: Instant, extra_metadata) -> CompactionResult:
    t = inflight.time
    plan = _plan_of(timeline, t)
    ops = plan.operations
    cfg = txn.config
    avro = timeline.schema_avro(cfg.get(TableOptions.CREATE_SCHEMA))
    first = timeline.writes().first
    job = CompactionJob(
        ctx=txn.ctx, instant=t,
        schema=pa.schema([pa.field(n, pa.string()) for n in META_FIELDS] + (list(from_avro(avro)) if avro else [])),
        avro=avro,
        bloom=BloomSettings(txn.option(WriteOptions.BLOOM_NUM_ENTRIES), txn.option(WriteOptions.BLOOM_FPP),
                            txn.option(WriteOptions.BLOOM_FILTER_TYPE).upper(),
                            txn.option(WriteOptions.BLOOM_DYNAMIC_MAX_ENTRIES)) if cfg.populate_meta_fields else None,
        visible=Visibility(tuple(sorted(c for c in timeline.commits().completed().times if c < t)), bound=t,
                           first_write=first.time if first else None),
        skip_corrupt=txn.option(SKIP_CORRUPT),
        stats_columns=stats_columns(txn.storage, cfg.props, from_avro(avro) if avro else pa.schema([])))
    log.info("table %s: compaction %s merges %d file slices", txn.storage.uri, t, len(ops))
    done = txn.engine.map(partial(compact_operation, job), list(enumerate(ops)))
    stats = [stat for stat, _ in done]
    skipped = [{"file": d.path, "offset": d.offset, "instant": d.instant, "reason": d.reason}
               for _, damaged in done for d in damaged]
    extra = {**(plan.extra_metadata or {}), **(extra_metadata or {}), "schema": json.dumps(avro)}
    if skipped:
        extra[SKIPPED_KEY] = json.dumps(skipped)
    metadata = CommitMetadata.from_stats("COMPACT", stats, extra)
    metadata.compacted = True
    txn.commit(timeline, inflight, metadata.to_bytes(), column_ranges=written_ranges(stats))
    log.info("table %s: compaction %s wrote %d base files", txn.storage.uri, t, len(stats))
    return CompactionResult(t, len(ops), sum(s.num_writes for s in stats), sum(s.log_records for s in stats),
                            [s.path for s in stats])

