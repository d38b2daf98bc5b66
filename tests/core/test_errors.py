"""Bad input gets a clear `LakeError` naming table and value, and leaves the table unchanged."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_lake.core import LakeError, Table
from airflow_lake.core.errors import (
    InvalidOptionError,
    InvalidTableError,
    MissingFieldError,
    PartitionPathError,
    RecordKeyError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
    UnsupportedTableVersionError,
)
from airflow_lake.core.properties import PROPERTIES
from tests.conftest import hudi_read, rows


def tree(path: str) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


@pytest.fixture
def table(table_path) -> Table:
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    t.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"], "v": [1.0, 2.0]}), operation="insert")
    return t


BAD_BATCHES = [
    (pa.table({"id": ["c", None], "ts": [1, 1], "part": ["x", "x"], "v": [1.0, 1.0]}), RecordKeyError, "null"),
    (pa.table({"id": ["c", ""], "ts": [1, 1], "part": ["x", "x"], "v": [1.0, 1.0]}), RecordKeyError, "empty"),
    (pa.table({"ts": [1], "part": ["x"], "v": [1.0]}), MissingFieldError, "'id'"),
    (pa.table({"id": ["c"], "part": ["x"], "v": [1.0]}), MissingFieldError, "precombine field 'ts'"),
    (pa.table({"id": ["c"], "ts": [1], "v": [1.0]}), MissingFieldError, "'part'"),
    (pa.table({"id": ["c"], "ts": [1], "part": ["x"], "v": ["text"]}), SchemaError, "'v'"),
    (pa.table({"id": ["c"], "ts": ["1"], "part": ["x"], "v": [1.0]}), SchemaError, "'ts'"),
    (pa.table({"id": ["c"], "ts": [1], "part": [".."], "v": [1.0]}), PartitionPathError, "'..'"),
    (pa.table({"id": ["c"], "ts": [1], "part": ["a/../../etc"], "v": [1.0]}), PartitionPathError, "etc"),
]


@pytest.mark.parametrize(("data", "error", "fragment"), BAD_BATCHES)
def test_bad_batches_leave_table_unchanged(table, table_path, data, error, fragment):
    before = tree(table_path)
    with pytest.raises(error) as info:
        table.write(data, operation="upsert")
    assert fragment in str(info.value)
    assert table_path in str(info.value)
    assert tree(table_path) == before
    assert rows(hudi_read(table_path), ["id", "v"]) == [("a", 1.0), ("b", 2.0)]


def test_unknown_operation(table, table_path):
    before = tree(table_path)
    with pytest.raises(InvalidOptionError, match="merge"):
        table.write(pa.table({"id": ["a"], "ts": [1], "part": ["x"]}), operation="merge")
    assert tree(table_path) == before


def test_not_a_table(tmp_path):
    with pytest.raises(TableNotFoundError, match=str(tmp_path)):
        Table.open(str(tmp_path))


def test_create_twice(table, table_path):
    with pytest.raises(TableExistsError):
        Table.create(table_path, name="t", record_key="id")


def test_bad_checksum_is_invalid(table, table_path):
    props = os.path.join(table_path, PROPERTIES)
    text = open(props).read().replace("hoodie.table.name=t", "hoodie.table.name=other")
    with open(props, "w") as f:
        f.write(text)
    with pytest.raises(InvalidTableError, match="checksum"):
        Table.open(table_path)


def test_other_table_version_is_not_written(table, table_path):
    props = os.path.join(table_path, PROPERTIES)
    text = open(props).read().replace("hoodie.table.version=6", "hoodie.table.version=8")
    with open(props, "w") as f:
        f.write(text)
    before = tree(table_path)
    with pytest.raises(UnsupportedTableVersionError, match="version 8"):
        Table.open(table_path).write(pa.table({"id": ["c"], "ts": [1], "part": ["x"]}))
    assert tree(table_path) == before


def test_widening_and_added_columns_are_allowed(table, table_path):
    table.write(pa.table({"id": ["c"], "ts": pa.array([2], pa.int32()), "part": ["x"], "v": pa.array([3], pa.int32()),
                          "extra": ["new"]}))
    got = table.read(columns=["id", "v", "extra"])
    assert got.schema.field("v").type == pa.float64()
    assert rows(got, ["id", "v", "extra"]) == [("a", 1.0, None), ("b", 2.0, None), ("c", 3.0, "new")]
    assert rows(hudi_read(table_path), ["id", "v", "extra"]) == rows(got, ["id", "v", "extra"])


def test_errors_are_lake_errors():
    for cls in (RecordKeyError, MissingFieldError, SchemaError, PartitionPathError, TableNotFoundError):
        assert issubclass(cls, LakeError)


@pytest.mark.parametrize("version", [6, 9])
def test_a_table_that_lost_its_properties_is_not_taken_for_no_table(tmp_path, version):
    """The timeline still holds commits: opening names the missing file, and neither
    open_or_create (an upsert's create_if_missing) nor create makes a new table over it."""
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         options={"hoodie.write.table.version": version})
    table.write(pa.table({"id": [1], "ts": [1]}))
    for name in ("hoodie.properties", "hoodie.properties.backup"):
        (tmp_path / "t" / ".hoodie" / name).unlink(missing_ok=True)
    with pytest.raises(InvalidTableError, match="hoodie.properties is missing .* the timeline holds instants"):
        Table.open(path)
    with pytest.raises(InvalidTableError, match="hoodie.properties is missing"):
        Table.open_or_create(path, record_key="id", table_type="COPY_ON_WRITE")
    with pytest.raises(TableExistsError, match="timeline .* without its .hoodie/hoodie.properties"):
        Table.create(path, name="t", record_key="id")
    assert not (tmp_path / "t" / ".hoodie" / "hoodie.properties").exists()
