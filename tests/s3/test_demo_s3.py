"""`make demo BASE=s3://...`: the demo run as a subprocess against the local S3 server, its
endpoint and credentials given only as the AWS SDK's variables of that subprocess (the demo
turns them into the `lake_default` connection's storage options). hudi-rs then reads the table
over S3 on its own; the Airflow home stays local and nothing lands in a local lake folder."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from airflow_lake.core.storage import Storage, open_storage
from airflow_lake.demo import demo_storage_options, ensure_bucket, expected_trips
from tests.conftest import REPO, hudi_read
from tests.s3.server import KEYS, REGION, free_port

TASKS = ("land", "upsert_1", "upsert_2", "upsert_3", "wait_for_commits", "schedule_compaction",
         "execute_compaction", "clean", "archive")


@pytest.mark.spark
@pytest.mark.airflow
def test_demo_on_s3(s3_endpoint, s3_options, tmp_path):
    bucket = f"demo-{uuid.uuid4().hex[:12]}"  # not created: the demo creates it on a local server
    base = f"s3://{bucket}/lake"
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK", "SPARK", "AWS_"))}
    env.update({k: os.environ[k] for k in ("SPARK_HOME",) if k in os.environ})  # the run's (tests/spark_home.py)
    env.update(AWS_ENDPOINT_URL=s3_endpoint, AWS_ACCESS_KEY_ID=KEYS["aws_access_key_id"],
               AWS_SECRET_ACCESS_KEY=KEYS["aws_secret_access_key"], AWS_REGION=REGION,
               AWS_EC2_METADATA_DISABLED="true", TMPDIR=str(tmp))  # the DAG's default base would be in TMPDIR
    proc = subprocess.run([sys.executable, "-m", "airflow_lake.demo", "--base", base, "--home", str(home),
                           "--master", "local[2]"], cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    out = proc.stdout
    assert proc.returncode == 0, out[-5000:] + proc.stderr[-5000:]
    assert f"created bucket {bucket!r} at {s3_endpoint}" in out
    assert "(from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION)" in out
    assert "aws_secret_access_key=***" in out  # shown masked
    summary = out[out.index("\nDAG run "):]
    for task_id in TASKS:
        assert f"  {task_id} " in summary and summary.split(f"  {task_id} ")[1].split()[0] == "success", summary
    assert f"s3://{bucket}/lake/demo/landing/batch_1.parquet" in summary  # the landed files' URIs
    expected = expected_trips(3)
    assert f"table {base}/demo/trips (MERGE_ON_READ)" in summary
    assert f"rows: {len(expected)}" in summary and f"rows read by hudi-rs: {len(expected)}" in summary, summary
    assert "all tasks succeeded" in summary

    theirs = hudi_read(f"{base}/demo/trips", s3_options)
    assert dict(zip(theirs["uuid"].to_pylist(), theirs["fare"].to_pylist(), strict=True)) == expected
    # the bucket holds the table and the landing files, nothing of the Airflow home
    keys = [f.path for f in open_storage(f"s3://{bucket}", s3_options).walk_files()]
    assert {k.split("/")[2] for k in keys} == {"trips", "landing"}, keys
    assert all(k.startswith("lake/demo/") for k in keys), keys
    # the Airflow home is the local folder; no table or landing file was written locally
    assert (home / "airflow.db").is_file() and (home / "logs").is_dir()
    local = [p for p in tmp_path.rglob("*") if p.suffix == ".parquet" or p.name == ".hoodie"]
    assert not local and not (REPO / "s3:").exists(), local  # a URI taken for a local path
    assert not (tmp / "airflow-lake" / "demo").exists()


def test_aws_variables_become_storage_options():
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s",
           "AWS_SESSION_TOKEN": "t", "AWS_DEFAULT_REGION": "eu-west-1"}
    options, used = demo_storage_options("s3://b/lake", {}, env)
    assert options == {"aws_endpoint_url": "http://127.0.0.1:9000", "aws_access_key_id": "id",
                       "aws_secret_access_key": "s", "aws_session_token": "t", "aws_region": "eu-west-1",
                       "aws_allow_http": "true"}
    assert used == ["AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                    "AWS_DEFAULT_REGION"]
    # an option given under any of its names wins over the variable; AWS_REGION over AWS_DEFAULT_REGION
    options, used = demo_storage_options("s3://b/lake", {"endpoint_url": "https://s3.example.com", "region": "x"},
                                         {**env, "AWS_REGION": "us-east-2"})
    assert options["endpoint_url"] == "https://s3.example.com" and options["region"] == "x"
    assert "aws_endpoint_url" not in options and "aws_region" not in options and "aws_allow_http" not in options
    assert "AWS_ENDPOINT_URL" not in used and "AWS_REGION" not in used
    assert demo_storage_options("s3://b/lake", {}, {"AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "eu-west-1"}
                                )[0] == {"aws_region": "us-east-2"}
    # other stores take only the given options
    assert demo_storage_options("gs://b/lake", {"endpoint_url": "http://127.0.0.1:4443"}, env)[0] == {
        "endpoint_url": "http://127.0.0.1:4443", "allow_http": "true"}


def test_an_unreachable_store_is_one_line_naming_bucket_and_endpoint(monkeypatch):
    monkeypatch.setattr(Storage, "retry_delays", ())  # (a user waits out the retries; a test need not)
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = {**KEYS, "aws_region": REGION, "aws_endpoint_url": endpoint, "aws_allow_http": "true"}
    with pytest.raises(SystemExit, match=f"cannot reach bucket 'nowhere' at {endpoint}: "):
        ensure_bucket("s3://nowhere/lake", options)


def test_an_existing_bucket_is_used_as_is(s3_bucket, s3_options):
    assert ensure_bucket(f"s3://{s3_bucket}/lake", s3_options) is None
