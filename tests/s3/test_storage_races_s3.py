"""Objects that vanish while read on S3 (another writer removed or is replacing them): our
errors name the table and the path, a timeline file gone is an InstantNotFoundError naming the
instant, and a file another writer replaces is read again. Both read paths: boto3's one GET
(the default) and pyarrow's HEAD then GET (`aws_conditional_put=none`)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InstantNotFoundError, LakeError, StorageNotFoundError
from airflow_lake.core.properties import PROPERTIES, load
from airflow_lake.core.storage import open_storage


class VanishingClient:
    """The table's boto3 client, except that the first GET of the object named `victim` finds
    it removed just before (and, with `comes_back`, written again just after)."""

    def __init__(self, client, victim: str, *, comes_back: bool = False):
        self.client, self.victim, self.comes_back, self.opened = client, victim, comes_back, 0

    def __getattr__(self, name):
        return getattr(self.client, name)

    def get(self, bucket_key: str) -> bytes:
        self.opened += 1
        if not (bucket_key.endswith(self.victim) and self.opened == 1):
            return self.client.get(bucket_key)
        content = self.client.get(bucket_key)
        self.client.delete(bucket_key)
        try:
            return self.client.get(bucket_key)
        finally:
            if self.comes_back:
                bucket, _, key = bucket_key.partition("/")
                self.client.client().put_object(Bucket=bucket, Key=key, Body=content)


def vanishing(storage, victim: str, *, comes_back: bool = False):
    """`storage` whose read path (boto3's or pyarrow's) loses `victim` once; returns the wrapper."""
    if storage.conditional_put is not None:
        storage.conditional_put = VanishingClient(storage.conditional_put, victim, comes_back=comes_back)
        return storage.conditional_put
    storage.fs = VanishingFileSystem(storage.fs, victim, comes_back=comes_back)
    return storage.fs


class VanishingFileSystem:
    """The table's S3 file system, except that opening a file named `victim` (pyarrow sends
    the HEAD) removes the object before the stream is read (the GET); with `comes_back`, the
    object is written again just after, as a writer replacing it does."""

    def __init__(self, fs, victim: str, *, comes_back: bool = False):
        self.fs, self.victim, self.comes_back, self.opened = fs, victim, comes_back, 0

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_input_stream(self, path):
        stream = self.fs.open_input_stream(path)
        if path.endswith(self.victim) and self.opened == 0:
            content = self.fs.open_input_stream(path).read()
            self.fs.delete_file(path)
            stream = _Reopen(stream, lambda: self._restore(path, content))
        self.opened += 1
        return stream

    def _restore(self, path, content):
        if self.comes_back:
            with self.fs.open_output_stream(path) as out:
                out.write(content)


class _Reopen:
    """A stream that runs `after` once its read failed (the object comes back meanwhile)."""

    def __init__(self, stream, after):
        self.stream, self.after = stream, after

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stream.close()

    def read(self):
        try:
            return self.stream.read()
        finally:
            self.after()


READ_PATHS = {"boto3": {}, "pyarrow": {"aws_conditional_put": "none"}}


@pytest.fixture(params=sorted(READ_PATHS))
def read_path(request) -> dict[str, str]:
    return READ_PATHS[request.param]


@pytest.fixture
def table(s3_table, s3_options, read_path) -> Table:
    t = Table.create(s3_table, name="t", record_key="id", storage_options={**s3_options, **read_path})
    t.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.storage.retry_delays = (0.0, 0.0, 0.0)  # no waiting in tests
    return t


def test_an_object_removed_while_read_is_an_error_naming_table_and_path(table):
    done = table.timeline.commits().completed().last
    path = f".hoodie/{done.file_name}"
    vanishing(table.storage, done.file_name)
    with pytest.raises(StorageNotFoundError) as e:
        table.storage.read(path)
    assert isinstance(e.value, LakeError) and isinstance(e.value, FileNotFoundError)
    assert table.storage.uri in str(e.value) and path in str(e.value), str(e.value)


def test_a_timeline_file_removed_while_read_names_the_instant(table):
    done = table.timeline.commits().completed().last
    timeline = table.timeline
    vanishing(table.storage, done.file_name)
    with pytest.raises(InstantNotFoundError) as e:
        timeline.commit_metadata(done)
    assert table.storage.uri in str(e.value) and done.time in str(e.value), str(e.value)


def test_a_file_another_writer_is_replacing_is_read_again(table, s3_table, s3_options, read_path):
    storage = open_storage(s3_table, {**s3_options, **read_path})
    storage.retry_delays = (0.0, 0.0, 0.0)
    wrapper = vanishing(storage, PROPERTIES, comes_back=True)
    assert load(storage).props["hoodie.table.name"] == "t"
    assert wrapper.opened == 2  # the first GET found nothing, the second the new object
