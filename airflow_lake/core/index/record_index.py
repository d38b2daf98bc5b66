"""The record-level index (RLI): the metadata table's `record_index` partition (v8 spec §5.5),
record key -> the partition and file group holding it, spread over N file groups
`record-index-<i>-0` by Java's `String.hashCode` of the key; in the partitioned form (v9
`isPartitioned`, Hudi 1.1's RECORD_LEVEL_INDEX) each data partition has its own groups
`record-index-<escaped partition>-<i>-0`, a key hashed over its partition's groups.

Reading: a lookup reads only the file groups its keys hash to, each merged over its latest file
slice (base HFile, then the log blocks of readable MDT instants; a DELETE block removes a key).
"""

from __future__ import annotations

import bisect
import io
import uuid
from dataclasses import dataclass
from functools import partial
from urllib.parse import unquote

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import TableOptions
from ..errors import InvalidTableError
from ..formats.hfile import read_cell_columns, read_hfile_index, read_row_columns, write_hfile_columns
from ..formats.log import BlockType, DeleteBlock, HeaderKey, delete_block_content, encode_block, read_log_file
from ..formats.log.blocks import HFileBlock, wrap_ordering
from ..merge import KEY
from ..metadata_table import (
    MDT,
    RECORD_INDEX,
    RECORD_INDEX_TYPE,
    index_definitions,
    listed_partitions,
    mdt_timeline,
    parsed_schema,
    partition_view,
    readable_instants,
)
from ..model import BaseFile, FileGroup
from ..schema import arrow_schema_with_meta
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


def location_cells(schema_text: str, locations: pa.Table, file_name: str | None = None,
                   ) -> tuple[pa.Array, pa.Array]:
    """The HFile cells of `locations` (`LOCATIONS`): rows (the keys, binary, sorted by their
    bytes) and values (the `HoodieMetadataRecord` of type 5, `key` empty, §5.3; a base file's
    name themselves in `_hoodie_file_name`); each distinct location encoded once."""
    keys = locations.column("key").combine_chunks().cast(pa.binary())
    order = pc.array_sort_indices(keys)
    spots = pa.table({"partition": locations.column("partition"), "file_id": locations.column("file_id"),
                      "instant_ms": locations.column("instant_ms")}).take(order)
    distinct = spots.group_by(["partition", "file_id", "instant_ms"], use_threads=False).aggregate([])
    schema = parsed_schema(schema_text)
    encoded = []
    for row in distinct.to_pylist():
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, index_datum(
            location_info(row["partition"], row["file_id"], row["instant_ms"]), file_name))
        encoded.append(buf.getvalue())
    numbered = distinct.append_column("_at", pa.array(np.arange(distinct.num_rows, dtype=np.int64)))
    at = spots.append_column("_n", pa.array(np.arange(spots.num_rows, dtype=np.int64))).join(
        numbered, ["partition", "file_id", "instant_ms"]).sort_by("_n").column("_at")
    return keys.take(order), pa.array(encoded, pa.binary()).take(at.combine_chunks() if at.num_chunks else
                                                                  pa.array([], pa.int64()))


def renamed_cells(cells: pa.Table, schema_text: str, file_name: str) -> pa.Array:
    """The values of index `cells` with `_hoodie_file_name` set to `file_name` (a compacted
    base file's own name), each distinct value re-encoded once."""
    values = cells.column("value").combine_chunks()
    distinct = pc.unique(values)
    schema = parsed_schema(schema_text)
    encoded = []
    for value in distinct.to_pylist():
        record = fastavro.schemaless_reader(io.BytesIO(value), schema, None)
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, {**record, "_hoodie_file_name": file_name})
        encoded.append(buf.getvalue())
    return pa.array(encoded, pa.binary()).take(pc.index_in(values, value_set=distinct))


