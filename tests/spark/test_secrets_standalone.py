"""Secret storage options on a standalone cluster (issue 23, item 2): given to spark-submit in
its environment only, they reach the driver, and through the tasks' pickled `TableContext` the
executors (separate JVMs and Python workers started by the cluster's worker, whose environment
holds no secret), which read the source from and write the table to a local S3 server that
refuses unsigned requests. No process's command line, nor the executors' logs, shows them."""

from __future__ import annotations

import json
import os
import threading
import uuid

import pyarrow.parquet as pq

from airflow_lake.core.storage import open_storage
from airflow_lake.spark.options import SECRET_OPTIONS_ENV
from tests.conftest import hudi_read, rows
from tests.provider.test_secrets import s3_endpoint, scan_command_lines  # noqa: F401 (a fixture)
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_standalone import COLS, batch

SECRET = "SeCrEt-" + uuid.uuid4().hex


def test_executors_on_a_standalone_cluster_get_secrets_no_command_line_shows(cluster, s3_endpoint,  # noqa: F811
                                                                             monkeypatch):
    from tests.s3.server import REGION, create_bucket

    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_endpoint, bucket)
    public = {"aws_region": REGION, "aws_endpoint_url": s3_endpoint, "aws_allow_http": "true"}
    secret = {"aws_access_key_id": "testing", "aws_secret_access_key": SECRET}
    landing = open_storage(f"s3://{bucket}/landing", {**public, **secret})
    data = batch(range(30), 1)
    with landing.fs.open_output_stream(landing.full("part-0.parquet")) as f:
        pq.write_table(data, f)
    table = f"s3://{bucket}/lake/t"
    options = [arg for key, value in public.items() for arg in ("--option", f"{key}={value}")]
    env = {SECRET_OPTIONS_ENV: json.dumps({k: json.dumps(v) for k, v in secret.items()})}

    stop, seen = threading.Event(), {"leaks": [], "spark": []}
    scanner = threading.Thread(target=scan_command_lines, args=((SECRET,), stop, seen), daemon=True)
    scanner.start()
    try:
        proc = spark_submit("upsert", "--table", table, "--source", f"s3://{bucket}/landing", "--create-if-missing",
                            "--record-key", "id", "--precombine-field", "ts", "--partition-fields", "part",
                            *options, master=cluster.url, env=env, timeout=1200)
    finally:
        stop.set()
        scanner.join()
    done = last_json(proc)
    assert done["inserts"] == 30
    assert seen["leaks"] == [] and any("upsert.py" in line for line in seen["spark"])
    assert SECRET not in proc.stdout + proc.stderr and SECRET not in cluster.executor_logs()
    assert cluster.executor_logs().strip()  # the executors ran under the cluster's worker
    assert rows(hudi_read(table, {**public, **secret}), COLS) == rows(data, COLS)
