"""Secondary indexes (v8 spec §5.5c): the MDT partitions `secondary_index_<name>` that map a
column's value to the record keys holding it, one HFile cell `esc(value)$esc(key)` per record.

Read: `SecondaryIndex.record_keys` answers an equality on the indexed column by reading only the
file group the value hashes to (V2; every group of a V1 index). Kept current: a write's touched
file groups compare their records' (key, value) pairs before and after the write in tasks
(`group_changes`, Java's before/after diff), and one task per index file group appends the
inserted cells and a DELETE block of the removed ones (`write_changes`). Built: `init_files`
from a scan of the table's latest slices (`scan_values`).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from functools import partial

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidTableError, UnsupportedFeatureError
from ..formats.hfile import write_hfile_columns
from ..formats.log import BlockType, HeaderKey, delete_block_content, encode_block
from ..formats.log.blocks import wrap_ordering
from ..mdt_files import empty_delete, index_base_hfile, partition_metafile, without_meta
from ..merge import KEY
from ..metadata_table import (
    MDT,
    index_definitions,
    listed_partitions,
    mdt_timeline,
    parsed_schema,
    partition_view,
    readable_instants,
)
from ..model import FileGroup, WriteStat
from ..slice_reader import SliceQuery, SliceRead, Visibility, read_file_group
from ..storage import Storage
from ..timeline.active import ActiveTimeline
from ..timeline.metadata import CommitMetadata
from ..view import FileSystemView
from .record_index import RecordIndex, decoded_records, file_group_index, slice_cells

PREFIX = "secondary_index_"
FILE_ID_PREFIX = "secondary-index-"
SECONDARY_INDEX_TYPE = 7  # `HoodieMetadataRecord.type`
NULL = "\x00"  # a null value's text (unescaped)
SLOT = "_al_si_slot"  # work column: index number * MAX_GROUPS + its file group
MAX_GROUPS = 1 << 20
CHANGES = pa.schema([pa.field(SLOT, pa.int64()), pa.field("key", pa.string()), pa.field("deleted", pa.bool_())])
MIN_GROUPS = 10  # Java's minimum (every fixture has 10)


@dataclass(frozen=True)
class SecondaryIndexDef:
    """One secondary index: its MDT partition, its source column and its version (V1: a v8
    table's, whose keys spread over every group; V2: a value's keys in one group)."""

    partition: str
    column: str
    version: str = "V2"

    @property
    def name(self) -> str:
        return self.partition[len(PREFIX):]

    def file_id(self, k: int) -> str:
        return f"{FILE_ID_PREFIX}{self.name.replace('_', '-')}-{k:04d}-0"


def definitions(storage: Storage, props: dict[str, str], *, listed_only: bool = True) -> list[SecondaryIndexDef]:
    """The table's secondary indexes of one source column (identity function) that index.json
    defines and `hoodie.table.metadata.partitions` lists (`listed_only`)."""
    listed = set(listed_partitions(props))
    out = []
    for name, d in index_definitions(storage, props).items():
        fields = d.get("sourceFields") or []
        if name.startswith(PREFIX) and d.get("indexType") == "secondary_index" and len(fields) == 1 \
                and (d.get("indexFunction") or "identity") == "identity" and (name in listed or not listed_only):
            out.append(SecondaryIndexDef(name, fields[0], d.get("version") or "V1"))
    return sorted(out, key=lambda d: d.partition)


def supported_type(arrow_type: pa.DataType) -> bool:
    """Whether we write a column type's values as Java does: strings, integers, booleans and
    dates (as their epoch day); not timestamps, decimals or floats (Java's `toString`)."""
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type) or \
        pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type) or pa.types.is_date32(arrow_type)


