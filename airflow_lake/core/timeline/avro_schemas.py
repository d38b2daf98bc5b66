"""Avro schemas of the timeline payloads we write (spec §4), as Hudi's `.avsc` files define them.

Record names and the namespace must be exact: Java resolves records nested in unions by name.
"""

from __future__ import annotations

from typing import Any

NS = "org.apache.hudi.avro.model"


def _opt(name: str, typ: Any, default: Any = None) -> dict:
    return {"name": name, "type": ["null", typ], "default": default}


def _ver(default: int = 1) -> dict:
    return {"name": "version", "type": ["int", "null"], "default": default}


INSTANT_INFO = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "namespace": NS,
    "fields": [{"name": "commitTime", "type": "string"}, {"name": "action", "type": "string"}],
}

ROLLBACK_PLAN = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": NS,
    "fields": [
        {"name": "instantToRollback", "type": ["null", INSTANT_INFO], "default": None},
        {
            "name": "RollbackRequests",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieRollbackRequest",
                        "fields": [
                            {"name": "partitionPath", "type": "string"},
                            _opt("fileId", "string"),
                            _opt("latestBaseInstant", "string"),
                            {"name": "filesToBeDeleted", "default": [],
                             "type": {"type": "array", "items": "string"}},
                            _opt("logBlocksToBeDeleted", {"type": "map", "values": "long"}),
                        ],
                    },
                },
            ],
            "default": None,
        },
        _ver(1),
    ],
}

ROLLBACK_METADATA = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": NS,
    "fields": [
        {"name": "startRollbackTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": "string"}},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": "string"},
                        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
                        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
                        _opt("rollbackLogFiles", {"type": "map", "values": "long"}),
                        _opt("logFilesFromFailedCommit", {"type": "map", "values": "long"}),
                    ],
                },
            },
        },
        _ver(1),
        {"name": "instantsRollback", "default": [],
         "type": {"type": "array", "items": "HoodieInstantInfo"}},
    ],
}
# HoodieInstantInfo must be defined before it is referenced by name.
ROLLBACK_METADATA["fields"][-1]["type"]["items"] = INSTANT_INFO

REQUESTED_REPLACE = {
    "type": "record",
    "name": "HoodieRequestedReplaceMetadata",
    "namespace": NS,
    "fields": [
        _opt("operationType", "string"),
        _opt("clusteringPlan", {
            "type": "record",
            "name": "HoodieClusteringPlan",
            "fields": [
                _opt("inputGroups", {"type": "array", "items": {
                    "type": "record",
                    "name": "HoodieClusteringGroup",
                    "fields": [
                        _opt("slices", {"type": "array", "items": {
                            "type": "record",
                            "name": "HoodieSliceInfo",
                            "fields": [
                                _opt("dataFilePath", "string"),
                                _opt("deltaFilePaths", {"type": "array", "items": "string"}),
                                {"name": "fileId", "type": ["null", "string"]},
                                _opt("partitionPath", "string"),
                                _opt("bootstrapFilePath", "string"),
                                _ver(1),
                            ],
                        }}),
                        _opt("metrics", {"type": "map", "values": "double"}),
                        {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
                        _opt("extraMetadata", {"type": "map", "values": "string"}),
                        _ver(1),
                    ],
                }}),
                _opt("strategy", {
                    "type": "record",
                    "name": "HoodieClusteringStrategy",
                    "fields": [
                        _opt("strategyClassName", "string"),
                        _opt("strategyParams", {"type": "map", "values": "string"}),
                        _ver(1),
                    ],
                }),
                _opt("extraMetadata", {"type": "map", "values": "string"}),
                _ver(1),
                _opt("preserveHoodieMetadata", "boolean"),
            ],
        }),
        _opt("extraMetadata", {"type": "map", "values": "string"}),
        _ver(1),
    ],
}

COMPACTION_PLAN = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": NS,
    "fields": [
        _opt("operations", {"type": "array", "items": {
            "type": "record",
            "name": "HoodieCompactionOperation",
            "fields": [
                {"name": "baseInstantTime", "type": ["null", "string"]},
                _opt("deltaFilePaths", {"type": "array", "items": "string"}),
                _opt("dataFilePath", "string"),
                {"name": "fileId", "type": ["null", "string"]},
                _opt("partitionPath", "string"),
                _opt("metrics", {"type": "map", "values": "double"}),
                _opt("bootstrapFilePath", "string"),
            ],
        }}),
        _opt("extraMetadata", {"type": "map", "values": "string"}),
        _ver(1),
        _opt("strategy", {
            "type": "record",
            "name": "HoodieCompactionStrategy",
            "fields": [
                _opt("compactorClassName", "string"),
                _opt("strategyParams", {"type": "map", "values": "string"}),
                _ver(1),
            ],
        }),
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
    ],
}

