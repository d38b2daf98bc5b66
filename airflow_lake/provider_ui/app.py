"""The FastAPI app behind the "Lake tables" page, mounted by the API server at `/lake`:

- `/lake/`: every table of the maintenance config (`[lake] maintenance_config`), its status,
  backlog figures and what is due now;
- `/lake/tables/<name>`: one table's health, the manager's decisions with their reasons, the
  thresholds broken, pending instants, backlog, and its timeline picture
  (`/lake/tables/<name>/timeline.svg`, what `airflow-lake timeline --svg` draws);
- `/lake/table?uri=<asset uri>`: the link a table's Asset carries in its extra (`table_asset`):
  redirects to the table's page, or for an Asset of a table outside the config to
  `/lake/assets/<asset id>`, its health without a policy (and its timeline picture);
- `/lake/api/tables` (and `/lake/api/tables/<name>`): the same as JSON.

Every route needs a user allowed to read Assets (Airflow's auth manager: the UI's session
cookie or a bearer token). Tables are read from their timelines on each request (no data
file), in parallel; a table that cannot be read shows its error, the others still show.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from airflow.api_fastapi.core_api.security import requires_access_asset
from airflow.configuration import conf
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from airflow_lake.core.errors import LakeError, TableNotFoundError
from airflow_lake.core.health import table_health
from airflow_lake.core.maintenance import TablePolicy, plan_maintenance
from airflow_lake.core.objectstore import scrub
from airflow_lake.hooks.lake import LakeHook
from airflow_lake.location import asset_uri, is_absolute, table_location
from airflow_lake.operators.maintenance import ManagedTable, managed_tables
from airflow_lake.provider_ui import page

URL_PREFIX = "/lake"
SECTION = "lake"
READERS = 8  # tables read at a time
_DRAWING = threading.Lock()  # matplotlib's pyplot and rc settings are process-wide: one picture at a time


def config_source() -> tuple[str, str | None]:
    """The maintenance config the page lists and the base path for its relative tables
    (`[lake] maintenance_config`, `[lake] maintenance_base_path`)."""
    source = conf.get(SECTION, "maintenance_config", fallback="") or ""
    base = conf.get(SECTION, "maintenance_base_path", fallback="") or None
    return source.strip(), base


def _tables() -> tuple[list[ManagedTable], str] | None:
    source, base = config_source()
    if not source:
        return None
    try:
        tables, _, where = managed_tables(source, base_path=base)
    except LakeError as e:
        raise HTTPException(500, f"the maintenance config cannot be used: {e}") from None
    return tables, where


def _asset_ids(uris: Iterable[str]) -> dict[str, int]:
    """The ids of Airflow's Assets with these URIs (for links to their pages)."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    wanted = sorted(set(uris))
    if not wanted:
        return {}
    with create_session() as session:
        rows = session.execute(select(AssetModel.id, AssetModel.uri).where(AssetModel.uri.in_(wanted))
                               .order_by(AssetModel.id))
        found: dict[str, int] = {}
        for asset_id, uri in rows:
            found.setdefault(uri, asset_id)
        return found


def _uri(path: str) -> str | None:
    return asset_uri(path) if is_absolute(path) else None


def read_view(name: str, path: str, policy: TablePolicy | None, *, dag_id: str | None = None) -> page.TableView:
    """One table's health (read with its policy's options and connection, else the lake
    connection's) and its policy's plan; errors kept."""
    hook = LakeHook(lake_conn_id=policy.lake_conn_id, storage_options=policy.storage_options) if policy else LakeHook()
    try:
        table = hook.get_table(path, policy.service_options() if policy else None)
        health = table_health(table)
        plan = plan_maintenance(health, policy) if policy else None
    except TableNotFoundError as e:
        return page.TableView(name, path, dag_id, _uri(path), error=_said(e, hook), missing=True)
    except Exception as e:  # a table that cannot be read shows why; the page goes on
        return page.TableView(name, path, dag_id, _uri(path), error=_said(e, hook))
    location = table.storage.uri
    return page.TableView(name, location, dag_id, _uri(location), health=health.as_dict(),
                          plan=plan.as_dict() if plan else None)


def _said(error: Exception, hook: LakeHook) -> str:
    """An error as the page shows it: its type and message, secrets of the storage options
    replaced (never raises)."""
    text = f"{type(error).__name__}: {error}"
    try:
        return scrub(text, hook.settings.storage_options)
    except Exception:  # (the connection itself may be what failed)
        return scrub(text, hook.extra_storage_options)


def _with_assets(views: list[page.TableView]) -> list[page.TableView]:
    try:
        ids = _asset_ids(v.asset_uri for v in views if v.asset_uri)
    except Exception:  # the links are a convenience: the health still shows
        ids = {}
    return [replace(v, asset_id=ids.get(v.asset_uri or "")) for v in views]


def read_all(tables: list[ManagedTable]) -> list[page.TableView]:
    with ThreadPoolExecutor(max_workers=min(READERS, max(len(tables), 1))) as pool:
        views = list(pool.map(lambda t: read_view(t.policy.name, t.policy.path, t.policy, dag_id=t.dag_id), tables))
    return _with_assets(views)


