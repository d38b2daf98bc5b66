"""The routing stage of a frame write: which tagged rows are written (partition moves, stale
and unknown deletes, duplicates an insert drops), the plan of file groups from row counts
(small files first, then new groups; buckets), and each row's target group.

The rules are written once: the row rules as boolean expressions over an engine's column
algebra (`Columns`: Spark columns, or Arrow compute expressions), the plans from counts (metadata
only), the targets as functions of a few Arrow columns that an engine runs as a scalar UDF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import DEFAULT_PAYLOAD
from ..index import update_partition_path_option
from ..index.bucket import bucket_ids, bucket_of_file_id, new_bucket_file_id
from ..model import FileGroup
from ..ordering import ordering_column
from ..view import FileSystemView
from .execute import DEL, LOC_F, PART, GroupPlan
from .logs import SliceRef
from .plan import Sizing, fill_small_files, new_files, slice_ref

# work columns of the routing stage (none reaches a file)
LOC_P = "_al_loc_partition"  # the partition the index found the key in (null: a new key; LOC_F its group)
STORED = "_al_stored_ordering"  # the stored record's ordering value
BUCKET = "_al_bucket"
SPREAD = "_al_insert_spread"  # an insert's spread bucket of its partition's inserts (an engine's choice)


class Columns(Protocol):
    """An engine's column algebra: expressions support `&`, `|`, `~`, `<`, `!=`."""

    def col(self, name: str) -> Any: ...
    def lit(self, value: Any) -> Any: ...
    def valid(self, expr: Any) -> Any: ...
    def false_if_null(self, expr: Any) -> Any: ...
    def isin(self, expr: Any, values: list) -> Any: ...


@dataclass(frozen=True)
class LocatedRule:
    """What happens to tagged rows: `keep` (the rest are dropped), and `moved`: rows of keys
    stored in another partition that move there (a delete at the old location, an insert at
    the new); None when no row moves."""

    keep: Any
    moved: Any | None


def located_rule(x: Columns, table, operation: str, is_global: bool, index_type: str) -> LocatedRule:
    """The rule for tagged rows (LOC_P, LOC_F, STORED): an insert that drops duplicates keeps
    new keys only; a delete of an unknown key does nothing, nor does a `_hoodie_is_deleted` row
    older than the stored record; under a global index with
    `update.partition.path` a key arriving in another partition moves unless the stored
    record wins on ordering (else it is updated in place, in its old partition)."""
    cfg = table.config
    located, delete = x.valid(x.col(LOC_F)), x.col(DEL)
    ordering = ordering_column(cfg.ordering_fields) if operation != "delete" else None
    if ordering is not None and cfg.payload_class == DEFAULT_PAYLOAD:
        # (a null is the smallest: an incoming null is older than a stored value, `ordering.stored_wins`)
        older = x.false_if_null(x.col(ordering) < x.col(STORED)) | (~x.valid(x.col(ordering)) & x.valid(x.col(STORED)))
    else:
        older = x.lit(False)
    if operation == "insert":  # drop duplicates: keys already stored are not inserted again
        return LocatedRule(~located & ~delete, None)
    # deleting an unknown key does nothing, nor does a delete older than the stored record (COW's
    # merge would keep the stored one; MOR: Java's delete blocks would not): every delete routed
    # deletes, which the record index maintained relies on
    keep = (located | ~delete) & ~(delete & located & older)
    if not is_global or not table.option(update_partition_path_option(index_type)):
        return LocatedRule(keep, None)
    return LocatedRule(keep, located & (x.col(LOC_P) != x.col(PART)) & ~delete & ~older)


# -- the plan of a key-lookup (or no-index) write, from counts ----------------------------------
@dataclass(frozen=True)
class RouteSpec:
    """Each row's target group: located rows their group's, inserts the group whose planned
    slots hold theirs (a slot: its spread bucket's first slot + its rank there, by SEQ)."""

    located: dict[str, int]  # "partition\0file_id" -> group id
    bins: dict[str, tuple[np.ndarray, np.ndarray]]  # partition -> (cumulative rows, group ids)
    starts: dict[str, int]  # "partition\0spread bucket" -> the first insert slot of the bucket's rows


@dataclass
class GroupsPlan:
    """The file groups one write touches, how rows find them, and the workload figures."""

    groups: dict[int, GroupPlan]
    inserts: dict[str, int]  # partition -> rows into new or small files
    updates: dict[tuple[str, str], tuple[str, int]]  # (partition, file id) -> (base instant, rows)
    route: Any  # RouteSpec or BucketRoute


