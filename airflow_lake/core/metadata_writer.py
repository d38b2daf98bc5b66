"""Keeping a Hudi 1.x table's metadata table (MDT) current: its `files` partition (v8 spec
§5.4, §5.6, §5.7), and the partitions we do not maintain switched off as Java switches them off.

Every data-table action that changes files gets an MDT deltacommit at its own instant T,
completed before the data-table instant completes (spec §2.4): a log file
`.files-0000-0_T.log.1_<token>` with one HFILE_DATA block holding a type-2 record per touched
partition (its written files, or a clean's deleted ones as tombstones) and the type-1
`__all_partitions__` record. A rollback of X rolls X's MDT deltacommit back at the rollback's
instant (its MDT log files deleted). The transaction writes what this module builds (it is
the one writer of timeline files). The MDT's own compaction and clean follow its deltacommits
(§5.8, as Java's writer runs them); the archive service archives the MDT's timeline after the
data table's."""

from __future__ import annotations

import io
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from . import properties
from .clean_planner import files_to_clean
from .config import MetadataOptions, TableConfig
from .formats.hfile import BLOCK_SIZE, read_hfile, write_hfile
from .formats.log import encode_block
from .formats.log.framing import BlockType, HeaderKey
from .index.column_stats import (
    COLUMN_STATS,
    PARTITION_STATS,
    STATS_PARTITIONS,
    indexed_columns,
    stats_merger,
)
from .index.record_index import (
    IndexLayout,
    RecordIndex,
    location_cells,
    renamed_cells,
    slice_cells,
)
from .index.secondary_index import PREFIX as SECONDARY_PREFIX
from .index.secondary_index import SECONDARY_INDEX_TYPE, SecondaryIndex, SecondaryIndexDef
from .index.secondary_index import definitions as secondary_definitions
from .mdt_files import (
    INDEX_DEFS_PATH,
    empty_delete,
    index_base_hfile,
    jackson_pretty,
    partition_metafile,
    without_meta,
)
from .mdt_stats import StatsLayout, stats_cells
from .metadata_table import (
    ALL_PARTITIONS,
    FILE_LIST,
    FILES,
    INDEX_DEFS,
    INIT_PREFIX,
    MDT,
    MERGERS,
    NON_PARTITIONED,
    PARTITION_LIST,
    RECORD_INDEX,
    RECORD_INDEX_TYPE,
    MdtStorage,
    has_files_partition,
    index_definitions,
    inflight_partitions,
    listed_partitions,
    merge_files_slice,
    merge_mdt_slice,
    parsed_schema,
    partition_view,
    read_file_listing,
)
from .model import BaseFile, LogFile, WriteStat
from .paths import absolute_path
from .storage import Storage
from .timeline.active import ActiveTimeline, timeline_folder
from .timeline.clock import instant_epoch_ms
from .timeline.instant import CLEAN, COMMIT, COMMIT_ACTIONS, DELTA_COMMIT, Instant
from .timeline.metadata import CommitMetadata, read_avro
from .timeline.payloads import (
    ActionInstant,
    CleanerPlan,
    CleanMetadata,
    CompactionOperation,
    CompactionPlan,
    RollbackMetadata,
    RollbackPlan,
    RollbackRequest,
)
from .view import FileSystemView, list_partition_files
from .vocabulary import KEEP_LATEST_COMMITS

log = logging.getLogger(__name__)
FILES_GROUP = "files-0000-0"
PAYLOAD_STRATEGY = "00000000-0000-0000-0000-000000000000"
METADATA_ENABLE = "hoodie.metadata.enable"  # a write option: true builds the files partition, false drops the MDT
# the write options that ask for the metadata table (`true`): itself, or an index it holds
METADATA_ASKING = (METADATA_ENABLE, MetadataOptions.RECORD_INDEX_ENABLE.key,
                   MetadataOptions.PARTITIONED_RECORD_INDEX_ENABLE.key, MetadataOptions.COLUMN_STATS_ENABLE.key,
                   "hoodie.metadata.global.record.level.index.enable")


def metadata_asked(options: dict | None) -> list[str]:
    """Those of `options` that ask for the metadata table or one of its indexes (`=true`)."""
    return [k for k in METADATA_ASKING if str((options or {}).get(k, "")).strip().lower() == "true"]


@dataclass
class FilesChange:
    """What one data-table action changes in the file listing: files written (partition ->
    name -> size), files deleted, partitions dropped."""

    written: dict[str, dict[str, int]] = field(default_factory=dict)
    deleted: dict[str, list[str]] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    list_partitions: bool = True  # a write lists its partitions in `__all_partitions__`; a clean does not

    @property
    def partitions(self) -> list[str]:
        return sorted(set(self.written) | set(self.deleted) | set(self.dropped))


