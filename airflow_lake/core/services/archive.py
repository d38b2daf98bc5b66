"""Archive: move the oldest completed instants off the active timeline (spec §8, §10).

When completed commits exceed `max_commits`, the oldest are archived down to `min_commits`,
but never at or past: the oldest pending write or compaction, the first savepoint (unless
`hoodie.archive.beyond.savepoint`), a deltacommit after the latest compaction (MOR: needed by
compaction scheduling), the latest clean's `earliestCommitToRetain`, or the first replacecommit
whose replaced files the cleaner has not removed yet. Clean and rollback instants are archived
by the same counts. Entries are written as one new archive file, then the instants' files
are deleted (requested and inflight before completed). Small archive files may be merged
under a merge plan, so a crash mid-merge loses nothing.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field

from ..config import Option, ServiceOptions, TableConfig
from ..context import TableContext
from ..errors import InvalidOptionError
from ..formats.log import DataBlock, read_log_file
from ..formats.log.blocks import avro_block_bytes
from ..metadata_table import MDT as MDT_PATH
from ..metadata_writer import MetadataWriter
from ..metadata_writer import is_on as metadata_on
from ..timeline import lsm, tokens
from ..timeline.archived import MERGE_PLAN, archive_files
from ..timeline.avro_schemas import ARCHIVED_META_ENTRY, MERGE_ARCHIVE_PLAN
from ..timeline.clock import format_instant
from ..timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
)
from ..timeline.metadata import CommitMetadata, read_avro, write_avro
from ..txn.transaction import Transaction
from ..txn.undo import is_compaction

log = logging.getLogger(__name__)

BEYOND_SAVEPOINT = Option("hoodie.archive.beyond.savepoint", False, bool)
MERGE_ENABLE = Option("hoodie.archive.merge.enable", False, bool)
ARCHIVE_BATCH = Option("hoodie.commits.archival.batch", 10, int, minimum=1)  # instants per archive file
KEEP_MIN_COMMITS, KEEP_MAX_COMMITS = ServiceOptions.KEEP_MIN_COMMITS, ServiceOptions.KEEP_MAX_COMMITS
MERGE_BATCH = Option("hoodie.archive.merge.files.batch.size", 10, int, minimum=1)
MERGE_SMALL_FILE = Option("hoodie.archive.merge.small.file.limit.bytes", 20 * 1024 * 1024, int,
                          minimum=0)
TOKEN = "1-0-1"
_STAT_FIELDS = ["fileId", "path", "prevCommit", "numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes",
                "totalWriteErrors", "partitionPath", "totalLogRecords", "totalUpdatedRecordsCompacted", "numInserts",
                "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes"]


@dataclass
class ArchiveResult:
    archived: list[str] = field(default_factory=list)  # "<time>.<action>" archived
    archive_file: str | None = None
    blocked_by: str | None = None  # why archival stopped short, if it did
    merged_files: list[str] = field(default_factory=list)
    metadata_table_archived: list[str] = field(default_factory=list)  # "<time>.<action>" of the MDT's
    already_done: bool = False  # a retry: the result of this run token's archive


def _commit_bound(ctx: TableContext, timeline, beyond_savepoint: bool) -> tuple[str | None, str | None]:
    """The earliest instant that must stay active, and why."""
    bounds = blockers(ctx, timeline, beyond_savepoint)
    return min(bounds) if bounds else (None, None)


def blockers(ctx: TableContext, timeline, beyond_savepoint: bool | None = None) -> list[tuple[str, str]]:
    """(instant, why) of everything that keeps commits from being archived: archival stops
    before the earliest of them. Empty when nothing does."""
    if beyond_savepoint is None:
        beyond_savepoint = ctx.option(BEYOND_SAVEPOINT)
    bounds: list[tuple[str, str]] = []
    pending = timeline.writes().pending().instants
    if pending:
        bounds.append((pending[0].time, f"pending {pending[0].action} {pending[0].time}"))
    savepoints = timeline.actions(SAVEPOINT).completed().instants
    if savepoints and not beyond_savepoint:
        bounds.append((savepoints[0].time, f"savepoint {savepoints[0].time}"))
    if ctx.config.is_mor:
        compactions = [i.time for i in timeline.actions(COMMIT).completed() if is_compaction(timeline, i.time)]
        deltas = timeline.actions(DELTA_COMMIT).completed().times
        after = [d for d in deltas if not compactions or d > compactions[-1]]
        if after:
            bounds.append((after[0], f"deltacommit {after[0]} is needed by compaction scheduling"))
    clean_bound = timeline.latest_clean_bound()
    if clean_bound:
        bounds.append((clean_bound, f"the latest clean retains commits from {clean_bound}"))
    replaces = [i.time for i in timeline.actions(REPLACE_COMMIT).completed()
                if not clean_bound or i.time >= clean_bound]
    if replaces:
        bounds.append((replaces[0], f"replacecommit {replaces[0]}: its replaced files are not cleaned yet"))
    mdt = _metadata_table_bound(ctx, timeline)
    if mdt is not None:
        bounds.append(mdt)
    return sorted(bounds)


def _metadata_table_bound(ctx: TableContext, timeline) -> tuple[str, str] | None:
    """A Hudi 1.x table's instants that completed after its metadata table's latest compaction
    stay active (v8 spec §3.3: the MDT's log records of them are checked against the active
    timeline)."""
    if ctx.config.version < 8 or not metadata_on(ctx.storage, ctx.config.props):
        return None
    mdt = MetadataWriter(ctx.storage).timeline()
    compactions = [i for i in mdt.completed() if i.action == COMMIT]
    last = compactions[-1].time if compactions else "0" * 17
    later = [i.time for i in timeline.completed() if (i.completion or i.time) > last
             and i.action != SAVEPOINT]  # (a savepoint, not synced to the MDT, bears an older commit's time)
    return (min(later), f"{min(later)} completed after the metadata table's latest compaction {last}") \
        if later else None


def select(ctx: TableContext, timeline, min_commits: int, max_commits: int) -> tuple[list[Instant], str | None]:
    """The completed instants an archive with these bounds moves now, and what stopped it short."""
    commits = timeline.commits().completed().instants
    chosen: list[Instant] = []
    blocked = None
    if len(commits) > max_commits:
        candidates = commits[: len(commits) - min_commits]
        beyond_savepoint = ctx.option(BEYOND_SAVEPOINT)
        bound, why = _commit_bound(ctx, timeline, beyond_savepoint)
        if beyond_savepoint:  # (archived around: a savepointed commit stays active, as in Java)
            savepointed = set(timeline.actions(SAVEPOINT).times)
            candidates = [c for c in candidates if c.time not in savepointed]
        if bound is not None:
            kept = [c for c in candidates if c.time < bound]
            if len(kept) < len(candidates):
                blocked = why
            candidates = kept
        chosen += candidates
    for action in (CLEAN, ROLLBACK):
        done = timeline.actions(action).completed().instants
        if len(done) > max_commits:
            chosen += done[: len(done) - min_commits]
    return sorted(chosen, key=lambda i: i.time), blocked


def _avro_commit(meta: CommitMetadata, replace: bool = False) -> dict:
    stats = {}
    for partition, items in meta.partition_to_write_stats.items():
        stats[partition] = [{**{k: s.get(k) for k in _STAT_FIELDS}, "totalLogFiles": s.get("totalLogFilesCompacted")}
                            for s in items]
    record = {"partitionToWriteStats": stats, "extraMetadata": {**meta.extra_metadata, "ROLLING_STAT": ""},
              "version": 1, "operationType": "COMPACT" if meta.compacted else meta.operation_type}
    if replace:
        record["partitionToReplaceFileIds"] = meta.partition_to_replace_file_ids or {}
    return record


def _entry(timeline, name: str, transition_times: dict) -> dict:
    """The HoodieArchivedMetaEntry of one state file (payload by action and state, spec §8)."""
    instant = Instant.parse(name)
    data = timeline.storage.read(f"{timeline.folder}/{name}")
    entry = {"commitTime": instant.time, "actionType": instant.action, "actionState": instant.state.name,
             "version": 1, "stateTransitionTime": transition_times.get(name)}
    action, state = instant.action, instant.state
    if not data.strip():
        return entry
    if action in (COMMIT, DELTA_COMMIT):
        entry["hoodieCommitMetadata"] = _avro_commit(CommitMetadata.from_bytes(data, name))
    elif action == COMPACTION and state == State.REQUESTED:
        entry["hoodieCompactionPlan"] = read_avro(data)
    elif action == REPLACE_COMMIT and state == State.COMPLETED:
        entry["hoodieReplaceCommitMetadata"] = _avro_commit(CommitMetadata.from_bytes(data, name), True)
    elif action == REPLACE_COMMIT and state == State.INFLIGHT:
        entry["HoodieInflightReplaceMetadata"] = _avro_commit(CommitMetadata.from_bytes(data, name))
    elif action == REPLACE_COMMIT:
        entry["hoodieRequestedReplaceMetadata"] = read_avro(data)
    elif action == CLEAN:
        entry["hoodieCleanMetadata" if state == State.COMPLETED else "hoodieCleanerPlan"] = read_avro(data)
    elif action == ROLLBACK and state == State.COMPLETED:
        entry["hoodieRollbackMetadata"] = read_avro(data)
    return entry


def _lsm_instant(timeline, instant: Instant) -> lsm.LsmInstant:
    """The LSM history row of a completed instant: its completed file's bytes, and its plan's
    (a clean's or compaction's requested file; a replacecommit's requested file, or its
    inflight file when that is not empty), v8 spec §3.1."""
    plan = None
    for name in timeline.state_files(instant.time):
        state = Instant.parse(name)
        if state.is_completed or state.comparable_action != instant.comparable_action:
            continue
        data = timeline.storage.read(f"{timeline.folder}/{name}")
        if state.state == State.REQUESTED and (state.action in (CLEAN, COMPACTION, LOG_COMPACTION)
                                               or state.comparable_action == REPLACE_COMMIT):
            plan = data
        elif state.state == State.INFLIGHT and state.comparable_action == REPLACE_COMMIT and data.strip():
            plan = data
    return lsm.LsmInstant(instant.time, instant.completion, instant.comparable_action,
                          timeline.read_details(instant), plan)


def archive(txn: Transaction, *, min_commits: int | None = None, max_commits: int | None = None,
            batch: int | None = None, extra_metadata: dict[str, str] | None = None) -> ArchiveResult:
    uri = txn.storage.uri
    # (not given: the table's hoodie.keep.min.commits, hoodie.keep.max.commits, hoodie.commits.archival.batch)
    min_commits = txn.option(KEEP_MIN_COMMITS) if min_commits is None else \
        KEEP_MIN_COMMITS.parse(min_commits, f"table {uri}", "min_commits")
    max_commits = txn.option(KEEP_MAX_COMMITS) if max_commits is None else \
        KEEP_MAX_COMMITS.parse(max_commits, f"table {uri}", "max_commits")
    batch = txn.option(ARCHIVE_BATCH) if batch is None else ARCHIVE_BATCH.parse(batch, f"table {uri}", "batch")
    if max_commits <= min_commits:
        raise InvalidOptionError(f"table {uri}: need max_commits > min_commits >= 1 and batch >= 1 "
                                 f"(got {min_commits}, {max_commits}, {batch})")
    lsm_history = txn.config.timeline_layout == 2  # versions 8 and 9: the LSM history (v8 spec §3.3)
    folder = txn.config.archive_folder
    storage = txn.storage
    result = ArchiveResult()
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (tokens.ARCHIVE,)) as (timeline, done):
        if not lsm_history:
            _recover_merge(storage, folder)
        if done is not None:
            stored = tokens.stored_result(storage, token, done.time, tokens.ARCHIVE)
            return ArchiveResult(**{**stored, "already_done": True})
        chosen, result.blocked_by = select(txn.ctx, timeline, min_commits, max_commits)
        if chosen:
            times = {i.time for i in chosen}
            names = sorted(_state_files(timeline, chosen), key=lambda n: Instant.parse(n))
            if lsm_history:
                path = _archive_to_history(storage, timeline, folder, chosen)
            else:
                zone = "UTC" if txn.config.timezone == "UTC" else "LOCAL"
                mtimes = {n: _format_ms(timeline.transition_time_ms(Instant.parse(n)), zone) for n in names}
                entries = [_entry(timeline, n, mtimes) for n in names]
                existing = archive_files(storage, folder)
                version = (existing[0][0] + 1) if existing else 1
                path = f"{folder}/.commits_.archive.{version}_{TOKEN}"
                blocks = [avro_block_bytes({}, ARCHIVED_META_ENTRY, entries[i : i + batch])
                          for i in range(0, len(entries), batch)]
                storage.write(path, b"".join(blocks))
                _delete_state_files(storage, timeline, names)
            for t in times:
                storage.delete_dir(f".hoodie/.temp/{t}")
                storage.delete(f".hoodie/.heartbeat/{t}")
            result.archived = [f"{i.time}.{i.action}" for i in chosen]
            result.archive_file = path
        if lsm_history:
            if lsm.compact(storage, folder):
                result.merged_files = [f"{folder}/{f['fileName']}"
                                       for f in lsm.manifest(storage, folder, lsm.latest_version(storage, folder))]
            result.metadata_table_archived = _archive_metadata_table(txn, txn.timeline, min_commits, max_commits)
        elif txn.option(MERGE_ENABLE):
            result.merged_files = _merge_small_files(storage, folder, txn.option(MERGE_BATCH),
                                                     txn.option(MERGE_SMALL_FILE))
        tokens.record_result(storage, token, txn.new_instant_time(timeline), tokens.ARCHIVE,
                             {k: v for k, v in asdict(result).items() if k != "already_done"})
    if chosen:
        log.info("table %s: archived %d instants into %s", uri, len(chosen), result.archive_file)
    return result


def _archive_to_history(storage, timeline, folder: str, chosen: list[Instant]) -> str:
    """Archive the completed `chosen` instants into the LSM history at `folder` (v8 spec §3.3:
    the history file and its manifest first, then the instants' state files). Returns the
    history file's path."""
    path = f"{folder}/{lsm.append(storage, folder, [_lsm_instant(timeline, i) for i in chosen])}"
    _delete_state_files(storage, timeline, _state_files(timeline, chosen))
    return path


def _state_files(timeline, chosen: list[Instant]) -> list[str]:
    """The state files of the `chosen` instants, not those of another action at the same time
    (a savepoint shares its commit's)."""
    return [n for i in chosen for n in timeline.state_files(i.time)
            if Instant.parse(n).comparable_action == i.comparable_action]


def _delete_state_files(storage, timeline, names: list[str]) -> None:
    for n in sorted(names, key=lambda n: (Instant.parse(n).is_completed, Instant.parse(n))):  # pending files first
        storage.delete(f"{timeline.folder}/{n}")


def _archive_metadata_table(txn: Transaction, timeline, min_commits: int, max_commits: int) -> list[str]:
    """Archive the MDT's own timeline into its LSM history (§5.8), with the data table's
    bounds plus one (as Java's writer configures it), never at or after: the earliest
    data-table commit or pending instant still active (the MDT's records of later instants are
    checked against the data table's active timeline), the MDT's latest compaction (and the
    deltacommits after it; nothing before the first one), a pending MDT instant, or the MDT's
    latest clean's bound."""
    if not metadata_on(txn.storage, txn.config.props):
        return []
    writer = MetadataWriter(txn.storage)
    mdt = writer.timeline()
    bounds = [i.time for i in (timeline.commits().first, timeline.pending().first, mdt.pending().first) if i]
    compactions = [i.time for i in mdt.completed() if i.action == COMMIT]
    if not compactions:  # the latest slice's base is still the initialisation's: it stays active
        return []
    bounds += compactions[-1:]
    if mdt.latest_clean_bound():
        bounds.append(mdt.latest_clean_bound())
    bound = min(bounds, default=None)
    commits = mdt.commits().completed().instants
    chosen = []
    if len(commits) > max_commits + 1:
        chosen = [c for c in commits[: len(commits) - (min_commits + 1)] if bound is None or c.time < bound]
    for action in (CLEAN, ROLLBACK):
        done = mdt.actions(action).completed().instants
        if len(done) > max_commits + 1:
            chosen += done[: len(done) - (min_commits + 1)]
    if not chosen:
        return []
    chosen.sort(key=lambda i: i.time)
    folder = f"{MDT_PATH}/{TableConfig(writer.props).archive_folder}"
    _archive_to_history(txn.storage, mdt, folder, chosen)
    lsm.compact(txn.storage, folder)
    log.info("table %s: archived %d metadata table instants into %s", txn.storage.uri, len(chosen), folder)
    return [f"{i.time}.{i.action}" for i in chosen]


def _format_ms(ms: int, zone: str) -> str | None:
    if not ms:
        return None
    from datetime import datetime, timezone

    moment = datetime.fromtimestamp(ms / 1000, timezone.utc) if zone == "UTC" else datetime.fromtimestamp(ms / 1000)
    return format_instant(moment)


def _merge_small_files(storage, folder: str, batch_size: int, small_limit: int) -> list[str]:
    files = [(n, p) for n, p in sorted(archive_files(storage, folder)) if storage.status(p).size < small_limit]
    if len(files) < max(2, batch_size):
        return []
    candidates = files[:batch_size]
    newest = archive_files(storage, folder)[0][0]
    merged = f"{folder}/.commits_.archive.{newest + 1}_{TOKEN}"
    plan = {"version": 1, "candidate": [p.rsplit("/", 1)[-1] for _, p in candidates],
            "mergedArchiveFileName": merged.rsplit("/", 1)[-1]}
    storage.write(f"{folder}/{MERGE_PLAN}", write_avro(MERGE_ARCHIVE_PLAN, plan))
    storage.write(merged, b"".join(storage.read(p) for _, p in candidates))
    for _, p in candidates:
        storage.delete(p)
    storage.delete(f"{folder}/{MERGE_PLAN}")
    return [p for _, p in candidates]


def _recover_merge(storage, folder: str) -> None:
    """A merge that died: keep the merged file if it is whole, else the candidates."""
    plan_path = f"{folder}/{MERGE_PLAN}"
    if not storage.exists(plan_path):
        return
    plan = read_avro(storage.read(plan_path)) or {}
    merged = f"{folder}/{plan.get('mergedArchiveFileName')}"
    candidates = [f"{folder}/{c}" for c in plan.get("candidate") or []]
    whole = False
    if storage.exists(merged):
        blocks = read_log_file(storage.read(merged))
        expected = sum(len(read_log_file(storage.read(c))) for c in candidates if storage.exists(c))
        whole = all(isinstance(b, DataBlock) for b in blocks) and (
            all(not storage.exists(c) for c in candidates) or len(blocks) >= expected)
    if whole:
        for c in candidates:
            storage.delete(c)
    else:
        storage.delete(merged)
    storage.delete(plan_path)


