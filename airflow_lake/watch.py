"""Which instants completed since a baseline: the timeline logic behind InstantSensor.

No Airflow here (it is a candidate for `airflow_lake.core.timeline`). Only the active
timeline is read: a file listing of `.hoodie/` and the commit metadata of candidate
`commit`/`deltacommit` instants, never data files.

Semantics (docs/sensor.md):

- The **watermark** W is the BLOCK bound of the holes policy (`read.py`): the last completed
  commit before the earliest pending write (pending compactions excepted, unless watched),
  or the last completed commit when nothing is pending. Every watched instant at or before W
  was complete when W was taken, so `table.read_incremental(previous, W)` never meets a hole.
- Instants complete out of order, so a baseline is the watermark **plus** the completed
  instants already seen above it (`completed_after_watermark`). "New" means completed now,
  of a watched kind, after the baseline's watermark and not among those seen: never merely
  "a larger instant time".
- No baseline means "from the beginning": every completed watched instant is new.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_lake.core.errors import InvalidOptionError, LakeError, StorageNotFoundError, StorageUnavailableError
from airflow_lake.core.storage import Storage
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.timeline.instant import (
    CLEAN,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    check_instant_time,
)
from airflow_lake.core.values import describe_value

DATA_ACTIONS = (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)
KNOWN_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION, CLEAN, ROLLBACK,
                           SAVEPOINT, RESTORE, INDEXING})
_COMPACT_OPERATIONS = {"COMPACT": COMPACTION, "LOG_COMPACT": LOG_COMPACTION}


def normalize_actions(actions: Iterable[str] | str | None) -> tuple[str, ...] | None:
    """Sorted, validated action names; None stands for data writes (commits, not compactions)."""
    if actions is None:
        return None
    if isinstance(actions, str):
        actions = [a.strip() for a in actions.split(",") if a.strip()]
    out = tuple(sorted({str(a).lower() for a in actions}))
    if not out:
        raise LakeError("actions must name at least one action (or be None for data writes)")
    unknown = [a for a in out if a not in KNOWN_ACTIONS]
    if unknown:
        raise LakeError(f"unknown timeline action {unknown[0]!r}; one of {sorted(KNOWN_ACTIONS)}")
    return out


def actions_key(actions: tuple[str, ...] | None) -> str:
    """A stable name of an actions filter, used in state-store keys."""
    return "data" if actions is None else "+".join(actions)


@dataclass(frozen=True)
class Baseline:
    """What a previous observation saw: its watermark and the completed instants above it."""

    watermark: str | None = None
    completed_after_watermark: frozenset[str] = frozenset()

    @staticmethod
    def parse(value: Any, where: str = "") -> Baseline:
        """From None, an instant time, a previous result (dict) or its JSON text."""
        if value is None or value == "":
            return Baseline()
        if isinstance(value, Baseline):
            return value
        if isinstance(value, str) and value.lstrip().startswith("{"):
            try:
                value = json.loads(value)
            except ValueError as e:
                raise LakeError(f"{where}: baseline {value!r} is neither an instant time nor JSON ({e})") from e
        if isinstance(value, str):
            try:
                return Baseline(check_instant_time(value.strip()))
            except LakeError as e:
                raise LakeError(f"{where}: baseline {e}") from e
        if isinstance(value, dict):
            if "watermark" not in value:
                raise InvalidOptionError(
                    f"{where}: baseline {describe_value(value)} is not an InstantSensor result (it has no "
                    "'watermark'); to start after one instant, give its time (e.g. the upsert's result['instant'])")
            watermark = value.get("watermark")
            if watermark is not None:
                try:
                    check_instant_time(watermark)
                except LakeError as e:
                    raise InvalidOptionError(f"{where}: baseline watermark: {e}") from None
            seen = value.get("completed_after_watermark") or []
            return Baseline(watermark, frozenset(str(s) for s in seen))
        raise LakeError(f"{where}: baseline must be an instant time, a previous result dict or None; "
                        f"got {type(value).__name__}")

    def to_dict(self) -> dict[str, Any]:
        return {"watermark": self.watermark, "completed_after_watermark": sorted(self.completed_after_watermark)}


@dataclass
class Observation:
    """One look at the timeline relative to a baseline."""

    new: list[dict[str, str]]
    watermark: str | None
    completed_after_watermark: list[str]
    previous_watermark: str | None
    pending: list[str] = field(default_factory=list)

    def result(self) -> dict[str, Any]:
        """The sensor's XCom: new instants, the next baseline's watermark and seen set."""
        return {
            "instants": self.new,
            "watermark": self.watermark,
            "previous_watermark": self.previous_watermark,
            "completed_after_watermark": self.completed_after_watermark,
        }

    @property
    def baseline(self) -> Baseline:
        return Baseline(self.watermark, frozenset(self.completed_after_watermark))


class TimelineWatch:
    """Observes one table's active timeline; caches what completed instants are (immutable)."""

    def __init__(self, storage: Storage, actions: Iterable[str] | str | None = None):
        self.storage = storage
        self.actions = normalize_actions(actions)
        self._kinds: dict[str, str] = {}

    def observe(self, baseline: Baseline | None = None) -> Observation:
        baseline = baseline or Baseline()
        timeline = ActiveTimeline(self.storage)
        watched = set(DATA_ACTIONS if self.actions is None else self.actions)
        holes = [i.time for i in timeline.pending() if _blocks(i.action, watched)]
        # the BLOCK bound: commits (compactions included) and watched instants before the first hole
        bounded = {i.time for i in timeline.completed() if i.action in DATA_ACTIONS or i.action in watched}
        # only instants after the baseline's watermark can be new or seen: classify just those
        completed: list[tuple[Instant, str]] = []
        for instant in timeline.completed():
            if baseline.watermark is not None and instant.time <= baseline.watermark:
                continue
            kind = self.kind(timeline, instant)
            if kind in watched:
                completed.append((instant, kind))
        if holes:
            bounded = {t for t in bounded if t < holes[0]}
        watermark = max(bounded, default=None)
        if baseline.watermark is not None and (watermark is None or watermark < baseline.watermark):
            watermark = baseline.watermark
        new = [{"instant": i.time, "action": kind} for i, kind in completed
               if (baseline.watermark is None or i.time > baseline.watermark)
               and i.time not in baseline.completed_after_watermark]
        above = sorted(i.time for i, _ in completed if watermark is None or i.time > watermark)
        return Observation(new, watermark, above, baseline.watermark, holes)

    def kind(self, timeline: ActiveTimeline, instant: Instant) -> str:
        """The logical action of a completed instant: a completed compaction (`T.commit` with
        `compacted: true`) is `compaction`, a completed log compaction is `logcompaction`."""
        if instant.action not in (COMMIT, DELTA_COMMIT):
            return instant.action
        cached = self._kinds.get(instant.time)
        if cached is None:
            cached = instant.action
            states = timeline.state_files(instant.time)
            if any(n.endswith((".compaction.requested", ".compaction.inflight")) for n in states):
                cached = COMPACTION
            elif any(n.endswith((".logcompaction.requested", ".logcompaction.inflight")) for n in states):
                cached = LOG_COMPACTION
            else:
                meta = timeline.commit_metadata(instant)
                if meta.operation_type in _COMPACT_OPERATIONS:
                    cached = _COMPACT_OPERATIONS[meta.operation_type]
                elif meta.compacted:
                    cached = COMPACTION if instant.action == COMMIT else LOG_COMPACTION
            self._kinds[instant.time] = cached
        return cached


