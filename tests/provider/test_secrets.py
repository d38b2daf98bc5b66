"""Credentials never reach a command line, a log line or an error message (issue 23, items 2
and 3): secret storage options travel to a job in its environment, and every message that
names an option names a secret one without its value."""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_lake.core.errors import InvalidOptionError, LakeError
from airflow_lake.core.objectstore import is_secret_option, s3_settings
from airflow_lake.core.storage import open_storage
from airflow_lake.core.table import Table
from tests.conftest import hudi_read, rows
from tests.provider.conftest import batch

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SECRET = "SeCrEt-" + uuid.uuid4().hex
TOKEN = "ToKeN-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory):
    pytest.importorskip("moto", reason="needs moto[server] (the dev extra)")
    from tests.s3.server import moto_server

    with moto_server(str(tmp_path_factory.mktemp("moto") / "moto.log")) as url:
        yield url


def scan_command_lines(needles: tuple[str, ...], stop: threading.Event, seen: dict[str, list[str]]) -> None:
    """Until `stop`: every process's command line; those holding a needle go to seen['leaks']."""
    while not stop.wait(0.05):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(n in line for n in needles):
                seen["leaks"].append(line)
            elif "SparkSubmit" in line or "upsert.py" in line:
                seen["spark"].append(line)


def test_a_spark_job_gets_secrets_without_any_command_line_showing_them(s3_endpoint, tmp_path, monkeypatch, capfd):
    from tests.s3.server import REGION, create_bucket

    bucket = f"lake-{uuid.uuid4().hex[:12]}"
    create_bucket(s3_endpoint, bucket)
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    options = {"aws_region": REGION, "aws_endpoint_url": s3_endpoint, "aws_allow_http": "true",
               "aws_session_token": TOKEN}
    conn = {"conn_type": "lake", "login": "testing", "password": SECRET, "extra": {"storage_options": options}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_SECRET", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    storage_options = {**options, "aws_access_key_id": "testing", "aws_secret_access_key": SECRET}
    landing = open_storage(f"s3://{bucket}/landing", storage_options)
    with landing.fs.open_output_stream(landing.full("part-0.parquet")) as f:
        pq.write_table(batch(list(range(10))), f)
    table = f"s3://{bucket}/lake/t"

    from airflow_lake.hooks import LakeHook

    stop, seen = threading.Event(), {"leaks": [], "spark": []}
    scanner = threading.Thread(target=scan_command_lines, args=((SECRET, TOKEN), stop, seen), daemon=True)
    scanner.start()
    try:
        result = LakeHook("lake_secret").submit_job(
            "upsert", table, ["--source", f"s3://{bucket}/landing", "--create-if-missing", "--record-key", "id",
                              "--precombine-field", "ts"], token="d/r/secret/-1",
            spark_conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    finally:
        stop.set()
        scanner.join()
    assert seen["leaks"] == []
    assert any("SparkSubmit" in line for line in seen["spark"]) and any("upsert.py" in line for line in seen["spark"])
    log = "".join(capfd.readouterr())  # the task log: the hook's command line and the job's output
    assert "Spark-Submit cmd" in log and SECRET not in log and TOKEN not in log
    assert result["inserts"] == 10
    # the driver and the executors reached S3: the rows are there, hudi-rs agrees
    assert rows(hudi_read(table, storage_options), ["id", "ts", "value"]) == \
        rows(batch(list(range(10))), ["id", "ts", "value"])


def test_the_hook_and_the_cli_put_secrets_in_the_environment_only(tmp_path, monkeypatch):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.spark import job_path
    from airflow_lake.spark.job import execute, parser
    from airflow_lake.spark.options import SECRET_OPTIONS_ENV

    extra = {"storage_options": {"aws_region": "eu-west-1", "aws_session_token": TOKEN}}
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_ENV", json.dumps({"conn_type": "lake", "login": "AKIA-id",
                                                            "password": SECRET, "extra": extra}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_ENV", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    submission = LakeHook("lake_env").submission("clean", str(tmp_path / "t"), spark_conn_id="spark_env",
                                                 table_options={"hoodie.x.password": "pw-" + SECRET})
    command = submission.spark_hook()._build_spark_submit_command(str(job_path("clean")))
    text = " ".join(command)
    assert SECRET not in text and TOKEN not in text and "AKIA-id" not in text
    assert "--option aws_region=\"eu-west-1\"" in text
    env = json.loads(submission.env[SECRET_OPTIONS_ENV])
    assert env == {"aws_session_token": json.dumps(TOKEN), "access_key": '"AKIA-id"',
                   "secret_key": json.dumps(SECRET), "hoodie.x.password": "pw-" + SECRET}
    # the job takes them from its environment (and drops the variable), typed as --option values are
    monkeypatch.setenv(SECRET_OPTIONS_ENV, submission.env[SECRET_OPTIONS_ENV])
    got = execute(parser("probe", None), lambda run: {"storage": run.storage_options, "table": run.table_options},
                  ["--table", "/x", "--option", 'region="eu-west-1"'])
    assert got["storage"] == {"region": "eu-west-1", "aws_session_token": TOKEN, "access_key": "AKIA-id",
                              "secret_key": SECRET}
    assert got["table"] == {"hoodie.x.password": "pw-" + SECRET}
    assert SECRET_OPTIONS_ENV not in os.environ


