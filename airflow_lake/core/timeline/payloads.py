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
    recorded: tuple[str, ...] = field(default=(), compare=False, repr=False)  # the plan's paths as written

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
            metrics=dict(op.get("metrics") or {}), bootstrap_file=op.get("bootstrapFilePath"),
            recorded=tuple(p for p in [data_file, *(op.get("deltaFilePaths") or [])] if p))

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


# -- rollback ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RollbackRequest:
    """`HoodieRollbackRequest`: the files of the rolled-back instant in one partition."""

    partition: str
    files: tuple[str, ...]  # absolute paths
    file_id: str = ""
    latest_base_instant: str | None = None

    @staticmethod
    def from_avro(record: dict[str, Any]) -> RollbackRequest:
        return RollbackRequest(record.get("partitionPath") or "", tuple(record.get("filesToBeDeleted") or []),
                               record.get("fileId") or "", record.get("latestBaseInstant"))

    def to_avro(self) -> dict[str, Any]:
        return {"partitionPath": self.partition, "fileId": self.file_id, "latestBaseInstant": self.latest_base_instant,
                "filesToBeDeleted": list(self.files), "logBlocksToBeDeleted": None}


@dataclass(frozen=True)
class RollbackPlan:
    """`R.rollback.requested`: which instant is rolled back and the files to delete."""

    instant: str  # the instant rolled back
    action: str
    requests: tuple[RollbackRequest, ...]

    @staticmethod
    def from_bytes(data: bytes) -> RollbackPlan | None:
        record = read_avro(data)
        if record is None:
            return None
        target = record["instantToRollback"]
        return RollbackPlan(target["commitTime"], target["action"],
                            tuple(RollbackRequest.from_avro(r) for r in record.get("RollbackRequests") or []))

    def to_bytes(self) -> bytes:
        record = {"instantToRollback": {"commitTime": self.instant, "action": self.action},
                  "RollbackRequests": [r.to_avro() for r in self.requests], "version": 1}
        return write_avro(avro_schemas.ROLLBACK_PLAN, record)


@dataclass(frozen=True)
class RollbackMetadata:
    """`R.rollback` (also one entry of a restore's metadata): what a rollback deleted."""

    instant: str  # the rollback's own instant (`startRollbackTime`)
    rolled_back: tuple[ActionInstant, ...]  # the instants undone (one, for a rollback)
    deleted: Mapping[str, tuple[str, ...]]  # partition -> absolute paths deleted
    time_taken_ms: int = 0

    @property
    def files(self) -> list[str]:
        return [f for fs in self.deleted.values() for f in fs]

    @staticmethod
    def from_avro(record: dict[str, Any]) -> RollbackMetadata:
        infos = record.get("instantsRollback") or []
        rolled_back = tuple(ActionInstant(i["commitTime"], i["action"]) for i in infos) or tuple(
            ActionInstant(t, "") for t in record.get("commitsRollback") or [])
        return RollbackMetadata(record.get("startRollbackTime") or "", rolled_back,
                                {p: tuple(m.get("successDeleteFiles") or [])
                                 for p, m in (record.get("partitionMetadata") or {}).items()},
                                int(record.get("timeTakenInMillis") or 0))

    def to_avro(self) -> dict[str, Any]:
        return {
            "startRollbackTime": self.instant,
            "timeTakenInMillis": self.time_taken_ms,
            "totalFilesDeleted": len(self.files),
            "commitsRollback": [i.time for i in self.rolled_back],
            "partitionMetadata": {
                p: {"partitionPath": p, "successDeleteFiles": list(fs), "failedDeleteFiles": [],
                    "rollbackLogFiles": {}, "logFilesFromFailedCommit": {}}
                for p, fs in self.deleted.items()},
            "version": 1,
            "instantsRollback": [{"commitTime": i.time, "action": i.action} for i in self.rolled_back],
        }

    def to_bytes(self) -> bytes:
        return write_avro(avro_schemas.ROLLBACK_METADATA, self.to_avro())


# -- savepoint and restore ----------------------------------------------------------------------
@dataclass(frozen=True)
class SavepointMetadata:
    """`T.savepoint`: the files (names, per partition) a savepoint protects."""

    user: str
    at_ms: int
    comments: str
    files: Mapping[str, tuple[str, ...]]  # partition -> file names

    def file_names(self) -> set[str]:
        return {n for names in self.files.values() for n in names}

    @staticmethod
    def from_avro(record: dict[str, Any]) -> SavepointMetadata:
        return SavepointMetadata(record.get("savepointedBy") or "", int(record.get("savepointedAt") or 0),
                                 record.get("comments") or "",
                                 {p: tuple(m.get("savepointDataFile") or [])
                                  for p, m in (record.get("partitionMetadata") or {}).items()})

    def to_bytes(self) -> bytes:
        record = {"savepointedBy": self.user, "savepointedAt": self.at_ms, "comments": self.comments,
                  "partitionMetadata": {p: {"partitionPath": p, "savepointDataFile": list(names)}
                                        for p, names in self.files.items()},
                  "version": 1}
        return write_avro(avro_schemas.SAVEPOINT_METADATA, record)


@dataclass(frozen=True)
class RestorePlan:
    """`R.restore.requested`: the savepoint restored to and the instants to undo, newest first."""

    savepoint: str
    instants: tuple[ActionInstant, ...]

    @staticmethod
    def from_bytes(data: bytes) -> RestorePlan | None:
        record = read_avro(data)
        if not record:
            return None
        return RestorePlan(record["savepointToRestoreTimestamp"],
                           tuple(ActionInstant(i["commitTime"], i["action"]) for i in record["instantsToRollback"]))

    def instant_infos(self) -> list[dict[str, str]]:
        return [{"commitTime": i.time, "action": i.action} for i in self.instants]

    def to_bytes(self) -> bytes:
        record = {"instantsToRollback": self.instant_infos(), "version": 2,
                  "savepointToRestoreTimestamp": self.savepoint}
        return write_avro(avro_schemas.RESTORE_PLAN, record)


@dataclass(frozen=True)
class RestoreMetadata:
    """`R.restore`: the rollback metadata of every instant a restore undid."""

    instant: str
    plan: RestorePlan
    rollbacks: Mapping[str, tuple[RollbackMetadata, ...]]  # undone instant -> its rollback (none: already gone)
    time_taken_ms: int = 0

    @staticmethod
    def undone(record: dict[str, Any]) -> list[str]:
        """The instants a stored restore record undid."""
        return list(record.get("instantsToRollback") or [])

    def to_bytes(self) -> bytes:
        record = {
            "startRestoreTime": self.instant,
            "timeTakenInMillis": self.time_taken_ms,
            "instantsToRollback": [i.time for i in self.plan.instants],
            "hoodieRestoreMetadata": {t: [m.to_avro() for m in ms] for t, ms in self.rollbacks.items()},
            "version": 1,
            "restoreInstantInfo": self.plan.instant_infos(),
        }
        return write_avro(avro_schemas.RESTORE_METADATA, record)
