"""The write client: one `write()` per commit, on COPY_ON_WRITE and MERGE_ON_READ tables.

Flow: prepare the batch (all validation, nothing touched) -> under the lock, repair the
timeline and create the requested instant -> tag with the index -> plan per-file-group tasks
-> inflight workload -> the rows routed to their file group (a `TARGET` column) and each
group written by `execute.execute_group` through the engine's `write_groups` (a base file or
a log file, markers first; the keys it inserted in its stat) -> under the lock, conflict
checks and the completed instant -> markers and heartbeat removed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import DEFAULT_PAYLOAD, TableOptions, WriteOptions
from ..engine import Engine, LocalEngine
from ..errors import UnsupportedTableVersionError, WriteConflictError
from ..formats.parquet import BloomSettings
from ..index import Tags, check_index_type, tagger
from ..index.live import LiveKeys
from ..index.simple import read_keys
from ..merge import KEY
from ..model import BaseFile, WriteStat
from ..read import SliceRead, group_read
from ..schema import from_avro, promote
from ..timeline import tokens
from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMMIT, COMMIT_ACTIONS, COMPACTION, DELTA_COMMIT, REPLACE_COMMIT, Instant, State
from ..timeline.metadata import CommitMetadata, requested_replace_bytes, workload_metadata
from ..txn.conflicts import ConflictCheck, KeyClash
from ..txn.heartbeat import Heartbeat, beating
from ..view import PARTITION_METAFILE, FileSystemView, list_partition_files
from ..vocabulary import LOOKUP_OPERATIONS, OPERATIONS, OVERWRITE_OPERATIONS
from .execute import TARGET, ExecSpec, GroupPlan, execute_group, routed_rows
from .files import WriteContext
from .partitions import check_batch_nesting, check_partition_nesting
from .plan import Sizing, Task, fill_small_files, group_by, new_files, plan_bucket, rows_by_partition, slice_ref
from .prepare import Batch, conform_batch, prepare, to_arrow

log = logging.getLogger(__name__)

OPERATION_TYPES = {
    "insert": "INSERT", "upsert": "UPSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE",
    "insert_overwrite": "INSERT_OVERWRITE", "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
}
TOKEN_KEY = tokens.TOKEN_KEY


@dataclass
class WriteResult:
    """What one write did. `instant` is the commit's instant time."""

    instant: str
    operation: str
    num_inserts: int = 0
    num_updates: int = 0
    num_deletes: int = 0
    num_writes: int = 0
    files: list[str] = field(default_factory=list)
    replaced_file_groups: int = 0
    # how the index found stored keys, where the engine reports it (the Spark write: `file_groups`
    # the index could look in, `in_key_range` of incoming keys, `keys_read`: groups whose keys
    # were read after their bloom filter claimed some)
    index_stats: dict[str, int] = field(default_factory=dict)
    already_done: bool = False  # an earlier attempt with this run token committed it

    @property
    def partitions(self) -> list[str]:
        return sorted({f.rsplit("/", 1)[0] if "/" in f else "" for f in self.files})