def index_log_blocks(instant: str, schema_text: str, locations: pa.Table, deleted: list[str], *,
                     create_time_ms: int | None = None) -> bytes:
    """What one MDT deltacommit at `instant` appends to one record-index file group (§5.5): an
    HFILE_DATA block of the new `locations` and a DELETE block of the `deleted` keys (each only
    when it has entries); `create_time_ms`: the HFile's creation time (default now)."""
    out = b""
    header = {HeaderKey.SCHEMA: schema_text, HeaderKey.INSTANT_TIME: instant}
    if locations.num_rows:
        rows, values = location_cells(schema_text, locations)
        out += encode_block(BlockType.HFILE_DATA, header,
                            write_hfile_columns(rows, values, {b"schema": schema_text.encode()},
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


# characters Hudi escapes as %XX in a partitioned index's file ids (`PartitionPathEncodeUtils.escapeFileName`)
_ESCAPED = frozenset([chr(c) for c in range(1, 0x20)] + list('"#%\'*/:=?\\\x7f{[]^_-'))


def escape_partition(partition: str) -> str:
    """A data partition as a partitioned record index's file ids name it (no `-` is left)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in partition)


def index_file_id(partition: str | None, k: int) -> str:
    """File group `k`'s id: of the global index (`partition` None), or of `partition`'s groups."""
    return f"{FILE_ID_PREFIX}{k:04d}-0" if partition is None else \
        f"{FILE_ID_PREFIX}{escape_partition(partition)}-{k:04d}-0"


def parse_file_id(file_id: str) -> tuple[str | None, int] | None:
    """(data partition or None, group number) of a record-index file id; None: not one."""
    if not file_id.startswith(FILE_ID_PREFIX):
        return None
    parts = file_id[len(FILE_ID_PREFIX):].split("-")
    if len(parts) == 2 and parts[0].isdigit():
        return None, int(parts[0])
    if len(parts) == 3 and parts[1].isdigit():
        return unquote(parts[0]), int(parts[1])
    return None


@dataclass(frozen=True)
class IndexLayout:
    """Which file group (slot 0..N-1) holds a key's entry: the global index hashes the key over
    all its groups; the partitioned one over its data partition's groups, the partitions'
    groups numbered in sorted partition order. Small and picklable (tasks map keys with it)."""

    counts: tuple[int, ...]  # the global index's one count, or each partition's
    partitions: tuple[str, ...] | None = None  # sorted; None: the global index

    @property
    def num_groups(self) -> int:
        return sum(self.counts)

    @property
    def is_partitioned(self) -> bool:
        return self.partitions is not None

    def offset(self, partition: str) -> int | None:
        """The first slot of `partition`'s groups (None: it has none)."""
        i = bisect.bisect_left(self.partitions, partition)
        if i == len(self.partitions) or self.partitions[i] != partition:
            return None
        return sum(self.counts[:i])

    def file_ids(self) -> tuple[str, ...]:
        """Each slot's file id."""
        if self.partitions is None:
            return tuple(index_file_id(None, k) for k in range(self.counts[0]))
        return tuple(index_file_id(p, k) for p, n in zip(self.partitions, self.counts, strict=True) for k in range(n))

    def with_partitions(self, partitions, count: int) -> IndexLayout:
        """The layout with `count` groups for each of `partitions` it lacks (a partitioned one)."""
        new = sorted(set(partitions) - set(self.partitions or ()))
        if self.partitions is None or not new:
            return self
        merged = dict(zip(self.partitions, self.counts, strict=True)) | {p: count for p in new}
        return IndexLayout(tuple(merged[p] for p in sorted(merged)), tuple(sorted(merged)))

    def slots(self, keys: pa.Array | pa.ChunkedArray, partitions: pa.Array | pa.ChunkedArray | None = None,
              ) -> np.ndarray:
        """The slot of each key (of the partitioned index: in its partition; -1 where that
        partition has no groups)."""
        if not len(keys):
            return np.zeros(0, np.int64)
        if self.partitions is None:
            return file_group_index(keys, self.counts[0])
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        parts = (partitions.combine_chunks() if isinstance(partitions, pa.ChunkedArray) else partitions)
        out = np.full(len(keys), -1, np.int64)
        for p in pc.unique(parts).drop_null().to_pylist():
            start = self.offset(p)
            if start is None:
                continue
            mask = pc.fill_null(pc.equal(parts, p), False).to_numpy(zero_copy_only=False)
            n = self.counts[self.partitions.index(p)]
            out[mask] = start + file_group_index(keys.filter(pa.array(mask)), n)
        return out


@dataclass
class RecordIndex:
    """A table's record index as of its metadata table's latest completed instant (with
    `data_timeline`: only MDT instants of data-table commits completed there, Java's rule)."""

    storage: Storage
    view: FileSystemView  # of the MDT's record_index partition
    valid: set[str]  # the MDT instants read
    groups: dict[int, FileGroup]  # slot -> the MDT file group
    layout: IndexLayout | None = None  # (None: the global form over `groups`)

    def __post_init__(self) -> None:
        if self.layout is None:
            self.layout = IndexLayout((len(self.groups),))

    @classmethod
    def open(cls, storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline | None = None,
             ) -> RecordIndex:
        """The record index of the table whose properties are `props` (the global or the
        partitioned form, as index.json says); refused when the table has none listed."""
        if RECORD_INDEX not in listed_partitions(props):
            raise InvalidTableError(f"table {storage.uri} has no record index (hoodie.table.metadata.partitions: "
                                    f"{props.get('hoodie.table.metadata.partitions', '')!r})")
        partitioned = is_partitioned(storage, props)
        timeline = mdt_timeline(storage)
        view = partition_view(storage, timeline, RECORD_INDEX)
        found: dict[str | None, dict[int, FileGroup]] = {}
        for group in view.file_groups(f"{MDT}/{RECORD_INDEX}"):
            parsed = parse_file_id(group.file_id)
            if parsed is None or (parsed[0] is not None) != partitioned:
                continue
            partition, number = parsed
            if number in found.setdefault(partition, {}):
                raise InvalidTableError(f"table {storage.uri}: two record index file groups are number {number}: "
                                        f"{found[partition][number].file_id}, {group.file_id}")
            found[partition][number] = group
        if not found and not partitioned:
            raise InvalidTableError(f"table {storage.uri}: hoodie.table.metadata.partitions lists record_index, "
                                    f"but {MDT}/{RECORD_INDEX} holds no file group")
        for partition, numbered in found.items():
            if sorted(numbered) != list(range(len(numbered))):
                raise InvalidTableError(f"table {storage.uri}: the record index's file groups"
                                        f"{'' if partition is None else f' of partition {partition!r}'} are not "
                                        f"numbered 0..N-1: {sorted(numbered)}")
        names = sorted(found) if partitioned else [None]
        layout = IndexLayout(tuple(len(found[p]) for p in names), tuple(names) if partitioned else None)
        groups = {slot: found[p][k] for slot, (p, k) in enumerate((p, k) for p in names for k in sorted(found[p]))}
        return cls(storage, view, readable_instants(timeline, data_timeline), groups, layout)

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    def group_cells(self, index: int, keys: pa.Array | None = None) -> tuple[pa.Table, str | None]:
        """File group `index`'s live entries (`CELLS`: key and value bytes, sorted by key) and
        the records' schema; with `keys` (binary) only those, reading only the base file's
        blocks that may hold them."""
        base, logs = self.view.read_slice(self.groups[index])
        return slice_cells(self.storage, base.path if base else None, [lf.path for lf in logs], self.valid, keys)

    def lookup(self, keys: pa.Array | pa.ChunkedArray, partitions: pa.Array | pa.ChunkedArray | None = None,
               ) -> pa.Table:
        """The locations of those `keys` the index holds (`LOCATIONS`), reading only the file
        groups they hash to, and of their base files only the blocks that may hold them. A
        partitioned index looks each key up in its partition (`partitions`, one per key;
        None: in every partition). The groups are read one after another: a lookup's Python
        work between two blocks' inflations is as long as an inflation, so two threads hand
        the GIL over at every block and lose more than they overlap (100k keys in a 5M-key
        index, zlib-ng inflating: 0.59-0.60 s in two threads, 0.52-0.56 s in one)."""
        keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
        if partitions is not None:
            partitions = partitions.combine_chunks() if isinstance(partitions, pa.ChunkedArray) else partitions
            partitions = partitions.filter(keys.is_valid())
        keys = keys.drop_null()
        if partitions is None and self.layout.is_partitioned:
            keys = pc.unique(keys).drop_null()
            every = list(self.layout.partitions)
            partitions = pa.array(np.repeat(np.array(every, dtype=object), len(keys)), pa.string())
            keys = pa.concat_arrays([keys] * len(every)) if every else keys.slice(0, 0)
        if not len(keys) or not self.groups:
            return LOCATIONS.empty_table()
        indexes = self.layout.slots(keys, partitions)
        wanted = keys.cast(pa.binary())
        tasks = [(int(index), _sorted(pc.unique(wanted.filter(pa.array(indexes == index)).drop_null())))
                 for index in np.unique(indexes) if index >= 0]
        return pa.concat_tables([LOCATIONS.empty_table(), *map(self._group_lookup, tasks)])

    def _group_lookup(self, task: tuple[int, pa.Array]) -> pa.Table:
        return decode_locations(*self.group_cells(*task))

    def entries(self) -> pa.Table:
        """Every live entry (`LOCATIONS`), group by group."""
        return self._scan()[0]

    def misplaced(self) -> list[tuple[str, int]]:
        """Live keys stored in another file group than their hash names (key, group)."""
        return self._scan()[1]

    def _scan(self) -> tuple[pa.Table, list[tuple[str, int]]]:
        found = [LOCATIONS.empty_table()]
        stored_in = [np.zeros(0, np.int64)]
        for index in sorted(self.groups):
            table = decode_locations(*self.group_cells(index))
            found.append(table)
            stored_in.append(np.full(table.num_rows, index, dtype=np.int64))
        table = pa.concat_tables(found)
        where = np.concatenate(stored_in)
        hashed = self.layout.slots(table["key"], table["partition"])
        wrong = np.nonzero(hashed != where)[0]
        keys = table["key"].to_pylist()
        return table, [(keys[i], int(where[i])) for i in wrong]


CELLS = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary())])


