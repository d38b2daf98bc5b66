"""The README's Spark example runs as written, after the core example made the table."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from tests.conftest import hudi_read, rows
from tests.core.test_readme import readme_examples


def test_readme_spark_example_runs(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    core, on_spark = readme_examples()
    exec(compile(core, "README.md", "exec"), {})
    landing = tmp_path / "landing" / "trips"
    landing.mkdir(parents=True)
    pq.write_table(pa.table({"uuid": ["t2", "t4"], "ts": [5, 5], "city": ["sf", "sf"], "fare": [25.0, 40.0]}),
                   landing / "part-0.parquet")
    # Spark's JVM resolves relative paths from its own start folder, not this test's
    code = on_spark.replace('"landing/trips"', repr(str(landing)))
    exec(compile(code, "README.md", "exec"), {})
    fares = rows(hudi_read(str(tmp_path / "lake" / "trips")), ["uuid", "fare"])
    assert fares == [("t1", 30.0), ("t2", 25.0), ("t3", 30.0), ("t4", 40.0)]