def files_change(instant: Instant, content: bytes) -> FilesChange | None:
    """The listing change of completing `instant` with `content` (None: the action changes no
    file: a savepoint, an index)."""
    change = FilesChange()
    if instant.comparable_action in COMMIT_ACTIONS:
        meta = CommitMetadata.from_bytes(content)
        for partition, stats in meta.partition_to_write_stats.items():
            for stat in stats:
                if stat.get("path"):
                    name = stat["path"].rsplit("/", 1)[-1]
                    change.written.setdefault(partition, {})[name] = int(stat.get("fileSizeInBytes") or 0)
        if meta.operation_type == "DELETE_PARTITION":
            change.dropped = sorted(meta.partition_to_replace_file_ids or {})
        for partition in meta.partition_to_replace_file_ids or {}:
            change.written.setdefault(partition, {})
        return change
    if instant.action == CLEAN:
        change.list_partitions = False
        record = read_avro(content) or {}
        for partition, meta in (record.get("partitionMetadata") or {}).items():
            names = [f.rsplit("/", 1)[-1] for f in meta.get("successDeleteFiles") or []]
            if names:
                change.deleted[partition] = names
        return change
    return None


def is_on(storage: Storage, props: dict[str, str]) -> bool:
    """Whether the table's readers list files through its metadata table (which we then keep)."""
    return has_files_partition(props) and storage.exists(f"{MDT}/.hoodie/hoodie.properties")


class MetadataWriter:
    """The MDT of one table, written under the data table's lock."""

    def __init__(self, storage: Storage, zone: str = "UTC"):
        self.storage = storage
        self.zone = zone
        self.props = properties.load(MdtStorage(storage)).props
        self.folder = f"{MDT}/{timeline_folder(self.props)}"

    def timeline(self) -> ActiveTimeline:
        timeline = ActiveTimeline(self.storage, folder=self.folder)
        timeline.zone = self.zone
        return timeline

    def schema_text(self) -> str:
        """The `HoodieMetadataRecord` writer schema of this MDT (reused byte for byte, §5.3)."""
        partition = f"{MDT}/{FILES}"
        for st in sorted(self.storage.list(partition), key=lambda s: s.name):
            if st.name.endswith(".hfile"):
                return read_hfile(self.storage.read(st.path), st.path).info[b"schema"].decode()
        raise FileNotFoundError(f"{self.storage.uri}/{partition}: no base HFile to take the record schema from")

    def deltacommit(self, instant: str, change: FilesChange, index_stats: Sequence[WriteStat] = (),
                    stats_files: Sequence[tuple[str, bytes, WriteStat]] = ()) -> tuple[str, bytes, CommitMetadata]:
        """What the MDT deltacommit at `instant` writes for `change`: its log file (path,
        bytes: one HFILE_DATA block) and its commit metadata, which also names the index log
        files `index_stats` (written by the data write's tasks) and `stats_files` (column and
        partition stats logs); the transaction writes them."""
        schema_text = self.schema_text()
        name = f".{FILES_GROUP}_{instant}.log.1_0-{int(instant[-9:])}-0"
        cells = _cells(schema_text, change)
        block = encode_block(BlockType.HFILE_DATA, {HeaderKey.SCHEMA: schema_text, HeaderKey.INSTANT_TIME: instant},
                             write_hfile(cells, {b"schema": schema_text.encode()}))
        stat = WriteStat(FILES_GROUP, FILES, f"{FILES}/{name}", instant, num_writes=len(cells),
                         num_update_writes=len(cells), total_write_bytes=len(block), file_size=len(block),
                         delta={"logVersion": 1, "logOffset": 0, "baseFile": "", "logFiles": [name]})
        meta = CommitMetadata.from_stats("UPSERT_PREPPED", [*index_stats, *(s for _, _, s in stats_files), stat],
                                         {"schema": without_meta(schema_text)})
        return f"{MDT}/{FILES}/{name}", block, meta

    def partitions(self) -> list[str]:
        """The MDT's partition folders (`files`, `record_index`, ...)."""
        names = (path.rsplit("/", 1)[-1] for path in self.storage.list_dirs(MDT))
        return sorted(name for name in names if not name.startswith("."))

    def absorbed(self, timeline: ActiveTimeline, instant: str) -> bool:
        """Whether the MDT deltacommit at `instant` is in an MDT base file, so that deleting its
        log files cannot undo it: merged by a later compaction (`absorbed`), or read by an index
        built after it completed (the record index, the column stats, a secondary index: their
        base files come from a scan of the table)."""
        if absorbed(timeline, instant):
            return True
        done = next((i for i in timeline.completed() if i.time == instant and i.action == DELTA_COMMIT), None)
        if done is None:
            return False
        finished = done.completion or done.time
        # (an index built from a scan: at a later instant, or at an initialisation instant,
        # whose requested time says nothing, completed later)
        later = {i.time for i in timeline.completed() if i.time > finished or (
            i.time.startswith(INIT_PREFIX) and (i.completion or i.time) > finished)}
        return any(base.instant in later for partition in self.partitions()
                   for st in self.storage.list(f"{MDT}/{partition}")
                   if (base := BaseFile.parse(f"{MDT}/{partition}", st.name, st.size)) is not None)

    def written_by(self, instant: str) -> dict[str, list[str]]:
        """The MDT log files the deltacommit at `instant` wrote, per MDT partition."""
        out: dict[str, list[str]] = {}
        for partition in self.partitions():
            logs = sorted(st.path for st in self.storage.list(f"{MDT}/{partition}")
                          if st.name.startswith(".") and f"_{instant}.log." in st.name)
            if logs:
                out[partition] = logs
        return out

    def rollback_plan(self, timeline: ActiveTimeline, target: str) -> tuple[Instant, RollbackPlan]:
        """The MDT deltacommit `target` (its highest state) and the plan rolling it back."""
        current = max((i for i in timeline if i.time == target), key=lambda i: i.state)
        written = self.written_by(target) or {FILES: []}
        return current, RollbackPlan(target, current.action, tuple(
            RollbackRequest(partition, tuple(absolute_path(self.storage, p) for p in paths))
            for partition, paths in sorted(written.items())))

    @staticmethod
    def rollback_metadata(by: str, current: Instant, plan: RollbackPlan, start: float) -> RollbackMetadata:
        return RollbackMetadata(by, (ActionInstant(current.time, current.action),),
                                {r.partition: r.files for r in plan.requests} or {FILES: ()},
                                int((time.time() - start) * 1000))