def _sorted(keys: pa.Array) -> pa.Array:
    return keys.take(pc.array_sort_indices(keys))


def slice_cells(storage: Storage, base: str | None, logs: list[str], valid: set[str] | frozenset[str],
                keys: pa.Array | None = None, kind: int = RECORD_INDEX_TYPE) -> tuple[pa.Table, str | None]:
    """One record-index file slice merged (`CELLS`, sorted by key: the live entries; the
    records' schema): the base HFile's cells, then the log blocks of `valid` instants in order,
    the last record of a key winning and a DELETE block's key removing it, as
    `HoodieMetadataPayload` merges record-index records (§5.3). With `keys` (binary, sorted)
    only those: of the base file only the data blocks that may hold them. `kind`: the records'
    type (a secondary index's: 7). Vectorised: cells are Arrow arrays, values decoded once per
    distinct value."""
    parts: list[pa.Table] = []
    schema_text: str | None = None

    def add(rows: pa.Array, values: pa.Array | None, deleted: bool) -> None:
        if keys is not None:
            hit = pc.is_in(rows, value_set=keys)
            rows, values = rows.filter(hit), None if values is None else values.filter(hit)
        n = len(rows)
        parts.append(pa.table({"key": rows, "value": values if values is not None else pa.nulls(n, pa.binary()),
                               "deleted": pa.repeat(pa.scalar(deleted), n)}))

    if base is not None:
        where = f"{storage.uri}/{base}"
        index = None
        if keys is not None:
            with storage.open_input(base) as f:
                def read_at(offset: int, length: int) -> bytes:
                    return f.read_at(length, offset)

                index = read_hfile_index(read_at, f.size(), where)
                if index is not None:
                    rows, values = read_row_columns(read_at, index, keys, where)
                    schema_text = index.info.get(b"schema", b"").decode() or None
        if index is None:
            rows, values, info = read_cell_columns(storage.read(base), where)
            schema_text = info.get(b"schema", b"").decode() or None
        add(rows, values, False)
    for path in logs:
        for block in read_log_file(storage.read(path), f"{storage.uri}/{path}", hfile_blocks=True):
            if block.instant not in valid:
                continue
            if isinstance(block, HFileBlock):
                rows, values, info = read_cell_columns(block.content, f"{storage.uri}/{path}")
                schema_text = schema_text or block.header.get(HeaderKey.SCHEMA) or info.get(b"schema", b"").decode()
                add(rows, values, False)
            elif isinstance(block, DeleteBlock):
                add(pa.array([k.encode() for k in block.keys], pa.binary()), None, True)
    if not parts:
        return CELLS.empty_table(), schema_text
    cells = pa.concat_tables(parts)
    if schema_text and cells.num_rows:  # records of another kind are not this partition's: skipped
        kinds = _decoded(cells.column("value").combine_chunks(), schema_text)[1]
        cells = cells.filter(pc.or_(cells.column("deleted"), pa.array(kinds == kind)))
    cells = cells.append_column("_seq", pa.array(np.arange(cells.num_rows, dtype=np.int64)))
    cells = cells.take(pc.sort_indices(cells, [("key", "ascending"), ("_seq", "descending")]))
    keys_sorted = cells.column("key").combine_chunks()
    first = np.ones(cells.num_rows, dtype=bool)
    if cells.num_rows > 1:
        first[1:] = pc.not_equal(keys_sorted.slice(1), keys_sorted.slice(0, cells.num_rows - 1)) \
            .to_numpy(zero_copy_only=False)
    live = cells.filter(pa.array(first)).filter(pc.invert(cells.filter(pa.array(first)).column("deleted")))
    return live.select(["key", "value"]).cast(CELLS), schema_text


