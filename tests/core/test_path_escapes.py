"""Paths read from the table (rollback, clean and compaction plans, commit and replacecommit
metadata, markers) never reach a file outside it: a plan naming one is refused with an error
naming the table, the instant and the path, before anything is deleted or the timeline moves.
The S3 forms (another bucket, `..` out of the table's prefix) run in tests/s3."""

from __future__ import annotations

import json
import os
import posixpath

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_lake.core import Table
from airflow_lake.core.errors import PathEscapeError
from airflow_lake.core.paths import inside_path
from airflow_lake.core.storage import Storage
from airflow_lake.core.timeline.instant import Instant, State
from airflow_lake.core.timeline.payloads import (
    CleanerPlan,
    CompactionOperation,
    CompactionPlan,
    RollbackPlan,
    RollbackRequest,
)
from airflow_lake.core.txn.markers import marker_dir
from airflow_lake.core.view import list_partition_files

FAST = {"hoodie.client.heartbeat.interval_in_ms": 50, "hoodie.write.lock.filesystem.expire": 0.005}
VICTIM = "abcd-0_0-1-0_20200101000000000.parquet"  # named like a base file: markers name base files
PLAN_TIME = "20200102000000000"
BATCH = pa.table({"id": ["a", "b"], "ts": [1, 1], "part": ["x", "y"], "v": [1.0, 2.0]})


def local_escapes(table: str, victim_dir: str) -> dict[str, str]:
    """Forms of a path to the folder `victim_dir` next to the local table at `table`."""
    return {"absolute": victim_dir, "dotdot": f"{table}/../{os.path.basename(victim_dir)}",
            "relative": f"../{os.path.basename(victim_dir)}", "file-uri": f"file:{victim_dir}",
            "file-uri-slashes": f"file://{victim_dir}"}


def new_table(uri: str, table_type: str = "COPY_ON_WRITE", storage_options: dict | None = None) -> Table:
    t = Table.create(uri, name="t", table_type=table_type, record_key="id", precombine_field="ts",
                     partition_fields="part", options=FAST, storage_options=storage_options)
    t.write(BATCH, operation="insert")
    return t


def timeline_files(table: Table) -> set[str]:
    return {name for name, _ in table.storage.list_names(".hoodie")}


# -- one attack per plan type: lay the hostile plan, then run what carries it out ------------
def attack_rollback_plan(table: Table, victim: str) -> str:
    """A pending rollback plan: the next write finishes it (`repair_timeline`)."""
    plan = RollbackPlan("20200101000000000", "commit", (RollbackRequest("x", (victim,)),))
    table.storage.write(f".hoodie/{Instant(PLAN_TIME, 'rollback', State.REQUESTED).file_name}", plan.to_bytes())
    table.write(BATCH)
    return PLAN_TIME


def attack_clean_plan(table: Table, victim: str) -> str:
    """A pending clean plan: `clean()` (and `airflow-lake clean`) finishes it."""
    plan = CleanerPlan("KEEP_LATEST_COMMITS", None, "", {"x": (victim,)})
    table.storage.write(f".hoodie/{Instant(PLAN_TIME, 'clean', State.REQUESTED).file_name}", plan.to_bytes())
    table.clean()
    return PLAN_TIME


def attack_compaction_partition(table: Table, victim: str) -> str:
    """A compaction plan whose partition is the victim's folder: executing it would write a
    base file there (and read the files it names from there)."""
    folder = posixpath.dirname(victim)
    op = CompactionOperation(folder, "abcd-0", "20200101000000000", None, (".abcd-0_20200101000000000.log.1_0-1-0",))
    table.storage.write(f".hoodie/{Instant(PLAN_TIME, 'compaction', State.REQUESTED).file_name}",
                        CompactionPlan((op,)).to_bytes())
    table.run_compaction(PLAN_TIME)
    return PLAN_TIME


