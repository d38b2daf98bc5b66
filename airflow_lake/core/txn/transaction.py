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

from .. import properties
from ..config import TableOptions, WriteOptions
from ..context import TableContext
from ..engine import Engine
from ..errors import InvalidTableError, LockError, TimelineError, WriteConflictError
from ..lock import LockProvider, lock_provider_name, table_lock
from ..model import WriteStat
from ..paths import Deleter
from ..timeline.active import ActiveTimeline, timeline_folder
from ..timeline.clock import next_instant
from ..timeline.instant import COMMIT_ACTIONS, RESTORE, ROLLBACK, SAVEPOINT, Instant, State
from ..timeline.payloads import (
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPlan,
)
from . import undo
from .conflicts import ConflictCheck, find_conflict
from .heartbeat import Clock, Heartbeat, is_expired
from .markers import delete_markers
from .metadata_builds import MetadataTableBuilds
from .metadata_sync import MetadataTableSync

log = logging.getLogger(__name__)

sleep: Callable[[float], None] = time.sleep  # between looks at a running attempt (tests observe it)
MAX_POLL_S = 1.0


class Transaction(MetadataTableSync, MetadataTableBuilds):
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
        self._held: list[LockProvider] = []  # the locks this transaction holds now (`HeldLock`)

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
        provider = table_lock(self.storage, self.ctx.options, mode=self.option(WriteOptions.CONCURRENCY_MODE),
                              provider=lock_provider_name(self.storage.uri, self.ctx.options, self.config.props),
                              expire_ms=int(self.option(WriteOptions.LOCK_EXPIRE_MINUTES) * 60_000),
                              wait_ms=self.option(WriteOptions.LOCK_WAIT_MS))
        return HeldLock(self, provider)

    def check_lock(self) -> None:
        """Just before an instant completes: the table lock this transaction holds is still its
        own, where the lock can tell (the `.hoodie/lock` file: one read). Else `LockError`."""
        check = getattr(self._held[-1], "check_held", None) if self._held else None
        if check is not None:
            check()

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
        self.finish_indexing(timeline)
        self.finish_rollbacks(timeline)
        self.finish_restores(timeline)
        undo.forget_rolled_back(self.storage, timeline, self.is_expired)
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
            self.check_lock()
            self._complete(timeline, inflight, content)
        delete_markers(self.storage, inflight.time)

    def complete(self, timeline: ActiveTimeline, instant: Instant, content: bytes) -> Instant:
        """Complete `instant` with `content`; the caller holds the table lock."""
        self.sync_metadata_table(instant, content)
        self.check_lock()
        return self._complete(timeline, instant, content)

    def _complete(self, timeline: ActiveTimeline, instant: Instant, content: bytes) -> Instant:
        """The completed state file of `instant`, then, since this process may have paused while
        it was written (past the lock's expiry, while another writer rolled the instant back),
        the lock and the instant's pending state file checked again: a completion that lost them
        is deleted and a `LockError` raised, never a commit whose files are gone."""
        done = timeline.transition(instant, State.COMPLETED, content)
        try:
            self.check_lock()
            lost = None if self.storage.exists(f"{timeline.folder}/{instant.file_name}") else \
                f"its {instant.state.name.lower()} file is gone (another writer rolled it back)"
        except LockError as e:
            lost = str(e)
        if lost is not None:
            timeline.delete_file(done.file_name)
            raise LockError(f"table {self.storage.uri}: {instant.action} {instant.time} was completed after it was "
                            f"lost ({lost}; this process paused past the lock's expiry): the completion is undone, "
                            "nothing was committed; retry")
        return done

    def delete_savepoint(self, timeline: ActiveTimeline, instant: str) -> None:
        """Hudi's `deleteSavepoint`: the savepoint's completed state file, then its inflight
        one; the commit it protected (the same instant time) keeps its own. The caller holds
        the table lock."""
        names = [n for n in timeline.state_files(instant) if Instant.parse(n).action == SAVEPOINT]
        for name in sorted(names, key=lambda n: not Instant.parse(n).is_completed):
            timeline.delete_file(name)

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
            self.check_lock()
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
        self.check_lock()
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


class HeldLock:
    """A transaction's table lock: the lock provider's, known to the transaction while held
    (`Transaction.check_lock`)."""

    def __init__(self, txn: Transaction, provider: LockProvider):
        self.txn = txn
        self.provider = provider

    def acquire(self) -> None:
        self.provider.acquire()
        self.txn._held.append(self.provider)

    def release(self) -> None:
        if self.provider in self.txn._held:
            self.txn._held.remove(self.provider)
        self.provider.release()

    def __enter__(self) -> HeldLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __getattr__(self, name: str):
        return getattr(self.provider, name)
