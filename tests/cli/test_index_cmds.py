"""`airflow-lake index create|drop|list` on a table Hudi 1.1 wrote (secondary indexes), and a
filtered read that the new index answers."""

from __future__ import annotations

import json

from tests.core.test_hudi1x_mdt import check_secondary_indexes
from tests.core.test_hudi1x_read import TABLES, theirs, unpack

from .conftest import invoke, invoke_json


def test_index_commands(tmp_path):
    path = str(unpack(TABLES["v9_cow_meta"], tmp_path / "t"))
    listed = invoke_json("index", "list", path)["indexes"]
    assert [(i["name"], i["column"], i["version"], i["listed"], i["maintained"]) for i in listed] == [
        ("merchant_idx", "merchant_name", "V2", True, True), ("txn_date_idx", "txn_date", "V2", True, True)]
    assert invoke_json("index", "drop", path, "merchant_idx") == {
        "table": path, "index": "secondary_index_merchant_idx", "dropped": True}
    built = invoke_json("index", "create", path, "by_type", "txn_type")
    assert (built["index"], built["column"], built["entries"]) == ("secondary_index_by_type", "txn_type", 12)
    assert built["instant"] in invoke("timeline", path).stdout  # the indexing action
    from airflow_lake.core import Table

    check_secondary_indexes(Table.open(path), theirs(path))
    rows = json.loads(invoke("read", path, "--filter", "txn_type = debit", "--format", "json").stdout)
    assert len(rows) == sum(v == "debit" for v in theirs(path)["txn_type"].to_pylist()) >= 1
    # refusals: one line naming the table, exit 1, nothing changed
    error = invoke("index", "create", path, "by_type", "txn_type", code=1).stderr
    assert error.startswith("airflow-lake: error: table ") and "exists already" in error
    assert "no secondary index" in invoke("index", "drop", path, "nope", code=1).stderr
    assert [i["name"] for i in invoke_json("index", "list", path)["indexes"]] == ["by_type", "txn_date_idx"]
