"""The record-level index read (v8 spec §5.5): Java's key hashing, the location encoding, and
the record indexes of the Hudi-written fixtures decoded and compared with a scan of the table
by hudi-rs; `doctor` reports a stale index."""

from __future__ import annotations

import io
import json
import logging
import random
import struct
import time
from collections import Counter

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_lake.core import Table
from airflow_lake.core.errors import InvalidOptionError, InvalidTableError
from airflow_lake.core.formats.hfile import read_hfile, write_hfile
from airflow_lake.core.formats.log import DeleteBlock, HeaderKey, read_log_file
from airflow_lake.core.formats.log.blocks import HFileBlock
from airflow_lake.core.index.record_index import (
    LOCATIONS,
    RecordIndex,
    _hash_one,
    check_record_index,
    decode_file_id,
    file_group_index,
    index_log_blocks,
    java_string_hashes,
    located_keys,
    location_info,
)
from airflow_lake.core.metadata_table import MERGERS, mdt_timeline, merge_mdt_slice, readable_instants
from airflow_lake.core.metadata_writer import (
    MetadataWriter,
    base_hfile,
    clean_plan,
    compacted_index_base,
    compaction_plan,
)
from airflow_lake.core.timeline.instant import Instant, State
from airflow_lake.core.timeline.payloads import CompactionPlan
from airflow_lake.core.write.client import WriteClient
from tests.cli.conftest import invoke_json
from tests.core.test_hudi1x_read import TABLES, theirs, unpack

RLI_TABLES = ["v8_trips", "v9_cow_meta", "v9_mor_nonpart", "v9_lance"]  # INDEX.md: those with record_index


def test_java_string_hash_codes():
    # values of java.lang.String#hashCode: ASCII, a collision, Integer.MIN_VALUE, a code unit
    # above 127, a character outside the BMP (a surrogate pair: two code units)
    known = {"": 0, "hello": 99162322, "Aa": 2112, "BB": 2112, "polygenelubricants": -2147483648,
             "héllo": 103094734, "\U0001F600": 31 * 0xD83D + 0xDE00, "TXN-006": -166313933}
    keys = list(known)
    assert java_string_hashes(pa.array(keys)).tolist() == list(known.values())
    assert [_hash_one(k) for k in keys] == list(known.values())
    # Math.abs(Math.abs(h) % n): Math.abs(MIN_VALUE) stays negative in Java
    assert file_group_index(pa.array(["polygenelubricants"]), 10).tolist() == [8]


def test_vectorised_hashes_equal_the_scalar_ones():
    rng = random.Random(7)
    alphabet = "abcXYZ019-_:/=é€\U0001F600"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    keys[7] = "x" * 3000  # (one long key among short ones)
    ascii_keys = [k.encode("ascii", "ignore").decode() for k in keys]
    for sample in (keys, ascii_keys):
        chunked = pa.chunked_array([pa.array(sample[:200]), pa.array(sample[200:]).slice(3)])
        expected = [_hash_one(k) for k in sample[:200] + sample[203:]]
        assert java_string_hashes(chunked).tolist() == expected
        assert java_string_hashes(pa.array(sample, pa.large_string())).tolist() == [_hash_one(k) for k in sample]


UUID = "c923cb31-a2d3-49c6-8f47-4be96502c239"


@pytest.mark.parametrize("file_id", [f"{UUID}-0", f"{UUID}-12", UUID, "00000001-0000-abcd", "not-a-uuid-x",
                                     "ffffffff-ffff-ffff-ffff-ffffffffffff-3"])
def test_file_ids_round_trip(file_id):
    info = location_info("p=1", file_id, 1772922357587)
    assert decode_file_id(info) == file_id and info["partitionName"] == "p=1"
    assert info["fileIdEncoding"] == (1 if file_id in ("00000001-0000-abcd", "not-a-uuid-x") else 0)


def test_file_id_encodings():
    info = {"fileIdEncoding": 0, "fileIdHighBits": -3953092633855571514, "fileIdLowBits": -8122439937145257415,
            "fileIndex": 0, "fileId": ""}
    assert decode_file_id(info) == "c923cb31-a2d3-49c6-8f47-4be96502c239-0"
    assert decode_file_id({**info, "fileIndex": -1}) == "c923cb31-a2d3-49c6-8f47-4be96502c239"
    assert decode_file_id({"fileIdEncoding": 1, "fileId": "00000001-0", "fileIdHighBits": -1,
                           "fileIdLowBits": -1, "fileIndex": -1}) == "00000001-0"


@pytest.fixture(scope="module")
def rli_tables(tmp_path_factory):
    base = tmp_path_factory.mktemp("rli")
    return {name: unpack(TABLES[name], base / name) for name in RLI_TABLES}