def plan_key_groups(view: FileSystemView, counts: list[tuple], sizing: Sizing, *, is_mor: bool,
                    overwrite: bool) -> GroupsPlan:
    """The groups of a key-lookup write from its row counts `(LOC_P, LOC_F, new partition,
    spread bucket, rows)`: located groups (MOR a log, COW a merge), then each partition's
    inserts in slot order (by spread bucket, then rank) into small groups (`fill_small_files`),
    then new groups (`new_files`). With `overwrite` no existing group takes inserts."""
    located_counts = {(p, f): n for p, f, _, _, n in counts if f is not None}
    insert_counts: dict[str, int] = {}
    starts: dict[str, int] = {}
    for _, _, p, b, n in sorted((c for c in counts if c[1] is None), key=lambda c: (c[2], c[3])):
        starts[f"{p}\0{b}"] = insert_counts.get(p, 0)
        insert_counts[p] = insert_counts.get(p, 0) + n
    groups: dict[int, GroupPlan] = {}
    located: dict[str, int] = {}
    for (p, f) in sorted(located_counts):
        group = view.groups[p][f]
        gid = len(groups)
        if is_mor:
            groups[gid] = GroupPlan("log", p, f, slice=slice_ref(view, group))
        else:
            base = next(s.base_file for s in reversed(group.slices) if s.base_file is not None)
            groups[gid] = GroupPlan("merge", p, f, base=base)
        located[f"{p}\0{f}"] = gid
    bins: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    busy = {f for (_, f) in located_counts}
    for p, n in sorted(insert_counts.items()):
        slots = np.arange(n)
        filled, rest = ([], slots) if overwrite or p not in view.groups else fill_small_files(
            view, p, slots, sizing, is_mor=is_mor, busy=busy if is_mor else set())
        sizes, ids = [], []
        for t in filled:
            gid = located.get(f"{p}\0{t.file_id}")
            if gid is None:  # a small group only receiving inserts: its base file is rewritten
                gid = len(groups)
                groups[gid] = GroupPlan("merge", p, t.file_id, base=t.base)
            sizes.append(len(t.insert_rows))
            ids.append(gid)
        for t in new_files(p, rest, sizing):
            gid = len(groups)
            groups[gid] = GroupPlan("insert", p, t.file_id)
            sizes.append(len(t.rows))
            ids.append(gid)
        bins[p] = (np.cumsum(sizes), np.asarray(ids, dtype=np.int64))
    updates = {(g.partition, g.file_id): ((g.base.instant if g.base else g.slice.base_instant),
                                          located_counts[(g.partition, g.file_id)])
               for g in groups.values() if (g.partition, g.file_id) in located_counts}
    return GroupsPlan(groups, dict(sorted(insert_counts.items())), updates, RouteSpec(located, bins, starts))


def route_targets(spec: RouteSpec, part: pa.Array, spread: pa.Array, seq: pa.Array, loc_p: pa.Array,
                  loc_f: pa.Array) -> pa.Array:
    """The target file group of every row (`RouteSpec`), so every group takes exactly the rows
    the plan gives it. The rows of a spread bucket come together (all of them, or none)."""
    target = group_ids(pc.binary_join_element_wise(loc_p, loc_f, "\0"), spec.located)  # -1: not located
    located = pc.is_valid(loc_f).to_numpy(zero_copy_only=False)
    inserts = np.nonzero(~located)[0]
    if len(inserts):
        take = pa.array(inserts)
        parts = part.take(take)
        names = pc.binary_join_element_wise(parts, pc.cast(spread.take(take), pa.string()), "\0")
        firsts = np.asarray(list(spec.starts.values()), dtype=np.int64)
        position = pc.index_in(names, value_set=pa.array(list(spec.starts), pa.string()))
        slots = firsts[position.to_numpy(zero_copy_only=False).astype(np.int64)] + _ranks(names, seq.take(take))
        encoded = parts.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        for code, p in enumerate(encoded.dictionary.to_pylist()):  # (one pass per partition)
            cum, ids = spec.bins[p]
            sel = codes == code
            target[inserts[sel]] = ids[np.minimum(np.searchsorted(cum, slots[sel], side="right"), len(ids) - 1)]
    return pa.array(target)


def _ranks(buckets: pa.Array, seq: pa.Array) -> np.ndarray:
    """Each row's place among the rows of its spread bucket (`buckets`: names) by `seq`, from 0."""
    order = pc.sort_indices(pa.table({"b": buckets, "s": seq}),
                            sort_keys=[("b", "ascending"), ("s", "ascending")]).to_numpy()
    sorted_buckets = buckets.take(pa.array(order))
    starts = np.ones(len(order), dtype=bool)
    starts[1:] = pc.not_equal(sorted_buckets[1:], sorted_buckets[:-1]).to_numpy(zero_copy_only=False)
    positions = np.arange(len(order))
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = positions - np.maximum.accumulate(np.where(starts, positions, 0))
    return ranks