def attack_compaction_file(table: Table, victim: str) -> str:
    """A compaction plan (version 1 plans record full paths) whose base file lies outside."""
    from airflow_lake.core.timeline import avro_schemas
    from airflow_lake.core.timeline.metadata import read_avro, write_avro

    op = CompactionOperation("x", "abcd-0", "20200101000000000", posixpath.basename(victim), ())
    record = read_avro(CompactionPlan((op,)).to_bytes())
    record["operations"][0]["dataFilePath"] = victim
    table.storage.write(f".hoodie/{Instant(PLAN_TIME, 'compaction', State.REQUESTED).file_name}",
                        write_avro(avro_schemas.COMPACTION_PLAN, record))
    table.run_compaction(PLAN_TIME)
    return PLAN_TIME


def _rewrite_stats(table: Table, instant: Instant, victim: str) -> None:
    """Point the first write stat of the completed `instant` at `victim`."""
    path = f".hoodie/{instant.file_name}"
    meta = json.loads(table.storage.read(path))
    stats = next(s for ss in meta["partitionToWriteStats"].values() for s in ss)
    stats["path"] = victim
    table.storage.write(path, json.dumps(meta).encode())


def attack_commit_metadata(table: Table, victim: str) -> str:
    """Commit metadata whose write stat names the victim: rolling the commit back deletes the
    files its stats name."""
    last = table.write(BATCH).instant
    _rewrite_stats(table, table.timeline.get(last), victim)
    table.rollback(last)
    return last


def attack_replacecommit_metadata(table: Table, victim: str) -> str:
    last = table.write(BATCH, operation="insert_overwrite").instant
    instant = table.timeline.get(last)
    assert instant.action == "replacecommit"
    _rewrite_stats(table, instant, victim)
    table.rollback(last)
    return last


def attack_marker(table: Table, victim: str) -> str:
    """A failed (heartbeat expired) write whose timeline-server marker file names the victim:
    the next write rolls it back, deleting what its markers name."""
    inflight = Instant(PLAN_TIME, "commit", State.INFLIGHT)
    table.storage.write(f".hoodie/{inflight.to(State.REQUESTED).file_name}", b"")
    table.storage.write(f".hoodie/{inflight.file_name}", b"")
    table.storage.write(f"{marker_dir(PLAN_TIME)}/MARKERS0", f"{victim}.marker.CREATE\n".encode())
    table.write(BATCH)
    return PLAN_TIME


ATTACKS = {"rollback-plan": attack_rollback_plan, "clean-plan": attack_clean_plan,
           "compaction-partition": attack_compaction_partition, "compaction-file": attack_compaction_file,
           "commit-metadata": attack_commit_metadata, "replacecommit-metadata": attack_replacecommit_metadata,
           "marker": attack_marker}
TABLE_TYPE = {"compaction-partition": "MERGE_ON_READ", "compaction-file": "MERGE_ON_READ"}


def check_refused(table: Table, attack: str, victim_path: str, survivors: dict) -> None:
    """Run `attack` naming `victim_path`: a PathEscapeError naming the table, the instant and
    the path; `survivors` (a name -> check) all still hold; the timeline did not move."""
    before = timeline_files(table)
    with pytest.raises(PathEscapeError) as e:
        instant = ATTACKS[attack](table, victim_path)
    message = str(e.value)
    named = posixpath.dirname(victim_path) if attack == "compaction-partition" else victim_path
    assert table.storage.uri in message and repr(named) in message, message
    instant = PLAN_TIME if attack not in ("commit-metadata", "replacecommit-metadata") else \
        max(i.time for i in table.timeline.completed().instants)
    assert f"instant {instant}" in message, message
    for what, holds in survivors.items():
        assert holds(), what
    if attack in ("rollback-plan", "clean-plan", "compaction-partition", "compaction-file"):
        laid = Instant(PLAN_TIME, attack.split("-")[0], State.REQUESTED).file_name
        assert {n for n in timeline_files(table) - before if not n.startswith(".")} == {laid}


@pytest.mark.parametrize("form", ["absolute", "dotdot", "relative", "file-uri", "file-uri-slashes"])
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_plan_naming_a_file_outside_the_table_is_refused(tmp_path, attack, form):
    check_refused_locally(tmp_path, attack, lambda uri, victim_dir: f"{local_escapes(uri, victim_dir)[form]}/{VICTIM}")


