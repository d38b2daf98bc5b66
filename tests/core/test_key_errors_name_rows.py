"""A null or empty record key names its row's place in the whole input, also where an engine
keys the input in parts (Spark's batches and partitions carry sequence numbers)."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import RecordKeyError
from airflow_lake.core.write.execute import SEQ
from airflow_lake.core.write.keying import key_batches, key_paths, key_table, named_row, plan_input, row_named


def _plan(table_path):
    table = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part")
    data = pa.table({"id": ["a", "b", None, "d"], "ts": [1, 2, 3, 4], "part": ["x"] * 4})
    plan = plan_input(table, data.schema, "upsert", False, None, "table t")
    return plan, data


def test_the_row_is_its_place_in_the_input(table_path):
    plan, data = _plan(table_path)
    spec = replace(plan.spec, out_schema=pa.schema(list(plan.spec.data_schema) + plan.work_fields))
    with pytest.raises(RecordKeyError, match=r"'id' is null in row 2$"):
        key_table(spec, data)
    with pytest.raises(RecordKeyError, match=r"'id' is null in row 102$"):
        key_table(spec, data, seq_base=100)
    more = pa.table({"id": ["e", "f", "g"], "ts": [5, 6, 7], "part": ["x"] * 3})
    batches = data.slice(0, 2).to_batches() + more.to_batches() + data.slice(2).to_batches()
    with pytest.raises(RecordKeyError, match=r"'id' is null in row 5$"):  # the third batch's first row
        list(key_batches(spec, iter(batches)))
    names = (*plan.key_inputs, SEQ)
    with pytest.raises(RecordKeyError, match=r"'id' is null in row 42$"):  # the row's sequence number
        key_paths(plan.spec, names, *[data.column(c).combine_chunks() for c in plan.key_inputs],
                  pa.array([40, 41, 42, 43], pa.int64()))
    with pytest.raises(RecordKeyError, match=r"'id' is null in row 2$"):  # without: its place in the batch
        key_paths(plan.spec, plan.key_inputs, *[data.column(c).combine_chunks() for c in plan.key_inputs])


def test_renaming_the_row_keeps_the_message():
    error = RecordKeyError("table t: record key field 'id' is empty in row 8589934593")
    assert named_row(error) == 8589934593
    assert str(row_named(error, 9)) == "table t: record key field 'id' is empty in row 9"
    assert named_row(RecordKeyError("no row here")) is None
