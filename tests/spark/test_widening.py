"""Widening long to double through the Spark write path: older values (2**62+1, which no
double holds exactly) are cast as Spark casts them, in the merge of a COW file, in the MOR
snapshot and in the lookup of stored ordering values; the same rows as the local engine,
judged by hudi-rs."""

from __future__ import annotations

import pyarrow as pa

from airflow_lake.core.table import Table
from airflow_lake.spark.write import write
from tests.core.test_widening import BIG, batch, judged, no_pending, spark_cast


def test_spark_widens_long_to_double_like_the_local_engine(spark, tmp_path):
    batches = [batch([1, 2, 3], [BIG, 1, 1], [BIG, 5, -BIG], pa.int64()),
               batch([1, 2, 4], [1.0, 2.0, 2.0], [0.5, 1.5, 2.5], pa.float64(), ts_type=pa.float64())]
    results = {}
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        for engine in ("local", "spark"):
            path = str(tmp_path / f"{table_type}-{engine}")
            t = Table.create(path, name="t", record_key="id", precombine_field="ts", table_type=table_type)
            for data in batches:
                t.write(data) if engine == "local" else write(t, spark.createDataFrame(data), "upsert")
            no_pending(t)
            results[table_type, engine] = judged(path)
    double = spark_cast(BIG, pa.float64())
    expected = [(1, double, double), (2, 2.0, 1.5), (3, 1.0, spark_cast(-BIG, pa.float64())), (4, 2.0, 2.5)]
    assert all(r == expected for r in results.values()), results
