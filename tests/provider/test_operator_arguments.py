"""Operators check their rendered arguments before submitting anything (issue 23, item 17):
each bad value fails the task naming the argument and the value (a secret's value never),
under a real `dag.test()`; no spark-submit is on PATH, and the table is untouched."""

from __future__ import annotations

import json
import uuid

import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.table import Table
from tests.provider.conftest import batch
from tests.provider.test_operators import load_dag, states

SECRET = "SeCrEt-" + uuid.uuid4().hex
OTHER = "OtHeR-" + uuid.uuid4().hex


def test_bad_rendered_arguments_name_the_argument_and_the_value(airflow_db, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_PW", json.dumps({"conn_type": "lake", "password": SECRET}))
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    new = str(tmp_path / "new")
    common = f"table_path={path!r}, asset=False"
    dag = load_dag(airflow_db, "lake_bad_rendered", f"""
        UpsertOperator(task_id="partitions", table_path={new!r}, asset=False, source={path!r},
                       create_if_missing=True, record_key="id", partition_fields=5)
        UpsertOperator(task_id="table_options", {common}, source={path!r},
                       table_options="{{{{ {{'hoodie.parquet.small.file.limit': 0}} }}}}")
        UpsertOperator(task_id="storage_options", {common}, source={path!r},
                       storage_options="{{{{ {{'aws_secret_access_key': '{SECRET}'}} }}}}")
        UpsertOperator(task_id="nested_secret", {common}, source={path!r},
                       storage_options={{"aws_secret_access_key": {{"v": {SECRET!r}}}}})
        UpsertOperator(task_id="source", {common}, source=["a", "b"])
        UpsertOperator(task_id="record_key", table_path={new!r}, asset=False, source={path!r},
                       create_if_missing=True, record_key={{"a": 1}})
        UpsertOperator(task_id="misplaced", {common}, source={path!r}, table_options={{"region": "x"}})
        SavepointOperator(task_id="comments", {common}, comments=["a"])
        CleanOperator(task_id="spark_conf", {common}, spark_conf="spark.x=1")
        UpsertOperator(task_id="contradiction", table_path="s3://b/t", asset=False, source="s3://b/src",
                       lake_conn_id="lake_pw", storage_options={{"aws_secret_access_key": {OTHER!r}}})
    """)
    dr = dag.test()
    assert set(states(dr).values()) == {"failed"}
    out = capfd.readouterr()
    text = out.out + out.err
    for message in [
        "UpsertOperator partitions: table {new}: partition_fields must be a field name or a list of field names, got 5",
        # table options may hold Hudi's own credentials (hoodie.aws.secret.key): a string is not shown
        "UpsertOperator table_options: table {path}: table_options must be a dict, got a str",
        "UpsertOperator storage_options: table {path}: storage_options must be a dict, got a str",
        "UpsertOperator nested_secret: table {path}: storage_options['aws_secret_access_key'] must be a string, "
        "number, boolean or list, got dict a secret",
        "UpsertOperator source: table {path}: source must be a string, got list ['a', 'b']",
        "UpsertOperator record_key: table {new}: record_key must be a field name or a list of field names, "
        "got {{'a': 1}}",
        "UpsertOperator misplaced: table {path}: table_options key 'region' is not a hoodie.* or airflow_lake.* key",
        "SavepointOperator comments: table {path}: comments must be a string, got list ['a']",
        "CleanOperator spark_conf: table {path}: spark_conf must be a dict, got str 'spark.x=1'",
        # an operator's secret against its connection's: both named, neither value shown
        "table s3://b/t: storage option aws_secret_access_key=<secret> contradicts secret_key (<secret>)",
    ]:
        assert message.format(new=new, path=path) in text, message
    assert SECRET not in text and OTHER not in text
    assert len(t.timeline.instants) == 1 and not (tmp_path / "new").exists()


def test_operators_take_every_spelling_hudi_accepts(tmp_path):
    """The operators take the names the CLI and Hudi take (one vocabulary), in any case, and
    hand the jobs the canonical name."""
    from airflow_lake.operators import (
        CleanOperator,
        CompactionExecuteOperator,
        CompactionScheduleOperator,
        UpsertOperator,
    )

    path = str(tmp_path / "t")
    for spelling in ("MOR", "mor", "merge_on_read", "MERGE_ON_READ"):
        op = UpsertOperator(task_id="u", table_path=path, source="s", table_type=spelling, operation="UPSERT")
        assert (op.table_type, op.operation) == ("MERGE_ON_READ", "upsert")
    assert UpsertOperator(task_id="u", table_path=path, source="s", table_type="cow").table_type == "COPY_ON_WRITE"
    assert CleanOperator(task_id="c", table_path=path, policy="keep_latest_by_hours").job_args()[:2] == \
        ["--policy", "KEEP_LATEST_BY_HOURS"]
    assert CompactionScheduleOperator(task_id="s", table_path=path, strategy="num_or_time").job_args()[:2] == \
        ["--strategy", "NUM_OR_TIME"]
    assert CompactionExecuteOperator(task_id="e", table_path=path, order="lifo").order == "LIFO"
    # a refusal lists every spelling the operator takes, as the core's does
    with pytest.raises(InvalidOptionError) as refused:
        UpsertOperator(task_id="u", table_path=path, source="s", table_type="merge-on-read")
    assert all(s in str(refused.value) for s in ("COPY_ON_WRITE", "MERGE_ON_READ", "COW", "MOR"))


def test_upsert_passes_reader_options_and_a_schema_to_the_job(tmp_path):
    from airflow_lake.operators import UpsertOperator

    op = UpsertOperator(task_id="u", table_path=str(tmp_path / "new"), source="s.csv", create_if_missing=True,
                        record_key="id", source_options={"sep": ";", "header": False},
                        source_schema="id STRING, dt STRING")
    args = op.job_args()
    assert args[args.index("--source-option"):args.index("--source-schema") + 2] == [
        "--source-option", "sep=;", "--source-option", "header=false", "--source-schema", "id STRING, dt STRING"]
    assert {"source_options", "source_schema"} <= set(UpsertOperator.template_fields)
    bad = UpsertOperator(task_id="u", table_path=str(tmp_path / "new"), source="s.csv", create_if_missing=True,
                         record_key="id", source_options="sep=;")
    with pytest.raises(InvalidOptionError, match="source_options must be a dict, got str"):
        bad.job_args()


def test_a_savepoint_without_an_instant_takes_the_latest_completed_commit(tmp_path):
    """`SavepointOperator` without `instant` savepoints the latest completed commit when it runs
    (its job gets `--instant` of it; it once failed: `'Instant' object is not callable`); on a
    table without one it says so, naming the task and the table."""
    import pyarrow as pa

    from airflow_lake.core import Table
    from airflow_lake.core.errors import InstantNotFoundError
    from airflow_lake.operators import SavepointOperator

    path = str(tmp_path / "t")
    table = Table.create(path, name="t", record_key="id")
    op = SavepointOperator(task_id="sp", table_path=path, comments="before the backfill")
    with pytest.raises(InstantNotFoundError, match=f"SavepointOperator sp: table .*{tmp_path.name}.* has no completed"):
        op.job_args()
    table.write(pa.table({"id": ["a"]}), operation="insert")
    last = table.write(pa.table({"id": ["b"]}), operation="insert").instant
    assert op.job_args() == ["--instant", last, "--comments", "before the backfill"]


@pytest.mark.parametrize("make, fragment", [
    (lambda ops, p: ops.UpsertOperator(task_id="u", table_path=p, source=p, create_if_missing="yes",
                                       record_key="id"), "create_if_missing must be True or False, got 'yes'"),
    (lambda ops, p: ops.UpsertOperator(task_id="u", table_path=p, source=p, hive_style_partitioning=1),
     "hive_style_partitioning must be True or False, got 1"),
    (lambda ops, p: ops.CleanOperator(task_id="c", table_path=p, dry_run="maybe"), "dry_run must be True or False"),
    (lambda ops, p: ops.CompactionScheduleOperator(task_id="s", table_path=p, skip_if_no_plan="no"),
     "skip_if_no_plan must be True or False, got 'no'"),
    (lambda ops, p: ops.CompactionScheduleOperator(task_id="s", table_path=p, max_delta_commits=-3),
     "max_delta_commits must be a whole number of at least 1, got -3"),
    (lambda ops, p: ops.ArchiveOperator(task_id="a", table_path=p, fast_start="fast"), "fast_start must be True"),
    (lambda ops, p: ops.InstantSensor(task_id="i", table_path=p, min_new_instants="x"),
     "min_new_instants must be a whole number of at least 1, got 'x'"),
    (lambda ops, p: ops.InstantSensor(task_id="i", table_path=p, actions=["comit"]),
     "actions: unknown timeline action 'comit'"),
    (lambda ops, p: ops.InstantSensor(task_id="i", table_path=p, retry_timeout="later"),
     "retry_timeout must be a number of seconds"),
    (lambda ops, p: ops.InstantSensor(task_id="i", table_path=p, wait_for_table="false "),
     None),  # text of a boolean is taken (a template renders one so)
])
def test_arguments_given_at_parse_time_are_checked_naming_the_task_and_the_table(tmp_path, make, fragment):
    import airflow_lake.operators as operators
    import airflow_lake.sensors as sensors

    class Ops:  # the operators and the sensor, by name
        def __getattr__(self, name):
            return getattr(operators, name, None) or getattr(sensors, name)

    path = str(tmp_path / "t")
    if fragment is None:
        assert make(Ops(), path).wait_for_table is False
        return
    with pytest.raises(InvalidOptionError) as info:
        make(Ops(), path)
    assert fragment in str(info.value) and f"table {path}" in str(info.value)


def test_text_flags_are_taken_as_the_booleans_they_spell(tmp_path):
    from airflow_lake.operators import CleanOperator, CompactionScheduleOperator, UpsertOperator

    path = str(tmp_path / "t")
    upsert = UpsertOperator(task_id="u", table_path=path, source=path, create_if_missing="False",
                            hive_style_partitioning="false")
    assert (upsert.create_if_missing, upsert.hive_style_partitioning) == (False, False)
    clean = CleanOperator(task_id="c", table_path=path, dry_run="false")
    assert clean.dry_run is False and clean.asset in clean.outlets  # a real clean: it declares its outlet
    assert CleanOperator(task_id="d", table_path=path, dry_run="TRUE").asset is None
    assert CompactionScheduleOperator(task_id="s", table_path=path, skip_if_no_plan="false").skip_if_no_plan is False


def test_rendered_timeouts_and_spark_args_are_checked_before_submitting(airflow_db, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("PATH", "/nonexistent")
    path = str(tmp_path / "t")
    t = Table.create(path, name="t", record_key="id", precombine_field="ts")
    t.write(batch([1]))
    dag = load_dag(airflow_db, "lake_bad_timeouts", f"""
        CleanOperator(task_id="wait", table_path={path!r}, asset=False, wait_timeout="soon")
        CleanOperator(task_id="args", table_path={path!r}, asset=False, spark_args="x")
        TableHealthOperator(task_id="health", table_path={path!r}, thresholds={{"stale_instants": -1}})
    """)
    dr = dag.test()
    assert states(dr) == {"wait": "failed", "args": "failed", "health": "failed"}
    text = "".join(capfd.readouterr())
    for message in [
        f"CleanOperator wait: table {path}: wait_timeout must be a number of seconds, at least 0, got 'soon'",
        f"CleanOperator args: table {path}: spark_args must be a dict, got str 'x'",
        "thresholds['stale_instants'] must be a number of at least 0, got -1"]:
        assert message in text, message
    assert "is 0, above -1" not in text  # no false alarm
    assert len(t.timeline.instants) == 1
