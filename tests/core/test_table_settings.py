"""Settings given for an existing table must equal its own (Hudi's
`HoodieWriterUtils.validateTableConfig`): a contradiction is refused before the timeline is
touched, naming the table, the value given and the table's; equal spellings pass."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError, TableNotFoundError
from tests.conftest import hudi_read, rows

COMPLEX = "org.apache.hudi.keygen.ComplexKeyGenerator"
COLS = ["id", "ts", "part"]


@pytest.fixture
def existing(table_path) -> Table:
    table = Table.create(table_path, name="orders", record_key="id", precombine_field="ts", partition_fields="part")
    table.write(pa.table({"id": ["a"], "ts": [1], "part": ["x"]}))
    return table


def _hoodie(path: str) -> list[str]:
    return sorted(os.listdir(f"{path}/.hoodie"))


CONTRADICTIONS = [
    ({"record_key": "uuid"}, "record_key='uuid'", "'id'"),
    ({"record_key": ["id", "ts"]}, "record_key=['id', 'ts']", "'id'"),
    ({"partition_fields": "city"}, "partition_fields='city'", "'part'"),
    ({"partition_fields": ["part", "day"]}, "partition_fields=['part', 'day']", "'part'"),
    ({"precombine_field": "v"}, "precombine_field='v'", "'ts'"),
    ({"table_type": "MERGE_ON_READ"}, "table_type='MERGE_ON_READ'", "'COPY_ON_WRITE'"),
    ({"hive_style_partitioning": True}, "hive_style_partitioning=True", "'false'"),
    ({"name": "trips"}, "name='trips'", "'orders'"),
    ({"options": {"hoodie.datasource.write.keygenerator.class": COMPLEX}}, COMPLEX, "SimpleKeyGenerator"),
    ({"options": {"hoodie.datasource.write.keygenerator.type": "COMPLEX"}}, "type='COMPLEX'", "SimpleKeyGenerator"),
    ({"options": {"hoodie.datasource.write.table.type": "MERGE_ON_READ"}}, "'MERGE_ON_READ'", "'COPY_ON_WRITE'"),
    ({"options": {"hoodie.datasource.write.partitionpath.urlencode": "true"}}, "urlencode='true'", "'false'"),
    ({"options": {"hoodie.datasource.write.hive_style_partitioning": True}}, "partitioning=True", "'false'"),
]


@pytest.mark.parametrize(("given", "value", "theirs"), CONTRADICTIONS, ids=lambda v: str(v)[:40])
def test_a_contradicting_setting_is_refused_before_the_timeline_is_touched(existing, table_path, given, value,
                                                                           theirs):
    before = _hoodie(table_path)
    with pytest.raises(InvalidOptionError) as refused:
        Table.open_or_create(table_path, **given)
    message = str(refused.value)
    assert f"table {existing.storage.uri}" in message and value in message and theirs in message
    assert _hoodie(table_path) == before
    assert rows(hudi_read(table_path), COLS) == [("a", 1, "x")]


@pytest.mark.parametrize(("options", "theirs"), [({"hoodie.datasource.write.table.type": "MERGE_ON_READ"}, "COPY"),
                                                ({"hoodie.datasource.write.keygenerator.class": COMPLEX}, "Simple"),
                                                ({"hoodie.datasource.write.hive_style_partitioning": "true"}, "false")])
def test_a_write_whose_options_contradict_the_table_is_refused(existing, table_path, options, theirs):
    before = _hoodie(table_path)
    with pytest.raises(InvalidOptionError) as refused:
        Table.open(table_path, options=options).write(pa.table({"id": ["b"], "ts": [1], "part": ["x"]}))
    message = str(refused.value)
    assert table_path in message and str(next(iter(options.values()))) in message and theirs in message
    assert _hoodie(table_path) == before


@pytest.mark.parametrize("given", [
    {},
    {"record_key": " id ", "partition_fields": ["part"], "precombine_field": "ts", "table_type": "cow"},
    {"record_key": ["id"], "partition_fields": "part ", "table_type": "copy_on_write", "name": "ORDERS"},
    {"hive_style_partitioning": False},
    {"options": {"hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleAvroKeyGenerator",
                 "hoodie.datasource.write.keygenerator.type": "simple",
                 "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
                 "hoodie.datasource.write.hive_style_partitioning": False}},
], ids=range(5))
def test_equal_settings_in_any_spelling_open_the_table(existing, table_path, given):
    table, created = Table.open_or_create(table_path, **given)
    assert not created
    table.write(pa.table({"id": ["b"], "ts": [2], "part": ["x"]}))
    assert rows(hudi_read(table_path), COLS) == [("a", 1, "x"), ("b", 2, "x")]


def test_multi_field_keys_compare_by_names(table_path):
    Table.create(table_path, name="t", record_key=["a", "b"], partition_fields=["p", "q"])
    Table.open_or_create(table_path, record_key="a, b", partition_fields="p ,q")
    with pytest.raises(InvalidOptionError, match=r"record_key='b,a' but the table has 'a,b'"):
        Table.open_or_create(table_path, record_key="b,a")


def test_an_ordering_field_the_table_lacks_is_refused(table_path):
    Table.create(table_path, name="t", record_key="id")
    with pytest.raises(InvalidOptionError, match="precombine_field='ts' but the table has 'none'"):
        Table.open_or_create(table_path, record_key="id", precombine_field="ts")


def test_a_missing_table_is_created_from_the_settings(tmp_path):
    path = str(tmp_path / "landing" / "trips")
    with pytest.raises(TableNotFoundError, match="needs a record key"):
        Table.open_or_create(path, table_type="MERGE_ON_READ")
    table, created = Table.open_or_create(path, record_key="id", table_type="mor", partition_fields=["part"])
    assert created and table.config.name == "trips" and table.config.table_type == "MERGE_ON_READ"
    assert table.config.partition_fields == ["part"]


def test_a_table_another_writer_creates_meanwhile_is_opened_not_an_error(tmp_path, monkeypatch):
    """Two writers `open_or_create` the same new table at once (two Airflow upserts with
    `create_if_missing`): the one that finds it created meanwhile (its own create refused: the
    properties' conditional create or the check before) opens it as if it had been there, and
    its settings are still compared; it once failed with 'hoodie.properties already exists'."""
    import multiprocessing

    from airflow_lake.core import properties
    from airflow_lake.core.errors import TableExistsError
    from airflow_lake.core.storage import open_storage

    path = str(tmp_path / "t")
    theirs, _ = Table.open_or_create(path, table_type="MERGE_ON_READ", record_key="id")
    with pytest.raises(TableExistsError, match="already holds a Hudi table"):
        properties.save(open_storage(path), theirs.config, create=True)
    real, calls = Table.open, []

    def not_yet(*args, **kwargs):  # (the first look found nothing: the other writer was not done)
        calls.append(1)
        if len(calls) == 1:
            raise TableNotFoundError(f"table {path}: not there yet")
        return real(*args, **kwargs)

    monkeypatch.setattr(Table, "open", staticmethod(not_yet))
    ours, created = Table.open_or_create(path, table_type="MERGE_ON_READ", record_key="id")
    assert not created and ours.config.table_type == "MERGE_ON_READ" and len(calls) == 2
    calls.clear()
    with pytest.raises(InvalidOptionError, match="COPY_ON_WRITE"):
        Table.open_or_create(path, table_type="COPY_ON_WRITE", record_key="id")
    monkeypatch.undo()
    # and for real: processes racing to create one table, each round a new one
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        target = str(tmp_path / f"race{round_}")
        with ctx.Pool(2) as pool:
            results = pool.map(_open_or_create, [target, target])
        assert sorted(results) == [False, True], results
        assert Table.open(target).config.table_type == "MERGE_ON_READ"


def _open_or_create(path: str) -> bool:
    return Table.open_or_create(path, table_type="MERGE_ON_READ", record_key="id")[1]
