"""Savepoints protect a commit's files from clean and archive; restore rolls the table back
to a savepoint (every later write, compaction and plan is undone)."""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass, field

from .. import undo
from ..config import WriteOptions
from ..errors import InstantNotFoundError, LakeError, WriteConflictError
from ..timeline import tokens
from ..timeline.instant import RESTORE, SAVEPOINT, Instant, State, check_instant_time
from ..timeline.payloads import (
    ActionInstant,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPlan,
    SavepointMetadata,
)
from ..view import FileSystemView
from ..write.attempt import token_lock
from ..write.heartbeat import is_expired

log = logging.getLogger(__name__)


@dataclass
class RestoreResult:
    instant: str
    savepoint: str
    rolled_back: list[str] = field(default_factory=list)


def savepoint(table, instant: str, *, user: str | None = None, comments: str = "",
              extra_metadata: dict[str, str] | None = None) -> str:
    """Savepoint the completed commit `instant` (`<instant>.savepoint`); returns the instant
    (a retry with the same run token: the one its first call savepointed)."""
    uri = table.storage.uri
    check_instant_time(instant, uri)
    token = tokens.token_of(extra_metadata)
    with token_lock(table, token, (SAVEPOINT,)) as (timeline, done):
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
        view = FileSystemView(table.storage, timeline, instant)
        files: dict[str, list[str]] = {}
        for group in view.file_groups():
            base, logs = view.read_slice(group)
            names = ([base.name] if base else []) + [lf.name for lf in logs]
            if names:
                files.setdefault(group.partition, []).extend(names)
        comment = comments or ",".join(f"{k}={v}" for k, v in (extra_metadata or {}).items())
        metadata = SavepointMetadata(user or getpass.getuser(), int(time.time() * 1000), comment,
                                     {p: tuple(names) for p, names in files.items()})
        inflight = timeline.create(Instant(instant, SAVEPOINT, State.INFLIGHT), token=token)
        timeline.transition(inflight, State.COMPLETED, metadata.to_bytes())
    return instant


def restore(table, instant: str, *, extra_metadata: dict[str, str] | None = None) -> RestoreResult:
    """Roll back every write, compaction and plan after the savepoint `instant`. A run token
    in `extra_metadata` is recorded in the token index (restore metadata has no field for it):
    a retry finds its completed restore and returns it."""
    uri = table.storage.uri
    check_instant_time(instant, uri)
    token = tokens.token_of(extra_metadata)
    with token_lock(table, token, (RESTORE,)) as (timeline, done):
        if done is not None:
            return _stored_result(timeline, done, instant)
        if not timeline.actions(SAVEPOINT).completed().contains(instant):
            raise InstantNotFoundError(f"table {uri}: {instant} is not a savepoint; restore needs one")
        interval = table.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
        misses = table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)
        targets = [i for i in reversed(timeline.writes().instants) if i.time > instant]
        alive = [i for i in targets if i.is_pending and not is_expired(table.storage, i.time, interval, misses)]
        if alive:
            raise WriteConflictError(f"table {uri}: cannot restore while {alive[0].action} {alive[0].time} runs")
        t = table.new_instant_time(timeline)
        plan = RestorePlan(instant, tuple(ActionInstant(i.time, i.action) for i in targets))
        plans = _rollback_plans(table.storage, timeline, plan)  # refused before the timeline changes
        requested = timeline.create(Instant(t, RESTORE, State.REQUESTED), plan.to_bytes(), token=token)
        return _execute(table, timeline, requested, plan, plans)


def _stored_result(timeline, done: Instant, instant: str) -> RestoreResult:
    """What the completed restore `done` undid (nothing known once it is archived)."""
    record = timeline.stored_avro_metadata(done)
    return RestoreResult(done.time, instant, RestoreMetadata.undone(record))


def finish_pending_restores(table, timeline) -> None:
    for pending in timeline.actions(RESTORE).pending():
        plan = RestorePlan.from_bytes(timeline.read_details(pending.to(State.REQUESTED)))
        if plan is not None:
            _execute(table, timeline, pending, plan)


def _rollback_plans(storage, timeline, plan: RestorePlan) -> dict[str, RollbackPlan]:
    """The rollback plan of each instant the restore still has to undo."""
    plans = {}
    for target in plan.instants:
        names = timeline.state_files(target.time)
        if names:
            current = max((Instant.parse(n) for n in names), key=lambda i: i.state)
            plans[target.time] = RollbackPlan(target.time, target.action,
                                              undo.rollback_requests(storage, timeline, current))
    return plans


def _execute(table, timeline, instant: Instant, plan: RestorePlan,
             plans: dict[str, RollbackPlan] | None = None) -> RestoreResult:
    start = time.time()
    storage = table.storage
    if plans is None:  # a file outside the table refuses all, before any change
        plans = _rollback_plans(storage, timeline, plan)
    if instant.state == State.REQUESTED:
        instant = timeline.transition(instant, State.INFLIGHT)
    per_instant: dict[str, tuple[RollbackMetadata, ...]] = {}
    done = []
    for target in plan.instants:
        t = target.time
        rollback_plan = plans.get(t)
        if rollback_plan is None:  # already undone by an interrupted run
            per_instant[t] = ()
            continue
        per_instant[t] = (undo.undo(storage, timeline, rollback_plan, instant.time, start, keep_plan=False,
                                    deleter=table.deleter()),)
        done.append(t)
    metadata = RestoreMetadata(instant.time, plan, per_instant, int((time.time() - start) * 1000))
    timeline.transition(instant, State.COMPLETED, metadata.to_bytes())
    log.info("table %s: restored to savepoint %s (%d instants undone)", storage.uri, plan.savepoint, len(done))
    return RestoreResult(instant.time, plan.savepoint, done)