# storage errors that will not pass by waiting: credentials, permissions, no bucket
_PERMANENT = re.compile(r"access.?denied|forbidden|\b40[13]\b|invalidaccesskeyid|signaturedoesnotmatch|"
                        r"no.?such.?bucket|unauthori[sz]ed|permission denied")


def is_permanent(error: BaseException) -> bool:
    """Whether a failed timeline scan will fail again however long one waits: access denied,
    a missing bucket, the table gone, a bad argument (every other `LakeError`), a programming
    error. Storage errors that may pass: network, throttling, a 5xx (`StorageUnavailableError`),
    a file replaced while read (`StorageNotFoundError`), a raw `OSError` not saying denied."""
    if isinstance(error, (StorageUnavailableError, StorageNotFoundError)):
        return False  # outlasted the storage layer's own retries, or a file replaced while read
    if isinstance(error, (LakeError, PermissionError)):
        return True
    if isinstance(error, (OSError, TimeoutError, ConnectionError)):
        return _PERMANENT.search(f"{type(error).__name__} {error}".lower()) is not None
    return True


def _blocks(action: str, watched: set[str]) -> bool:
    """Does a pending instant of `action` hold the watermark back? Pending data writes always
    do (as in `read.py`'s BLOCK policy); other actions only when watched."""
    if action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT, LOG_COMPACTION):
        return True
    return action in watched