def check_refused_locally(tmp_path, attack: str, victim_of) -> None:
    """`check_refused` on a local table next to a victim folder; `victim_of(uri, victim_dir)`
    lays what the attack needs and returns the recorded path it names."""
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    (victim_dir / VICTIM).write_bytes(b"precious")
    uri = str(tmp_path / "table")
    table = new_table(uri, TABLE_TYPE.get(attack, "COPY_ON_WRITE"))
    check_refused(table, attack, victim_of(uri, str(victim_dir)), {
        "the victim survives": lambda: (victim_dir / VICTIM).read_bytes() == b"precious",
        "nothing new in the victim's folder": lambda: os.listdir(victim_dir) == [VICTIM]})


@pytest.mark.parametrize("path", ["../victim", "x/../../victim", "/etc", "x/../..", ".."])
def test_storage_refuses_a_relative_path_that_escapes_the_root(tmp_path, path):
    storage = Storage(str(tmp_path / "table"))
    for call in (storage.exists, storage.read, storage.delete, storage.list, storage.list_names):
        with pytest.raises(PathEscapeError, match="resolves outside"):
            call(path)
    with pytest.raises(PathEscapeError):
        storage.write(path + "/f", b"x")
    assert storage.full("x/./y/../z") == f"{storage.root}/x/z"


def test_partition_arguments_that_escape_are_refused(tmp_path):
    from airflow_lake.cli.app import cli

    other = tmp_path / "other"
    other.mkdir()
    (other / VICTIM).write_bytes(b"precious")
    (other / ".hoodie_partition_metadata").write_bytes(b"")
    uri = str(tmp_path / "table")
    table = new_table(uri)
    result = CliRunner().invoke(cli, ["files", uri, "--partition", "../other"])
    assert result.exit_code != 0
    assert "../other" in result.output and "outside" in result.output, result.output
    assert VICTIM not in result.output
    for partition in ("../other", str(other), f"{uri}/../other"):
        with pytest.raises(PathEscapeError, match="outside"):
            list_partition_files(table.storage, [partition])
    assert table.read(filters=[("part", "=", "../other")]).num_rows == 0  # filters build no path


def test_recorded_paths_on_a_gcs_table_stay_in_its_bucket_and_prefix():
    import pyarrow.fs as pafs

    storage = Storage("bucket/lake/t", pafs.GcsFileSystem(anonymous=True))
    storage.uri = "gs://bucket/lake/t"
    inside = {"gs://bucket/lake/t/p/f": "p/f", "gcs://bucket/lake/t/p/./f": "p/f", "p/f": "p/f",
              "bucket/lake/t/p/f": "p/f"}
    outside = ["gs://other/lake/t/p/f", "gs://bucket/lake/t/../x/f", "gs://bucket/lake/tt/f", "s3://bucket/lake/t/p/f",
               "file:/bucket/lake/t/p/f", "/bucket/lake/t/p/f", "../x/f", "p/../../x/f"]
    assert {p: inside_path(storage, p) for p in inside} == inside
    assert [p for p in outside if inside_path(storage, p) is not None] == []


SEGMENTS = st.lists(st.sampled_from(["..", ".", "", "t", "table", "x", "victim", "..."]), min_size=1, max_size=7)
PREFIXES = st.sampled_from(["", "/", "{root}/", "{root}/../", "file:", "file://", "file:///", "file:{root}/",
                            "file://localhost{root}/", "file://host{root}/", "s3://", "s3a://b{root}/", "hdfs://"])


@settings(max_examples=300, deadline=None)
@given(prefix=PREFIXES, segments=SEGMENTS)
def test_no_recorded_path_resolves_outside_the_root(prefix, segments):
    root = "/lake/a/table"
    storage = Storage(root)
    path = prefix.format(root=root) + "/".join(segments)
    rel = inside_path(storage, path)
    if rel is not None:
        full = posixpath.normpath(storage.full(rel))
        assert full == root or full.startswith(root + "/"), (path, rel, full)
    try:
        full = posixpath.normpath(storage.full(path))
    except PathEscapeError:
        return
    assert full == root or full.startswith(root + "/"), (path, full)


