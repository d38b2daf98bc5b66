"""What a service run (a packaged job, an operator's task) asks of the timeline: the action
names it reports, whether an earlier attempt with its run token already did the work, and
which compaction plan it executes next. Engines and jobs ask here, not the timeline."""

from __future__ import annotations

from ..timeline.instant import CLEAN, COMMIT, COMPACTION, RESTORE, ROLLBACK, SAVEPOINT
from ..timeline.tokens import TOKEN_KEY

__all__ = ["CLEAN", "COMMIT", "COMPACTION", "RESTORE", "ROLLBACK", "SAVEPOINT", "TOKEN_KEY", "plan_token",
           "select_plan", "token_done", "savepoint_exists"]


def token_done(table, token: str | None, action: str, *, pending: bool = False) -> bool:
    """Whether an attempt with run `token` completed `action` (with `pending`: or started it)."""
    return bool(token and table.timeline.find_token(token, pending=pending, actions=(action,)))


def savepoint_exists(table, instant: str) -> bool:
    """Whether `instant` is savepointed already."""
    return table.timeline.actions(SAVEPOINT).completed().contains(instant)


def plan_token(token: str | None, n: int) -> dict[str, str] | None:
    """The extra metadata of a run's n-th plan (from 0): the first carries the run token, later
    ones `<token>#<n + 1>`."""
    if not token:
        return None
    return {TOKEN_KEY: token if n == 0 else f"{token}#{n + 1}"}


def select_plan(table, *, instant: str | None, order: str, extra: dict[str, str] | None,
                first_already_done: bool) -> str | None:
    """The compaction plan a run executes next, or None for no more: `instant` when given;
    else this run's own plan (`extra`'s token: done already, or left inflight by a dead
    attempt); else, unless the run's first plan was found done (a re-submission takes no new
    plan), the oldest (`FIFO`) or newest (`LIFO`) pending plan."""
    if instant:
        return instant
    timeline = table.timeline
    mine = extra and timeline.find_token(extra[TOKEN_KEY], pending=True, actions=(COMMIT,))
    if mine:
        return mine.time
    if first_already_done:
        return None
    pending = timeline.actions(COMPACTION).pending().times
    if not pending:
        return None
    return pending[0] if order == "FIFO" else pending[-1]
