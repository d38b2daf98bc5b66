"""Each write operation's on-disk result, checked against the spec and hudi-rs."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core import Table
from airflow_lake.core.timeline.metadata import read_avro
from tests.conftest import hudi_read, rows

COLS = ["id", "ts", "part", "v"]


def batch(ids, ts=1, part="x", v=None):
    n = len(ids)
    parts = part if isinstance(part, list) else [part] * n
    return pa.table({"id": ids, "ts": [ts] * n, "part": parts, "v": v or [float(i) for i in range(n)]})


@pytest.fixture
def table(table_path) -> Table:
    return Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")


def hoodie_files(path: str) -> list[str]:
    return sorted(f for f in os.listdir(os.path.join(path, ".hoodie")) if f[0].isdigit())


def test_timeline_files_and_commit_json(table, table_path):
    r = table.write(batch(["a", "b"], part=["x", "y"]), operation="insert")
    t = r.instant
    assert hoodie_files(table_path) == [f"{t}.commit", f"{t}.commit.requested", f"{t}.inflight"]
    assert os.path.getsize(f"{table_path}/.hoodie/{t}.commit.requested") == 0
    workload = json.load(open(f"{table_path}/.hoodie/{t}.inflight"))
    assert workload["operationType"] == "INSERT" and workload["extraMetadata"] == {}
    assert {s["fileId"] for stats in workload["partitionToWriteStats"].values() for s in stats} == {""}
    commit = json.load(open(f"{table_path}/.hoodie/{t}.commit"))
    assert commit["operationType"] == "INSERT" and commit["compacted"] is False
    schema = json.loads(commit["extraMetadata"]["schema"])
    assert schema["name"] == "t_record" and schema["namespace"] == "hoodie.t"
    assert [f["name"] for f in schema["fields"]] == ["id", "ts", "part", "v"]
    stat = commit["partitionToWriteStats"]["x"][0]
    assert stat["prevCommit"] == "null" and stat["numInserts"] == 1 and stat["path"].startswith("x/")
    assert stat["fileSizeInBytes"] == os.path.getsize(os.path.join(table_path, stat["path"]))
    meta = open(f"{table_path}/x/.hoodie_partition_metadata").read()
    assert f"commitTime={t}" in meta and "partitionDepth=1" in meta
    # markers and heartbeat are gone after the commit
    assert not os.path.exists(f"{table_path}/.hoodie/.temp/{t}")
    assert not os.path.exists(f"{table_path}/.hoodie/.heartbeat/{t}")
    # the base file carries the meta columns first and the Avro schema footer
    pf = pq.ParquetFile(os.path.join(table_path, stat["path"]))
    assert pf.schema_arrow.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                         "_hoodie_partition_path", "_hoodie_file_name"]
    footer = pf.metadata.metadata
    assert footer[b"hoodie_min_record_key"] == b"a" and b"org.apache.hudi.bloomfilter" in footer
    seqno = pq.read_table(os.path.join(table_path, stat["path"])).column("_hoodie_commit_seqno")[0].as_py()
    assert seqno.startswith(f"{t}_")


def test_update_keeps_meta_of_untouched_rows(table, table_path):
    first = table.write(batch(["a", "b"]), operation="insert")
    second = table.write(batch(["a"], ts=2, v=[9.0]))
    got = {r["id"]: r for r in table.read().to_pylist()}
    assert got["b"]["_hoodie_commit_time"] == first.instant
    assert got["a"]["_hoodie_commit_time"] == second.instant
    assert got["b"]["_hoodie_file_name"] == got["a"]["_hoodie_file_name"]
    meta = ["id", "_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_file_name"]
    assert rows(hudi_read(table_path), meta) == rows(table.read(), meta)
    commit = table.timeline.commit_metadata(table.timeline.get(second.instant))
    (stat,) = commit.write_stats()
    assert stat["prevCommit"] == first.instant and stat["numUpdateWrites"] == 1 and stat["numWrites"] == 2


def test_precombine_against_batch_and_stored_record(table, table_path):
    table.write(batch(["a"], ts=5, v=[1.0]), operation="insert")
    table.write(pa.table({"id": ["a", "a", "b", "b"], "ts": [3, 4, 7, 7], "part": ["x"] * 4,
                          "v": [2.0, 3.0, 4.0, 5.0]}))
    # a: stored ts=5 beats 4; b: tie inside the batch goes to the later row
    assert rows(table.read(), COLS) == [("a", 5, "x", 1.0), ("b", 7, "x", 5.0)]
    table.write(pa.table({"id": ["a"], "ts": [5], "part": ["x"], "v": [6.0]}))  # equal: the later write wins
    assert rows(hudi_read(table_path), COLS) == [("a", 5, "x", 6.0), ("b", 7, "x", 5.0)]


def test_is_deleted_rows_respect_ordering(table, table_path):
    table.write(batch(["a", "b"], ts=5), operation="insert")
    data = pa.table({"id": ["a", "b"], "ts": [4, 6], "part": ["x", "x"], "v": [0.0, 0.0],
                     "_hoodie_is_deleted": [True, True]})
    r = table.write(data)
    assert r.num_deletes == 1
    assert rows(table.read(), ["id"]) == [("a",)]
    assert rows(hudi_read(table_path), ["id"]) == [("a",)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize(("version", "index"), [(6, "BLOOM"), (9, "BLOOM"), (6, "BUCKET"), (9, "GLOBAL_SIMPLE")])
def test_a_null_ordering_value_is_the_smallest_on_both_table_types(table_path, table_type, version, index):
    """An update or a `_hoodie_is_deleted` row with a null ordering value loses to a stored
    value (Java's DefaultHoodieRecordPayload; COW once let it overwrite, and the bucket index
    let such a delete through); against a stored null it wins, as an equal value would."""
    t = Table.create(table_path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.write.table.version": version,
                                                       "hoodie.index.type": index,
                                                       "hoodie.bucket.index.num.buckets": 2})
    t.write(pa.table({"id": ["a", "b", "c", "d"], "ts": pa.array([5, None, 5, None], pa.int64()),
                      "part": ["x"] * 4, "v": [1.0] * 4}), operation="insert")
    r = t.write(pa.table({"id": ["a", "b", "c", "d"], "ts": pa.array([None] * 4, pa.int64()), "part": ["x"] * 4,
                          "v": [2.0] * 4, "_hoodie_is_deleted": [False, False, True, True]}))
    assert r.num_deletes == 1
    expected = [("a", 5, "x", 1.0), ("b", None, "x", 2.0), ("c", 5, "x", 1.0)]
    assert rows(t.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected


def test_insert_overwrite_replaces_partitions(table, table_path):
    table.write(batch(["a", "b", "c"], part=["x", "y", "z"]), operation="insert")
    r = table.write(batch(["d"], part="x"), operation="insert_overwrite")
    assert r.replaced_file_groups == 1
    names = hoodie_files(table_path)
    assert f"{r.instant}.replacecommit.requested" in names and f"{r.instant}.replacecommit" in names
    assert read_avro(open(f"{table_path}/.hoodie/{r.instant}.replacecommit.requested", "rb").read())["version"] is None
    meta = json.load(open(f"{table_path}/.hoodie/{r.instant}.replacecommit"))
    assert meta["operationType"] == "INSERT_OVERWRITE" and list(meta["partitionToReplaceFileIds"]) == ["x"]
    expected = [("b", 1, "y", 1.0), ("c", 1, "z", 2.0), ("d", 1, "x", 0.0)]
    assert rows(table.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected
    r2 = table.write(batch(["e"], part="w"), operation="insert_overwrite_table")
    assert r2.replaced_file_groups == 3
    assert rows(hudi_read(table_path), COLS) == [("e", 1, "w", 0.0)]
    assert rows(table.read(as_of=r.instant), COLS) == expected


def test_insert_allows_duplicates_unless_asked(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    t.write(batch(["a", "a"], v=[1.0, 2.0]), operation="insert")
    assert t.read().num_rows == 2
    t.write(batch(["a", "b"]), operation="bulk_insert")
    assert t.read().num_rows == 4
    dedup = Table.open(table_path, options={"hoodie.datasource.write.insert.drop.duplicates": "true",
                                            "hoodie.combine.before.insert": "true"})
    r = dedup.write(batch(["a", "c", "c"]), operation="insert")
    assert r.num_inserts == 1
    assert hudi_read(table_path).num_rows == 5


def test_global_index_moves_keys_between_partitions(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.index.type": "GLOBAL_SIMPLE"})
    t.write(batch(["a", "b"], part=["x", "y"]), operation="insert")
    t.write(pa.table({"id": ["a", "b"], "ts": [2, 0], "part": ["z", "x"], "v": [7.0, 8.0]}))
    expected = [("a", 2, "z", 7.0), ("b", 1, "y", 1.0)]  # b's move loses on ordering
    assert rows(t.read(), COLS) == expected
    assert rows(hudi_read(table_path), COLS) == expected
    t.write(pa.table({"id": ["a"]}), operation="delete")  # global delete needs no partition
    assert rows(hudi_read(table_path), COLS) == [("b", 1, "y", 1.0)]


def test_global_index_without_partition_update(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.index.type": "GLOBAL_SIMPLE",
                              "hoodie.simple.index.update.partition.path": "false"})
    t.write(batch(["a"], part="x"), operation="insert")
    t.write(pa.table({"id": ["a"], "ts": [2], "part": ["z"], "v": [7.0]}))
    got = t.read()
    assert got.column("_hoodie_partition_path").to_pylist() == ["x"] and got.column("v").to_pylist() == [7.0]
    assert rows(hudi_read(table_path), ["id", "v"]) == [("a", 7.0)]


def test_max_file_size_splits_inserts(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts",
                     options={"hoodie.parquet.max.file.size": 100 * 1024,
                              "hoodie.copyonwrite.record.size.estimate": 100})
    r = t.write(batch([f"k{i}" for i in range(5000)]), operation="insert")
    assert len(r.files) == 5  # 1024 records per file by the estimate
    r2 = t.write(batch([f"n{i}" for i in range(5000)]), operation="insert")  # estimate now from real sizes
    assert len(r2.files) >= 1
    assert hudi_read(table_path).num_rows == 10_000 == t.read().num_rows


def test_token_makes_retries_idempotent(table, table_path):
    first = table.write(batch(["a"]), extra_metadata={"airflow_lake.token": "dag/run/task/0"})
    again = table.write(batch(["b"]), extra_metadata={"airflow_lake.token": "dag/run/task/0"})
    assert again.instant == first.instant
    assert table.read().num_rows == 1
    found = table.timeline.find_by_metadata("airflow_lake.token", "dag/run/task/0")
    assert found.time == first.instant


def test_a_run_token_that_committed_another_operation_is_refused(table, table_path):
    """A retry (same token, same operation) gets the stored result; the token given to another
    operation is an error naming the table, the token, the commit and both operations, and
    writes nothing (it never answers as if the delete had been done)."""
    from airflow_lake.core.errors import InvalidOptionError

    token = {"airflow_lake.token": "dag/run/task/1"}
    first = table.write(batch(["a", "b"]), extra_metadata=token)
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    for operation in ("delete", "insert_overwrite_table", "insert"):
        with pytest.raises(InvalidOptionError, match=f"table {table.storage.uri}: run token 'dag/run/task/1' "
                                                     f"already committed {first.instant}, an operation UPSERT"):
            table.write(batch(["a"]), operation=operation, extra_metadata=token)
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before
    again = table.write(batch(["a", "b"]), extra_metadata=token)
    assert (again.instant, again.operation, again.already_done, again.num_writes) == (first.instant, "upsert", True, 2)
    assert rows(hudi_read(table_path), ["id"]) == [("a",), ("b",)]


def test_accepts_record_batch_readers_and_batches(table):
    data = batch(["a", "b"])
    table.write(pa.RecordBatchReader.from_batches(data.schema, data.to_batches()))
    table.write(data.to_batches()[0])
    assert table.read().num_rows == 2


def test_column_projection_and_filters(table, table_path):
    table.write(batch(["a", "b", "c"], part=["x", "y", "x"]), operation="insert")
    got = table.read(columns=["id"], filters=[("part", "=", "x"), ("v", ">", 0.0)])
    assert got.column_names == ["id"] and got.column("id").to_pylist() == ["c"]
    got = table.read(filters=[[("id", "=", "a")], [("id", "=", "b")]])
    assert sorted(got.column("id").to_pylist()) == ["a", "b"]


def test_incremental_with_pending_instant_fails_or_blocks(table, table_path):
    first = table.write(batch(["a"]), operation="insert")
    # a write that is still running (requested, live heartbeat) sits between two commits
    pending = table.new_instant_time()
    open(f"{table_path}/.hoodie/{pending}.commit.requested", "w").close()
    os.makedirs(f"{table_path}/.hoodie/.heartbeat", exist_ok=True)
    open(f"{table_path}/.hoodie/.heartbeat/{pending}", "w").close()
    last = table.write(batch(["b"]))
    from airflow_lake.core import LakeError

    with pytest.raises(LakeError, match=pending):
        table.read_incremental(first.instant, last.instant)
    assert table.read_incremental(first.instant, last.instant, holes="BLOCK").num_rows == 0
    assert table.read_incremental(pending, last.instant).column("id").to_pylist() == ["b"]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_inserts_fill_small_file_groups_first(table_path, table_type):
    t = Table.create(table_path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part")
    first = t.write(batch(["a", "b"]), operation="insert")
    (group,) = {f.split("/")[1].split("_")[0] for f in first.files}
    second = t.write(batch(["c", "d"]), operation="insert")
    assert {f.split("/")[1].split("_")[0] for f in second.files} == {group}  # same file group, rewritten
    assert rows(hudi_read(table_path), ["id"]) == [("a",), ("b",), ("c",), ("d",)]
    if table_type == "MERGE_ON_READ":
        # once the group has log files, inserts open a new group (the index sees base files only)
        t.write(batch(["a"], ts=2))
        third = t.write(batch(["e"]), operation="insert")
        assert {f.split("/")[1].split("_")[0] for f in third.files} != {group}
    limited = Table.open(table_path, options={"hoodie.parquet.small.file.limit": 0})
    fourth = limited.write(batch(["f"]), operation="insert")
    assert {f.split("/")[1].split("_")[0] for f in fourth.files} != {group}
    assert hudi_read(table_path).num_rows == t.read().num_rows == (6 if table_type == "MERGE_ON_READ" else 5)


@pytest.mark.parametrize("n", [50, 60_010, 121_000])
def test_rewritten_file_bloom_equals_a_fresh_build(table_path, n):
    """COW rewrites keep Java's record order (updates in place, inserts last), so the bloom
    filter is extended, not rebuilt; it must equal a fresh build from the file's keys."""
    from airflow_lake.core.formats.bloom import BloomFilter
    from airflow_lake.core.formats.parquet import BLOOM_KEY

    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts")
    ids = [f"k{i:07d}" for i in range(n)]
    t.write(pa.table({"id": ids, "ts": [0] * n}), operation="insert")
    r = t.write(pa.table({"id": [ids[3], ids[-1], "new1", "new2"], "ts": [1] * 4}))
    (path,) = r.files
    written = pq.read_table(os.path.join(table_path, path), columns=["_hoodie_record_key"]).column(0)
    assert written.to_pylist()[:4] == ids[:4] and written.to_pylist()[-2:] == ["new1", "new2"]
    footer = pq.read_metadata(os.path.join(table_path, path)).metadata
    assert footer[BLOOM_KEY.encode()].decode() == BloomFilter.build(written).to_base64()
    # the key range is widened from the old footer's, not rescanned: it must still be exact
    assert (footer[b"hoodie_min_record_key"], footer[b"hoodie_max_record_key"]) == (b"k0000000", b"new2")
    assert rows(hudi_read(table_path), ["id", "ts"])[:1] == [("k0000000", 0)]


