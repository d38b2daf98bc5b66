"""Storage options for object stores (no server needed): aliases to pyarrow keywords, GCS, and
the lock a store without atomic create-if-absent gets in multi-writer mode."""

from __future__ import annotations

import pytest

from airflow_lake.core.errors import InvalidOptionError, LockError
from airflow_lake.core.lock import MULTI_WRITER, SINGLE_WRITER, FileSystemLock, InProcessLock, table_lock
from airflow_lake.core.objectstore import gcs_options, s3_settings
from airflow_lake.core.storage import open_storage


class CountingLock:
    """A lock provider named by its import path (a stand-in for a DynamoDB or ZooKeeper lock)."""

    def __init__(self, storage, options):
        self.storage, self.options = storage, options

    def acquire(self) -> None: ...
    def release(self) -> None: ...


def test_s3_aliases_map_to_pyarrow_keywords():
    s = s3_settings("s3://b/t", {"AWS_ACCESS_KEY_ID": "k", "aws_secret_access_key": "s", "aws_region": "eu-west-1",
                                 "aws_endpoint_url": "http://127.0.0.1:9000", "aws_allow_http": "true"})
    assert s.pyarrow == {"access_key": "k", "secret_key": "s", "region": "eu-west-1",
                         "endpoint_override": "127.0.0.1:9000", "scheme": "http", "allow_delayed_open": True}
    assert s.endpoint_url == "http://127.0.0.1:9000" and s.conditional_put
    s = s3_settings("s3://b/t", {"endpoint": "minio:9000", "allow_http": True, "conditional_put": "none"})
    assert s.pyarrow == {"endpoint_override": "minio:9000", "scheme": "http", "allow_delayed_open": True}
    assert not s.conditional_put
    # a file written whole is one PUT unless the user says otherwise
    assert s3_settings("s3://b/t", {"allow_delayed_open": "false"}).pyarrow == {"allow_delayed_open": False}
    assert s3_settings("s3://b/t", {"endpoint_url": "https://s3.example.com/"}).endpoint_url == \
        "https://s3.example.com"
    with pytest.raises(InvalidOptionError, match="table s3://b/t: storage option aws_allow_http='maybe'"):
        s3_settings("s3://b/t", {"aws_allow_http": "maybe"})
    # one setting under two names with one value (a connection's extra and a task's options)
    assert s3_settings("s3://b/t", {"aws_allow_http": "true", "allow_http": True,
                                    "aws_endpoint_url": "http://h:9000", "endpoint_url": "http://h:9000/"}).pyarrow == \
        {"endpoint_override": "h:9000", "scheme": "http", "allow_delayed_open": True}
    with pytest.raises(InvalidOptionError, match="allow_http=False contradicts aws_allow_http"):
        s3_settings("s3://b/t", {"aws_allow_http": "true", "allow_http": False})


def test_a_conditional_put_without_an_answer_is_an_oserror():
    """botocore's own exceptions (a connection closed mid-PUT) are not OSErrors: they escaped
    `Storage` as raw tracebacks naming no table."""
    from botocore.exceptions import ConnectionClosedError

    from airflow_lake.core.objectstore import ConditionalPut

    class Closed:
        def put_object(self, **_):
            raise ConnectionClosedError(endpoint_url="http://h")

        head_object = put_object

    put = ConditionalPut(s3_settings("s3://b/t", {}))
    put._client = Closed()
    for call in (lambda: put.put_if_absent("b/t/x", b""), lambda: put.put_if_match("b/t/x", b"", "e"),
                 lambda: put.version("b/t/x")):
        with pytest.raises(OSError, match="s3://b/t/x failed: Connection was closed"):
            call()


def test_gcs_options_and_a_store_without_atomic_create():
    opts = {"google_endpoint_url": "http://127.0.0.1:4443", "anonymous": "true", "project_id": "p"}
    assert gcs_options("gs://b/t", opts) == {"endpoint_override": "127.0.0.1:4443", "scheme": "http",
                                             "anonymous": True, "project_id": "p"}
    with pytest.raises(InvalidOptionError, match="unknown GCS storage option 'aws_region'"):
        gcs_options("gs://b/t", {"aws_region": "x"})
    storage = open_storage("gs://bucket/lake/t", opts)
    assert storage.fs.type_name == "gcs" and not storage.atomic_create
    kw = {"expire_ms": 1000, "wait_ms": 1000}
    assert isinstance(table_lock(storage, {}, mode=SINGLE_WRITER, provider="", **kw), FileSystemLock)
    with pytest.raises(LockError, match="table gs://bucket/lake/t: .*OPTIMISTIC_CONCURRENCY_CONTROL refused"):
        table_lock(storage, {}, mode=MULTI_WRITER, provider="", **kw)
    assert isinstance(table_lock(storage, {}, mode=MULTI_WRITER, provider="org.apache.hudi.client.transaction."
                                 "lock.InProcessLockProvider", **kw), InProcessLock)
    custom = table_lock(storage, {"a": 1}, mode=MULTI_WRITER,
                        provider="tests.core.test_object_store_options:CountingLock", **kw)
    assert isinstance(custom.provider, CountingLock) and custom.provider.options == {"a": 1}
    with pytest.raises(InvalidOptionError, match="ZookeeperBasedLockProvider"):
        table_lock(storage, {}, mode=MULTI_WRITER,
                   provider="org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider", **kw)
    with pytest.raises(InvalidOptionError, match="concurrency.mode='SOMETIMES'"):
        table_lock(storage, {}, mode="sometimes", provider="", **kw)


def test_local_tables_are_multi_writer_safe(tmp_path):
    storage = open_storage(str(tmp_path))
    assert storage.atomic_create
    assert isinstance(table_lock(storage, {}, mode=MULTI_WRITER, provider="", expire_ms=1, wait_ms=1), FileSystemLock)


def test_lake_connection_login_fills_only_missing_credentials():
    from airflow_lake.location import LakeSettings

    given = LakeSettings.from_extra({"storage_options": {"aws_access_key_id": "k", "aws_region": "eu-west-1"}},
                                    login="login", password="pw")
    assert given.storage_options == {"aws_access_key_id": "k", "aws_region": "eu-west-1", "secret_key": "pw"}
    assert s3_settings("s3://b/t", given.storage_options).pyarrow == {"access_key": "k", "secret_key": "pw",
                                                                      "region": "eu-west-1",
                                                                      "allow_delayed_open": True}
    assert LakeSettings.from_extra({}, login="login").storage_options == {"access_key": "login"}