class WriteClient:
    """Writes one batch to a table as one commit."""

    def __init__(self, table, engine: Engine):
        self.table = table
        self.storage = table.storage
        self.engine = engine
        self.txn = table.transaction()  # lock, instants, heartbeat, commit and abort of this write
        self._reader = None
        self.listed_partitions: dict[str, list] = {}  # (begin's listing: `partition_files`)

    def opt(self, option):
        return self.table.option(option)

    def reader(self, view: FileSystemView):
        """One Reader per write (merged slices for key lookups and ordering checks), on the
        write's timeline (no listing of its own)."""
        if self._reader is None:
            from ..read import Reader

            self._reader = Reader(self.table, self.engine, view.timeline)
        return self._reader

    # -- entry point -----------------------------------------------------------------------
    def write(self, data, operation: str, extra_metadata: dict[str, str] | None) -> WriteResult:
        table = self.table
        cfg = table.config
        where = f"table {self.storage.uri}"
        operation = OPERATIONS.parse(operation, where)
        if cfg.version != 6 or cfg.get(TableOptions.TIMELINE_LAYOUT) != 1:
            raise UnsupportedTableVersionError(
                f"{where}: table version {cfg.version} (timeline layout {cfg.get(TableOptions.TIMELINE_LAYOUT)}) "
                "cannot be written; airflow-lake writes table version 6, layout 1")
        table.check_write_support()  # key generator, payload and merge options we implement
        arrow = to_arrow(data, where)
        is_global = self.index_type().startswith("GLOBAL")
        combine = operation in LOOKUP_OPERATIONS or self.opt(WriteOptions.COMBINE_BEFORE_INSERT)
        keyed = prepare(arrow, operation, keygen=table.keygen, precombine=cfg.precombine_field, where=where,
                        combine=combine, is_global=is_global)
        # the folders this write creates may not nest with each other (now, before any work) nor
        # with the table's (in `begin`, under the lock, with the partitions concurrent writes claimed)
        parts = [] if operation == "delete" else pc.unique(keyed.partitions).to_pylist()
        check_batch_nesting(self.storage, parts)
        extra = dict(extra_metadata or {})
        conformed: list[Batch] = []

        def check_schema(timeline: ActiveTimeline) -> None:  # under the lock, before the instant exists
            conformed.append(conform_batch(
                keyed, operation, precombine=cfg.precombine_field, table_avro=table.schema_avro(timeline),
                table_name=cfg.name, where=where, local_timestamps=self.opt(WriteOptions.TIMESTAMP_WITHOUT_TIMEZONE)))

        replace = operation in OVERWRITE_OPERATIONS
        action = REPLACE_COMMIT if replace else (DELTA_COMMIT if cfg.is_mor else COMMIT)
        instant, heartbeat, timeline = self.begin(action, extra.get(TOKEN_KEY), check_schema, partitions=parts)
        if heartbeat is None:  # a retry: this run token is already committed
            return self.stored_result(timeline, instant, operation)
        batch = conformed[0]
        with beating(heartbeat):
            try:
                return self._run(instant, batch, operation, extra, is_global, timeline)
            except FileNotFoundError as e:
                # a file this write read was cleaned, compacted away or rolled back meanwhile
                self.txn.abort(instant.time)
                raise WriteConflictError(f"table {self.storage.uri}: write {instant.time} read a file that another "
                                         f"writer or service removed meanwhile ({e.filename or e}); it was rolled "
                                         "back, retry it") from e

    # -- phases ----------------------------------------------------------------------------
    def begin(self, action: str, token: str | None, check: Callable[[ActiveTimeline], None] | None = None,
              *, partitions: Collection[str] = ()) -> tuple[Instant, Heartbeat | None, ActiveTimeline]:
        """Under the lock: repair the timeline, `check` the write against it (e.g. the batch's
        schema against the table's: an error leaves no trace of this write), check that the
        `partitions` it creates nest with none of the table's, claim them (their partition
        metadata files, which that check of a concurrent writer finds), then create the
        requested instant (recording the run token). Returns the instant, its heartbeat and the
        timeline this write goes on with (the one listing of this step); when the token is
        already committed (or another attempt with it commits meanwhile: `Transaction.start`
        waits for it), that commit and no heartbeat."""
        with self.txn.start(token, COMMIT_ACTIONS) as (timeline, done):
            if done is not None:
                return done, None, timeline
            if check is not None:
                check(timeline)
            # pending writes' partitions included; the view of this write takes its listing
            self.listed_partitions = check_partition_nesting(self.storage, partitions)
            self.txn.drop_metadata_table()
            time_ = self.txn.new_instant_time(timeline)
            self.write_partition_metadata(time_, set(partitions))
            requested = self.txn.request(timeline, Instant(time_, action, State.REQUESTED),
                                         requested_replace_bytes() if action == REPLACE_COMMIT else b"", token=token)
            heartbeat = self.txn.beat(time_)
        return requested, heartbeat, timeline

    def partition_files(self, parts: Collection[str]) -> dict[str, list]:
        """The files of these partitions as `list_partition_files` gives them: from the listing
        `begin` made under the lock when it covers them (every partition this write creates is
        claimed there), else listed now."""
        listed = self.listed_partitions
        if not set(parts) <= set(listed):
            return list_partition_files(self.storage, parts)
        return {p: [f for f in listed[p] if not f.name.startswith(PARTITION_METAFILE)] for p in parts}

    def _run(self, requested: Instant, batch: Batch, operation: str, extra: dict[str, str],
             is_global: bool, timeline: ActiveTimeline) -> WriteResult:
        """Plan and write with the timeline `begin` listed; list again only at the commit."""
        storage = self.storage
        instant = requested.time
        seen = set(timeline.completed().times) | {i.time for i in timeline.actions(COMPACTION)}
        # a non-global write only looks at the partitions it writes to
        parts = None if is_global or operation == "insert_overwrite_table" else \
            pc.unique(batch.partitions).to_pylist()
        view = FileSystemView(storage, timeline, partition_files=None if parts is None
                              else self.partition_files(parts))
        ctx = self.write_context(instant, batch.avro_schema)
        batch, tasks, replaced = self._plan(view, batch, operation, is_global, instant, timeline)

        inserts: dict[str, int] = {}
        for t in tasks:
            if t.kind == "insert":
                inserts[t.partition] = inserts.get(t.partition, 0) + len(t.rows)
        updates = {(t.partition, t.file_id): (t.base.instant if t.base else t.slice.base_instant, len(t.rows))
                   for t in tasks if t.kind != "insert"}
        for t in tasks:
            if t.insert_rows is not None:
                inserts[t.partition] = inserts.get(t.partition, 0) + len(t.insert_rows)
        workload = workload_metadata(OPERATION_TYPES[operation], inserts, updates)
        inflight = self.txn.inflight(timeline, requested, workload.to_bytes())
        self.write_partition_metadata(instant, {t.partition for t in tasks})
        block_format = self.opt(WriteOptions.LOG_BLOCK_FORMAT).lower()

        groups, routed = self._route(batch, tasks)
        stored = any(g.stored is not None for g in groups.values())
        spec = ExecSpec(ctx, groups, tuple(batch.data.column_names), None, block_format,  # (ordering: a column)
                        new_keys=operation == "upsert", table=self.table.context() if stored else None,
                        schema=self.reader(view).full_schema if stored else None)
        written = self.engine.write_groups(partial(execute_group, spec), routed, TARGET)
        stats: list[WriteStat] = [s for s in written if s is not None]

        touched = {(t.partition, t.file_id) for t in tasks if t.kind != "insert"}
        touched |= {(p, f) for p, ids in (replaced or {}).items() for f in ids}
        if self.index_type() == "BUCKET":
            touched |= {(t.partition, t.file_id) for t in tasks}
        inserted: dict[str, list[pa.Array]] = {}
        for stat in stats:  # (upsert: the keys each group inserted)
            if stat.new_keys is not None and len(stat.new_keys):
                inserted.setdefault(stat.partition, []).append(stat.new_keys)
        new_keys = {p: pa.concat_arrays(k) for p, k in inserted.items()}
        return self.commit(timeline, inflight, seen, operation, stats, extra, batch.avro_schema, touched,
                           self.key_clash(new_keys, is_global), replaced)

    def _route(self, batch: Batch, tasks: list[Task]) -> tuple[dict[int, GroupPlan], pa.Table]:
        """The tasks as group plans (plan id = task index) and the batch's rows routed to them."""
        whole = self.index_type() == "BUCKET"  # a bucket's merge matches every row against the file
        target = np.full(len(batch), -1, dtype=np.int64)
        located = np.zeros(len(batch), dtype=bool)
        groups: dict[int, GroupPlan] = {}
        for gid, t in enumerate(tasks):
            groups[gid] = GroupPlan(t.kind, t.partition, t.file_id, base=t.base, slice=t.slice,
                                    whole=whole and t.kind == "merge", inserts=t.inserts, stored=t.stored)
            target[t.rows] = gid
            if t.kind == "merge":
                located[t.rows] = True
            if t.insert_rows is not None:
                target[t.insert_rows] = gid
        # a gather of rows in this process: columns in threads here, whatever engine writes the groups
        return groups, routed_rows(batch, target, located, LocalEngine(self.opt(WriteOptions.PARALLELISM)))

    def write_context(self, instant: str, avro_schema: dict) -> WriteContext:
        """What every file-group task of this commit shares."""
        cfg = self.table.config
        bloom = BloomSettings(self.opt(WriteOptions.BLOOM_NUM_ENTRIES), self.opt(WriteOptions.BLOOM_FPP),
                              self.opt(WriteOptions.BLOOM_FILTER_TYPE).upper(),
                              self.opt(WriteOptions.BLOOM_DYNAMIC_MAX_ENTRIES)) if cfg.populate_meta_fields else None
        return WriteContext(self.storage, instant, avro_schema, from_avro(avro_schema), bloom,
                            self.opt(WriteOptions.COMPRESSION), cfg.populate_meta_fields, cfg.precombine_field,
                            cfg.payload_class == DEFAULT_PAYLOAD, self.table.keygen)

    def commit(self, timeline: ActiveTimeline, inflight: Instant, seen: set[str], operation: str,
               stats: list[WriteStat], extra: dict[str, str], avro_schema: dict, touched: set[tuple[str, str]],
               key_clash: KeyClash, replaced: dict[str, list[str]] | None) -> WriteResult:
        """The transaction's commit: under the lock, conflict checks against what appeared
        since `seen` (a clash rolls this write back), then the completed instant. `key_clash`
        finds a key this write inserts in the base files of a concurrent commit (asked only
        when one wrote base files)."""
        metadata = CommitMetadata.from_stats(OPERATION_TYPES[operation], stats,
                                             {**extra, "schema": json.dumps(avro_schema)})
        if replaced is not None:
            metadata.partition_to_replace_file_ids = replaced
        conflicts = ConflictCheck(frozenset(seen), frozenset(touched), key_clash, self.index_type() == "BUCKET")
        self.txn.commit(timeline, inflight, metadata.to_bytes(), conflicts=conflicts)
        result = WriteResult(inflight.time, operation)
        _add_stats(result, stats)
        result.replaced_file_groups = sum(len(v) for v in (replaced or {}).values())
        return result

    def key_clash(self, new_keys: dict[str, pa.Array], is_global: bool) -> KeyClash:
        """The key clash check of keys this write inserts (per partition), held on this process."""
        storage, keygen, populate = self.storage, self.table.keygen, self.table.config.populate_meta_fields

        def clash(files: dict[str, list[str]]) -> str | None:
            if not new_keys:
                return None
            mine = pa.concat_arrays(list(new_keys.values())) if is_global else None
            for partition, paths in files.items():
                keys = mine if is_global else new_keys.get(partition)
                if keys is None:
                    continue
                for path in paths:
                    stored = read_keys(storage, BaseFile.parse(partition, path.rsplit("/", 1)[-1]), keygen, populate)
                    hit = pc.is_in(keys, value_set=stored)
                    if pc.any(hit).as_py():
                        return keys.filter(hit)[0].as_py()
            return None

        return clash

    def _plan(self, view: FileSystemView, batch: Batch, operation: str, is_global: bool,
              instant: str, timeline: ActiveTimeline) -> tuple[Batch, list[Task], dict[str, list[str]] | None]:
        """The batch (with partition moves added) and its per-file-group tasks."""
        cfg = self.table.config
        is_mor = cfg.is_mor
        index_type = self.index_type()
        sizing = Sizing(self.opt(WriteOptions.MAX_FILE_SIZE), self.opt(WriteOptions.SMALL_FILE_LIMIT),
                        self.record_size_estimate(timeline))
        hash_fields = self.bucket_hash_fields()
        if operation in OVERWRITE_OPERATIONS:
            if operation == "insert_overwrite_table":
                replaced = _group_ids(view.file_groups())
            else:
                parts = set(pc.unique(batch.partitions).to_pylist())
                replaced = _group_ids(g for g in view.file_groups() if g.partition in parts)
            if index_type == "BUCKET":
                return batch, plan_bucket(view, batch, self.opt(WriteOptions.BUCKET_NUM), hash_fields,
                                          is_mor=False, instant=instant, overwrite=True), replaced
            rows = np.nonzero(~batch.is_delete)[0]
            tasks = [t for p, r in rows_by_partition(batch.partitions, rows).items() for t in new_files(p, r, sizing)]
            return batch, tasks, replaced
        if index_type == "BUCKET":
            tasks = plan_bucket(view, batch, self.opt(WriteOptions.BUCKET_NUM), hash_fields, is_mor=is_mor,
                                instant=instant)
            for t in tasks:  # MOR: deletes are checked against a stored group's records
                group = view.groups.get(t.partition, {}).get(t.file_id)
                if t.kind == "log" and group is not None:
                    t.stored = self._stored_records(view, group, batch, t.rows)
            return batch, tasks, None

        tasks: list[Task] = []
        insert_rows = np.arange(len(batch))
        if operation in LOOKUP_OPERATIONS or (
                operation == "insert" and self.opt(WriteOptions.INSERT_DROP_DUPLICATES)):
            tags = self._tag(view, batch, is_global, index_type, operation)
            if operation == "insert":
                insert_rows = np.nonzero(tags.file_index < 0)[0]
            else:
                batch, tags = self._route_partition_moves(view, batch, tags, is_global, index_type)
                located = tags.file_index >= 0
                for i, rows in group_by(tags.file_index, np.nonzero(located)[0]).items():
                    base = tags.files[i]
                    if is_mor:
                        group = view.groups[base.partition][base.file_id]
                        tasks.append(Task("log", base.partition, base.file_id, rows, slice=slice_ref(view, group),
                                          stored=self._stored_records(view, group, batch, rows)))
                    else:
                        tasks.append(Task("merge", base.partition, base.file_id, rows, base=base))
                insert_rows = np.nonzero(~located)[0]
        insert_rows = insert_rows[~batch.is_delete[insert_rows]]
        busy = {t.file_id: t for t in tasks}
        for partition, rows in rows_by_partition(batch.partitions, insert_rows).items():
            filled, rest = fill_small_files(view, partition, rows, sizing, is_mor=is_mor,
                                            busy=set(busy) if is_mor else set())
            for t in filled:
                if t.file_id in busy:  # COW: the group is rewritten anyway; add the inserts
                    busy[t.file_id].insert_rows = t.insert_rows
                else:
                    tasks.append(t)
            tasks.extend(new_files(partition, rest, sizing))
        return batch, tasks, None

    def bucket_hash_fields(self) -> list[str]:
        """The fields the BUCKET index hashes (`hoodie.bucket.index.hash.field`, else the record key)."""
        value = self.opt(WriteOptions.BUCKET_HASH_FIELD) or ",".join(self.table.config.record_key_fields)
        return [f.strip() for f in value.split(",") if f.strip()]

    def index_type(self) -> str:
        return check_index_type(self.opt(WriteOptions.INDEX_TYPE), f"table {self.storage.uri}")

    def _stored_records(self, view: FileSystemView, group, batch: Batch, rows: np.ndarray) -> SliceRead | None:
        """MOR: the read of the group's current keys and ordering values when its task must
        check `_hoodie_is_deleted` rows against them (DefaultHoodieRecordPayload)."""
        if batch.ordering is None or not batch.is_delete[rows].any():
            return None
        return self.delete_check_read(view, group)

    def delete_check_read(self, view: FileSystemView, group) -> SliceRead | None:
        """MOR under DefaultHoodieRecordPayload: the read of a group's current keys and ordering
        values that its task drops older `_hoodie_is_deleted` rows by (a delete block entry
        removes a base record whatever its ordering value); None where no check applies."""
        cfg = self.table.config
        field = cfg.precombine_field
        if not field or cfg.payload_class != DEFAULT_PAYLOAD:
            return None
        return group_read(view, group, self.reader(view).full_schema, [KEY, field], cfg)

    def _older_than_stored(self, view: FileSystemView, partition: str, file_id: str, batch: Batch,
                           rows: np.ndarray) -> np.ndarray:
        """For batch rows of keys stored in a file group: True where the stored record (base and
        logs merged) has a larger ordering value under DefaultHoodieRecordPayload."""
        cfg = self.table.config
        field = cfg.precombine_field
        if not field or batch.ordering is None or cfg.payload_class != DEFAULT_PAYLOAD or not len(rows):
            return np.zeros(len(rows), dtype=bool)
        group = view.groups[partition][file_id]
        current = self.reader(view).read_group(view, group, [KEY, field])
        pos = pc.index_in(batch.keys.take(pa.array(rows)), value_set=current.column(KEY).combine_chunks())
        stored = current.column(field).combine_chunks().take(pos)
        incoming = batch.ordering.take(pa.array(rows))
        if not stored.type.equals(incoming.type):
            stored = promote(stored, incoming.type)
        return pc.less(incoming, stored).fill_null(False).to_numpy(zero_copy_only=False)

    # -- helpers ---------------------------------------------------------------------------
    def _tag(self, view: FileSystemView, batch: Batch, is_global: bool, index_type: str, operation: str) -> Tags:
        if is_global:
            files = view.latest_base_files()
        else:
            parts = set(pc.unique(batch.partitions).to_pylist())
            files = view.latest_base_files([p for p in view.partitions if p in parts])
        # a COW upsert or delete rewrites every file a key is tagged to and sees there which keys
        # it really holds (a wrongly tagged new key is inserted into it and reported as new)
        trust = not self.table.config.is_mor and operation in LOOKUP_OPERATIONS
        key_reader = LiveKeys.of(self.table.context(), view, files, self.reader(view).full_schema)
        return tagger(index_type)(self.storage, files, batch.keys, batch.partitions, is_global=is_global,
                                  key_reader=key_reader, engine=self.engine, trust_filters=trust)

    def _route_partition_moves(self, view: FileSystemView, batch: Batch, tags: Tags, is_global: bool,
                               index_type: str) -> tuple[Batch, Tags]:
        """Global index: a key arriving in another partition moves (delete old + insert new),
        or, without update.partition.path, is updated where it is."""
        if not is_global:
            return batch, tags
        located = tags.file_index >= 0
        differs = pc.not_equal(tags.partitions(), batch.partitions).to_numpy(zero_copy_only=False)
        moved = located & differs & ~batch.is_delete
        if not moved.any():
            return batch, tags
        option = (WriteOptions.BLOOM_UPDATE_PARTITION_PATH if "BLOOM" in index_type
                  else WriteOptions.SIMPLE_UPDATE_PARTITION_PATH)
        if not self.opt(option):
            return batch, tags  # updated in place, in the old partition
        moved &= ~self._loses_to_existing(view, batch, tags, moved)
        rows = np.nonzero(moved)[0]
        combined = batch.concat(batch.take(rows).as_deletes())
        file_index = np.concatenate([np.where(moved, -1, tags.file_index), tags.file_index[rows]])
        return combined, Tags(file_index, tags.files)

    def _loses_to_existing(self, view: FileSystemView, batch: Batch, tags: Tags, rows_mask: np.ndarray) -> np.ndarray:
        """For the masked rows, True where the stored record wins on ordering: such a row
        neither moves nor updates."""
        loses = np.zeros(len(batch), dtype=bool)
        for i in np.unique(tags.file_index[rows_mask]):
            rows = np.nonzero(rows_mask & (tags.file_index == i))[0]
            loses[rows] = self._older_than_stored(view, tags.files[i].partition, tags.files[i].file_id, batch, rows)
        return loses

    def record_size_estimate(self, timeline: ActiveTimeline) -> int:
        """Average bytes per record of the latest commit, else the configured estimate."""
        timeline = timeline.commits().completed()
        for instant in reversed(timeline.instants[-5:]):
            stats = timeline.commit_metadata(instant).stats()
            size = sum(s.total_write_bytes for s in stats)
            rows = sum(s.num_writes for s in stats)
            if rows > 0 and size > 0:
                return max(1, size // rows)
        return self.opt(WriteOptions.RECORD_SIZE_ESTIMATE)

    def write_partition_metadata(self, instant: str, partitions: set[str]) -> None:
        for partition in partitions:
            path = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
            if self.storage.exists(path):
                continue
            depth = 0 if not partition else partition.count("/") + 1
            text = f"#partition metadata\n#{_java_date()}\ncommitTime={instant}\npartitionDepth={depth}\n"
            self.storage.create(path, text.encode())

    def stored_result(self, timeline: ActiveTimeline, instant: Instant, operation: str) -> WriteResult:
        """The result of the earlier attempt that committed `instant` (active or archived)."""
        result = WriteResult(instant.time, operation, already_done=True)
        _add_stats(result, timeline.stored_commit_metadata(instant).stats())
        return result


def _add_stats(result: WriteResult, stats: list[WriteStat]) -> None:
    for s in stats:
        result.num_inserts += s.num_inserts
        result.num_updates += s.num_update_writes
        result.num_deletes += s.num_deletes
        result.num_writes += s.num_writes
        if s.path:
            result.files.append(s.path)


def _group_ids(groups) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in groups:
        out.setdefault(g.partition, []).append(g.file_id)
    return out


def _java_date() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


