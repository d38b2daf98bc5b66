"""Partition paths that nest (ARCHITECTURE.md): a partition folder holding another partition is
refused before the timeline is touched, in one batch or against the table's partitions; paths at
the same depth, deeper paths that nest nothing, and URL-encoded values stay allowed, judged by
hudi-rs."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import PartitionPathError
from airflow_lake.core.write.client import WriteClient, WriteResult
from airflow_lake.core.write.partitions import nesting_pair
from tests.conftest import hudi_read, rows
from tests.core.test_errors import tree

COLS = ["id", "ts", "part"]
URL_ENCODE = {"hoodie.datasource.write.partitionpath.urlencode": "true"}


def _rows(parts: list[str], start: int = 0) -> pa.Table:
    return pa.table({"id": [f"k{start + i}" for i in range(len(parts))], "ts": [1] * len(parts), "part": parts})


def _table(path: str, hive: bool = False, table_type: str = "COPY_ON_WRITE", **options) -> Table:
    return Table.create(path, name="n", table_type=table_type, record_key="id", precombine_field="ts",
                        partition_fields="part", hive_style_partitioning=hive, options=options)


def test_nesting_pairs():
    assert nesting_pair(["a", "a/b"]) == ("a", "a/b")
    assert nesting_pair(["a/b/c"], ["a"]) == ("a", "a/b/c")
    assert nesting_pair(["x"], ["x/y"]) == ("x", "x/y")
    assert nesting_pair(["part=..", "part=../escape"]) == ("part=..", "part=../escape")
    assert nesting_pair(["ab", "a/b", "a/bc"], ["a/bx"]) is None  # siblings, not ancestors
    assert nesting_pair(["a=1/b=2", "a=1/b=3", "a=2/b=2"]) is None
    assert nesting_pair(["2024/01/01", "2024/01/02"], ["2024/02/01"]) is None
    assert nesting_pair(["x/y"], ["x/y"]) is None  # the same partition again
    assert nesting_pair([""], ["a"]) is None  # the non-partitioned path nests nothing


@pytest.mark.parametrize(("hive", "first", "second", "outer", "inner"), [
    (False, ["a", "a/b", "a/b/c"], None, "a", "a/b"),  # one batch
    (False, ["x/y"], ["x"], "x", "x/y"),  # a shorter path next to an existing deeper one
    (False, ["x"], ["x/y/z"], "x", "x/y/z"),  # a deeper path under an existing one
    (True, [".."], ["../escape"], "part=..", "part=../escape"),  # hive style '..' next to '../escape'
    (True, ["a/b"], ["a"], "part=a", "part=a/b"),
])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_nesting_partitions_are_refused_before_the_timeline_is_touched(table_path, table_type, hive, first, second,
                                                                       outer, inner):
    table = _table(table_path, hive, table_type)
    if second is None:
        batch, expected = first, []
    else:
        table.write(_rows(first))
        batch, expected = second, [(f"k{i}", 1, p) for i, p in enumerate(first)]
    before = tree(table_path)
    with pytest.raises(PartitionPathError) as refused:
        table.write(_rows(batch, 100), operation="insert")
    message = str(refused.value)
    assert table_path in message and repr(outer) in message and repr(inner) in message
    assert "hoodie.datasource.write.partitionpath.urlencode=true" in message
    assert tree(table_path) == before
    assert rows(table.read(), COLS) == expected
    if expected:
        assert rows(hudi_read(table_path), COLS) == expected


@pytest.mark.parametrize(("hive", "batches"), [
    (False, [["2024/01/01", "2024/01/02"], ["2024/02/01", "2025/01/01"]]),  # ordinary multi-level values
    (False, [["x/y", "z"], ["w/v/u", "x/z"]]),  # different depths, none inside another
    (True, [[".."], ["...", "a..b"]]),  # hive style: folders named 'part=..', 'part=...'
])
def test_paths_that_nest_nothing_are_written_and_read_by_hudi_rs(table_path, hive, batches):
    table = _table(table_path, hive)
    expected = []
    for n, parts in enumerate(batches):
        table.write(_rows(parts, 10 * n))
        expected += [(f"k{10 * n + i}", 1, p) for i, p in enumerate(parts)]
    assert rows(table.read(), COLS) == sorted(expected) == rows(hudi_read(table_path), COLS)


def test_multi_field_partitions_at_one_depth_are_allowed(table_path):
    table = Table.create(table_path, name="m", record_key="id", partition_fields=["a", "b"],
                         hive_style_partitioning=True)
    table.write(pa.table({"id": ["1", "2", "3"], "a": ["1", "1", "2"], "b": ["2", "3", "2"]}))
    assert sorted(os.listdir(table_path)) == [".hoodie", "a=1", "a=2"]
    assert rows(hudi_read(table_path), ["id", "a", "b"]) == [("1", "1", "2"), ("2", "1", "3"), ("3", "2", "2")]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_url_encoded_values_never_nest(table_path, table_type):
    table = _table(table_path, table_type=table_type, **URL_ENCODE)
    table.write(_rows(["a", "a/b"]))
    table.write(_rows(["a/b/c", "..", "."], 10))
    expected = [("k0", 1, "a"), ("k1", 1, "a/b"), ("k10", 1, "a/b/c"), ("k11", 1, ".."), ("k12", 1, ".")]
    assert rows(table.read(), COLS) == expected == rows(hudi_read(table_path), COLS)


def test_a_delete_in_an_existing_partition_is_not_refused(table_path):
    table = _table(table_path)
    table.write(_rows(["x/y", "x/z"]))
    table.write(pa.table({"id": ["k0"], "part": ["x/y"]}), operation="delete")
    assert rows(hudi_read(table_path), COLS) == [("k1", 1, "x/z")]


@pytest.mark.parametrize(("first", "second"), [("x", "x/y"), ("x/y", "x")])
def test_concurrent_writes_of_nesting_partitions_commit_only_one(table_path, monkeypatch, first, second):
    race_nesting_writes(table_path, monkeypatch, first, second, partial(insert, table_path))


def insert(table_path: str, part: str, start: int) -> WriteResult:
    """One row into partition `part` through a Table object of its own."""
    return Table.open(table_path).write(_rows([part], start), operation="insert")


def race_nesting_writes(table_path: str, monkeypatch, first: str, second: str,
                        write_second: Callable[[str, int], object]) -> None:
    """Two writers, each with its own Table, pass the early check together; `first` (a local
    insert) then begins, claiming its partition, and is held there; `second` (`write_second`)
    begins under the lock and is refused: only `first` commits and `second` leaves no trace."""
    _table(table_path).write(_rows(["z"]))
    held = {"first": threading.Event(), "second": threading.Event(), "done": threading.Event()}
    original = WriteClient.begin

    def held_begin(self, *args, **kwargs):
        me = threading.current_thread().name
        if me == "second":  # its early check passed: let `first` begin, then go on
            held["second"].set()
            assert held["first"].wait(120)
        result = original(self, *args, **kwargs)
        if me == "first":  # begun, its partition claimed: hold it until `second` is done
            held["first"].set()
            assert held["done"].wait(120)
        return result

    monkeypatch.setattr(WriteClient, "begin", held_begin)
    outcome: dict[str, object] = {}

    def run(name: str, write: Callable[[str, int], object], part: str, start: int) -> None:
        try:
            outcome[name] = write(part, start)
        except Exception as e:  # noqa: BLE001 - the outcome is asserted below
            outcome[name] = e
        finally:
            if name == "second":
                held["done"].set()

    write_first = partial(insert, table_path)
    threads = {"second": threading.Thread(target=run, args=("second", write_second, second, 20), name="second"),
               "first": threading.Thread(target=run, args=("first", write_first, first, 10), name="first")}
    threads["second"].start()
    assert held["second"].wait(120)
    threads["first"].start()
    for thread in threads.values():
        thread.join(300)
    refused = outcome["second"]
    assert isinstance(refused, PartitionPathError), refused
    outer, inner = sorted([first, second], key=len)
    assert repr(outer) in str(refused) and repr(inner) in str(refused), refused
    assert not isinstance(outcome["first"], Exception), outcome["first"]
    timeline = Table.open(table_path).timeline
    assert not timeline.pending().instants
    assert timeline.completed().times[-1] == outcome["first"].instant and len(timeline.completed().times) == 2
    assert not os.path.exists(os.path.join(table_path, second, ".hoodie_partition_metadata"))
    expected = [("k0", 1, "z"), ("k10", 1, first)]
    assert rows(hudi_read(table_path), COLS) == expected == rows(Table.open(table_path).read(), COLS)
