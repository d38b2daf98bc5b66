"""Airflow operators of airflow-lake: each runs one packaged PySpark job (`spark_jobs/`) on a
table through the Spark provider's `SparkSubmitHook` and returns a JSON-able XCom;
`TableHealthOperator` reads a table's health in the worker."""

from airflow_lake.operators.base import LakeJobOperator
from airflow_lake.operators.compaction import CompactionExecuteOperator, CompactionScheduleOperator
from airflow_lake.operators.health import TableHealthOperator
from airflow_lake.operators.services import (
    ArchiveOperator,
    CleanOperator,
    RestoreOperator,
    RollbackOperator,
    SavepointOperator,
)
from airflow_lake.operators.upsert import UpsertOperator

__all__ = [
    "ArchiveOperator",
    "CleanOperator",
    "CompactionExecuteOperator",
    "CompactionScheduleOperator",
    "LakeJobOperator",
    "RestoreOperator",
    "RollbackOperator",
    "SavepointOperator",
    "TableHealthOperator",
    "UpsertOperator",
]