@pytest.mark.parametrize("name", RLI_TABLES)
def test_the_fixtures_record_index_holds_exactly_what_a_scan_finds(rli_tables, name):
    path = rli_tables[name]
    table = Table.open(str(path))
    index = RecordIndex.open(table.storage, table.config.props, table.timeline)
    assert index.num_groups == 10  # (INDEX.md: every fixture's record index has 10 file groups)
    scan = theirs(path)  # hudi-rs: each live row's key, partition and file
    expected = sorted(zip(scan["_hoodie_record_key"].to_pylist(), scan["_hoodie_partition_path"].to_pylist(),
                          [f.split("_")[0] for f in scan["_hoodie_file_name"].to_pylist()], strict=True))
    entries = index.entries()
    assert sorted(zip(entries["key"].to_pylist(), entries["partition"].to_pylist(), entries["file_id"].to_pylist(),
                      strict=True)) == expected
    assert index.misplaced() == []  # every key sits in the file group Java's hash names
    assert check_record_index(index, located_keys(table.context(), table.timeline)).ok


def test_record_index_log_files_are_written_as_hudi_writes_them(rli_tables):
    """Every record-index log file Hudi 1.1 wrote (its native HFile writer; 1.0's HBase-written
    ones differ in HFile framing) is re-encoded byte for byte from what it holds."""
    rewritten = 0
    for path in rli_tables.values():
        for f in sorted((path / ".hoodie" / "metadata" / "record_index").glob(".record-index-*.log.*")):
            data = f.read_bytes()
            blocks = read_log_file(data, str(f), hfile_blocks=True)
            hfiles = [b for b in blocks if isinstance(b, HFileBlock)]
            schema_text = blocks[0].header.get(HeaderKey.SCHEMA)
            if schema_text is None or any(b.content[-4:] != b"\x00\x00\x00\x03" for b in hfiles):
                continue  # an initialisation file (an empty DELETE block), or written by HBase's HFile writer
            rows = [decoded(cell, schema_text) for b in hfiles for cell in b.hfile().cells]
            deleted = [k for b in blocks if isinstance(b, DeleteBlock) for k in b.keys]
            created = struct.unpack(">q", hfiles[0].hfile().info[b"hfile.CREATE_TIME_TS"])[0] if hfiles else None
            locations = pa.Table.from_pylist(rows, schema=LOCATIONS)
            assert index_log_blocks(blocks[0].instant, schema_text, locations, deleted,
                                    create_time_ms=created) == data, f.name
            rewritten += 1
    assert rewritten >= 60


def decoded(cell: tuple[bytes, bytes], schema_text: str) -> dict:
    info = fastavro.schemaless_reader(io.BytesIO(cell[1]), fastavro.parse_schema(json.loads(schema_text)), None)
    info = info["recordIndexMetadata"]
    return {"key": cell[0].decode(), "partition": info["partitionName"], "file_id": decode_file_id(info),
            "instant_ms": info["instantTime"]}


def test_a_lookup_reads_only_the_groups_its_keys_hash_to(rli_tables, monkeypatch):
    table = Table.open(str(rli_tables["v9_cow_meta"]))
    index = RecordIndex.open(table.storage, table.config.props, table.timeline)
    scan = theirs(rli_tables["v9_cow_meta"])
    where = {k: (p, f.split("_")[0]) for k, p, f in zip(scan["_hoodie_record_key"].to_pylist(),
                                                        scan["_hoodie_partition_path"].to_pylist(),
                                                        scan["_hoodie_file_name"].to_pylist(), strict=True)}
    wanted = sorted(where)[::5]
    read: list[int] = []
    original = RecordIndex.group_cells
    monkeypatch.setattr(RecordIndex, "group_cells",
                        lambda self, i, keys=None: read.append(i) or original(self, i, keys))
    keys = pa.array(wanted + ["TXN-404"])  # (not in the table)
    found = index.lookup(keys)
    assert sorted(read) == sorted(set(file_group_index(keys, 10).tolist())) and len(set(read)) < 10
    assert {r["key"]: (r["partition"], r["file_id"]) for r in found.to_pylist()} == {k: where[k] for k in wanted}


def test_a_stale_record_index_is_found(rli_tables):
    table = Table.open(str(rli_tables["v9_cow_meta"]))
    index = RecordIndex.open(table.storage, table.config.props, table.timeline)
    located = located_keys(table.context(), table.timeline)
    keys = sorted(located["key"].to_pylist())
    # a row the index lacks, a key no row has, a key in another file group, one in another
    # partition, a key live in two file groups
    rows = [r for r in located.to_pylist() if r["key"] != keys[0]]
    rows.append({"key": "NEW-1", "partition": "region=us", "file_id": "f-0"})
    rows = [{**r, "file_id": "other-0"} if r["key"] == keys[1] else r for r in rows]
    rows = [{**r, "partition": "region=zz"} if r["key"] == keys[2] else r for r in rows]
    rows.append({**next(r for r in rows if r["key"] == keys[3]), "file_id": "twin-0"})
    check = check_record_index(index, pa.Table.from_pylist(rows))
    assert (check.stale, check.missing, check.moved, check.duplicated, check.misplaced, check.ok) == \
        ([keys[0]], ["NEW-1"], [keys[1], keys[2]], [keys[3]], [], False)
    assert check.keys == len(keys)  # (distinct keys)
    # the index's groups numbered otherwise: every key sits in a group its hash does not name
    shifted = RecordIndex(index.storage, index.view, index.valid,
                          {(i + 1) % index.num_groups: g for i, g in index.groups.items()})
    assert sorted(k for k, _ in shifted.misplaced()) == keys
    assert check_record_index(shifted, located).misplaced == keys


