"""Table versions 8 and 9 (Hudi 1.x) read on Spark: `read_table` over the six tables Apache
Hudi wrote, every file group read in an executor, judged by hudi-rs (snapshot, read-optimized,
time travel, incremental by completion time)."""

from __future__ import annotations

import pytest

from airflow_lake.core import Table
from airflow_lake.spark import package_zip, read_table
from tests.core.test_hudi1x_read import TABLES, same_rows, theirs, unpack


@pytest.fixture(scope="module")
def tables(tmp_path_factory, spark) -> dict:
    spark.sparkContext.addPyFile(str(package_zip()))  # executors import this checkout
    base = tmp_path_factory.mktemp("hudi1x_spark")
    return {name: unpack(rel, base / name) for name, rel in TABLES.items()}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_spark_reads_agree_with_hudi_rs(spark, tables, name):
    path = tables[name]
    uri = str(path)
    same_rows(read_table(spark, uri).toArrow(), theirs(path))
    same_rows(read_table(spark, uri, query_type="read_optimized").toArrow(), theirs(path, query_type="read_optimized"))
    commits = Table.open(uri).timeline.commits().completed().instants
    middle = commits[len(commits) // 2].completion
    same_rows(read_table(spark, uri, as_of=middle).toArrow(), theirs(path, as_of_timestamp=middle))
    start, end = commits[0].completion, commits[-1].completion
    same_rows(read_table(spark, uri, start=start, end=end).toArrow(),
              theirs(path, query_type="incremental", start_timestamp=start, end_timestamp=end))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_spark_writes_a_version_9_table_hudi_rs_reads(spark, tmp_path, table_type):
    """The distributed write on a v9 table: completed instants named with completion times,
    log files named by their own deltacommit; compaction on the Spark engine too."""
    import pyarrow as pa

    from airflow_lake.spark import SparkEngine
    from tests.conftest import rows

    path = str(tmp_path / "t")
    Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                 partition_fields="p", options={"hoodie.write.table.version": 9, "hoodie.index.type": "BLOOM"})
    table = Table.open(path, engine=SparkEngine(spark))
    batches = [pa.table({"id": [f"k{i}" for i in range(20)], "p": [f"p{i % 3}" for i in range(20)],
                         "ts": [1] * 20, "v": [float(i) for i in range(20)]}),
               pa.table({"id": ["k1", "k2", "k30"], "p": ["p1", "p2", "p0"], "ts": [2, 0, 2], "v": [-1.0, -2.0, -3.0]})]
    for n, batch in enumerate(batches):
        table.write(spark.createDataFrame(batch), operation="insert" if n == 0 else "upsert")
    table.write(spark.createDataFrame(pa.table({"id": ["k3"], "p": ["p0"], "ts": [5], "v": [0.0]})),
                operation="delete")
    expected = {f"k{i}": float(i) for i in range(20)} | {"k1": -1.0, "k30": -3.0}
    del expected["k3"]
    assert dict(rows(theirs(tmp_path / "t"), ["id", "v"])) == expected
    assert dict(rows(read_table(spark, path).toArrow(), ["id", "v"])) == expected
    instants = table.timeline.commits().completed().instants
    assert len(instants) == 3 and all(i.completion > i.time for i in instants)
    if table_type == "MERGE_ON_READ":
        logs = [p.name for p in (tmp_path / "t").rglob(".*.log.*")]
        assert logs and {n.split("_")[1].split(".")[0] for n in logs} <= {i.time for i in instants[1:]}
        planned = table.schedule_compaction(max_delta_commits=1)
        table.run_compaction(planned)
        assert dict(rows(theirs(tmp_path / "t"), ["id", "v"])) == expected
        same_rows(Table.open(path).read(query_type="read_optimized"),
                  theirs(tmp_path / "t", query_type="read_optimized"))


