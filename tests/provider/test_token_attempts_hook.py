"""Two submissions of one run token through the provider's hook at the same moment (a zombie
task and its retry, or a duplicated trigger): both spark-submits run, exactly one commits, and
both return that commit (issue 23, item 9, through the provider). hudi-rs counts the rows once."""

from __future__ import annotations

import json
import threading

import pyarrow as pa

from airflow_lake.core.table import Table
from airflow_lake.spark.packaging import package_zip
from tests.conftest import hudi_read
from tests.provider.test_operators import SPARK_CONF, spark_env  # noqa: F401 (a fixture)
from tests.spark.test_upsert_job import landing

TOKEN = "dag/run/upsert/-1"


def test_two_hook_submissions_with_one_token_commit_once(tmp_path, monkeypatch, spark_env):  # noqa: F811
    from airflow_lake.hooks import LakeHook

    extra = {"base_path": str(tmp_path), "table_options": {"hoodie.client.heartbeat.interval_in_ms": 2000}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_TOK", json.dumps({"conn_type": "lake", "extra": extra}))
    path = str(tmp_path / "t")
    Table.create(path, name="t", record_key="id", precombine_field="ts")
    n = 20_000
    source = landing(tmp_path, "batch", pa.table({"id": pa.array(range(n), pa.int64()), "ts": [1] * n,
                                                  "v": [f"v{i}" for i in range(n)]}))
    package_zip()  # built once, before the two submissions
    start, results, errors = threading.Barrier(2), [], []

    def submit() -> None:
        start.wait()
        try:
            results.append(LakeHook("lake_tok").submit_job("upsert", "t", ["--source", source], token=TOKEN,
                                                           spark_conf=SPARK_CONF))
        except Exception as e:  # reported below with the other attempt's result
            errors.append(e)

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len({r["instant"] for r in results}) == 1, results
    t = Table.open(path)
    assert t.timeline.commits().completed().times == [results[0]["instant"]]
    assert not t.timeline.pending().instants
    assert hudi_read(path).num_rows == t.read().num_rows == n
