"""The record-level index (RLI): the metadata table's `record_index` partition (v8 spec §5.5),
record key -> the partition and file group holding it, spread over N file groups
`record-index-<i>-0` by Java's `String.hashCode` of the key.

Reading: a lookup reads only the file groups its keys hash to, each merged over its latest file
slice (base HFile, then the log blocks of readable MDT instants; a DELETE block removes a key).
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass, replace
from functools import partial

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableOptions
from ..errors import InvalidTableError
from ..formats.hfile import write_hfile
from ..formats.log import BlockType, HeaderKey, delete_block_content, encode_block
from ..formats.log.blocks import wrap_ordering
from ..merge import KEY
from ..metadata_table import (
    MDT,
    MERGERS,
    RECORD_INDEX,
    RECORD_INDEX_TYPE,
    index_definitions,
    listed_partitions,
    mdt_timeline,
    merge_mdt_slice,
    parsed_schema,
    partition_view,
    readable_instants,
)
from ..model import BaseFile, FileGroup
from ..schema import META_FIELDS, META_SCHEMA, from_avro
from ..slice_reader import SliceRead, Visibility, read_file_group
from ..storage import Storage
from ..timeline.active import ActiveTimeline
from ..view import FileSystemView

FILE_ID_PREFIX = "record-index-"
UUID_ENCODING, RAW_ENCODING = 0, 1
LOCATIONS = pa.schema([pa.field("key", pa.string()), pa.field("partition", pa.string()),
                       pa.field("file_id", pa.string()), pa.field("instant_ms", pa.int64())])


def java_string_hashes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Java's `String.hashCode` of each key (`h = 31*h + c` over UTF-16 code units, 32-bit
    wrapping), as int32; vectorised over the bytes of ASCII keys, the others one by one."""
    keys = pa.chunked_array([keys]) if isinstance(keys, pa.Array) else keys
    out = np.empty(len(keys), dtype=np.int32)
    at = 0
    for chunk in keys.chunks:
        chunk = chunk.cast(pa.large_string())
        if chunk.null_count:
            raise ValueError("a record key is null")
        out[at:at + len(chunk)] = _ascii_hashes(chunk) if pc.all(pc.string_is_ascii(chunk)).as_py() is not False \
            else [_hash_one(k) for k in chunk.to_pylist()]
        at += len(chunk)
    return out


def _ascii_hashes(chunk: pa.LargeStringArray) -> np.ndarray:
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[chunk.offset:chunk.offset + len(chunk) + 1]
    data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8) if chunk.buffers()[2] is not None \
        else np.zeros(0, dtype=np.uint8)
    order = np.argsort(-np.diff(offsets), kind="stable")  # longest first: position j's rows are a prefix
    starts, lengths = offsets[:-1][order], np.diff(offsets)[order]
    h = np.zeros(len(chunk), dtype=np.uint32)
    for j in range(int(lengths[0]) if len(lengths) else 0):
        k = int(np.searchsorted(-lengths, -j, side="left"))  # rows longer than j
        h[:k] = h[:k] * np.uint32(31) + data[starts[:k] + j].astype(np.uint32)
    out = np.empty_like(h)
    out[order] = h
    return out.view(np.int32)


def _hash_one(key: str) -> int:
    units = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def file_group_index(keys: pa.Array | pa.ChunkedArray, groups: int) -> np.ndarray:
    """The RLI file group of each key: `abs(abs(h) % N)` as Java computes it (§5.5)."""
    return np.abs(np.abs(java_string_hashes(keys).astype(np.int64)) % groups)


def decode_file_id(info: dict) -> str:
    """The data file group id of a `recordIndexMetadata` value (§5.5: a UUID in two signed
    longs and the index after it, or the raw id)."""
    if info.get("fileIdEncoding", UUID_ENCODING) != UUID_ENCODING:
        if info.get("fileId") is None:
            raise InvalidTableError(f"a record index entry has no file id: {info}")
        return info["fileId"]
    if info.get("fileIdHighBits") is None or info.get("fileIdLowBits") is None:
        raise InvalidTableError(f"a record index entry has no file id bits: {info}")
    value = ((info["fileIdHighBits"] & (2 ** 64 - 1)) << 64) | (info["fileIdLowBits"] & (2 ** 64 - 1))
    index = info.get("fileIndex")
    return str(uuid.UUID(int=value)) + ("" if index is None or index == -1 else f"-{index}")


