"""The archived timeline (spec §8): `.hoodie/archived/.commits_.archive.<N>_<token>` files of
AVRO_DATA blocks holding `HoodieArchivedMetaEntry` records. Reads ours and Apache Hudi's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..formats.log import DataBlock, read_log_file
from ..storage import Storage
from . import lsm
from .instant import COMMIT_ACTIONS, Instant, State
from .metadata import read_avro

ARCHIVE_NAME = re.compile(r"^\.commits_\.archive\.([0-9]+)(_.*)?$")
MERGE_PLAN = "mergeArchivePlan"


def archive_files(storage: Storage, folder: str) -> list[tuple[int, str]]:
    """(N, path) of the archive files, newest first."""
    found = []
    for st in storage.list(folder):
        m = ARCHIVE_NAME.match(st.name)
        if m:
            found.append((int(m.group(1)), st.path))
    return sorted(found, reverse=True)


def has_archived(storage: Storage, folder: str) -> bool:
    """Whether any instant was archived (either layout)."""
    return bool(archive_files(storage, folder)) or lsm.latest_version(storage, folder) > 0


def _lsm_entry(row: lsm.LsmInstant) -> ArchivedEntry:
    """An LSM history row as an archived entry: its completed state, the completed file's
    metadata decoded as the payload."""
    payload = None
    if row.metadata:
        try:  # (every completed state file of layout 2 is an Avro container)
            payload = read_avro(row.metadata)
        except (ValueError, EOFError, KeyError):
            payload = None
    return ArchivedEntry(Instant(row.time, row.action, State.COMPLETED, row.completion),
                         {"commitTime": row.time, "actionType": row.action, "actionState": "COMPLETED",
                          "payload": payload})


@dataclass
class ArchivedEntry:
    instant: Instant
    record: dict

    @property
    def payload(self) -> dict | None:
        """The one payload field set in the entry, if any."""
        for key, value in self.record.items():
            if key not in ("commitTime", "actionType", "actionState", "version", "stateTransitionTime") \
                    and value is not None:
                return value
        return None


class ArchivedTimeline:
    """Every archived instant state (deduplicated), oldest first; corrupt blocks skipped."""

    def __init__(self, storage: Storage, folder: str = ".hoodie/archived"):
        self.storage = storage
        self.folder = folder
        entries: dict[tuple[str, str, int], ArchivedEntry] = {}
        self.corrupt_blocks = 0
        if lsm.is_history(storage, folder):  # layout 2: the LSM history of completed instants
            self.entries = [_lsm_entry(i) for i in lsm.read_history(storage, folder)]
            return
        for _, path in archive_files(storage, folder):
            for block in read_log_file(storage.read(path)):
                if not isinstance(block, DataBlock):
                    self.corrupt_blocks += 1
                    continue
                try:
                    records = block.avro_records()
                except (ValueError, EOFError, KeyError):
                    self.corrupt_blocks += 1
                    continue
                for rec in records:
                    state = State[(rec.get("actionState") or "COMPLETED").upper()]
                    instant = Instant(rec["commitTime"], rec["actionType"], state)
                    entries.setdefault((instant.time, instant.action, instant.state), ArchivedEntry(instant, rec))
        self.entries = sorted(entries.values(), key=lambda e: (e.instant.time, e.instant.state))

    @property
    def completion_times(self) -> dict[str, str]:
        """Requested -> completion time of archived commits that carry one (layout 2; a
        savepoint shares its commit's requested time, not its completion)."""
        return {e.instant.time: e.instant.completion for e in self.entries
                if e.instant.completion and e.instant.comparable_action in COMMIT_ACTIONS}

    @property
    def instants(self) -> list[Instant]:
        return [e.instant for e in self.entries]

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    @property
    def last_time(self) -> str | None:
        return self.entries[-1].instant.time if self.entries else None
