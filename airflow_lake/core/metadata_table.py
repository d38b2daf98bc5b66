"""The metadata table's `files` partition, read (v8 spec §5.4, §5.9): the file listing Hudi 1.x
writers keep in `.hoodie/metadata/files/` (one file group, `files-0000-0`, of HFile base files
and HFILE_DATA log blocks), merged as `HoodieMetadataPayload` merges it. Readers of Hudi 1.x
tables (Java's, hudi-rs) list a table's files through it when `hoodie.table.metadata.partitions`
holds `files`."""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fastavro

from . import properties
from .formats.hfile import read_hfile, read_hfile_index, read_rows
from .formats.log import DeleteBlock, read_log_file
from .formats.log.blocks import HFileBlock
from .formats.log.framing import HeaderKey
from .storage import Storage
from .timeline.active import ActiveTimeline, timeline_folder
from .view import FileSystemView

MDT = ".hoodie/metadata"
FILES = "files"
RECORD_INDEX = "record_index"
ALL_PARTITIONS = "__all_partitions__"
PARTITION_LIST, FILE_LIST, RECORD_INDEX_TYPE = 1, 2, 5  # `HoodieMetadataRecord.type`
NON_PARTITIONED = "."  # the key of a non-partitioned table's files record
INDEX_DEFS = "hoodie.table.index.defs.path"  # the index definitions (index.json)
INIT_PREFIX = "0000000000000"  # the MDT's partition-initialisation instants: 00000000000000000, ...001


@dataclass
class FileListing:
    """What the `files` partition says: the table's partitions and each one's files (name ->
    size); `instants`: the MDT instants whose records were read."""

    partitions: list[str] = field(default_factory=list)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    instants: list[str] = field(default_factory=list)


def has_files_partition(props: dict[str, str]) -> bool:
    """Whether readers list the table's files through the metadata table (§5.2)."""
    return FILES in listed_partitions(props)


def listed_partitions(props: dict[str, str]) -> list[str]:
    """The MDT partitions readers may use (`hoodie.table.metadata.partitions`, §5.2)."""
    return [p.strip() for p in props.get("hoodie.table.metadata.partitions", "").split(",") if p.strip()]


def inflight_partitions(props: dict[str, str]) -> list[str]:
    """The MDT partitions being built (`hoodie.table.metadata.partitions.inflight`)."""
    return [p.strip() for p in props.get("hoodie.table.metadata.partitions.inflight", "").split(",") if p.strip()]


def index_definitions(storage: Storage, props: dict[str, str]) -> dict[str, dict]:
    """The table's index definitions (`.hoodie/.index_defs/index.json`), by index name."""
    path = props.get(INDEX_DEFS)
    if not path or not storage.exists(path):
        return {}
    return json.loads(storage.read(path)).get("indexDefinitions") or {}


def mdt_timeline(storage: Storage) -> ActiveTimeline:
    """The metadata table's active timeline."""
    mdt_props = properties.load(MdtStorage(storage)).props
    return ActiveTimeline(storage, folder=f"{MDT}/{timeline_folder(mdt_props)}")


def readable_instants(timeline: ActiveTimeline, data_timeline: ActiveTimeline | None = None) -> set[str]:
    """The MDT instants whose records a reader merges (§5.9): completed deltacommits and
    commits (compactions); with `data_timeline`, deltacommits of data-table instants not
    completed there are skipped (Java's rule; hudi-rs reads every completed MDT deltacommit)."""
    valid = {i.time for i in timeline.completed() if i.comparable_action in ("deltacommit", "commit")}
    if data_timeline is not None:
        done = {i.time for i in data_timeline.completed()}
        compactions = {i.time for i in timeline.completed() if i.comparable_action == "commit"}
        valid = {t for t in valid if t in done or data_timeline.is_before_start(t) or t.startswith(INIT_PREFIX)
                 or t in compactions}
    return valid


def partition_view(storage: Storage, timeline: ActiveTimeline, partition: str) -> FileSystemView:
    """The file groups of MDT partition `partition` (`files`, `record_index`, ...)."""
    folder = f"{MDT}/{partition}"
    return FileSystemView(storage, timeline, partition_files={folder: storage.list(folder)})


def read_file_listing(storage: Storage, data_timeline: ActiveTimeline | None = None) -> FileListing:
    """The `files` partition's listing, merged over the latest file slice of `files-0000-0`.
    With `data_timeline`, MDT deltacommits of data-table instants not completed there are
    skipped (Java's rule; hudi-rs reads every completed MDT deltacommit)."""
    timeline = mdt_timeline(storage)
    valid = readable_instants(timeline, data_timeline)
    view = partition_view(storage, timeline, FILES)
    listing = FileListing()
    state: dict[str, dict | None] = {}  # key -> merged filesystemMetadata (None: deleted)
    for group in view.file_groups(f"{MDT}/{FILES}"):
        base, logs = view.read_slice(group)
        listing.instants += merge_files_slice(storage, base.path if base else None, [lf.path for lf in logs],
                                              valid, state)
    partitions = state.get(ALL_PARTITIONS) or {}
    listing.partitions = sorted("" if p == NON_PARTITIONED else p for p, info in partitions.items()
                                if not info["isDeleted"])
    for key, entries in state.items():
        if key == ALL_PARTITIONS or entries is None:
            continue
        name = "" if key == NON_PARTITIONED else key
        listing.files[name] = {f: info["size"] for f, info in entries.items() if not info["isDeleted"]}
    listing.instants = sorted(set(listing.instants))
    return listing