def test_lookups_of_nothing_and_null_keys(rli_tables):
    table = Table.open(str(rli_tables["v9_cow_meta"]))
    index = RecordIndex.open(table.storage, table.config.props, table.timeline)
    assert index.lookup(pa.array([], pa.string())).num_rows == 0
    assert index.lookup(pa.array([None, "TXN-404"], pa.string())).num_rows == 0


def test_doctor_checks_the_record_index(rli_tables, tmp_path):
    import shutil

    path = str(rli_tables["v8_trips"])
    findings = [f for f in invoke_json("doctor", path)["findings"] if f["check"] == "metadata"]
    assert any(f["level"] == "ok" and "record index locates each of the 6 live keys" in f["message"]
               for f in findings), findings
    # a key no row has, added to a base file of the index (in the group its hash names): said, exit 3
    copy = shutil.copytree(rli_tables["v9_mor_nonpart"], tmp_path / "t")
    base = sorted((copy / ".hoodie" / "metadata" / "record_index").glob("record-index-0003-0_*.hfile"))[-1]
    hfile = read_hfile(base.read_bytes())
    stale = next(k for k in (f"GONE-{i}" for i in range(100)) if file_group_index(pa.array([k]), 10)[0] == 3)
    cells = sorted(hfile.cells + [(stale.encode(), hfile.cells[0][1])])
    base.write_bytes(write_hfile(cells, hfile.info, hfile.meta))
    doc = invoke_json("doctor", str(copy), code=3)
    [warned] = [f for f in doc["findings"] if f["check"] == "metadata" and f["level"] == "warn"]
    assert warned["message"] == f"the record index is stale: 1 keys no row has ({stale})"
    assert "duplicate" in warned["advice"]


def test_an_index_without_file_groups_is_refused(rli_tables, tmp_path):
    import shutil

    copy = shutil.copytree(rli_tables["v9_lance"], tmp_path / "t")
    for f in (copy / ".hoodie" / "metadata" / "record_index").iterdir():
        if f.name != ".hoodie_partition_metadata":
            f.unlink()
    table = Table.open(str(copy))
    with pytest.raises(InvalidTableError, match="holds no file group"):
        RecordIndex.open(table.storage, table.config.props)


def test_partitioned_file_ids_as_hudi_names_them():
    """`record-index-<escaped partition>-<k>-0` (Hudi 1.1's `escapeFileName`: %XX for `=`, `/`,
    `_`, `-`, ...; the 1.1 test's `record-index-test-0012-0`)."""
    from airflow_lake.core.index.record_index import escape_partition, index_file_id, parse_file_id

    assert index_file_id("test", 12) == "record-index-test-0012-0"
    assert escape_partition("city=san_francisco") == "city%3Dsan%5Ffrancisco"
    assert escape_partition("2024/01/15") == "2024%2F01%2F15"
    for partition in ("city=san_francisco", "a-b/c", "é x", ""):
        assert parse_file_id(index_file_id(partition, 3)) == (partition, 3)
    assert parse_file_id("record-index-0003-0") == (None, 3)


