"""Airflow triggers of airflow-lake."""

from airflow_lake.triggers.commit import TableCommitTrigger
from airflow_lake.triggers.instant import LakeInstantTrigger

__all__ = ["LakeInstantTrigger", "TableCommitTrigger"]