CLEANER_PLAN = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": NS,
    "fields": [
        _opt("earliestInstantToRetain", {
            "type": "record",
            "name": "HoodieActionInstant",
            "fields": [{"name": "timestamp", "type": "string"}, {"name": "action", "type": "string"},
                       {"name": "state", "type": "string"}],
        }),
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "policy", "type": "string"},
        _opt("filesToBeDeletedPerPartition", {"type": "map", "values": {"type": "array", "items": "string"}}),
        _ver(1),
        _opt("filePathsToBeDeletedPerPartition", {"type": "map", "values": {"type": "array", "items": {
            "type": "record",
            "name": "HoodieCleanFileInfo",
            "fields": [_opt("filePath", "string"), _opt("isBootstrapBaseFile", "boolean")],
        }}}),
        _opt("partitionsToBeDeleted", {"type": "array", "items": "string"}),
        _opt("extraMetadata", {"type": "map", "values": "string"}),  # 0.15; 0.14 readers skip it
    ],
}

CLEAN_PARTITION_METADATA = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "namespace": NS,
    "fields": [
        {"name": "partitionPath", "type": "string"},
        {"name": "policy", "type": "string"},
        {"name": "deletePathPatterns", "type": {"type": "array", "items": "string"}},
        {"name": "successDeleteFiles", "type": {"type": "array", "items": "string"}},
        {"name": "failedDeleteFiles", "type": {"type": "array", "items": "string"}},
        _opt("isPartitionDeleted", "boolean"),
    ],
}

CLEAN_METADATA = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": NS,
    "fields": [
        {"name": "startCleanTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": "string"},
        {"name": "lastCompletedCommitTimestamp", "type": "string", "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": CLEAN_PARTITION_METADATA}},
        _ver(1),
        _opt("bootstrapPartitionMetadata", {"type": "map", "values": "HoodieCleanPartitionMetadata"}),
        _opt("extraMetadata", {"type": "map", "values": "string"}),  # 0.15; 0.14 readers skip it
    ],
}

SAVEPOINT_METADATA = {
    "type": "record",
    "name": "HoodieSavepointMetadata",
    "namespace": NS,
    "fields": [
        {"name": "savepointedBy", "type": "string"},
        {"name": "savepointedAt", "type": "long"},
        {"name": "comments", "type": "string"},
        {"name": "partitionMetadata", "type": {"type": "map", "values": {
            "type": "record",
            "name": "HoodieSavepointPartitionMetadata",
            "fields": [{"name": "partitionPath", "type": "string"},
                       {"name": "savepointDataFile", "type": {"type": "array", "items": "string"}}],
        }}},
        _ver(1),
    ],
}

RESTORE_PLAN = {
    "type": "record",
    "name": "HoodieRestorePlan",
    "namespace": NS,
    "fields": [
        {"name": "instantsToRollback", "default": [], "type": {"type": "array", "items": INSTANT_INFO}},
        _ver(2),
        _opt("savepointToRestoreTimestamp", "string"),
    ],
}

RESTORE_METADATA = {
    "type": "record",
    "name": "HoodieRestoreMetadata",
    "namespace": NS,
    "fields": [
        {"name": "startRestoreTime", "type": "string"},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "instantsToRollback", "type": {"type": "array", "items": "string"}},
        {"name": "hoodieRestoreMetadata", "type": {"type": "map", "values": {
            "type": "array", "items": ["null", ROLLBACK_METADATA]}}},
        _ver(1),
        {"name": "restoreInstantInfo", "default": [], "type": {"type": "array", "items": "HoodieInstantInfo"}},
    ],
}

_LONG_STATS = ["numWrites", "numDeletes", "numUpdateWrites", "totalWriteBytes", "totalWriteErrors"]
_MORE_LONG_STATS = ["totalLogRecords", "totalLogFiles", "totalUpdatedRecordsCompacted", "numInserts",
                    "totalLogBlocks", "totalCorruptLogBlock", "totalRollbackBlocks", "fileSizeInBytes"]
WRITE_STAT = {
    "type": "record",
    "name": "HoodieWriteStat",
    "namespace": NS,
    "fields": [_opt("fileId", "string"), _opt("path", "string"), _opt("prevCommit", "string")]
    + [_opt(n, "long") for n in _LONG_STATS] + [_opt("partitionPath", "string")]
    + [_opt(n, "long") for n in _MORE_LONG_STATS],
}

COMMIT_METADATA_AVRO = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": NS,
    "fields": [
        _opt("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": WRITE_STAT}}),
        _opt("extraMetadata", {"type": "map", "values": "string"}),
        _ver(1),
        _opt("operationType", "string"),
    ],
}

REPLACE_COMMIT_METADATA_AVRO = {
    "type": "record",
    "name": "HoodieReplaceCommitMetadata",
    "namespace": NS,
    "fields": [
        _opt("partitionToWriteStats", {"type": "map", "values": {"type": "array", "items": "HoodieWriteStat"}}),
        _opt("extraMetadata", {"type": "map", "values": "string"}),
        _ver(1),
        _opt("operationType", "string"),
        _opt("partitionToReplaceFileIds", {"type": "map", "values": {"type": "array", "items": "string"}}),
    ],
}