def decoded_records(values: pa.Array, schema_text: str) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """The distinct (non-null) `values` decoded as `HoodieMetadataRecord`s, each value's record
    type (-1: null) and each value's place among the distinct ones (null: past the end)."""
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    distinct = pc.unique(values.filter(pa.array(valid))) if len(values) else values
    schema = parsed_schema(schema_text)
    records = [fastavro.schemaless_reader(io.BytesIO(v), schema, None) for v in distinct.to_pylist()]
    kinds = np.array([r.get("type") for r in records] + [-1], dtype=np.int64)
    at = pc.index_in(values, value_set=distinct).fill_null(len(records)).to_numpy(zero_copy_only=False)
    return records, kinds[at], at


def _decoded(values: pa.Array, schema_text: str) -> tuple[list[dict | None], np.ndarray, np.ndarray]:
    """`decoded_records`, each record as its recordIndexMetadata (None for another kind)."""
    records, kinds, at = decoded_records(values, schema_text)
    infos = [r.get("recordIndexMetadata") if r.get("type") == RECORD_INDEX_TYPE else None for r in records]
    return infos, kinds, at


def decode_locations(cells: pa.Table, schema_text: str | None) -> pa.Table:
    """`LOCATIONS` of index cells (each distinct value decoded once)."""
    if not cells.num_rows:
        return LOCATIONS.empty_table()
    infos, _, at = _decoded(cells.column("value").combine_chunks(), schema_text)
    distinct = pa.table({"partition": [i.get("partitionName") or "" for i in infos],
                         "file_id": [decode_file_id(i) for i in infos],
                         "instant_ms": pa.array([i.get("instantTime") for i in infos], pa.int64())})
    taken = distinct.take(pa.array(at))
    return pa.table([cells.column("key").cast(pa.string()), *taken.columns], schema=LOCATIONS)


