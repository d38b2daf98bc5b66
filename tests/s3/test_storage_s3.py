"""The storage layer on S3: options, conditional create, no silent overwrite, call counts."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import (
    InvalidOptionError,
    LockError,
    StorageUnavailableError,
    TableNotFoundError,
    TimelineError,
)
from airflow_lake.core.storage import Storage, open_storage
from airflow_lake.core.timeline.instant import COMMIT, Instant, State
from tests.conftest import hudi_read, rows


def test_conditional_create_never_overwrites(s3_table, s3_options):
    storage = open_storage(s3_table, s3_options)
    assert storage.atomic_create
    assert storage.create(".hoodie/x.commit", b"first")
    assert not storage.create(".hoodie/x.commit", b"second")
    assert storage.read(".hoodie/x.commit") == b"first"


def test_a_small_file_is_one_put_and_a_delete_leaves_no_folder_marker(s3_table, s3_options):
    """pyarrow alone writes every file as a multipart upload (three requests) and replaces a
    deleted file by an empty `folder/` object: neither happens to a table."""
    import boto3

    storage = open_storage(s3_table, s3_options)
    storage.write("p1/a.parquet", b"data")
    storage.write("p1/b.log", b"more")
    bucket, _, prefix = s3_table.removeprefix("s3://").partition("/")
    client = boto3.client("s3", endpoint_url=s3_options["aws_endpoint_url"], region_name=s3_options["aws_region"],
                          aws_access_key_id=s3_options["aws_access_key_id"],
                          aws_secret_access_key=s3_options["aws_secret_access_key"])
    for name in ("p1/a.parquet", "p1/b.log"):  # a multipart upload's ETag ends in -<parts>
        assert "-" not in client.head_object(Bucket=bucket, Key=f"{prefix}/{name}")["ETag"]
    storage.delete("p1/a.parquet")
    storage.delete("p1/b.log")
    storage.delete("p1/never-there.log")  # a missing file is no error
    assert client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("KeyCount") == 0
    assert storage.list("p1") == [] and not storage.exists("p1/a.parquet")


def test_a_small_base_file_is_read_whole_in_one_request(s3_table, s3_options, monkeypatch):
    """A snapshot read of small base files: one GET each, no open for ranges (a HEAD, then GETs
    for the footer and the columns); above the size limit, ranges as before."""
    from airflow_lake.core.formats import parquet

    table = Table.create(s3_table, name="t", record_key="id", partition_fields="p", storage_options=s3_options)
    table.write(pa.table({"id": [1, 2, 3], "p": ["x", "y", "x"], "v": ["a", "b", "c"]}), operation="insert")
    table.storage.calls.clear()
    assert rows(table.read(), ["id", "v"]) == [(1, "a"), (2, "b"), (3, "c")]
    assert table.storage.calls["open"] == 0 and table.storage.calls["get"] >= 2, table.storage.calls
    monkeypatch.setattr(parquet, "WHOLE_READ_BYTES", 0)
    table.storage.calls.clear()
    assert rows(table.read(columns=["id", "v"]), ["id", "v"]) == [(1, "a"), (2, "b"), (3, "c")]
    assert table.storage.calls["open"] >= 2, table.storage.calls


def test_a_process_without_boto3_reads_and_deletes_through_pyarrow(s3_table, s3_options, monkeypatch):
    """A Spark executor without boto3 gets the table's storage from a driver that has it."""
    import pickle

    from airflow_lake.core import objectstore

    storage = open_storage(s3_table, s3_options)
    storage.write("p1/a.log", b"data")
    monkeypatch.setattr(objectstore, "boto3_available", lambda: False)
    there = pickle.loads(pickle.dumps(storage))
    monkeypatch.setattr(type(there.conditional_put), "client", lambda self: pytest.fail("boto3 used"))
    assert there.read("p1/a.log") == b"data"
    there.delete("p1/a.log")
    assert not there.exists("p1/a.log")


def test_a_store_that_does_not_answer_is_a_transient_error_naming_table_and_path(s3_options, monkeypatch):
    from tests.s3.server import free_port

    monkeypatch.setattr(Storage, "retry_delays", ())
    options = {**s3_options, "aws_endpoint_url": f"http://127.0.0.1:{free_port()}"}  # nothing listens there
    storage = open_storage("s3://nowhere/t", options)
    for call, what in ((lambda: storage.read(".hoodie/x.commit"), "reading"),
                       (lambda: storage.delete(".hoodie/x.commit"), "deleting")):
        with pytest.raises(StorageUnavailableError, match=f"table s3://nowhere/t: {what} .hoodie/x.commit: failed"):
            call()


