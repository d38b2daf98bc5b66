"""The LSM archived timeline of layout 2 (table versions 8 and 9, v8 spec §3):
`.hoodie/timeline/history/` holds parquet files of `HoodieLSMTimelineInstant` rows
(`<minT>_<maxT>_<level>.parquet`), `manifest_<N>` files listing the valid ones, and `_version_`
naming the latest manifest.

Writing follows Java's crash-safe order: the data file, then the next manifest, then
`_version_`; a crash leaves at most an unreferenced file, which readers ignore. Compaction
merges 10 files of a level into one of the next; old manifests and files no kept manifest
lists are cleaned after."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidTableError
from ..storage import Storage

VERSION_FILE = "_version_"
MANIFEST = re.compile(r"^manifest_([0-9]+)$")
DATA_FILE = re.compile(r"^([0-9]+)_([0-9]+)_([0-9])\.parquet$")
BATCH = 10  # hoodie.timeline.compaction.batch.size
MAX_BATCH_BYTES = 1000 * 1024 * 1024
KEEP_MANIFESTS = 3

# `HoodieLSMTimelineInstant`, as parquet-avro writes it (the Avro schema in the footer)
AVRO_SCHEMA = {
    "type": "record", "name": "HoodieLSMTimelineInstant", "namespace": "org.apache.hudi.avro.model",
    "fields": [
        {"name": "instantTime", "type": ["null", "string"], "default": None},
        {"name": "completionTime", "type": ["null", "string"], "default": None},
        {"name": "action", "type": ["null", "string"], "default": None},
        {"name": "metadata", "type": ["null", "bytes"], "default": None},
        {"name": "plan", "type": ["null", "bytes"], "default": None},
        {"name": "version", "type": "int", "default": 1},
    ],
}
SCHEMA = pa.schema([
    pa.field("instantTime", pa.string()), pa.field("completionTime", pa.string()), pa.field("action", pa.string()),
    pa.field("metadata", pa.binary()), pa.field("plan", pa.binary()), pa.field("version", pa.int32(), nullable=False),
], metadata={"parquet.avro.schema": json.dumps(AVRO_SCHEMA), "writer.model.name": "avro"})


@dataclass(frozen=True)
class LsmInstant:
    """One archived (completed) instant: its requested and completion times, completed action,
    the raw bytes of its completed state file and of its plan."""

    time: str
    completion: str | None
    action: str
    metadata: bytes | None
    plan: bytes | None


def is_history(storage: Storage, folder: str) -> bool:
    """Whether `folder` holds an LSM history (a `_version_` or a manifest)."""
    return any(name == VERSION_FILE or MANIFEST.match(name) for name, _ in storage.list_names(folder))


def latest_version(storage: Storage, folder: str) -> int:
    """The latest manifest version: `_version_`, else the largest `manifest_<N>` (a crash
    between deleting and writing `_version_`), else 0 (no history)."""
    try:
        text = storage.read(f"{folder}/{VERSION_FILE}").decode().strip()
        if text.isdigit():
            return int(text)
    except FileNotFoundError:
        pass
    found = [int(m.group(1)) for name, _ in storage.list_names(folder) if (m := MANIFEST.match(name))]
    return max(found, default=0)


def manifest(storage: Storage, folder: str, version: int) -> list[dict]:
    """The files (`fileName`, `fileLen`) manifest `version` lists ([] for version 0); a
    missing or malformed manifest is an `InvalidTableError` naming it."""
    if version == 0:
        return []
    path = f"{folder}/manifest_{version}"
    try:
        doc = json.loads(storage.read(path))
        return [f for f in doc.get("files") or [] if not f["fileName"].endswith(".tmp")]
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise InvalidTableError(f"table {storage.uri}: the archived timeline's {path} is unreadable ({e}); "
                                "restore it or the _version_ naming it") from e


def read_history(storage: Storage, folder: str) -> list[LsmInstant]:
    """Every archived instant of the latest manifest, oldest first."""
    out: dict[tuple[str, str], LsmInstant] = {}
    for entry in manifest(storage, folder, latest_version(storage, folder)):
        for instant in _read_rows(storage, f"{folder}/{entry['fileName']}"):
            out[(instant.time, instant.action)] = instant
    return sorted(out.values(), key=lambda i: (i.time, i.action))


def append(storage: Storage, folder: str, instants: list[LsmInstant]) -> str:
    """Archive `instants`: a level-0 file, the next manifest, `_version_` (in that order);
    returns the new file's name."""
    instants = sorted(instants, key=lambda i: i.time)
    name = f"{instants[0].time}_{instants[-1].time}_0.parquet"
    size = _write_rows(storage, f"{folder}/{name}", instants)
    version = latest_version(storage, folder)
    files = manifest(storage, folder, version) + [{"fileName": name, "fileLen": size}]
    _publish(storage, folder, version + 1, files)
    return name


