"""In-batch duplicates with equal ordering values: the later row in the source wins, on both
engines, by the core's one combine rule (`prepare.combine_order`). The source order of a
DataFrame is its own (partition, then row); of a folder of files, the files in path order,
then each file's rows, whatever partitions Spark packs them into. hudi-rs judges."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core import Table
from airflow_lake.spark.sources import read_files
from airflow_lake.spark.write import write
from tests.conftest import hudi_read, rows

COLS = ["id", "ts", "part", "v"]


def create(path: str, table_type: str = "COPY_ON_WRITE") -> Table:
    return Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                        partition_fields="part")


def rows_of(ids: list[str], v0: int, ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array([ts] * len(ids), pa.int64()), "part": ["p"] * len(ids),
                     "v": [float(v0 + i) for i in range(len(ids))]})


def expected(source: pa.Table) -> list[tuple]:
    """Per key, the last row of `source` among those with its largest ts."""
    best: dict[str, dict] = {}
    for r in source.to_pylist():
        if r["id"] not in best or r["ts"] >= best[r["id"]]["ts"]:
            best[r["id"]] = r
    return rows(pa.Table.from_pylist(list(best.values())), COLS)


def check(path: str, source: pa.Table) -> None:
    want = expected(source)
    assert rows(Table.open(path).read(), COLS) == want
    assert rows(hudi_read(path), COLS) == want


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_later_row_wins_on_the_local_engine(table_path, table_type):
    t = create(table_path, table_type)
    source = pa.concat_tables([rows_of(["a", "b", "c"], 0), rows_of(["b", "a", "a"], 10),
                               rows_of(["c"], 20, ts=0)])
    t.write(source, operation="upsert")
    check(table_path, source)  # a: 12.0, b: 10.0, c: 2.0 (the later c has the smaller ts)


def test_the_later_row_wins_in_a_dataframe_of_several_partitions(spark, table_path):
    t = create(table_path, "MERGE_ON_READ")
    source = pa.concat_tables([rows_of([f"k{i % 50}" for i in range(200)], 100 * j) for j in range(4)])
    df = spark.createDataFrame(source)
    assert df.rdd.getNumPartitions() > 1
    write(t, df, "upsert")
    check(table_path, source)


@pytest.mark.parametrize("ts_type", [pa.int64(), pa.int32()], ids=["stored_as_is", "cast"])
def test_the_later_row_wins_from_a_folder_of_files(spark, tmp_path, table_path, ts_type):
    """part-1 holds the later rows; Spark reads it first (its partitions are packed by file
    size, largest first): the path order decides, as it does for pyarrow reading the folder."""
    folder = tmp_path / "src"
    folder.mkdir()
    first = rows_of(["a", "b"], 0)
    later = rows_of(["a"] * 3000 + ["b"], 1000)
    for name, data in (("part-0.parquet", first), ("part-1.parquet", later)):
        pq.write_table(data.set_column(1, "ts", data.column("ts").cast(ts_type)), folder / name)
    for path, df in ((table_path, spark.read.parquet(str(folder))),
                     (str(tmp_path / "core_read"), read_files(spark, str(folder), "parquet"))):
        write(create(path), df, "upsert")
        check(path, pa.concat_tables([first, later]))


@pytest.mark.parametrize("engine", ["local", "spark"])
def test_a_delete_older_than_the_stored_record_changes_nothing_under_the_bucket_index(spark, table_path, engine):
    """MOR, BUCKET index: a `_hoodie_is_deleted` row whose ordering value is smaller than the
    stored record's is dropped (DefaultHoodieRecordPayload), as under the other indexes."""
    t = Table.create(table_path, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.index.type": "BUCKET",
                                                       "hoodie.bucket.index.num.buckets": 2})
    # base files (a bucket index writes MOR inserts to logs): a delete block entry removes a base
    # record whatever its ordering value, so the writer must drop the stale delete
    t.write(pa.table({"id": ["a", "b"], "ts": [3, 3], "part": ["p", "p"], "v": [1.0, 2.0]}),
            operation="insert_overwrite")
    batch = pa.table({"id": ["a", "b"], "ts": [2, 4], "part": ["p", "p"], "v": [9.0, 9.0],
                      "_hoodie_is_deleted": [True, True]})
    t.write(batch) if engine == "local" else write(t, spark.createDataFrame(batch), "upsert")
    want = [("a", 3, "p", 1.0)]  # a's delete is older than it; b's is newer
    assert rows(Table.open(table_path).read(), COLS) == want == rows(hudi_read(table_path), COLS)