def test_timeline_file_is_not_overwritten(s3_table, s3_options):
    table = Table.create(s3_table, name="t", record_key="id", storage_options=s3_options)
    table.write(pa.table({"id": [1, 2], "v": ["a", "b"]}), operation="insert")
    timeline = table.timeline
    done = timeline.commits().completed().last
    before = table.storage.read(f".hoodie/{done.file_name}")
    with pytest.raises(TimelineError, match="already exists"):
        timeline.create(Instant(done.time, COMMIT, State.COMPLETED), b"{}")
    assert table.storage.read(f".hoodie/{done.file_name}") == before
    assert rows(hudi_read(s3_table, s3_options), ["id", "v"]) == [(1, "a"), (2, "b")]


def test_options_aliases_and_bad_options(s3_table, s3_endpoint):
    # pyarrow's keywords, the SDK's names, upper case: one and the same store
    for opts in ({"access_key": "testing", "secret_key": "testing", "region": "us-east-1",
                  "endpoint_override": s3_endpoint.removeprefix("http://"), "scheme": "http"},
                 {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "region_name": "us-east-1",
                  "endpoint_url": s3_endpoint}):
        storage = open_storage(s3_table, opts)
        assert storage.list("") == []
    with pytest.raises(InvalidOptionError, match="unknown S3 storage option 'aws_acess_key_id'"):
        open_storage(s3_table, {"aws_acess_key_id": "x"})
    with pytest.raises(InvalidOptionError, match="contradicts"):
        open_storage(s3_table, {"aws_region": "us-east-1", "region": "eu-west-1"})
    with pytest.raises(InvalidOptionError, match="allow_http is false"):
        open_storage(s3_table, {"aws_endpoint_url": s3_endpoint, "aws_allow_http": "false"})
    with pytest.raises(InvalidOptionError, match="conditional_put"):
        open_storage(s3_table, {"aws_conditional_put": "maybe"})


def test_multi_writer_needs_conditional_writes_or_a_lock_provider(s3_table, s3_options):
    no_conditional = {**s3_options, "aws_conditional_put": "none"}
    table = Table.create(s3_table, name="t", record_key="id", storage_options=no_conditional)
    assert not table.storage.atomic_create
    table.write(pa.table({"id": [1], "v": ["a"]}))  # a single writer is fine
    multi = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    shared = Table.open(s3_table, options=multi, storage_options=no_conditional)
    before = sorted(f.path for f in shared.storage.walk_files())
    with pytest.raises(LockError, match="OPTIMISTIC_CONCURRENCY_CONTROL refused.*hoodie.write.lock.provider"):
        shared.write(pa.table({"id": [2], "v": ["b"]}))
    assert sorted(f.path for f in shared.storage.walk_files()) == before  # nothing written
    # with a lock provider outside the store (here this process's), it runs
    locked = Table.open(s3_table, storage_options=no_conditional, options={
        **multi, "hoodie.write.lock.provider": "org.apache.hudi.client.transaction.lock.InProcessLockProvider"})
    locked.write(pa.table({"id": [2], "v": ["b"]}))
    # conditional PUTs make the file lock safe: multi-writer mode runs as is
    Table.open(s3_table, options=multi, storage_options=s3_options).write(pa.table({"id": [3], "v": ["c"]}))
    assert rows(hudi_read(s3_table, s3_options), ["id", "v"]) == [(1, "a"), (2, "b"), (3, "c")]


