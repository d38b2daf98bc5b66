"""Option values, arguments and commit metadata a table cannot take are refused before anything
is created or the timeline is touched, naming the table, the key (or argument) and the value;
table settings among the options agree with the arguments; values in range are written as
Apache Hudi writes them (hudi-rs judges)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest
from click.testing import CliRunner

from airflow_lake.cli import cli
from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError
from tests.conftest import hudi_read, rows
from tests.core.test_errors import tree

BATCH = pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"], "v": [1.0, 2.0]})
MOR = dict(name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts", partition_fields="part")


def created(path: str, **options) -> Table:
    table = Table.create(path, **MOR, options=options or None)
    table.write(BATCH)
    return table


@pytest.mark.parametrize("options, fragment", [
    ({"hoodie.table.version": "9"}, "hoodie.table.version='9' is not a setting to give"),
    ({"hoodie.table.version": "5"}, "hoodie.table.version='5'"),
    ({"hoodie.timeline.layout.version": "2"}, "hoodie.timeline.layout.version='2'"),
    ({"hoodie.write.table.version": "9", "hoodie.timeline.layout.version": "1"}, "layout.version='1'"),
    ({"hoodie.table.metadata.partitions": "files,record_index"}, "hoodie.table.metadata.partitions"),
    ({"hoodie.table.type": "COPY_ON_WRITE"}, "hoodie.table.type='COPY_ON_WRITE' contradicts table_type"),
    ({"hoodie.table.recordkey.fields": "v"}, "hoodie.table.recordkey.fields='v' contradicts record_key='id'"),
    ({"hoodie.table.partition.fields": "v"}, "hoodie.table.partition.fields='v' contradicts partition_fields"),
    ({"hoodie.table.precombine.field": "v"}, "hoodie.table.precombine.field='v' contradicts precombine_field"),
    ({"hoodie.table.name": "other"}, "hoodie.table.name='other' contradicts name='t'"),
    ({"hoodie.parquet.max.file.size": "big"}, "option hoodie.parquet.max.file.size='big' is not a valid int"),
    ({"hoodie.parquet.compression.codec": "rar"}, "hoodie.parquet.compression.codec='rar' is not one of snappy"),
    ({"hoodie.logfile.data.block.format": "csv"}, "hoodie.logfile.data.block.format='csv' is not one of parquet"),
    ({"hoodie.combine.before.insert": "maybe"}, "hoodie.combine.before.insert='maybe' is not a valid bool"),
    ({"hoodie.index.type": "NOPE"}, "hoodie.index.type='NOPE' is not one of"),
    ({"hoodie.bucket.index.num.buckets": 0, "hoodie.index.type": "BUCKET"}, "num.buckets=0 is below its minimum 1"),
    ({"hoodie.cleaner.commits.retained": -2}, "hoodie.cleaner.commits.retained=-2 is below its minimum 1"),
])
def test_create_refuses_what_the_table_cannot_take_and_creates_nothing(tmp_path, options, fragment):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidOptionError) as info:
        Table.create(path, **MOR, options=options)
    assert fragment in str(info.value) and path in str(info.value)
    assert not os.path.exists(os.path.join(path, ".hoodie"))


def test_table_settings_among_the_options_fill_arguments_not_given(tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id", options={
        "hoodie.table.type": "MOR", "hoodie.table.precombine.field": "ts", "hoodie.table.partition.fields": "part",
        "hoodie.table.version": "6"})  # what the table gets anyway
    assert (table.config.table_type, table.config.precombine_field, table.config.partition_fields) == \
        ("MERGE_ON_READ", "ts", ["part"])
    table.write(BATCH)
    table.write(pa.table({"id": ["a"], "ts": [0], "part": ["x"], "v": [9.0]}))  # older: the stored row stays
    assert rows(hudi_read(path), ["id", "v"]) == [("a", 1.0), ("b", 2.0)]


@pytest.mark.parametrize("options, fragment", [
    ({"hoodie.parquet.max.file.size": "big"}, "hoodie.parquet.max.file.size='big' is not a valid int"),
    ({"hoodie.parquet.compression.codec": "rar"}, "hoodie.parquet.compression.codec='rar'"),
    ({"hoodie.logfile.data.block.format": "csv"}, "hoodie.logfile.data.block.format='csv'"),
    ({"hoodie.index.bloom.fpp": "small"}, "hoodie.index.bloom.fpp='small' is not a valid float"),
    ({"hoodie.client.heartbeat.interval_in_ms": "-1"}, "interval_in_ms='-1' is below its minimum 0"),
])
def test_a_write_with_an_option_value_it_cannot_take_leaves_the_table_unchanged(tmp_path, options, fragment):
    path = str(tmp_path / "t")
    created(path)
    before = tree(path)
    with pytest.raises(InvalidOptionError) as info:
        Table.open(path, options=options).write(BATCH)
    assert fragment.replace("minimum 0", "minimum 1") in str(info.value) and path in str(info.value)
    assert tree(path) == before


def test_hudis_uncompressed_codec_is_written_uncompressed(tmp_path):
    path = str(tmp_path / "t")
    created(path, **{"hoodie.parquet.compression.codec": "UNCOMPRESSED"})
    assert rows(hudi_read(path), ["id", "v"]) == [("a", 1.0), ("b", 2.0)]


@pytest.mark.parametrize("version", ["6", "9"])
@pytest.mark.parametrize("extra", [{"run": 1}, {"tags": ["x"]}, {1: "x"}, ["x"], "x"])
def test_commit_metadata_is_text_or_refused_before_the_timeline(tmp_path, version, extra):
    path = str(tmp_path / "t")
    table = created(path, **{"hoodie.write.table.version": version})
    before = tree(path)
    with pytest.raises(InvalidOptionError, match="extra_metadata") as info:
        table.write(BATCH, extra_metadata=extra)
    assert path in str(info.value)
    with pytest.raises(InvalidOptionError, match="extra_metadata"):
        table.clean(retained=1, extra_metadata=extra)
    with pytest.raises(InvalidOptionError, match="extra_metadata"):
        table.plan_compaction(max_delta_commits=0, extra_metadata=extra)
    assert tree(path) == before


@pytest.mark.parametrize("call, fragment", [
    (lambda t: t.clean(retained="three"), "retained (KEEP_LATEST_COMMITS)='three' is not a valid int"),
    (lambda t: t.clean(retained=0), "retained (KEEP_LATEST_COMMITS)=0 is below its minimum 1"),
    (lambda t: t.clean(retained=1.5), "retained (KEEP_LATEST_COMMITS)=1.5 is not a valid int"),
    (lambda t: t.archive(min_commits="a"), "min_commits='a' is not a valid int"),
    (lambda t: t.archive(batch=True), "batch=True is not a valid int"),
    (lambda t: t.plan_compaction(max_delta_commits=-1), "max_delta_commits=-1 is below its minimum 0"),
    (lambda t: t.plan_compaction(max_delta_seconds="soon"), "max_delta_seconds='soon' is not a valid int"),
    (lambda t: t.read(columns="id"), "columns='id' is not a list of column names"),
    (lambda t: t.read_incremental("20240101000000000", holes="MAYBE"),
     "holes resolution policy 'MAYBE' (holes) is not one of"),
    (lambda t: Table.open(t.storage.uri, options=["x"]), "options=['x'] is not a mapping"),
    (lambda t: Table.create(t.storage.uri + "2", name="t", record_key=5), "record_key=5 is not a field name"),
    (lambda t: Table.create(t.storage.uri + "2", name="t", record_key="id", partition_fields=[1]),
     "partition_fields=[1]"),
])
def test_arguments_of_the_wrong_type_or_range_are_refused_naming_the_table(tmp_path, call, fragment):
    path = str(tmp_path / "t")
    table = created(path)
    before = tree(path)
    with pytest.raises(InvalidOptionError) as info:
        call(table)
    assert fragment in str(info.value) and path in str(info.value)
    assert tree(path) == before


def test_numbers_given_as_text_are_taken(tmp_path):
    """Airflow renders templated arguments as text."""
    path = str(tmp_path / "t")
    table = created(path)
    table.write(BATCH.set_column(1, "ts", pa.array([2, 2])))
    assert table.plan_compaction(max_delta_commits="1").instant is not None
    assert table.clean(retained="1", dry_run=True).policy == "KEEP_LATEST_COMMITS"


@pytest.mark.parametrize("args", [["timeline", "{p}", "--limit", "-1"], ["read", "{p}", "--limit", "-5"],
                                  ["commits", "{p}", "--limit", "-1"]])
def test_the_command_line_refuses_negative_limits(tmp_path, args):
    path = str(tmp_path / "t")
    created(path)
    result = CliRunner().invoke(cli, [a.format(p=path) for a in args])
    assert result.exit_code == 2 and args[-1] in result.output


def test_a_nested_ordering_field_is_refused_at_create_and_on_a_write(tmp_path):
    from airflow_lake.core.errors import UnsupportedFeatureError

    path = str(tmp_path / "t")
    with pytest.raises(UnsupportedFeatureError, match="precombine_field 'st.y' is a nested field"):
        Table.create(path, name="t", record_key="id", precombine_field="st.y")
    assert not os.path.exists(path + "/.hoodie")
    table = Table.create(path, name="t", record_key="id", precombine_field="ts")
    table.config.props["hoodie.table.precombine.field"] = "st.y"  # as a table another engine wrote
    data = pa.table({"id": ["a"], "st": pa.array([{"y": 1}])})
    with pytest.raises(UnsupportedFeatureError, match="field 'st.y' is a nested field"):
        table.write(data)
    assert table.timeline.instants == []