# -- column and partition stats (v8 spec §5.5a, §5.5b) -------------------------------------------
def clean_due(timeline: ActiveTimeline) -> bool:
    """Java's rule (§5.8): the MDT is cleaned once at least 3 completed MDT instants follow its
    latest compaction (a reader that opened the older slice's files keeps them a while)."""
    compactions = [i for i in timeline.completed() if i.action == COMMIT]
    return bool(compactions) and sum(1 for i in timeline.completed() if i.time > compactions[-1].time) >= 3


def clean_retention(policy: str, retained: int) -> int:
    """What the MDT's clean retains under the data table's policy and retention (Java's
    `HoodieMetadataWriteUtils`: 1.2 times the data table's, and at least 20 commits)."""
    if policy == KEEP_LATEST_COMMITS:
        return max(20, int(retained * 1.2))
    return math.ceil(retained * 1.2)


def clean_plan(storage: Storage, timeline: ActiveTimeline, policy: str, retained: int,
               partitions: list[str] | tuple[str, ...] = (FILES,)) -> CleanerPlan | None:
    """The MDT's clean of the file slices of `partitions` no retained read needs (None: nothing
    to delete): the data-table clean's rules on the MDT's own timeline."""
    folders = [f"{MDT}/{p}" for p in partitions]
    view = FileSystemView(storage, timeline, partition_files={f: storage.list(f) for f in folders},
                          include_replaced=True)
    files, earliest = files_to_clean(view, timeline, policy, retained)
    if not files:
        return None
    last = timeline.commits().completed().last
    deleted: dict[str, tuple[str, ...]] = {}
    for folder, paths in sorted(files.items()):
        deleted[folder.removeprefix(f"{MDT}/")] = tuple(absolute_path(storage, f) for f in paths)
    return CleanerPlan(policy, ActionInstant(earliest.time, earliest.action) if earliest else None,
                       last.time if last else "", deleted)


def clean_metadata(instant: str, plan: CleanerPlan, start: float) -> CleanMetadata:
    """The completed MDT clean's metadata."""
    earliest = plan.earliest_instant_to_retain
    return CleanMetadata(instant, plan.policy, earliest.time if earliest else "", plan.last_completed_commit,
                         {p: tuple(f.rsplit("/", 1)[-1] for f in fs) for p, fs in plan.files.items()},
                         int((time.time() - start) * 1000))


def compaction_due(timeline: ActiveTimeline, max_delta_commits: int) -> bool:
    """Whether `max_delta_commits` MDT deltacommits completed since its latest compaction (the
    partition initialisations, `0000…`, do not count)."""
    done = [i for i in timeline.completed() if i.action == COMMIT]
    after = done[-1].time if done else ""
    deltas = [i for i in timeline.completed() if i.action == DELTA_COMMIT and i.time > after
              and not i.time.startswith(INIT_PREFIX)]
    return len(deltas) >= max_delta_commits