def compact(storage: Storage, folder: str, batch: int = BATCH) -> int:
    """Merge the first `batch` files of a level that has at least `batch` into one file of the
    next level, level by level (Java's `LSMTimelineWriter.compactAndClean`); then keep the
    newest `3 + levels compacted` manifests and the files they list. Returns the levels merged."""
    merged = 0
    level = 0
    while True:
        version = latest_version(storage, folder)
        files = manifest(storage, folder, version)
        at_level = sorted(f["fileName"] for f in files if _level(f["fileName"]) == level)
        if len(at_level) < batch:
            if not any(_level(f["fileName"]) > level for f in files):
                break
            level += 1
            continue
        chosen, total = [], 0
        sizes = {f["fileName"]: f["fileLen"] for f in files}
        for name in at_level[:batch]:
            chosen.append(name)
            total += sizes[name]
            if total > MAX_BATCH_BYTES and len(chosen) >= 2:
                break
        rows = [i for name in chosen for i in _read_rows(storage, f"{folder}/{name}")]
        lo = min(DATA_FILE.match(n).group(1) for n in chosen)
        hi = max(DATA_FILE.match(n).group(2) for n in chosen)
        out = f"{lo}_{hi}_{level + 1}.parquet"
        size = _write_rows(storage, f"{folder}/{out}", rows)
        kept = [f for f in files if f["fileName"] not in chosen] + [{"fileName": out, "fileLen": size}]
        _publish(storage, folder, version + 1, kept)
        merged += 1
        level += 1
    _clean(storage, folder, KEEP_MANIFESTS + merged)
    return merged


def _clean(storage: Storage, folder: str, keep: int) -> None:
    """Delete manifests older than the newest `keep`, then data files no kept manifest lists."""
    names = [name for name, _ in storage.list_names(folder)]
    versions = sorted(int(m.group(1)) for n in names if (m := MANIFEST.match(n)))
    kept = versions[-keep:]
    for v in versions[:-keep]:
        storage.delete(f"{folder}/manifest_{v}")
    listed = {f["fileName"] for v in kept for f in manifest(storage, folder, v)}
    for name in names:
        if DATA_FILE.match(name) and name not in listed:
            storage.delete(f"{folder}/{name}")


def _level(name: str) -> int:
    m = DATA_FILE.match(name)
    return int(m.group(3)) if m else -1


def _publish(storage: Storage, folder: str, version: int, files: list[dict]) -> None:
    """`manifest_<version>` (as Jackson's pretty printer writes it), then `_version_`."""
    items = [f'{{\n    "fileName" : "{f["fileName"]}",\n    "fileLen" : {f["fileLen"]}\n  }}' for f in files]
    text = '{\n  "files" : [ ' + ", ".join(items) + (" ]\n}" if items else "]\n}")
    storage.write(f"{folder}/manifest_{version}", text.encode())
    storage.delete(f"{folder}/{VERSION_FILE}")
    storage.write(f"{folder}/{VERSION_FILE}", str(version).encode())


def _write_rows(storage: Storage, path: str, instants: list[LsmInstant]) -> int:
    table = pa.table({
        "instantTime": [i.time for i in instants], "completionTime": [i.completion for i in instants],
        "action": [i.action for i in instants], "metadata": [i.metadata for i in instants],
        "plan": [i.plan for i in instants], "version": pa.array([1] * len(instants), pa.int32()),
    }, schema=SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink)
    data = sink.getvalue()
    storage.write(path, data)
    return len(data)


def _read_rows(storage: Storage, path: str) -> list[LsmInstant]:
    try:
        table = pq.read_table(io.BytesIO(storage.read(path)))
    except (FileNotFoundError, pa.ArrowException, OSError) as e:
        raise InvalidTableError(f"table {storage.uri}: the archived timeline's {path} is unreadable ({e})") from e
    return [LsmInstant(r["instantTime"], r.get("completionTime"), r["action"], r.get("metadata"), r.get("plan"))
            for r in table.to_pylist()]
