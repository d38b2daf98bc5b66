"""The write client of COPY_ON_WRITE tables: one `write()` per commit.

Flow: prepare the batch (all validation, nothing touched) -> under the lock, finish or roll
back failed writes and create the requested instant -> tag with the index -> inflight
workload -> one task per file group writes a base file (markers first) -> under the lock,
the completed instant -> markers and heartbeat removed.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import DEFAULT_PAYLOAD, TableOptions, WriteOptions
from ..engine import Engine
from ..errors import UnsupportedTableVersionError
from ..formats.parquet import BloomSettings, read_base_file
from ..index.simple import Tags, tag
from ..model import WriteStat, new_file_id
from ..schema import from_avro
from ..timeline.instant import COMMIT, REPLACE_COMMIT, Instant, State
from ..timeline.metadata import CommitMetadata, requested_replace_bytes, workload_metadata
from ..view import PARTITION_METAFILE, FileSystemView
from . import rollback
from .files import WriteContext, insert_file, merge_file
from .heartbeat import Heartbeat
from .markers import delete_markers
from .prepare import Batch, prepare, to_arrow

log = logging.getLogger(__name__)

OPERATION_TYPES = {
    "insert": "INSERT", "upsert": "UPSERT", "bulk_insert": "BULK_INSERT", "delete": "DELETE",
    "insert_overwrite": "INSERT_OVERWRITE", "insert_overwrite_table": "INSERT_OVERWRITE_TABLE",
}
TOKEN_KEY = "airflow_lake.token"


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

    @property
    def partitions(self) -> list[str]:
        return sorted({f.rsplit("/", 1)[0] if "/" in f else "" for f in self.files})


class WriteClient:
    """Writes one batch to a table as one commit."""

    def __init__(self, table, engine: Engine):
        self.table = table
        self.storage = table.storage
        self.engine = engine

    def opt(self, option):
        return self.table.option(option)

    # -- entry point -----------------------------------------------------------------------
    def write(self, data, operation: str, extra_metadata: dict[str, str] | None) -> WriteResult:
        table = self.table
        cfg = table.config
        where = f"table {self.storage.uri}"
        if cfg.version != 6 or cfg.get(TableOptions.TIMELINE_LAYOUT) != 1:
            raise UnsupportedTableVersionError(
                f"{where}: table version {cfg.version} (timeline layout {cfg.get(TableOptions.TIMELINE_LAYOUT)}) "
                "cannot be written; airflow-lake writes table version 6, layout 1")
        if cfg.is_mor:
            raise UnsupportedTableVersionError(f"{where}: MERGE_ON_READ writes are not supported yet")
        arrow = to_arrow(data, where)
        is_global = self.opt(WriteOptions.INDEX_TYPE).upper().startswith("GLOBAL")
        combine = operation in ("upsert", "delete") or self.opt(WriteOptions.COMBINE_BEFORE_INSERT)
        batch = prepare(arrow, operation, keygen=table.keygen, precombine=cfg.precombine_field,
                        table_avro=table.schema_avro(), table_name=cfg.name, where=where,
                        combine=combine, is_global=is_global)
        extra = dict(extra_metadata or {})
        token = extra.get(TOKEN_KEY)
        if token:
            done = table.timeline.find_by_metadata(TOKEN_KEY, token)
            if done is not None:
                return self._stored_result(done, operation)

        replace = operation in ("insert_overwrite", "insert_overwrite_table")
        action = REPLACE_COMMIT if replace else COMMIT
        instant, heartbeat = self._begin(action)
        try:
            return self._run(instant, batch, operation, extra, is_global)
        finally:
            heartbeat.stop()

    # -- phases ----------------------------------------------------------------------------
    def _begin(self, action: str) -> tuple[Instant, Heartbeat]:
        """Under the lock: repair the timeline, then create the requested instant."""
        interval = self.opt(WriteOptions.HEARTBEAT_INTERVAL_MS)
        with self.table.lock():
            self.table.prepare_for_write()
            timeline = self.table.timeline
            rollback.finish_pending_rollbacks(self.storage, timeline)
            timeline = self.table.timeline
            failed = rollback.failed_writes(self.storage, timeline, interval,
                                            self.opt(WriteOptions.HEARTBEAT_TOLERABLE_MISSES))
            for target in failed:
                rollback.rollback_pending(self.storage, timeline, target, self.table.new_instant_time())
            timeline = self.table.timeline
            _remove_stale_markers(self.storage, timeline)
            time_ = self.table.new_instant_time(timeline)
            requested = Instant(time_, action, State.REQUESTED)
            timeline.create(requested, requested_replace_bytes() if action == REPLACE_COMMIT else b"")
            heartbeat = Heartbeat(self.storage, time_, interval).start()
        return requested, heartbeat

    def _run(self, requested: Instant, batch: Batch, operation: str, extra: dict[str, str],
             is_global: bool) -> WriteResult:
        table, storage = self.table, self.storage
        instant = requested.time
        timeline = table.timeline
        view = FileSystemView(storage, timeline)
        ctx = WriteContext(
            storage, instant, batch.avro_schema, from_avro(batch.avro_schema),
            BloomSettings(self.opt(WriteOptions.BLOOM_NUM_ENTRIES), self.opt(WriteOptions.BLOOM_FPP),
                          self.opt(WriteOptions.BLOOM_FILTER_TYPE).upper(),
                          self.opt(WriteOptions.BLOOM_DYNAMIC_MAX_ENTRIES))
            if table.config.populate_meta_fields else None,
            self.opt(WriteOptions.COMPRESSION), table.config.populate_meta_fields,
            table.config.precombine_field, table.config.payload_class == DEFAULT_PAYLOAD, table.keygen,
        )
        replaced: dict[str, list[str]] | None = None
        update_groups: dict[int, np.ndarray] = {}
        tags: Tags | None = None
        insert_rows = np.arange(len(batch))

        if operation in ("upsert", "delete") or (
                operation == "insert" and self.opt(WriteOptions.INSERT_DROP_DUPLICATES)):
            tags = self._tag(view, batch, is_global)
            if operation == "insert":
                insert_rows = np.nonzero(tags.file_index < 0)[0]
            else:
                batch, tags = self._route_partition_moves(batch, tags, is_global)
                located = tags.file_index >= 0
                update_groups = _group_by(tags.file_index, np.nonzero(located)[0])
                insert_rows = np.nonzero(~located & ~batch.is_delete)[0]
        elif operation == "insert_overwrite_table":
            replaced = _group_ids(view.file_groups())
        elif operation == "insert_overwrite":
            parts = set(pc.unique(batch.partitions).to_pylist())
            replaced = _group_ids(g for g in view.file_groups() if g.partition in parts)

        inserts = batch.take(insert_rows)
        insert_plan = self._plan_inserts(inserts, view)
        workload = workload_metadata(
            OPERATION_TYPES[operation],
            {p: sum(len(r) for r in rows) for p, rows in _by_partition(insert_plan).items()},
            {(tags.files[i].partition, tags.files[i].file_id): (tags.files[i].instant, len(r))
             for i, r in update_groups.items()} if tags else {},
        )
        inflight = timeline.transition(requested, State.INFLIGHT, workload.to_bytes())

        self._write_partition_metadata(instant, {p for p, _, _ in insert_plan})
        tasks = []
        for i, rows in update_groups.items():
            tasks.append(("merge", tags.files[i], batch.take(rows)))
        for partition, file_id, rows in insert_plan:
            tasks.append(("insert", (partition, file_id), inserts.take(rows)))

        def run(indexed):
            n, (kind, target, part) = indexed
            if kind == "merge":
                return merge_file(ctx, n, target, part)
            return insert_file(ctx, n, target[0], target[1], part)

        stats: list[WriteStat] = self.engine.map(run, list(enumerate(tasks)))

        extra = {**extra, "schema": json.dumps(batch.avro_schema)}
        metadata = CommitMetadata.from_stats(OPERATION_TYPES[operation], stats, extra)
        if replaced is not None:
            metadata.partition_to_replace_file_ids = replaced
        with table.lock():
            table.check_still_owner(inflight)
            timeline.transition(inflight, State.COMPLETED, metadata.to_bytes())
        delete_markers(storage, instant)
        result = WriteResult(instant, operation)
        _add_stats(result, stats)
        result.replaced_file_groups = sum(len(v) for v in (replaced or {}).values())
        return result

    # -- helpers ---------------------------------------------------------------------------
    def _tag(self, view: FileSystemView, batch: Batch, is_global: bool) -> Tags:
        if is_global:
            files = view.latest_base_files()
        else:
            parts = set(pc.unique(batch.partitions).to_pylist())
            files = view.latest_base_files([p for p in view.partitions if p in parts])
        return tag(self.storage, files, batch.keys, batch.partitions, is_global=is_global,
                   keygen=self.table.keygen, populate_meta=self.table.config.populate_meta_fields,
                   engine=self.engine)

    def _route_partition_moves(self, batch: Batch, tags: Tags, is_global: bool) -> tuple[Batch, Tags]:
        """Global index: a key arriving in another partition moves (delete old + insert new),
        or, without update.partition.path, is updated where it is."""
        if not is_global:
            return batch, tags
        located = tags.file_index >= 0
        differs = pc.not_equal(tags.partitions(), batch.partitions).to_numpy(zero_copy_only=False)
        moved = located & differs & ~batch.is_delete
        if not moved.any():
            return batch, tags
        index_type = self.opt(WriteOptions.INDEX_TYPE).upper()
        option = (WriteOptions.BLOOM_UPDATE_PARTITION_PATH if "BLOOM" in index_type
                  else WriteOptions.SIMPLE_UPDATE_PARTITION_PATH)
        if not self.opt(option):
            return batch, tags  # updated in place, in the old partition
        moved &= ~self._loses_to_existing(batch, tags, moved)
        rows = np.nonzero(moved)[0]
        deletes = batch.take(rows)
        deletes.is_delete = np.ones(len(rows), dtype=bool)
        deletes.ordering = None
        combined = _concat_batches(batch, deletes)
        file_index = np.concatenate([np.where(moved, -1, tags.file_index), tags.file_index[rows]])
        return combined, Tags(file_index, tags.files)

    def _loses_to_existing(self, batch: Batch, tags: Tags, rows_mask: np.ndarray) -> np.ndarray:
        """For the masked rows, True where the stored record has a larger ordering value
        (DefaultHoodieRecordPayload): such a row neither moves nor updates."""
        loses = np.zeros(len(batch), dtype=bool)
        cfg = self.table.config
        field = cfg.precombine_field
        if not field or batch.ordering is None or cfg.payload_class != DEFAULT_PAYLOAD:
            return loses
        for i in np.unique(tags.file_index[rows_mask]):
            rows = np.nonzero(rows_mask & (tags.file_index == i))[0]
            stored = read_base_file(self.storage, tags.files[i].path, ["_hoodie_record_key", field])
            if field not in stored.column_names:
                continue
            keys = batch.keys.take(pa.array(rows))
            pos = pc.index_in(keys, value_set=stored.column("_hoodie_record_key").combine_chunks())
            old = stored.column(field).combine_chunks().take(pos)
            new = batch.ordering.take(pa.array(rows))
            if not old.type.equals(new.type):
                old = old.cast(new.type)
            loses[rows] = pc.less(new, old).fill_null(False).to_numpy(zero_copy_only=False)
        return loses

    def _plan_inserts(self, inserts: Batch, view: FileSystemView) -> list[tuple[str, str, np.ndarray]]:
        """New file groups per partition, each under `hoodie.parquet.max.file.size`."""
        if not len(inserts):
            return []
        per_file = max(1, self.opt(WriteOptions.MAX_FILE_SIZE) // self._record_size_estimate())
        plan = []
        encoded = inserts.partitions.dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        for code, rows in _group_by(codes, np.arange(len(codes))).items():
            partition = encoded.dictionary[code].as_py()
            nfiles = math.ceil(len(rows) / per_file)
            for chunk in np.array_split(rows, nfiles):
                plan.append((partition, new_file_id(), chunk))
        return plan

    def _record_size_estimate(self) -> int:
        """Average bytes per record of the latest commit, else the configured estimate."""
        timeline = self.table.timeline.commits().completed()
        for instant in reversed(timeline.instants[-5:]):
            stats = timeline.commit_metadata(instant).write_stats()
            size = sum(s.get("totalWriteBytes") or 0 for s in stats)
            rows = sum(s.get("numWrites") or 0 for s in stats)
            if rows > 0 and size > 0:
                return max(1, size // rows)
        return self.opt(WriteOptions.RECORD_SIZE_ESTIMATE)

    def _write_partition_metadata(self, instant: str, partitions: set[str]) -> None:
        for partition in partitions:
            path = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
            if self.storage.exists(path):
                continue
            depth = 0 if not partition else partition.count("/") + 1
            text = f"#partition metadata\n#{_java_date()}\ncommitTime={instant}\npartitionDepth={depth}\n"
            self.storage.create(path, text.encode())

    def _stored_result(self, instant: Instant, operation: str) -> WriteResult:
        stats = self.table.timeline.commit_metadata(instant)
        result = WriteResult(instant.time, operation)
        for s in stats.write_stats():
            result.num_inserts += s.get("numInserts") or 0
            result.num_updates += s.get("numUpdateWrites") or 0
            result.num_deletes += s.get("numDeletes") or 0
            result.num_writes += s.get("numWrites") or 0
            if s.get("path"):
                result.files.append(s["path"])
        return result


def _remove_stale_markers(storage, timeline) -> None:
    """Marker folders of instants that completed (a crash after the commit) or are gone."""
    pending = {i.time for i in timeline.pending()}
    for folder in storage.list_dirs(".hoodie/.temp"):
        if folder.rsplit("/", 1)[-1] not in pending:
            storage.delete_dir(folder)


def _add_stats(result: WriteResult, stats: list[WriteStat]) -> None:
    for s in stats:
        result.num_inserts += s.num_inserts
        result.num_updates += s.num_update_writes
        result.num_deletes += s.num_deletes
        result.num_writes += s.num_writes
        result.files.append(s.path)


def _group_by(codes: np.ndarray, rows: np.ndarray) -> dict[int, np.ndarray]:
    """rows grouped by codes[rows], each group in row order."""
    if len(rows) == 0:
        return {}
    sel = codes[rows]
    order = np.argsort(sel, kind="stable")
    uniq, starts = np.unique(sel[order], return_index=True)
    bounds = list(starts[1:]) + [len(order)]
    return {int(u): rows[order[s:e]] for u, s, e in zip(uniq, starts, bounds, strict=True)}


def _by_partition(plan) -> dict[str, list]:
    out: dict[str, list] = {}
    for partition, _, rows in plan:
        out.setdefault(partition, []).append(rows)
    return out


def _group_ids(groups) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in groups:
        out.setdefault(g.partition, []).append(g.file_id)
    return out


def _concat_batches(a: Batch, b: Batch) -> Batch:
    return Batch(pa.concat_tables([a.data, b.data]), pa.concat_arrays([a.keys, b.keys]),
                 pa.concat_arrays([a.partitions, pa.repeat(pa.scalar("\x00", pa.string()), len(b))]),
                 np.concatenate([a.is_delete, b.is_delete]),
                 None if a.ordering is None else pa.concat_arrays([a.ordering, pa.nulls(len(b), a.ordering.type)]),
                 a.avro_schema)


def _java_date() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%a %b %d %H:%M:%S UTC %Y")