def compaction_plan(storage: Storage, timeline: ActiveTimeline, instant: str,
                    partitions: tuple[str, ...] = (FILES,)) -> CompactionPlan:
    """The MDT compaction at `instant` of every file group of `partitions`: each group's latest
    slice's base HFile and the log files of deltacommits that completed before `instant` (a
    later one, e.g. the data instant still completing, stays in the next slice: v8 spec §5.8)."""
    completion = {i.time: i.completion or i.time for i in timeline.commits().completed()}
    operations = []
    for name in partitions:
        view = partition_view(storage, timeline, name)
        for group in sorted(view.file_groups(f"{MDT}/{name}"), key=lambda g: g.file_id):
            base, logs = view.read_slice(group)
            logs = [lf for lf in logs if completion.get(lf.base_instant, "9" * 17) < instant]
            if base is None and not logs:
                continue
            operations.append(CompactionOperation(name, group.file_id, base.instant if base else logs[0].base_instant,
                                                  base.name if base else None, tuple(lf.name for lf in logs)))
    return CompactionPlan(tuple(operations))


def absorbed(timeline: ActiveTimeline, instant: str) -> bool:
    """Whether a completed MDT compaction merged the MDT deltacommit at `instant` into a base
    file: one planned after that deltacommit completed (§5.8: a compaction takes the log files
    of the deltacommits completed before its instant), whether or not a clean removed the log."""
    done = next((i for i in timeline.completed() if i.time == instant and i.action == DELTA_COMMIT), None)
    if done is None:
        return False
    finished = done.completion or done.time
    return any(i.action == COMMIT and i.time > finished for i in timeline.completed())


def logged_files(storage: Storage, log_paths: list[str], instant: str) -> dict[str, list[str]]:
    """The data files (partition -> names) the MDT log files of `instant` list as written."""
    state: dict[str, dict | None] = {}
    merge_files_slice(storage, None, log_paths, {instant}, state)
    return {("" if key == NON_PARTITIONED else key): sorted(n for n, i in entries.items() if not i["isDeleted"])
            for key, entries in state.items() if key != ALL_PARTITIONS and entries}


def compacted_bases(storage: Storage, timeline: ActiveTimeline, plan: CompactionPlan, instant: str,
                    schema_text: str, valid: set[str] | None = None, layout: StatsLayout | None = None,
                    ) -> tuple[list[tuple[str, bytes]], CommitMetadata]:
    """The new base HFiles of an MDT compaction, one per operation (records merged, tombstones
    and deleted keys dropped, `_hoodie_file_name` set to its own name, a DYNAMIC_V0 bloom filter
    of its keys, as Hudi writes MDT base files; a group left without records still gets one),
    and the compaction's commit metadata."""
    valid = {i.time for i in timeline.completed()} if valid is None else valid
    files: list[tuple[str, bytes]] = []
    stats: list[WriteStat] = []
    for n, op in enumerate(plan.operations):
        folder = f"{MDT}/{op.partition}"
        name = f"{op.file_id}_{n}-{int(instant[-9:])}-{n}_{instant}.hfile"
        if op.partition == RECORD_INDEX:
            data, count = compacted_index_base(storage, folder, op, valid, name, schema_text)
        elif op.partition.startswith(SECONDARY_PREFIX):  # (an empty base when every key went, as Java's)
            data, count = compacted_index_base(storage, folder, op, valid, name, schema_text,
                                               kind=SECONDARY_INDEX_TYPE)
        elif op.partition in STATS_PARTITIONS:  # (tombstones kept in the base file, as Java keeps them)
            state: dict = {}
            merge_mdt_slice(storage, f"{folder}/{op.data_file}" if op.data_file else None,
                            [f"{folder}/{name}" for name in op.delta_files], valid, state,
                            *stats_merger(layout.types))
            cells = stats_cells([(k, v) for k, v in state.items() if v is not None], layout, schema_text,
                                op.partition == PARTITION_STATS, name)
            data = index_base_hfile(pa.array([r for r, _ in cells], pa.binary()),
                                    pa.array([v for _, v in cells], pa.binary()), schema_text)
            count = len(cells)
        else:
            merged: dict[str, dict | None] = {}
            pick, merge = MERGERS[op.partition]
            merge_mdt_slice(storage, f"{folder}/{op.data_file}" if op.data_file else None,
                            [f"{folder}/{name}" for name in op.delta_files], valid, merged, pick, merge)
            data, count = base_hfile(op.partition, merged, name, schema_text)
        files.append((f"{folder}/{name}", data))
        stats.append(WriteStat(op.file_id, op.partition, f"{op.partition}/{name}", op.base_instant, num_writes=count,
                               total_write_bytes=len(data), file_size=len(data),
                               delta={"prevBaseFile": op.data_file}))
    meta = CommitMetadata.from_stats("COMPACT", stats, {"schema": without_meta(schema_text)})
    meta.compacted = True
    return files, meta


