"""Indexes: bloom pruning reads only candidate files; the bucket hash equals Java's
String/List.hashCode (checked by running Java itself)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pyarrow as pa
import pytest

from airflow_lake.core import Table
from airflow_lake.core.engine import LocalEngine
from airflow_lake.core.index import bloom as bloom_index
from airflow_lake.core.index.bucket import bucket_ids, java_string_hashes
from airflow_lake.core.index.simple import read_keys
from airflow_lake.core.view import FileSystemView
from tests.conftest import hudi_read, rows


def test_bloom_index_confirms_only_candidate_files(table_path):
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options={"hoodie.parquet.small.file.limit": 0})
    for i in range(4):  # four files with disjoint key ranges
        ids = [f"k{i}-{j:04d}" for j in range(500)]
        t.write(pa.table({"id": ids, "ts": [0] * 500, "part": ["x"] * 500, "v": [float(i)] * 500}),
                operation="insert")
    view = FileSystemView(t.storage, t.timeline)
    files = view.latest_base_files()
    assert len(files) == 4
    read = []

    def reader(base):
        read.append(base.file_id)
        return read_keys(t.storage, base, t.keygen, True)

    keys = pa.array(["k2-0007", "k2-9999", "zzz"])  # one hit, one in range but absent, one out of range
    tags = bloom_index.tag(t.storage, files, keys, pa.array(["x"] * 3), is_global=False, key_reader=reader,
                           engine=LocalEngine(1))
    hit = [f.file_id for f in files if f.path == files[tags.file_index[0]].path]
    assert tags.file_index[1] == -1 and tags.file_index[2] == -1
    assert read == hit  # the other three files were pruned by range or bloom filter
    r = t.write(pa.table({"id": ["k2-0007", "new"], "ts": [1, 1], "part": ["x", "x"], "v": [9.0, 9.0]}))
    assert (r.num_updates, r.num_inserts) == (1, 1)
    assert hudi_read(table_path).num_rows == 2001


LOOSE = {"hoodie.parquet.small.file.limit": 0, "hoodie.index.bloom.num_entries": 200,
         "hoodie.index.bloom.fpp": 0.2}  # filters that err often (about one key in five)


def _rows(ids: list[str], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "part": ["x"] * len(ids), "v": [float(ts)] * len(ids)})


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_trusted_bloom_false_positives_lose_nothing(table_path, table_type, monkeypatch):
    """COW upserts let a positive filter test stand for a settled file (the rewrite sees the
    truth). With loose filters trusted anyway: a new key one filter wrongly claims becomes an
    insert into that file and is found there later; a key two filters claim is checked exactly;
    on MOR every claim is checked (an insert must land in a base file); an insert that drops
    duplicates loses no new key. Our reader and hudi-rs must agree with a plain model."""
    monkeypatch.setattr(bloom_index, "TRUSTED_FPP", 1.0)
    t = Table.create(table_path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options=LOOSE)
    model: dict[str, int] = {}

    def write(ids: list[str], ts: int, operation: str = "upsert", **options):
        Table.open(table_path, options=options).write(_rows(ids, ts), operation=operation)
        if operation == "delete":
            for i in ids:
                model.pop(i)
        else:
            model.update({i: ts for i in ids})

    write([f"k{j:03d}" for j in range(0, 400, 2)], 0, "insert")  # two file groups whose key
    write([f"k{j:03d}" for j in range(1, 400, 2)], 0, "insert")  # ranges overlap
    groups = {f.file_id for f in FileSystemView(t.storage, t.timeline).latest_base_files()}
    new = [f"k{j:03d}n" for j in range(200)]  # inside both ranges, in neither file
    write(new + [f"k{j:03d}" for j in range(0, 400, 7)], 1)
    where = dict(zip(*[t.read(columns=["id", "_hoodie_file_name"]).column(c).to_pylist()
                       for c in ("id", "_hoodie_file_name")], strict=True))
    in_place = [k for k in new if where[k].split("_")[0] in groups]
    assert bool(in_place) == (table_type == "COPY_ON_WRITE")
    write(new[::3], 2)  # found again where they went: updated, not duplicated
    write(new[1::5], 3, "delete")
    write([f"k{j:03d}m" for j in range(100)], 4, "insert", **{"hoodie.datasource.write.insert.drop.duplicates": True})
    expected = sorted(model.items())
    assert rows(t.read(), ["id", "ts"]) == expected
    assert rows(hudi_read(table_path), ["id", "ts"]) == expected


def test_wrongly_claimed_new_keys_still_meet_the_concurrent_insert_check(table_path, monkeypatch):
    """A key a trusted filter wrongly tags to a COW file is reported by the rewrite as inserted,
    so a concurrent writer that inserted the same key makes this write fail (no duplicate)."""
    from airflow_lake.core.errors import WriteConflictError
    from airflow_lake.core.formats.parquet import file_bloom
    from airflow_lake.core.write import client

    monkeypatch.setattr(bloom_index, "TRUSTED_FPP", 1.0)
    t = Table.create(table_path, name="t", record_key="id", precombine_field="ts", partition_fields="part",
                     options=LOOSE)
    t.write(_rows([f"k{j:03d}" for j in range(400)], 0), operation="insert")
    (base,) = FileSystemView(t.storage, t.timeline).latest_base_files()
    new = [f"k{j:03d}n" for j in range(100)]
    new = [k for k, hit in zip(new, file_bloom(t.storage, base.path).might_contain(pa.array(new)), strict=True) if hit]
    assert new
    plan = client.WriteClient.inflight

    def plan_then_other_writer(self, *args, **kwargs):
        out = plan(self, *args, **kwargs)
        monkeypatch.setattr(client.WriteClient, "inflight", plan)
        Table.open(table_path).write(_rows(new, 5), operation="insert")  # between plan and commit
        return out

    monkeypatch.setattr(client.WriteClient, "inflight", plan_then_other_writer)
    with pytest.raises(WriteConflictError, match="inserts key"):
        Table.open(table_path).write(_rows(new, 1))
    ids = hudi_read(table_path).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 400 + len(new)


def _java_hashes(values: list[str]) -> list[int]:
    src = """
    import java.nio.file.*; import java.util.*;
    public class H { public static void main(String[] a) throws Exception {
      for (String line : Files.readAllLines(Paths.get(a[0]), java.nio.charset.StandardCharsets.UTF_8)) {
        String[] parts = line.split("\\t", -1);
        System.out.println(parts[0].hashCode() + " " + Arrays.asList(parts).hashCode());
      } } }
    """
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        with open(f"{folder}/H.java", "w") as f:
            f.write(src)
        with open(f"{folder}/in.txt", "w", encoding="utf-8") as f:
            f.write("\n".join(values) + "\n")
        out = subprocess.run(["java", f"{folder}/H.java", f"{folder}/in.txt"], capture_output=True, text=True,
                             check=True, timeout=120)
    return [tuple(int(x) for x in line.split()) for line in out.stdout.splitlines()]


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JDK (ENVIRONMENT.md: OpenJDK 17 is on our machines)")
def test_bucket_hash_matches_java():
    rng = np.random.default_rng(7)
    alphabet = list("abcXYZ019-_ :,") + ["é", "ß", "☃", "𝄞"]
    values = ["".join(rng.choice(alphabet, rng.integers(0, 30))) for _ in range(300)] + ["1", "", "Alice"]
    values = [v.replace("\t", "") for v in values]
    java = _java_hashes(values)
    ours = java_string_hashes(pa.array(values))
    assert [int(np.int32(np.uint32(h))) for h in ours] == [j[0] for j in java]
    # simple keys: List.hashCode of [key]; complex keys: the values of the hash fields
    simple = [v for v in values if ":" not in v]
    buckets = bucket_ids(pa.array(simple), 256, ["id"])
    expected = [((31 + j[0]) & 0x7FFFFFFF) % 256 for j, v in zip(java, values, strict=True) if ":" not in v]
    assert list(buckets) == expected


def test_bucket_examples_from_spec():
    assert list(bucket_ids(pa.array(["1", "334e26e9-8355-45cc-97c6-c31daf0df330"]), 256, ["id"])) == [80, 227]
    assert list(bucket_ids(pa.array(["id:1,name:Alice"]), 16, ["id", "name"])) == [0]
    assert list(bucket_ids(pa.array(["id:1,name:Alice"]), 1 << 30, ["id", "name"])) == [63352848]


def test_bucket_table_has_one_group_per_bucket(table_path):
    t = Table.create(table_path, name="b", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                     partition_fields="part", options={"hoodie.index.type": "BUCKET",
                                                       "hoodie.bucket.index.num.buckets": 8})
    for i in range(3):
        ids = [f"key{j}" for j in range(i * 50, i * 50 + 80)]
        t.write(pa.table({"id": ids, "ts": [i] * 80, "part": ["x"] * 80, "v": [float(i)] * 80}))
    groups = FileSystemView(t.storage, t.timeline).file_groups("x")
    assert len(groups) == len({g.file_id[:8] for g in groups}) <= 8
    assert all(sl.base_file is None for g in groups for sl in g.slices)  # log-only groups
    expected = rows(t.read(), ["id", "ts", "v"])
    assert len(expected) == 180
    assert rows(hudi_read(table_path), ["id", "ts", "v"]) == expected
    # the index type is persisted: a plain open keeps routing by bucket
    again = Table.open(table_path)
    again.write(pa.table({"id": ["key0"], "ts": [9], "part": ["x"], "v": [9.0]}))
    assert len(FileSystemView(t.storage, t.timeline).file_groups("x")) == len(groups)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("index", ["GLOBAL_SIMPLE", "GLOBAL_BLOOM"])
def test_global_index_moves_when_every_row_of_the_batch_moves(table_path, table_type, index):
    t = Table.create(table_path, name="g", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields=["part"], options={"hoodie.index.type": index})
    cols = ["id", "ts", "part"]

    def check(expected):
        assert rows(t.read(), cols) == sorted(expected) == rows(hudi_read(table_path), cols)

    t.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "x"]}), operation="insert")
    t.write(pa.table({"id": ["a"], "ts": [2], "part": ["y"]}))  # the only row moves
    check([("a", 2, "y"), ("b", 1, "x")])
    t.write(pa.table({"id": ["a", "b"], "ts": [3, 3], "part": ["z", "z"]}))  # every row moves
    check([("a", 3, "z"), ("b", 3, "z")])
    t.write(pa.table({"id": ["a", "a"], "ts": [5, 4], "part": ["w", "v"]}))  # the moving key twice
    check([("a", 5, "w"), ("b", 3, "z")])
