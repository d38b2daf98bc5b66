"""Table versions 8 and 9 (Hudi 1.x) written in their own version: new tables
(`hoodie.write.table.version`), and tables Apache Hudi wrote without a metadata table appended
to, compacted, cleaned and rolled back, hudi-rs agreeing after every step; what we write has
the layout Hudi 1.x writes (names, folders, properties, Avro writer schemas)."""

from __future__ import annotations

import json
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.table import Table
from airflow_lake.core.timeline.metadata import read_avro
from tests.conftest import rows
from tests.core.test_hudi1x_read import TABLES, same_rows, snapshot_of, theirs, unpack


def agree(table: Table, path: Path) -> pa.Table:
    """Our snapshot and read-optimized reads equal hudi-rs's; the snapshot."""
    ours = table.read()
    same_rows(ours, theirs(path))
    same_rows(table.read(query_type="read_optimized"), theirs(path, query_type="read_optimized"))
    return ours


def avro_schema_text(path: Path) -> str:
    with open(path, "rb") as f:
        return fastavro.reader(f).metadata["avro.schema"]


def test_apache_hudi_v8_cow_table_appended_to(tmp_path):
    path = unpack(TABLES["v8_complexkeygen"], tmp_path / "t")
    table = Table.open(str(path))
    before = agree(table, path)
    data = before.select([c for c in before.schema.names if not c.startswith("_hoodie")])
    changed = data.slice(0, 2).set_column(data.schema.get_field_index("longField"), "longField",
                                          pa.array([10**12, 10**12], data.schema.field("longField").type))
    new = changed.set_column(data.schema.get_field_index("id"), "id",
                             pa.array([900, 901], data.schema.field("id").type))
    first = table.write(pa.concat_tables([changed, new]), operation="upsert")
    assert first.num_inserts == 2 and first.num_updates == 2
    after = agree(table, path)
    assert after.num_rows == before.num_rows + 2
    table.write(new.slice(0, 1), operation="delete")
    assert agree(table, path).num_rows == before.num_rows + 1
    commit = table.timeline.commits().completed().instants[-2]
    same_rows(table.read(as_of=commit.completion), theirs(path, as_of_timestamp=commit.completion))
    # what we wrote looks like what Hudi wrote: T_C.commit, an Avro container of Hudi's schema
    timeline = path / ".hoodie" / "timeline"
    ours = timeline / commit.file_name
    assert ours.name == f"{commit.time}_{commit.completion}.commit" and ours.is_file()
    hudi_made = sorted(p for p in timeline.glob("*_*.commit") if not p.name.startswith(commit.time))[0]
    assert avro_schema_text(ours) == avro_schema_text(hudi_made)
    workload = read_avro((timeline / f"{commit.time}.inflight").read_bytes())
    assert workload["operationType"] == "UPSERT" and workload["partitionToWriteStats"]


def test_apache_hudi_v9_mor_table_appended_to_compacted_cleaned_and_rolled_back(tmp_path):
    path = unpack(TABLES["v9_mor_nometa"], tmp_path / "t")
    table = Table.open(str(path), options={"hoodie.cleaner.commits.retained": "1"})
    before = agree(table, path)
    keys = sorted(before.column("txn_id").to_pylist())
    data = before.select([c for c in before.schema.names if not c.startswith("_hoodie")])
    ts = data.schema.get_field_index("txn_ts")
    update = data.filter(pa.compute.is_in(data.column("txn_id"), pa.array(keys[:3])))
    update = update.set_column(ts, "txn_ts", pa.array([2 * 10**12] * 3, data.schema.field("txn_ts").type))
    result = table.write(update, operation="upsert")
    assert result.num_updates == 3
    assert [i.action for i in table.timeline.completed() if i.time == result.instant] == ["deltacommit"]
    agree(table, path)
    logs = sorted(p.name for p in path.rglob(f".*_{result.instant}.log.*"))
    assert logs and all(".log.1_" in n for n in logs)  # named by our own deltacommit, version 1

    planned = table.schedule_compaction(max_delta_commits=1)
    assert planned is not None
    done = table.run_compaction(planned)
    assert done.instant == planned
    timeline = table.timeline
    compaction = [i for i in timeline.completed() if i.time == planned]
    assert [i.action for i in compaction] == ["commit"]
    names = sorted(p.name for p in (path / ".hoodie" / "timeline").glob(f"{planned}*"))
    assert names == [f"{planned}.compaction.inflight", f"{planned}.compaction.requested",
                     f"{planned}_{compaction[0].completion}.commit"]
    meta = timeline.commit_metadata(compaction[0])
    assert meta.compacted and meta.operation_type == "COMPACT"
    after_compaction = agree(table, path)

    late = table.write(update.slice(0, 1).set_column(ts, "txn_ts", pa.array([3 * 10**12],
                                                                             data.schema.field("txn_ts").type)))
    assert agree(table, path).num_rows == after_compaction.num_rows
    rolled = table.rollback(late.instant)
    assert rolled.rolled_back == late.instant and not list(path.rglob(f".*_{late.instant}.log.*"))
    same_rows(agree(table, path), after_compaction)
    cleaned = table.clean()
    assert cleaned.instant is not None and cleaned.files
    same_rows(agree(table, path), after_compaction)


