"""Plain value objects of a Hudi table, no I/O: file ids, base/log files, slices, groups.

File-name parsing and rendering (spec §5) live here.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

_LOG_NAME = re.compile(r"^\.(.+)_(.*)\.(log|archive)\.(\d+)(_((\d+)-(\d+)-(\d+))(\.cdc)?)?$")
_BASE_EXTENSIONS = (".parquet", ".orc", ".hfile", ".lance")


def new_file_id(counter: int = 0) -> str:
    """`<uuid4>-<n>`: a new file group id."""
    return f"{uuid.uuid4()}-{counter}"


def write_token(task: int, stage: int, attempt: int) -> str:
    return f"{task}-{stage}-{attempt}"


@dataclass(frozen=True, slots=True)
class BaseFile:
    """`<fileId>_<writeToken>_<instant>.parquet` in a partition."""

    partition: str
    file_id: str
    write_token: str
    instant: str
    size: int = 0
    extension: str = ".parquet"

    @property
    def name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant}{self.extension}"

    @property
    def path(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name

    @staticmethod
    def parse(partition: str, name: str, size: int = 0) -> BaseFile | None:
        ext = next((e for e in _BASE_EXTENSIONS if name.endswith(e)), None)
        if ext is None or name.startswith("."):
            return None
        parts = name[: -len(ext)].split("_")
        if len(parts) != 3:
            return None
        return BaseFile(partition, parts[0], parts[1], parts[2], size, ext)


@dataclass(frozen=True, slots=True)
class LogFile:
    """`.<fileId>_<baseInstant>.log.<version>_<writeToken>` in a partition."""

    partition: str
    file_id: str
    base_instant: str
    version: int
    write_token: str
    size: int = 0
    suffix: str = ""

    @property
    def name(self) -> str:
        return f".{self.file_id}_{self.base_instant}.log.{self.version}_{self.write_token}{self.suffix}"

    @property
    def path(self) -> str:
        return f"{self.partition}/{self.name}" if self.partition else self.name

    @property
    def sort_key(self) -> tuple:
        return (self.base_instant, self.version, self.write_token, self.suffix)

    @staticmethod
    def parse(partition: str, name: str, size: int = 0) -> LogFile | None:
        m = _LOG_NAME.match(name)
        if not m or m.group(3) != "log" or not m.group(6):
            return None
        return LogFile(partition, m.group(1), m.group(2), int(m.group(4)), m.group(6), size, m.group(10) or "")


@dataclass(slots=True)
class FileSlice:
    """The files of one file group sharing one base instant."""

    partition: str
    file_id: str
    base_instant: str
    base_file: BaseFile | None = None
    log_files: list[LogFile] = field(default_factory=list)


@dataclass(slots=True)
class FileGroup:
    """All slices of one file id in one partition, oldest first."""

    partition: str
    file_id: str
    slices: list[FileSlice] = field(default_factory=list)

    @property
    def latest_slice(self) -> FileSlice | None:
        return self.slices[-1] if self.slices else None


@dataclass(frozen=True, slots=True)
class WriteStat:
    """One file written by one commit (`HoodieWriteStat`, spec §3.2); `from_json` /
    `to_json` at the commit metadata boundary."""

    file_id: str
    partition: str
    path: str | None
    prev_commit: str = "null"
    num_writes: int = 0
    num_deletes: int = 0
    num_update_writes: int = 0
    num_inserts: int = 0
    total_write_bytes: int = 0
    file_size: int = 0
    create_ms: int = 0
    upsert_ms: int = 0
    delta: dict | None = None  # HoodieDeltaWriteStat fields of a log append
    log_records: int = 0  # compaction: records read from log files
    log_files: int = 0
    log_size: int = 0
    updated_compacted: int = 0
    log_blocks: int = 0
    # keys of the records this file group's write inserted (new keys): not serialised
    new_keys: pa.Array | None = field(default=None, repr=False, compare=False)
    # the written file's column statistics (`index.column_stats.ColumnRange`s) for the metadata
    # table's column_stats partition: not serialised
    column_ranges: tuple | None = field(default=None, repr=False, compare=False)
    # keys of delete rows the stored record won over (not deleted: the record index keeps them)
    lost_deletes: pa.Array | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        doc = {
            "fileId": self.file_id,
            "path": self.path,
            "cdcStats": None,
            "prevCommit": self.prev_commit,
            "numWrites": self.num_writes,
            "numDeletes": self.num_deletes,
            "numUpdateWrites": self.num_update_writes,
            "numInserts": self.num_inserts,
            "totalWriteBytes": self.total_write_bytes,
            "totalWriteErrors": 0,
            "tempPath": None,
            "partitionPath": self.partition,
            "totalLogRecords": self.log_records,
            "totalLogFilesCompacted": self.log_files,
            "totalLogSizeCompacted": self.log_size,
            "totalUpdatedRecordsCompacted": self.updated_compacted,
            "totalLogBlocks": self.log_blocks,
            "totalCorruptLogBlock": 0,
            "totalRollbackBlocks": 0,
            "fileSizeInBytes": self.file_size,
            "minEventTime": None,
            "maxEventTime": None,
            "runtimeStats": {
                "totalScanTime": 0,
                "totalUpsertTime": self.upsert_ms,
                "totalCreateTime": self.create_ms,
            },
        }
        if self.delta:
            doc.update(self.delta)
        return doc

    @staticmethod
    def from_json(doc: dict) -> WriteStat:
        """A stat of stored commit metadata (ours or Apache Hudi's; absent numbers are 0)."""
        runtime = doc.get("runtimeStats") or {}
        delta = {k: doc[k] for k in _DELTA_FIELDS if k in doc}
        return WriteStat(
            doc.get("fileId") or "", doc.get("partitionPath") or "", doc.get("path") or None,
            doc.get("prevCommit") or "null", num_writes=doc.get("numWrites") or 0,
            num_deletes=doc.get("numDeletes") or 0, num_update_writes=doc.get("numUpdateWrites") or 0,
            num_inserts=doc.get("numInserts") or 0, total_write_bytes=doc.get("totalWriteBytes") or 0,
            file_size=doc.get("fileSizeInBytes") or 0, create_ms=runtime.get("totalCreateTime") or 0,
            upsert_ms=runtime.get("totalUpsertTime") or 0, delta=delta or None,
            log_records=doc.get("totalLogRecords") or 0, log_files=doc.get("totalLogFilesCompacted") or 0,
            log_size=doc.get("totalLogSizeCompacted") or 0,
            updated_compacted=doc.get("totalUpdatedRecordsCompacted") or 0, log_blocks=doc.get("totalLogBlocks") or 0)

    @property
    def log_offset(self) -> int:
        """Where a log append's blocks start in its log file (0: we never append to a file)."""
        return int((self.delta or {}).get("logOffset") or 0)


# HoodieDeltaWriteStat's own fields (a log append's stat)
_DELTA_FIELDS = ("logVersion", "logOffset", "baseFile", "logFiles", "recordsStats")