def test_a_partitioned_record_index_is_built_kept_and_used(tmp_path, caplog):
    """`hoodie.metadata.record.level.index.enable=true` (v9) builds Hudi 1.1's partitioned form:
    each data partition's own file groups (1 here), a key hashed over its partition's groups, the
    definition `isPartitioned=true`; RECORD_LEVEL_INDEX tags by it (a key is looked up in its
    own partition: the same key may live in two); writes into a new partition create its group at
    their instant; deletes, an overwrite and a rollback keep it equal to hudi-rs's scan."""
    path = tmp_path / "t"
    options = {"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
               "hoodie.metadata.record.level.index.enable": "true", "hoodie.index.type": "RECORD_LEVEL_INDEX"}
    table = Table.create(str(path), name="t", record_key="id", precombine_field="ts", partition_fields="part",
                         table_type="MERGE_ON_READ", options=options)
    table.write(pa.table({"id": [f"k{i}" for i in range(30)], "ts": [1] * 30,
                          "part": [["x_1", "y-2", "z/3"][i % 3] for i in range(30)]}), operation="insert")
    folder = path / ".hoodie" / "metadata" / "record_index"
    groups = sorted({p.name.lstrip(".").split("_")[0] for p in folder.iterdir() if "record-index-" in p.name})
    assert groups == ["record-index-x%5F1-0000-0", "record-index-y%2D2-0000-0", "record-index-z%2F3-0000-0"]
    defs = json.loads((path / ".hoodie" / ".index_defs" / "index.json").read_text())["indexDefinitions"]
    assert defs["record_index"]["indexOptions"] == {"isPartitioned": "true"}
    index_matches_hudi_rs(path)
    # the same key in another partition is another record (no global lookup); a new partition
    with caplog.at_level(logging.INFO):
        result = table.write(pa.table({"id": ["k0", "k1", "new"], "ts": [2, 2, 2], "part": ["y-2", "y-2", "w"]}))
    assert "record index: 1 keys found" in caplog.text  # (k1 lives in y-2; k0 is new there)
    assert list(folder.glob(f".record-index-w-0000-0_{result.instant}.log.*"))
    rows = index_matches_hudi_rs(path)
    assert sorted(r for r in zip(rows["id"].to_pylist(), rows["part"].to_pylist(), strict=True)
                  if r[0] in ("k0", "k1")) == \
        [("k0", "x_1"), ("k0", "y-2"), ("k1", "y-2")]
    table.write(pa.table({"id": ["k0", "k2"], "ts": [3, 3], "part": ["x_1", "z/3"]}), operation="delete")
    index_matches_hudi_rs(path)
    last = table.write(pa.table({"id": ["k5", "brand"], "ts": [4, 4], "part": ["z/3", "v"]}))
    table.rollback(last.instant)
    assert not list(folder.glob(f".record-index-v-0000-0_{last.instant}.*"))
    index_matches_hudi_rs(path)
    table.write(pa.table({"id": ["o1"], "ts": [5], "part": ["x_1"]}), operation="insert_overwrite")
    assert sorted(index_matches_hudi_rs(path).filter(pc.equal(pc.field("part"), "x_1"))["id"].to_pylist()) == ["o1"]
    check = check_record_index(RecordIndex.open(table.storage, Table.open(str(path)).config.props, table.timeline),
                               located_keys(table.context(), table.timeline))
    assert check.ok, check
    # built on a table with rows: each partition's groups from its keys (the min, 1, here)
    other = Table.create(str(tmp_path / "u"), name="u", record_key="id", precombine_field="ts",
                         partition_fields="part", options={"hoodie.write.table.version": 9,
                                                           "hoodie.metadata.enable": "true"})
    other.write(pa.table({"id": ["a", "b", "a"], "ts": [1, 1, 1], "part": ["p", "q", "q"]}), operation="insert")
    Table.open(str(tmp_path / "u"), options=options).write(pa.table({"id": ["a"], "ts": [2], "part": ["q"]}))
    assert sorted(p.name.split("_")[0] for p in (tmp_path / "u" / ".hoodie" / "metadata" / "record_index").glob(
        "*.hfile")) == ["record-index-p-0000-0", "record-index-q-0000-0"]
    index_matches_hudi_rs(tmp_path / "u")
    # a global lookup type on a partitioned index falls back, warned
    with caplog.at_level(logging.WARNING):
        Table.open(str(path), options={"hoodie.index.type": "RECORD_INDEX", "airflow_lake.index.switch.force": "true"}
                   ).write(pa.table({"id": ["o2"], "ts": [6], "part": ["x_1"]}))
    assert "has no global record index" in caplog.text and "keys are looked up as GLOBAL_SIMPLE" in caplog.text
    index_matches_hudi_rs(path)


def test_metadata_compaction_merges_record_index_groups_as_hudi_does(rli_tables):
    """Each file group of Hudi's own metadata-table compactions (record_index and files) merged
    again from the plan's slices: the record index's base HFiles equal Hudi 1.1's byte for byte;
    the files partition's hold the same records (Java writes a file list's map entries in an
    order of its own)."""
    compared = Counter()
    for name in ("v9_cow_meta", "v9_mor_nonpart"):
        root = rli_tables[name]
        table = Table.open(str(root))
        timeline = mdt_timeline(table.storage)
        valid = readable_instants(timeline, table.timeline)
        for done in (i for i in timeline.completed() if i.action == "commit"):
            plan = CompactionPlan.from_bytes(timeline.read_details(Instant(done.time, "compaction", State.REQUESTED)))
            assert {op.partition for op in plan.operations} >= {"files", "record_index"}
            # a compaction planned now starts each group's slice at the base HFile Hudi's made
            later = compaction_plan(table.storage, timeline, "99991231235959999", ("files", "record_index"))
            assert sorted((o.file_id, o.data_file.split("_")[0], o.base_instant) for o in later.operations) == \
                sorted((o.file_id, o.file_id, done.time) for o in plan.operations
                       if o.partition in ("files", "record_index"))
            for op in (o for o in plan.operations if o.partition in ("files", "record_index")):
                [java] = (root / ".hoodie" / "metadata" / op.partition).glob(f"{op.file_id}_*_{done.time}.hfile")
                data = java.read_bytes()
                theirs_ = read_hfile(data)
                folder = f".hoodie/metadata/{op.partition}"
                created = struct.unpack(">q", theirs_.info[b"hfile.CREATE_TIME_TS"])[0]
                schema_text = theirs_.info[b"schema"].decode()
                if op.partition == "record_index":
                    mine, _ = compacted_index_base(table.storage, folder, op, valid, java.name, schema_text, created)
                    assert mine == data, java.name
                else:
                    state: dict = {}
                    merge_mdt_slice(table.storage, f"{folder}/{op.data_file}" if op.data_file else None,
                                    [f"{folder}/{f}" for f in op.delta_files], valid, state, *MERGERS[op.partition])
                    mine, _ = base_hfile(op.partition, state, java.name, schema_text, created)
                    assert [(r, decoded_record(v, schema_text)) for r, v in read_hfile(mine).cells] == \
                        [(r, decoded_record(v, schema_text)) for r, v in theirs_.cells], java.name
                compared[op.partition] += 1
    assert compared == {"record_index": 20, "files": 2}


