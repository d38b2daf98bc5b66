"""The rollback service: which instants may be rolled back (failed writes, the latest
completed write, a pending compaction), refusing what a later plan builds on. The rollback
itself is `undo.rollback_instant`."""

from __future__ import annotations

from ..config import WriteOptions
from ..errors import InstantNotFoundError, LakeError, WriteConflictError
from ..storage import Storage
from ..timeline import tokens
from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMMIT_ACTIONS, COMPACTION, ROLLBACK, Instant, State, check_instant_time
from ..timeline.payloads import CompactionPlan
from ..undo import RollbackResult, rollback_instant, rolled_back_by
from ..write.attempt import token_lock
from ..write.heartbeat import is_expired


def rollback(table, instant: str, *, extra_metadata: dict[str, str] | None = None) -> RollbackResult:
    """Roll back a pending write or compaction, or the latest completed write. A run token
    in `extra_metadata` is recorded in the token index (rollback metadata has no field for it)."""
    check_instant_time(instant, table.storage.uri)
    token = tokens.token_of(extra_metadata)
    with token_lock(table, token, (ROLLBACK,)) as (timeline, done):
        if done is not None:
            return RollbackResult.stored(timeline, done, instant)
        if not timeline.contains(instant):
            done = rolled_back_by(timeline, instant)
            if done is not None:  # an earlier call already did it (a retried task)
                return RollbackResult.stored(timeline, done, instant)
        target = rollback_target(timeline, instant, table.storage.uri)
        if target.is_pending and not is_expired(table.storage, target.time,
                                                table.option(WriteOptions.HEARTBEAT_INTERVAL_MS),
                                                table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)):
            raise WriteConflictError(f"table {table.storage.uri}: {target} is still running (live heartbeat)")
        time_ = table.new_instant_time(timeline)
        tokens.record(table.storage, token, time_, ROLLBACK)
        return rollback_instant(table.storage, timeline, target, time_, table.deleter())


def failed_writes(storage: Storage, timeline: ActiveTimeline, interval_ms: int, misses: int) -> list[Instant]:
    """Pending commit/deltacommit/replacecommit instants whose heartbeat has expired."""
    return [
        i for i in timeline.pending()
        if i.action in COMMIT_ACTIONS and is_expired(storage, i.time, interval_ms, misses)
    ]


def rollback_target(timeline: ActiveTimeline, time_: str, uri: str) -> Instant:
    """The instant `table.rollback(time_)` may roll back: a pending write or compaction, or the
    latest completed write."""
    try:
        instant = timeline.writes().get(time_)
    except InstantNotFoundError:
        raise InstantNotFoundError(f"table {uri}: no write or compaction instant {time_} to roll back") from None
    if instant.is_completed:
        later = [i.time for i in timeline.writes().completed() if i.time > time_]
        if later:
            raise LakeError(f"table {uri}: {time_} is not the latest completed write ({later[-1]} is); "
                            "only the latest can be rolled back (use restore for more)")
        if instant.action != COMPACTION:
            _check_not_compacting(timeline, instant, uri)
    return instant


def _check_not_compacting(timeline: ActiveTimeline, target: Instant, uri: str) -> None:
    """A completed write whose files a pending compaction plan reads cannot be rolled back:
    the plan would merge a deleted file (as in Apache Hudi, roll back only what no later
    instant builds on)."""
    written = {s.path.rsplit("/", 1)[-1] for s in timeline.commit_metadata(target).stats() if s.path}
    for plan_instant in timeline.actions(COMPACTION).pending():
        if plan_instant.time < target.time:
            continue
        plan = CompactionPlan.from_bytes(timeline.read_details(plan_instant.to(State.REQUESTED)))
        for op in plan.operations:
            hit = next((n for n in op.file_names() if n in written), None)
            if hit:
                raise LakeError(
                    f"table {uri}: {target.action} {target.time} cannot be rolled back: pending compaction "
                    f"{plan_instant.time} includes its file {hit.rsplit('/', 1)[-1]!r} (partition "
                    f"{op.partition!r}); run that compaction, then restore a savepoint taken "
                    f"before {target.time} to undo the write")