def merge_files_slice(storage: Storage, base: str | None, logs: list[str], valid: set[str],
                      state: dict[str, dict | None]) -> list[str]:
    """Merge one `files` file slice into `state` (key -> filesystemMetadata, None: deleted):
    the base HFile's records, then the log blocks of `valid` instants in order. Returns the
    instants read."""
    return merge_mdt_slice(storage, base, logs, valid, state, *MERGERS[FILES])


def merge_mdt_slice(storage: Storage, base: str | None, logs: list[str], valid: set[str], state: dict[str, Any],
                    pick: Callable[[dict], Any], merge: Callable[[Any, Any], Any], *,
                    keys: list[str] | None = None) -> list[str]:
    """Merge one MDT file slice into `state` (key -> value, None: deleted), as
    `HoodieMetadataPayload` merges (§5.3): the base HFile's records, then the log blocks of
    `valid` instants in order; `pick(record)` is a record's value (None: not this partition's
    kind), `merge(older, newer)` combines two values of a key (a DELETE block's key: None).
    With `keys` (sorted), only those: of the base file only the data blocks that may hold them
    are read. Returns the instants read."""
    read: list[str] = []
    wanted = None if keys is None else set(keys)
    if base is not None:
        where = f"{storage.uri}/{base}"
        if keys is None:
            hfile = read_hfile(storage.read(base), where)
            _merge_cells(hfile.cells, hfile.info.get(b"schema", b"").decode(), state, pick, merge)
        else:
            with storage.open_input(base) as f:
                index = read_hfile_index(lambda offset, length: f.read_at(length, offset), f.size(), where)
                cells = read_rows(lambda offset, length: f.read_at(length, offset), index,
                                  [k.encode() for k in keys], where) if index is not None else None
            if cells is None:  # (a multi-level index: scanned)
                hfile = read_hfile(storage.read(base), where)
                index_info, cells = hfile.info, dict(hfile.cells)
            else:
                index_info = index.info
            _merge_cells(sorted(cells.items()), index_info.get(b"schema", b"").decode(), state, pick, merge, wanted)
        read.append(base.rsplit("_", 1)[-1].split(".")[0])
    for path in logs:
        for block in read_log_file(storage.read(path), f"{storage.uri}/{path}", hfile_blocks=True):
            if block.instant not in valid:
                continue
            if isinstance(block, HFileBlock):
                hfile = block.hfile()
                schema = block.header.get(HeaderKey.SCHEMA) or hfile.info.get(b"schema", b"").decode()
                _merge_cells(hfile.cells, schema, state, pick, merge, wanted)
            elif isinstance(block, DeleteBlock):
                for key in block.keys:
                    if wanted is None or key in wanted:
                        state[key] = None
            read.append(block.instant)
    return read


def _merge_cells(cells: list[tuple[bytes, bytes]], schema_text: str, state: dict[str, Any],
                 pick: Callable[[dict], Any], merge: Callable[[Any, Any], Any], wanted: set[str] | None = None) -> None:
    """Merge an HFile's records into `state` (the key is the cell's row: the Avro `key` field
    is written empty); with `wanted`, only those keys (the others are not decoded)."""
    schema = parsed_schema(schema_text)
    for row, value in cells:
        key = row.decode()
        if wanted is not None and key not in wanted:
            continue
        picked = pick(fastavro.schemaless_reader(io.BytesIO(value), schema, None))
        if picked is not None:
            older = state.get(key)
            state[key] = picked if older is None else merge(older, picked)


@functools.lru_cache(maxsize=8)
def parsed_schema(schema_text: str):
    """A writer schema text, parsed (cached: every block of an MDT carries the same)."""
    return fastavro.parse_schema(json.loads(schema_text))


def _files_entries(record: dict) -> dict | None:
    """A type 1 or 2 record's filesystemMetadata."""
    return (record.get("filesystemMetadata") or {}) if record.get("type") in (PARTITION_LIST, FILE_LIST) else None


def _merge(older: dict | None, newer: dict) -> dict:
    """`HoodieMetadataPayload`'s merge of two file lists (§5.3): a tombstone removes the name
    from the older list (and is kept only when the older list lacks it, to cancel a base
    entry later); names in both keep the larger size."""
    if older is None:
        return dict(newer)
    out = dict(older)
    for name, info in newer.items():
        if info["isDeleted"]:
            if name in out and not out[name]["isDeleted"]:
                del out[name]
            else:
                out[name] = info
        elif name in out and not out[name]["isDeleted"]:
            out[name] = {"size": max(out[name]["size"], info["size"]), "isDeleted": False}
        else:
            out[name] = info
    return out


# MDT partition -> how its records merge (§5.3): the value a record holds (None: not of this
# partition) and the merge of an older and a newer value of one key
MERGERS: dict[str, tuple[Callable[[dict], Any], Callable[[Any, Any], Any]]] = {
    FILES: (_files_entries, _merge),
}


class MdtStorage:
    """The table's storage seen from the metadata table's root (for `properties.load`)."""

    def __init__(self, storage: Storage):
        self.storage = storage
        self.uri = f"{storage.uri}/{MDT}"

    def exists(self, path: str) -> bool:
        return self.storage.exists(f"{MDT}/{path}")

    def read(self, path: str, **kwargs) -> bytes:
        return self.storage.read(f"{MDT}/{path}", **kwargs)

    def create(self, path: str, data: bytes) -> bool:
        return self.storage.create(f"{MDT}/{path}", data)
