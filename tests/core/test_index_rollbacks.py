"""Rolling back a write that an index built later from a scan already holds (a secondary index
created after it, the record index or the column and partition stats enabled after it): the
rollback cannot just delete the write's MDT log files, the indexes are brought in line with
the table. Judged by hudi-rs's scan, the decoded index entries and filtered reads compared with
a filtered full scan."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_lake.core.table import Table
from tests.conftest import hudi_read
from tests.core.test_hudi1x_mdt import agree, check_secondary_indexes

V9_MDT = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"}
BUILT_LATER = {
    "secondary index": {"hoodie.metadata.record.index.enable": "true"},  # (the index itself: create_index)
    "record index": {},
    "column stats": {},
}
ENABLE = {
    "record index": {"hoodie.metadata.record.index.enable": "true"},
    "column stats": {"hoodie.metadata.index.column.stats.enable": "true"},
}


def batch(ids: list[str], ts: int, m: list[str]) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "m": m, "p": ["x"] * len(ids)})


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("built", list(BUILT_LATER))
def test_rolling_back_a_write_an_index_built_later_holds(tmp_path, table_type, built):
    path = str(tmp_path / "t")
    options = {**V9_MDT, **BUILT_LATER[built]}
    table = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                         partition_fields="p", options=options)
    table.write(batch(["a", "b"], 1, ["m1", "m2"]))
    updated = table.write(batch(["a", "c"], 2, ["m9", "m3"])).instant  # a: m1 -> m9, c new
    if built == "secondary index":
        table.create_index("midx", "m")
    else:  # built by the next write, from a scan that includes `updated`
        enabled = Table.open(path, options={**options, **ENABLE[built]})
        table.rollback(enabled.write(batch(["d"], 3, ["m4"])).instant)
    table.rollback(updated)
    table = Table.open(path)
    expected = [("a", "m1"), ("b", "m2")]
    assert sorted((r["id"], r["m"]) for r in hudi_read(path).to_pylist()) == expected
    check_secondary_indexes(table, agree(table, path))  # the listing, the record index, the cells
    skipping = Table.open(path, options={"hoodie.enable.data.skipping": "true"})
    for value in ("m1", "m2", "m3", "m9"):
        read = skipping.read(filters=[("m", "=", value)], columns=["id", "m"])
        assert sorted((r["id"], r["m"]) for r in read.to_pylist()) == [r for r in expected if r[1] == value], value
    full = skipping.read(columns=["m"])
    assert skipping.read(filters=[("m", "<", "m2")]).num_rows == pc.sum(pc.less(full["m"], "m2")).as_py() == 1
