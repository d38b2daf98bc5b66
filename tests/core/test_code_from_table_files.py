"""A table's own files never choose code to import: `hoodie.properties` names a lock provider,
payload, key generator or record merger only among the built-in implementations, and a
caller's lock class fails in one-line `LakeError`s (issue 23, item 4)."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_lake.core import LakeError, Table, properties
from airflow_lake.core.errors import InvalidOptionError, LockError
from tests.conftest import hudi_read, rows

PROBE = """
from pathlib import Path
Path({marker!r}).write_text("imported")


class Lock:
    def __init__(self, storage, options):
        if options.get("probe.fail") == "construction":
            raise RuntimeError("cannot reach the lock service")
        self.fail = options.get("probe.fail")

    def acquire(self):
        if self.fail == "acquire":
            raise ConnectionError("lock service\\nunreachable")

    def release(self):
        if self.fail == "release":
            raise KeyError("lease")
"""


@pytest.fixture
def probe(tmp_path, monkeypatch) -> Path:
    """A module `lake_probe` on sys.path whose import leaves a marker file; the marker's path."""
    marker = tmp_path / "imported.txt"
    folder = tmp_path / "modules"
    folder.mkdir()
    (folder / "lake_probe.py").write_text(PROBE.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "lake_probe", raising=False)
    return marker


def batch(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64())})


def with_property(table: Table, key: str, value: str) -> Table:
    """The table reopened after `key=value` was written into its hoodie.properties."""
    table.config.props[key] = value
    properties.save(table.storage, table.config)
    return Table.open(table.storage.uri)


@pytest.mark.parametrize("provider", ["lake_probe:Lock", "lake_probe.Lock", "this:s", "os:system"])
def test_a_lock_provider_in_hoodie_properties_is_never_imported(table_path, probe, capfd, provider):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1, 2]))
    t = with_property(t, "hoodie.write.lock.provider", provider)
    t.write(batch([2, 3], ts=2))
    assert not probe.exists()
    out = capfd.readouterr()
    assert "Beautiful is better than ugly" not in out.out + out.err
    assert rows(hudi_read(table_path), ["id", "ts"]) == [(1, 1), (2, 2), (3, 2)]
    # a built-in name in the file is still honoured (no code named)
    t = with_property(t, "hoodie.write.lock.provider",
                      "org.apache.hudi.client.transaction.lock.InProcessLockProvider")
    assert type(t.lock()).__name__ == "InProcessLock"


@pytest.mark.parametrize("fail, error, message", [
    ("construction", LockError, "lock provider lake_probe:Lock: construction failed: RuntimeError: cannot reach"),
    ("acquire", LockError, "lock provider lake_probe:Lock: acquire failed: ConnectionError: lock service unreachable"),
    ("release", LockError, "lock provider lake_probe:Lock: release failed: KeyError: 'lease'"),
])
def test_a_callers_lock_class_fails_in_one_line(table_path, probe, fail, error, message):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    before = [i.file_name for i in t.timeline]
    opened = Table.open(table_path, options={"hoodie.write.lock.provider": "lake_probe:Lock", "probe.fail": fail})
    with pytest.raises(error) as caught:
        opened.write(batch([2]))
    text = str(caught.value)
    assert text.startswith(f"table {t.storage.uri}: ") and message in text and "\n" not in text
    assert probe.exists()  # the caller named it: imported
    if fail != "release":
        assert [i.file_name for i in t.timeline] == before


@pytest.mark.parametrize("provider, message", [
    ("this:s", "names a str, not a class"),
    ("no_such_module_xyz:Lock", "cannot be imported: ModuleNotFoundError"),
    ("lake_probe:Missing", "cannot be imported: AttributeError"),
])
def test_a_bad_lock_option_is_one_line(table_path, probe, capfd, provider, message):
    t = Table.create(table_path, name="t", record_key="id", options={"hoodie.write.lock.provider": provider})
    with pytest.raises(InvalidOptionError, match=f"table {t.storage.uri}: hoodie.write.lock.provider=.*{message}"):
        t.write(batch([1]))
    assert t.timeline.instants == []


@pytest.mark.parametrize("key, value", [
    ("hoodie.compaction.payload.class", "lake_probe:Lock"),
    ("hoodie.compaction.payload.class", "lake_probe.Lock"),
    ("hoodie.table.keygenerator.class", "lake_probe.Lock"),
    ("hoodie.table.keygenerator.type", "lake_probe.Lock"),
    ("hoodie.compaction.record.merger.strategy", "lake_probe.Lock"),
    ("hoodie.datasource.write.record.merger.impls", "lake_probe.Lock"),
])
def test_other_classes_named_by_the_table_map_to_built_ins_only(table_path, probe, key, value):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    before = [i.file_name for i in t.timeline]
    try:
        t = with_property(t, key, value)
        t.write(batch([2]))
    except LakeError as e:  # refused (not implemented) in one line, never imported
        assert "\n" not in str(e) and t.storage.uri in str(e)
        assert [i.file_name for i in Table.open(table_path).timeline] == before
    assert not probe.exists()
