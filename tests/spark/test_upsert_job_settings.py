"""The upsert job on an existing table: settings that contradict the table fail the job
before the timeline is touched; equal spellings write (both on the shared session)."""

from __future__ import annotations

import os

import pytest

from airflow_lake.core import Table
from airflow_lake.spark.job import JobError
from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import load
from tests.spark.test_upsert_job import COLS, batch, landing


def _existing(table_path: str) -> list[str]:
    Table.create(table_path, name="orders", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                 partition_fields="part")
    return sorted(os.listdir(f"{table_path}/.hoodie"))


def test_upsert_job_refuses_settings_that_contradict_the_table(spark, tmp_path, table_path):
    """The job's one-line error (what a failed spark-submit prints after `ERROR `, exit code 1:
    tests/spark/test_job_errors.py and test_jobs.py submit for real), in this process."""
    before = _existing(table_path)
    source = landing(tmp_path, "p", batch(range(4), 1, 1))
    with pytest.raises(JobError) as failed:
        load("upsert").main(["--table", table_path, "--source", source, "--create-if-missing",
                             "--record-key", "uuid", "--partition-fields", "day", "--precombine-field", "v",
                             "--table-type", "COPY_ON_WRITE", "--option",
                             "hoodie.datasource.write.keygenerator.class=org.apache.hudi.keygen.ComplexKeyGenerator"])
    error = str(failed.value)
    assert "\n" not in error
    assert error.startswith(f"upsert failed: table {table_path}, instant none: InvalidOptionError")
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
