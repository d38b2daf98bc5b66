"""Roll back failed writes (spec §4.4): plan, delete the files markers name, record, forget.

A pending write is failed when its heartbeat has expired (or never existed). Rolling back
creates `R.rollback.requested` (Avro plan), `R.rollback.inflight`, deletes the files,
writes `R.rollback` (Avro metadata), then deletes the instant's inflight and requested files.
A rollback that died half-way is finished from its plan by the next writer.
"""

from __future__ import annotations

import logging
import time

from ..model import BaseFile, LogFile
from ..storage import Storage
from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMMIT_ACTIONS, ROLLBACK, Instant, State
from ..timeline.metadata import read_avro, rollback_metadata_bytes, rollback_plan_bytes
from ..view import list_partition_files
from .heartbeat import FOLDER as HEARTBEAT_FOLDER
from .heartbeat import is_expired
from .markers import APPEND, delete_markers, read_markers

log = logging.getLogger(__name__)


def _absolute(storage: Storage, path: str) -> str:
    return storage.full(path) if storage.is_local else f"{storage.uri.split('://')[0]}://{storage.full(path)}"


def _relative(storage: Storage, path: str) -> str:
    path = path.split("://", 1)[-1]
    root = storage.root.split("://", 1)[-1]
    return path[len(root) :].lstrip("/") if path.startswith(root) else path


def files_of(storage: Storage, instant: str) -> list[str]:
    """Data files a pending instant wrote: from its markers, else by listing base files.

    A CREATE or MERGE marker names a base file; an APPEND marker names a made-up base file
    `<fileId>_<token>_<baseInstant>` whose log files with that token are the ones written
    (we never append to an existing log file).
    """
    markers = read_markers(storage, instant)
    found: list[str] = []
    appends: dict[str, list[BaseFile]] = {}
    for path, io_type in markers:
        name = path.rsplit("/", 1)[-1]
        partition = path[: -len(name) - 1] if "/" in path else ""
        base = BaseFile.parse(partition, name)
        if base is None:
            continue
        if io_type == APPEND:
            appends.setdefault(partition, []).append(base)
        else:
            found.append(path)
    for partition, bases in appends.items():
        wanted = {(b.file_id, b.instant, b.write_token) for b in bases}
        for st in storage.list(partition):
            log = LogFile.parse(partition, st.name)
            if log is not None and (log.file_id, log.base_instant, log.write_token) in wanted:
                found.append(log.path)
    if found or markers:
        return found
    for partition, statuses in list_partition_files(storage).items():
        for st in statuses:
            base = BaseFile.parse(partition, st.name)
            if base is not None and base.instant == instant:
                found.append(base.path)
    return found


def rollback_pending(storage: Storage, timeline: ActiveTimeline, target: Instant, rollback_time: str) -> None:
    """Roll back one pending write `target` at a new instant `rollback_time`."""
    start = time.time()
    files = files_of(storage, target.time)
    requests: dict[str, list[str]] = {}
    for path in files:
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        requests.setdefault(partition, []).append(_absolute(storage, path))
    plan = [{"partitionPath": p, "fileId": "", "latestBaseInstant": None, "filesToBeDeleted": fs,
             "logBlocksToBeDeleted": None} for p, fs in sorted(requests.items())]
    rb = Instant(rollback_time, ROLLBACK, State.REQUESTED)
    timeline.create(rb, rollback_plan_bytes(target.time, target.action, plan))
    _execute(storage, timeline, rb, target.time, target.action, plan, start)


def finish_pending_rollbacks(storage: Storage, timeline: ActiveTimeline) -> None:
    """Complete rollbacks that a crash left requested or inflight (idempotent)."""
    for rb in timeline.actions(ROLLBACK).pending():
        plan = read_avro(timeline.read_details(rb.to(State.REQUESTED)))
        if plan is None:
            continue
        target = plan["instantToRollback"]
        _execute(storage, timeline, rb, target["commitTime"], target["action"], plan["RollbackRequests"] or [],
                 time.time())


def _execute(storage: Storage, timeline: ActiveTimeline, rb: Instant, target_time: str, target_action: str,
             plan: list[dict], start: float) -> None:
    if rb.state == State.REQUESTED:
        rb = timeline.transition(rb, State.INFLIGHT)
    partition_meta = {}
    total = 0
    for req in plan:
        deleted = []
        for path in req["filesToBeDeleted"]:
            storage.delete(_relative(storage, path))
            deleted.append(path)
        total += len(deleted)
        partition_meta[req["partitionPath"]] = {
            "partitionPath": req["partitionPath"], "successDeleteFiles": deleted, "failedDeleteFiles": [],
            "rollbackLogFiles": {}, "logFilesFromFailedCommit": {},
        }
    metadata = {
        "startRollbackTime": rb.time,
        "timeTakenInMillis": int((time.time() - start) * 1000),
        "totalFilesDeleted": total,
        "commitsRollback": [target_time],
        "partitionMetadata": partition_meta,
        "version": 1,
        "instantsRollback": [{"commitTime": target_time, "action": target_action}],
    }
    timeline.transition(rb, State.COMPLETED, rollback_metadata_bytes(metadata))
    timeline.delete_instant_files(target_time)
    delete_markers(storage, target_time)
    storage.delete(f"{HEARTBEAT_FOLDER}/{target_time}")
    log.info("table %s: rolled back %s %s at %s (%d files)", storage.uri, target_action, target_time, rb.time, total)


def failed_writes(storage: Storage, timeline: ActiveTimeline, interval_ms: int, misses: int) -> list[Instant]:
    """Pending commit/deltacommit/replacecommit instants whose heartbeat has expired."""
    return [
        i for i in timeline.pending()
        if i.action in COMMIT_ACTIONS and is_expired(storage, i.time, interval_ms, misses)
    ]


