"""Key generators of tables other engines wrote (TimestampBased, Custom) and refusal of what we
do not implement (other key generators, payloads, merge options).

Expected partition paths come from Apache Hudi's own unit tests
(`TestTimestampBasedKeyGenerator.java`, hudi-spark) and from Python's zoneinfo; tables are laid
out as Java leaves them and judged by hudi-rs as well as by our reader.
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from airflow_lake.core import properties
from airflow_lake.core.config import TableConfig, unsupported_merge
from airflow_lake.core.errors import (
    InvalidOptionError,
    PartitionPathError,
    UnsupportedFeatureError,
)
from airflow_lake.core.keygen_timestamp import TimestampPartitioner, java_zone, tokenize
from airflow_lake.core.table import Table
from tests.conftest import FIXTURES, fixture_zip, hudi_read, rows

P = "hoodie.keygen.timebased."
TIMESTAMP = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
CUSTOM = "org.apache.hudi.keygen.CustomKeyGenerator"
ISO = "yyyy-MM-dd'T'HH:mm:ssZ,yyyy-MM-dd'T'HH:mm:ss.SSSZ"


def settings(ttype, out, tz=None, *, unit=None, inp=None, intz=None, outtz=None, **extra) -> dict[str, str]:
    d = {P + "timestamp.type": ttype, P + "output.dateformat": out}
    for key, value in (("timezone", tz), ("timestamp.scalar.time.unit", unit), ("input.dateformat", inp),
                       ("input.timezone", intz), ("output.timezone", outtz)):
        if value is not None:
            d[P + key] = value
    d.update(extra)
    return d


def render(props: dict[str, str], values: pa.Array) -> list[str]:
    return TimestampPartitioner.from_settings(props, "table t").render(values, "createTime").to_pylist()


# -- Apache Hudi's test vectors (TestTimestampBasedKeyGenerator.java) -----------------------

JAVA_VECTORS = [
    (settings("EPOCHMILLISECONDS", "yyyy-MM-dd hh", "GMT+8:00"), pa.array([1578283932000]), "2020-01-06 12"),
    (settings("EPOCHMILLISECONDS", "yyyy-MM-dd hh", "GMT+8:00"),
     pa.array([Decimal("1578283932000.0001")], pa.decimal128(20, 4)), "2020-01-06 12"),
    (settings("EPOCHMILLISECONDS", "yyyy-MM-dd hh", "GMT"), pa.array([1578283932000]), "2020-01-06 04"),
    (settings("DATE_STRING", "yyyy-MM-dd hh", "GMT+8:00", inp="yyyy-MM-dd hh:mm:ss"),
     pa.array(["2020-01-06 12:12:12"]), "2020-01-06 12"),
    (settings("DATE_STRING", "yyyy-MM-dd hh", "GMT", inp="yyyy-MM-dd hh:mm:ss"),
     pa.array(["2020-01-06 12:12:12"]), "2020-01-06 12"),
    # a null value: Java renders 1 unit after the epoch, never the default partition
    (settings("EPOCHMILLISECONDS", "yyyy-MM-dd hh", "GMT+8:00"), pa.array([None], pa.int64()), "1970-01-01 08"),
    (settings("DATE_STRING", "yyyy-MM-dd hh:mm:ss", "GMT", inp="yyyy-MM-dd hh:mm:ss"),
     pa.array([None], pa.string()), "1970-01-01 12:00:00"),
    (settings("EPOCHMICROSECONDS", "yyyy-MM-dd hh", "GMT+8:00"), pa.array([1578283932123456]), "2020-01-06 12"),
    (settings("EPOCHMICROSECONDS", "yyyy-MM-dd hh", "GMT+8:00"),
     pa.array([Decimal("1578283932123456.0001")], pa.decimal128(20, 4)), "2020-01-06 12"),
    (settings("SCALAR", "yyyy-MM-dd hh", "GMT", unit="days"), pa.array([20000]), "2024-10-04 12"),
    (settings("SCALAR", "yyyy-MM-dd hh", "GMT", unit="days"), pa.array([None], pa.int64()), "1970-01-02 12"),
    (settings("SCALAR", "yyyy-MM-dd", "GMT", unit="DAYS"), pa.array([18736]), "2021-04-19"),
    (settings("SCALAR", "yyyy/MM/dd", "GMT", unit="MICROSECONDS",
              **{"hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled": "true"}),
     pa.array([1638513806000000], pa.timestamp("us", "UTC")), "2021/12/03"),
    (settings("SCALAR", "yyyy/MM/dd", "GMT", unit="MICROSECONDS",
              **{"hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled": "true"}),
     pa.array([None], pa.timestamp("us", "UTC")), "1970/01/01"),
    (settings("DATE_STRING", "yyyyMMddHH", inp="yyyy-MM-dd'T'HH:mm:ss.SSSZ", intz="", outtz="GMT"),
     pa.array(["2020-04-01T13:01:33.428Z"]), "2020040113"),
    (settings("DATE_STRING", "yyyyMMddHH", inp="yyyy-MM-dd'T'HH:mm:ss.SSSZ", intz="", outtz=""),
     pa.array(["2020-04-01T13:01:33.428Z"]), "2020040113"),
    (settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="UTC"), pa.array(["2020-04-01T13:01:33.428Z"]),
     "2020040113"),
    (settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="UTC"), pa.array(["2020-04-01T13:01:33Z"]),
     "2020040113"),
    (settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="UTC"), pa.array(["2020-04-01T13:01:33-05:00"]),
     "2020040118"),
    (settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="UTC"),
     pa.array(["2020-04-01T13:01:33.123-05:00"]), "2020040118"),
    # Joda maps EST to America/New_York (daylight saving in April), not a fixed -05:00
    (settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="EST"), pa.array(["2020-04-01T13:01:33.123Z"]),
     "2020040109"),
    (settings("DATE_STRING", "MM/dd/yyyy", inp=ISO + ",yyyyMMdd", intz="UTC", outtz="UTC"), pa.array(["20200401"]),
     "04/01/2020"),
]


@pytest.mark.parametrize(("props", "values", "expected"), JAVA_VECTORS)
def test_java_timestamp_vectors(props, values, expected):
    assert render(props, values) == [expected]


def test_input_not_matching_any_format_is_an_error():
    props = settings("DATE_STRING", "yyyyMMddHH", inp=ISO, intz="", outtz="UTC")
    with pytest.raises(PartitionPathError, match=r"2020-04-01 13:01:33.123-05:00.*input formats"):
        render(props, pa.array(["2020-04-01T13:01:33Z", "2020-04-01 13:01:33.123-05:00"]))


# -- formatting and parsing against Python's zoneinfo, many values at once ------------------

ZONES = ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Sydney", "GMT-03:30"]


def _python_zone(name: str):
    if name.startswith("GMT"):
        sign = -1 if name[3] == "-" else 1
        h, m = name[4:].split(":")
        return timezone(sign * timedelta(hours=int(h), minutes=int(m)))
    return ZoneInfo(name)


@pytest.mark.parametrize("zone", ZONES)
def test_printing_matches_python_across_daylight_saving(zone):
    rng = random.Random(7)
    millis = [rng.randrange(-2_208_988_800_000, 4_102_444_800_000) for _ in range(3000)]
    millis += [1_710_054_000_000 + k * 900_000 for k in range(-8, 8)]  # around a DST switch (US, March 2024)
    got = render(settings("EPOCHMILLISECONDS", "yyyy/MM/dd/HH 'h' mm:ss.SSS Z EEE MMM DDD a hh", outtz=zone),
                 pa.array(millis))
    tz = _python_zone(zone)
    for ms, text in zip(millis, got, strict=True):
        dt = (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)).astimezone(tz)
        offset = dt.strftime("%z")[:5]  # Joda prints hours and minutes of an offset (old LMT has seconds)
        expected = dt.strftime(f"%Y/%m/%d/%H h %M:%S.{ms % 1000:03d} {offset} %a %b {dt.timetuple().tm_yday:03d} %p %I")
        assert text == expected, (ms, zone)


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata", "UTC"])
def test_parsing_matches_python(zone):
    rng = random.Random(11)
    tz = ZoneInfo(zone)
    instants = [datetime.fromtimestamp(rng.randrange(0, 4_000_000_000), tz) for _ in range(2000)]
    # avoid the repeated hour of a fall-back transition: Joda and Python pick different instants
    instants = [d for d in instants if d.fold == 0 and (d + timedelta(hours=1)).utcoffset() == d.utcoffset()]
    text = pa.array([d.strftime("%Y-%m-%d %H:%M:%S") for d in instants])
    got = render(settings("DATE_STRING", "yyyy-MM-dd'T'HH:mm:ssZZ", inp="yyyy-MM-dd HH:mm:ss", intz=zone,
                          outtz="UTC"), text)
    assert got == [d.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+00:00") for d in instants]


def test_arrow_types_as_java_sees_them():
    """Java's Avro path sees a timestamp column as its raw long (micros unless millis), a date as
    days, floats and decimals truncated toward zero."""
    us = pa.array([1_680_350_460_123_456], pa.timestamp("us", "UTC"))
    assert render(settings("EPOCHMICROSECONDS", "yyyy/MM/dd/HH", outtz="UTC"), us) == ["2023/04/01/12"]
    assert render(settings("SCALAR", "yyyy/MM/dd/HH", outtz="UTC", unit="MICROSECONDS"), us) == ["2023/04/01/12"]
    ms = pa.array([1_680_350_460_123], pa.timestamp("ms", "UTC"))
    assert render(settings("EPOCHMILLISECONDS", "yyyy/MM/dd/HH", outtz="UTC"), ms) == ["2023/04/01/12"]
    # micros read as millis, as Java does without the consistent-logical-timestamp flag
    assert render(settings("EPOCHMILLISECONDS", "yyyy", outtz="UTC"), us) == ["55218"]
    consistent = {"hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled": "true"}
    assert render(settings("EPOCHMILLISECONDS", "yyyy/MM/dd/HH", outtz="UTC", **consistent), us) == ["2023/04/01/12"]
    dates = pa.array([19448], pa.date32())
    assert render(settings("SCALAR", "yyyy-MM-dd", outtz="UTC", unit="DAYS"), dates) == ["2023-04-01"]
    floats = pa.array([1680350460.9, -0.5])
    assert render(settings("UNIX_TIMESTAMP", "yyyy-MM-dd HH:mm:ss", outtz="UTC"), floats) == [
        "2023-04-01 12:01:00", "1970-01-01 00:00:00"]
    with pytest.raises(InvalidOptionError, match="holds strings"):
        render(settings("UNIX_TIMESTAMP", "yyyy", outtz="UTC"), pa.array(["1680350460"]))
    with pytest.raises(InvalidOptionError, match="parses strings"):
        render(settings("DATE_STRING", "yyyy", outtz="UTC", inp="yyyy"), pa.array([1]))


def test_zones_and_patterns_refused_not_guessed():
    assert java_zone("GMT+8").fixed_ms == 8 * 3_600_000
    assert java_zone("GMT-03:30").fixed_ms == -(3 * 60 + 30) * 60_000
    assert java_zone("EST").arrow == "America/New_York"
    with pytest.raises(InvalidOptionError, match="UTC\\+8"):
        java_zone("UTC+8")  # Java silently turns this into GMT
    with pytest.raises(UnsupportedFeatureError, match="'ww'"):
        TimestampPartitioner.from_settings(settings("EPOCHMILLISECONDS", "yyyy-ww", outtz="UTC"), "table t")
    with pytest.raises(UnsupportedFeatureError, match="parser.class"):
        TimestampPartitioner.from_settings(
            settings("EPOCHMILLISECONDS", "yyyy", outtz="UTC",
                     **{"hoodie.keygen.datetime.parser.class": "com.acme.Parser"}), "table t")
    assert tokenize("yyyy-MM-dd'T'HH''mm") == (("y", 4), "-", ("M", 2), "-", ("d", 2), "T", ("H", 2), "'",
                                              ("m", 2))
    # without any zone Java uses the writer JVM's default zone, which we must be told
    with pytest.raises(InvalidOptionError, match="airflow_lake.keygen.timebased.jvm.timezone"):
        render(settings("EPOCHMILLISECONDS", "yyyy"), pa.array([1]))
    assert render(settings("EPOCHMILLISECONDS", "yyyy/MM/dd/HH",
                           **{"airflow_lake.keygen.timebased.jvm.timezone": "Asia/Tokyo"}),
                  pa.array([0])) == ["1970/01/01/09"]


# -- tables laid out as Apache Hudi leaves them ----------------------------------------------


def java_table(path: str, table_type: str, java_paths: list[str], props: dict[str, str]) -> None:
    """Rows a, b... partitioned as Java named them (`jp` holds Java's path, written with a simple
    key generator), then hoodie.properties declaring the Java key generator like Spark does."""
    n = len(java_paths)
    t = Table.create(path, name="java_keygen", table_type=table_type, record_key="id", precombine_field="seq",
                     partition_fields="jp")
    t.write(pa.table({"id": [chr(ord("a") + i) for i in range(n)], "name": ["x"] * n,
                      "ts": pa.array([1_680_350_460_123 + i * 3_600_000 for i in range(n)]),
                      "city": ["sf"] * n, "seq": [1] * n, "jp": java_paths}), operation="bulk_insert")
    new = {k: v for k, v in t.config.props.items() if k != "hoodie.table.keygenerator.class"}
    new.update(props)
    properties.save(t.storage, TableConfig(new))


def timeline_files(path: str) -> set[str]:
    return {p.name for p in (Path(path) / ".hoodie").iterdir() if p.is_file()}


def judged(path: str, table: Table) -> list[tuple]:
    """Rows (id, seq, partition path) by our reader, asserting hudi-rs agrees."""
    cols = ["id", "seq", "_hoodie_partition_path"]
    ours = rows(table.read(), cols)
    assert rows(hudi_read(path), cols) == ours
    return ours


TIMESTAMP_PROPS = {"hoodie.table.keygenerator.class": TIMESTAMP, "hoodie.table.partition.fields": "ts",
                   P + "output.dateformat": "yyyy/MM/dd/HH", P + "timezone": "UTC"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upsert_into_java_timestamp_table_updates_in_place(tmp_path, table_type):
    path = str(tmp_path / "t")
    java_table(path, table_type, ["2023/04/01/12", "2023/04/01/13"], TIMESTAMP_PROPS)
    before = timeline_files(path)
    # Java persists every timebased key but the timestamp type: the write asks for it
    with pytest.raises(InvalidOptionError, match="hoodie.keygen.timebased.timestamp.type"):
        Table.open(path).write(pa.table({"id": ["a"], "name": ["y"], "ts": [1_680_350_460_999], "city": ["sf"],
                                         "seq": [2], "jp": ["?"]}))
    assert timeline_files(path) == before
    table = Table.open(path, options={P + "timestamp.type": "EPOCHMILLISECONDS"})
    result = table.write(pa.table({"id": ["a", "c"], "name": ["y", "z"],
                                   "ts": [1_680_350_460_999, 1_680_440_000_000], "city": ["sf", "sf"],
                                   "seq": [2, 1], "jp": ["?", "?"]}))
    assert (result.num_updates, result.num_inserts) == (1, 1)
    assert judged(path, table) == [("a", 2, "2023/04/01/12"), ("b", 1, "2023/04/01/13"), ("c", 1, "2023/04/02/12")]
    # a filter on the timestamp column must not prune on the rendered path values
    assert rows(table.read(filters=[("ts", ">=", 1_680_354_060_000)]), ["id"]) == [("b",), ("c",)]


def test_timestamp_table_hive_style_url_encoded_and_null(tmp_path):
    path = str(tmp_path / "t")
    props = {**TIMESTAMP_PROPS, "hoodie.datasource.write.hive_style_partitioning": "true",
             "hoodie.datasource.write.partitionpath.urlencode": "true", P + "timestamp.type": "EPOCHMILLISECONDS"}
    java_table(path, "COPY_ON_WRITE", ["ts=2023%2F04%2F01%2F12"], props)
    table = Table.open(path)
    table.write(pa.table({"id": ["a", "n"], "name": ["y", "y"], "ts": pa.array([1_680_350_460_999, None]),
                          "city": ["sf", "sf"], "seq": [2, 1], "jp": ["?", "?"]}))
    assert judged(path, table) == [("a", 2, "ts=2023%2F04%2F01%2F12"), ("n", 1, "ts=1970%2F01%2F01%2F00")]


CUSTOM_PROPS = {"hoodie.table.keygenerator.class": CUSTOM, "hoodie.table.partition.fields": "ts,city",
                "hoodie.datasource.write.hive_style_partitioning": "true",
                P + "output.dateformat": "yyyy-MM-dd", P + "timezone": "GMT+8:00"}


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_upsert_into_java_custom_table(tmp_path, table_type):
    path = str(tmp_path / "t")
    java_table(path, table_type, ["ts=2023-04-01/city=sf", "ts=2023-04-01/city=sf"], CUSTOM_PROPS)
    before = timeline_files(path)
    batch = pa.table({"id": ["a", "c"], "name": ["y", "z"], "ts": [1_680_350_460_999, 1_680_440_000_000],
                      "city": ["sf", "la"], "seq": [2, 1], "jp": ["?", "?"]})
    with pytest.raises(InvalidOptionError, match=r"hoodie.datasource.write.partitionpath.field=ts:SIMPLE\|TIMESTAMP"):
        Table.open(path).write(batch)
    assert timeline_files(path) == before
    options = {"hoodie.datasource.write.partitionpath.field": "ts:TIMESTAMP,city:SIMPLE",
               P + "timestamp.type": "EPOCHMILLISECONDS"}
    table = Table.open(path, options=options)
    table.write(batch)
    assert judged(path, table) == [("a", 2, "ts=2023-04-01/city=sf"), ("b", 1, "ts=2023-04-01/city=sf"),
                                   ("c", 1, "ts=2023-04-02/city=la")]


def test_custom_record_keys_simple_or_complex(tmp_path):
    table = Table.create(str(tmp_path / "t"), name="c", record_key=["id", "name"],
                         partition_fields=["ts:TIMESTAMP", "city:SIMPLE"],
                         options={P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.dateformat": "yyyyMMdd"})
    data = pa.table({"id": [1], "name": ["x"], "ts": [1_680_350_460_999], "city": ["sf"]})
    assert table.keygen.record_keys(data).to_pylist() == ["id:1,name:x"]
    assert table.keygen.partition_paths(data).to_pylist() == ["20230401/sf"]
    props = Table.open(str(tmp_path / "t")).config.props
    assert props["hoodie.table.partition.fields"] == "ts,city"  # as Java 0.14/0.15 keeps it
    assert props["hoodie.datasource.write.partitionpath.field"] == "ts:TIMESTAMP,city:SIMPLE"
    single = Table.create(str(tmp_path / "s"), name="s", record_key="id", partition_fields=["city:SIMPLE"])
    assert single.keygen.record_keys(data).to_pylist() == ["1"]


def test_create_timestamp_table_keeps_its_settings(tmp_path):
    path = str(tmp_path / "t")
    Table.create(path, name="ts_tbl", table_type="MERGE_ON_READ", record_key="id", precombine_field="seq",
                 partition_fields="ts",
                 options={"hoodie.table.keygenerator.class": TIMESTAMP, P + "timestamp.type": "DATE_STRING",
                          P + "input.dateformat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ", P + "output.dateformat": "yyyy/MM/dd"})
    table = Table.open(path)  # every setting is in hoodie.properties
    assert table.config.props[P + "output.timezone"] == "UTC"
    table.write(pa.table({"id": ["a", "b"], "ts": ["2023-04-01T23:30:00.000-05:00", "2023-04-01T12:01:00.123Z"],
                          "seq": [1, 1]}))
    table.write(pa.table({"id": ["a"], "ts": ["2023-04-02T04:30:00.000Z"], "seq": [2]}))
    assert judged(path, table) == [("a", 2, "2023/04/02"), ("b", 1, "2023/04/01")]


def test_keygenerator_type_property(tmp_path):
    """Hudi 1.0 names the generator by `hoodie.table.keygenerator.type`; honoured when the class is absent."""
    path = str(tmp_path / "t")
    props = {k: v for k, v in TIMESTAMP_PROPS.items() if k != "hoodie.table.keygenerator.class"}
    java_table(path, "COPY_ON_WRITE", ["2023/04/01/12"], {**props, "hoodie.table.keygenerator.type": "TIMESTAMP"})
    table = Table.open(path, options={P + "timestamp.type": "EPOCHMILLISECONDS"})
    assert "hoodie.table.keygenerator.class" not in table.config.props
    table.write(pa.table({"id": ["a"], "name": ["y"], "ts": [1_680_350_460_999], "city": ["sf"], "seq": [2],
                          "jp": ["?"]}))
    assert judged(path, table) == [("a", 2, "2023/04/01/12")]


@pytest.mark.parametrize("keygen", ["org.apache.hudi.keygen.GlobalDeleteKeyGenerator", "com.acme.MyKeyGenerator",
                                    "org.apache.spark.sql.hudi.command.UuidKeyGenerator"])
def test_unknown_key_generator_is_refused_by_name(tmp_path, keygen):
    path = str(tmp_path / "t")
    java_table(path, "COPY_ON_WRITE", ["p1"], {"hoodie.table.keygenerator.class": keygen,
                                               "hoodie.table.partition.fields": "jp"})
    before = timeline_files(path)
    table = Table.open(path)
    assert rows(table.read(), ["id"]) == [("a",)]  # reads need no key generator
    with pytest.raises(UnsupportedFeatureError, match=keygen.replace(".", r"\.")):
        table.write(pa.table({"id": ["a"], "name": ["y"], "ts": [1], "city": ["sf"], "seq": [2], "jp": ["p1"]}))
    assert timeline_files(path) == before
    with pytest.raises(UnsupportedFeatureError):  # a table without meta fields needs them: never guessed
        table.keygen.record_keys(pa.table({"id": ["a"]}))
    with pytest.raises(UnsupportedFeatureError, match="MyKeyGenerator"):
        Table.create(str(tmp_path / "n"), name="n", record_key="id",
                     options={"hoodie.table.keygenerator.class": "com.acme.MyKeyGenerator"})
    assert not (tmp_path / "n" / ".hoodie" / "hoodie.properties").exists()


def test_write_option_contradicting_a_persisted_setting_is_refused(tmp_path):
    path = str(tmp_path / "t")
    java_table(path, "COPY_ON_WRITE", ["2023/04/01/12"], TIMESTAMP_PROPS)
    table = Table.open(path, options={P + "timestamp.type": "EPOCHMILLISECONDS", P + "output.dateformat": "yyyy"})
    with pytest.raises(InvalidOptionError, match="output.dateformat='yyyy'"):
        table.write(pa.table({"id": ["a"], "name": ["y"], "ts": [1], "city": ["sf"], "seq": [2], "jp": ["?"]}))


# -- payloads and merge options --------------------------------------------------------------

PARTIAL = "org.apache.hudi.common.model.PartialUpdateAvroPayload"


def test_fixture_payloads_are_implemented():
    import zipfile

    from airflow_lake.core.properties import parse_properties

    found = 0
    fixture_zip("sample_table")  # fails, saying where it looked, when the fixtures are absent
    for archive in FIXTURES.rglob("*.zip"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if name.endswith(".hoodie/hoodie.properties") and not name.startswith("__MACOSX"):
                    props = parse_properties(z.read(name).decode("latin-1"))
                    assert unsupported_merge(props, None, write=True) is None, archive
                    found += 1
    assert found >= 11


def test_unsupported_payload_refused_for_writes_merges_and_compaction(tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, name="p", table_type="MERGE_ON_READ", record_key="id", precombine_field="seq")
    table.write(pa.table({"id": ["a", "b"], "seq": [1, 1], "v": [1, 1]}))
    table.write(pa.table({"id": ["a"], "seq": [2], "v": [2]}))  # a log file
    props = dict(table.config.props)
    props["hoodie.compaction.payload.class"] = PARTIAL
    properties.save(table.storage, TableConfig(props))
    before = timeline_files(path)
    table = Table.open(path)
    with pytest.raises(UnsupportedFeatureError, match=PARTIAL):
        table.write(pa.table({"id": ["a"], "seq": [3], "v": [3]}))
    with pytest.raises(UnsupportedFeatureError, match="merge-on-read snapshot"):
        table.read()
    with pytest.raises(UnsupportedFeatureError, match="compaction"):
        table.schedule_compaction(max_delta_commits=1)
    assert timeline_files(path) == before
    assert rows(table.read(query_type="read_optimized"), ["id", "v"]) == [("a", 1), ("b", 1)]


@pytest.mark.parametrize(("option", "value"), [
    ("hoodie.datasource.write.payload.class", PARTIAL),
    ("hoodie.datasource.write.payload.class", "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"),
    ("hoodie.compaction.record.merger.strategy", "00000000-0000-0000-0000-000000000000"),
    ("hoodie.datasource.write.record.merger.impls", "org.apache.hudi.HoodieSparkRecordMerger"),
    ("hoodie.payload.ordering.field", "v"),
])
def test_unsupported_merge_options_are_refused_by_name(tmp_path, option, value):
    path = str(tmp_path / "t")
    Table.create(path, name="p", record_key="id", precombine_field="seq")  # DefaultHoodieRecordPayload
    before = timeline_files(path)
    table = Table.open(path, options={option: value})
    with pytest.raises(UnsupportedFeatureError, match=option.replace(".", r"\.")):
        table.write(pa.table({"id": ["a"], "seq": [1], "v": [1]}))
    assert timeline_files(path) == before
    ok = Table.open(path, options={"hoodie.payload.ordering.field": "seq",
                                   "hoodie.datasource.write.record.merger.impls":
                                       "org.apache.hudi.common.model.HoodieAvroRecordMerger"})
    ok.write(pa.table({"id": ["a"], "seq": [1], "v": [1]}))


def test_many_rows_render_like_few():
    """Large batches print each distinct time step (and parse each distinct string) once; the
    result equals printing in small batches."""
    rng = random.Random(3)
    millis = [rng.randrange(0, 4_000_000_000_000) for _ in range(5000)]
    props = settings("EPOCHMILLISECONDS", "yyyy/MM/dd/HH/mm a", outtz="America/New_York")
    small = [v for k in range(0, 5000, 500) for v in render(props, pa.array(millis[k:k + 500]))]
    assert render(props, pa.array(millis)) == small
    text = [f"2023-04-{rng.randrange(1, 31):02d} {rng.randrange(0, 24):02d}:00:00" for _ in range(3000)]
    props = settings("DATE_STRING", "yyyyMMddHH", inp="yyyy-MM-dd HH:mm:ss", intz="Asia/Kolkata", outtz="UTC")
    small = [v for k in range(0, 3000, 300) for v in render(props, pa.array(text[k:k + 300]))]
    assert render(props, pa.array(text)) == small


def test_writer_option_names_at_create_become_the_table_settings(table_path, tmp_path):
    """Spark users name the key generator and payload with `hoodie.datasource.write.*`: the
    table keeps them under its own keys (never both, contradicting each other)."""
    t = Table.create(table_path, name="t", record_key="id", partition_fields="ts", options={
        "hoodie.datasource.write.keygenerator.class": TIMESTAMP,
        "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd/HH"})
    assert t.config.props["hoodie.table.keygenerator.class"] == TIMESTAMP
    assert "hoodie.datasource.write.keygenerator.class" not in t.config.props
    t.write(pa.table({"id": ["a"], "ts": [1680350460]}), operation="insert")
    assert os.path.isdir(f"{table_path}/2023/04/01/12")
    refusals = [
        ({"hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.EventTimeAvroPayload"},
         UnsupportedFeatureError, "EventTimeAvroPayload"),
        ({"hoodie.datasource.write.record.merger.impls": "org.apache.hudi.HoodieSparkRecordMerger"},
         UnsupportedFeatureError, "HoodieSparkRecordMerger"),
        ({"hoodie.datasource.write.keygenerator.class": "com.acme.Mine"}, UnsupportedFeatureError, "com.acme.Mine"),
        ({"hoodie.datasource.write.precombine.field": "zz"}, InvalidOptionError, "precombine"),
        ({"hoodie.datasource.write.recordkey.field": "zz"}, InvalidOptionError, "record_key"),
        ({"hoodie.datasource.write.partitionpath.field": "zz"}, InvalidOptionError, "partition_fields"),
    ]
    for n, (options, error, fragment) in enumerate(refusals):
        path = tmp_path / f"refused{n}"
        with pytest.raises(error, match=fragment):
            Table.create(str(path), name="u", record_key="id", precombine_field="ts", partition_fields="p",
                         options=options)
        assert not (path / ".hoodie" / "hoodie.properties").exists()
    adopted = Table.create(str(tmp_path / "adopted"), name="u", record_key="id",
                           options={"hoodie.datasource.write.precombine.field": "ts"})
    assert adopted.config.precombine_field == "ts"


def test_write_options_naming_other_key_fields_are_refused(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="p")
    t.write(pa.table({"id": ["a"], "ts": [1], "p": ["x"]}), operation="insert")
    before = sorted(os.listdir(f"{table_path}/.hoodie"))
    for key in ("hoodie.datasource.write.recordkey.field", "hoodie.datasource.write.partitionpath.field"):
        other = Table.open(table_path, options={key: "zz"})
        with pytest.raises(InvalidOptionError, match=key):
            other.write(pa.table({"id": ["b"], "ts": [1], "p": ["x"]}))
    assert sorted(os.listdir(f"{table_path}/.hoodie")) == before


def test_simple_keys_and_partitions_of_timestamps_and_doubles_are_javas(tmp_path):
    """Java's key generators key a record by `HoodieAvroUtils.getNestedFieldValAsString`: a
    timestamp as the long it is written as (micros; millis for timestamp-millis), whatever its
    zone or the writer's (a Spark session's); a double as `Double.toString`."""
    moment = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id,at", precombine_field="ts", partition_fields="x")
    for zone in ("UTC", "America/New_York"):  # the same instants, another zone on the column
        table.write(pa.table({"id": ["a", "b"], "ts": [1, 1],
                              "at": pa.array([moment, moment], pa.timestamp("us", "UTC")).cast(
                                  pa.timestamp("us", zone)),
                              "x": pa.array([1e7, 1.5e-4], pa.float64())}))
    assert rows(hudi_read(path), ["_hoodie_record_key", "_hoodie_partition_path"]) == [
        ("id:a,at:1704164645123456", "1.0E7"), ("id:b,at:1704164645123456", "1.5E-4")]
    millis = str(tmp_path / "m")
    Table.create(millis, name="m", record_key="at").write(
        pa.table({"at": pa.array([moment], pa.timestamp("ms", "UTC"))}))
    assert hudi_read(millis).column("_hoodie_record_key").to_pylist() == ["1704164645123"]


@pytest.mark.parametrize("key", ["at", "s.at"])
def test_timestamps_handed_over_in_microseconds_are_keyed_in_the_tables_units(tmp_path, key):
    """Spark hands timestamps over in microseconds: a timestamp-millis key (top level, or in a
    struct) is keyed by its millisecond long, as the table stores it and the core keyed it."""
    import datetime as dt

    from airflow_lake.core.write.keying import KeySpec, key_paths

    at = [dt.datetime(2024, 1, 2, 3, 4, 5, 123000)]
    ms, us = pa.timestamp("ms"), pa.timestamp("us")
    schema = pa.schema([("id", pa.string()), ("at", ms), ("s", pa.struct([("at", ms)])), ("ts", pa.int64())])
    table = Table.create(str(tmp_path / "t"), name="t", record_key=key, precombine_field="ts")
    table.write(pa.table({"id": ["a"], "at": at, "s": [{"at": at[0]}], "ts": [1]}, schema=schema))
    stored = Table.open(table.storage.uri).read(columns=["_hoodie_record_key"]).column(0).to_pylist()
    spec = KeySpec(table.context(), "upsert", False, schema, schema, "t")
    keyed = key_paths(spec, ("at", "s"), pa.array(at, us), pa.array([{"at": at[0]}], pa.struct([("at", us)])))
    assert keyed.field(0).to_pylist() == stored == ["1704164645123"]