def decoded_record(value: bytes, schema_text: str) -> dict:
    return fastavro.schemaless_reader(io.BytesIO(value), fastavro.parse_schema(json.loads(schema_text)), None)


def test_metadata_rollback_and_clean_cover_every_partition(rli_tables):
    """The MDT rollback of a deltacommit names its log files in every MDT partition; an MDT
    clean of files and record_index deletes the slices Hudi's compaction left behind in both."""
    root = rli_tables["v9_cow_meta"]
    table = Table.open(str(root))
    writer = MetadataWriter(table.storage)
    timeline = writer.timeline()
    [compaction] = [i.time for i in timeline.completed() if i.action == "commit"]
    later = [i.time for i in timeline.completed() if i.action == "deltacommit" and i.time > compaction]
    target = next(t for t in later if (root / ".hoodie/metadata/record_index").glob(f".*_{t}.log.*"))
    written = writer.written_by(target)
    on_disk = {p.parent.name: [] for p in (root / ".hoodie/metadata").glob(f"*/.*_{target}.log.*")}
    for p in (root / ".hoodie/metadata").glob(f"*/.*_{target}.log.*"):
        on_disk[p.parent.name].append(f".hoodie/metadata/{p.parent.name}/{p.name}")
    assert {k: sorted(v) for k, v in written.items()} == {k: sorted(v) for k, v in on_disk.items()}
    assert {"files", "record_index"} <= set(written)
    _, plan = writer.rollback_plan(timeline, target)
    assert {r.partition: len(r.files) for r in plan.requests} == {k: len(v) for k, v in written.items()}

    # keeping one file version: everything Hudi's compaction merged goes (its plan's base and log
    # files, the initialisation's empty logs); a log of a deltacommit that completed after the
    # compaction was planned stays, whatever its instant
    cleaned = clean_plan(table.storage, timeline, "KEEP_LATEST_FILE_VERSIONS", 1, ("files", "record_index"))
    merged = CompactionPlan.from_bytes(timeline.read_details(Instant(compaction, "compaction", State.REQUESTED)))
    expected: dict[str, set[str]] = {"files": set(), "record_index": set()}
    for op in merged.operations:
        if op.partition in expected:
            expected[op.partition] |= set(op.delta_files) | ({op.data_file} if op.data_file else set())
            expected[op.partition] |= {f.name for f in (root / ".hoodie/metadata" / op.partition).glob(
                f".{op.file_id}_0000000000000000?.log.*")}
    assert {p: {f.rsplit("/", 1)[-1] for f in fs} for p, fs in cleaned.files.items()} == expected


def index_matches_hudi_rs(path) -> pa.Table:
    """The table's record index holds exactly the keys hudi-rs reads, each where hudi-rs finds
    it, in the file group Java's hash names; returns hudi-rs's rows."""
    table = Table.open(str(path))
    index = RecordIndex.open(table.storage, table.config.props, table.timeline)
    scan = theirs(path)
    entries = index.entries()
    assert sorted(zip(entries["key"].to_pylist(), entries["partition"].to_pylist(), entries["file_id"].to_pylist(),
                      strict=True)) == sorted(zip(
        scan["_hoodie_record_key"].to_pylist(), scan["_hoodie_partition_path"].to_pylist(),
        [f.split("_")[0] for f in scan["_hoodie_file_name"].to_pylist()], strict=True))
    assert index.misplaced() == []
    return scan


def data_of(rows: pa.Table) -> pa.Table:
    return rows.select([c for c in rows.schema.names if not c.startswith("_hoodie")])


@pytest.mark.parametrize("name", ["v9_cow_meta", "v8_trips"])
def test_a_partition_scoped_upsert_may_not_give_a_key_of_a_global_record_index_a_second_row(tmp_path, name):
    """On a table whose record index is global (one location per key), an upsert under a
    partition-scoped index (the default BLOOM) that would insert a key the table holds in
    another partition is refused, naming the key and both partitions, and changes no row (it
    once wrote the key twice, and the index held only the newer row); new keys and updates in
    place still go through; under RECORD_INDEX the same row updates the key where it is."""
    from airflow_lake.core.errors import RecordKeyError

    path = unpack(TABLES[name], tmp_path / "t")
    table = Table.open(str(path))
    key, part, field = table.config.record_key_fields[0], table.config.partition_fields[0], \
        table.config.precombine_field
    rows = data_of(index_matches_hudi_rs(path)).sort_by(key)
    later = rows.set_column(rows.schema.get_field_index(field), field,
                            pc.add(rows[field], pa.scalar(10**6, rows.schema.field(field).type)))
    moving = later.slice(0, 1)
    held = moving[part][0].as_py()
    other = next(p for p in pc.unique(rows[part]).to_pylist() if p != held)
    moved = moving.set_column(moving.schema.get_field_index(part), part, pa.array([other]))
    fresh = later.slice(1, 1).set_column(rows.schema.get_field_index(key), key, pa.array(["Z-1"]))
    commits = table.timeline.commits().completed().times
    with pytest.raises(RecordKeyError, match=f"table {table.storage.uri}: .*{moving[key][0].as_py()!r} "
                                             f"\\(written to '.*{other}', held in '.*{held}'\\).*Nothing was written"):
        table.write(pa.concat_tables([moved, fresh, later.slice(2, 1)]))
    assert Table.open(str(path)).timeline.commits().completed().times == commits
    assert index_matches_hudi_rs(path).num_rows == rows.num_rows
    table.write(pa.concat_tables([fresh, later.slice(2, 1)]))  # a new key and an update in place
    assert index_matches_hudi_rs(path).num_rows == rows.num_rows + 1
    Table.open(str(path), options={"hoodie.index.type": "RECORD_INDEX"}).write(moved)
    scan = index_matches_hudi_rs(path)
    assert scan.num_rows == rows.num_rows + 1
    assert scan.filter(pc.equal(scan[key], moving[key][0]))[field].to_pylist() == moving[field].to_pylist()