def location_info(partition: str, file_id: str, instant_ms: int) -> dict:
    """The `recordIndexMetadata` of a location (§5.5): a `<uuid>-<n>` or bare-uuid file id in
    two signed longs and the index after it (encoding 0), any other id as is (encoding 1)."""
    head, _, tail = file_id.rpartition("-")
    for text, index in ((head, tail), (file_id, None)):
        try:
            value = uuid.UUID(text).int if len(text) == 36 else None
        except ValueError:
            value = None
        if value is not None and (index is None or index.isdigit()):
            return {"partitionName": partition, "fileIdHighBits": _signed(value >> 64),
                    "fileIdLowBits": _signed(value & (2 ** 64 - 1)), "fileIndex": -1 if index is None else int(index),
                    "fileId": "", "instantTime": instant_ms, "fileIdEncoding": UUID_ENCODING, "position": None}
    return {"partitionName": partition, "fileIdHighBits": -1, "fileIdLowBits": -1, "fileIndex": -1,
            "fileId": file_id, "instantTime": instant_ms, "fileIdEncoding": RAW_ENCODING, "position": None}


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def index_datum(info: dict, file_name: str | None) -> dict:
    """A record-index `HoodieMetadataRecord` (its key is the HFile row: `key` empty); base files
    name themselves in `_hoodie_file_name`."""
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": file_name, "key": "", "type": RECORD_INDEX_TYPE,
            "filesystemMetadata": None, "BloomFilterMetadata": None, "ColumnStatsMetadata": None,
            "recordIndexMetadata": info, "SecondaryIndexMetadata": None}


def index_cells(schema_text: str, locations: pa.Table) -> list[tuple[bytes, bytes]]:
    """The HFile cells of `locations` (`LOCATIONS`), sorted by key: the key as the row, the
    `HoodieMetadataRecord` (type 5, its `key` empty) as the value (§5.3)."""
    schema = parsed_schema(schema_text)
    cells = []
    for row in locations.to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, index_datum(
            location_info(row["partition"], row["file_id"], row["instant_ms"]), None))
        cells.append((row["key"].encode(), buf.getvalue()))
    return sorted(cells, key=lambda c: c[0])


def index_log_blocks(instant: str, schema_text: str, locations: pa.Table, deleted: list[str], *,
                     create_time_ms: int | None = None) -> bytes:
    """What one MDT deltacommit at `instant` appends to one record-index file group (§5.5): an
    HFILE_DATA block of the new `locations` and a DELETE block of the `deleted` keys (each only
    when it has entries); `create_time_ms`: the HFile's creation time (default now)."""
    out = b""
    header = {HeaderKey.SCHEMA: schema_text, HeaderKey.INSTANT_TIME: instant}
    if locations.num_rows:
        out += encode_block(BlockType.HFILE_DATA, header,
                            write_hfile(index_cells(schema_text, locations), {b"schema": schema_text.encode()},
                                        create_time_ms=create_time_ms))
    if deleted:
        keys = sorted(deleted)
        out += encode_block(BlockType.DELETE, header, delete_block_content(
            keys, [RECORD_INDEX] * len(keys), [wrap_ordering(None, None)] * len(keys)))
    return out


class UnsupportedRecordIndex(InvalidTableError):
    """A record index of a form airflow-lake does not read (a partitioned one)."""


def is_partitioned(storage: Storage, props: dict[str, str]) -> bool:
    """Whether the table's record index is the v9 partitioned form (`index.json`)."""
    options = (index_definitions(storage, props).get(RECORD_INDEX) or {}).get("indexOptions") or {}
    return str(options.get("isPartitioned", "false")).lower() == "true"


