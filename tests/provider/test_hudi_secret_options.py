"""Apache Hudi's own credential options (`hoodie.aws.*`, the Datadog API key, the HTTP commit
callback's API key, the Hive sync password...) are secrets like the storage options' (issue
23, items 2 and 3): the hook and the CLI keep them off spark-submit's command line, and no
message shows their values; `hoodie.*` options naming record, partition or lock keys stay
ordinary and on the command line. No Spark: spark-submit's command is built, not run."""

from __future__ import annotations

import json
import uuid

import pytest

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.objectstore import is_secret_option, shown
from tests.provider.test_secrets import recording_spark_submit

# Hudi's documented credentials (HoodieAWSConfig, HoodieMetricsDatadogConfig,
# HoodieWriteCommitCallbackConfig, HiveSyncConfig, Kafka/Pulsar sources) and spellings of them
HUDI_SECRETS = (
    "hoodie.aws.access.key", "hoodie.aws.secret.key", "hoodie.aws.session.token",
    "hoodie.metrics.datadog.api.key", "hoodie.write.commit.callback.http.api.key",
    "hoodie.datasource.hive_sync.password", "hoodie.datasource.hive_sync.jdbcurl",
    "hoodie.write.commit.callback.http.custom.headers", "hoodie.streamer.source.pulsar.auth.token",
    "hoodie.streamer.source.kafka.ssl.truststore.password", "hoodie.streamer.schemaprovider.registry.apikey",
    "hoodie.metrics.pushgateway.api_key", "hoodie.gcp.credentials.json", "airflow_lake.some.secret",
)
ORDINARY = (
    "hoodie.table.recordkey.fields", "hoodie.datasource.write.recordkey.field", "hoodie.table.keygenerator.class",
    "hoodie.datasource.write.keygenerator.type", "hoodie.bucket.index.hash.field",
    "hoodie.datasource.write.partitionpath.field", "hoodie.write.lock.dynamodb.partition_key",
    "hoodie.write.lock.zookeeper.lock_key", "hoodie.keygen.timebased.timestamp.type",
    "hoodie.metrics.datadog.api.site", "hoodie.datasource.hive_sync.username", "hoodie.aws.role.arn",
    "hoodie.write.lock.dynamodb.region", "hoodie.index.type",
)


def values(keys: tuple[str, ...]) -> dict[str, str]:
    """A value of its own per key, found in a text only if that key's value was printed."""
    return {key: f"V{n}-{uuid.uuid4().hex}" for n, key in enumerate(keys)}


def test_hudi_credentials_are_secrets_and_hudi_key_fields_are_not():
    assert [k for k in HUDI_SECRETS if not is_secret_option(k) or not is_secret_option(k.upper())] == []
    assert [k for k in ORDINARY if is_secret_option(k)] == []
    for key, value in values(HUDI_SECRETS).items():
        assert value not in shown(key, value)


def test_the_hook_keeps_hudi_credentials_off_the_command_line(tmp_path, monkeypatch):
    from airflow_lake.hooks import LakeHook
    from airflow_lake.spark import job_path
    from airflow_lake.spark.options import SECRET_OPTIONS_ENV

    secret, ordinary = values(HUDI_SECRETS), values(ORDINARY)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_HUDI", json.dumps({"conn_type": "lake"}))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_HUDI", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    submission = LakeHook("lake_hudi").submission("clean", str(tmp_path / "t"), spark_conn_id="spark_hudi",
                                                  table_options={**secret, **ordinary})
    text = " ".join(submission.spark_hook()._build_spark_submit_command(str(job_path("clean"))))
    assert [k for k, v in secret.items() if v in text] == []
    assert all(f"--option {k}={v}" in text for k, v in ordinary.items())
    assert json.loads(submission.env[SECRET_OPTIONS_ENV]) == secret


def test_the_cli_keeps_hudi_credentials_off_the_command_line(tmp_path, monkeypatch):
    from airflow_lake.cli import spark as cli_spark

    secret, ordinary = values(HUDI_SECRETS), values(ORDINARY)
    record = recording_spark_submit(tmp_path, monkeypatch)
    cli_spark.submit("clean", str(tmp_path / "t"), [], {**secret, **ordinary}, master=None, conf=())
    got = json.loads(record.read_text())
    argv = " ".join(got["argv"])
    assert [k for k, v in secret.items() if v in argv] == []
    assert all(f"{k}={v}" in got["argv"] for k, v in ordinary.items())
    assert json.loads(got["env"]) == secret


def test_messages_name_hudi_credentials_without_their_values(tmp_path):
    from airflow_lake.operators import CleanOperator
    from airflow_lake.spark.job import JobError, execute, parser

    for key, value in values(HUDI_SECRETS).items():
        op = CleanOperator(task_id="c", table_path=str(tmp_path / "t"), table_options={key: {"v": value}})
        with pytest.raises(InvalidOptionError, match="table_options") as caught:
            op.check_arguments()
        assert value not in str(caught.value)

        def body(run, value=value):
            raise RuntimeError(f"the server refused {value}")

        with pytest.raises(JobError) as failed:
            execute(parser("probe", None), body, ["--table", "/x", "--option", f"{key}={value}"])
        assert value not in str(failed.value) and "<secret>" in str(failed.value)
