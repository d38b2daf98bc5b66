"""A job that fails after creating its instant names that instant in its error line (the next
writer rolls it back), not "instant none": through a real spark-submit whose write fails in
the executors."""

from __future__ import annotations

import glob
import re

from airflow_lake.core import Table
from airflow_lake.core.timeline import tokens
from tests.spark.test_jobs import spark_submit
from tests.spark.test_upsert_job import batch, landing


def test_a_write_that_fails_in_the_executors_names_its_instant(tmp_path, table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    t.write(batch(range(6), 1, 1), operation="insert")
    # the SIMPLE index reads every stored key in an executor task: a damaged base file fails
    # there, after the job created its instant
    damaged = sorted(glob.glob(f"{table_path}/a/*.parquet"))[0]
    with open(damaged, "wb") as f:
        f.write(b"PAR1" + b"\0" * 64 + b"PAR1")
    proc = spark_submit("upsert", "--table", table_path, "--source", landing(tmp_path, "p", batch(range(4), 2, 2)),
                        "--run-token", "dag/run/fails", "--option", "hoodie.index.type=SIMPLE")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-3000:]
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("ERROR upsert")]
    created = [time for time, _ in tokens.entries(Table.open(table_path).storage, "dag/run/fails")]
    assert len(created) == 1 and re.match(r"^\d{17}$", created[0]), errors
    assert len(errors) == 1 and errors[0].startswith(
        f"ERROR upsert failed: table {table_path}, instant {created[0]}: InvalidTableError: "), errors
    # as after a crash (and on the local engine): the instant stays pending, its heartbeat
    # stopped, and the next writer's repair rolls it back
    assert Table.open(table_path).timeline.pending().times == created
    timeline = Table.open(table_path).repair_timeline()  # (what the next writer's begin runs)
    assert not timeline.contains(created[0]) and not timeline.pending().instants  # rolled back
    assert [i.action for i in timeline.completed()] == ["commit", "rollback"]