@pytest.mark.parametrize("name", ["v9_cow_meta", "v8_trips"])
def test_writes_keep_the_record_index_current(tmp_path, name, monkeypatch):
    """Inserts, updates, deletes, a key moved to another partition (global index), an
    insert_overwrite and a failed write, each followed by the index compared with hudi-rs's
    scan; each touched index file group gets one log file per write: new locations in an
    HFILE_DATA block, deleted keys in a DELETE block (as Java writes them)."""
    path = unpack(TABLES[name], tmp_path / "t")
    table = Table.open(str(path), options={"hoodie.client.heartbeat.interval_in_ms": 100,
                                           "hoodie.client.heartbeat.tolerable.misses": 1})
    key, part = table.config.record_key_fields[0], table.config.partition_fields[0]
    rows = data_of(index_matches_hudi_rs(path)).sort_by(key)
    folder = path / ".hoodie" / "metadata" / "record_index"

    def logs_of(instant: str) -> dict[str, list]:
        out = {}
        for log_path in folder.glob(f".record-index-*_{instant}.log.*"):
            out[log_path.name.split("_")[0][1:]] = read_log_file(log_path.read_bytes(), hfile_blocks=True)
        return out

    fresh = rows.slice(0, 3).set_column(rows.schema.get_field_index(key), key,
                                        pa.array([f"NEW-{i}" for i in range(3)]))
    inserted = table.write(fresh, operation="insert")
    written = logs_of(inserted.instant)
    assert {g: [type(b).__name__ for b in blocks] for g, blocks in written.items()} == \
        {g: ["HFileBlock"] for g in written}
    assert sorted(k.decode() for blocks in written.values() for b in blocks for k, _ in b.hfile().cells) \
        == ["NEW-0", "NEW-1", "NEW-2"]
    for group, blocks in written.items():  # each key in the group its hash names
        cells = blocks[0].hfile().cells
        assert all(f"record-index-{file_group_index(pa.array([k.decode()]), 10)[0]:04d}-0" == group for k, _ in cells)
    index_matches_hudi_rs(path)

    updated = table.write(rows.slice(0, 2))  # in place: the index does not change
    assert logs_of(updated.instant) == {}
    index_matches_hudi_rs(path)

    gone = table.write(rows.slice(2, 1), operation="delete")
    [blocks] = logs_of(gone.instant).values()
    assert [type(b) for b in blocks] == [DeleteBlock]
    assert blocks[0].keys == [rows[key][2].as_py()]
    assert blocks[0].header[HeaderKey.SCHEMA] == MetadataWriter(table.storage).schema_text()
    index_matches_hudi_rs(path)

    # a key moved to another partition under a global index (its entry moves with it)
    moving = rows.slice(3, 1)
    other = next(p for p in pc.unique(rows[part]).to_pylist() if p != moving[part][0].as_py())
    moving = moving.set_column(moving.schema.get_field_index(part), part, pa.array([other]))
    Table.open(str(path), options={"hoodie.index.type": "GLOBAL_SIMPLE",
                                   "hoodie.simple.index.update.partition.path": "true",
                                   "airflow_lake.index.switch.force": "true"}).write(moving)
    scan = index_matches_hudi_rs(path)
    assert scan.filter(pc.equal(scan[key], moving[key][0]))[part].to_pylist() == [other]

    # an overwrite: the replaced groups' keys leave the index unless written again
    overwrite = table.write(rows.slice(4, 1), operation="insert_overwrite")
    assert any(isinstance(b, DeleteBlock) for blocks in logs_of(overwrite.instant).values() for b in blocks)
    index_matches_hudi_rs(path)

    # a write that dies after its tasks wrote index logs leaves log files no MDT instant names;
    # the next writer rolls it back, and its logs with it
    monkeypatch.setattr(WriteClient, "commit", _die)
    with pytest.raises(KeyboardInterrupt):
        table.write(fresh.set_column(fresh.schema.get_field_index(key), key, pa.array(["X-1", "X-2", "X-3"])))
    monkeypatch.undo()
    done = {i.time for i in Table.open(str(path)).timeline.completed()}
    assert [p for p in folder.iterdir() if p.name.startswith(".") and _instant_of(p.name) not in done]
    time.sleep(0.3)  # (its heartbeat expires)
    table.write(rows.slice(0, 1))
    done = {i.time for i in Table.open(str(path)).timeline.completed()}
    assert not [p for p in folder.iterdir() if p.name.startswith(".") and not p.name.startswith(".hoodie")
                and not _instant_of(p.name).startswith("0000") and _instant_of(p.name) not in done]
    index_matches_hudi_rs(path)