def value_texts(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The text form of indexed values (nulls stay null): a date's epoch day, an integer's
    digits, a boolean's `true`/`false`, a string as it is."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_date32(values.type):
        values = values.cast(pa.int32())
    elif not supported_type(values.type):
        raise UnsupportedFeatureError(f"a secondary index on a {values.type} column is not supported "
                                      "(strings, integers, booleans and dates are)")
    return values.cast(pa.string())


def escaped(texts: pa.Array) -> pa.Array:
    """`esc(s)`: a backslash before every `\\`, `$` and NUL; a null as the single NUL."""
    out = pc.replace_substring(texts, "\\", "\\\\")
    out = pc.replace_substring(out, "$", "\\$")
    out = pc.replace_substring(out, NULL, "\\" + NULL)
    return out.fill_null(NULL)


def unescaped(texts: pa.Array) -> pa.Array:
    return pc.replace_substring_regex(texts, r"(?s)\\(.)", r"\1")


def index_keys(values: pa.Array | pa.ChunkedArray, record_keys: pa.Array | pa.ChunkedArray,
               ) -> tuple[pa.Array, pa.Array]:
    """The cells' keys `esc(value)$esc(key)` of records, and their prefixes `esc(value)$`."""
    v = escaped(value_texts(values))
    k = escaped((record_keys.combine_chunks() if isinstance(record_keys, pa.ChunkedArray) else record_keys)
                .cast(pa.string()))
    return pc.binary_join_element_wise(v, k, "$"), pc.binary_join_element_wise(v, "", "$")


def key_groups(defn: SecondaryIndexDef, keys: pa.Array, prefixes: pa.Array, groups: int) -> np.ndarray:
    """The file group of each cell: V2 hashes its value's prefix, V1 the whole key."""
    if not len(keys):
        return np.zeros(0, np.int64)
    return file_group_index(prefixes if defn.version != "V1" else keys, groups)


def _value(schema_text: str, file_name: str | None) -> bytes:
    """The `HoodieMetadataRecord` of every live cell (type 7, `isDeleted` false)."""
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed_schema(schema_text), {
        "_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
        "_hoodie_partition_path": None, "_hoodie_file_name": file_name, "key": "", "type": SECONDARY_INDEX_TYPE,
        "filesystemMetadata": None, "BloomFilterMetadata": None, "ColumnStatsMetadata": None,
        "recordIndexMetadata": None, "SecondaryIndexMetadata": {"isDeleted": False}})
    return buf.getvalue()


def _sorted_binary(keys: pa.Array) -> pa.Array:
    keys = keys.cast(pa.binary())
    return keys.take(pc.array_sort_indices(keys))


# -- reading ---------------------------------------------------------------------------------------
@dataclass
class SecondaryIndex:
    """One secondary index as of the MDT's latest completed instant (with `data_timeline`:
    Java's rule for which MDT deltacommits count)."""

    storage: Storage
    defn: SecondaryIndexDef
    view: FileSystemView
    valid: set[str]
    groups: dict[int, FileGroup]

    @classmethod
    def open(cls, storage: Storage, defn: SecondaryIndexDef, data_timeline: ActiveTimeline | None = None,
             ) -> SecondaryIndex:
        timeline = mdt_timeline(storage)
        view = partition_view(storage, timeline, defn.partition)
        groups: dict[int, FileGroup] = {}
        for group in view.file_groups(f"{MDT}/{defn.partition}"):
            head = group.file_id.rsplit("-", 2)
            if not group.file_id.startswith(FILE_ID_PREFIX) or len(head) != 3 or not head[1].isdigit():
                continue
            groups[int(head[1])] = group
        if not groups or sorted(groups) != list(range(len(groups))):
            raise InvalidTableError(f"table {storage.uri}: secondary index {defn.partition}'s file groups are not "
                                    f"numbered 0..N-1: {sorted(groups)}")
        return cls(storage, defn, view, readable_instants(timeline, data_timeline), groups)

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    def group_keys(self, k: int) -> pa.Array:
        """File group `k`'s live cell keys (strings, sorted by their bytes)."""
        base, logs = self.view.read_slice(self.groups[k])
        cells, schema_text = slice_cells(self.storage, base.path if base else None, [lf.path for lf in logs],
                                         self.valid, kind=SECONDARY_INDEX_TYPE)
        if cells.num_rows and schema_text:  # a record marked isDeleted is a tombstone too (§5.3)
            records, _, at = decoded_records(cells.column("value").combine_chunks(), schema_text)
            gone = np.array([bool((r.get("SecondaryIndexMetadata") or {}).get("isDeleted")) for r in records]
                            + [False])
            cells = cells.filter(pa.array(~gone[at]))
        return cells.column("key").combine_chunks().cast(pa.string())

    def entries(self) -> pa.Table:
        """Every live cell key and the file group holding it."""
        parts = [pa.table({"key": pa.array([], pa.string()), "group": pa.array([], pa.int64())})]
        for k in sorted(self.groups):
            keys = self.group_keys(k)
            parts.append(pa.table({"key": keys, "group": pa.repeat(pa.scalar(k, pa.int64()), len(keys))}))
        return pa.concat_tables(parts)

    def record_keys(self, values: pa.Array) -> pa.Array:
        """The record keys whose indexed value is one of `values` (typed as the column; a null
        stands for IS NULL), reading only the file groups those values hash to (V2)."""
        prefixes = pc.unique(pc.binary_join_element_wise(escaped(value_texts(values)), "", "$"))
        if self.defn.version == "V1":
            wanted = {k: prefixes for k in self.groups}
        else:
            where = file_group_index(prefixes, self.num_groups)
            wanted = {int(k): prefixes.filter(pa.array(where == k)) for k in np.unique(where)}
        found = [pa.array([], pa.string())]
        for k, chosen in sorted(wanted.items()):
            keys = self.group_keys(k)
            for prefix in chosen.to_pylist():
                hit = keys.filter(pc.starts_with(keys, prefix))
                found.append(unescaped(pc.utf8_slice_codeunits(hit, len(prefix))))
        return pc.unique(pa.concat_arrays(found))


