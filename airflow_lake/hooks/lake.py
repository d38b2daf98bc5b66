"""`LakeHook`: opens tables for timeline reads and finds instants by run token."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from airflow.sdk import Asset, BaseHook

from airflow_lake.core import properties
from airflow_lake.core.errors import TableNotFoundError
from airflow_lake.core.storage import Storage, open_storage
from airflow_lake.core.table import Table
from airflow_lake.core.timeline.active import ActiveTimeline
from airflow_lake.core.write.client import TOKEN_KEY
from airflow_lake.location import LakeSettings, asset_uri
from airflow_lake.watch import TimelineWatch


class LakeHook(BaseHook):
    """Hudi tables at a path or URI.

    :param lake_conn_id: a `lake` connection (base path, storage options, table options);
        None for tables given by absolute local path or by URI with ambient credentials.
    :param storage_options: file-system options overriding the connection's.
    """

    conn_name_attr = "lake_conn_id"
    default_conn_name = "lake_default"
    conn_type = "lake"
    hook_name = "Lake (Hudi tables)"

    def __init__(self, lake_conn_id: str | None = None, storage_options: dict[str, Any] | None = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        self.lake_conn_id = lake_conn_id
        self.extra_storage_options = dict(storage_options or {})

    @cached_property
    def settings(self) -> LakeSettings:
        """The connection's settings (empty without a connection)."""
        conn = self.get_connection(self.lake_conn_id) if self.lake_conn_id else None
        return LakeSettings.from_connection(conn, self.lake_conn_id, self.extra_storage_options)

    # -- locations -------------------------------------------------------------------------
    def resolve(self, table_path: str) -> str:
        """Absolute path or URI of a table; relative paths are under the connection's base path."""
        return self.settings.resolve(table_path)

    def storage(self, table_path: str) -> Storage:
        return open_storage(self.resolve(table_path), self.settings.storage_options)

    def table_asset(self, table_path: str) -> Asset:
        return table_asset(self.resolve(table_path))

    # -- tables and timelines (no Spark) ---------------------------------------------------
    def get_table(self, table_path: str, options: dict[str, Any] | None = None) -> Table:
        """Open a table with the connection's table options (then `options`)."""
        merged = {**self.settings.table_options, **(options or {})}
        if not self.settings.storage_options:
            return Table.open(self.resolve(table_path), options=merged)
        storage = self.storage(table_path)
        if not storage.exists(".hoodie/hoodie.properties"):
            raise TableNotFoundError(f"{storage.uri} is not a Hudi table: no .hoodie/hoodie.properties")
        return Table(storage, properties.load(storage), merged)

    def get_timeline(self, table_path: str) -> ActiveTimeline:
        """The table's active timeline, scanned now."""
        storage = self.storage(table_path)
        if not storage.exists(".hoodie"):
            raise TableNotFoundError(f"{storage.uri} is not a Hudi table: no .hoodie folder")
        return ActiveTimeline(storage)

    def watch(self, table_path: str, actions=None) -> TimelineWatch:
        """A `TimelineWatch` (what completed since a baseline) over the table's timeline."""
        storage = self.storage(table_path)
        if not storage.exists(".hoodie"):
            raise TableNotFoundError(f"{storage.uri} is not a Hudi table: no .hoodie folder")
        return TimelineWatch(storage, actions)

    # -- the result channel ------------------------------------------------------------------
    @staticmethod
    def run_token(context) -> str:
        """`dag_id/run_id/task_id/map_index` of a task instance: the same for each try."""
        ti = context["ti"]
        map_index = getattr(ti, "map_index", None)
        return f"{ti.dag_id}/{ti.run_id}/{ti.task_id}/{-1 if map_index is None else map_index}"

    def find_instant(self, table_path: str, token: str) -> dict[str, Any] | None:
        """The completed commit carrying `token` in `extraMetadata[airflow_lake.token]`, with its
        metadata summarised, or None."""
        timeline = self.get_timeline(table_path)
        instant = timeline.find_by_metadata(TOKEN_KEY, token)
        if instant is None:
            return None
        meta = timeline.commit_metadata(instant)
        stats = meta.stats()
        return {
            "instant": instant.time,
            "action": instant.action,
            "operation_type": meta.operation_type,
            "compacted": meta.compacted,
            "extra_metadata": {k: v for k, v in meta.extra_metadata.items() if k != "schema"},
            "num_inserts": sum(s.num_inserts for s in stats),
            "num_updates": sum(s.num_update_writes for s in stats),
            "num_deletes": sum(s.num_deletes for s in stats),
            "num_writes": sum(s.num_writes for s in stats),
            "files": sorted(s.path for s in stats if s.path),
        }

    def test_connection(self) -> tuple[bool, str]:
        """The base path (when set) must be reachable."""
        base = self.settings.base_path
        if not base:
            return True, "no base_path: tables must be given by absolute path or URI"
        try:
            open_storage(base, self.settings.storage_options).list("")
        except Exception as e:  # surfaced to the UI as text
            return False, f"cannot list {base}: {e}"
        return True, f"listed {base}"


def table_asset(location: str, *, name: str | None = None) -> Asset:
    """The Airflow Asset of the table at an absolute path or URI (see `asset_uri`)."""
    uri = asset_uri(location)
    return Asset(uri=uri, name=name or uri)
