"""The BUCKET index on Spark: each row's bucket is computed in executors by the core's bucket
function; a partition's bucket is written to its existing file group, else to a new group
named for the bucket (as the local engine's `plan_bucket` does); deletes of keys in a bucket
with no group yet change nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_lake.core.index.bucket import bucket_ids, bucket_of_file_id, new_bucket_file_id
from airflow_lake.core.model import FileGroup
from airflow_lake.core.view import FileSystemView
from airflow_lake.core.write.logs import SliceRef
from airflow_lake.core.write.plan import slice_ref

from .frames import GroupPlan, group_ids


@dataclass(frozen=True)
class BucketSpec:
    num_buckets: int
    hash_fields: tuple[str, ...]


@dataclass(frozen=True)
class BucketRoute:
    groups: dict[str, int]  # "partition\0bucket" -> group id
    new: frozenset[int]  # groups this write creates: deletes routed there are dropped


@dataclass
class BucketPlan:
    groups: dict[int, GroupPlan] = field(default_factory=dict)
    route: dict[str, int] = field(default_factory=dict)
    new: set[int] = field(default_factory=set)
    inserts: dict[str, int] = field(default_factory=dict)  # partition -> rows into new base files
    updates: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)  # workload: (instant, rows)


def plan_buckets(view: FileSystemView, counts: list[tuple[str, int, int, int]], *, instant: str, is_mor: bool,
                 overwrite: bool) -> BucketPlan:
    """The file group of every (partition, bucket) the batch writes, from its row counts
    (partition, bucket, rows, rows that are not deletes)."""
    plan = BucketPlan()
    existing: dict[str, dict[int, FileGroup]] = {}
    for partition, bucket, n, live in sorted(counts):
        if partition not in existing:
            existing[partition] = {}
            for g in [] if overwrite else view.file_groups(partition):
                b = bucket_of_file_id(g.file_id)
                if b is not None:
                    existing[partition].setdefault(b, g)
        gid = len(plan.groups)
        group = existing[partition].get(bucket)
        if group is not None:
            if is_mor:
                ref = slice_ref(view, group)
                plan.groups[gid] = GroupPlan("log", partition, group.file_id, slice=ref)
                plan.updates[(partition, group.file_id)] = (ref.base_instant, n)
            else:
                base, _ = view.read_slice(group)
                plan.groups[gid] = GroupPlan("merge", partition, group.file_id, base=base, whole=True)
                plan.updates[(partition, group.file_id)] = (base.instant, n)
        elif live:
            file_id = new_bucket_file_id(bucket)
            if is_mor and not overwrite:  # a log-only group, as the local engine makes
                ref = SliceRef(partition, file_id, instant, None, [], 1)
                plan.groups[gid] = GroupPlan("log", partition, file_id, slice=ref, inserts=live)
                plan.updates[(partition, file_id)] = (instant, live)
            else:
                plan.groups[gid] = GroupPlan("insert", partition, file_id)
                plan.inserts[partition] = plan.inserts.get(partition, 0) + live
            plan.new.add(gid)
        else:
            continue
        plan.route[f"{partition}\0{bucket}"] = gid
    return plan


# -- executor functions (module level: they travel as values; Arrow UDFs on a few columns) -------
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