def group_ids(names: pa.Array, groups: dict[str, int]) -> np.ndarray:
    """The group id of each name (`groups`: name -> id); -1 where the name is null or unknown."""
    if not groups:
        return np.full(len(names), -1, dtype=np.int64)
    ids = np.append(np.asarray(list(groups.values()), dtype=np.int64), -1)
    pos = pc.index_in(names, value_set=pa.array(list(groups), pa.string())).fill_null(-1)
    return ids[pos.to_numpy(zero_copy_only=False).astype(np.int64)]


# -- the BUCKET index -------------------------------------------------------------------------------
@dataclass(frozen=True)
class BucketSpec:
    num_buckets: int
    hash_fields: tuple[str, ...]


@dataclass(frozen=True)
class BucketRoute:
    groups: dict[str, int]  # "partition\0bucket" -> group id
    new: frozenset[int]  # groups this write creates: deletes routed there are dropped


def plan_bucket_groups(view: FileSystemView, counts: list[tuple[str, int, int, int]], *, instant: str,
                       is_mor: bool, overwrite: bool, log_only_groups: bool = True) -> GroupsPlan:
    """The file group of every (partition, bucket) the batch writes, from its row counts
    (partition, bucket, rows, rows that are not deletes): the bucket's existing group (MOR a
    log, COW a merge of the whole file), else a new group named for the bucket (MOR a log-only
    group, unless not `log_only_groups`: Hudi 1.x tables get a base file, which hudi-rs needs
    to read a group listed by the metadata table, v8 spec §2.7); a bucket with no group and
    only deletes is not written."""
    groups: dict[int, GroupPlan] = {}
    route: dict[str, int] = {}
    new: set[int] = set()
    inserts: dict[str, int] = {}
    updates: dict[tuple[str, str], tuple[str, int]] = {}
    existing: dict[str, dict[int, FileGroup]] = {}
    for partition, bucket, n, live in sorted(counts):
        if partition not in existing:
            existing[partition] = {}
            for g in [] if overwrite else view.file_groups(partition):
                b = bucket_of_file_id(g.file_id)
                if b is not None:
                    existing[partition].setdefault(b, g)
        gid = len(groups)
        group = existing[partition].get(bucket)
        if group is not None:
            if is_mor:
                ref = slice_ref(view, group)
                groups[gid] = GroupPlan("log", partition, group.file_id, slice=ref)
                updates[(partition, group.file_id)] = (ref.base_instant, n)
            else:
                base, _ = view.read_slice(group)
                groups[gid] = GroupPlan("merge", partition, group.file_id, base=base, whole=True)
                updates[(partition, group.file_id)] = (base.instant, n)
        elif live:
            file_id = new_bucket_file_id(bucket)
            if is_mor and not overwrite and log_only_groups:  # a log-only group
                ref = SliceRef(partition, file_id, instant, None, [], 1)
                groups[gid] = GroupPlan("log", partition, file_id, slice=ref, inserts=live)
                updates[(partition, file_id)] = (instant, live)
            else:
                groups[gid] = GroupPlan("insert", partition, file_id)
                inserts[partition] = inserts.get(partition, 0) + live
            new.add(gid)
        else:
            continue
        route[f"{partition}\0{bucket}"] = gid
    return GroupsPlan(groups, inserts, updates, BucketRoute(route, frozenset(new)))


def row_buckets(spec: BucketSpec, keys: pa.Array) -> pa.Array:
    """The bucket of every row, from its record key (the core's `bucket_ids`)."""
    return pa.array(bucket_ids(keys, spec.num_buckets, list(spec.hash_fields)), pa.int64())


def bucket_targets(spec: BucketRoute, part: pa.Array, bucket: pa.Array, delete: pa.Array) -> pa.Array:
    """The target group of every row: its (partition, bucket)'s; -1 for a delete in a new group."""
    target = group_ids(pc.binary_join_element_wise(part, pc.cast(bucket, pa.string()), "\0"), spec.groups)
    new = np.asarray(sorted(spec.new), dtype=np.int64)
    drop = np.isin(target, new) & delete.to_numpy(zero_copy_only=False).astype(bool)
    target[drop] = -1
    return pa.array(target, pa.int64())


@dataclass
class Routing:
    """Where the rows go: the plan, the rows with their TARGET group, and the keys this write
    inserts (PART, KEY: for the concurrent-insert check); `routes`: the routed key and work
    columns (what index updates read: the rows themselves where the engine routes whole rows)."""

    plan: GroupsPlan
    routed: Any
    new_keys: Any
    cached: list = field(default_factory=list)
    inserted_by_stats: bool = False  # the keys inserted are known exactly only from the groups' stats
    routes: Any = None