def test_the_spark_jobs_run_every_service_on_a_version_9_table(spark, tmp_path):
    """The packaged jobs (their `main`, on this run's SparkSession) create a v9 MOR table, upsert
    into it, schedule and execute a compaction, clean and archive it; hudi-rs agrees."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.conftest import rows
    from tests.spark.test_jobs import load

    path = str(tmp_path / "t")
    for n in range(6):
        source = tmp_path / f"src{n}"
        source.mkdir()
        pq.write_table(pa.table({"id": [f"k{i}" for i in range(n, n + 4)], "ts": [n] * 4, "part": ["a", "b"] * 2,
                                 "v": [float(n)] * 4}), source / "part-0.parquet")
        done = load("upsert").main(["--table", path, "--source", str(source), "--create-if-missing",
                                    "--table-type", "MERGE_ON_READ", "--record-key", "id", "--precombine-field", "ts",
                                    "--partition-fields", "part", "--option", "hoodie.write.table.version=9"])
        assert done["instant"]
    table = Table.open(path)
    assert table.config.version == 9 and table.config.props["hoodie.table.ordering.fields"] == "ts"
    planned = load("compaction_schedule").main(["--table", path, "--max-delta-commits", "1"])
    assert planned["instant"]
    executed = load("compaction_execute").main(["--table", path])
    assert executed["instant"] == planned["instant"]
    load("clean").main(["--table", path, "--option", "hoodie.cleaner.commits.retained=1"])
    archived = load("archive").main(["--table", path, "--min-commits", "2", "--max-commits", "3"])
    assert archived["archived"]
    assert (tmp_path / "t" / ".hoodie" / "timeline" / "history" / "_version_").is_file()
    expected = {f"k{i}": float(min(i, 5)) for i in range(9)}
    assert dict(rows(theirs(tmp_path / "t"), ["id", "v"])) == expected
    assert dict(rows(read_table(spark, path).toArrow(), ["id", "v"])) == expected


def test_spark_merges_several_ordering_fields_as_a_tuple(spark, tmp_path):
    """The same file-group reader on Spark: (a, b) compared as a tuple (see the core test)."""
    from tests.conftest import rows
    from tests.core.test_hudi1x_read import TUPLE_ORDERED, tuple_ordered_table

    tuple_ordered_table(tmp_path / "t")
    assert dict(rows(read_table(spark, str(tmp_path / "t")).toArrow(), ["id", "v"])) == TUPLE_ORDERED


@pytest.mark.parametrize("name", ["v9_cow_meta", "v8_trips"])
def test_spark_writes_keep_and_use_the_record_index(spark, tmp_path, name):
    """On a table Hudi built with a record index, distributed writes tagged by it
    (hoodie.index.type=RECORD_INDEX: each index file group's keys looked up in a task) update,
    insert, delete and move keys without a duplicate, and keep the index exactly what hudi-rs's
    scan implies."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from airflow_lake.spark import SparkEngine
    from tests.core.test_record_index import data_of, index_matches_hudi_rs

    spark.sparkContext.addPyFile(str(package_zip()))
    path = unpack(TABLES[name], tmp_path / "t")
    table = Table.open(str(path), engine=SparkEngine(spark), options={
        "hoodie.index.type": "RECORD_INDEX", "hoodie.record.index.update.partition.path": "true"})
    key, part, field = table.config.record_key_fields[0], table.config.partition_fields[0], \
        table.config.precombine_field
    rows = data_of(index_matches_hudi_rs(path)).sort_by(key)
    later = rows.set_column(rows.schema.get_field_index(field), field,
                            pc.add(rows[field], pa.scalar(10**6, rows.schema.field(field).type)))
    fresh = later.slice(0, 2).set_column(rows.schema.get_field_index(key), key, pa.array(["Z-1", "Z-2"]))
    result = table.write(spark.createDataFrame(pa.concat_tables([later.slice(0, 2), fresh])))
    assert result.index_stats["index_file_groups"] == 10
    scan = index_matches_hudi_rs(path)
    assert scan.num_rows == rows.num_rows + 2
    table.write(spark.createDataFrame(rows.slice(2, 1)), operation="delete")
    moving = later.slice(3, 1)
    other = next(p for p in pc.unique(rows[part]).to_pylist() if p != moving[part][0].as_py())
    table.write(spark.createDataFrame(moving.set_column(moving.schema.get_field_index(part), part,
                                                        pa.array([other]))))
    scan = index_matches_hudi_rs(path)
    assert scan.num_rows == rows.num_rows + 1
    assert scan.filter(pc.equal(scan[key], moving[key][0]))[part].to_pylist() == [other]
    # an overwrite of a partition: the keys of the groups it replaces (read in executors) leave
    # the index, the one it writes again stays
    kept = data_of(scan.filter(pc.equal(scan[part], other))).slice(0, 1)
    table.write(spark.createDataFrame(kept), operation="insert_overwrite")
    scan = index_matches_hudi_rs(path)
    assert scan.filter(pc.equal(scan[part], other))[key].to_pylist() == kept[key].to_pylist()
    # under a partition-scoped index, a key the global index holds elsewhere is refused (its
    # lookup in executors), nothing written; a new key goes through
    from airflow_lake.core.errors import RecordKeyError

    bloom = Table.open(str(path), engine=SparkEngine(spark), options={"hoodie.index.type": "BLOOM"})
    elsewhere = data_of(scan).slice(0, 1)
    to = next(p for p in pc.unique(rows[part]).to_pylist() if p != elsewhere[part][0].as_py())
    with pytest.raises(RecordKeyError, match=f"{elsewhere[key][0].as_py()!r} \\(written to '.*{to}'"):
        bloom.write(spark.createDataFrame(pa.concat_tables([
            elsewhere.set_column(elsewhere.schema.get_field_index(part), part, pa.array([to])),
            fresh.slice(0, 1).set_column(rows.schema.get_field_index(key), key, pa.array(["Z-3"]))])))
    assert index_matches_hudi_rs(path).num_rows == scan.num_rows
    bloom.write(spark.createDataFrame(fresh.slice(0, 1).set_column(rows.schema.get_field_index(key), key,
                                                                   pa.array(["Z-3"]))))
    assert index_matches_hudi_rs(path).num_rows == scan.num_rows + 1


@pytest.mark.parametrize("name", ["v9_cow_meta", "v9_mor_nonpart"])
def test_spark_writes_keep_column_stats_and_reads_skip_by_them(spark, tmp_path, name, caplog):
    """The statistics of the files a distributed write wrote (computed in its executors) reach
    the column and partition stats, and its records' changed values the secondary indexes;
    `read_table` with a point filter reads only the file groups whose statistics (or secondary
    index) may hold the value, and returns what filtering the table returns."""
    import logging

    import pyarrow as pa
    import pyarrow.compute as pc

    from airflow_lake.spark import SparkEngine
    from tests.core.test_column_stats_kept import stats_agree
    from tests.core.test_hudi1x_mdt import check_secondary_indexes
    from tests.core.test_record_index import data_of

    spark.sparkContext.addPyFile(str(package_zip()))
    path = unpack(TABLES[name], tmp_path / "t")
    table = Table.open(str(path), engine=SparkEngine(spark))
    key = table.config.record_key_fields[0]
    rows = data_of(theirs(path)).sort_by(key)
    fresh = rows.slice(0, 2).set_column(rows.schema.get_field_index(key), key, pa.array(["ZS-1", "ZS-2"]))
    moved = rows.slice(2, 2).set_column(rows.schema.get_field_index("merchant_name"), "merchant_name",
                                        pa.array(["Spark Shop", None]))
    table.write(spark.createDataFrame(pa.concat_tables([moved, fresh])))
    table.write(spark.createDataFrame(rows.slice(4, 1)), operation="delete")
    stats_agree(path)
    check_secondary_indexes(Table.open(str(path)), theirs(path))
    full = Table.open(str(path)).read()
    with caplog.at_level(logging.INFO):
        for column, value in ((key, "ZS-1"), (key, full[key][0].as_py()), ("merchant_name", "Spark Shop")):
            got = read_table(spark, str(path), filters=[(column, "=", value)]).toArrow()
            same_rows(got, full.filter(pc.equal(full[column], value)))
    assert any("pruned by secondary indexes" in r.getMessage() for r in caplog.records)
    # CREATE INDEX on the Spark engine: the build's scan runs in executors
    table.drop_index("merchant_idx")
    assert table.create_index("merchant_idx", "merchant_name").entries == full.num_rows
    check_secondary_indexes(Table.open(str(path)), theirs(path))
    skipped = [r.getMessage() for r in caplog.records if "data skipping read" in r.getMessage()]
    assert skipped and all(" of " in m for m in skipped)
    assert any(m.split("read ")[1].split(" of")[0] != m.split(" of ")[1].split(" ")[0] for m in skipped)
