"""Time travel takes what Hudi's Spark reader takes for `as.of.instant`: an instant time, or an
ISO date or date-time read in the table's timeline zone (an offset converted to it), on the
core API and the CLI (`read --as-of`, `files --as-of`); anything else is one clear error
naming the table and the value. hudi-rs, given the same instant, judges the rows."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.timeline.clock import as_of_instant, parse_instant
from tests.cli.conftest import invoke, invoke_json
from tests.conftest import hudi_read, rows

COLS = ["id", "v"]


@pytest.fixture
def table(tmp_path) -> Table:
    table = Table.create(str(tmp_path / "t"), name="t", table_type="MOR", record_key="id", precombine_field="v")
    for v in (1, 2, 3):
        table.write(pa.table({"id": ["a", f"k{v}"], "v": [v, v]}))
    return table


def _iso(instant: str, sep: str = "T", shift: timedelta = timedelta(0), suffix: str = "") -> str:
    moment = parse_instant(instant) + shift
    return moment.strftime(f"%Y-%m-%d{sep}%H:%M:%S.") + f"{moment.microsecond // 1000:03d}{suffix}"


def test_iso_date_times_read_as_the_instant_they_name(table):
    path = table.storage.uri
    c1, c2, c3 = table.timeline.commits().completed().times
    expected = rows(hudi_read(path, **{"hoodie.read.as.of.timestamp": c2}), COLS)
    assert expected == [("a", 2), ("k1", 1), ("k2", 2)]
    for spelled in (_iso(c2), _iso(c2, " "), _iso(c2, shift=timedelta(hours=2), suffix="+02:00"),
                    _iso(c2, shift=timedelta(hours=-5, minutes=-30), suffix="-05:30"), _iso(c2, suffix="Z")):
        assert as_of_instant(spelled, table.config.timezone) == c2, spelled
        assert rows(table.read(as_of=spelled), COLS) == expected, spelled
    # whole seconds and dates name 14-digit instants, as Hudi's formatQueryInstant makes them
    assert as_of_instant(_iso(c2)[:19], "UTC") == c2[:14]
    assert as_of_instant(_iso(c2)[:10], "UTC") == c2[:8] + "000000"
    assert table.read(as_of=_iso(c1)[:10]).num_rows == 0  # before the first commit of that day
    cli = invoke_json("read", path, "--as-of", _iso(c2, " "))
    assert sorted((r["id"], r["v"]) for r in cli) == expected
    files = invoke_json("files", path, "--as-of", _iso(c1))
    assert files["as_of"] == c1 and len(files["file_groups"]) == 1


def test_iso_without_an_offset_is_in_the_tables_timeline_zone(monkeypatch):
    assert as_of_instant("2026-11-25T10:30:00.250", "UTC") == "20261125103000250"
    assert as_of_instant("2026-11-25T10:30:00.250", "LOCAL") == "20261125103000250"
    assert as_of_instant("2026-11-25T13:30:00.250Z", "UTC") == "20261125133000250"
    monkeypatch.setenv("TZ", "America/Sao_Paulo")  # UTC-3, no daylight saving since 2019
    time.tzset()
    try:
        assert as_of_instant("2026-11-25T13:30:00Z", "LOCAL") == "20261125103000"
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", "2026-11-25 ", "25/11/2026", "2026-11-25T10",
                                 "２０２６-11-25", "20261125", "2026-11-25T10:30:00+25:00"])
def test_anything_else_is_one_error_naming_the_table_and_the_value(table, bad):
    before = sorted(os.listdir(f"{table.storage.uri}/.hoodie"))
    with pytest.raises(InvalidOptionError) as refused:
        table.read(as_of=bad)
    assert f"table {table.storage.uri}" in str(refused.value) and repr(bad) in str(refused.value)
    assert "ISO date or date-time" in str(refused.value)
    error = invoke("read", table.storage.uri, "--as-of", bad, code=1).stderr
    assert error.count("\n") == 1 and repr(bad) in error
    assert sorted(os.listdir(f"{table.storage.uri}/.hoodie")) == before


def test_time_travel_to_before_the_first_commit_says_so(table, caplog):
    """Today's date means today's midnight: before a table made today, the read has no rows,
    as in Hudi, and a warning says why instead of an empty answer alone."""
    first = table.timeline.commits().completed().first.time
    caplog.set_level("WARNING", logger="airflow_lake.core.read")
    assert table.read(as_of=_iso(first)[:10]).num_rows == 0
    assert f"as of {first[:8]}000000 is before the table's first commit {first}" in caplog.text
    caplog.clear()
    assert table.read(as_of=first).num_rows == 2
    assert "before the table's first commit" not in caplog.text