def matching_groups(storage: Storage, props: dict[str, str], data_timeline: ActiveTimeline,
                    disjuncts: list[list[tuple]], types: dict[str, pa.DataType]) -> set[tuple[str, str]] | None:
    """The (partition, file id) of the file groups that may hold rows passing `disjuncts`
    (DNF), by the secondary indexes (§5.5c readers): each disjunct's equality or IN on an
    indexed column gives the record keys holding those values, the record index their file
    groups. None when some disjunct has no such predicate (or the indexes cannot answer)."""
    indexed = {d.column: d for d in definitions(storage, props)}
    wanted: list[tuple[SecondaryIndexDef, list]] = []
    for conj in disjuncts:
        hit = next(((indexed[c], [v] if op in ("=", "==") else list(v)) for c, op, v in conj
                    if c in indexed and c in types and op in ("=", "==", "in")), None)
        if hit is None or any(v is None for v in hit[1]):
            return None
        wanted.append(hit)
    try:
        keys = [SecondaryIndex.open(storage, d, data_timeline).record_keys(pa.array(values, types[d.column]))
                for d, values in wanted]
        found = RecordIndex.open(storage, props, data_timeline).lookup(pa.concat_arrays(keys))
    except (InvalidTableError, UnsupportedFeatureError, pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return None
    return set(zip(found.column("partition").to_pylist(), found.column("file_id").to_pylist(), strict=True))


# -- keeping it current ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChangeSpec:
    """What every diff task of one write shares: the table, its schema (meta fields first) and
    the indexes kept, each with its number of file groups."""

    ctx: object
    schema: pa.Schema
    indexes: tuple[tuple[SecondaryIndexDef, int], ...]


def group_changes(spec: ChangeSpec, item: tuple[SliceRead | None, SliceRead | None]) -> pa.Table:
    """One touched file group's index changes (`CHANGES`): the cells of its records before the
    write (`item[0]`, None: a new group) that are gone after it (`item[1]`, None: replaced),
    deleted; those after it that were not there before, inserted."""
    before, after = item
    columns = [KEY] + sorted({d.column for d, _ in spec.indexes})
    old, new = (_records(spec, task, columns) for task in (before, after))
    parts = [CHANGES.empty_table()]
    for i, (defn, groups) in enumerate(spec.indexes):
        old_keys, old_prefix = index_keys(old.column(defn.column), old.column(KEY))
        new_keys, new_prefix = index_keys(new.column(defn.column), new.column(KEY))
        for keys, prefixes, other, deleted in ((new_keys, new_prefix, old_keys, False),
                                              (old_keys, old_prefix, new_keys, True)):
            changed = pc.invert(pc.is_in(keys, value_set=other))
            keys, prefixes = keys.filter(changed), prefixes.filter(changed)
            slots = i * MAX_GROUPS + key_groups(defn, keys, prefixes, groups)
            parts.append(pa.table([pa.array(slots, pa.int64()), keys, pa.repeat(pa.scalar(deleted), len(keys))],
                                  schema=CHANGES))
    return pa.concat_tables(parts)


def _records(spec: ChangeSpec, task: SliceRead | None, columns: list[str]) -> pa.Table:
    if task is None:
        return pa.schema([spec.schema.field(c) for c in columns]).empty_table()
    return read_file_group(spec.ctx, task, spec.schema, columns, derived_keys=True, logs_must_exist=True).rows


def diff_tasks(view: FileSystemView, stats: list[WriteStat], replaced: dict[str, list[str]] | None, instant: str,
               ) -> list[tuple[SliceRead | None, SliceRead | None]]:
    """The (before, after) slice reads of every file group a write touched: its slice in `view`
    (the timeline before the write) and the one its new files (`stats`) make; a replaced group
    has no after."""
    before_visible = Visibility.of(view)
    after_visible = Visibility(tuple(sorted({*before_visible.completed, instant})), None,
                               before_visible.first_write or instant)
    written: dict[tuple[str, str], list[str]] = {}
    for s in stats:
        written.setdefault((s.partition, s.file_id), []).append(s.path)
    for p, ids in (replaced or {}).items():
        for f in ids:
            written.setdefault((p, f), [])
    tasks = []
    for (partition, file_id), paths in sorted(written.items()):
        group = view.groups.get(partition, {}).get(file_id)
        old = SliceRead.of(view, group, before_visible, SliceQuery()) if group is not None else None
        old = old if old is not None and (old.base or old.logs) else None
        new_base = next((p for p in paths if not p.rsplit("/", 1)[-1].startswith(".")), None)
        new_logs = tuple(p for p in paths if p.rsplit("/", 1)[-1].startswith("."))
        if new_base is not None:
            new = SliceRead(partition, file_id, new_base, instant, new_logs, 0, after_visible)
        elif new_logs:
            new = SliceRead(partition, file_id, old.base if old else None, old.base_instant if old else None,
                            (old.logs if old else ()) + new_logs, 0, after_visible)
        else:
            new = None
        tasks.append((old, new))
    return tasks


@dataclass(frozen=True)
class IndexWrite:
    """What every index-writing task of one MDT deltacommit shares."""

    ctx: object  # the table's `TableContext`
    instant: str
    schema_text: str
    indexes: tuple[tuple[SecondaryIndexDef, int], ...]


def write_changes(w: IndexWrite, rows: pa.Table) -> WriteStat | None:
    """One index file group's part of a write (rows of `CHANGES` of one slot): its log file of
    the cells inserted and deleted, a cell both inserted and deleted (a record moved between
    file groups) left alone; None when nothing changes."""
    slot = int(rows.column(SLOT)[0].as_py())
    defn, _ = w.indexes[slot // MAX_GROUPS]
    deleted = rows.column("deleted").combine_chunks()
    keys = rows.column("key").combine_chunks()
    added, gone = pc.unique(keys.filter(pc.invert(deleted))), pc.unique(keys.filter(deleted))
    added, gone = (added.filter(pc.invert(pc.is_in(added, value_set=gone))),
                   gone.filter(pc.invert(pc.is_in(gone, value_set=added))))
    if not len(added) and not len(gone):
        return None
    return append_log(w.ctx.storage, defn, slot % MAX_GROUPS, w.instant, w.schema_text, added, gone)


def log_blocks(instant: str, schema_text: str, partition: str, added: pa.Array, gone: pa.Array) -> bytes:
    """What one MDT deltacommit appends to one secondary-index file group: an HFILE_DATA block
    of the `added` cells, a DELETE block of the `gone` ones (each only when it has any)."""
    out = b""
    header = {HeaderKey.SCHEMA: schema_text, HeaderKey.INSTANT_TIME: instant}
    if len(added):
        rows = _sorted_binary(added)
        values = pa.repeat(pa.scalar(_value(schema_text, None), pa.binary()), len(rows))
        out += encode_block(BlockType.HFILE_DATA, header,
                            write_hfile_columns(rows, values, {b"schema": schema_text.encode()}))
    if len(gone):
        keys = sorted(gone.to_pylist(), key=str.encode)
        out += encode_block(BlockType.DELETE, header, delete_block_content(
            keys, [partition] * len(keys), [wrap_ordering(None, None)] * len(keys)))
    return out


def append_log(storage: Storage, defn: SecondaryIndexDef, k: int, instant: str, schema_text: str,
               added: pa.Array, gone: pa.Array) -> WriteStat:
    """Index file group `k`'s log file of the MDT deltacommit at `instant`; its write stat."""
    data = log_blocks(instant, schema_text, defn.partition, added, gone)
    file_id = defn.file_id(k)
    name = f".{file_id}_{instant}.log.1_{k}-{int(instant[-9:])}-{k}"
    storage.write(f"{MDT}/{defn.partition}/{name}", data)
    return WriteStat(file_id, defn.partition, f"{defn.partition}/{name}", instant, num_writes=len(added),
                     num_update_writes=len(added), num_deletes=len(gone), total_write_bytes=len(data),
                     file_size=len(data), delta={"logVersion": 1, "logOffset": 0, "baseFile": "", "logFiles": [name]})


# -- building it and bringing it in line -------------------------------------------------------------------
def scan_values(ctx, view: FileSystemView, columns: list[str], schema: pa.Schema, engine=None) -> pa.Table:
    """`KEY` and `columns` (indexed columns: one scan serves several indexes) of every live
    record of `view`'s latest snapshot, file group by file group in `engine`'s tasks."""
    columns = [KEY, *dict.fromkeys(c for c in columns if c != KEY)]
    visible = Visibility.of(view)
    tasks = [task for task in (SliceRead.of(view, g, visible, SliceQuery()) for g in view.file_groups())
             if task.base is not None or task.logs]
    run = engine.map if engine is not None else (lambda f, items: [f(i) for i in items])
    found = run(partial(_scan_task, ctx, schema, columns), tasks)
    empty = pa.schema([schema.field(c) for c in columns]).empty_table()
    return pa.concat_tables([empty, *found]) if found else empty


def _scan_task(ctx, schema: pa.Schema, columns: list[str], task: SliceRead) -> pa.Table:
    return read_file_group(ctx, task, schema, columns, derived_keys=True).rows


def init_files(defn: SecondaryIndexDef, instant: str, rows: pa.Table, groups: int, schema_text: str,
               ) -> tuple[dict[str, bytes], CommitMetadata]:
    """The files of the index's build at `instant` from `rows` (`KEY` and its column: every
    live record): per file group a base HFile of its cells (when it has any) and a log file of
    one empty DELETE block, as Java initialises a partition (§5.6); the commit metadata."""
    keys, prefixes = index_keys(rows.column(defn.column), rows.column(KEY))
    where = key_groups(defn, keys, prefixes, groups)
    files = dict([partition_metafile(defn.partition, instant)])
    stats = []
    for k in range(groups):
        file_id = defn.file_id(k)
        files[f"{MDT}/{defn.partition}/.{file_id}_{instant}.log.1_0-0-0"] = empty_delete(instant)
        cells = _sorted_binary(pc.unique(keys.filter(pa.array(where == k))))
        if not len(cells):
            continue
        name = f"{file_id}_{k}-0-{k}_{instant}.hfile"
        value = pa.scalar(_value(schema_text, name), pa.binary())
        base = index_base_hfile(cells, pa.repeat(value, len(cells)), schema_text)
        files[f"{MDT}/{defn.partition}/{name}"] = base
        stats.append(WriteStat(file_id, defn.partition, f"{defn.partition}/{name}", None, num_writes=len(cells),
                               num_inserts=len(cells), total_write_bytes=len(base), file_size=len(base)))
    return files, CommitMetadata.from_stats("BULK_INSERT_PREPPED", stats, {"schema": without_meta(schema_text)})


def check(index: SecondaryIndex, rows: pa.Table) -> tuple[int, list[str], list[str]]:
    """`index` against `rows` (`KEY` and its column: every live record, a scan): the cells
    expected, those missing from it (or in another file group) and those no row implies."""
    defn = index.defn
    keys, prefixes = index_keys(rows.column(defn.column), rows.column(KEY))
    want = pa.table({"key": keys, "group": pa.array(key_groups(defn, keys, prefixes, index.num_groups))})
    have = index.entries()
    joined_want = pc.binary_join_element_wise(want["key"], want["group"].cast(pa.string()), "\x01")
    joined_have = pc.binary_join_element_wise(have["key"], have["group"].cast(pa.string()), "\x01")
    missing = want["key"].filter(pc.invert(pc.is_in(joined_want, value_set=joined_have))).to_pylist()
    stray = have["key"].filter(pc.invert(pc.is_in(joined_have, value_set=joined_want))).to_pylist()
    return want.num_rows, sorted(missing), sorted(stray)


def resync(index: SecondaryIndex, rows: pa.Table, instant: str, schema_text: str) -> list[WriteStat]:
    """Bring `index` in line with `rows` (`KEY` and the column of every live record, a scan)
    by log files of the MDT deltacommit at `instant`: missing cells inserted, stray ones
    deleted (after a rollback or restore undid a write an MDT compaction had merged)."""
    defn = index.defn
    keys, prefixes = index_keys(rows.column(defn.column), rows.column(KEY))
    want = key_groups(defn, keys, prefixes, index.num_groups)
    stats = []
    for k in sorted(index.groups):
        have = index.group_keys(k)
        expected = pc.unique(keys.filter(pa.array(want == k)))
        added = expected.filter(pc.invert(pc.is_in(expected, value_set=have)))
        gone = have.filter(pc.invert(pc.is_in(have, value_set=expected)))
        if len(added) or len(gone):
            stats.append(append_log(index.storage, defn, k, instant, schema_text, added, gone))
    return stats
