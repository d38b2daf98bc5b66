"""Column and partition statistics in the metadata table (v8 spec §5.5a, §5.5b), judged against
the Hudi-written fixtures: every `column_stats` and `partition_stats` cell's key and file group
recomputed and its value re-encoded byte for byte, base-file stats recomputed from the parquet
footers and log-file stats from the records; the merge rule and data skipping."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import xxhash

from airflow_lake.core import Table
from airflow_lake.core.formats.hfile import read_hfile
from airflow_lake.core.formats.log import read_log_file
from airflow_lake.core.formats.log.blocks import DataBlock, HFileBlock
from airflow_lake.core.formats.log.framing import HeaderKey
from airflow_lake.core.index.column_stats import (
    COLUMN_STATS,
    COLUMN_STATS_TYPE,
    PARTITION_STATS,
    PARTITION_STATS_TYPE,
    ColumnRange,
    column_stats_key,
    hash_id,
    index_version,
    indexed_columns,
    may_match,
    merge_ranges,
    partition_stats_key,
    picked_range,
    range_of_datum,
    ranges_of_parquet,
    ranges_of_records,
    stats_datum,
    tombstone,
)
from airflow_lake.core.index.record_index import file_group_index
from airflow_lake.core.metadata_table import MDT, merge_mdt_slice, parsed_schema
from airflow_lake.core.schema import META_SCHEMA
from tests.core.test_hudi1x_read import TABLES, unpack

STATS_TABLES = ["v8_trips", "v9_cow_meta", "v9_mor_nonpart"]  # INDEX.md: those with column_stats
ENVELOPE = ["_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path",
            "filesystemMetadata", "BloomFilterMetadata", "recordIndexMetadata", "SecondaryIndexMetadata"]


@dataclass
class Cell:
    """One HFile cell of a stats partition: where it is, its row (the key), value and schema."""

    partition: str  # the MDT partition
    file: str  # the MDT file holding it
    base: bool
    row: str
    value: bytes
    schema_text: str

    def record(self) -> dict:
        return fastavro.schemaless_reader(io.BytesIO(self.value), parsed_schema(self.schema_text), None,
                                          return_record_name=True, return_record_name_override=True)


def _file_id(mdt_file: str) -> str:
    return mdt_file.lstrip(".").split("_")[0]


def _cells(root: Path, partition: str) -> list[Cell]:
    folder = root / MDT / partition
    if not folder.exists():
        return []
    out = []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(".hfile"):
            hfile = read_hfile(path.read_bytes(), str(path))
            out += [Cell(partition, path.name, True, k.decode(), v, hfile.info[b"schema"].decode())
                    for k, v in hfile.cells]
        elif ".log." in path.name:
            for block in read_log_file(path.read_bytes(), str(path), hfile_blocks=True):
                if isinstance(block, HFileBlock):
                    hfile = block.hfile()
                    schema = block.header.get(HeaderKey.SCHEMA) or hfile.info[b"schema"].decode()
                    out += [Cell(partition, path.name, False, k.decode(), v, schema) for k, v in hfile.cells]
    return out


@dataclass
class Fixture:
    root: Path
    table: Table
    types: dict[str, pa.DataType]  # column -> Arrow type (meta fields included)
    files: dict[str, Path]  # data file name -> its path
    cells: list[Cell]


@pytest.fixture(scope="module")
def stats_tables(tmp_path_factory) -> dict[str, Fixture]:
    base = tmp_path_factory.mktemp("colstats")
    out = {}
    for name in STATS_TABLES:
        root = unpack(TABLES[name], base / name)
        table = Table.open(str(root))
        out[name] = Fixture(root, table, {f.name: f.type for f in [*META_SCHEMA, *table.schema()]},
                            {p.name: p for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.parts},
                            _cells(root, COLUMN_STATS) + _cells(root, PARTITION_STATS))
    return out


# -- keys ---------------------------------------------------------------------------------------------
def test_hash_ids_and_keys_match_the_spec():
    # XXH64 check values (seed 0) of the library, then Hudi's seeded form and the verified key
    assert xxhash.xxh64(b"", seed=0).intdigest() == 0xEF46DB3751D8E999
    assert xxhash.xxh64(b"abc", seed=0).intdigest() == 0x44BC2CF5AD770999
    seeded = xxhash.xxh64(b"abc", seed=0xFFFFFFFFDABADABA).intdigest()
    assert base64.b64decode(hash_id("abc", 64)) == seeded.to_bytes(8, "big")
    assert hash_id("", 128) == base64.b64encode(hashlib.md5(b"").digest()).decode() == "1B2M2Y8AsgTpgAmY7PhCfg=="
    key = column_stats_key("currency", "region=us",
                           "c7bbe63e-fa43-40ba-94a9-03158165edc6-0_1-27-53_20260307162434124.parquet")
    assert key == "/m6lxu4Dh5w=431THTTwO5Q=W7RhzS2IFnrW7FlqIkFJUw==" and len(key) == 48
    assert partition_stats_key("currency", "region=us") == "/m6lxu4Dh5w=431THTTwO5Q="
    assert column_stats_key("c", "", "f.parquet") == column_stats_key("c", ".", "f.parquet")  # non-partitioned
    assert hash_id("é", 64) != hash_id("e", 64)
    with pytest.raises(ValueError, match="64"):
        hash_id("x", 32)


# -- every fixture cell -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STATS_TABLES)
def test_every_fixture_stats_cell_has_its_key_group_and_exact_bytes(stats_tables, name):
    fx = stats_tables[name]
    props = fx.table.config.props
    partitions = {p.parent.relative_to(fx.root).as_posix() if p.parent != fx.root else "" for p in fx.files.values()}
    counts = Counter()
    for partition in (COLUMN_STATS, PARTITION_STATS):
        cells = [c for c in fx.cells if c.partition == partition]
        if not cells:
            assert partition == PARTITION_STATS and name == "v9_mor_nonpart"  # non-partitioned: none (§5.5b)
            continue
        version = index_version(fx.table.storage, props, partition)
        assert version == ("V1" if name.startswith("v8") else "V2")
        # file groups: N from the folder, the group of each key by Java's String.hashCode
        groups = sorted({_file_id(c.file) for c in cells})
        assert len(groups) == (2 if partition == COLUMN_STATS else 1)
        hashed = file_group_index(pa.array([c.row for c in cells]), len(groups))
        assert [groups[i] for i in hashed] == [_file_id(c.file) for c in cells]
        for cell in cells:
            record = cell.record()
            stats = record["ColumnStatsMetadata"]
            assert record["type"] == (COLUMN_STATS_TYPE if partition == COLUMN_STATS else PARTITION_STATS_TYPE)
            assert record["key"] == "" and all(record[f] is None for f in ENVELOPE)
            assert record["_hoodie_file_name"] == (cell.file if cell.base else None)
            column = stats["columnName"]
            if partition == COLUMN_STATS:
                path = fx.files[stats["fileName"]]  # (no fixture file was cleaned)
                where = path.parent.relative_to(fx.root).as_posix() if path.parent != fx.root else ""
                assert where in partitions
                assert cell.row == column_stats_key(column, where, stats["fileName"])
            else:
                assert stats["fileName"] in partitions
                assert cell.row == partition_stats_key(column, stats["fileName"])
            # decoded, and encoded again: the same bytes
            r = range_of_datum(record, fx.types[column])
            assert (r.file_name, r.column) == (stats["fileName"], column)
            datum = stats_datum(r, fx.types[column], version, partition_stats=partition == PARTITION_STATS,
                                file_name_field=record["_hoodie_file_name"])
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed_schema(cell.schema_text), datum)
            assert out.getvalue() == cell.value, (cell.file, cell.row, r)
            counts[partition, cell.base] += 1
    expected = {"v8_trips": (189, 126), "v9_cow_meta": (400, 320), "v9_mor_nonpart": (285, 0)}[name]
    assert (counts[COLUMN_STATS, True] + counts[COLUMN_STATS, False],
            counts[PARTITION_STATS, True] + counts[PARTITION_STATS, False]) == expected


def _file_ranges(fx: Fixture) -> dict[str, dict[str, set[ColumnRange]]]:
    """Data file name -> column -> the distinct ranges its column-stats cells hold."""
    out: dict[str, dict[str, set[ColumnRange]]] = defaultdict(lambda: defaultdict(set))
    for cell in fx.cells:
        if cell.partition == COLUMN_STATS:
            record = cell.record()
            r = range_of_datum(record, fx.types[record["ColumnStatsMetadata"]["columnName"]])
            out[r.file_name][r.column].add(r)
    return out


@pytest.mark.parametrize("name", STATS_TABLES)
def test_base_file_stats_are_the_parquet_footers(stats_tables, name):
    fx = stats_tables[name]
    columns = indexed_columns(fx.table.storage, fx.table.config.props, fx.table.schema())
    checked = 0
    for file_name, by_column in _file_ranges(fx).items():
        assert sorted(by_column) == sorted(columns)  # every indexed column, nothing else
        assert all(len(rs) == 1 for rs in by_column.values())  # written once (base HFile copies are equal)
        if not file_name.endswith(".parquet"):
            continue
        ours = {r.column: r for r in ranges_of_parquet(pq.read_metadata(fx.files[file_name]), file_name, columns)}
        for column, (theirs,) in by_column.items():
            assert not theirs.is_deleted and not theirs.is_tight_bound
            assert ours[column] == theirs
            checked += 1
    assert checked == {"v8_trips": 54, "v9_cow_meta": 272, "v9_mor_nonpart": 105}[name]


@pytest.mark.parametrize("name", ["v8_trips", "v9_mor_nonpart"])
def test_log_file_stats_are_the_records_written(stats_tables, name):
    fx = stats_tables[name]
    columns = indexed_columns(fx.table.storage, fx.table.config.props, fx.table.schema())
    checked = deletes_only = 0
    for file_name, by_column in _file_ranges(fx).items():
        if file_name.endswith(".parquet"):
            continue
        blocks = read_log_file(fx.files[file_name].read_bytes(), file_name)
        tables = [b.records() for b in blocks if isinstance(b, DataBlock)]
        records = pa.concat_tables(tables) if tables else pa.table({})
        deletes_only += not tables
        ours = {r.column: r for r in ranges_of_records(records, file_name, columns)}
        for column, (theirs,) in by_column.items():
            assert ours[column] == theirs
            checked += 1
    assert (checked, deletes_only) == {"v8_trips": (45, 2), "v9_mor_nonpart": (75, 2)}[name]


def test_index_definitions(stats_tables):
    v8, v9 = stats_tables["v8_trips"], stats_tables["v9_mor_nonpart"]
    assert indexed_columns(v8.table.storage, v8.table.config.props, v8.table.schema()) == [
        "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "ts", "uuid", "rider", "driver",
        "fare", "city"]
    assert len(indexed_columns(v9.table.storage, v9.table.config.props, v9.table.schema())) == 15
    assert indexed_columns(v9.table.storage, v9.table.config.props, pa.schema([("txn_id", pa.string())])) == [
        "_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key", "txn_id"]
    assert indexed_columns(v9.table.storage, {}, v9.table.schema()) is None  # no index.json
    assert index_version(v8.table.storage, v8.table.config.props) == "V1"  # v8: no version
    assert index_version(v9.table.storage, v9.table.config.props, PARTITION_STATS) == "V2"
    assert index_version(v9.table.storage, {}) == "V1"


def test_merged_slices_through_merge_mdt_slice(stats_tables):
    fx = stats_tables["v9_mor_nonpart"]
    state: dict = {}
    folder = f"{MDT}/{COLUMN_STATS}"
    for group in sorted({_file_id(c.file) for c in fx.cells}):
        base = [c.file for c in fx.cells if c.base and _file_id(c.file) == group][0]
        merge_mdt_slice(fx.table.storage, f"{folder}/{base}", [], set(), state, picked_range, merge_ranges)
    assert len(state) == len({c.row for c in fx.cells if c.base})
    assert all(isinstance(r, ColumnRange) and not r.is_deleted for r in state.values())


# -- encoding of types and cases the fixtures lack ------------------------------------------------------------
@pytest.fixture(scope="module")
def v9_schema(stats_tables) -> str:
    return next(c.schema_text for c in stats_tables["v9_cow_meta"].cells)


def _roundtrip(schema_text: str, r: ColumnRange, t: pa.DataType | None, version: str, **kw) -> tuple[dict, ColumnRange]:
    schema = parsed_schema(schema_text)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, stats_datum(r, t, version, **kw))
    record = fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), schema, None, return_record_name=True,
                                        return_record_name_override=True)
    return record["ColumnStatsMetadata"], range_of_datum(record, t)


@pytest.mark.parametrize("version", ["V1", "V2"])
@pytest.mark.parametrize(("t", "lo", "hi", "v1_wrapper", "v2"), [
    (pa.bool_(), False, True, "BooleanWrapper", (2, "BooleanWrapper", None)),
    (pa.int16(), -3, 7, "IntWrapper", (3, "IntWrapper", None)),
    (pa.int64(), -(2 ** 40), 2 ** 40, "LongWrapper", (4, "LongWrapper", None)),
    (pa.float32(), -1.5, 2.25, "FloatWrapper", (5, "FloatWrapper", None)),
    (pa.float64(), -0.1, 1e300, "DoubleWrapper", (6, "DoubleWrapper", None)),
    (pa.string(), "", "\U0001F600", "StringWrapper", (7, "StringWrapper", None)),
    (pa.binary(), b"\x00", b"\xff\x01", "BytesWrapper", (8, "BytesWrapper", None)),
    (pa.binary(2), b"\x00\x01", b"\xff\x01", "BytesWrapper", (9, "BytesWrapper", None)),
    (pa.decimal128(12, 3), Decimal("-0.128"), Decimal("123456789.999"), "DecimalWrapper",
     (10, "BytesWrapper", "12,3")),
    (pa.date32(), dt.date(1969, 12, 31), dt.date(2024, 2, 29), "DateWrapper", (12, "IntWrapper", None)),
    (pa.time32("ms"), 1_000, 86_399_999_000, "IntWrapper", (13, "IntWrapper", None)),
    (pa.time64("us"), 1, 86_399_999_999, "LongWrapper", (14, "LongWrapper", None)),
    (pa.timestamp("ms", "UTC"), -1_000, 1_705_392_900_000_000, "LongWrapper", (15, "LongWrapper", None)),
    (pa.timestamp("us", "UTC"), -1, 1_705_392_900_000_001, "LongWrapper", (16, "LongWrapper", None)),
    (pa.timestamp("ns", "UTC"), -1, 1_705_392_900_000_001, "LongWrapper", (17, "LongWrapper", None)),
    (pa.timestamp("ms"), 0, 1_000, "LongWrapper", (18, "LongWrapper", None)),
    (pa.timestamp("us"), 0, 1, "LongWrapper", (19, "LongWrapper", None)),
    (pa.timestamp("ns"), 0, 1, "LongWrapper", (20, "LongWrapper", None)),
])
def test_values_of_every_type_encode_and_decode(v9_schema, version, t, lo, hi, v1_wrapper, v2):
    r = ColumnRange("f.parquet", "c", lo, hi, 1, 5, 10, 20)
    stats, back = _roundtrip(v9_schema, r, t, version)
    assert back == r
    if version == "V1":
        assert stats["valueType"] is None and stats["minValue"][0].endswith("." + v1_wrapper)
    else:
        assert (stats["valueType"]["typeOrdinal"], stats["minValue"][0].rsplit(".", 1)[1],
                stats["valueType"]["additionalInfo"]) == v2


def test_encoded_primitives_are_javas(v9_schema):
    # decimals: BigInteger.toByteArray at the column's scale (V2) or at 15 (V1)
    dec = pa.decimal128(5, 2)
    for value, raw in [(Decimal("-1.28"), b"\x80"), (Decimal("1.28"), b"\x00\x80"), (Decimal("0.00"), b"\x00"),
                       (Decimal("89.99"), b"\x23\x27"), (Decimal("-1.29"), b"\xff\x7f")]:
        stats = stats_datum(ColumnRange("f", "c", value, value, 0, 1), dec, "V2")["ColumnStatsMetadata"]
        assert stats["minValue"] == ("org.apache.hudi.avro.model.BytesWrapper", {"value": raw})
    v1 = stats_datum(ColumnRange("f", "c", Decimal("-1.28"), Decimal("1"), 0, 1), dec, "V1")["ColumnStatsMetadata"]
    assert v1["minValue"][1]["value"] == (-128 * 10 ** 13).to_bytes(7, "big", signed=True)
    # dates: V2 epoch days; V1 the Java class (java.sql.Date from footers, LocalDate from log records)
    day = dt.date(2024, 1, 16)
    assert stats_datum(ColumnRange("f", "c", day, day, 0, 1), pa.date32(), "V2")["ColumnStatsMetadata"][
        "minValue"] == ("org.apache.hudi.avro.model.IntWrapper", {"value": 19738})
    assert stats_datum(ColumnRange(".f.log.1_0-1-2", "c", day, day, 0, 1), pa.date32(), "V1")[
        "ColumnStatsMetadata"]["minValue"][0].endswith(".LocalDateWrapper")
    # nanosecond bounds widen outwards; millisecond ones too
    ns = stats_datum(ColumnRange("f", "c", 5, 6, 0, 1), pa.timestamp("ns", "UTC"), "V2")["ColumnStatsMetadata"]
    assert (ns["minValue"][1]["value"], ns["maxValue"][1]["value"]) == (5000, 6000)
    ms = stats_datum(ColumnRange("f", "c", 1_500, 1_500, 0, 1), pa.timestamp("ms", "UTC"), "V2")
    assert (ms["ColumnStatsMetadata"]["minValue"][1]["value"], ms["ColumnStatsMetadata"]["maxValue"][1]["value"]) \
        == (1, 2)
    with pytest.raises(ValueError, match="V3"):
        stats_datum(ColumnRange("f", "c", 1, 1, 0, 1), pa.int32(), "V3")
    with pytest.raises(ValueError, match="Arrow type"):
        stats_datum(ColumnRange("f", "c", 1, 1, 0, 1), None, "V2")
    with pytest.raises(ValueError, match="not supported"):
        stats_datum(ColumnRange("f", "c", [1], [1], 0, 1), pa.list_(pa.int32()), "V2")


def test_empty_ranges_and_tombstones(v9_schema):
    # a delete-only log: counts 0, min/max null, valueType NULL (fixture-verified shape)
    empty = ranges_of_records(pa.table({"c": pa.array([], pa.int64())}), ".f.log.1_0-1-2", ["c", "gone"])
    assert empty == [ColumnRange(".f.log.1_0-1-2", c, None, None, 0, 0, 0, 0) for c in ("c", "gone")]
    stats, back = _roundtrip(v9_schema, empty[0], pa.int64(), "V2")
    assert stats["valueType"] == {"typeOrdinal": 1, "additionalInfo": None} and back == empty[0]
    # an all-null column of a non-empty file keeps its value type
    nulls = ColumnRange("f.parquet", "c", None, None, 3, 3, 40, 30)
    stats, back = _roundtrip(v9_schema, nulls, pa.int64(), "V2")
    assert stats["valueType"]["typeOrdinal"] == 4 and back == nulls
    # a clean's tombstone (Java's stub: counts -1), a delete_partition's (tight)
    dead = tombstone("f.parquet", "c")
    assert (dead.is_deleted, dead.is_tight_bound, dead.value_count, dead.min) == (True, False, -1, None)
    stats, back = _roundtrip(v9_schema, dead, None, "V2")
    assert stats["valueType"]["typeOrdinal"] == 1 and stats["isDeleted"] and back == dead
    part = tombstone("region=eu", "c", partition_stats=True)
    assert part.is_tight_bound
    datum = stats_datum(part, None, "V1", partition_stats=True)
    assert datum["type"] == PARTITION_STATS_TYPE and datum["ColumnStatsMetadata"]["valueType"] is None


def test_range_of_datum_accepts_plain_fastavro_records(v9_schema):
    r = ColumnRange("f", "c", dt.date(2024, 1, 1), dt.date(2024, 2, 1), 0, 2)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed_schema(v9_schema), stats_datum(r, pa.date32(), "V2"))
    plain = fastavro.schemaless_reader(io.BytesIO(buf.getvalue()), parsed_schema(v9_schema), None)
    assert range_of_datum(plain) == r == range_of_datum(plain["ColumnStatsMetadata"])
    assert picked_range(plain) == r and picked_range({"type": 5}) is None
    with pytest.raises(ValueError, match="not a column stats record"):
        range_of_datum({"type": 3, "ColumnStatsMetadata": None})
    # V1 raw longs of a timestamp column are in the column's unit
    v1 = {"fileName": "f", "columnName": "c", "minValue": ("x.LongWrapper", {"value": 1_500}),
          "maxValue": ("x.LongWrapper", {"value": 2_000}), "nullCount": 0, "valueCount": 1, "isDeleted": False}
    assert range_of_datum(v1, pa.timestamp("ms")).min == 1_500_000
    assert range_of_datum(v1).min == 1_500


# -- stats of new files --------------------------------------------------------------------------------------
def test_parquet_stats_aggregate_row_groups(tmp_path):
    table = pa.table({"s": ["b", "a", None, "z", "y", None], "n": pa.array([5, 1, 3, None, None, None], pa.int32()),
                      "d": pa.array([Decimal("1.10"), Decimal("-2.00"), None, None, Decimal("9.99"), None],
                                    pa.decimal128(6, 2)),
                      "t": pa.array([3_000, 1_000, 2_000, 0, 5, 7], pa.timestamp("ms", "UTC"))})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=3)
    meta = pq.read_metadata(path)
    got = {r.column: r for r in ranges_of_parquet(meta, "f.parquet", ["s", "n", "d", "t", "missing"])}
    assert sorted(got) == ["d", "n", "s", "t"]
    chunks = [meta.row_group(g).column(0) for g in range(meta.num_row_groups)]
    assert len(chunks) == 2
    assert got["s"] == ColumnRange("f.parquet", "s", "a", "z", 2, 6, sum(c.total_compressed_size for c in chunks),
                                   sum(c.total_uncompressed_size for c in chunks))
    assert (got["n"].min, got["n"].max, got["n"].null_count, got["n"].value_count) == (1, 5, 3, 6)
    assert (got["d"].min, got["d"].max) == (Decimal("-2.00"), Decimal("9.99"))
    assert (got["t"].min, got["t"].max) == (0, 3_000_000)
    # a chunk with values but no statistics: nothing is known of min/max
    pq.write_table(table, path, row_group_size=3, write_statistics=False)
    blind = ranges_of_parquet(pq.read_metadata(path), "f.parquet", ["s"])[0]
    assert (blind.min, blind.max, blind.value_count) == (None, None, 6)


def test_record_stats_order_strings_as_java_and_keep_nan():
    records = pa.table({"s": ["\uff01", "\U0001F600", None, "a"], "x": [1.0, math.nan, None, -2.0],
                        "t": pa.array([1, 2_001, None, 999], pa.timestamp("ns"))})
    got = {r.column: r for r in ranges_of_records(records, ".f.log.1_0-1-2", ["s", "x", "t"])}
    # UTF-16: the surrogate pair of U+1F600 (0xD83D) sorts below U+FF01; in UTF-8 it sorts above
    assert (got["s"].min, got["s"].max, got["s"].null_count, got["s"].value_count) == ("a", "\uff01", 1, 4)
    assert got["x"].min == -2.0 and math.isnan(got["x"].max)  # Java: NaN above every number
    assert (got["t"].min, got["t"].max) == (0, 3)  # nanoseconds widened to whole microseconds
    assert ranges_of_records(pa.table({"s": pa.array(["b", "a"]).dictionary_encode()}), "f", ["s"])[0].max == "b"


# -- merging --------------------------------------------------------------------------------------------------
def test_merge_rule():
    old = ColumnRange("f", "c", 5, 10, 1, 4, 100, 200)
    new = ColumnRange("f", "c", 2, 8, 0, 3, 0, 0)
    assert merge_ranges(old, new) == ColumnRange("f", "c", 2, 10, 1, 7, 100, 200)
    # nulls (no value) give way; unknown counts stay unknown
    assert merge_ranges(old, replace(new, min=None, max=None, null_count=None)) == \
        ColumnRange("f", "c", 5, 10, None, 7, 100, 200)
    # a tombstone on either side: the newer wins as it is
    dead = tombstone("f", "c")
    assert merge_ranges(old, dead) == dead
    assert merge_ranges(dead, new) == new
    # a newer tight bound replaces; an older one is widened
    tight = replace(new, is_tight_bound=True)
    assert merge_ranges(old, tight) == tight
    assert merge_ranges(tight, old) == ColumnRange("f", "c", 2, 10, 1, 7, 100, 200)
    # strings merge in Java (UTF-16) order
    a, b = ColumnRange("f", "c", "\uff01", "\uff01", 0, 1), ColumnRange("f", "c", "\U0001F600", "\U0001F600", 0, 1)
    assert (merge_ranges(a, b).min, merge_ranges(a, b).max) == ("\U0001F600", "\uff01")
    assert merge_ranges(ColumnRange("f", "c", 1.0, 2.0, 0, 1), ColumnRange("f", "c", 0.0, math.nan, 0, 1)).max != 2.0


# -- data skipping -----------------------------------------------------------------------------------------------
def test_may_match_comparisons():
    r = ColumnRange("f", "c", 10, 20, 0, 5)
    cases = [("=", 9, False), ("=", 10, True), ("=", 21, False), ("!=", 15, True), ("<", 10, False),
             ("<", 11, True), ("<=", 10, True), ("<=", 9, False), (">", 20, False), (">", 19, True),
             (">=", 20, True), (">=", 21, False), ("in", [1, 2, 30], False), ("in", [1, 15], True),
             ("in", [], False), ("in", [None, 12], True), ("is_null", None, False), ("is_not_null", None, True),
             ("=", 15.5, True), ("=", Decimal("20.5"), False)]
    for op, value, expected in cases:
        assert may_match(r, op, value) is expected, (op, value)
    assert may_match(ColumnRange("f", "c", 7, 7, 0, 3), "!=", 7) is False
    assert may_match(ColumnRange("f", "c", 7, 7, 2, 3), "!=", 8) is True
    with pytest.raises(ValueError, match="operator"):
        may_match(r, "like", 1)
    with pytest.raises(ValueError, match="is_null"):
        may_match(r, "=", None)
    with pytest.raises(ValueError, match="list"):
        may_match(r, "in", 5)


def test_may_match_nulls_and_unknowns():
    all_null = ColumnRange("f", "c", None, None, 4, 4)
    assert may_match(all_null, "is_null") and not may_match(all_null, "is_not_null")
    assert not any(may_match(all_null, op, 1) for op in ("=", "!=", "<", ">"))
    empty = ColumnRange(".f.log.1", "c", None, None, 0, 0)  # a delete-only log
    assert not any(may_match(empty, op, v) for op, v in [("=", 1), ("is_null", None), ("is_not_null", None)])
    unknown = ColumnRange("f", "c", None, None, None, None)  # no statistics
    assert all(may_match(unknown, op, 1) for op in ("=", "!=", "<", ">"))
    assert may_match(unknown, "is_null") and may_match(unknown, "is_not_null")
    some_null = ColumnRange("f", "c", 1, 2, 1, 3)
    assert may_match(some_null, "is_null") and may_match(some_null, "is_not_null")
    assert may_match(tombstone("f", "c"), "=", 1)  # a tombstone proves nothing
    assert may_match(ColumnRange("f", "c", 1.0, math.nan, 0, 2), "=", 100.0)  # NaN bounds: undecidable
    assert may_match(ColumnRange("f", "c", 1, 2, 0, 2), "=", "x")  # a meaningless value: kept


def test_may_match_strings_decimals_dates_timestamps():
    s = ColumnRange("f", "c", "apple", "mango", 0, 3)
    assert not may_match(s, "=", "zebra") and may_match(s, "=", "banana") and not may_match(s, "<", "apple")
    assert may_match(s, "=", "mango") and not may_match(s, ">", "mango") and may_match(s, "in", ["zz", "kiwi"])
    # above U+E000 the UTF-8 and UTF-16 orders differ: skip only when both orders prove it
    hi = ColumnRange("f", "c", "a", "\uff01", 0, 2)
    assert may_match(hi, "=", "\U0001F600")  # above max in UTF-8, below it in UTF-16 (Java)
    assert not may_match(ColumnRange("f", "c", "a", "b", 0, 2), "=", "\U0001F600")  # above in both
    assert may_match(ColumnRange("f", "c", "\U0001F600", "\U0001F600", 0, 2), ">", "\uff01")
    d = ColumnRange("f", "c", Decimal("89.99"), Decimal("5000.00"), 0, 3)
    assert not may_match(d, "<", Decimal("89.99")) and may_match(d, "<=", "89.99")
    assert not may_match(d, "=", 5000.01) and may_match(d, "=", 5000) and not may_match(d, ">", 5000)
    day = ColumnRange("f", "c", dt.date(2024, 1, 16), dt.date(2024, 1, 20), 0, 3)
    assert not may_match(day, "=", dt.date(2024, 1, 15)) and may_match(day, ">=", "2024-01-20")
    assert not may_match(day, ">", np.datetime64("2024-01-20"))
    assert may_match(day, "=", dt.datetime(2024, 1, 1))  # a datetime against dates: kept
    ts = ColumnRange("f", "c", 1_705_392_900_000_000, 1_705_413_600_000_000, 0, 2)  # µs
    start = dt.datetime(2024, 1, 16, 8, 15, tzinfo=dt.timezone.utc)
    assert may_match(ts, "=", start) and not may_match(ts, "<", start)
    assert not may_match(ts, ">", np.datetime64("2024-01-16T14:00:00"))
    assert not may_match(ts, "=", dt.datetime(2024, 1, 16, 8, 14))  # naive = UTC
    b = ColumnRange("f", "c", b"\x01", b"\x7f", 0, 2)
    assert not may_match(b, "=", b"\x00") and not may_match(b, "=", b"\x80") and may_match(b, "=", "a")
    assert may_match(ColumnRange("f", "c", b"\x90", b"\x10", 0, 2), "=", b"\x05")  # bounds in Java's signed order
    assert not may_match(ColumnRange("f", "c", False, False, 0, 2), "=", True)