def _managed(name: str) -> ManagedTable:
    listed = _tables()
    for t in listed[0] if listed else []:
        if t.policy.name == name:
            return t
    raise HTTPException(404, f"no table named {name!r} in the maintenance config")


def _one(name: str) -> page.TableView:
    t = _managed(name)
    return _with_assets([read_view(t.policy.name, t.policy.path, t.policy, dag_id=t.dag_id)])[0]


def create_app() -> FastAPI:
    app = FastAPI(title="airflow-lake: Lake tables", dependencies=[Depends(requires_access_asset(method="GET"))])

    @app.get("/", response_class=HTMLResponse)
    def tables_page():
        try:
            listed = _tables()
        except HTTPException as e:  # a page naming the config's mistake, not a bare error body
            return _error_page(e)
        if listed is None:
            return page.no_config("[lake] maintenance_config (AIRFLOW__LAKE__MAINTENANCE_CONFIG)")
        return page.table_list(read_all(listed[0]), source=listed[1])

    @app.get("/tables/{name}", response_class=HTMLResponse)
    def table_page(name: str):
        try:
            view = _one(name)
        except HTTPException as e:
            return _error_page(e)
        return page.table_page(view, picture=f"{quote(name, safe='')}/timeline.svg")

    @app.get("/tables/{name}/timeline.svg")
    def timeline_svg(name: str) -> Response:
        policy = _managed(name).policy
        return _svg_response(LakeHook(lake_conn_id=policy.lake_conn_id, storage_options=policy.storage_options),
                             policy.path, policy.service_options())

    @app.get("/table")
    def table_by_asset(uri: str = Query(..., description="a table Asset's URI (hudi:/..., hudi+s3://...)")):
        try:
            listed = _tables()
        except HTTPException:  # a broken config: the Assets outside it still have their page
            listed = None
        for t in listed[0] if listed else []:
            if _uri(t.policy.path) == uri:
                return RedirectResponse(f"tables/{quote(t.policy.name, safe='')}", status_code=303)
        asset_id = _asset_ids([uri]).get(uri)
        if asset_id is None:
            raise HTTPException(404, f"no table Asset {uri!r} in Airflow and no table of the maintenance config "
                                     "with that URI")
        return RedirectResponse(f"assets/{asset_id}", status_code=303)

    @app.get("/assets/{asset_id}", response_class=HTMLResponse)
    def asset_page(asset_id: int) -> str:
        """The table of an Asset outside the maintenance config: its health, no policy."""
        uri = _asset_table(asset_id)
        view = replace(read_view(uri, table_location(uri), None), asset_id=asset_id)
        return page.table_page(view, picture=f"{asset_id}/timeline.svg")

    @app.get("/assets/{asset_id}/timeline.svg")
    def asset_timeline_svg(asset_id: int) -> Response:
        return _svg_response(LakeHook(), table_location(_asset_table(asset_id)))

    @app.get("/icon.svg")
    def icon() -> Response:
        return Response(page.ICON, media_type="image/svg+xml")

    @app.get("/api/tables")
    def tables_json() -> JSONResponse:
        listed = _tables()
        return JSONResponse({"config": listed[1] if listed else None,
                             "tables": [v.as_dict() for v in read_all(listed[0])] if listed else []})

    @app.get("/api/tables/{name}")
    def table_json(name: str) -> JSONResponse:
        return JSONResponse(_one(name).as_dict())

    return app


def _error_page(error: HTTPException) -> HTMLResponse:
    """The page saying why the tables cannot be shown: the maintenance config's mistake (the
    page itself works: 200, as without a config) or a table it does not name (404)."""
    return HTMLResponse(page.config_error(str(error.detail)), status_code=404 if error.status_code == 404 else 200)


def _asset_table(asset_id: int) -> str:
    """The URI of a table Asset (`hudi` schemes) by its id; 404 otherwise."""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        asset = session.get(AssetModel, asset_id)
        uri = asset.uri if asset is not None else None
    try:
        if uri is not None:
            table_location(uri)
            return uri
    except LakeError:
        pass
    raise HTTPException(404, f"no table Asset with id {asset_id}")


def _svg_response(hook: LakeHook, path: str, options: dict[str, Any] | None = None) -> Response:
    """The table's timeline picture (`airflow-lake timeline --svg`); an error as a 404 (no
    table) or 502 (storage) naming it."""
    from airflow_lake.cli.history import TimelineView
    from airflow_lake.cli.picture import draw_view

    try:
        table = hook.get_table(path, options)
        view = TimelineView.of(table)
        with _DRAWING, tempfile.TemporaryDirectory(prefix="lake-timeline-") as tmp:
            svg = draw_view(view, Path(tmp) / "timeline.svg", fmt="svg", now_ms=int(time.time() * 1000)).read_bytes()
    except TableNotFoundError as e:
        raise HTTPException(404, _said(e, hook)) from None
    except Exception as e:
        raise HTTPException(502, f"the timeline of {path} cannot be drawn: {_said(e, hook)}") from None
    return Response(svg, media_type="image/svg+xml",
                    headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"})
