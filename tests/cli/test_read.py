"""`read`: snapshot, as-of, incremental, columns, filters, limits and the four formats."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.parquet as pq

from ..conftest import hudi_read, rows
from .conftest import invoke, invoke_json

COLS = ["uuid", "rider", "fare", "city"]


def test_read_formats_agree_with_the_core_and_hudi_rs(trips, tmp_path):
    path = trips.storage.uri
    expected = rows(trips.read(), COLS)
    assert expected == rows(hudi_read(path), COLS) and len(expected) == 4
    as_json = json.loads(invoke("read", path, "--format", "json").stdout)
    assert sorted(tuple(r[c] for c in COLS) for r in as_json) == expected
    assert json.loads(invoke("read", path, "--json").stdout) == as_json
    text = invoke("read", path, "--format", "csv", "--columns", ",".join(COLS)).stdout
    parsed = [(r["uuid"], r["rider"], float(r["fare"]), r["city"]) for r in csv.DictReader(io.StringIO(text))]
    assert sorted(parsed) == expected
    out = tmp_path / "rows.parquet"
    result = invoke("read", path, "--format", "parquet", "--output", out)
    assert rows(pq.read_table(out), COLS) == expected and f"wrote 4 rows to {out}" in result.stderr
    table = invoke("read", path, "--columns", "uuid,fare").stdout
    assert table.splitlines()[0].split() == ["uuid", "fare"] and "93.5" in table and "t2" not in table


def test_filters_limit_as_of_incremental(trips):
    path = trips.storage.uri
    commits = trips.timeline.commits().completed().times
    over = json.loads(invoke("read", path, "-f", "fare > 20", "-f", "city != chennai", "--json").stdout)
    assert sorted(r["uuid"] for r in over) == ["t3"]
    listed = json.loads(invoke("read", path, "-f", "uuid in t1,t5", "--json").stdout)
    assert sorted(r["uuid"] for r in listed) == ["t1", "t5"]
    assert len(json.loads(invoke("read", path, "--limit", "2", "--json").stdout)) == 2
    first = json.loads(invoke("read", path, "--as-of", commits[0], "--json").stdout)
    assert rows(trips.read(as_of=commits[0]), COLS) == sorted(tuple(r[c] for c in COLS) for r in first)
    assert len(first) == 4 and {r["uuid"] for r in first} == {"t1", "t2", "t3", "t4"}
    changed = json.loads(invoke("read", path, "--incremental", commits[0], "--end", commits[1], "--json").stdout)
    assert sorted(r["uuid"] for r in changed) == ["t3", "t5"]
    assert rows(trips.read_incremental(commits[0], commits[1]), COLS) == \
        sorted(tuple(r[c] for c in COLS) for r in changed)
    optimized = json.loads(invoke("read", path, "--read-optimized", "--json").stdout)
    assert {r["uuid"] for r in optimized} == {"t1", "t2", "t3", "t4", "t5"}  # the delete lives in a log file
    shown = invoke("read", path, "--limit", "1", "-c", "uuid").stdout
    assert "(3 more rows; --limit N or --format csv for all)" in shown


def test_bad_reads_are_one_line_errors(trips):
    path = trips.storage.uri
    bad = invoke("read", path, "-f", "fare > cheap", code=1).stderr
    assert bad == f"airflow-lake: error: table {path}: filter 'fare > cheap': 'cheap' is not a double value\n"
    assert "names no column" in invoke("read", path, "-f", "nope = 1", code=1).stderr
    assert "needs --output FILE" in invoke("read", path, "--format", "parquet", code=1).stderr
    old = invoke("read", path, "--as-of", "2020", code=1).stderr
    assert old.count("\n") == 1 and "'2020' is not an instant time" in old and path in old
    assert invoke_json("read", path, "--columns", "nope", code=1)["error"].startswith(f"table {path}: no column")