def tag(index: RecordIndex, files: list[BaseFile], keys: pa.Array, partitions: pa.Array | None = None,
        ) -> tuple[np.ndarray, int]:
    """Tagging by the record index: for each key the position in `files` (the latest base
    files) of the file group the index places it in, -1 for a key it does not hold; and how
    many entries named a file group `files` lacks (stale: such a key is written as new). A
    partitioned index finds a key in its own partition (`partitions`, one per key)."""
    partitioned = index.layout.is_partitioned
    found = index.lookup(keys, partitions if partitioned else None)
    groups = pa.table({"partition": pa.array([f.partition for f in files], pa.string()),
                       "file_id": pa.array([f.file_id for f in files], pa.string()),
                       "_at": pa.array(np.arange(len(files), dtype=np.int64))})
    known = found.join(groups, ["partition", "file_id"], join_type="inner")
    known_keys = known.column("key").combine_chunks()
    if partitioned:  # (a key may live in several partitions: matched with its partition)
        known_keys = pc.binary_join_element_wise(known.column("partition").combine_chunks(), known_keys, "\x00")
        keys = pc.binary_join_element_wise(partitions.cast(pa.string()), keys.cast(pa.string()), "\x00")
    pos = pc.index_in(keys, value_set=known_keys).fill_null(-1) \
        .to_numpy(zero_copy_only=False).astype(np.int64)
    at = known.column("_at").to_numpy() if known.num_rows else np.zeros(1, np.int64)
    return np.where(pos >= 0, at[np.maximum(pos, 0)], -1), found.num_rows - known.num_rows


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
    if index.layout.is_partitioned:  # a key is one record per partition: compared as partition\0key
        entries, rows = (t.set_column(0, "key", pc.binary_join_element_wise(t["partition"], t["key"], "\x00"))
                         for t in (entries.select(["key", "partition", "file_id"]), rows))
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
    schema = arrow_schema_with_meta(timeline.schema_avro(ctx.config.get(TableOptions.CREATE_SCHEMA)))
    visible = Visibility.of(view)
    tasks = []  # (the slice's read, its base instant: a log-only slice's first log's)
    for group in view.file_groups():
        base, logs = view.read_slice(group)
        if base is not None or logs:
            tasks.append((SliceRead(group.partition, group.file_id, base.path if base else None,
                                    base.instant if base else None, tuple(lf.path for lf in logs), 0, visible),
                          base.instant if base else logs[0].base_instant))
    found = (engine.map if engine is not None else lambda f, items: [f(i) for i in items])(
        partial(_group_keys, ctx, schema), tasks)
    return pa.concat_tables([LOCATED.empty_table(), *found])


LOCATED = pa.schema([pa.field("key", pa.string()), pa.field("partition", pa.string()),
                     pa.field("file_id", pa.string()), pa.field("instant", pa.string())])


def _group_keys(ctx, schema: pa.Schema, item: tuple[SliceRead, str]) -> pa.Table:
    task, instant = item
    keys = read_file_group(ctx, task, schema, [KEY], derived_keys=True).rows.column(KEY)
    n = len(keys)
    return pa.table([keys.cast(pa.string()), *(pa.repeat(pa.scalar(v, pa.string()), n)
                                               for v in (task.partition, task.file_id, instant))], schema=LOCATED)
