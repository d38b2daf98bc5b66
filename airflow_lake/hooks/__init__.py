"""Airflow hooks of airflow-lake."""

from airflow_lake.hooks.lake import LakeHook, table_asset

__all__ = ["LakeHook", "table_asset"]