def test_storage_calls_are_logged(s3_table, s3_options, caplog):
    table = Table.create(s3_table, name="t", record_key="id", partition_fields="p", storage_options=s3_options)
    with caplog.at_level(logging.DEBUG, logger="airflow_lake.core.storage"):
        table.write(pa.table({"id": [1, 2], "p": ["x", "y"]}), operation="insert")
    lines = [r.getMessage() for r in caplog.records if "storage calls" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(f"table {s3_table}: insert made "), lines


def test_listing_cost_per_operation(s3_table, s3_options):
    """A timeline load is one listing of `.hoodie/`; a view build one listing per partition.
    A write loads the timeline twice: at its start and at its commit, under the lock, where
    it must see other writers' instants."""
    table = Table.create(s3_table, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="p", storage_options=s3_options)

    def batch(ids):
        return pa.table({"id": ids, "ts": [1] * len(ids), "p": [f"p{i % 3}" for i in ids]})

    first = table.write(batch(list(range(30))), operation="insert").instant
    parts = {"p0", "p1", "p2"}
    for op, expected_timeline_loads in (
        (lambda: table.write(batch(list(range(10, 40)))), 2),
        (lambda: table.read(), 1),
        (lambda: table.schedule_compaction(max_delta_commits=1), 1),
        (lambda: table.run_compaction(), 1),
        (lambda: table.read_incremental(first), 1),
    ):
        table.storage.listed.clear()
        op()
        listed = dict(table.storage.listed)
        assert listed.pop(".hoodie") == expected_timeline_loads, listed
        assert all(n == 1 for n in listed.values()), listed  # no folder listed twice
        assert set(listed) <= parts | {"", ".hoodie/.temp", ".hoodie/.aux/.tokens"}, listed


def test_the_cli_creates_a_table_on_s3_with_the_storage_options_given(s3_table, s3_options):
    """`airflow-lake table create s3://... -o aws_...=...` reaches the store with those options
    (they were dropped: only the `hoodie.*` ones reached `Table.create`), with and without
    `--if-missing`; the table then takes writes hudi-rs reads."""
    from tests.cli.conftest import invoke_json

    opts = [a for k, v in s3_options.items() for a in ("-o", f"{k}={v}")]
    doc = invoke_json("table", "create", s3_table, "--name", "t", "--record-key", "id", *opts)
    assert doc["created"] is True and doc["table"] == s3_table
    again = invoke_json("table", "create", s3_table, "--name", "t", "--record-key", "id", "--if-missing", *opts)
    assert again["created"] is False
    Table.open(s3_table, storage_options=s3_options).write(pa.table({"id": ["a", "b"]}), operation="insert")
    assert rows(hudi_read(s3_table, s3_options), ["id"]) == [("a",), ("b",)]


def test_a_uri_names_one_table_with_or_without_storage_options(s3_bucket, s3_options, s3_endpoint, monkeypatch):
    """Without options (credentials from the environment) pyarrow's `from_uri` decoded `%20`,
    refused a space and did not know `s3a://`; the key is the URI's path as written, as with
    options and as Hadoop takes it."""
    for name in ("t%20x", "sales 2024"):
        Table.create(f"s3://{s3_bucket}/{name}", name="t", record_key="id",
                     storage_options=s3_options).write(pa.table({"id": ["a", "b"]}))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    for name in ("t%20x", "sales 2024"):
        for scheme in ("s3", "s3a"):
            assert Table.open(f"{scheme}://{s3_bucket}/{name}").read().num_rows == 2, (scheme, name)


def test_a_rollback_at_a_buckets_root_deletes_files_of_a_partition_named_as_the_bucket(s3_bucket, s3_options):
    """`acme/...` in a rollback plan of table `s3://acme` is a partition `acme`, not the bucket."""
    uri = f"s3://{s3_bucket}"
    t = Table.create(uri, name="t", record_key="id", partition_fields=["tenant"], storage_options=s3_options)
    t.write(pa.table({"id": ["a"], "tenant": [s3_bucket]}))
    undone = t.write(pa.table({"id": ["b"], "tenant": [s3_bucket]}), operation="insert")
    assert t.rollback(undone.instant).files_deleted
    left = [f for f in t.storage.list_names(s3_bucket) if f[0].endswith(".parquet")]
    assert len(left) == 1 and undone.instant not in left[0][0]
    assert rows(hudi_read(uri, s3_options), ["id"]) == [("a",)]


def test_a_bucket_that_does_not_exist_is_named_as_such(s3_bucket, s3_options):
    """A misspelt bucket was 'not a Hudi table: no .hoodie folder', the bucket unnamed."""
    with pytest.raises(TableNotFoundError, match=r"s3://no-such-bucket-zz/lake/t is not a Hudi table: bucket "
                                                 r"'no-such-bucket-zz' does not exist \(or these credentials"):
        Table.open("s3://no-such-bucket-zz/lake/t", storage_options=s3_options)
    with pytest.raises(TableNotFoundError, match=r"is not a Hudi table: no \.hoodie folder"):  # (the bucket is there)
        Table.open(f"s3://{s3_bucket}/nothing-here", storage_options=s3_options)