@pytest.mark.parametrize("version", [8, 9])
def test_a_new_table_has_hudi1x_layout_and_properties(tmp_path, version):
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="p", options={"hoodie.write.table.version": version})
    props = table.config.props
    assert (props["hoodie.table.version"], props["hoodie.table.initial.version"]) == (str(version), str(version))
    assert props["hoodie.timeline.layout.version"] == "2" and props["hoodie.timeline.path"] == "timeline"
    assert props["hoodie.table.keygenerator.type"] == "SIMPLE" and "hoodie.table.keygenerator.class" not in props
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    if version == 8:
        assert props["hoodie.table.precombine.field"] == "ts"
        assert props["hoodie.record.merge.strategy.id"] == "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
        assert props["hoodie.compaction.payload.class"].endswith("DefaultHoodieRecordPayload")
    else:
        assert props["hoodie.table.ordering.fields"] == "ts" and props["hoodie.table.format"] == "native"
        assert "hoodie.table.precombine.field" not in props and "hoodie.compaction.payload.class" not in props
    assert (path / ".hoodie" / "timeline" / "history").is_dir()
    first = table.write(pa.table({"id": ["a", "b"], "p": ["x", "y"], "ts": [1, 1], "v": [1.0, 2.0]}),
                        operation="insert")
    second = table.write(pa.table({"id": ["a"], "p": ["x"], "ts": [2], "v": [3.0]}))
    assert rows(theirs(path), ["id", "v"]) == rows(table.read(), ["id", "v"]) == [("a", 3.0), ("b", 2.0)]
    instants = table.timeline.commits().completed().instants
    assert [i.time for i in instants] == [first.instant, second.instant]
    # completion times: after their own instant, before the next one's
    assert instants[0].time < instants[0].completion < instants[1].time < instants[1].completion
    commit = path / ".hoodie" / "timeline" / instants[1].file_name
    fixture = unpack(TABLES["v8_trips"], tmp_path / "fixture")
    hudi_made = sorted((fixture / ".hoodie" / "timeline").glob("*_*.deltacommit"))[0]
    assert avro_schema_text(commit) == avro_schema_text(hudi_made)
    [stat] = read_avro(commit.read_bytes())["partitionToWriteStats"]["x"]
    assert stat["path"] == f"x/.{stat['fileId']}_{second.instant}.log.1_{stat['path'].rsplit('_', 1)[1]}"
    assert stat["prevCommit"] == second.instant and stat["baseFile"] == "" and stat["logFiles"] == [
        stat["path"].rsplit("/", 1)[1]]


def test_versions_are_chosen_at_creation_and_never_changed(tmp_path):
    path = tmp_path / "t"
    with pytest.raises(InvalidOptionError, match="hoodie.write.table.version='7'"):
        Table.create(str(path), name="t", record_key="id", options={"hoodie.write.table.version": 7})
    assert not path.exists() or not (path / ".hoodie" / "hoodie.properties").exists()
    Table.create(str(path), name="t", record_key="id", options={"hoodie.write.table.version": "9"})
    Table.open(str(path)).write(pa.table({"id": ["a"]}), operation="insert")
    before = snapshot_of(path)
    for asked in ("6", "8"):
        with pytest.raises(InvalidOptionError, match=r"differs from the table's version 9.*never upgrades"):
            Table.open(str(path), options={"hoodie.write.table.version": asked}).write(
                pa.table({"id": ["b"]}), operation="insert")
    assert snapshot_of(path) == before