def base_hfile(partition: str, state: dict[str, dict | None], name: str, schema_text: str,
               create_time_ms: int | None = None) -> tuple[bytes, int]:
    """A base HFile `name` of the files partition from merged `state` (deleted keys and
    tombstones dropped), as Hudi writes MDT base files; and its number of records."""
    if partition != FILES:
        raise ValueError(f"metadata table partition {partition!r}: base files from a merged state are the files "
                         "partition's (the record index's: index_base_hfile)")
    schema = parsed_schema(schema_text)
    rows, values = [], []
    for key in sorted((k for k, v in state.items() if v is not None), key=lambda k: k.encode()):
        kind = PARTITION_LIST if key == ALL_PARTITIONS else FILE_LIST
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, _datum(kind, {n: i for n, i in state[key].items()
                                                              if not i["isDeleted"]}, name))
        rows.append(key.encode())
        values.append(buf.getvalue())
    return index_base_hfile(pa.array(rows, pa.binary()), pa.array(values, pa.binary()), schema_text,
                            create_time_ms), len(rows)


# the record index's base HFiles: small blocks, so that a lookup of a batch's keys reads (and
# inflates) about one block per key rather than every block of the file (Hudi reads any block size)
# (bench/indexes.py, a 100k upsert into 1M / 10M rows: 0.70 / 1.17 s at 16 KB, 0.69 / 1.32 s at 32 KB)
RECORD_INDEX_BLOCK_SIZE = 16 << 10


def compacted_index_base(storage: Storage, folder: str, op: CompactionOperation, valid: set[str], name: str,
                         schema_text: str, create_time_ms: int | None = None, *, kind: int = RECORD_INDEX_TYPE,
                         ) -> tuple[bytes, int]:
    """The compacted base HFile `name` of one record-index (or secondary-index: `kind` 7) file
    group: its slice merged (deleted keys dropped), each record naming the new file."""
    cells, _ = slice_cells(storage, f"{folder}/{op.data_file}" if op.data_file else None,
                           [f"{folder}/{n}" for n in op.delta_files], valid, kind=kind)
    return index_base_hfile(cells.column("key").combine_chunks(), renamed_cells(cells, schema_text, name),
                            schema_text, create_time_ms,
                            block_size=RECORD_INDEX_BLOCK_SIZE if kind == RECORD_INDEX_TYPE else BLOCK_SIZE), \
        cells.num_rows


# -- building the files partition (partition initialisation, v8 spec §5.6) --------------------
def mdt_properties(config: TableConfig) -> dict[str, str]:
    """`hoodie.properties` of a new metadata table (§5.1)."""
    version = str(config.version)
    return {
        "hoodie.table.name": f"{config.name}_metadata", "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": version, "hoodie.table.initial.version": version,
        "hoodie.timeline.layout.version": "2", "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history", "hoodie.archivelog.folder": "history",
        "hoodie.table.base.file.format": "HFILE", "hoodie.table.recordkey.fields": "key",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA", "hoodie.populate.meta.fields": "false",
        "hoodie.record.merge.mode": "CUSTOM", "hoodie.record.merge.strategy.id": PAYLOAD_STRATEGY,
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.datasource.write.drop.partition.columns": "false",
    }


def init_instant(timeline: ActiveTimeline) -> str:
    """The smallest `0000000000000000k` not on the MDT timeline (§5.6)."""
    k = 0
    while timeline.contains(f"{k:017d}"):
        k += 1
    return f"{k:017d}"


def committed_files(storage: Storage, data_timeline: ActiveTimeline) -> FilesChange:
    """Every data file on storage that a completed (or archived) instant wrote: the first
    content of the files partition."""
    done = {i.time for i in data_timeline.completed()}
    change = FilesChange()
    for partition, statuses in list_partition_files(storage).items():
        files = change.written.setdefault(partition, {})
        for st in statuses:
            base = BaseFile.parse(partition, st.name, st.size)
            log_file = None if base is not None else LogFile.parse(partition, st.name, st.size)
            instant = base.instant if base is not None else log_file.base_instant if log_file is not None else None
            if instant is not None and (instant in done or data_timeline.is_before_start(instant)):
                files[st.name] = st.size
    return change


