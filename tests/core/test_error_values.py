"""Formatting an error never fails (issue 23, item 14): values in messages are rendered by
`values.describe_value`, which needs no pandas, takes any Arrow type and truncates. Checked
in a fresh interpreter where pandas cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

NO_PANDAS = textwrap.dedent('''
    import sys

    class NoPandas:  # pandas "not installed": the import fails as it would without it
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "pandas":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, NoPandas())
''')

AWKWARD = NO_PANDAS + textwrap.dedent('''
    import datetime as dt
    import json
    from decimal import Decimal

    import pyarrow as pa

    from airflow_lake.core.values import describe_value

    ns = pa.array([1001], pa.int64()).cast(pa.timestamp("ns"))
    nested_type = pa.struct([("at", pa.list_(pa.timestamp("ns", tz="UTC"))), ("raw", pa.binary()),
                             ("tags", pa.map_(pa.string(), pa.duration("ns")))])
    values = {
        "ns": ns[0],
        "ns_tz": ns.cast(pa.timestamp("ns", tz="Asia/Kolkata"))[0],
        "time_ns": pa.array([1001], pa.int64()).cast(pa.time64("ns"))[0],
        "duration_ns": pa.array([1001], pa.int64()).cast(pa.duration("ns"))[0],
        "decimal": pa.array([Decimal("9" * 38)], pa.decimal128(38, 0))[0],
        "decimal256": pa.array([Decimal("1" * 70 + ".25")], pa.decimal256(76, 2))[0],
        "bytes": pa.array([bytes(range(256)) * 4])[0],
        "text": pa.array(["é" * 1000])[0],
        "nested": pa.array([{"at": [1001, None], "raw": b"\\x00", "tags": [("k", 5)]}], nested_type)[0],
        "long_list": pa.array([list(range(1000))])[0],
        "null": pa.scalar(None, pa.timestamp("ns")),
        "date": pa.array([dt.date(2020, 2, 29)])[0],
        "python": {"a": [1, 2]},
    }
    print(json.dumps({name: describe_value(v) for name, v in values.items()}))
    assert "pandas" not in sys.modules
''')

WRITE = NO_PANDAS + textwrap.dedent('''
    import json

    import pyarrow as pa

    from airflow_lake.core import LakeError, Table

    table = Table.create(sys.argv[1], name="t", record_key="id")
    messages = {}
    for name, column in {
        "ns": pa.array([1000, 1001], pa.int64()).cast(pa.timestamp("ns")),
        "ns_tz": pa.array([2000, 1001], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        "time_ns": pa.array([1000, 1001], pa.int64()).cast(pa.time64("ns")),
        "u64": pa.array([1, 2**64 - 1], pa.uint64()),
    }.items():
        try:
            table.write(pa.table({"id": [1, 2], name: column}))
        except LakeError as e:
            messages[name] = str(e)
    print(json.dumps(messages))
    assert "pandas" not in sys.modules
''')


def run(script: str, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_refusals_describe_their_values_without_pandas(table_path):
    messages = run(WRITE, table_path)
    assert set(messages) == {"ns", "ns_tz", "time_ns", "u64"}
    for name, message in messages.items():
        assert message.startswith(f"table {table_path}: column {name!r}"), message
    assert "value 1970-01-01 00:00:00.000001001 (1001 ns) has sub-microsecond digits" in messages["ns"]
    assert "value 1970-01-01 00:00:00.000001001Z (1001 ns)" in messages["ns_tz"]
    assert "value 00:00:00.000001001 (1001 ns)" in messages["time_ns"]
    assert "value 18446744073709551615 is above the int64 maximum" in messages["u64"]


def test_any_value_is_described_without_pandas_and_truncated():
    described = run(AWKWARD)
    assert described["ns"] == "1970-01-01 00:00:00.000001001"
    assert described["ns_tz"] == "1970-01-01 05:30:00.000001001+0530"
    assert described["time_ns"] == "00:00:00.000001001"
    assert described["duration_ns"] == "1001 ns"
    assert described["decimal"] == "9" * 38
    assert described["decimal256"] == "1" * 70 + ".25"
    assert described["text"].endswith("... (1002 characters)") and described["bytes"].endswith(" characters)")
    assert described["nested"] == "{at: [1970-01-01 00:00:00.000001001Z, null], raw: b'\\x00', tags: {'k': 5 ns}}"
    assert described["long_list"] == "[0, 1, 2, 3, 4, ...]"
    assert described["null"] == "null" and described["date"] == "2020-02-29"
    assert described["python"] == "{'a': [1, 2]}"
    for name in ("bytes", "text", "decimal256"):
        assert len(described[name]) < 120, name
