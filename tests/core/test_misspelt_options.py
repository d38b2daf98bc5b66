"""A `hoodie.*` key one or two letters away from one airflow-lake reads is most likely a
misspelling, which Hudi (and we) would silently ignore, leaving the default: it is named in a
warning with the key meant."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pyarrow as pa

import airflow_lake
from airflow_lake.core import Table
from airflow_lake.core.config import NOT_READ_NEIGHBOURS, OPTIONS, READ_KEY_FAMILIES, READ_KEYS, misspelt_options


def test_a_misspelt_option_is_named_with_the_key_meant(tmp_path, caplog):
    path = str(tmp_path / "t")
    with caplog.at_level(logging.WARNING, logger="airflow_lake.core.table"):
        table = Table.create(path, name="t", record_key="id", options={"hoodie.index.typ": "SIMPLE"})
        Table.open(path, options={"hoodie.cleaner.commit.retained": "3", "hoodie.cleaner.commits.retained": "3",
                                  "hoodie.datasource.hive_sync.enable": "true"})
    said = [r.getMessage() for r in caplog.records]
    assert any(f"table {table.storage.uri}: option hoodie.index.typ is not one airflow-lake reads" in m
               and "did you mean hoodie.index.type?" in m for m in said), said
    assert any("hoodie.cleaner.commit.retained" in m and "did you mean hoodie.cleaner.commits.retained?" in m
               for m in said), said
    # a key we read, and a Hudi key far from every key we read: no warning
    assert not any("hoodie.cleaner.commits.retained is" in m or "hive_sync" in m for m in said), said
    table.write(pa.table({"id": ["a"], "v": [1]}))  # (the warning changes nothing)
    assert table.read().num_rows == 1


def test_every_key_the_package_reads_is_known_so_none_is_taken_for_a_misspelling():
    """Every `"hoodie.*"` text in the package is an `Option`, in `READ_KEYS`, under a family read
    by prefix, or not an option key at all (file and folder names)."""
    root = Path(airflow_lake.__file__).parent
    found = set()
    for source in root.rglob("*.py"):
        found |= set(re.findall(r'"(hoodie\.[a-z0-9_.]+[a-z0-9_])"', source.read_text()))
    # (a file name; Hudi's keys that may carry a secret, named to keep their values out of logs)
    not_options = {"hoodie.properties", "hoodie.datasource.hive_sync.jdbcurl", "hoodie.datasource.hive_sync.password",
                   "hoodie.metrics.datadog.api.key", "hoodie.write.commit.callback.http.api.key",
                   "hoodie.write.commit.callback.http.custom.headers"}
    unknown = sorted(k for k in found - not_options - NOT_READ_NEIGHBOURS
                     if k not in OPTIONS and k not in READ_KEYS and not k.startswith(READ_KEY_FAMILIES))
    assert unknown == []
    assert misspelt_options(dict.fromkeys(sorted(found))) == []


def test_hudis_own_keys_near_ours_are_not_taken_for_misspellings():
    hudi = ["hoodie.global.bloom.index.update.partition.path", "hoodie.bucket.index.max.num.buckets",
            "hoodie.bucket.index.min.num.buckets", "hoodie.combine.before.upsert", "hoodie.combine.before.delete",
            "hoodie.clean.automatic", "hoodie.archive.automatic", "hoodie.datasource.hive_sync.enable"]
    assert misspelt_options(dict.fromkeys(hudi)) == []
    assert misspelt_options({"hoodie.parquet.max.filesize": 1}) == [("hoodie.parquet.max.filesize",
                                                                     "hoodie.parquet.max.file.size")]