def restore_change(storage: Storage, data_timeline: ActiveTimeline) -> FilesChange:
    """What a restore's MDT deltacommit records (Java's restore sync, §5.6): the committed data
    files on storage that the listing lacks, and the listed files no longer on storage (those of
    undone instants that an MDT compaction had absorbed). Partition folders stay, as after a
    Java restore, so none is dropped."""
    stored = committed_files(storage, data_timeline).written
    listed = read_file_listing(storage).files
    change = FilesChange()
    for partition in sorted(set(stored) | set(listed)):
        have, known = stored.get(partition, {}), listed.get(partition, {})
        added = {name: size for name, size in have.items() if name not in known}
        gone = sorted(set(known) - set(have))
        if added:
            change.written[partition] = added
        if gone:
            change.deleted[partition] = gone
    return change


def init_files(instant: str, change: FilesChange, schema_text: str) -> tuple[dict[str, bytes], CommitMetadata]:
    """The files of the files partition's initialisation at `instant` (relative to the table):
    its partition metadata, the log file with one empty DELETE block, the base HFile of the
    listing; and the initialisation's commit metadata."""
    state: dict[str, dict | None] = {}
    for key, (_, entries) in _records_of(change).items():
        state[key] = entries
    name = f"{FILES_GROUP}_0-0-0_{instant}.hfile"
    base, count = base_hfile(FILES, state, name, schema_text)
    init_log = empty_delete(instant)
    files = {
        **dict([partition_metafile(FILES, instant)]),
        f"{MDT}/{FILES}/.{FILES_GROUP}_{instant}.log.1_0-0-0": init_log,
        f"{MDT}/{FILES}/{name}": base,
    }
    stat = WriteStat(FILES_GROUP, FILES, f"{FILES}/{name}", None, num_writes=count, num_inserts=count,
                     total_write_bytes=len(base), file_size=len(base))
    return files, CommitMetadata.from_stats("BULK_INSERT_PREPPED", [stat], {"schema": without_meta(schema_text)})


RECORD_INDEX_BYTES_PER_ENTRY = 48  # Java's estimate of a record-index entry's size


def record_index_group_count(records: int, min_groups: int, max_groups: int, growth: float, max_bytes: int) -> int:
    """How many file groups a new record index of `records` keys gets (Java's
    `estimateFileGroupCount`: room for `growth` times the keys at `max_bytes` per group)."""
    if min_groups == max_groups and min_groups:
        return min_groups
    estimate = math.ceil(records * growth) // max(1, max_bytes // RECORD_INDEX_BYTES_PER_ENTRY)
    return max_groups if estimate >= max_groups else min_groups if estimate <= min_groups else max(1, estimate)


def init_record_index(instant: str, located: pa.Table, layout: IndexLayout, schema_text: str, zone: str,
                      ) -> tuple[dict[str, bytes], CommitMetadata]:
    """The files of the record index's initialisation at `instant` from `located` (`key`,
    `partition`, `file_id`, `instant`: every live key and the base instant of its file slice):
    per file group of `layout` (`record-index-<k>-0`; partitioned: `record-index-<partition>-<k>-0`)
    a base HFile of its keys and a log file with one empty
    DELETE block (as Java initialises a partition, §5.6); and the commit metadata."""
    instants = pc.unique(located.column("instant"))
    ms = pa.array([instant_epoch_ms(t, zone) for t in instants.to_pylist()], pa.int64())
    locations = pa.table({"key": located.column("key"), "partition": located.column("partition"),
                          "file_id": located.column("file_id"),
                          "instant_ms": ms.take(pc.index_in(located.column("instant"), value_set=instants))})
    where = layout.slots(located.column("key"), located.column("partition"))
    files = dict([partition_metafile(RECORD_INDEX, instant)])
    stats = []
    for k, file_id in enumerate(layout.file_ids()):
        name = f"{file_id}_0-0-{k}_{instant}.hfile"
        rows, values = location_cells(schema_text, locations.filter(pa.array(where == k)), name)
        base, count = index_base_hfile(rows, values, schema_text, block_size=RECORD_INDEX_BLOCK_SIZE), len(rows)
        files[f"{MDT}/{RECORD_INDEX}/{name}"] = base
        files[f"{MDT}/{RECORD_INDEX}/.{file_id}_{instant}.log.1_0-0-0"] = empty_delete(instant)
        stats.append(WriteStat(file_id, RECORD_INDEX, f"{RECORD_INDEX}/{name}", None, num_writes=count,
                               num_inserts=count, total_write_bytes=len(base), file_size=len(base)))
    return files, CommitMetadata.from_stats("BULK_INSERT_PREPPED", stats, {"schema": without_meta(schema_text)})


