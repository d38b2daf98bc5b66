"""The rollback service: which instants may be rolled back (failed writes, the latest
completed write, a pending compaction), refusing what a later plan builds on. The rollback
itself is the transaction's (`Transaction.rollback`)."""

from __future__ import annotations

from ..errors import InstantNotFoundError, LakeError, WriteConflictError
from ..timeline import tokens
from ..timeline.active import ActiveTimeline
from ..timeline.archived import has_archived
from ..timeline.instant import COMPACTION, ROLLBACK, SAVEPOINT, Instant, State, check_instant_time
from ..timeline.payloads import CompactionPlan
from ..txn.transaction import Transaction
from ..txn.undo import RollbackResult, rolled_back_by


def rollback(txn: Transaction, instant: str, *, extra_metadata: dict[str, str] | None = None) -> RollbackResult:
    """Roll back a pending write or compaction, or the latest completed write. A run token
    in `extra_metadata` is recorded in the token index (rollback metadata has no field for it)."""
    uri = txn.storage.uri
    check_instant_time(instant, uri)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (ROLLBACK,)) as (timeline, done):
        if done is not None:
            return RollbackResult.stored(timeline, done, instant)
        if not timeline.contains(instant):
            done = rolled_back_by(timeline, instant)
            if done is not None:  # an earlier call already did it (a retried task)
                return RollbackResult.stored(timeline, done, instant)
        target = rollback_target(timeline, instant, uri)
        if target.is_pending and not txn.is_expired(target.time):
            raise WriteConflictError(f"table {uri}: {target} is still running (live heartbeat)")
        if target.is_completed:  # a later write may have read its files (a COW rewrite): it would bring them back
            running = [i for i in timeline.writes().pending() if i.time > target.time and i.action != COMPACTION
                       and not txn.is_expired(i.time)]
            if running:
                raise WriteConflictError(
                    f"table {uri}: {target.action} {target.time} cannot be rolled back while {running[0].action} "
                    f"{running[0].time}, started after it, runs (it may rewrite its files and bring its rows back, "
                    "as Apache Hudi refuses: roll back later writes first); nothing was changed")
        return txn.rollback(timeline, target, token=token)


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
        if timeline.commits().completed().times == [time_] and has_archived(timeline.storage, timeline.archive_folder):
            # (readers count a file of an archived commit as committed only before the first active commit)
            raise LakeError(f"table {uri}: {instant.action} {time_} is the only commit left on the active timeline "
                            "and earlier ones are archived: rolled back, it would leave every reader (Java's, "
                            "hudi-rs, ours) an empty table, the archived commits' files unseen. Nothing was changed")
        if timeline.actions(SAVEPOINT).completed().contains(time_):  # (as Java's validateSavepointRollbacks)
            raise LakeError(f"table {uri}: {instant.action} {time_} is savepointed: a savepointed commit cannot be "
                            "rolled back (its savepoint would be lost with it); delete the savepoint first "
                            f"(airflow-lake savepoint delete {uri} {time_}). Nothing was changed")
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