def test_archiving_moves_instants_into_the_lsm_history(tmp_path):
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="p", options={"hoodie.write.table.version": 9})
    first = None
    for i in range(12):
        done = table.write(pa.table({"id": [f"k{i % 5}"], "p": ["x"], "ts": [i], "v": [float(i)]}),
                           extra_metadata={"airflow_lake.token": f"run/{i}"})
        first = first or done
        if i in (7, 10):  # (updates since i=5: log files to compact)
            table.run_compaction(table.schedule_compaction(max_delta_commits=1))
    before = rows(table.read(), ["id", "v"])
    active = table.timeline.commits().completed().instants
    result = table.archive(min_commits=3, max_commits=5)
    assert result.archived and result.archive_file.startswith(".hoodie/timeline/history/")
    history = path / ".hoodie" / "timeline" / "history"
    version = (history / "_version_").read_text()
    manifest = json.loads((history / f"manifest_{version}").read_text())
    assert [f["fileName"] for f in manifest["files"]] == [result.archive_file.rsplit("/", 1)[1]]
    assert (history / f"manifest_{version}").read_text().startswith('{\n  "files" : [ {\n    "fileName" : ')
    archived_times = {a.split(".")[0] for a in result.archived}
    left = {p.name.split(".")[0].split("_")[0] for p in (path / ".hoodie" / "timeline").iterdir() if p.is_file()}
    assert not archived_times & left  # every state file of an archived instant is gone
    entries = table.archived_timeline.entries
    assert {e.instant.time for e in entries} == archived_times
    by_time = {i.time: i.completion for i in active}
    assert all(e.instant.completion == by_time[e.instant.time] for e in entries)
    rows_file = pq.read_table(history / result.archive_file.rsplit("/", 1)[1])
    assert rows_file.schema.names == ["instantTime", "completionTime", "action", "metadata", "plan", "version"]
    assert b"parquet.avro.schema" in rows_file.schema.metadata
    compacted = [r for r in rows_file.to_pylist() if r["action"] == "commit"]
    assert compacted and all(r["plan"] for r in compacted)  # a compaction keeps its plan
    assert rows(table.read(), ["id", "v"]) == before == rows(theirs(path), ["id", "v"])
    oldest = table.timeline.commits().completed().first
    same_rows(table.read(as_of=oldest.completion), theirs(path, as_of_timestamp=oldest.completion))
    # a retry of an archived write finds its run token in the history
    again = Table.open(str(path)).write(pa.table({"id": ["zz"], "p": ["x"], "ts": [0], "v": [0.0]}),
                                        extra_metadata={"airflow_lake.token": "run/0"})
    assert again.already_done and again.instant == first.instant


def test_lsm_history_compacts_levels_and_readers_trust_only_the_manifest(tmp_path):
    from airflow_lake.core.storage import open_storage
    from airflow_lake.core.timeline import lsm

    storage = open_storage(str(tmp_path))
    folder = "h"
    for n in range(11):
        t = f"2026010100000{n:04d}"[:17].ljust(17, "0")
        lsm.append(storage, folder, [lsm.LsmInstant(t, t[:-1] + "9", "commit", b"m", None)])
    assert lsm.compact(storage, folder) == 1
    files = lsm.manifest(storage, folder, lsm.latest_version(storage, folder))
    names = sorted(f["fileName"] for f in files)
    assert len(names) == 2 and names[0].endswith("_1.parquet") and names[1].endswith("_0.parquet")
    assert len(lsm.read_history(storage, folder)) == 11
    on_disk = sorted(p.name for p in (tmp_path / folder).iterdir())
    kept = [n for n in on_disk if n.startswith("manifest_")]
    assert len(kept) == 4  # the newest 3 + one per level merged; data files only they list
    listed = {f["fileName"] for m in kept for f in lsm.manifest(storage, folder, int(m.split("_")[1]))}
    assert {n for n in on_disk if n.endswith(".parquet")} == listed
    # an orphan data file (a crash before its manifest) is ignored; a lost _version_ falls back
    (tmp_path / folder / "29990101000000000_29990101000000000_0.parquet").write_bytes(b"junk")
    (tmp_path / folder / "_version_").unlink()
    assert len(lsm.read_history(storage, folder)) == 11


