"""The metadata table's `files` partition, read (v8 spec §5.4, §5.9): the file listing Hudi 1.x
writers keep in `.hoodie/metadata/files/` (one file group, `files-0000-0`, of HFile base files
and HFILE_DATA log blocks), merged as `HoodieMetadataPayload` merges it. Readers of Hudi 1.x
tables (Java's, hudi-rs) list a table's files through it when `hoodie.table.metadata.partitions`
holds `files`."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import fastavro

from . import properties
from .formats.hfile import HFile, read_hfile
from .formats.log import DeleteBlock, read_log_file
from .formats.log.blocks import HFileBlock
from .formats.log.framing import HeaderKey
from .storage import Storage
from .timeline.active import ActiveTimeline, timeline_folder
from .view import FileSystemView

MDT = ".hoodie/metadata"
FILES = "files"
ALL_PARTITIONS = "__all_partitions__"
PARTITION_LIST, FILE_LIST = 1, 2
NON_PARTITIONED = "."  # the key of a non-partitioned table's files record
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
    listed = [p.strip() for p in props.get("hoodie.table.metadata.partitions", "").split(",")]
    return FILES in listed


def read_file_listing(storage: Storage, data_timeline: ActiveTimeline | None = None) -> FileListing:
    """The `files` partition's listing, merged over the latest file slice of `files-0000-0`.
    With `data_timeline`, MDT deltacommits of data-table instants not completed there are
    skipped (Java's rule; hudi-rs reads every completed MDT deltacommit)."""
    mdt_props = properties.load(MdtStorage(storage)).props
    timeline = ActiveTimeline(storage, folder=f"{MDT}/{timeline_folder(mdt_props)}")
    valid = {i.time for i in timeline.completed() if i.comparable_action in ("deltacommit", "commit")}
    if data_timeline is not None:
        done = {i.time for i in data_timeline.completed()}
        compactions = {i.time for i in timeline.completed() if i.comparable_action == "commit"}
        valid = {t for t in valid if t in done or data_timeline.is_before_start(t) or t.startswith(INIT_PREFIX)
                 or t in compactions}
    partition = f"{MDT}/{FILES}"
    view = FileSystemView(storage, timeline, partition_files={partition: storage.list(partition)})
    listing = FileListing()
    state: dict[str, dict | None] = {}  # key -> merged filesystemMetadata (None: deleted)
    for group in view.file_groups(partition):
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
    read: list[str] = []
    if base is not None:
        hfile = read_hfile(storage.read(base), f"{storage.uri}/{base}")
        for key, record in _records(hfile, hfile.info.get(b"schema", b"").decode()):
            state[key] = _merge(state.get(key), record)
        read.append(base.rsplit("_", 1)[-1].split(".")[0])
    for path in logs:
        for block in read_log_file(storage.read(path), f"{storage.uri}/{path}", hfile_blocks=True):
            if block.instant not in valid:
                continue
            if isinstance(block, HFileBlock):
                hfile = block.hfile()
                schema = block.header.get(HeaderKey.SCHEMA) or hfile.info.get(b"schema", b"").decode()
                for key, record in _records(hfile, schema):
                    state[key] = _merge(state.get(key), record)
            elif isinstance(block, DeleteBlock):
                for key in block.keys:
                    state[key] = None
            read.append(block.instant)
    return read


def _records(hfile: HFile, schema_text: str):
    """(key, filesystemMetadata) of the type 1 and 2 records of an HFile (the key is the cell's
    row: the Avro `key` field is written empty)."""
    schema = fastavro.parse_schema(json.loads(schema_text))
    for row, value in hfile.cells:
        record = fastavro.schemaless_reader(io.BytesIO(value), schema, None)
        if record.get("type") in (PARTITION_LIST, FILE_LIST):
            yield row.decode(), record.get("filesystemMetadata") or {}


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
