"""Where a table lives: lake-connection settings, path resolution, storage, asset URIs.

No Airflow here: the hook, the sensor, the trigger (in the triggerer) and the provider
info share it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import SplitResult, urlsplit

from airflow_lake.core.errors import InvalidOptionError
from airflow_lake.core.objectstore import names_setting

ASSET_SCHEME = "hudi"
# hudi:/abs/path for local tables, hudi+<storage scheme>://... for the others
STORAGE_SCHEMES = ("s3", "s3a", "gs", "gcs", "hdfs", "viewfs", "abfs", "abfss")
ASSET_SCHEMES = (ASSET_SCHEME, *(f"{ASSET_SCHEME}+{s}" for s in STORAGE_SCHEMES))


@dataclass(frozen=True)
class LakeSettings:
    """What a `lake` connection holds (all optional): a base path for relative table paths,
    storage options for the file system (delta-rs style `aws_*` keys or pyarrow's S3/GCS/HDFS/
    Azure keywords, see docs/object-stores.md) and default table options (`hoodie.*` write
    settings)."""

    base_path: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)
    table_options: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_extra(extra: dict[str, Any] | str | None, *, login: str | None = None,
                   password: str | None = None, where: str = "lake connection") -> LakeSettings:
        """From a connection's extra (dict or JSON); login/password, when set, become the
        storage options `access_key`/`secret_key` unless those are given (under any name)."""
        if isinstance(extra, str):
            extra = json.loads(extra) if extra.strip() else {}
        extra = {k.removeprefix("extra__lake__"): v for k, v in dict(extra or {}).items()}
        storage = _as_dict(extra.get("storage_options"), f"{where}: storage_options")
        table = _as_dict(extra.get("table_options"), f"{where}: table_options")
        if login and not any(names_setting(k, "access_key") for k in storage):
            storage["access_key"] = login
        if password and not any(names_setting(k, "secret_key") for k in storage):
            storage["secret_key"] = password
        return LakeSettings(extra.get("base_path") or None, storage, table)

    @staticmethod
    def from_connection(conn, conn_id: str, storage_options: dict[str, Any] | None = None) -> LakeSettings:
        """From an Airflow connection (None: no connection), `storage_options` taking precedence."""
        settings = LakeSettings() if conn is None else LakeSettings.from_extra(
            conn.extra_dejson, login=conn.login, password=conn.password, where=f"lake connection {conn_id!r}")
        if storage_options:
            settings = LakeSettings(settings.base_path, {**settings.storage_options, **storage_options},
                                    settings.table_options)
        return settings

    def resolve(self, table_path: str) -> str:
        """The table's absolute path or URI; a relative path is joined to the base path."""
        if not table_path:
            raise InvalidOptionError("table_path is empty")
        if is_absolute(table_path):
            return table_path.rstrip("/") or "/"
        if not self.base_path:
            raise InvalidOptionError(f"table_path {table_path!r} is relative and no lake connection with a "
                                     "base_path was given")
        if "://" in self.base_path:
            return self.base_path.rstrip("/") + "/" + table_path.strip("/")
        return os.path.join(os.path.abspath(self.base_path), table_path).rstrip("/")


def is_absolute(table_path: str) -> bool:
    """An absolute local path or a URI (needs no base path)."""
    return "://" in table_path or os.path.isabs(table_path)


def asset_uri(location: str) -> str:
    """The Airflow Asset URI of the table at `location` (an absolute path or a URI):
    `hudi:/abs/path` for local tables (Airflow's normal form of `hudi:///abs/path`), and
    `hudi+s3://bucket/path` (`hudi+<storage scheme>`) for the others."""
    if "://" not in location:
        if not os.path.isabs(location):
            raise InvalidOptionError(f"table_path {location!r} is relative: give an absolute path or URI "
                                     "(or an explicit asset) to name the table's asset")
        return f"{ASSET_SCHEME}:{os.path.normpath(location)}"
    parts = urlsplit(location)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return f"{ASSET_SCHEME}:{os.path.normpath(parts.path)}"
    path = parts.path.rstrip("/")
    return f"{ASSET_SCHEME}+{scheme}://{parts.netloc}{path}"


def table_location(uri: str) -> str:
    """The table location a table Asset URI names (the inverse of `asset_uri`)."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    try:
        if scheme not in ASSET_SCHEMES:
            raise ValueError(f"its scheme is not one of {', '.join(ASSET_SCHEMES)}")
        sanitize_asset_uri(parts)
    except ValueError as e:
        raise InvalidOptionError(f"{uri!r} is not a table Asset URI: {e}") from None
    if scheme == ASSET_SCHEME:
        return os.path.normpath(parts.path)
    return f"{scheme.split('+', 1)[1]}://{parts.netloc}{parts.path.rstrip('/')}"


def sanitize_asset_uri(uri: SplitResult) -> SplitResult:
    """Airflow's asset-URI handler for the `hudi` schemes: a table needs a path, and a remote
    one a bucket or host."""
    if uri.query or uri.fragment:
        raise ValueError(f"a table asset URI takes no query or fragment: {uri.geturl()}")
    if uri.scheme == ASSET_SCHEME and uri.netloc:
        raise ValueError(f"local table asset URIs are hudi:/absolute/path, not {uri.geturl()}")
    if uri.scheme != ASSET_SCHEME and not uri.netloc:
        raise ValueError(f"{uri.scheme} table asset URIs need a bucket or host: {uri.geturl()}")
    if not uri.path or uri.path == "/":
        raise ValueError(f"a table asset URI needs the table's path: {uri.geturl()}")
    return uri


def _as_dict(value: Any, where: str) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as e:
            raise InvalidOptionError(f"{where} is not JSON: {e}") from e
    if not isinstance(value, dict):
        raise InvalidOptionError(f"{where} must be a JSON object, got {type(value).__name__}")
    return dict(value)
