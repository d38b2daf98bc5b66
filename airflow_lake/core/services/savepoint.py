"""Savepoints protect a commit's files from clean and archive; restore rolls the table back
to a savepoint (every later write, compaction and plan is undone)."""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass, field

from ..errors import InstantNotFoundError, LakeError, WriteConflictError
from ..timeline import tokens
from ..timeline.archived import ArchivedTimeline, has_archived
from ..timeline.instant import COMMIT_ACTIONS, RESTORE, SAVEPOINT, Instant, State, check_instant_time
from ..timeline.payloads import ActionInstant, RestoreMetadata, RestorePlan, SavepointMetadata
from ..txn.transaction import Transaction
from ..txn.undo import restore_plans
from ..view import FileSystemView


@dataclass
class RestoreResult:
    instant: str
    savepoint: str
    rolled_back: list[str] = field(default_factory=list)


def savepoint(txn: Transaction, instant: str, *, user: str | None = None, comments: str = "",
              extra_metadata: dict[str, str] | None = None) -> str:
    """Savepoint the completed commit `instant` (`<instant>.savepoint`); returns the instant
    (a retry with the same run token: the one its first call savepointed)."""
    uri = txn.storage.uri
    check_instant_time(instant, uri)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (SAVEPOINT,)) as (timeline, done):
        if done is not None:
            return done.time
        commits = timeline.commits().completed()
        if not commits.contains(instant):
            raise InstantNotFoundError(f"table {uri}: {instant} is not a completed commit on the active timeline")
        if timeline.actions(SAVEPOINT).completed().contains(instant):
            return instant
        bound = timeline.latest_clean_bound()
        if bound and instant < bound:
            raise LakeError(f"table {uri}: cannot savepoint {instant}: older than {bound}, the earliest commit "
                            "the latest clean retained (its files may be gone)")
        view = FileSystemView(txn.storage, timeline, instant)
        files: dict[str, list[str]] = {}
        for group in view.file_groups():
            base, logs = view.read_slice(group)
            names = ([base.name] if base else []) + [lf.name for lf in logs]
            if names:
                files.setdefault(group.partition, []).extend(names)
        comment = comments or ",".join(f"{k}={v}" for k, v in (extra_metadata or {}).items())
        metadata = SavepointMetadata(user or getpass.getuser(), int(time.time() * 1000), comment,
                                     {p: tuple(names) for p, names in files.items()})
        inflight = txn.request(timeline, Instant(instant, SAVEPOINT, State.INFLIGHT), token=token)
        txn.complete(timeline, inflight, metadata.to_bytes())
    return instant


def delete_savepoint(txn: Transaction, instant: str) -> str:
    """Delete the savepoint `instant` (Hudi's `deleteSavepoint`): its files are cleaned and
    its commit archived like any other from then on; returns the instant."""
    uri = txn.storage.uri
    check_instant_time(instant, uri)
    with txn.start(None) as (timeline, _):
        if not timeline.actions(SAVEPOINT).contains(instant):
            raise InstantNotFoundError(f"table {uri}: {instant} is not a savepoint on the active timeline")
        later = _archived_after(txn, instant)
        if later is not None:
            raise LakeError(f"table {uri}: savepoint {instant} cannot be deleted: commits after it were archived "
                            f"({later}..., hoodie.archive.beyond.savepoint), and readers count their files as "
                            "committed only while the savepointed commit starts the active timeline. Nothing was "
                            "changed")
        txn.delete_savepoint(timeline, instant)
    return instant


def _archived_after(txn: Transaction, instant: str) -> str | None:
    """The first archived commit after `instant` (archival beyond a savepoint), or None."""
    folder = txn.config.archive_folder
    if not has_archived(txn.storage, folder):
        return None
    later = [i.time for i in ArchivedTimeline(txn.storage, folder).completed()
             if i.comparable_action in COMMIT_ACTIONS and i.time > instant]
    return min(later, default=None)


def restore(txn: Transaction, instant: str, *, extra_metadata: dict[str, str] | None = None) -> RestoreResult:
    """Roll back every write, compaction and plan after the savepoint `instant`. A run token
    in `extra_metadata` is recorded in the token index (restore metadata has no field for it):
    a retry finds its completed restore and returns it."""
    uri = txn.storage.uri
    check_instant_time(instant, uri)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (RESTORE,)) as (timeline, done):
        if done is not None:
            return _stored_result(timeline, done, instant)
        if not timeline.actions(SAVEPOINT).completed().contains(instant):
            raise InstantNotFoundError(f"table {uri}: {instant} is not a savepoint; restore needs one")
        later = _archived_after(txn, instant)
        if later is not None:  # (their files would count as committed again after the next write)
            raise LakeError(f"table {uri}: cannot restore to savepoint {instant}: commits after it were archived "
                            f"({later}..., hoodie.archive.beyond.savepoint) and a restore undoes only the active "
                            "timeline's. Nothing was changed")
        targets = [i for i in reversed(timeline.writes().instants) if i.time > instant]
        alive = [i for i in targets if i.is_pending and not txn.is_expired(i.time)]
        if alive:
            raise WriteConflictError(f"table {uri}: cannot restore while {alive[0].action} {alive[0].time} runs")
        t = txn.new_instant_time(timeline)
        plan = RestorePlan(instant, tuple(ActionInstant(i.time, i.action) for i in targets))
        plans = restore_plans(txn.storage, timeline, plan)  # refused before the timeline changes
        requested = txn.request(timeline, Instant(t, RESTORE, State.REQUESTED), plan.to_bytes(), token=token)
        return RestoreResult(t, instant, txn.restore(timeline, requested, plan, plans))


def _stored_result(timeline, done: Instant, instant: str) -> RestoreResult:
    """What the completed restore `done` undid (nothing known once it is archived)."""
    record = timeline.stored_avro_metadata(done)
    return RestoreResult(done.time, instant, RestoreMetadata.undone(record))
