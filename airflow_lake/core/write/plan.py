"""Assign a tagged batch to per-file-group tasks: merges (COW), log appends (MOR), new files.

Inserts first fill small file groups (`hoodie.parquet.small.file.limit`): on COW any group
whose base file is small; on MOR only a group whose slice has no log files and no pending
compaction (its base file is rewritten), because the bloom and simple indexes see base files
only. The BUCKET index routes every record to its bucket's group instead (log-only groups on MOR).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..index.bucket import bucket_ids, bucket_of_file_id, new_bucket_file_id
from ..model import BaseFile, FileGroup, new_file_id
from ..read import SliceRead
from ..view import FileSystemView
from .logs import SliceRef
from .prepare import Batch


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


def group_by(codes: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """rows grouped by codes[rows], each group in row order."""
    if len(rows) == 0:
        return {}
    sel = codes[rows]
    order = np.argsort(sel, kind="stable")
    uniq, starts = np.unique(sel[order], return_index=True)
    bounds = list(starts[1:]) + [len(order)]
    return {int(u): rows[order[s:e]] for u, s, e in zip(uniq, starts, bounds, strict=True)}


def rows_by_partition(partitions: pa.Array, rows: np.ndarray) -> dict[str, np.ndarray]:
    encoded = partitions.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    names = encoded.dictionary.to_pylist()
    return {names[c]: r for c, r in group_by(codes, rows).items()}


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


def plan_bucket(view: FileSystemView, batch: Batch, num_buckets: int, hash_fields: list[str], *,
                is_mor: bool, instant: str, overwrite: bool = False) -> list[Task]:
    """Every record goes to its bucket's file group in its partition (with `overwrite`, to new
    groups that replace the existing ones)."""
    buckets = bucket_ids(batch.keys, num_buckets, hash_fields)
    tasks = []
    for partition, rows in rows_by_partition(batch.partitions, np.arange(len(batch))).items():
        existing: dict[int, FileGroup] = {}
        for g in [] if overwrite else view.file_groups(partition):
            b = bucket_of_file_id(g.file_id)
            if b is not None:
                existing.setdefault(b, g)
        for bucket, brows in group_by(buckets, rows).items():
            group = existing.get(bucket)
            if group is not None:
                if is_mor:
                    tasks.append(Task("log", partition, group.file_id, brows, slice=slice_ref(view, group)))
                else:
                    base, _ = view.read_slice(group)
                    tasks.append(Task("merge", partition, group.file_id, brows, base=base))
                continue
            brows = brows[~batch.is_delete[brows]]
            if not len(brows):
                continue
            file_id = new_bucket_file_id(bucket)
            if is_mor:
                ref = SliceRef(partition, file_id, instant, None, [], 1)
                tasks.append(Task("log", partition, file_id, brows, slice=ref, inserts=len(brows)))
            else:
                tasks.append(Task("insert", partition, file_id, brows))
    return tasks
