"""Partition paths that nest (ARCHITECTURE.md, decided): a partition path that is a folder
ancestor or descendant of another partition of the table, existing or in the same batch
(`a` next to `a/b`, hive style `part=..` next to `part=../escape`), is refused before the
timeline is touched. Readers that list a partition's folder (hudi-rs) would otherwise see one
partition's files inside another's, or lose them. Both engines check the batch's distinct
partition paths (metadata-sized) against each other before any work (`check_batch_nesting`);
`WriteClient.begin` checks them against the table's under the table lock
(`check_partition_nesting`, whose listing the write's view reuses), then writes the new
partitions' metadata files before the lock is released: a concurrent writer's check under
the lock sees the partitions of pending writes too."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from ..errors import PartitionPathError
from ..storage import FileStatus, Storage
from ..view import PARTITION_METAFILE

_URL_ENCODE_KEY = "hoodie.datasource.write.partitionpath.urlencode"


def _ancestors(path: str) -> list[str]:
    """The proper folder ancestors of a partition path (`a/b/c` -> `a`, `a/b`)."""
    segments = path.split("/")
    return ["/".join(segments[:i]) for i in range(1, len(segments))]


def nesting_pair(paths: Iterable[str], existing: Iterable[str] = ()) -> tuple[str, str] | None:
    """(outer, inner) for the first partition folder that would hold another, where at least one
    of them is in `paths`; None when no two nest. The non-partitioned path '' nests nothing."""
    new = sorted({p for p in paths if p})
    known = set(new) | {p for p in existing if p}
    below: dict[str, str] = {}  # a folder ancestor -> a partition inside it
    for path in sorted(known):
        for folder in _ancestors(path):
            below.setdefault(folder, path)
    for path in new:
        if path in below:
            return path, below[path]
        outer = next((folder for folder in _ancestors(path) if folder in known), None)
        if outer is not None:
            return outer, path
    return None


def partitions_near(storage: Storage, paths: Iterable[str]) -> tuple[set[str], dict[str, list[FileStatus]]]:
    """The table's partitions that could nest with `paths` (those in a folder ancestor of one:
    one listing per distinct ancestor; those below one: found only when a folder sits inside
    it), and the files directly in each of `paths` (one listing each: the view of the write
    takes them instead of listing again)."""
    paths = sorted({p for p in paths if p})
    found: set[str] = set()
    for folder in sorted({a for p in paths for a in _ancestors(p)}):
        if any(f.name.startswith(PARTITION_METAFILE) for f in storage.list(folder)):
            found.add(folder)
    listed: dict[str, list[FileStatus]] = {}
    for path in paths:
        listed[path], folders = storage.list_entries(path)
        for folder in folders:  # a partition holds no folders, unless another partition nests in it
            found.update(posixpath.dirname(f.path) for f in storage.list(folder, recursive=True)
                         if f.name.startswith(PARTITION_METAFILE))
    return found - set(paths), listed


def check_batch_nesting(storage: Storage, paths: Iterable[str]) -> None:
    """Refuse partition paths of one batch (distinct, rendered) that nest with each other,
    naming both; reads no storage (the table's partitions: `check_partition_nesting`)."""
    paths = sorted({p for p in paths if p})
    _refuse(storage, paths, nesting_pair(paths))


def check_partition_nesting(storage: Storage, paths: Iterable[str]) -> dict[str, list[FileStatus]]:
    """Refuse partition paths (distinct, rendered) that nest with each other or with the
    table's partitions, naming both paths. Returns the files directly in each path (the
    listing this check made), for the write's file-system view."""
    paths = sorted({p for p in paths if p})
    _refuse(storage, paths, nesting_pair(paths))
    if not paths:
        return {}
    near, listed = partitions_near(storage, paths)
    _refuse(storage, paths, nesting_pair(paths, near))
    return listed


def _refuse(storage: Storage, paths: list[str], pair: tuple[str, str] | None) -> None:
    if pair is None:
        return
    outer, inner = pair
    mine = set(paths)
    where = {p: "in this batch" if p in mine else "already in the table, or being written" for p in pair}
    raise PartitionPathError(
        f"table {storage.uri}: partition path {outer!r} ({where[outer]}) would be a folder holding partition "
        f"{inner!r} ({where[inner]}); readers that list a partition's folder (hudi-rs) would mix or lose their "
        f"rows. Partition values containing '/' need a table created with {_URL_ENCODE_KEY}=true (each value "
        "stays one folder name)")
