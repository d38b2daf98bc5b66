"""OpenLineage of the operators (`LakeJobOperator.get_openlineage_facets_on_*`): the datasets a
job reads and writes, named per the OpenLineage naming spec for their storage, the table's
schema, and a `hudi` run facet with the instant, action, operation and record counts.

Imported only by those methods, so the OpenLineage provider
(`apache-airflow-providers-openlineage`, extra `airflow-lake[openlineage]`) stays optional.
Lineage never fails a task: what cannot be read is left out, with a warning.
"""

from __future__ import annotations

import logging
import posixpath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow.providers.common.compat.openlineage.facet import (
    Dataset,
    OutputDataset,
    OutputStatisticsOutputDatasetFacet,
    RunFacet,
    SchemaDatasetFacet,
    SchemaDatasetFacetFields,
)
from airflow.providers.openlineage.extractors import OperatorLineage
from attrs import define

from airflow_lake.location import LakeSettings, is_absolute

if TYPE_CHECKING:
    from airflow_lake.operators.base import LakeJobOperator

log = logging.getLogger(__name__)

HUDI_FACET = "hudi"
_COUNTS = ("records_written", "inserts", "updates", "deletes", "files_written", "files_deleted",
           "replaced_file_groups", "file_groups", "archived")


@define
class HudiRunFacet(RunFacet):
    """What the job did to the Hudi table: its instant, the action and operation, the counts."""

    table: str
    job: str
    instant: str | None = None
    action: str | None = None
    operation: str | None = None
    tableType: str | None = None  # noqa: N815 (OpenLineage facets are camelCase)
    tableVersion: int | None = None  # noqa: N815
    counts: dict[str, int] | None = None

    @staticmethod
    def _get_schema() -> str:
        return "https://github.com/airflow-lake/airflow-lake/blob/main/docs/operators.md#openlineage"


def dataset_name(location: str) -> tuple[str, str]:
    """(namespace, name) of a table or file per the OpenLineage naming spec: a local path
    `("file", "/abs/path")`, `s3://bucket/key` `("s3://bucket", "key")` (also s3a, gs, gcs,
    wasbs), `abfss://container@account.dfs.core.windows.net/path`
    `("abfss://container@account.dfs.core.windows.net", "path")`, `hdfs://host:port/path`
    `("hdfs://host:port", "/path")`."""
    if "://" not in location:  # (normalised as the table's Asset URI is: one table, one dataset)
        return "file", posixpath.normpath(location) if location.startswith("/") else location.rstrip("/")
    parts = urlsplit(location)
    scheme = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}.get(parts.scheme, parts.scheme)
    path = parts.path.rstrip("/")
    if scheme == "file":
        return ("file" if not parts.netloc else f"file://{parts.netloc}"), posixpath.normpath(path or "/")
    if scheme in ("hdfs", "viewfs"):
        return f"{scheme}://{parts.netloc}", path or "/"
    return f"{scheme}://{parts.netloc}", path.lstrip("/")


def operator_lineage(op: LakeJobOperator, result: dict[str, Any] | None, *, done: bool = False) -> OperatorLineage:
    """The lineage of `op` (rendered), with the facets of its finished job's `result` if any.
    `done` (a completed task): the table is an output only if the job changed it, as for its
    asset event (a skipped task, a clean with nothing to delete, no compaction due: none)."""
    table = _resolve(op, op.table_path)
    inputs = [_dataset(_resolve(op, x)) for x in op.lineage_inputs()]
    writes = op.writes_table and (not done or (result is not None and op.changed_table(result)))
    outputs = [OutputDataset(namespace=n, name=p, facets={}, outputFacets={})
               for n, p in [dataset_name(table)]] if writes else []
    opened = _open(op) if result is not None else None
    schema = _schema(op, opened) if opened is not None else None
    if schema is not None:
        for ds in [d for d in inputs + outputs if dataset_name(table) == (d.namespace, d.name)]:
            ds.facets["schema"] = schema
    run_facets: dict[str, Any] = {}
    if result is not None:
        counts = {k: int(result[k]) for k in _COUNTS if isinstance(result.get(k), (int, float))
                  and not isinstance(result.get(k), bool)}
        config = opened.config if opened is not None else None
        run_facets[HUDI_FACET] = HudiRunFacet(
            table=table, job=op.job, instant=result.get("instant"), action=result.get("action") or op.job,
            operation=result.get("operation") or op.job, tableType=getattr(config, "table_type", None),
            tableVersion=getattr(config, "version", None), counts=counts or None)
        for ds in outputs:
            if "records_written" in counts or "files_written" in counts:
                ds.outputFacets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
                    rowCount=counts.get("records_written"), fileCount=counts.get("files_written"))
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


def read_lineage(hook, table_path: str) -> OperatorLineage:
    """The lineage of a task that reads only a table's timeline (health, plans, the sensor):
    the table as its input."""
    return OperatorLineage(inputs=[_dataset(_resolve_with(hook, table_path))])


def _resolve(op: LakeJobOperator, location: str) -> str:
    return _resolve_with(op.hook, location)


def _resolve_with(hook, location: str) -> str:
    """The table's location; an absolute one without the lake connection (the OpenLineage
    listener calls the lineage methods in a forked process, where a connection lookup hangs
    until the listener kills it: `airflow dags test` lost those events)."""
    if isinstance(location, str) and location and is_absolute(location):
        return LakeSettings().resolve(location)
    try:
        return hook.resolve(location)
    except Exception as e:  # (a relative path with no lake connection: named as given)
        log.warning("lineage: %s: %s", location, e)
        return location


def _dataset(location: str) -> Dataset:
    namespace, name = dataset_name(location)
    return Dataset(namespace=namespace, name=name, facets={})


def _open(op: LakeJobOperator):
    """The table, opened once for the completion facets; None (with a warning) when it cannot be."""
    try:
        return op.hook.get_table(op.table_path, op.table_options)
    except Exception as e:
        log.warning("lineage: table %s: %s", op.table_path, e)
        return None


def _schema(op: LakeJobOperator, table) -> SchemaDatasetFacet | None:
    """The table's schema (its latest commit's), without Hudi's meta fields."""
    try:
        schema = table.schema()
    except Exception as e:
        log.warning("lineage: table %s: no schema: %s", op.table_path, e)
        return None
    return SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=f.name, type=str(f.type))
                                      for f in schema if not f.name.startswith("_hoodie_")])
