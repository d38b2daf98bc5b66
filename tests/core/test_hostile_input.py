"""Hostile input: random batches and operation sequences (hypothesis) either succeed with the
model's result or raise a LakeError leaving the table unchanged; corrupt files give clear
errors, never silent wrong rows."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_lake.core import LakeError, Table
from airflow_lake.core.errors import InvalidTableError, UnsupportedTableVersionError
from tests.conftest import hudi_read, rows
from tests.core.test_errors import tree

KEY_TEXT = st.text(alphabet=st.sampled_from(list("ab,:=/% é😀") + ["\\", "\x00"]), max_size=6)
KEYS = st.one_of(st.none(), KEY_TEXT)
# hive style: 'part=..' is an ordinary folder name (no '..' segment); a control character or a
# folder name over 255 bytes is refused (no URL encoding)
BAD_PARTS = ["a\tb", "é" * 130]
GOOD_PARTS = ["x", "y", None, ".."]
# 'part=x/y' is a folder inside 'part=x' (the seed row's), 'part=../escape' one inside 'part=..':
# refused whenever the other is in the table or the batch (ARCHITECTURE.md, partition paths that nest)
NESTING_PARTS = ["x/y", "../escape", "y/z/w"]


def rows_of(valid_keys: bool, valid_parts: bool) -> st.SearchStrategy:
    """Rows whose keys (partition values) are all valid, or may be null, empty (refused)."""
    row = st.fixed_dictionaries({
        "id": KEY_TEXT.filter(bool) if valid_keys else KEYS, "ts": st.integers(0, 3),
        "part": st.sampled_from(GOOD_PARTS + NESTING_PARTS if valid_parts else GOOD_PARTS + BAD_PARTS)})
    return st.lists(row, max_size=6)


# shapes refused whatever the rows (an Avro-invalid name), and refused when a row carries a
# value the table cannot store (uint64 above the int64 maximum, sub-microsecond nanoseconds)
NAME_SHAPES = ("bad_name",)
VALUE_SHAPES = ("u64_big", "lossy_ns")
# `V` and `Ts` resolve into the table's `v` and `ts` (as Spark and Hive resolve names); a
# batch holding both `v` and `V` is refused, whatever the operation
CASE_SHAPES = ("case_renamed", "case_twins")
# a batch either has only valid keys and partition values or may have bad ones: otherwise
# nearly every batch stops at its first null key and the later checks are never reached
ROWS = st.sampled_from([(True, True), (True, False), (False, True), (True, True)]).flatmap(lambda ok: rows_of(*ok))
BATCH = st.tuples(st.sampled_from(["upsert", "delete", "insert"]), ROWS,
                  st.sampled_from(["plain", "naive_ts", "extra_column", "type_clash", *NAME_SHAPES, *VALUE_SHAPES,
                                   *CASE_SHAPES]))


def arrow(batch: list[dict], shape: str) -> pa.Table:
    data = {"id": pa.array([r["id"] for r in batch], pa.string()),
            "ts": pa.array([r["ts"] for r in batch], pa.int64()),
            "part": pa.array([r["part"] for r in batch], pa.string()),
            "v": pa.array([float(r["ts"]) for r in batch], pa.float64())}
    if shape == "extra_column":
        data["extra"] = pa.array([len(r["id"] or "") for r in batch], pa.int32())
    if shape == "type_clash":
        data["v"] = pa.array([str(r["ts"]) for r in batch], pa.string())
    if shape == "naive_ts":  # written as timestamp-micros, which hudi-rs reads
        data["when"] = pa.array([r["ts"] * 1_000_001 for r in batch], pa.int64()).cast(pa.timestamp("us"))
    if shape == "lossy_ns":
        data["when"] = pa.array([r["ts"] * 1000 + 1 for r in batch], pa.int64()).cast(pa.timestamp("ns"))
    if shape == "u64_big":
        data["big"] = pa.array([2**63 + r["ts"] for r in batch], pa.uint64())
    if shape == "bad_name":
        data["tip amount"] = pa.array([1.0] * len(batch))
    if shape == "case_renamed":
        data["V"], data["Ts"] = data.pop("v"), data.pop("ts")
    if shape == "case_twins":
        data["V"] = data["v"]
    return pa.table(data)


def nested_partition_folders(path: str) -> list[tuple[str, str]]:
    """(outer, inner) partition folders (holding `.hoodie_partition_metadata`) on disk, one inside
    the other."""
    marked = sorted(os.path.relpath(d, path) for d, _, files in os.walk(path)
                    if ".hoodie_partition_metadata" in files)
    return [(a, b) for a in marked for b in marked if b.startswith(a + os.sep)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(BATCH, min_size=1, max_size=5))
def test_random_operations_succeed_as_modelled_or_change_nothing(table_type, ops):
    with tempfile.TemporaryDirectory() as folder:
        check_operations(folder + "/t", table_type, ops)


def check_operations(path: str, table_type: str, ops: list) -> None:
    table = Table.create(path, name="h", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="part", hive_style_partitioning=True)
    table.write(arrow([{"id": "seed", "ts": 0, "part": "x"}], "plain"), operation="insert")  # fixes v: double
    model: dict[tuple, tuple] = {("x", "seed"): ("seed", 0, "x", 0.0)}
    for op, batch, shape in ops:
        if op == "insert":  # insert keeps duplicates (Hudi): model it with keys new to the table
            seen: set = set()
            batch = [r for r in batch if (r["part"], r["id"]) not in model and (r["part"], r["id"]) not in seen
                     and not seen.add((r["part"], r["id"]))]
        before = tree(path)
        try:
            table.write(arrow(batch, shape), operation=op)
        except LakeError as e:
            assert path in str(e)
            assert tree(path) == before
            continue
        assert all(r["id"] for r in batch), "a null or empty key was accepted"
        assert shape != "type_clash" or not batch or op == "delete"
        assert shape not in NAME_SHAPES or op == "delete", "an Avro-invalid column name was accepted"
        assert shape not in VALUE_SHAPES or not batch or op == "delete", "a value that does not fit was accepted"
        assert shape != "case_twins", "a batch with columns equal ignoring case was accepted"
        names = table.schema().names
        assert len({n.lower() for n in names}) == len(names), f"a second column differing in case: {names}"
        assert not any(r["part"] in BAD_PARTS for r in batch), "an unreadable partition path was accepted"
        assert not nested_partition_folders(path), "a partition folder holding another was accepted"
        latest: dict[tuple, dict] = {}
        for r in batch:
            k = (r["part"], r["id"])
            if op == "insert" or k not in latest or r["ts"] >= latest[k]["ts"]:
                latest[k] = r
        for k, r in latest.items():
            if op == "delete":
                model.pop(k, None)
            elif op == "insert" or k not in model or r["ts"] >= model[k][1]:
                model[k] = (r["id"], r["ts"], r["part"], float(r["ts"]))
    expected = sorted(model.values(), key=lambda r: tuple((v is None, str(v)) for v in r))
    cols = ["id", "ts", "part", "v"]
    assert rows(table.read(), cols) == expected
    assert rows(hudi_read(path), cols) == expected


def test_truncated_base_file_is_a_clear_error(table_path):
    t = Table.create(table_path, name="c", record_key="id", precombine_field="ts")
    r = t.write(pa.table({"id": ["a", "b"], "ts": [1, 1]}), operation="insert")
    base = os.path.join(table_path, r.files[0])
    with open(base, "r+b") as f:
        f.truncate(os.path.getsize(base) // 2)
    with pytest.raises(InvalidTableError, match=r.files[0]):
        t.read()


def test_newer_table_versions_are_refused(table_path):
    t = Table.create(table_path, name="c", record_key="id")
    t.write(pa.table({"id": ["a"]}), operation="insert")
    props = os.path.join(table_path, ".hoodie", "hoodie.properties")
    text = open(props).read().replace("hoodie.timeline.layout.version=1", "hoodie.timeline.layout.version=2")
    open(props, "w").write(text.replace("hoodie.table.version=6", "hoodie.table.version=10"))
    with pytest.raises(UnsupportedTableVersionError, match="version 10 .*reads table versions 6, 8 and 9"):
        Table.open(table_path)
    # version 8 is known: its timeline is in .hoodie/timeline/ (empty here: no commit to read)
    open(props, "w").write(text.replace("hoodie.table.version=6", "hoodie.table.version=8"))
    assert Table.open(table_path).read().num_rows == 0
    # a version 8 table whose layout says 1 is neither, and is not written
    open(props, "w").write(text.replace("hoodie.table.version=6", "hoodie.table.version=8").replace(
        "hoodie.timeline.layout.version=2", "hoodie.timeline.layout.version=1"))
    with pytest.raises(UnsupportedTableVersionError, match="table version 8 .timeline layout 1. .*not written"):
        Table.open(table_path).write(pa.table({"id": ["b"]}), operation="insert")


def test_foreign_timeline_files_are_ignored_and_empty_commits_read(table_path):
    t = Table.create(table_path, name="c", record_key="id", precombine_field="ts")
    t.write(pa.table({"id": ["a"], "ts": [1]}), operation="insert")
    hoodie = os.path.join(table_path, ".hoodie")
    for name in ["20990101000000000_20990101000000001.commit", "20990101000000000.commit.crc", ".tmp-abc"]:
        open(os.path.join(hoodie, name), "w").write("garbage")
    assert rows(t.read(), ["id"]) == [("a",)]
    t.write(pa.table({"id": ["b"], "ts": [1]}))
    assert rows(t.read(), ["id"]) == [("a",), ("b",)]
