"""The "Lake tables" page in Airflow's UI: an Airflow 3 plugin (the `airflow.plugins` entry
point of the package), a FastAPI app mounted by the API server at `/lake` (`app.py`, the HTML in
`page.py`) and a top-level navigation entry showing it. It lists the tables of the
maintenance config named by `[lake] maintenance_config` (docs/run-a-lake.md)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_lake.provider_ui.app import URL_PREFIX, create_app

PAGE_ROUTE = "lake_tables"  # the page inside Airflow's UI: /plugin/lake_tables


class LakeTablesPlugin(AirflowPlugin):
    name = "airflow_lake"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Lake tables"}]
    external_views = [{"name": "Lake tables", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
                       "url_route": PAGE_ROUTE, "nav_top_level": True,
                       "icon": f"{URL_PREFIX.lstrip('/')}/icon.svg"}]