def maintained_partitions(storage: Storage, props: dict[str, str]) -> list[str]:
    """The MDT partitions our writes and services keep current: `files`, a built record index
    (global, or partitioned: index.json `isPartitioned`), column stats with an index.json definition, and
    partition stats beside them, and the secondary indexes of one column beside the record
    index (their hits are resolved through it)."""
    listed = listed_partitions(props)
    if FILES not in listed:
        return []
    kept = [FILES]
    if RECORD_INDEX in listed:
        kept.append(RECORD_INDEX)
    if COLUMN_STATS in listed and index_definitions(storage, props).get(COLUMN_STATS) is not None:
        kept.append(COLUMN_STATS)
        if PARTITION_STATS in listed:
            kept.append(PARTITION_STATS)
    if RECORD_INDEX in kept:
        kept += [d.partition for d in secondary_definitions(storage, props)]
    return kept


def stats_columns(storage: Storage, props: dict[str, str], schema: pa.Schema) -> tuple[str, ...] | None:
    """The columns whose statistics a write records for the column_stats partition (None: the
    table keeps none)."""
    if COLUMN_STATS not in maintained_partitions(storage, props):
        return None
    columns = indexed_columns(storage, props, schema)
    return None if columns is None else tuple(columns)


def written_ranges(stats: Sequence[WriteStat]) -> dict[tuple[str, str], tuple]:
    """The column statistics of each file the write stats name: (partition, file name) -> ranges."""
    return {(s.partition, s.path.rsplit("/", 1)[-1]): s.column_ranges for s in stats
            if s.column_ranges is not None and s.path}


def maintained_record_index(storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline,
                            ) -> RecordIndex | None:
    """The table's record index when our writes keep it (a Hudi 1.x table's global one)."""
    if RECORD_INDEX not in maintained_partitions(storage, props):
        return None
    return RecordIndex.open(storage, props, data_timeline)


def maintained_secondary_definitions(storage: Storage, props: dict[str, str]) -> list[SecondaryIndexDef]:
    """The table's secondary indexes our writes keep (beside its record index)."""
    kept = maintained_partitions(storage, props)
    return [d for d in secondary_definitions(storage, props) if d.partition in kept]


def maintained_secondary_indexes(storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline,
                                 ) -> list[SecondaryIndex]:
    """`maintained_secondary_definitions`, opened."""
    return [SecondaryIndex.open(storage, d, data_timeline) for d in maintained_secondary_definitions(storage, props)]


def tagging_record_index(storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline, index_type: str,
                         where: str) -> RecordIndex | None:
    """The record index a write of `index_type` tags by: RECORD_INDEX (global) or
    RECORD_LEVEL_INDEX (partitioned) on a table that has one of that form; without one, such a
    write tags as GLOBAL_SIMPLE or SIMPLE (None; warned), as Java falls back."""
    partitioned = index_type == "RECORD_LEVEL_INDEX"
    if not partitioned and index_type != "RECORD_INDEX":
        return None
    index = maintained_record_index(storage, props, data_timeline)
    if index is None or index.layout.is_partitioned != partitioned:
        form, option = ("partitioned record index", "hoodie.metadata.record.level.index.enable") if partitioned \
            else ("global record index", "hoodie.metadata.record.index.enable")
        log.warning("%s: hoodie.index.type=%s but the table has no %s (no record index of that form: build "
                    "it with %s=true); keys are looked up "
                    "as %s", where, index_type, form, option, "SIMPLE" if partitioned else "GLOBAL_SIMPLE")
        return None
    return index


def unmaintained_partitions(storage: Storage, props: dict[str, str]) -> list[str]:
    """The MDT partitions (listed or inflight) that our first write or service switches off:
    all but those we maintain (an inflight one too: another writer is still building it)."""
    inflight = inflight_partitions(props)
    kept = maintained_partitions(storage, props)
    return sorted({p for p in listed_partitions(props) + inflight if p != FILES and (p not in kept or p in inflight)})


def switch_off_unmaintained(storage: Storage, config: TableConfig) -> list[str]:
    """Remove every MDT partition we do not maintain the way Java switches one off (§5.7), with
    a warning naming each and how to rebuild it. Returns the partitions switched off."""
    off = unmaintained_partitions(storage, config.props)
    for partition in off:
        log.warning("table %s: switching off the metadata table's %s partition (airflow-lake does not keep it "
                    "current); Hudi rebuilds it when a writer asks for it again: %s", storage.uri, partition,
                    how_to_rebuild(partition))
    switch_off(storage, config, off)
    return off


