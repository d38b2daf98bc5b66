"""The placement rules of inserts: small file groups first, then new file groups sized by
`hoodie.parquet.max.file.size` (`routing.plan_key_groups` applies them to counts).

Inserts first fill small file groups (`hoodie.parquet.small.file.limit`): on COW any group
whose base file is small; on MOR only a group whose slice has no log files and no pending
compaction (its base file is rewritten), because the bloom and simple indexes see base files
only. The BUCKET index routes every record to its bucket's group instead (`routing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model import BaseFile, FileGroup, new_file_id
from ..read import SliceRead
from ..view import FileSystemView
from .logs import SliceRef


@dataclass
class Task:
    kind: str  # "insert" (new base file), "merge" (rewrite base file), "log" (append a log file)
    partition: str
    file_id: str
    rows: np.ndarray  # records matched by key (updates, deletes), or the new records of "insert"
    base: BaseFile | None = None
    insert_rows: np.ndarray | None = None  # new records appended to a rewritten base file
    slice: SliceRef | None = None
    inserts: int = 0
    stored: SliceRead | None = None  # the group's records its task checks deletes against


@dataclass(frozen=True)
class Sizing:
    max_file_size: int
    small_file_limit: int
    record_size: int

    @property
    def rows_per_file(self) -> int:
        return max(1, self.max_file_size // max(1, self.record_size))




def slice_ref(view: FileSystemView, group: FileGroup) -> SliceRef:
    """The slice new log files of a group extend (a pending compaction starts a new one)."""
    base_instant = group.slices[-1].base_instant
    pending = view.pending_compaction_of(group.partition, group.file_id)
    if pending is not None and pending > base_instant:
        base_instant = pending
    base, logs = view.read_slice(group)
    same = [lf for sl in group.slices if sl.base_instant == base_instant for lf in sl.log_files]
    version = max((lf.version for lf in same), default=0) + 1
    return SliceRef(group.partition, group.file_id, base_instant,
                    base if base is not None and base.instant == base_instant else None, same, version)


def new_files(partition: str, rows: np.ndarray, sizing: Sizing) -> list[Task]:
    if not len(rows):
        return []
    chunks = np.array_split(rows, math.ceil(len(rows) / sizing.rows_per_file))
    return [Task("insert", partition, new_file_id(), c) for c in chunks if len(c)]


def fill_small_files(view: FileSystemView, partition: str, rows: np.ndarray, sizing: Sizing, *,
                     is_mor: bool, busy: set[str]) -> tuple[list[Task], np.ndarray]:
    """Assign inserts to small groups of the partition; returns the tasks and the rest."""
    tasks = []
    if sizing.small_file_limit <= 0:
        return tasks, rows
    candidates = []
    for g in view.file_groups(partition):
        if g.file_id in busy:
            continue
        base, logs = view.read_slice(g)
        if base is None or base.size >= sizing.small_file_limit:
            continue
        if is_mor and (logs or view.pending_compaction_of(partition, g.file_id)):
            continue
        candidates.append(base)
    for base in sorted(candidates, key=lambda b: (b.size, b.file_id)):
        if not len(rows):
            break
        room = max(0, (sizing.max_file_size - base.size) // max(1, sizing.record_size))
        if room == 0:
            continue
        tasks.append(Task("merge", partition, base.file_id, rows[:0], base=base, insert_rows=rows[:room]))
        rows = rows[room:]
    return tasks, rows


