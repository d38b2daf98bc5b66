"""Clean: delete file slices no query in the retained window needs (spec §4.3, §10).

Plan (`T.clean.requested`, Avro HoodieCleanerPlan) -> `T.clean.inflight` (same plan) ->
files deleted -> `T.clean` (Avro HoodieCleanMetadata). Never deleted: the latest slice of a
group, slices needed to read any retained commit, savepointed files, slices of a pending
compaction, files of pending writes. Groups replaced before the retained window (all
replaced groups under KEEP_LATEST_FILE_VERSIONS) are deleted whole. A clean left requested or
inflight is finished from its plan, never planned over.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from ..clean_planner import files_to_clean
from ..config import ServiceOptions
from ..errors import WriteConflictError
from ..paths import absolute_path, relative_path
from ..timeline import tokens
from ..timeline.instant import CLEAN, Instant, State
from ..timeline.payloads import ActionInstant, CleanerPlan, CleanMetadata
from ..txn.heartbeat import beating
from ..txn.transaction import Transaction
from ..view import FileSystemView
from ..vocabulary import CLEAN_POLICIES

log = logging.getLogger(__name__)

RETAINED = ServiceOptions.RETAINED


@dataclass
class CleanResult:
    instant: str | None  # None when nothing needed cleaning (no instant is written)
    policy: str
    earliest_instant_to_retain: str | None
    files: dict[str, list[str]] = field(default_factory=dict)  # partition -> file names
    dry_run: bool = False
    already_done: bool = False  # an earlier attempt with this run token did it

    @property
    def total_files(self) -> int:
        return sum(len(v) for v in self.files.values())


def plan(txn: Transaction, timeline, policy: str, retained: int) -> tuple[dict[str, list[str]], Instant | None]:
    """partition -> file paths to delete, and the earliest instant to retain."""
    return files_to_clean(FileSystemView(txn.storage, timeline, include_replaced=True), timeline, policy, retained)


def clean(txn: Transaction, *, policy: str | None = None, retained: int | None = None, dry_run: bool = False,
          extra_metadata: dict[str, str] | None = None) -> CleanResult:
    uri = txn.storage.uri
    key = None if policy else ServiceOptions.CLEAN_POLICY.key
    policy = CLEAN_POLICIES.parse(policy or txn.option(ServiceOptions.CLEAN_POLICY), f"table {uri}", key)
    retained = txn.option(RETAINED[policy]) if retained is None else \
        RETAINED[policy].parse(retained, f"table {uri}", f"retained ({policy})")
    if dry_run:
        files, earliest = plan(txn, txn.timeline, policy, retained)
        return CleanResult(None, policy, earliest.time if earliest else None, _names(files), dry_run=True)
    token = tokens.token_of(extra_metadata, f"table {uri}")
    with txn.start(token, (CLEAN,)) as (timeline, done):
        if done is not None:  # a retry: this run's clean is already done
            return _stored_result(timeline, done, policy)
        pending = timeline.actions(CLEAN).pending().instants
        if pending:  # finish a half-done clean from its plan
            instant = pending[0]
            if not txn.is_expired(instant.time):
                raise WriteConflictError(f"table {uri}: clean {instant.time} is being executed by another task")
            cleaner_plan = CleanerPlan.from_bytes(timeline.read_details(instant.to(State.REQUESTED)))
        else:
            files, earliest = plan(txn, timeline, policy, retained)
            if not files:
                return CleanResult(None, policy, earliest.time if earliest else None)
            t = txn.new_instant_time(timeline)
            last = timeline.commits().completed().last
            cleaner_plan = CleanerPlan(
                policy, ActionInstant(earliest.time, earliest.action) if earliest else None, last.time if last else "",
                {p: tuple(absolute_path(txn.storage, f) for f in fs) for p, fs in files.items()},
                dict(extra_metadata) if extra_metadata else None)
            instant = txn.request(timeline, Instant(t, CLEAN, State.REQUESTED), cleaner_plan.to_bytes(), token=token)
        heartbeat = txn.beat(instant.time)
    with beating(heartbeat):
        return _execute(txn, timeline, instant, cleaner_plan)


def _execute(txn: Transaction, timeline, instant: Instant, cleaner_plan: CleanerPlan) -> CleanResult:
    start = time.time()
    per_partition = {partition: [relative_path(txn.storage, path, instant=instant.time, what="clean plan file")
                                 for path in paths]
                     for partition, paths in cleaner_plan.files.items()}  # refused before anything changes
    if instant.state == State.REQUESTED:
        instant = txn.inflight(timeline, instant, cleaner_plan.to_bytes())
    txn.deleter()(list(per_partition.values()))  # one engine task per partition
    earliest = cleaner_plan.earliest_instant_to_retain
    metadata = CleanMetadata(
        instant.time, cleaner_plan.policy, earliest.time if earliest else "", cleaner_plan.last_completed_commit,
        {partition: tuple(rel.rsplit("/", 1)[-1] for rel in paths) for partition, paths in per_partition.items()},
        int((time.time() - start) * 1000), cleaner_plan.extra_metadata)
    with txn.lock():
        txn.complete(timeline, instant, metadata.to_bytes())
    log.info("table %s: clean %s deleted %d files", txn.storage.uri, instant.time, metadata.total_files)
    return _result(metadata)


def _stored_result(timeline, instant: Instant, policy: str) -> CleanResult:
    """What the completed clean `instant` did (its metadata, or nothing if no longer kept)."""
    record = timeline.stored_avro_metadata(instant)
    if not record:
        return CleanResult(instant.time, policy, None, already_done=True)
    result = _result(CleanMetadata.from_avro(record, policy), instant.time)
    result.already_done = True
    return result


def _result(metadata: CleanMetadata, instant: str | None = None) -> CleanResult:
    return CleanResult(instant or metadata.instant, metadata.policy, metadata.earliest_commit_to_retain or None,
                       {p: list(names) for p, names in metadata.deleted.items()})


def _names(files: dict[str, list[str]]) -> dict[str, list[str]]:
    return {p: [f.rsplit("/", 1)[-1] for f in fs] for p, fs in files.items()}
