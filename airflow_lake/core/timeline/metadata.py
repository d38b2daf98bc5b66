"""(De)serialisers of timeline payloads: commit metadata JSON (§3), Avro plans (§4)."""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro

from ..errors import InvalidTableError
from ..model import WriteStat
from . import avro_schemas

_PARSED: dict[int, Any] = {}
_PARSED_TEXT: dict[str, Any] = {}
AVRO_MAGIC = b"Obj\x01"  # an Avro object container's first bytes


def _parsed(schema: dict) -> Any:
    key = id(schema)  # (module constants; two schemas may share a record name: layout 1's and 2's)
    if key not in _PARSED:
        _PARSED[key] = fastavro.parse_schema(schema)
    return _PARSED[key]


def write_avro(schema: dict, record: dict) -> bytes:
    """An Avro object container holding one record, codec null (spec §4.1)."""
    buf = io.BytesIO()
    fastavro.writer(buf, _parsed(schema), [record], codec="null")
    return buf.getvalue()


def write_avro_text(schema_text: str, record: dict) -> bytes:
    """An Avro object container holding one record, codec null, whose header carries
    `schema_text` exactly as given (fastavro's writer would re-serialise the schema): for the
    state files of timeline layout 2, byte-alike with Hudi 1.x's in their schema."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, _parsed_text(schema_text), record)
    out = io.BytesIO()
    out.write(AVRO_MAGIC)
    fastavro.schemaless_writer(out, {"type": "map", "values": "bytes"},
                               {"avro.schema": schema_text.encode(), "avro.codec": b"null"})
    sync = os.urandom(16)
    out.write(sync)
    fastavro.schemaless_writer(out, "long", 1)
    fastavro.schemaless_writer(out, "long", len(body.getvalue()))
    out.write(body.getvalue())
    out.write(sync)
    return out.getvalue()


def _parsed_text(text: str) -> Any:
    if text not in _PARSED_TEXT:
        _PARSED_TEXT[text] = fastavro.parse_schema(json.loads(text))
    return _PARSED_TEXT[text]


class StateFileContent(bytes):
    """The bytes of a timeline state file, with where they were read (`where`), so that a
    payload that cannot be decoded is named in its error."""

    where: str = ""


def read_avro(data: bytes) -> dict | None:
    """The single record of an Avro container, decoded with its own writer schema; one that
    cannot be decoded is an `InvalidTableError` naming the file (`StateFileContent.where`)."""
    if not data:
        return None
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except (ValueError, EOFError, KeyError, TypeError, IndexError, UnicodeDecodeError) as e:
        where = getattr(data, "where", "") or "a timeline file"
        raise InvalidTableError(f"{where} is not a readable Avro file (damaged?): {e}") from None
    return records[0] if records else None


@dataclass
class CommitMetadata:
    """`HoodieCommitMetadata` / `HoodieReplaceCommitMetadata` as JSON (spec §3)."""

    operation_type: str = "UNKNOWN"
    partition_to_write_stats: dict[str, list[dict]] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    compacted: bool = False
    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    @property
    def schema(self) -> str | None:
        return self.extra_metadata.get("schema") or None

    def write_stats(self) -> list[dict]:
        """The stats as stored (JSON dicts): for translating the payload, e.g. to Avro."""
        return [s for stats in self.partition_to_write_stats.values() for s in stats]

    def stats(self) -> list[WriteStat]:
        """The stats as values (the partition from the map's key)."""
        return [replace(WriteStat.from_json(s), partition=p) for p, stats in self.partition_to_write_stats.items()
                for s in stats]

    def file_ids(self) -> set[tuple[str, str]]:
        """(partition, fileId) of every file group this commit wrote."""
        return {
            (p, s["fileId"])
            for p, stats in self.partition_to_write_stats.items()
            for s in stats
            if s.get("fileId")
        }

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        return {(p, f) for p, ids in (self.partition_to_replace_file_ids or {}).items() for f in ids}

    def to_bytes(self) -> bytes:
        doc: dict[str, Any] = {
            "partitionToWriteStats": self.partition_to_write_stats,
            "compacted": self.compacted,
            "extraMetadata": self.extra_metadata,
            "operationType": self.operation_type,
        }
        if self.partition_to_replace_file_ids is not None:
            doc["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids
        return json.dumps(doc, indent=2).encode()

    def to_avro(self, *, replace: bool = False) -> bytes:
        """The metadata as timeline layout 2 stores it: an Avro container of Hudi 1.x's
        `HoodieCommitMetadata` (or, `replace`, `HoodieReplaceCommitMetadata`) writer schema."""
        from .avro_commit_v2 import COMMIT_METADATA_TEXT, REPLACE_COMMIT_METADATA_TEXT

        record: dict[str, Any] = {
            "partitionToWriteStats": {p: [_avro_stat(s) for s in stats]
                                      for p, stats in self.partition_to_write_stats.items()},
            "compacted": self.compacted,
            "extraMetadata": self.extra_metadata,
            "version": None,  # (what Hudi 1.x's Spark writer leaves)
            "operationType": self.operation_type,
        }
        if replace:
            record["partitionToReplaceFileIds"] = self.partition_to_replace_file_ids or {}
        return write_avro_text(REPLACE_COMMIT_METADATA_TEXT if replace else COMMIT_METADATA_TEXT, record)

    @staticmethod
    def from_bytes(data: bytes, where: str = "") -> CommitMetadata:
        """Parse commit metadata: JSON (timeline layout 1) or an Avro container (layout 2,
        `HoodieCommitMetadata` / `HoodieReplaceCommitMetadata`); an empty file is empty metadata
        (as Java reads it)."""
        if not data.strip():
            return CommitMetadata()
        if data.startswith(AVRO_MAGIC):
            try:
                doc = read_avro(data) or {}
            except (ValueError, EOFError, KeyError, TypeError) as e:
                raise InvalidTableError(f"{where}: commit metadata is not a readable Avro container ({e})") from e
        else:
            try:
                doc = json.loads(data)
            except ValueError as e:
                raise InvalidTableError(f"{where}: commit metadata is not valid JSON ({e})") from e
        return CommitMetadata(
            operation_type=doc.get("operationType") or "UNKNOWN",
            partition_to_write_stats={
                k: v for k, v in (doc.get("partitionToWriteStats") or {}).items() if k is not None
            },
            extra_metadata=dict(doc.get("extraMetadata") or {}),
            compacted=bool(doc.get("compacted")),
            partition_to_replace_file_ids=doc.get("partitionToReplaceFileIds"),
        )

    @staticmethod
    def from_stats(operation: str, stats: list[WriteStat], extra: dict[str, str]) -> CommitMetadata:
        by_partition: dict[str, list[dict]] = {}
        for s in stats:
            by_partition.setdefault(s.partition, []).append(s.to_json())
        return CommitMetadata(operation, by_partition, dict(extra))


def _avro_stat(stat: dict) -> dict:
    """A write stat (JSON form) for the Avro `HoodieWriteStat`: Java's `"null"` string stands
    for an absent previous commit there too."""
    out = dict(stat)
    if out.get("prevCommit") is None:
        out["prevCommit"] = "null"
    return out


def workload_metadata(operation: str, inserts: dict[str, int],
                      updates: dict[tuple[str, str], tuple[str, int]]) -> CommitMetadata:
    """The inflight "workload profile" (spec §3.4)."""
    stats: dict[str, list[dict]] = {}
    for partition, n in inserts.items():
        s = WriteStat("", partition, None, num_inserts=n).to_json()
        s["partitionPath"] = None
        s["runtimeStats"] = None
        stats.setdefault(partition, []).append(s)
    for (partition, file_id), (prev, n) in updates.items():
        s = WriteStat(file_id, partition, None, prev_commit=prev, num_update_writes=n).to_json()
        s["partitionPath"] = None
        s["runtimeStats"] = None
        stats.setdefault(partition, []).append(s)
    return CommitMetadata(operation, stats, {})


def requested_replace_bytes() -> bytes:
    """`T.replacecommit.requested` for insert_overwrite: every field null (spec §2.3)."""
    record = {"operationType": None, "clusteringPlan": None, "extraMetadata": None, "version": None}
    return write_avro(avro_schemas.REQUESTED_REPLACE, record)
