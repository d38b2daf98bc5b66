"""Airflow triggers of airflow-lake."""

from airflow_lake.triggers.instant import LakeInstantTrigger

__all__ = ["LakeInstantTrigger"]
