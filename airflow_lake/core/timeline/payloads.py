"""Typed timeline payloads the services exchange: compaction plans (`HoodieCompactionPlan`),
cleaner plans (`HoodieCleanerPlan`) and clean metadata (`HoodieCleanMetadata`).

Frozen values with `from_avro` / `to_avro` at the timeline boundary: the records they
write are the ones the services wrote as dicts before (same fields, same values, so the
same bytes); inside the services, fields are attributes, not camelCase keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import avro_schemas
from .metadata import read_avro, write_avro

COMPACTION_STRATEGY = "org.apache.hudi.table.action.compact.strategy.LogFileSizeBasedCompactionStrategy"


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


# -- compaction -----------------------------------------------------------------------------
@dataclass(frozen=True)
class CompactionOperation:
    """One file slice a compaction merges: its base file and log files (names, not paths)."""

    partition: str
    file_id: str
    base_instant: str
    data_file: str | None  # the base file's name; None for a log-only slice
    delta_files: tuple[str, ...]  # log file names
    metrics: Mapping[str, float] = field(default_factory=dict)
    bootstrap_file: str | None = None

    @property
    def io_mb(self) -> float:
        return float(self.metrics.get("TOTAL_IO_MB") or 0.0)

    @property
    def log_files_size(self) -> float:
        return float(self.metrics.get("TOTAL_LOG_FILES_SIZE") or 0.0)

    def file_names(self) -> list[str]:
        """The base file (if any) and log file names the operation reads."""
        return ([self.data_file] if self.data_file else []) + list(self.delta_files)

    @staticmethod
    def from_avro(op: dict[str, Any]) -> CompactionOperation:
        """A `HoodieCompactionOperation` (ours or Apache Hudi's: version-1 plans hold full paths)."""
        data_file = op.get("dataFilePath")
        return CompactionOperation(
            partition=op.get("partitionPath") or "", file_id=op["fileId"], base_instant=op.get("baseInstantTime") or "",
            data_file=_name(data_file) if data_file else None,
            delta_files=tuple(_name(p) for p in op.get("deltaFilePaths") or []),
            metrics=dict(op.get("metrics") or {}), bootstrap_file=op.get("bootstrapFilePath"))

    def to_avro(self) -> dict[str, Any]:
        return {"baseInstantTime": self.base_instant, "deltaFilePaths": list(self.delta_files),
                "dataFilePath": self.data_file, "fileId": self.file_id, "partitionPath": self.partition,
                "metrics": dict(self.metrics), "bootstrapFilePath": self.bootstrap_file}


@dataclass(frozen=True)
class CompactionPlan:
    """`T.compaction.requested`: the operations of one compaction."""

    operations: tuple[CompactionOperation, ...]
    extra_metadata: Mapping[str, str] | None = None
    strategy_class: str = COMPACTION_STRATEGY

    def file_groups(self) -> set[tuple[str, str]]:
        """(partition, fileId) of every file group the plan compacts."""
        return {(op.partition, op.file_id) for op in self.operations}

    @staticmethod
    def from_bytes(data: bytes) -> CompactionPlan:
        record = read_avro(data) or {}
        strategy = (record.get("strategy") or {}).get("compactorClassName") or COMPACTION_STRATEGY
        return CompactionPlan(tuple(CompactionOperation.from_avro(op) for op in record.get("operations") or []),
                              record.get("extraMetadata"), strategy)

    def to_bytes(self) -> bytes:
        record = {
            "operations": [op.to_avro() for op in self.operations],
            "extraMetadata": dict(self.extra_metadata) if self.extra_metadata is not None else None,
            "version": 2,
            "strategy": {"compactorClassName": self.strategy_class, "strategyParams": {}, "version": 1},
            "preserveHoodieMetadata": True,
        }
        return write_avro(avro_schemas.COMPACTION_PLAN, record)


# -- clean ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActionInstant:
    """`HoodieActionInstant`: an instant as a cleaner plan names it."""

    time: str
    action: str
    state: str = "COMPLETED"


@dataclass(frozen=True)
class CleanerPlan:
    """`T.clean.requested` (and `.inflight`): the files a clean deletes, per partition, as
    absolute paths."""

    policy: str
    earliest_instant_to_retain: ActionInstant | None
    last_completed_commit: str
    files: Mapping[str, tuple[str, ...]]  # partition -> absolute file paths
    extra_metadata: Mapping[str, str] | None = None

    @staticmethod
    def from_avro(record: dict[str, Any]) -> CleanerPlan:
        earliest = record.get("earliestInstantToRetain")
        return CleanerPlan(
            policy=record["policy"],
            earliest_instant_to_retain=ActionInstant(earliest["timestamp"], earliest["action"], earliest["state"])
            if earliest else None,
            last_completed_commit=record.get("lastCompletedCommitTimestamp") or "",
            files={p: tuple(info["filePath"] for info in infos)
                   for p, infos in (record.get("filePathsToBeDeletedPerPartition") or {}).items()},
            extra_metadata=record.get("extraMetadata"))

    @staticmethod
    def from_bytes(data: bytes) -> CleanerPlan:
        return CleanerPlan.from_avro(read_avro(data))

    def to_avro(self) -> dict[str, Any]:
        earliest = self.earliest_instant_to_retain
        return {
            "earliestInstantToRetain": {"timestamp": earliest.time, "action": earliest.action,
                                        "state": earliest.state} if earliest else None,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "policy": self.policy,
            "filesToBeDeletedPerPartition": {},
            "version": 2,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": f, "isBootstrapBaseFile": False} for f in fs] for p, fs in self.files.items()},
            "partitionsToBeDeleted": [],
            "extraMetadata": dict(self.extra_metadata) if self.extra_metadata is not None else None,
        }

    def to_bytes(self) -> bytes:
        return write_avro(avro_schemas.CLEANER_PLAN, self.to_avro())


@dataclass(frozen=True)
class CleanMetadata:
    """`T.clean`: what a clean deleted (file names per partition)."""

    instant: str
    policy: str
    earliest_commit_to_retain: str  # "" when the policy keeps no commit window
    last_completed_commit: str
    deleted: Mapping[str, tuple[str, ...]]  # partition -> file names
    time_taken_ms: int = 0
    extra_metadata: Mapping[str, str] | None = None

    @property
    def total_files(self) -> int:
        return sum(len(v) for v in self.deleted.values())

    @staticmethod
    def from_avro(record: dict[str, Any], policy: str = "") -> CleanMetadata:
        parts = record.get("partitionMetadata") or {}
        return CleanMetadata(
            instant=record.get("startCleanTime") or "",
            policy=next((m.get("policy") for m in parts.values() if m.get("policy")), None)
            or record.get("policy") or policy,
            earliest_commit_to_retain=record.get("earliestCommitToRetain") or "",
            last_completed_commit=record.get("lastCompletedCommitTimestamp") or "",
            deleted={p: tuple(m.get("successDeleteFiles") or []) for p, m in parts.items()},
            time_taken_ms=int(record.get("timeTakenInMillis") or 0),
            extra_metadata=record.get("extraMetadata"))

    def to_avro(self) -> dict[str, Any]:
        return {
            "startCleanTime": self.instant,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": self.total_files,
            "earliestCommitToRetain": self.earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": self.last_completed_commit,
            "partitionMetadata": {
                p: {"partitionPath": p, "policy": self.policy, "deletePathPatterns": list(names),
                    "successDeleteFiles": list(names), "failedDeleteFiles": [], "isPartitionDeleted": False}
                for p, names in self.deleted.items()},
            "version": 2,
            "bootstrapPartitionMetadata": {},
            "extraMetadata": dict(self.extra_metadata) if self.extra_metadata is not None else None,
        }

    def to_bytes(self) -> bytes:
        return write_avro(avro_schemas.CLEAN_METADATA, self.to_avro())
