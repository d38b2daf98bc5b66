"""At most one instant per run token: the rule every write and table service starts under.

An operation given a run token (`airflow_lake.token`) starts with `token_lock`: under the
table lock it repairs the timeline and looks the token up, pending instants included. A
completed instant of the token is the result to return (a retry). A pending one whose
heartbeat is live is another attempt of the same run, still running (two submissions at the
same moment, or a retry while a zombie runs): this attempt releases the lock, waits and
looks again, until that instant completes (its result is returned) or its heartbeat
expires (a dead attempt: the repair rolls a write back, a service takes its plan over).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

from ..config import WriteOptions
from ..timeline.active import ActiveTimeline
from ..timeline.instant import Instant
from .heartbeat import is_expired

log = logging.getLogger(__name__)

sleep: Callable[[float], None] = time.sleep  # between looks at a running attempt (tests observe it)
MAX_POLL_S = 1.0


@contextmanager
def token_lock(table, token: str | None, actions: Collection[str] | None = None, *,
               pending_done: bool = False) -> Iterator[tuple[ActiveTimeline, Instant | None]]:
    """Hold the table lock over the repaired timeline and the instant `token` already did
    (completed, of `actions`; with `pending_done`, a pending one too, e.g. a compaction plan),
    or None: this attempt goes on, still under the lock. Waits while an attempt with `token`
    runs (pending, live heartbeat), polling without the lock."""
    interval = table.option(WriteOptions.HEARTBEAT_INTERVAL_MS)
    misses = table.option(WriteOptions.HEARTBEAT_TOLERABLE_MISSES)
    poll = min(max(interval, 1) / 4000, MAX_POLL_S)
    while True:
        with table.lock():
            timeline = table.repair_timeline()
            found = timeline.find_token(token, pending=True, actions=actions) if token else None
            if found is None or found.is_completed or pending_done:
                yield timeline, found
                return
            if is_expired(table.storage, found.time, interval, misses):
                yield timeline, None  # a dead attempt (or a plan nobody executes): the caller takes it over
                return
        log.info("table %s: %s of run token %r is still running: waiting for it", table.storage.uri, found, token)
        sleep(poll)

