"""One real spark-submit of the upsert job on S3: the source (two parquet files) and the table
on the local S3 server, storage options given as `--option`s. Spark has no S3 file system here
(no hadoop-aws jars): executors read the source and write the table through the core's
storage layer. hudi-rs reads the result over S3."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_lake.core import Table
from airflow_lake.core.storage import open_storage
from tests.conftest import hudi_read, rows
from tests.spark.test_jobs import last_json, spark_submit
from tests.spark.test_upsert_job import COLS, CREATE, batch


@pytest.mark.spark
def test_spark_submit_upsert_from_s3_to_s3(s3_bucket, s3_options):
    landing = f"s3://{s3_bucket}/landing/trips"
    table_uri = f"s3://{s3_bucket}/lake/trips"
    storage = open_storage(landing, s3_options)
    for n, ids in enumerate((range(0, 12), range(12, 20))):
        with storage.fs.open_output_stream(storage.full(f"part-{n}.parquet")) as f:
            pq.write_table(batch(ids, 1, 1), f)
    storage.write("_SUCCESS", b"")  # a marker Spark writers leave: skipped
    options = [arg for key, value in s3_options.items() for arg in ("--option", f"{key}={value}")]
    done = last_json(spark_submit("upsert", "--table", table_uri, "--source", landing, *CREATE,
                                  "--table-type", "MERGE_ON_READ", "--run-token", "dag/run/ingest", *options,
                                  timeout=1200))
    assert done["inserts"] == 20 and done["table_created"] and done["action"] == "deltacommit"
    assert done["files_written"] == 2  # one file group per partition
    expected = rows(batch(range(20), 1, 1), COLS)
    assert rows(hudi_read(table_uri, s3_options), COLS) == expected
    assert rows(Table.open(table_uri, storage_options=s3_options).read(), COLS) == expected


@pytest.mark.parametrize("fmt", ["json", "csv", "orc", "avro"])
def test_executor_reads_each_format_from_s3(s3_bucket, s3_options, fmt):
    """What each Spark task runs for a source file on S3 (`sources._file_batches`), without Spark."""
    import json

    import fastavro
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.orc as orc

    from airflow_lake.spark import sources
    from airflow_lake.spark.schema import exact_arrow_schema

    data = batch(range(6), 3, 2)
    root = f"s3://{s3_bucket}/landing/{fmt}"
    storage = open_storage(root, s3_options)
    with storage.fs.open_output_stream(storage.full(f"part-0.{fmt}")) as f:
        if fmt == "json":
            f.write("".join(json.dumps(r) + "\n" for r in data.to_pylist()).encode())
        elif fmt == "csv":
            pacsv.write_csv(data, f)
        elif fmt == "orc":
            orc.write_table(data, f)
        else:
            schema = {"type": "record", "name": "r", "fields": [
                {"name": "id", "type": "string"}, {"name": "ts", "type": "long"},
                {"name": "part", "type": "string"}, {"name": "v", "type": "double"}]}
            fastavro.writer(f, schema, data.to_pylist())
    assert sources.read_by_core(root, fmt)
    assert sources.read_by_core("/local/landing", fmt) == (fmt == "avro")  # Spark reads local files itself
    found_root, names, found = sources._files(root, s3_options, fmt)
    assert names == [f"part-0.{fmt}"]
    assert sources._files(f"{root}/part-0.{fmt}", s3_options, fmt)[:2] == (root, names)  # one file as source
    with found.open_input(names[0]) as f:
        schema = exact_arrow_schema(sources._schema(fmt, f))
    tasks = [pa.record_batch({"name": names})]
    out = pa.Table.from_batches(list(sources._file_batches(found_root, s3_options, fmt, schema, iter(tasks))))
    assert rows(out, COLS) == rows(data, COLS)