def _die(*args, **kwargs):
    raise KeyboardInterrupt("killed before the commit")


def _instant_of(name: str) -> str:
    return name.split("_")[1].split(".")[0]


@pytest.mark.parametrize("version", [8, 9])
def test_the_record_index_is_built_on_request_and_switched_off(tmp_path, version, caplog):
    """`hoodie.metadata.record.index.enable=true` builds the index from a scan (10 file groups at
    the next initialisation instant, each with its base HFile and the empty DELETE log Java
    starts a partition with; v9: its index.json definition); `false` switches it off, warned."""
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", record_key="id", precombine_field="ts", partition_fields="part",
                         options={"hoodie.write.table.version": version, "hoodie.metadata.enable": "true"})
    table.write(pa.table({"id": [f"k{i}" for i in range(40)], "ts": [1] * 40,
                          "part": [f"p{i % 3}" for i in range(40)]}), operation="insert")
    on = Table.open(str(path), options={"hoodie.metadata.record.index.enable": "true"})
    on.write(pa.table({"id": ["k1", "new"], "ts": [2, 2], "part": ["p1", "p0"]}))
    props = Table.open(str(path)).config.props
    assert props["hoodie.table.metadata.partitions"] == "files,record_index"
    folder = path / ".hoodie" / "metadata" / "record_index"
    init = "00000000000000001"
    assert sorted(p.name for p in folder.glob("*.hfile")) == [f"record-index-{k:04d}-0_0-0-{k}_{init}.hfile"
                                                             for k in range(10)]
    assert len(list(folder.glob(f".record-index-*_{init}.log.1_0-0-0"))) == 10
    assert index_matches_hudi_rs(path).num_rows == 41
    defs = path / ".hoodie" / ".index_defs" / "index.json"
    if version == 9:
        assert json.loads(defs.read_text())["indexDefinitions"]["record_index"]["indexOptions"] == \
            {"isPartitioned": "false"}
    # later writes (without the option) keep it
    table.write(pa.table({"id": ["k2", "k3"], "ts": [3, 3], "part": ["p2", "p0"]}), operation="delete")
    index_matches_hudi_rs(path)
    with caplog.at_level(logging.WARNING):
        Table.open(str(path), options={"hoodie.metadata.record.index.enable": "false"}).write(
            pa.table({"id": ["k4"], "ts": [4], "part": ["p1"]}))
    assert Table.open(str(path)).config.props["hoodie.table.metadata.partitions"] == "files"
    assert not folder.exists()
    assert any("switches the record index off" in r.getMessage() for r in caplog.records)
    if version == 9:
        assert "record_index" not in json.loads(defs.read_text())["indexDefinitions"]
    with pytest.raises(InvalidOptionError, match="record.index.enable='yes'"):
        Table.open(str(path), options={"hoodie.metadata.record.index.enable": "yes"}).write(
            pa.table({"id": ["k5"], "ts": [4], "part": ["p1"]}))


def _rli_table(path, **options):
    table = Table.create(str(path), name="t", record_key="id", precombine_field="ts", partition_fields="part",
                         table_type="MERGE_ON_READ",
                         options={"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
                                  "hoodie.metadata.record.index.enable": "true", **options})
    return table


def test_rollbacks_and_restores_past_a_metadata_compaction_resync_the_record_index(tmp_path):
    """Index entries an MDT compaction merged cannot be rolled back with their log file: a
    rollback or restore of their write brings the index in line with a scan instead (keys it
    inserted deleted, keys it deleted or moved put back)."""
    path = tmp_path / "t"
    table = _rli_table(path, **{"hoodie.metadata.compact.max.delta.commits": 2})
    table.write(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "part": ["x", "y", "x"]}), operation="insert")
    saved = table.timeline.commits().completed().last.time
    table.savepoint(saved)
    table.write(pa.table({"id": ["d", "e"], "ts": [2, 2], "part": ["y", "y"]}))
    gone = table.write(pa.table({"id": ["b"], "ts": [3], "part": ["y"]}), operation="delete")
    inserted = table.write(pa.table({"id": ["f"], "ts": [4], "part": ["x"]}))
    table.write(pa.table({"id": ["a"], "ts": [5], "part": ["x"]}))
    mdt = MetadataWriter(table.storage).timeline()
    from airflow_lake.core.metadata_writer import absorbed

    assert absorbed(mdt, gone.instant) and absorbed(mdt, inserted.instant)
    index_matches_hudi_rs(path)
    table.rollback(table.timeline.commits().completed().last.time)
    table.rollback(inserted.instant)
    assert sorted(index_matches_hudi_rs(path)["id"].to_pylist()) == ["a", "c", "d", "e"]
    table.restore(saved)
    assert sorted(index_matches_hudi_rs(path)["id"].to_pylist()) == ["a", "b", "c"]
    table.write(pa.table({"id": ["b", "g"], "ts": [9, 9], "part": ["y", "x"]}))
    assert sorted(index_matches_hudi_rs(path)["id"].to_pylist()) == ["a", "b", "c", "g"]


