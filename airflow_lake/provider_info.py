"""Provider metadata Airflow reads through the `apache_airflow_provider` entry point.

Lists only what exists; no Airflow import (Airflow calls this while discovering providers).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from airflow_lake.location import ASSET_SCHEMES

INTEGRATION = "Apache Hudi (airflow-lake)"


def _version() -> str:
    try:
        return version("airflow-lake")
    except PackageNotFoundError:
        return "0.1.0"


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-lake",
        "name": "airflow-lake",
        "description": "Apache Hudi tables (versions 6, 8 and 9) and table services for Apache Airflow, "
                       "without the JVM bundle: operators submitting packaged PySpark jobs, and timeline sensors.",
        "versions": [_version()],
        "integrations": [
            {
                "integration-name": INTEGRATION,
                "external-doc-url": "https://hudi.apache.org/",
                "tags": ["software"],
            }
        ],
        "hooks": [{"integration-name": INTEGRATION,
                   "python-modules": ["airflow_lake.hooks.lake", "airflow_lake.hooks.submit"]}],
        "operators": [{"integration-name": INTEGRATION,
                       "python-modules": ["airflow_lake.operators.upsert", "airflow_lake.operators.compaction",
                                          "airflow_lake.operators.services", "airflow_lake.operators.health",
                                          "airflow_lake.operators.maintenance"]}],
        "sensors": [{"integration-name": INTEGRATION, "python-modules": ["airflow_lake.sensors.instant"]}],
        "triggers": [{"integration-name": INTEGRATION,
                      "python-modules": ["airflow_lake.triggers.instant", "airflow_lake.triggers.commit"]}],
        "connection-types": [
            {
                "hook-class-name": "airflow_lake.hooks.lake.LakeHook",
                "hook-name": "Lake (Hudi tables)",
                "connection-type": "lake",
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port"],
                    "relabeling": {"login": "Access key id", "password": "Secret access key"},
                },
                "conn-fields": {
                    "base_path": {
                        "label": "Base path",
                        "description": "Tables given by relative path live under it (local path or "
                                       "s3://, gs://, abfs://, hdfs:// URI).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "storage_options": {
                        "label": "Storage options",
                        "description": "JSON object of pyarrow file-system options, e.g. "
                                       '{"endpoint_override": "http://minio:9000", "region": "us-east-1"}.',
                        "schema": {"type": ["string", "null"]},
                    },
                    "table_options": {
                        "label": "Default table options",
                        "description": "JSON object of hoodie.* write settings applied to every table.",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
        "config": {
            "lake": {
                "description": "The Lake tables page of the UI (docs/run-a-lake.md).",
                "options": {
                    "maintenance_config": {
                        "description": "The maintenance manager's YAML file whose tables the Lake tables page "
                                       "lists (the file the maintenance DAGs are made from).",
                        "version_added": "0.1.0", "type": "string", "example": "/opt/airflow/dags/lake_tables.yaml",
                        "default": "",
                    },
                    "maintenance_base_path": {
                        "description": "The base path of the config's relative table paths, as given to "
                                       "maintenance_dags(base_path=...); empty: the config's base_path, else the "
                                       "lake connection's.",
                        "version_added": "0.1.0", "type": "string", "example": "s3://lake/tables", "default": "",
                    },
                },
            }
        },
        "asset-uris": [{"schemes": list(ASSET_SCHEMES), "handler": "airflow_lake.location.sanitize_asset_uri"}],
    }
