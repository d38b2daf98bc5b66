"""The "Lake tables" page, in a real browser (Debian's chromium through its chromedriver)
against a real Airflow API server and DAG processor (SQLite, the simple auth manager with a
password): the maintenance manager's tables of three types and states, and one path with no
table yet, each with its health, what is due and its timeline picture; the page refuses
callers without a login; a table's Asset carries the page's link, which leads to the table.

`LAKE_SCREENSHOTS=<folder>` keeps the screenshots there (docs/img: `make screenshots`)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from airflow_lake.core.table import Table
from airflow_lake.hooks.lake import PAGE_KEY, table_asset
from airflow_lake.location import table_location
from tests.core.test_failed_writes import FAST, Crash, CrashingStorage
from tests.provider.conftest import batch
from tests.provider.live import Airflow

PASSWORD = "lake-page-password"
DAG_FILE = """from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_lake.hooks import table_asset
from airflow_lake.operators.maintenance import maintenance_dags

globals().update(maintenance_dags({config!r}, base_path={base!r}))

with DAG("loads_audit", schedule=None):  # a table outside the maintenance config
    EmptyOperator(task_id="load", outlets=[table_asset({audit!r})])
"""
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def make_lake(base: Path) -> dict[str, object]:
    """orders: MOR, a pending compaction plan and delta commits piling up behind it (its
    threshold broken); events: MOR, a write whose process died (no heartbeat: stale);
    customers: COW, healthy. What each write returned, to judge the page by."""
    orders = Table.create(str(base / "orders"), name="orders", table_type="MERGE_ON_READ", record_key="id",
                          precombine_field="ts", options=FAST)
    orders.write(batch(list(range(100))))
    orders.write(batch([1, 2], ts=2))
    plan = orders.schedule_compaction(max_delta_commits=1)
    later = [orders.write(batch([ts, ts + 50], ts=ts)).instant for ts in range(3, 9)]
    events = Table.create(str(base / "events"), name="events", table_type="MERGE_ON_READ", record_key="id",
                          precombine_field="ts", options=FAST)
    events.write(batch([1, 2, 3]))
    dying = Table.open(str(base / "events"), options=FAST)
    dying.storage = CrashingStorage(str(base / "events"), crash_at=5)
    with pytest.raises(Crash):
        dying.write(batch([9], ts=9))
    [stale] = [i.time for i in events.timeline.pending().instants]
    Table.create(str(base / "audit"), name="audit", record_key="id", precombine_field="ts").write(batch([1]))
    customers = Table.create(str(base / "customers"), name="customers", table_type="COPY_ON_WRITE",
                             record_key="id", precombine_field="ts")
    customers.write(batch(list(range(20))))
    last = customers.write(batch([1, 2], ts=2)).instant
    return {"plan": plan, "orders_latest": later[-1], "stale": stale, "customers_latest": last}


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _token(base_url: str) -> str:
    body = json.dumps({"username": "admin", "password": PASSWORD}).encode()
    request = urllib.request.Request(f"{base_url}auth/token", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())["access_token"]


def _wait(what: str, check, airflow: Airflow, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout} s; api-server log:\n{airflow.log('api-server')[-3000:]}"
                                 f"\ndag-processor log:\n{airflow.log('dag-processor')[-2000:]}")
        time.sleep(1)


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), \
        "the page's test needs Debian's chromium and chromium-driver (`make browser` installs them)"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1500,950"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _shot(driver, tmp_path: Path, name: str) -> None:
    target = tmp_path / f"{name}.png"
    driver.save_screenshot(str(target))
    keep = os.environ.get("LAKE_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(target, Path(keep) / target.name)


@pytest.mark.parametrize("location", ["/data/lake/orders", "/data/lake/a+b c", "s3://lake/tables/orders",
                                      "gs://bucket/a+b", "abfss://c@acct.dfs.core.windows.net/t", "hdfs://nn:8020/t"])
def test_a_table_asset_links_to_its_page_whatever_its_storage(location):
    from urllib.parse import parse_qs, urlsplit

    asset = table_asset(location)
    link = urlsplit(asset.extra[PAGE_KEY])
    assert link.path == "lake/table"
    [uri] = parse_qs(link.query)["uri"]  # as the page's server reads it ('+' would be a space)
    assert uri == asset.uri and table_location(uri) == location


def test_what_the_page_shows_is_escaped_and_judged():
    from airflow_lake.provider_ui.page import BEHIND, DUE, OK, UNREADABLE, TableView, table_list, table_page

    hostile = TableView("t", "/x/<img src=x onerror=alert(1)>", "d<", "hudi:/x", error="<script>alert(1)</script>")
    for html in (table_list([hostile], source="<b>config</b>"), table_page(hostile, picture="t/timeline.svg")):
        assert "<script>" not in html and "<img src=x" not in html and "<b>config" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert hostile.status == UNREADABLE
    health = {"table_type": "MERGE_ON_READ", "table_version": 6}
    quiet = {"rollback": [], "execute": [], "schedule": {"due": False}, "clean": {"due": False},
             "archive": {"due": False}, "breaches": []}
    assert TableView("t", "/t", None, None, health=health, plan=quiet).status == OK
    due = TableView("t", "/t", None, None, health=health, plan={**quiet, "clean": {"due": True}})
    assert due.status == DUE and due.due() == ["clean"]
    assert TableView("t", "/t", None, None, health=health, plan={**quiet, "breaches": ["x"]}).status == BEHIND


def test_a_mistake_in_the_maintenance_config_is_a_page_naming_it(tmp_path, monkeypatch):
    """Not a bare error body inside Airflow's UI frame (the login is the API server's: left out)."""
    from fastapi.testclient import TestClient

    from airflow_lake.provider_ui.app import create_app

    config = tmp_path / "lake_tables.yaml"
    config.write_text("tables:\n  orders: {path: /tmp/lake/orders, clean: {retain: 3}}\n")  # (retained)
    monkeypatch.setenv("AIRFLOW__LAKE__MAINTENANCE_CONFIG", str(config))
    app = create_app()
    for dependency in app.router.dependencies:
        app.dependency_overrides[dependency.dependency] = lambda: None
    client = TestClient(app)
    for url in ("/", "/tables/orders"):
        answer = client.get(url)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html"), url
        assert "the maintenance config cannot be used" in answer.text and "unknown key(s) [&#x27;retain" in \
            answer.text, answer.text
    assert client.get("/api/tables").status_code == 500  # (an API answers with its error)


@pytest.mark.slow
def test_the_lake_tables_page_in_a_browser(tmp_path, request):
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    lake = Path(tempfile.mkdtemp(prefix="lake-"))  # a short path, for the screenshots
    request.addfinalizer(lambda: shutil.rmtree(lake, ignore_errors=True))
    facts = make_lake(lake)
    config = tmp_path / "lake_tables.yaml"
    config.write_text(yaml.safe_dump({
        "defaults": {"schedule": "@hourly", "compaction": {"max_delta_commits": 4},
                     "archive": {"min_commits": 20, "max_commits": 30},
                     "thresholds": {"delta_commits_since_compaction": 5, "stale_instants": 0}},
        "tables": {"orders": {"path": "orders"}, "events": {"path": "events"}, "customers": {"path": "customers"},
                   "returns": {"path": "returns"}}}))
    home = tmp_path / "home"
    (home / "dags").mkdir(parents=True)
    (home / "dags" / "lake.py").write_text(DAG_FILE.format(config=str(config), base=str(lake),
                                                                  audit=str(lake / "audit")))
    (tmp_path / "passwords.json").write_text(json.dumps({"admin": PASSWORD}))
    airflow = Airflow(home, {"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                             "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp_path / "passwords.json"),
                             "AIRFLOW__LAKE__MAINTENANCE_CONFIG": str(config),
                             "AIRFLOW__LAKE__MAINTENANCE_BASE_PATH": str(lake)})
    base_url = f"http://127.0.0.1:{airflow.port}/"
    driver = None
    try:
        airflow.start("api-server")
        airflow.start("dag-processor")
        token = _wait("the API server answers", lambda: _token(base_url), airflow)

        # -- the page needs a login; its JSON says what the page shows ------------------------
        assert _get(f"{base_url}lake/")[0] == 401 and _get(f"{base_url}lake/api/tables")[0] == 401
        assert _get(f"{base_url}lake/", "not-a-token")[0] in (401, 403)
        status, body = _get(f"{base_url}lake/api/tables", token)
        assert status == 200, body
        doc = json.loads(body)
        tables = {t["name"]: t for t in doc["tables"]}
        assert doc["config"] == f"maintenance config {config}" and sorted(tables) == [
            "customers", "events", "orders", "returns"]
        assert {n: t["status"] for n, t in tables.items()} == {
            "orders": "behind", "events": "behind", "customers": "ok", "returns": "no table yet"}
        orders, events, customers = tables["orders"], tables["events"], tables["customers"]
        assert orders["path"] == str(lake / "orders") and orders["dag_id"] == "lake_maintenance__orders"
        assert orders["plan"]["execute"] == [facts["plan"]] and orders["plan"]["schedule"]["due"]
        assert "after the 1 pending plan(s) executed first" in orders["plan"]["schedule"]["reason"]
        assert orders["health"]["latest_commit"] == facts["orders_latest"]
        assert orders["health"]["delta_commits_since_compaction"] == 8
        assert [b.split(": ")[1] for b in orders["plan"]["breaches"]] == [
            "delta_commits_since_compaction is 8, above 5"]
        assert events["plan"]["rollback"] == [facts["stale"]] and events["health"]["stale_instants"] == [facts["stale"]]
        assert customers["health"]["latest_commit"] == facts["customers_latest"] and not customers["plan"]["breaches"]
        assert "no .hoodie folder" in tables["returns"]["error"]
        status, svg = _get(f"{base_url}lake/tables/orders/timeline.svg", token)
        assert status == 200 and b"<svg" in svg[:400] and facts["plan"].encode() in svg  # the pending plan drawn

        # -- the table Assets (registered by the DAG processor) link to the page ---------------
        def assets():
            found = json.loads(_get(f"{base_url}api/v2/assets?limit=100", token)[1])["assets"]
            return {a["uri"]: a for a in found if a["uri"].startswith("hudi:")} if len(found) >= 5 else None

        by_uri = _wait("the DAG processor registers the table Assets", assets, airflow)
        orders_uri = f"hudi:{lake / 'orders'}"
        assert by_uri[orders_uri]["extra"] == {PAGE_KEY: f"lake/table?uri={quote(orders_uri, safe=':/')}"}

        # an Asset outside the config: its health, without a policy; a URI no Asset has: not found
        audit_uri, nothing_uri = quote(f"hudi:{lake / 'audit'}", safe=""), quote(f"hudi:{lake / 'nothing'}", safe="")
        status, page = _get(f"{base_url}lake/table?uri={audit_uri}", token)  # (urllib follows the redirect)
        assert status == 200 and b"COPY_ON_WRITE" in page and b"would run now" not in page, page[-2000:]
        audit_id = by_uri[f"hudi:{lake / 'audit'}"]["id"]
        assert f'src="{audit_id}/timeline.svg"'.encode() in page
        status, svg = _get(f"{base_url}lake/assets/{audit_id}/timeline.svg", token)
        assert status == 200 and b"<svg" in svg[:400]
        assert _get(f"{base_url}lake/table?uri={nothing_uri}", token)[0] == 404

        # -- in the browser: log in, open the page from the navigation -----------------------
        driver = _browser()
        # (Airflow's single-page app redirects while it loads: a lookup that lands mid-way fails
        # "aborted by navigation"; waits look again, the login starts over)
        wait = WebDriverWait(driver, 60, ignored_exceptions=(WebDriverException,))
        deadline = time.monotonic() + 120
        while True:
            try:
                driver.get(base_url)
                wait.until(ec.presence_of_element_located((By.NAME, "username"))).send_keys("admin")
                driver.find_element(By.NAME, "password").send_keys(PASSWORD)
                driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
                break
            except WebDriverException:
                if time.monotonic() > deadline:
                    raise
        wait.until(ec.element_to_be_clickable((By.XPATH, "//a[.//*[normalize-space()='Lake tables'] or "
                                                         "normalize-space()='Lake tables']"))).click()
        wait.until(ec.url_contains("/plugin/lake_tables"))
        wait.until(ec.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
        wait.until(ec.presence_of_element_located((By.XPATH, "//h1[normalize-space()='Lake tables']")))
        rows = {r.find_element(By.CSS_SELECTOR, "td a").text: r.find_element(By.CSS_SELECTOR, ".status").text
                for r in driver.find_elements(By.CSS_SELECTOR, "tr") if r.find_elements(By.CSS_SELECTOR, ".status")}
        assert rows == {"orders": "behind", "events": "behind", "customers": "ok", "returns": "no table yet"}
        driver.switch_to.default_content()
        _shot(driver, tmp_path, "lake-tables")

        # -- one table: decisions, thresholds, the timeline picture -----------------------------
        driver.switch_to.frame(driver.find_element(By.TAG_NAME, "iframe"))
        driver.find_element(By.LINK_TEXT, "orders").click()
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "img.timeline")))
        text = driver.find_element(By.TAG_NAME, "body").text
        assert f"execute compaction plan {facts['plan']}" in text
        assert "delta_commits_since_compaction is 8, above 5" in text
        wait.until(lambda d: d.execute_script(
            "const i = document.querySelector('img.timeline'); return i.complete && i.naturalWidth > 300"))
        driver.switch_to.default_content()
        _shot(driver, tmp_path, "lake-table-orders")

        # -- from the table's Asset to its page --------------------------------------------------
        asset_id = by_uri[orders_uri]["id"]
        driver.get(f"{base_url}assets/{asset_id}")
        wait.until(ec.presence_of_element_located((By.XPATH, f"//*[contains(text(), '{PAGE_KEY}')]")))
        _shot(driver, tmp_path, "lake-table-asset")
        driver.get(base_url + by_uri[orders_uri]["extra"][PAGE_KEY])
        wait.until(ec.url_contains("/lake/tables/orders"))
        assert "execute compaction plan" in driver.find_element(By.TAG_NAME, "body").text
    finally:
        if driver is not None:
            driver.quit()
        airflow.close()