def test_a_log_only_file_group_is_one_slice_that_clean_keeps(tmp_path, monkeypatch):
    """Hudi's bucket-index MOR writers (and tables upgraded from version 6) leave file groups of
    log files only; every log of such a group joins the slice its first log started, so a
    clean keeps them all (they hold the group's records)."""
    from airflow_lake.core.view import FileSystemView
    from airflow_lake.core.write import pipeline

    real = pipeline.plan_bucket_groups
    monkeypatch.setattr(pipeline, "plan_bucket_groups", lambda *a, **k: real(*a, **{**k, "log_only_groups": True}))
    path = tmp_path / "t"
    table = Table.create(str(path), name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         options={"hoodie.write.table.version": 9, "hoodie.index.type": "BUCKET",
                                  "hoodie.bucket.index.num.buckets": 1})
    for ts in range(3):
        table.write(pa.table({"id": ["a", f"n{ts}"], "ts": [ts, ts], "v": [float(ts), 1.0]}))
    logs = sorted(p.name for p in path.rglob(".*.log.*"))
    assert len(logs) == 3 and not list(path.rglob("*.parquet"))
    view = FileSystemView(table.storage, table.timeline)
    [group] = view.file_groups()
    assert len(group.slices) == 1 and len(group.slices[0].log_files) == 3
    table.clean(policy="KEEP_LATEST_FILE_VERSIONS", retained=1)
    assert sorted(p.name for p in path.rglob(".*.log.*")) == logs
    assert rows(table.read(), ["id", "v"]) == rows(theirs(path), ["id", "v"]) == [
        ("a", 2.0), ("n0", 1.0), ("n1", 1.0), ("n2", 1.0)]


def test_several_ordering_fields_need_version_9_and_orderable_types(tmp_path):
    """`precombine_field=["a", "b"]` writes `hoodie.table.ordering.fields=a,b` on a v9 table;
    an older version (one precombine field) and a field type we cannot order as Java does are
    refused naming them, before anything is written."""
    import pyarrow as pa
    import pytest

    from airflow_lake.core.errors import InvalidOptionError, UnsupportedFeatureError
    from airflow_lake.core.table import Table

    with pytest.raises(InvalidOptionError, match=r"several ordering fields \['a', 'b'\] need table version 9"):
        Table.create(str(tmp_path / "v8"), name="t", record_key="id", precombine_field="a,b",
                     options={"hoodie.write.table.version": 8})
    assert not (tmp_path / "v8" / ".hoodie" / "hoodie.properties").exists()
    t = Table.create(str(tmp_path / "v9"), name="t", record_key="id", precombine_field=["a", "b"],
                     options={"hoodie.write.table.version": 9})
    assert t.config.props["hoodie.table.ordering.fields"] == "a,b"
    assert "hoodie.table.precombine.field" not in t.config.props
    bad = pa.table({"id": ["x"], "a": [1], "b": pa.array([1], pa.decimal128(10, 2))})
    with pytest.raises(UnsupportedFeatureError, match=r"ordering field 'b' of type decimal128"):
        t.write(bad)
    assert t.timeline.instants == []


@pytest.mark.parametrize(("version", "table_type"), [(9, "MERGE_ON_READ"), (9, "COPY_ON_WRITE"),
                                                     (6, "COPY_ON_WRITE")])
def test_incremental_reads_across_archived_commits(tmp_path, version, table_type):
    """An incremental read whose window starts before the active timeline takes the archived
    commits from the archived timeline (the LSM history on v8/v9): every window reads the same
    rows after archiving as before."""
    import pyarrow as pa

    from airflow_lake.core.table import Table
    from tests.conftest import rows

    path = str(tmp_path / "t")
    t = Table.create(path, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     options={"hoodie.write.table.version": version})
    for ts in range(1, 9):
        t.write(pa.table({"id": [f"k{ts % 3}", f"n{ts}"], "ts": [ts, ts], "v": [f"v{ts}", f"v{ts}"]}))
    if table_type == "MERGE_ON_READ":
        t.run_compaction(t.schedule_compaction(max_delta_commits=1))
        t.write(pa.table({"id": ["k1"], "ts": [99], "v": ["last"]}))
    done = t.timeline.commits().completed().instants
    moments = ["0" * 17] + [(i.completion or i.time) if version >= 8 else i.time for i in done]
    cols = ["id", "ts", "v", "_hoodie_commit_time"]
    before = {(a, b): rows(t.read_incremental(a, b), cols) for a in moments for b in moments if a < b}
    archived = t.archive(min_commits=2, max_commits=3)
    assert len(archived.archived) >= 5
    t = Table.open(path)
    assert t.timeline.commits().completed().first.time > done[0].time
    after = {(a, b): rows(t.read_incremental(a, b), cols) for a in moments for b in moments if a < b}
    assert after == before
    assert any(r for (a, _), r in after.items() if a < t.timeline.commits().completed().first.time)
