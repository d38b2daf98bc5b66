"""Undo one instant (spec §4.4): the rollback primitive that writers, table services and
table repair share.

Steps: `R.rollback.requested` (Avro plan), `R.rollback.inflight`, the target's completed file
removed (it is no longer visible), data files deleted, `R.rollback` (Avro metadata), then
the target's inflight and requested files removed. A rollback that died half-way is finished
from its plan. The rollback instant's own files are created by the transaction
(`txn.transaction`); this module finds what an instant wrote and removes it. Deciding what
may be rolled back (and the run token) is the rollback service's business.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import UnsupportedFeatureError
from ..formats.log.blocks import read_log_file
from ..model import BaseFile, LogFile
from ..paths import Deleter, absolute_path, relative_path
from ..storage import Storage
from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, ROLLBACK, Instant, State
from ..timeline.metadata import read_avro
from ..timeline.payloads import ActionInstant, RestorePlan, RollbackMetadata, RollbackPlan, RollbackRequest
from ..view import list_partition_files
from .heartbeat import FOLDER as HEARTBEAT_FOLDER
from .markers import APPEND, delete_markers, read_markers

log = logging.getLogger(__name__)


@dataclass
class RollbackResult:
    instant: str  # the rollback instant
    rolled_back: str
    action: str
    files_deleted: list[str] = field(default_factory=list)
    already_done: bool = False  # a retry: what an earlier call (or this run token's) did

    @staticmethod
    def stored(timeline: ActiveTimeline, rb: Instant, time_: str) -> RollbackResult:
        """What the completed rollback `rb` did (from its metadata; only its instant once
        that is no longer kept)."""
        record = timeline.stored_avro_metadata(rb)
        if not record:
            return RollbackResult(rb.time, time_, "", [], already_done=True)
        meta = RollbackMetadata.from_avro(record)
        target = meta.rolled_back[0] if meta.rolled_back else ActionInstant(time_, "")
        return RollbackResult(rb.time, target.time, target.action, meta.files, already_done=True)


def is_compaction(timeline: ActiveTimeline, time_: str) -> bool:
    return any(n.endswith(".compaction.requested") for n in timeline.state_files(time_))


def files_of(storage: Storage, timeline: ActiveTimeline, target: Instant, *, undone_commit: bool = False,
             ) -> list[str]:
    """Data files the target instant wrote: from its markers, its commit metadata (when
    completed), else base files named with its instant (and, for a deltacommit, its log
    files: named with its instant in timeline layout 2; in layout 1, only for an
    `undone_commit`, a restore's whose completed file an interrupted run removed, those its
    blocks fill, read from the files).

    A CREATE or MERGE marker names a base file; an APPEND marker names a made-up base file
    `<fileId>_<token>_<baseInstant>` whose log files with that token are the ones written
    (we never append to an existing log file).
    """
    found: set[str] = set()
    appends: dict[str, list[BaseFile]] = {}
    markers = read_markers(storage, target.time)
    for recorded, io_type in markers:
        path = relative_path(storage, recorded, instant=target.time, what="marker of")
        name = path.rsplit("/", 1)[-1]
        partition = path[: -len(name) - 1] if "/" in path else ""
        base = BaseFile.parse(partition, name)
        if base is None:
            continue
        if io_type == APPEND:
            appends.setdefault(partition, []).append(base)
        else:
            found.add(path)
    for partition, bases in appends.items():
        wanted = {(b.file_id, b.instant, b.write_token) for b in bases}
        for st in storage.list(partition):
            lf = LogFile.parse(partition, st.name)
            if lf is not None and (lf.file_id, lf.base_instant, lf.write_token) in wanted:
                found.add(lf.path)
    if target.is_completed:
        found.update(relative_path(storage, stat.path, instant=target.time, what="write stat path")
                     for stat in timeline.commit_metadata(target).stats() if stat.path)
    if not found and not markers:  # (a write that died before its markers, or a crashed restore's undone commit)
        logs = target.action == DELTA_COMMIT and (timeline.layout >= 2 or undone_commit)  # (only those write logs)
        for partition, statuses in list_partition_files(storage).items():
            for st in statuses:
                base = BaseFile.parse(partition, st.name)
                if base is not None and base.instant == target.time:
                    found.add(base.path)
                elif logs and (lf := LogFile.parse(partition, st.name)) is not None and _log_written_by(
                        storage, timeline, lf, target.time):
                    found.add(lf.path)
    return sorted(f for f in found if storage.exists(f))


def _log_written_by(storage: Storage, timeline: ActiveTimeline, lf: LogFile, time_: str) -> bool:
    """Whether the deltacommit `time_` wrote the log file `lf`: in timeline layout 2 a log file
    is named by the deltacommit that wrote it; in layout 1 by its slice's base instant, and
    its blocks carry the writer's instant (`INSTANT_TIME`), read only from log files of slices
    based at or before `time_` (all its blocks: a torn last one has none)."""
    if timeline.layout >= 2:
        return lf.base_instant == time_
    if lf.base_instant > time_:
        return False
    return _block_instants(storage, lf.path) == [time_]


def _block_instants(storage: Storage, path: str) -> list[str | None]:
    """The distinct instants of a log file's blocks, in order, a torn last block's (None) left out."""
    instants = [b.instant for b in read_log_file(storage.read(path), f"{storage.uri}/{path}")]
    if instants and instants[-1] is None:
        instants.pop()
    return list(dict.fromkeys(instants))


def check_whole_logs(storage: Storage, timeline: ActiveTimeline, target: str, paths: list[str]) -> None:
    """Before anything changes: refuse (naming the table, the instant and the file) to undo
    `target` when one of its log files also holds other instants' blocks, as Java 0.x writes
    on file systems that append (HDFS): deleting it would lose them (Java appends a rollback
    command block instead, which airflow-lake does not write). Layout 1 only: Hudi 1.x writes
    a log file per deltacommit."""
    if timeline.layout >= 2:
        return
    for path in paths:
        if LogFile.parse(*(path.rsplit("/", 1) if "/" in path else ("", path))) is None or not storage.exists(path):
            continue
        others = [i for i in _block_instants(storage, path) if i != target]
        if others:
            raise UnsupportedFeatureError(
                f"table {storage.uri}: undoing {target}: its log file {path} also holds blocks of {others} (appended "
                "by another writer, as Java does on HDFS); airflow-lake does not undo part of a log file; nothing "
                "was changed")


def rollback_plan(storage: Storage, timeline: ActiveTimeline, target: Instant) -> RollbackPlan:
    """The plan that rolls back `target` (pending, or completed): its action (a pending
    compaction's is `compaction`) and the files it wrote."""
    action = COMPACTION if is_compaction(timeline, target.time) and target.is_pending else target.action
    return RollbackPlan(target.time, action, rollback_requests(storage, timeline, target))


def rolled_back_by(timeline: ActiveTimeline, time_: str) -> Instant | None:
    """The completed rollback that rolled back `time_`, if any."""
    for rb in reversed(timeline.actions(ROLLBACK).completed().instants):
        record = read_avro(timeline.read_details(rb))
        if record and any(i.time == time_ for i in RollbackMetadata.from_avro(record).rolled_back):
            return rb
    return None


def forget_rolled_back(storage: Storage, timeline: ActiveTimeline, is_expired: Callable[[str], bool]) -> None:
    """A crash after `R.rollback` was written can leave the target's pending files: remove them
    (not those of a compaction run again after its rollback, whose heartbeat `is_expired` says
    is live: its plan is kept, and its new run has the same instant)."""
    pending = [i for i in timeline.pending() if i.action in COMMIT_ACTIONS or i.action == COMPACTION]
    for instant in pending:
        if rolled_back_by(timeline, instant.time) is None or not is_expired(instant.time):
            continue
        keep_plan = is_compaction(timeline, instant.time)
        for name in reversed(timeline.state_files(instant.time)):
            parsed = Instant.parse(name)
            if keep_plan and parsed.action == COMPACTION and parsed.state == State.REQUESTED:
                continue
            timeline.delete_file(name)


def undo(storage: Storage, timeline: ActiveTimeline, plan: RollbackPlan, by: str, start: float, *, keep_plan: bool,
         finish: Callable[[RollbackMetadata], object] | None = None,
         deleter: Deleter | None = None, groups: list[list[str]] | None = None) -> RollbackMetadata:
    """Make the target invisible, delete its files (by `deleter`: one engine task per
    partition), call `finish(metadata)`, forget the target.

    Returns the rollback metadata. With `keep_plan`, a compaction's requested plan survives
    (it runs again). `groups`: the plan's files as `plan_files` gives them."""
    target_time = plan.instant
    groups = plan_files(storage, plan, by) if groups is None else groups
    for name in timeline.state_files(target_time):
        if Instant.parse(name).is_completed:
            timeline.delete_file(name)
    if deleter is not None:
        deleter(groups)
    else:
        for path in (p for group in groups for p in group):
            storage.delete(path)
    deleted: dict[str, tuple[str, ...]] = {}
    for req in plan.requests:  # Apache Hudi's plans have one request per file group
        deleted[req.partition] = deleted.get(req.partition, ()) + req.files
    metadata = RollbackMetadata(by, (ActionInstant(target_time, plan.action),), deleted,
                                int((time.time() - start) * 1000))
    if finish is not None:
        finish(metadata)
    for name in reversed(timeline.state_files(target_time)):
        instant = Instant.parse(name)
        if keep_plan and instant.action == COMPACTION and instant.state == State.REQUESTED:
            continue
        timeline.delete_file(name)
    delete_markers(storage, target_time)
    storage.delete(f"{HEARTBEAT_FOLDER}/{target_time}")
    return metadata


def plan_files(storage: Storage, plan: RollbackPlan, by: str) -> list[list[str]]:
    """The files of a rollback plan (one list per request), relative to the table root;
    PathEscapeError (naming the rollback instant `by`) when one lies outside the table."""
    return [[relative_path(storage, path, instant=by, what=f"rollback of {plan.instant}: file")
             for path in req.files] for req in plan.requests]


def rollback_requests(storage: Storage, timeline: ActiveTimeline, target: Instant, *,
                      undone_commit: bool = False) -> tuple[RollbackRequest, ...]:
    """The target's files per partition (absolute paths); refused when a log file of them
    holds other instants' blocks too (`check_whole_logs`)."""
    requests: dict[str, list[str]] = {}
    paths = files_of(storage, timeline, target, undone_commit=undone_commit)
    check_whole_logs(storage, timeline, target.time, paths)
    for path in paths:
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        requests.setdefault(partition, []).append(absolute_path(storage, path))
    return tuple(RollbackRequest(p, tuple(fs)) for p, fs in sorted(requests.items()))


def restore_plans(storage: Storage, timeline: ActiveTimeline, plan: RestorePlan) -> dict[str, RollbackPlan]:
    """The rollback plan of each instant a restore still has to undo (PathEscapeError, before
    any change, when one names a file outside the table)."""
    plans = {}
    for target in plan.instants:
        # (a savepoint of the instant shares its time: not its state)
        kind = Instant(target.time, target.action, State.REQUESTED).comparable_action
        states = [i for i in map(Instant.parse, timeline.state_files(target.time)) if i.comparable_action == kind]
        if states:
            current = max(states, key=lambda i: i.state)
            plans[target.time] = RollbackPlan(target.time, target.action, rollback_requests(
                storage, timeline, current, undone_commit=current.is_pending))
    return plans
