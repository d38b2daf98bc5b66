"""One vocabulary: table types, operations, index types, cleaner policies and compaction
triggers are defined once (`core/vocabulary.py`), every layer accepts the same spellings of
them (`MOR`, `mor`, `merge_on_read`, `MERGE_ON_READ`...), and a misspelling is refused before
the timeline is touched, naming the table and the value."""

from __future__ import annotations

import ast
import os
import pathlib

import pyarrow as pa
import pytest

import airflow_lake
from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.vocabulary import (
    CLEAN_POLICIES,
    COMPACTION_ORDERS,
    COMPACTION_TRIGGERS,
    INDEX_TYPES,
    OPERATIONS,
    TABLE_TYPES,
    split_options,
)
from tests.conftest import hudi_read, rows

ROOT = pathlib.Path(airflow_lake.__file__).parent.parent
VOCABULARIES = (TABLE_TYPES, OPERATIONS, INDEX_TYPES, CLEAN_POLICIES, COMPACTION_TRIGGERS, COMPACTION_ORDERS)
BATCH = pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"]})


@pytest.mark.parametrize("spelling", ["MOR", "mor", "merge_on_read", "Merge_On_Read", "MERGE_ON_READ"])
def test_every_spelling_of_a_table_type_creates_that_type(tmp_path, spelling):
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", table_type=spelling, record_key="id", precombine_field="ts",
                         partition_fields="part")
    table.write(BATCH, operation="UPSERT")
    assert table.config.table_type == "MERGE_ON_READ"
    assert Table.open_or_create(path, table_type=spelling.lower())[1] is False  # the same setting, spelled otherwise
    assert rows(hudi_read(path), ["id", "part"]) == [("a", "x"), ("b", "y")]


@pytest.mark.parametrize(("call", "value"), [
    (lambda t: t.write(BATCH, operation="upsrt"), "'upsrt'"),
    (lambda t: t.clean(policy="KEEP_LATEST"), "'KEEP_LATEST'"),
    (lambda t: t.plan_compaction(strategy="EVERY_COMMIT"), "'EVERY_COMMIT'"),
    (lambda t: t.run_compaction(order="OLDEST"), "'OLDEST'"),
])
def test_a_misspelled_name_is_refused_naming_the_table_and_the_value(tmp_path, call, value):
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", table_type="mor", record_key="id", precombine_field="ts",
                         partition_fields="part")
    table.write(BATCH)
    before = sorted(os.listdir(f"{path}/.hoodie"))
    with pytest.raises(InvalidOptionError) as refused:
        call(table)
    assert f"table {table.storage.uri}" in str(refused.value) and value in str(refused.value)
    assert sorted(os.listdir(f"{path}/.hoodie")) == before


def test_an_unknown_index_type_in_the_options_names_its_key(tmp_path):
    path = str(tmp_path / "t")
    with pytest.raises(InvalidOptionError, match=r"hoodie.index.type='HASH' is not one of BLOOM"):
        Table.create(path, name="t", record_key="id", options={"hoodie.index.type": "HASH"})
    assert not (tmp_path / "t" / ".hoodie").exists()
    Table.create(path, name="t", record_key="id")
    with pytest.raises(InvalidOptionError, match=r"hoodie.index.type='HASH' is not one of BLOOM"):
        Table.open(path, options={"hoodie.index.type": "HASH"}).write(BATCH)
    assert Table.open(path).timeline.instants == []


def test_services_take_their_names_in_any_case(tmp_path):
    path = str(tmp_path / "t")
    table = Table.create(path, name="t", table_type="mor", record_key="id", precombine_field="ts",
                         partition_fields="part", options={"hoodie.index.type": "global_simple"})
    for ts in (1, 2, 3):
        table.write(BATCH.set_column(1, "ts", pa.array([ts, ts])), operation="Upsert")
    decision = table.plan_compaction(strategy="num_commits", max_delta_commits=1)
    assert decision.instant is not None
    assert table.run_compaction(order="fifo").instant == decision.instant
    assert table.clean(policy="keep_latest_file_versions", retained=1, dry_run=True).policy == \
        "KEEP_LATEST_FILE_VERSIONS"
    assert rows(hudi_read(path), ["id", "ts"]) == [("a", 3), ("b", 3)]


def test_clean_without_a_policy_takes_the_tables_cleaner_policy(tmp_path):
    """`hoodie.cleaner.policy` is the default on every engine (the local CLI used to ignore it)."""
    table = Table.create(str(tmp_path / "t"), name="t", record_key="id",
                         options={"hoodie.cleaner.policy": "keep_latest_by_hours"})
    table.write(BATCH)
    assert table.clean(dry_run=True).policy == "KEEP_LATEST_BY_HOURS"
    assert Table.open(table.storage.uri, options={"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"}) \
        .clean(dry_run=True).policy == "KEEP_LATEST_FILE_VERSIONS"


def test_options_split_into_table_and_typed_storage_options():
    table, storage = split_options({"hoodie.cleaner.policy": "KEEP_LATEST_COMMITS", "airflow_lake.x": "true",
                                    "region": "eu-west-1", "allow_http": "true", "retries": "3", "key": '"0123"'})
    assert table == {"hoodie.cleaner.policy": "KEEP_LATEST_COMMITS", "airflow_lake.x": "true"}
    assert storage == {"region": "eu-west-1", "allow_http": True, "retries": 3, "key": "0123"}
    assert split_options([("hoodie.a", "1"), ("b", "[1]")]) == ({"hoodie.a": "1"}, {"b": "[1]"})


def _name_lists(path: pathlib.Path) -> list[tuple[int, list[str]]]:
    """Literal tuples, lists and sets in a module holding two or more names of one vocabulary,
    or the table / storage option prefixes."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if {"hoodie.", "airflow_lake."} <= set(values) or any(
                    len([v for v in values if v in vocabulary.spellings]) >= 2 for vocabulary in VOCABULARIES):
                found.append((node.lineno, values))
    return found


def test_the_names_are_listed_in_one_place_only():
    sources = [p for folder in ("airflow_lake", "spark_jobs") for p in (ROOT / folder).rglob("*.py")
               if p.name != "vocabulary.py"]
    assert sources
    lists = {str(p.relative_to(ROOT)): _name_lists(p) for p in sources}
    assert {path: found for path, found in lists.items() if found} == {}
