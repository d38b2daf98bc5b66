"""Column projections (`columns=[...]`) over every type the schema module stores, on every read
kind, judged by hudi-rs's full read projected to the same columns (issue 23, item 6: nested
columns used to come back as nulls from base files)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core.table import Table
from tests.cli.conftest import invoke
from tests.conftest import hudi_read, rows

ENTRY = pa.struct([pa.field("x", pa.int64()), pa.field("tags", pa.list_(pa.string()))])
TYPES = {
    "l": pa.list_(pa.int64()),
    "s": pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.string())]),
    "m": pa.map_(pa.string(), pa.int64()),
    "ls": pa.list_(ENTRY),
    "ll": pa.list_(pa.list_(pa.float64())),
    "ms": pa.map_(pa.string(), ENTRY),
    "dec": pa.decimal128(10, 2),
    "big": pa.decimal128(38, 6),
    "tsu": pa.timestamp("us", tz="UTC"),
    "tsm": pa.timestamp("ms", tz="UTC"),
    "d": pa.date32(),
    "bin": pa.binary(),
    "txt": pa.string(),
    "f": pa.float32(),
    "flag": pa.bool_(),
}
PROJECTIONS = [["id", c] for c in TYPES] + [[c] for c in TYPES] + [["ls", "s", "m", "id", "ts"]]
# (table type, index, log block format): COW; MOR with base-only, merged and base-inserted rows
# (parquet and avro blocks); MOR with the bucket index (inserts straight to log files)
LAYOUTS = {
    "cow": ("COPY_ON_WRITE", "BLOOM", "parquet"),
    "mor_parquet": ("MERGE_ON_READ", "BLOOM", "parquet"),
    "mor_avro": ("MERGE_ON_READ", "BLOOM", "avro"),
    "mor_bucket": ("MERGE_ON_READ", "BUCKET", "parquet"),
}


def batch(ids: list[int], ts: int) -> pa.Table:
    """Rows of every type; values depend on the id and the write so merges are visible."""
    def entry(i: int) -> dict:
        return {"x": i * ts, "tags": [f"t{i}", None, f"w{ts}"]}

    values = {
        "l": [[i, ts, None] for i in ids],
        "s": [{"a": i, "b": f"s{i}-{ts}"} for i in ids],
        "m": [[(f"k{i}", ts), ("z", None)] for i in ids],
        "ls": [[entry(i), None, entry(i + 1)] for i in ids],
        "ll": [[[i / 2, None], [], None] for i in ids],
        "ms": [[(f"e{ts}", entry(i))] for i in ids],
        "dec": [Decimal(f"{i}{ts}.25") for i in ids],
        "big": [Decimal(f"{'9' * 30}{i}.{ts:06d}") for i in ids],
        "tsu": [dt.datetime(2024, 1, i, 3, 4, 5, ts, tzinfo=dt.timezone.utc) for i in ids],
        "tsm": [dt.datetime(2023, 5, i, 1, 2, 3, ts * 1000, tzinfo=dt.timezone.utc) for i in ids],
        "d": [dt.date(2020, 2, i) for i in ids],
        "bin": [bytes([i, ts, 0, 255]) for i in ids],
        "txt": [f"é{i}-{ts}" for i in ids],
        "f": [i + ts / 4 for i in ids],
        "flag": [(i + ts) % 2 == 0 for i in ids],
    }
    columns = {"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64())}
    columns |= {name: pa.array(values[name], type_) for name, type_ in TYPES.items()}
    return pa.table(columns)


def build(path: str, layout: str) -> tuple[Table, list[str]]:
    """Three writes: inserts; updates of some keys plus inserts; an update and an insert."""
    table_type, index, block_format = LAYOUTS[layout]
    options = {"hoodie.index.type": index, "hoodie.logfile.data.block.format": block_format}
    if index == "BUCKET":
        options["hoodie.bucket.index.num.buckets"] = 2
    table = Table.create(path, name="proj", table_type=table_type, record_key="id", precombine_field="ts",
                         options=options)
    instants = [table.write(batch([1, 2, 3, 4], 1)).instant,
                table.write(batch([2, 3, 5], 2)).instant,
                table.write(batch([3, 6], 3)).instant]
    return table, instants


def same(ours: pa.Table, theirs: pa.Table, columns: list[str], kind: str = "snapshot") -> None:
    assert ours.column_names == columns
    assert ours.num_rows == theirs.num_rows, (kind, columns)
    assert rows(ours, columns) == rows(theirs, columns), (kind, columns)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_projections_of_every_type_match_hudi_rs(table_path, layout):
    table, (c1, c2, c3) = build(table_path, layout)
    reads = {
        "snapshot": ({}, {}),
        "as_of": ({"as_of": c2}, {"hoodie.read.as.of.timestamp": c2}),
        "read_optimized": ({"query_type": "read_optimized"}, {"hoodie.read.use.read_optimized.mode": "true"}),
    }
    for kind, (ours_kwargs, options) in reads.items():
        theirs = hudi_read(table_path, **options)
        for columns in PROJECTIONS:
            same(table.read(columns=columns, **ours_kwargs), theirs, columns, kind)
    theirs = hudi_read(table_path, **{"hoodie.read.query.type": "incremental", "hoodie.read.start.timestamp": c1,
                                      "hoodie.read.end.timestamp": c3})
    assert theirs.num_rows == 4  # keys 2, 3, 5, 6
    for columns in PROJECTIONS:
        same(table.read_incremental(c1, c3, columns=columns), theirs, columns, "incremental")


def test_projection_of_nested_columns_is_not_null(table_path):
    """The symptom itself: base-file rows of a projected nested column carry their values."""
    table, _ = build(table_path, "cow")
    got = table.read(columns=["id", "l", "s", "m", "ls"])
    for name in ("l", "s", "m", "ls"):
        assert got.column(name).null_count == 0, name


def test_cli_read_columns_keeps_nested_values(table_path, tmp_path):
    """`airflow-lake read --columns` goes through the same projection."""
    build(table_path, "mor_parquet")
    columns = ["id", "ls", "m", "s", "dec"]
    out = tmp_path / "rows.parquet"
    invoke("read", table_path, "--columns", ",".join(columns), "--format", "parquet", "--output", out)
    same(pq.read_table(out), hudi_read(table_path), columns)
