"""Instants: parse a timeline file name, render one back. No I/O.

Both timeline layouts: layout 1 (table version 6, `.hoodie/T.action`) and layout 2 (versions 8
and 9, `.hoodie/timeline/T_C.action`: a completed instant's name carries its completion time C;
a pending clustering is a `clustering` instant that completes as a replacecommit)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum

from ..errors import InvalidOptionError


class State(IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
CLEAN = "clean"
ROLLBACK = "rollback"
SAVEPOINT = "savepoint"
RESTORE = "restore"
INDEXING = "indexing"
CLUSTERING = "clustering"

COMMIT_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING})
WRITE_ACTIONS = COMMIT_ACTIONS | {COMPACTION, LOG_COMPACTION}

# Extensions Java's active-timeline scan accepts (spec §2.2), mapped to (action, state).
_EXTENSIONS: dict[str, tuple[str, State]] = {
    ".commit": (COMMIT, State.COMPLETED),
    ".inflight": (COMMIT, State.INFLIGHT),
    ".commit.requested": (COMMIT, State.REQUESTED),
    ".deltacommit": (DELTA_COMMIT, State.COMPLETED),
    ".deltacommit.inflight": (DELTA_COMMIT, State.INFLIGHT),
    ".deltacommit.requested": (DELTA_COMMIT, State.REQUESTED),
    ".savepoint": (SAVEPOINT, State.COMPLETED),
    ".savepoint.inflight": (SAVEPOINT, State.INFLIGHT),
    ".clean": (CLEAN, State.COMPLETED),
    ".clean.requested": (CLEAN, State.REQUESTED),
    ".clean.inflight": (CLEAN, State.INFLIGHT),
    ".compaction.inflight": (COMPACTION, State.INFLIGHT),
    ".compaction.requested": (COMPACTION, State.REQUESTED),
    ".restore.requested": (RESTORE, State.REQUESTED),
    ".restore.inflight": (RESTORE, State.INFLIGHT),
    ".restore": (RESTORE, State.COMPLETED),
    ".logcompaction.inflight": (LOG_COMPACTION, State.INFLIGHT),
    ".logcompaction.requested": (LOG_COMPACTION, State.REQUESTED),
    ".rollback": (ROLLBACK, State.COMPLETED),
    ".rollback.requested": (ROLLBACK, State.REQUESTED),
    ".rollback.inflight": (ROLLBACK, State.INFLIGHT),
    ".replacecommit.requested": (REPLACE_COMMIT, State.REQUESTED),
    ".replacecommit.inflight": (REPLACE_COMMIT, State.INFLIGHT),
    ".replacecommit": (REPLACE_COMMIT, State.COMPLETED),
    ".indexing.requested": (INDEXING, State.REQUESTED),
    ".indexing.inflight": (INDEXING, State.INFLIGHT),
    ".indexing": (INDEXING, State.COMPLETED),
    ".clustering.requested": (CLUSTERING, State.REQUESTED),  # layout 2
    ".clustering.inflight": (CLUSTERING, State.INFLIGHT),
}
_COMPLETED_ACTION = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}
# ASCII digits only (`\d` and `str.isdigit` take other scripts' digits), matched whole (`$`
# would let a trailing newline through): 14 or 17 digits; timeline files of the v6 metadata
# table may add a 3-digit suffix to a data-table instant (spec §1.4)
INSTANT_TIME = re.compile(r"[0-9]{14}(?:[0-9]{3})?")
TIMELINE_TIME = re.compile(r"[0-9]{14}(?:[0-9]{3}){0,2}")
COMPLETION_TIME = re.compile(r"[0-9]{14}(?:[0-9]{3})?")


@dataclass(frozen=True, slots=True, order=True)
class Instant:
    """One state of one action at one instant time, e.g. `20240418173213674.commit`; a
    completed instant of layout 2 also has its `completion` time (not part of its identity)."""

    time: str
    action: str
    state: State
    completion: str | None = field(default=None, compare=False)

    @staticmethod
    def parse(file_name: str) -> Instant | None:
        """The instant a timeline file name stands for (either layout), or None for any other
        file. `T_C.action` is legal for completed instants only (as Java and hudi-rs read it)."""
        time, dot, ext = file_name.partition(".")
        requested, _, completion = time.partition("_")
        if not TIMELINE_TIME.fullmatch(requested) or (completion and not COMPLETION_TIME.fullmatch(completion)):
            return None
        found = _EXTENSIONS.get(dot + ext)
        if found is None or (completion and found[1] != State.COMPLETED):
            return None
        return Instant(requested, found[0], found[1], completion or None)

    @property
    def file_name(self) -> str:
        action, state = self.action, self.state
        if state == State.COMPLETED:
            done = f"{self.time}_{self.completion}" if self.completion else self.time
            return f"{done}.{_COMPLETED_ACTION.get(action, action)}"
        if action == COMMIT and state == State.INFLIGHT:
            return f"{self.time}.inflight"
        return f"{self.time}.{action}.{state.name.lower()}"

    @property
    def comparable_action(self) -> str:
        return _COMPLETED_ACTION.get(self.action, self.action)

    @property
    def is_completed(self) -> bool:
        return self.state == State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state != State.COMPLETED

    def to(self, state: State) -> Instant:
        return Instant(self.time, self.action, state)

    def __str__(self) -> str:
        return f"{self.time}.{self.action}.{self.state.name}"


def check_instant_time(time: str, table: str | None = None) -> str:
    """`time` when it is an instant time: exactly 14 or 17 ASCII digits (no sign, space, newline
    or other script's digits); else InvalidOptionError naming the table and the value."""
    if not isinstance(time, str) or not INSTANT_TIME.fullmatch(time):
        where = f"table {table}: " if table else ""
        raise InvalidOptionError(f"{where}{time!r} is not an instant time (14 or 17 ASCII digits, "
                                 "yyyyMMddHHmmss[SSS])")
    return time
