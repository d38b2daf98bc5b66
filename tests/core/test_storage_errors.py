"""Storage failures by kind, per file system: a missing object (S3's NO_SUCH_KEY and
RESOURCE_NOT_FOUND, GCS's NOT_FOUND, a local ENOENT) is a StorageNotFoundError, a transient
one (network, throttling, a 5xx) is asked again a bounded number of times and then a
StorageUnavailableError, anything else a StorageError: each names the table and the path.
The messages are those pyarrow's S3 and GCS file systems raise (the S3 race itself runs on a
local S3 server in tests/s3/test_storage_races_s3.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import (
    InvalidTableError,
    LakeError,
    StorageError,
    StorageNotFoundError,
    StorageUnavailableError,
)
from airflow_lake.core.formats.parquet import FOOTERS, read_base_file
from airflow_lake.core.objectstore import failure_kind
from airflow_lake.core.storage import Storage

MISSING = ["AWS Error NO_SUCH_KEY during GetObject operation: The specified key does not exist.",
           "AWS Error RESOURCE_NOT_FOUND during GetObject operation: ",
           "google::cloud::Status(NOT_FOUND: No such object: b/t/.hoodie/x.commit)"]
TRANSIENT = ["When reading information for key 'k' in bucket 'b': AWS Error NETWORK_CONNECTION during HeadObject "
             "operation: curlCode: 7, Couldn't connect to server",
             "AWS Error SLOW_DOWN during GetObject operation: Please reduce your request rate.",
             "AWS Error SERVICE_UNAVAILABLE during GetObject operation: Service Unavailable",
             "AWS Error UNKNOWN (HTTP status 503) during GetObject operation: HTTP response code: 503",
             "google::cloud::Status(UNAVAILABLE: Retry policy exhausted)",
             # a HEAD's 5xx has no body: the SDK names no code, only the status
             "When getting information for key 'trips/.hoodie' in bucket 'lake': AWS Error UNKNOWN (HTTP status 503) "
             "during HeadObject operation: No response body."]
OTHER = ["AWS Error ACCESS_DENIED during GetObject operation: Access Denied",
         "google::cloud::Status(PERMISSION_DENIED: denied)"]


class FailingFileSystem:
    """The real file system, whose opening of files named `victim` fails `times` times with
    OSError(`message`) first."""

    def __init__(self, fs, victim: str, message: str, times: int):
        self.fs, self.victim, self.message, self.left, self.calls = fs, victim, message, times, 0

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def _maybe_fail(self, path):
        if path.endswith(self.victim):
            self.calls += 1
            if self.left > 0:
                self.left -= 1
                raise OSError(self.message)

    def open_input_stream(self, path):
        self._maybe_fail(path)
        return self.fs.open_input_stream(path)

    def open_input_file(self, path):
        self._maybe_fail(path)
        return self.fs.open_input_file(path)


@pytest.mark.parametrize("message,kind", [(m, "missing") for m in MISSING] + [(m, "transient") for m in TRANSIENT]
                         + [(m, None) for m in OTHER])
def test_failures_are_told_apart(message, kind):
    assert failure_kind(OSError(message)) == kind
    assert failure_kind(FileNotFoundError("local")) == "missing"


@pytest.fixture
def storage(tmp_path) -> Storage:
    s = Storage(str(tmp_path / "t"))
    s.write(".hoodie/20240101000000000.commit", b"{}")
    s.retry_delays = (0.0, 0.0, 0.0)  # no waiting in tests
    return s


def failing(storage: Storage, message: str, times: int, victim: str = "20240101000000000.commit") -> FailingFileSystem:
    storage.fs = FailingFileSystem(storage.fs, victim, message, times)
    return storage.fs


@pytest.mark.parametrize("message", TRANSIENT)
def test_transient_failures_are_asked_again(storage, message):
    fs = failing(storage, message, 3)
    assert storage.read(".hoodie/20240101000000000.commit") == b"{}"
    assert fs.calls == 4


@pytest.mark.parametrize("message", TRANSIENT)
def test_transient_failures_that_last_name_table_and_path(storage, message):
    fs = failing(storage, message, 100)
    with pytest.raises(StorageUnavailableError) as e:
        storage.read(".hoodie/20240101000000000.commit")
    assert fs.calls == len(storage.retry_delays) + 1
    assert isinstance(e.value, LakeError) and isinstance(e.value, OSError)
    assert storage.uri in str(e.value) and ".hoodie/20240101000000000.commit" in str(e.value)


@pytest.mark.parametrize("message", MISSING)
def test_missing_objects_are_not_found_errors_at_once(storage, message):
    fs = failing(storage, message, 1)
    with pytest.raises(StorageNotFoundError) as e:
        storage.read(".hoodie/20240101000000000.commit")
    assert fs.calls == 1 and isinstance(e.value, FileNotFoundError)
    assert storage.uri in str(e.value) and ".hoodie/20240101000000000.commit" in str(e.value)
    with pytest.raises(StorageNotFoundError, match="not there"):
        storage.read(".hoodie/absent")


@pytest.mark.parametrize("message", OTHER)
def test_other_failures_are_storage_errors_asked_once(storage, message):
    fs = failing(storage, message, 1)
    with pytest.raises(StorageError) as e:
        storage.read(".hoodie/20240101000000000.commit")
    assert fs.calls == 1 and not isinstance(e.value, (StorageNotFoundError, StorageUnavailableError))
    assert storage.uri in str(e.value) and ".hoodie/20240101000000000.commit" in str(e.value)


@pytest.mark.parametrize("message", MISSING)
def test_a_base_file_gone_while_read_is_not_called_damaged(tmp_path, message):
    table = Table.create(str(tmp_path / "t"), name="t", record_key="id")
    table.write(pa.table({"id": [1, 2]}))
    (base,) = [f.path for f in table.storage.walk_files() if f.path.endswith(".parquet")]
    FOOTERS.entry(table.storage, base)  # the footer is known (listed, read): then the object goes
    failing(table.storage, message, 1, victim=base.rsplit("/", 1)[-1])
    with pytest.raises(StorageNotFoundError) as e:
        read_base_file(table.storage, base)
    assert not isinstance(e.value, InvalidTableError) and base in str(e.value)