COMPACTION_METADATA = {
    "type": "record",
    "name": "HoodieCompactionMetadata",
    "namespace": NS,
    "fields": [_opt("partitionToCompactionWriteStats", {"type": "map", "values": {"type": "array", "items": {
        "type": "record",
        "name": "HoodieCompactionWriteStat",
        "fields": [_opt("partitionPath", "string"), _opt("totalLogRecords", "long"), _opt("totalLogFiles", "long"),
                   _opt("totalUpdatedRecordsCompacted", "long"), _opt("hoodieWriteStat", "HoodieWriteStat")],
    }}})],
}

INDEX_COMMIT_METADATA = {
    "type": "record",
    "name": "HoodieIndexCommitMetadata",
    "namespace": NS,
    "fields": [
        _ver(1),
        _opt("operationType", "string"),
        _opt("indexPartitionInfos", {"type": "array", "items": {
            "type": "record",
            "name": "HoodieIndexPartitionInfo",
            "fields": [_ver(1), _opt("metadataPartitionPath", "string"), _opt("indexUptoInstant", "string")],
        }}),
    ],
}

# `T.indexing.requested` and `T_C.indexing` (as Hudi 1.x writes them: the partition info carries
# the instant as a string and extra metadata)
INDEXING_PARTITION_INFO = {
    "type": "record",
    "name": "HoodieIndexPartitionInfo",
    "namespace": NS,
    "fields": [_ver(1), _opt("metadataPartitionPath", "string"), _opt("indexUptoInstant", "string"),
               _opt("extraMetadata", {"type": "map", "values": "string"})],
}

INDEX_PLAN = {
    "type": "record",
    "name": "HoodieIndexPlan",
    "namespace": NS,
    "fields": [_ver(1), _opt("indexPartitionInfos", {"type": "array", "items": INDEXING_PARTITION_INFO})],
}

INDEXING_COMMIT_METADATA = {
    "type": "record",
    "name": "HoodieIndexCommitMetadata",
    "namespace": NS,
    "fields": [_ver(1), _opt("operationType", "string"),
               _opt("indexPartitionInfos", {"type": "array", "items": INDEXING_PARTITION_INFO})],
}

MERGE_ARCHIVE_PLAN = {
    "type": "record",
    "name": "HoodieMergeArchiveFilePlan",
    "namespace": NS,
    "fields": [
        _ver(1),
        _opt("candidate", {"type": "array", "items": "string"}),
        _opt("mergedArchiveFileName", "string"),
    ],
}


def _reference_repeats(schema, seen: set[str]):
    """Replace second and later definitions of a named type by its name (Avro forbids redefinition)."""
    if isinstance(schema, list):
        return [_reference_repeats(s, seen) for s in schema]
    if isinstance(schema, str) or not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("record", "enum", "fixed"):
        full = f"{schema.get('namespace', NS)}.{schema['name']}"
        if full in seen or schema["name"] in seen:
            return schema["name"]
        seen.add(full)
        seen.add(schema["name"])
        if kind == "record":
            return {**schema, "fields": [{**f, "type": _reference_repeats(f["type"], seen)} for f in schema["fields"]]}
        return schema
    if kind == "array":
        return {**schema, "items": _reference_repeats(schema["items"], seen)}
    if kind == "map":
        return {**schema, "values": _reference_repeats(schema["values"], seen)}
    return schema


ARCHIVED_META_ENTRY = _reference_repeats({
    "type": "record",
    "name": "HoodieArchivedMetaEntry",
    "namespace": NS,
    "fields": [
        _opt("hoodieCommitMetadata", COMMIT_METADATA_AVRO),
        _opt("hoodieCleanMetadata", CLEAN_METADATA),
        _opt("hoodieCompactionMetadata", COMPACTION_METADATA),
        _opt("hoodieRollbackMetadata", ROLLBACK_METADATA),
        _opt("hoodieSavePointMetadata", SAVEPOINT_METADATA),
        _opt("commitTime", "string"),
        _opt("actionType", "string"),
        _ver(1),
        _opt("hoodieCompactionPlan", COMPACTION_PLAN),
        _opt("hoodieCleanerPlan", CLEANER_PLAN),
        _opt("actionState", "string"),
        _opt("hoodieReplaceCommitMetadata", REPLACE_COMMIT_METADATA_AVRO),
        _opt("hoodieRequestedReplaceMetadata", REQUESTED_REPLACE),
        _opt("HoodieInflightReplaceMetadata", "HoodieCommitMetadata"),
        _opt("hoodieIndexCommitMetadata", INDEX_COMMIT_METADATA),
        _opt("stateTransitionTime", "string"),
    ],
}, set())