@pytest.mark.parametrize("name", ["v9_cow_meta", "v9_mor_nonpart", "v8_trips"])
def test_upserts_tagged_by_the_record_index_hudi_built(tmp_path, name, monkeypatch):
    """hoodie.index.type=RECORD_INDEX on tables Hudi built with a record index: updates find
    their file group through it (only the index groups the keys hash to are read), new keys
    are inserted once, and the index stays what hudi-rs's scan implies."""
    path = unpack(TABLES[name], tmp_path / "t")
    table = Table.open(str(path), options={"hoodie.index.type": "RECORD_INDEX"})
    key, field = table.config.record_key_fields[0], table.config.precombine_field
    rows = data_of(index_matches_hudi_rs(path)).sort_by(key)
    later = rows.set_column(rows.schema.get_field_index(field), field,
                            pc.add(rows[field], pa.scalar(10**6, rows.schema.field(field).type)))
    fresh = later.slice(0, 2).set_column(rows.schema.get_field_index(key), key, pa.array(["Z-1", "Z-2"]))
    read = []
    real = RecordIndex.group_cells
    monkeypatch.setattr(RecordIndex, "group_cells", lambda self, k, keys=None: read.append(k) or real(self, k, keys))
    batch = pa.concat_tables([later.slice(0, 3), fresh])
    result = table.write(batch)
    hashed = set(file_group_index(batch[key], 10).tolist())
    assert set(read) <= hashed and result.index_stats["index_file_groups"] == len(hashed)
    monkeypatch.undo()
    scan = index_matches_hudi_rs(path)
    assert scan.num_rows == rows.num_rows + 2 and pc.count_distinct(scan["_hoodie_record_key"]).as_py() == scan.num_rows
    updated = scan.filter(pc.is_in(scan[key], later.slice(0, 3)[key]))
    assert sorted(updated[field].to_pylist()) == sorted(later.slice(0, 3)[field].to_pylist())


def test_record_index_tagging_without_an_index_falls_back_to_a_global_lookup(tmp_path, caplog):
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", record_key="id", precombine_field="ts", partition_fields="part",
                         options={"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true",
                                  "hoodie.index.type": "GLOBAL_SIMPLE"})
    table.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"]}))
    with caplog.at_level(logging.WARNING):
        Table.open(str(path), options={"hoodie.index.type": "GLOBAL_RECORD_LEVEL_INDEX"}).write(
            pa.table({"id": ["a"], "ts": [2], "part": ["x"]}))
    assert any("no record index" in r.getMessage() and "GLOBAL_SIMPLE" in r.getMessage() for r in caplog.records)
    data = Table.open(str(path)).read()
    assert sorted(zip(data["id"].to_pylist(), data["ts"].to_pylist(), strict=True)) == [("a", 2), ("b", 1)]


def test_an_index_is_not_built_while_another_write_is_in_flight(tmp_path, caplog):
    """A write that began before an index existed would commit files the index lacks: while
    one is in flight (live heartbeat) the build waits for a later write, warned."""
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", record_key="id", precombine_field="ts", partition_fields="part",
                         options={"hoodie.write.table.version": 9, "hoodie.metadata.enable": "true"})
    table.write(pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"]}), operation="insert")
    pending = "29991231235959000"
    (path / ".hoodie" / "timeline" / f"{pending}.deltacommit.requested").write_bytes(b"")
    (path / ".hoodie" / ".heartbeat").mkdir(exist_ok=True)
    (path / ".hoodie" / ".heartbeat" / pending).write_bytes(b"")  # (fresh: the writer is alive)
    asks = {"hoodie.metadata.record.index.enable": "true", "hoodie.metadata.index.column.stats.enable": "true"}
    with caplog.at_level(logging.WARNING):
        Table.open(str(path), options=asks).write(pa.table({"id": ["c"], "ts": [1], "part": ["x"]}))
    assert Table.open(str(path)).config.props["hoodie.table.metadata.partitions"] == "files"
    assert any("record index is built once no other write is in flight" in r.getMessage() for r in caplog.records)
    assert any("column stats is built once no other write" in r.getMessage() for r in caplog.records)
    (path / ".hoodie" / "timeline" / f"{pending}.deltacommit.requested").unlink()
    Table.open(str(path), options=asks).write(pa.table({"id": ["d"], "ts": [1], "part": ["y"]}))
    assert Table.open(str(path)).config.props["hoodie.table.metadata.partitions"] == \
        "column_stats,files,partition_stats,record_index"
    assert sorted(index_matches_hudi_rs(path)["id"].to_pylist()) == ["a", "b", "c", "d"]
