"""The upsert job on an existing table: settings that contradict the table fail the job
before the timeline is touched (one real spark-submit); equal spellings write."""

from __future__ import annotations

import os

from airflow_lake.core import Table
from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import load, spark_submit
from tests.spark.test_upsert_job import COLS, batch, landing


def _existing(table_path: str) -> list[str]:
    Table.create(table_path, name="orders", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                 partition_fields="part")
    return sorted(os.listdir(f"{table_path}/.hoodie"))


def test_spark_submit_refuses_settings_that_contradict_the_table(tmp_path, table_path):
    before = _existing(table_path)
    source = landing(tmp_path, "p", batch(range(4), 1, 1))
    proc = spark_submit("upsert", "--table", table_path, "--source", source, "--create-if-missing",
                        "--record-key", "uuid", "--partition-fields", "day", "--precombine-field", "v",
                        "--table-type", "COPY_ON_WRITE", "--option",
                        "hoodie.datasource.write.keygenerator.class=org.apache.hudi.keygen.ComplexKeyGenerator")
    assert proc.returncode == 1, proc.stderr[-3000:]
    error = next(line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("ERROR upsert failed"))
    assert error.startswith(f"ERROR upsert failed: table {table_path}, instant none: InvalidOptionError")
    for part in ("table_type='COPY_ON_WRITE' but the table has 'MERGE_ON_READ'", "record_key='uuid' but the table "
                 "has 'id'", "precombine_field='v' but the table has 'ts'", "partition_fields='day' but the table "
                 "has 'part'", "ComplexKeyGenerator' but the table has 'org.apache.hudi.keygen.SimpleKeyGenerator'"):
        assert part in error
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before


def test_upsert_job_writes_with_equal_settings_in_any_spelling(spark, tmp_path, table_path):
    _existing(table_path)
    done = load("upsert").main(["--table", table_path, "--source", landing(tmp_path, "p", batch(range(4), 1, 1)),
                                "--create-if-missing", "--record-key", " id", "--partition-fields", "part ",
                                "--precombine-field", "ts", "--table-type", "merge_on_read", "--table-name", "Orders"])
    assert done["inserts"] == 4 and not done["table_created"]
    assert rows(hudi_read(table_path), COLS) == rows(batch(range(4), 1, 1), COLS)
