"""The archived timeline (spec §8): `.hoodie/archived/.commits_.archive.<N>_<token>` files of
AVRO_DATA blocks holding `HoodieArchivedMetaEntry` records. Reads ours and Apache Hudi's."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..formats.log import DataBlock, read_log_file
from ..storage import Storage
from .instant import Instant, State

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
    def instants(self) -> list[Instant]:
        return [e.instant for e in self.entries]

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.is_completed]

    @property
    def last_time(self) -> str | None:
        return self.entries[-1].instant.time if self.entries else None