# -- symbolic links inside the table pointing out of it ------------------------------------
def lay_link(uri: str, victim_dir: str, form: str) -> str:
    """Make a symbolic link inside the table at `uri` leading to `victim_dir` (or to the victim
    file) and return the recorded path that goes through it to the victim."""
    if form == "file":  # a file in a folder of the table that is a link to the victim
        os.mkdir(f"{uri}/z")
        os.symlink(f"{victim_dir}/{VICTIM}", f"{uri}/z/{VICTIM}")
        return f"{uri}/z/{VICTIM}"
    folder = {"hoodie-folder": ".hoodie/.aux/l", "partition-folder": "evil", "partition-folder-relative": "evil"}[form]
    os.symlink(victim_dir, f"{uri}/{folder}")
    return f"{folder}/{VICTIM}" if form.endswith("relative") else f"{uri}/{folder}/{VICTIM}"


LINK_FORMS = ["hoodie-folder", "partition-folder", "partition-folder-relative", "file"]


# a partition is a folder: the file form does not apply to a compaction plan's partition
LINK_ATTACKS = [(a, f) for a in sorted(ATTACKS) for f in LINK_FORMS if (a, f) != ("compaction-partition", "file")]


@pytest.mark.parametrize(("attack", "form"), LINK_ATTACKS)
def test_a_plan_reaching_outside_through_a_symbolic_link_is_refused(tmp_path, attack, form):
    check_refused_locally(tmp_path, attack, lambda uri, victim_dir: lay_link(uri, victim_dir, form))


def test_storage_refuses_a_path_through_a_symbolic_link_out_of_the_root(tmp_path):
    victim_dir = tmp_path / "victim"
    victim_dir.mkdir()
    (victim_dir / VICTIM).write_bytes(b"precious")
    storage = Storage(str(tmp_path / "table"))
    storage.write("x/f", b"inside")
    os.symlink(victim_dir, tmp_path / "table" / "l")
    os.symlink(victim_dir / VICTIM, tmp_path / "table" / "x" / "linked")
    for path in ("l", f"l/{VICTIM}", "x/linked", "l/new/f"):
        for call in (storage.exists, storage.read, storage.delete, storage.list):
            with pytest.raises(PathEscapeError, match="symbolic link"):
                call(path)
        with pytest.raises(PathEscapeError, match="symbolic link"):
            storage.write(path, b"x")
        with pytest.raises(PathEscapeError, match="symbolic link"):
            storage.create(path, b"x")
    assert sorted(os.listdir(victim_dir)) == [VICTIM] and (victim_dir / VICTIM).read_bytes() == b"precious"
    assert inside_path(storage, f"{storage.root}/l/{VICTIM}") is None and inside_path(storage, "x/f") == "x/f"


def test_a_table_whose_root_is_a_symbolic_link_keeps_working(tmp_path):
    from tests.conftest import hudi_read, rows

    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    uri = str(tmp_path / "link" / "table")
    table = Table.create(uri, name="t", table_type="MERGE_ON_READ", record_key="id", precombine_field="ts",
                         partition_fields="part", options=FAST)
    table.write(BATCH, operation="insert")
    table.write(pa.table({"id": ["a"], "ts": [2], "part": ["x"], "v": [5.0]}))
    planned = table.schedule_compaction(max_delta_commits=1)
    assert planned is not None
    table.run_compaction(planned)
    for ts in (2, 3):
        table.write(pa.table({"id": ["b"], "ts": [ts], "part": ["y"], "v": [6.0]}))
    assert table.clean(retained=1).total_files > 0
    expected = [("a", "x", 5.0), ("b", "y", 6.0)]
    assert rows(Table.open(uri).read(), ["id", "part", "v"]) == expected
    assert rows(hudi_read(uri), ["id", "part", "v"]) == expected
