"""One local SparkSession for the whole run (start-up costs 5-20 s)."""

from __future__ import annotations

import logging
import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from airflow_lake.spark import session

    spark = session("airflow-lake-tests", {"spark.master": "local[2]", "spark.ui.enabled": "false",
                                           "spark.sql.shuffle.partitions": "4"})
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    # py4j logs its shutdown at INFO, after pytest has closed the captured streams
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark.stop()
