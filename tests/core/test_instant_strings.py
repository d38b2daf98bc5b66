"""An instant time is exactly 14 or 17 ASCII digits wherever one is given: a trailing newline
(`$` matches before it), spaces, other scripts' digits (`str.isdigit` and `\\d` accept
'２０２４…'), or 15/16/18 digits are refused with an error naming the table and the value,
before the timeline changes. Timeline file names follow the same rule, v6 metadata-table
instants with their 3-digit suffix aside."""

from __future__ import annotations

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.timeline.instant import Instant, State, check_instant_time

GOOD = "20240102030405678"
FULL_WIDTH = GOOD.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
ARABIC_INDIC = GOOD.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))


def bad_times(good: str) -> dict[str, str]:
    """Near misses of the instant time `good` (17 digits)."""
    return {"newline": good + "\n", "crlf": good + "\r\n", "leading space": " " + good, "trailing space": good + " ",
            "full-width digits": good.translate(str.maketrans("0123456789", "０１２３４５６７８９")),
            "arabic-indic digits": good.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")),
            "15 digits": good[:15], "16 digits": good[:16], "18 digits": good + "0", "sign": "+" + good[1:],
            "empty": "", "14 digits and newline": good[:14] + "\n"}


@pytest.mark.parametrize("value", list(bad_times(GOOD).values()), ids=list(bad_times(GOOD)))
def test_check_instant_time_takes_exactly_14_or_17_ascii_digits(value):
    with pytest.raises(InvalidOptionError, match="is not an instant time") as e:
        check_instant_time(value, "/some/table")
    assert "/some/table" in str(e.value) and repr(value) in str(e.value)
    assert check_instant_time(GOOD) == GOOD and check_instant_time(GOOD[:14]) == GOOD[:14]


def test_timeline_file_names_need_ascii_digits_of_an_instant_length():
    assert Instant.parse(f"{GOOD}.commit") == Instant(GOOD, "commit", State.COMPLETED)
    assert Instant.parse(f"{GOOD}001.deltacommit") == Instant(GOOD + "001", "deltacommit", State.COMPLETED)  # v6 MDT
    for name in (f"{FULL_WIDTH}.commit", f"{ARABIC_INDIC}.commit", f"{GOOD[:15]}.commit", f"{GOOD[:16]}.commit",
                 f"{GOOD}\n.commit", f"{GOOD}.commit\n", f" {GOOD}.commit", f"{GOOD}0001.commit"):
        assert Instant.parse(name) is None, name


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Table:
    t = Table.create(str(tmp_path_factory.mktemp("instants") / "t"), name="t", table_type="MERGE_ON_READ",
                     record_key="id", precombine_field="ts")
    for ts in (1, 2):
        t.write(pa.table({"id": ["a", "b"], "ts": [ts, ts]}))
    t.savepoint(t.timeline.commits().completed().first.time)
    return t


def _calls(table: Table, good: str):
    """Each API that takes an instant, given `bad` in its place."""
    return {"read as_of": lambda bad: table.read(as_of=bad),
            "incremental start": lambda bad: table.read_incremental(bad),
            "incremental end": lambda bad: table.read_incremental(good, bad),
            "rollback": lambda bad: table.rollback(bad),
            "savepoint": lambda bad: table.savepoint(bad),
            "restore": lambda bad: table.restore(bad),
            "schedule compaction": lambda bad: table.schedule_compaction(instant=bad),
            "run compaction": lambda bad: table.run_compaction(bad)}


@pytest.mark.parametrize("call", ["read as_of", "incremental start", "incremental end", "rollback", "savepoint",
                                  "restore", "schedule compaction", "run compaction"])
def test_every_api_taking_an_instant_refuses_near_misses(table, call):
    first = table.timeline.commits().completed().first.time
    before = sorted(n for n, _ in table.storage.list_names(".hoodie"))
    for what, bad in bad_times(first).items():
        with pytest.raises(InvalidOptionError, match="is not an instant time") as e:
            _calls(table, first)[call](bad)
        assert table.storage.uri in str(e.value) and repr(bad) in str(e.value), (what, str(e.value))
    assert sorted(n for n, _ in table.storage.list_names(".hoodie")) == before


@pytest.mark.parametrize("args", [["read", "{uri}", "--as-of", "{bad}"], ["read", "{uri}", "--incremental", "{bad}"],
                                  ["rollback", "{uri}", "{bad}"], ["restore", "{uri}", "{bad}"],
                                  ["files", "{uri}", "--as-of", "{bad}"]])
def test_the_cli_refuses_near_misses(table, args):
    from airflow_lake.cli.app import cli

    first = table.timeline.commits().completed().first.time
    for bad in (first + "\n", first[:16], first.translate(str.maketrans("0123456789", "０１２３４５６７８９"))):
        result = CliRunner().invoke(cli, [a.format(uri=table.storage.uri, bad=bad) for a in args])
        assert result.exit_code != 0, (args, bad, result.output)
        assert "is not an instant time" in result.output, result.output


def test_bucket_numbers_in_file_ids_are_ascii_digits():
    from airflow_lake.core.index.bucket import bucket_of_file_id

    assert bucket_of_file_id("00000001-2f1c-4b3a-9d3e-0123456789ab-0") == 1
    assert bucket_of_file_id("０００００００１-2f1c-4b3a-9d3e-0123456789ab-0") is None


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=24), st.from_regex(r"[0-9０-９٠-٩ \n]{13,21}", fullmatch=True)))
def test_only_14_or_17_ascii_digits_are_instant_times(value):
    valid = len(value) in (14, 17) and all("0" <= c <= "9" for c in value)
    try:
        assert check_instant_time(value) == value and valid
    except InvalidOptionError:
        assert not valid
