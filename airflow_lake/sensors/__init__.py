"""Airflow sensors of airflow-lake."""

from airflow_lake.sensors.instant import InstantSensor

__all__ = ["InstantSensor"]
