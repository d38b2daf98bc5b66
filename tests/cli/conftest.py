"""Tables for the command line's tests (built with the core) and a runner of `airflow-lake`."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from click.testing import CliRunner, Result

from airflow_lake.cli import cli
from airflow_lake.core import Table

TRIPS = pa.table({"uuid": ["t1", "t2", "t3", "t4"], "ts": [1, 1, 1, 1], "rider": ["A", "B", "C", "D"],
                  "fare": [19.1, 27.7, 33.9, 17.8], "city": ["san_francisco", "san_francisco", "sao_paulo", "chennai"]})
CHANGES = pa.table({"uuid": ["t3", "t5"], "ts": [2, 2], "rider": ["C", "E"], "fare": [25.0, 93.5],
                    "city": ["sao_paulo", "chennai"]})
DELETES = pa.table({"uuid": ["t2"], "city": ["san_francisco"]})


def make_trips(path: str, table_type: str = "MERGE_ON_READ") -> Table:
    """The demo's table: insert 4 trips, upsert 2 (one new), delete 1: three commits, 4 rows."""
    table = Table.create(path, name="trips", table_type=table_type, record_key="uuid", precombine_field="ts",
                         partition_fields=["city"], hive_style_partitioning=True)
    table.write(TRIPS, operation="insert")
    table.write(CHANGES, operation="upsert")
    table.write(DELETES, operation="delete")
    return table


def invoke(*args: str, code: int = 0) -> Result:
    """Run `airflow-lake ARGS` in this process; the exit code must be `code`."""
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result


def invoke_json(*args: str, code: int = 0):
    """`airflow-lake ARGS --json`, parsed."""
    return json.loads(invoke(*args, "--json", code=code).stdout)


@pytest.fixture
def trips(tmp_path) -> Table:
    return make_trips(str(tmp_path / "trips"))