def test_delete_blocks_hold_one_ordering_type(table_path):
    """A partition move's delete (natural order, IntWrapper(0)) and a `_hoodie_is_deleted` row
    (LongWrapper) in one file group and commit: one delete block per type, which hudi-rs reads."""
    from airflow_lake.core.formats.log import DeleteBlock, read_log_file

    t = Table.create(table_path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.index.type": "GLOBAL_SIMPLE"})
    t.write(batch(["a", "b", "c"]), operation="insert")
    res = t.write(pa.table({"id": ["a", "b"], "ts": [2, 2], "part": ["y", "x"], "v": [1.0, 2.0],
                            "_hoodie_is_deleted": [False, True]}))
    logs = [f for f in res.files if ".log." in f]
    assert len(logs) == 1
    blocks = [b for b in read_log_file(open(f"{table_path}/{logs[0]}", "rb").read()) if isinstance(b, DeleteBlock)]
    types = [{w[0].rsplit(".", 1)[-1] for w in b.ordering} for b in blocks]
    assert sorted(map(sorted, types)) == [["IntWrapper"], ["LongWrapper"]]
    expected = [("a", 2, "y", 1.0), ("c", 1, "x", 2.0)]
    assert rows(t.read(), COLS) == expected == rows(hudi_read(table_path), COLS)