@dataclass
class RecordIndex:
    """A table's record index as of its metadata table's latest completed instant (with
    `data_timeline`: only MDT instants of data-table commits completed there, Java's rule)."""

    storage: Storage
    view: FileSystemView  # of the MDT's record_index partition
    valid: set[str]  # the MDT instants read
    groups: dict[int, FileGroup]  # file group index -> the MDT file group

    @classmethod
    def open(cls, storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline | None = None,
             ) -> RecordIndex:
        """The record index of the table whose properties are `props`; refused when the table
        has none listed, or a partitioned one (v9 `isPartitioned`, not specified here)."""
        if RECORD_INDEX not in listed_partitions(props):
            raise InvalidTableError(f"table {storage.uri} has no record index (hoodie.table.metadata.partitions: "
                                    f"{props.get('hoodie.table.metadata.partitions', '')!r})")
        if is_partitioned(storage, props):
            raise UnsupportedRecordIndex(f"table {storage.uri}: its record index is partitioned (index.json "
                                         "isPartitioned=true), which airflow-lake does not read yet")
        timeline = mdt_timeline(storage)
        view = partition_view(storage, timeline, RECORD_INDEX)
        groups = {}
        for group in view.file_groups(f"{MDT}/{RECORD_INDEX}"):
            if not group.file_id.startswith(FILE_ID_PREFIX):
                continue
            number = int(group.file_id[len(FILE_ID_PREFIX):].split("-")[0])
            if number in groups:
                raise InvalidTableError(f"table {storage.uri}: two record index file groups are number {number}: "
                                        f"{groups[number].file_id}, {group.file_id}")
            groups[number] = group
        if not groups:
            raise InvalidTableError(f"table {storage.uri}: hoodie.table.metadata.partitions lists record_index, "
                                    f"but {MDT}/{RECORD_INDEX} holds no file group")
        if sorted(groups) != list(range(len(groups))):
            raise InvalidTableError(f"table {storage.uri}: the record index's file groups are not numbered 0..N-1: "
                                    f"{sorted(groups)}")
        return cls(storage, view, readable_instants(timeline, data_timeline), groups)

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    def _group_state(self, index: int, keys: list[str] | None = None) -> dict[str, dict | None]:
        """File group `index` merged (key -> recordIndexMetadata, None: deleted); with `keys`
        (sorted) only those, reading only the base file's blocks that may hold them."""
        base, logs = self.view.read_slice(self.groups[index])
        state: dict[str, dict | None] = {}
        merge_mdt_slice(self.storage, base.path if base else None, [lf.path for lf in logs], self.valid, state,
                        *MERGERS[RECORD_INDEX], keys=keys)
        return state

    def lookup(self, keys: pa.Array | pa.ChunkedArray) -> pa.Table:
        """The locations of those `keys` the index holds (`LOCATIONS`), reading only the file
        groups they hash to, and of their base files only the blocks that may hold them."""
        keys = pc.unique(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).drop_null()
        if not len(keys) or not self.groups:
            return LOCATIONS.empty_table()
        indexes = file_group_index(keys, self.num_groups)
        found: list[tuple[str, dict]] = []
        for index in np.unique(indexes):
            wanted = sorted(keys.filter(pa.array(indexes == index)).to_pylist(), key=str.encode)
            state = self._group_state(int(index), wanted)
            found += [(k, state[k]) for k in wanted if state.get(k) is not None]
        return _table(found)

    def entries(self) -> pa.Table:
        """Every live entry (`LOCATIONS`), group by group."""
        return self._scan()[0]

    def misplaced(self) -> list[tuple[str, int]]:
        """Live keys stored in another file group than their hash names (key, group)."""
        return self._scan()[1]

    def _scan(self) -> tuple[pa.Table, list[tuple[str, int]]]:
        found: list[tuple[str, dict]] = []
        stored_in: list[int] = []
        for index in sorted(self.groups):
            live = [(k, v) for k, v in sorted(self._group_state(index).items()) if v is not None]
            found += live
            stored_in += [index] * len(live)
        table = _table(found)
        hashed = file_group_index(table["key"], self.num_groups) if table.num_rows else np.zeros(0, np.int64)
        wrong = np.nonzero(hashed != np.array(stored_in, dtype=np.int64))[0]
        keys = table["key"].to_pylist()
        return table, [(keys[i], stored_in[i]) for i in wrong]


def tag(index: RecordIndex, files: list[BaseFile], keys: pa.Array) -> tuple[np.ndarray, int]:
    """Tagging by the record index: for each key the position in `files` (the latest base
    files) of the file group the index places it in, -1 for a key it does not hold; and how
    many entries named a file group `files` lacks (stale: such a key is written as new)."""
    found = index.lookup(keys)
    groups = pa.table({"partition": pa.array([f.partition for f in files], pa.string()),
                       "file_id": pa.array([f.file_id for f in files], pa.string()),
                       "_at": pa.array(np.arange(len(files), dtype=np.int64))})
    known = found.join(groups, ["partition", "file_id"], join_type="inner")
    pos = pc.index_in(keys, value_set=known.column("key").combine_chunks()).fill_null(-1) \
        .to_numpy(zero_copy_only=False).astype(np.int64)
    at = known.column("_at").to_numpy() if known.num_rows else np.zeros(1, np.int64)
    return np.where(pos >= 0, at[np.maximum(pos, 0)], -1), found.num_rows - known.num_rows