def recording_spark_submit(tmp_path: Path, monkeypatch) -> Path:
    """The CLI's spark-submit replaced by a script writing its argv and the secret options'
    environment variable to the JSON file returned (and printing a `clean` result)."""
    from airflow_lake.cli import spark as cli_spark
    from airflow_lake.spark.options import SECRET_OPTIONS_ENV

    record = tmp_path / "record.json"
    fake = tmp_path / "spark-submit"
    fake.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    f"json.dump({{'argv': sys.argv, 'env': os.environ.get({SECRET_OPTIONS_ENV!r})}}, "
                    f"open({str(record)!r}, 'w'))\nprint(json.dumps({{'job': 'clean', 'instant': None}}))\n")
    fake.chmod(0o700)
    monkeypatch.setattr(cli_spark, "spark_submit_binary", lambda: fake)
    return record


def test_the_cli_passes_secrets_in_the_environment(tmp_path, monkeypatch):
    """`airflow-lake clean --spark -o ...`: spark-submit (here a script recording what it got)
    sees the secret in its environment, never in its arguments."""
    from airflow_lake.cli import spark as cli_spark

    record = recording_spark_submit(tmp_path, monkeypatch)
    result = cli_spark.submit("clean", str(tmp_path / "t"), [], {"aws_secret_access_key": SECRET, "region": "x"},
                              master=None, conf=())
    assert result == {"job": "clean", "instant": None}
    got = json.loads(record.read_text())
    assert SECRET not in " ".join(got["argv"]) and "region=x" in got["argv"]
    assert json.loads(got["env"]) == {"aws_secret_access_key": SECRET}


