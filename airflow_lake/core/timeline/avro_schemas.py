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