def _table(found: list[tuple[str, dict]]) -> pa.Table:
    return pa.table({"key": [k for k, _ in found], "partition": [v.get("partitionName") or "" for _, v in found],
                     "file_id": [decode_file_id(v) for _, v in found],
                     "instant_ms": [v.get("instantTime") for _, v in found]}, schema=LOCATIONS)


@dataclass
class IndexCheck:
    """A record index compared with where the table's rows are (`check_record_index`)."""

    keys: int  # distinct live keys in the table
    missing: list[str]  # live keys the index lacks
    stale: list[str]  # indexed keys no row has
    moved: list[str]  # keys the index places in another partition or file group
    misplaced: list[str]  # keys stored in a file group of the index their hash does not name
    duplicated: list[str]  # keys live in more than one file group of the table (a global index allows one)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.stale or self.moved or self.misplaced or self.duplicated)


def check_record_index(index: RecordIndex, located: pa.Table) -> IndexCheck:
    """Compare `index` with `located` (`key`, `partition`, `file_id` of every live row, as a
    snapshot scan gives them)."""
    entries, misplaced = index._scan()
    rows = located.select(["key", "partition", "file_id"])
    counts = rows.group_by("key").aggregate([("key", "count")])
    duplicated = sorted(counts.filter(pc.greater(counts["key_count"], 1))["key"].to_pylist())
    rows = rows.group_by("key", use_threads=False).aggregate([("partition", "first"), ("file_id", "first")]) \
        .rename_columns(["key", "partition", "file_id"])
    joined = rows.join(entries.select(["key", "partition", "file_id"]), "key", join_type="full outer",
                       left_suffix="_row", right_suffix="_index")

    def keys(mask) -> list[str]:
        return sorted(joined.filter(mask)["key"].to_pylist())

    missing = keys(pc.is_null(joined["file_id_index"]))
    stale = keys(pc.is_null(joined["file_id_row"]))
    both = pc.and_(pc.is_valid(joined["file_id_index"]), pc.is_valid(joined["file_id_row"]))
    differ = pc.or_(pc.not_equal(joined["partition_row"], joined["partition_index"]),
                    pc.not_equal(joined["file_id_row"], joined["file_id_index"]))
    moved = sorted(set(keys(pc.and_(both, differ))) - set(duplicated))
    return IndexCheck(counts.num_rows, missing, stale, moved, sorted(k for k, _ in misplaced), duplicated)


def located_keys(ctx, timeline: ActiveTimeline, engine=None) -> pa.Table:
    """`key`, `partition`, `file_id` and `instant` (its file slice's base instant) of every
    live record of the table's latest snapshot (`ctx`: its `TableContext`), file group by file
    group in `engine`'s tasks (keys derived from the key fields on a table without meta fields)."""
    view = FileSystemView(ctx.storage, timeline)
    avro = timeline.schema_avro(ctx.config.get(TableOptions.CREATE_SCHEMA))
    schema = pa.schema(list(META_SCHEMA) + [f for f in (from_avro(avro) if avro else []) if f.name not in META_FIELDS])
    visible = Visibility.of(view)
    tasks = []
    for group in view.file_groups():
        base, logs = view.read_slice(group)
        if base is not None or logs:
            tasks.append(SliceRead(group.partition, group.file_id, base.path if base else None,
                                   base.instant if base else logs[0].base_instant, tuple(lf.path for lf in logs), 0,
                                   visible))
    found = (engine.map if engine is not None else lambda f, items: [f(i) for i in items])(
        partial(_group_keys, ctx, schema), tasks)
    return pa.concat_tables([LOCATED.empty_table(), *found])


LOCATED = pa.schema([pa.field("key", pa.string()), pa.field("partition", pa.string()),
                     pa.field("file_id", pa.string()), pa.field("instant", pa.string())])


def _group_keys(ctx, schema: pa.Schema, task: SliceRead) -> pa.Table:
    keys = read_file_group(ctx, replace(task, base_instant=task.base_instant if task.base else None), schema, [KEY],
                           derived_keys=True).rows.column(KEY)
    n = len(keys)
    return pa.table([keys.cast(pa.string()), *(pa.repeat(pa.scalar(v, pa.string()), n)
                                               for v in (task.partition, task.file_id, task.base_instant))],
                    schema=LOCATED)