# -- item 3: messages name secret options, never their values -------------------------------
def test_contradicting_secret_options_name_the_options_only(tmp_path):
    other = "OtHeR-" + uuid.uuid4().hex
    cases = [
        {"secret_key": SECRET, "aws_secret_access_key": other},
        {"aws_session_token": TOKEN, "token": other},
        {"access_key": SECRET, "AWS_ACCESS_KEY_ID": other},
        {"aws_allow_http": SECRET[:3], "aws_secret_access_key": SECRET},
    ]
    for options in cases[:3]:
        with pytest.raises(InvalidOptionError, match="contradicts") as caught:
            s3_settings("s3://b/t", options)
        assert SECRET not in str(caught.value) and other not in str(caught.value) and TOKEN not in str(caught.value)
        first, second = list(options)
        assert first in str(caught.value) and second in str(caught.value)
    # a value that is not secret is still shown
    with pytest.raises(InvalidOptionError, match="aws_region='a' contradicts region \\('b'\\)"):
        s3_settings("s3://b/t", {"region": "b", "aws_region": "a"})
    # through the API: Table.open
    with pytest.raises(LakeError, match="contradicts") as caught:
        Table.open("s3://b/t", storage_options={"secret_key": SECRET, "aws_secret_access_key": other})
    assert SECRET not in str(caught.value) and other not in str(caught.value)
    assert all(is_secret_option(k) for k in ("secret_key", "aws_session_token", "password", "sas_token",
                                              "google_service_account_key", "azure_storage_account_key"))
    assert not any(is_secret_option(k) for k in ("region", "aws_endpoint_url", "allow_http",
                                                  "hoodie.table.recordkey.fields"))


def test_every_alias_of_every_secret_setting_is_hidden_in_contradictions():
    from airflow_lake.core.objectstore import _GCS_KEYS, _S3_KEYS, gcs_options

    other = "OtHeR-" + uuid.uuid4().hex
    checked = 0
    for keys, parse in ((_S3_KEYS, s3_settings), (_GCS_KEYS, gcs_options)):
        for setting in {v for k, v in keys.items() if is_secret_option(k)}:
            names = [k for k, v in keys.items() if v == setting]
            for first in names:
                for second in names:
                    if first == second:
                        continue
                    assert is_secret_option(first) and is_secret_option(second)
                    with pytest.raises(InvalidOptionError, match="contradicts") as caught:
                        parse("s3://b/t", {first: SECRET, second: other})
                    assert SECRET not in str(caught.value) and other not in str(caught.value)
                    checked += 1
    assert checked >= 20
    # the demo's banner decides by the same rule
    from airflow_lake.demo import shown_options

    banner = shown_options({"aws_secret_access_key": SECRET, "token": SECRET, "aws_access_key_id": SECRET,
                            "aws_region": "x"})
    assert SECRET not in banner and "aws_region=x" in banner and "aws_access_key_id=***" in banner


def test_the_jobs_error_line_and_traceback_hide_secrets(caplog):
    from airflow_lake.spark.job import JobError, execute, parser

    def body(run):
        raise RuntimeError(f"boom with {run.storage_options['aws_secret_access_key']} inside")

    with pytest.raises(JobError) as caught:
        execute(parser("probe", None), body, ["--table", "/x", "--option", f"aws_secret_access_key={SECRET}"])
    assert "boom with <secret> inside" in str(caught.value) and SECRET not in str(caught.value)
    assert "unexpected failure" in caplog.text and SECRET not in caplog.text


def test_the_cli_and_the_operator_errors_hide_secrets(tmp_path, monkeypatch, capfd):
    from click.testing import CliRunner

    from airflow_lake.cli.app import cli

    other = "OtHeR-" + uuid.uuid4().hex
    path = str(tmp_path / "t")
    Table.create(path, name="t", record_key="id", precombine_field="ts").write(batch([1]))
    out = CliRunner().invoke(cli, ["timeline", "s3://b/t", "-o", f"secret_key={SECRET}",
                                    "-o", f"aws_secret_access_key={other}"])
    assert out.exit_code != 0 and "contradicts" in out.output
    assert SECRET not in out.output and other not in out.output

    # the hook (an operator's storage_options over a connection's password)
    from airflow_lake.hooks import LakeHook

    monkeypatch.setenv("AIRFLOW_CONN_LAKE_S3", json.dumps({"conn_type": "lake", "password": SECRET}))
    hook = LakeHook("lake_s3", {"aws_secret_access_key": other, "aws_region": "x"})
    with pytest.raises(LakeError, match="contradicts") as caught:
        hook.storage("s3://b/t")
    assert SECRET not in str(caught.value) and other not in str(caught.value)