def switch_off(storage: Storage, config: TableConfig, off: list[str]) -> None:
    """MDT partitions `off` removed as Java switches one off (§5.7): from
    `hoodie.table.metadata.partitions` (and `.inflight`), their index definitions, then their
    folders (readers stop using them first)."""
    if not off:
        return
    listed = listed_partitions(config.props)
    inflight = inflight_partitions(config.props)
    defs_path = config.props.get(INDEX_DEFS)
    if defs_path and storage.exists(defs_path):
        doc = json.loads(storage.read(defs_path))
        defs = doc.get("indexDefinitions") or {}
        doc["indexDefinitions"] = {k: v for k, v in defs.items() if k not in off}
        storage.write(defs_path, jackson_pretty(doc).encode())
    config.props["hoodie.table.metadata.partitions"] = ",".join(p for p in listed if p not in off)
    config.props["hoodie.table.metadata.partitions.inflight"] = ",".join(p for p in inflight if p not in off)
    properties.save(storage, config)
    for partition in off:
        storage.delete_dir(f"{MDT}/{partition}")


def define_record_index(storage: Storage, config: TableConfig, partitioned: bool = False) -> None:
    """The record index's entry in `index.json` (a v9 table's index definitions, created with
    `hoodie.table.index.defs.path` when there are none), as Hudi 1.1 writes it (`isPartitioned`);
    the caller saves the properties."""
    path = config.props.get(INDEX_DEFS) or INDEX_DEFS_PATH
    doc = json.loads(storage.read(path)) if storage.exists(path) else {"indexDefinitions": {}}
    doc.setdefault("indexDefinitions", {})[RECORD_INDEX] = {
        "indexName": RECORD_INDEX, "indexType": RECORD_INDEX, "indexFunction": "", "sourceFields": [],
        "indexOptions": {"isPartitioned": str(partitioned).lower()}, "version": "V1"}
    storage.write(path, jackson_pretty(doc).encode())
    config.props[INDEX_DEFS] = path


def define_secondary_index(storage: Storage, config: TableConfig, defn: SecondaryIndexDef) -> None:
    """A secondary index's entry in `index.json` (created when there is none), as Hudi 1.x
    writes it (a v8 table's without a version: V1); the caller saves the properties."""
    path = config.props.get(INDEX_DEFS) or INDEX_DEFS_PATH
    doc = json.loads(storage.read(path)) if storage.exists(path) else {"indexDefinitions": {}}
    entry = {"indexName": defn.partition, "indexType": "secondary_index", "indexFunction": "identity",
             "sourceFields": [defn.column], "indexOptions": {}}
    if config.version >= 9:
        entry["version"] = defn.version
    doc.setdefault("indexDefinitions", {})[defn.partition] = entry
    storage.write(path, jackson_pretty(doc).encode())
    config.props[INDEX_DEFS] = path


def how_to_rebuild(partition: str) -> str:
    """What makes Hudi rebuild a switched-off MDT partition."""
    if partition == "record_index":
        return "hoodie.metadata.record.index.enable=true"
    if partition in ("column_stats", "partition_stats"):
        return f"hoodie.metadata.index.{partition.replace('_stats', '')}.stats.enable=true"
    if partition.startswith("secondary_index_"):
        return (f"CREATE INDEX {partition.removeprefix('secondary_index_')} ... in Spark SQL, or "
                "`airflow-lake index create`")
    return "enable it in Hudi's writer"


def _records_of(change: FilesChange) -> dict[str, tuple[int, dict]]:
    """The files partition's records of `change`: key -> (type, filesystemMetadata)."""
    records: dict[str, tuple[int, dict]] = {}
    listed = change.partitions if change.list_partitions else change.dropped
    partitions = {NON_PARTITIONED if p == "" else p: {"size": 0, "isDeleted": p in change.dropped} for p in listed}
    if partitions:
        records[ALL_PARTITIONS] = (PARTITION_LIST, partitions)
    for partition in change.partitions:
        if partition in change.dropped:
            continue
        entries = {name: {"size": size, "isDeleted": False} for name, size in change.written.get(partition, {}).items()}
        entries.update({name: {"size": 0, "isDeleted": True} for name in change.deleted.get(partition, [])})
        records[NON_PARTITIONED if partition == "" else partition] = (FILE_LIST, entries)
    return records


def _cells(schema_text: str, change: FilesChange) -> list[tuple[bytes, bytes]]:
    schema = fastavro.parse_schema(json.loads(schema_text))
    records = _records_of(change)
    out = []
    for key in sorted(records, key=lambda k: k.encode()):
        kind, entries = records[key]
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, _datum(kind, entries, None))
        out.append((key.encode(), buf.getvalue()))
    return out


def _datum(kind: int, entries: dict, file_name: str | None) -> dict:
    """A `HoodieMetadataRecord` of the files partition (its key is the HFile row: `key` empty)."""
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": file_name, "key": "", "type": kind,
            "filesystemMetadata": entries, "BloomFilterMetadata": None, "ColumnStatsMetadata": None,
            "recordIndexMetadata": None, "SecondaryIndexMetadata": None}

