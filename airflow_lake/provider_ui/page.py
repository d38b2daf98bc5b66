"""The HTML of the "Lake tables" page: the tables the maintenance manager knows, each with its
health (`TableHealth`), what its policy would run now (`MaintenancePlan`) and its timeline
picture. Pure functions of `TableView`s; every value is escaped; links are relative (the page
works behind a proxy's path prefix), and links into Airflow's UI open in the top window (the
page is shown in an iframe)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from typing import Any
from urllib.parse import quote

OK, DUE, BEHIND, UNREADABLE, NO_TABLE = "ok", "due", "behind", "unreadable", "no table yet"
MISSING = "no table at this path yet: its maintenance runs skip"
STATUS_COLORS = {OK: "#2e7d32", DUE: "#1565c0", BEHIND: "#c62828", UNREADABLE: "#6d4c41", NO_TABLE: "#757575"}


# the navigation entry's icon: a table over waves
ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="#4a90d9" '
        'stroke-width="2" stroke-linecap="round"><rect x="4" y="3" width="16" height="11" rx="1"/>'
        '<path d="M4 8h16M10 3v11"/><path d="M3 18c2-1.5 4-1.5 6 0s4 1.5 6 0 4-1.5 6 0"/></svg>')


@dataclass(frozen=True)
class TableView:
    """One table as the page shows it: its name, location, maintenance DAG and Asset, and its
    health and plan as dicts (`TableHealth.as_dict`, `MaintenancePlan.as_dict`), or the error
    that kept them from being read."""

    name: str
    path: str
    dag_id: str | None
    asset_uri: str | None
    asset_id: int | None = None
    health: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    error: str | None = None
    missing: bool = False  # the path holds no table yet

    @property
    def status(self) -> str:
        if self.missing:
            return NO_TABLE
        if self.error or self.health is None:
            return UNREADABLE
        return BEHIND if (self.plan or {}).get("breaches") else DUE if self.due() else OK

    def due(self) -> list[str]:
        """The services the policy would run now, in the manager's order."""
        plan = self.plan or {}
        out = [f"roll back {len(plan['rollback'])}"] if plan.get("rollback") else []
        out += [f"execute {len(plan['execute'])} plan(s)"] if plan.get("execute") else []
        out += [step for step in ("schedule", "clean", "archive") if (plan.get(step) or {}).get("due")]
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "dag_id": self.dag_id, "asset_uri": self.asset_uri,
                "status": self.status, "health": self.health, "plan": self.plan, "error": self.error}


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = max(float(seconds), 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _status(view: TableView) -> str:
    s = view.status
    return f'<span class="status" style="background:{STATUS_COLORS[s]}">{escape(s)}</span>'


def _airflow_link(up: str, route: str, text: str) -> str:
    return f'<a href="{escape(up + route)}" target="_top">{escape(text)}</a>'


def _links(view: TableView, up: str) -> str:
    links = []
    if view.dag_id:
        links.append(_airflow_link(up, f"dags/{quote(view.dag_id, safe='')}", "maintenance DAG"))
    if view.asset_id is not None:
        links.append(_airflow_link(up, f"assets/{view.asset_id}", "Asset"))
    return " · ".join(links) or "–"


def _frame(title: str, body: str, checked: str) -> str:
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root {{ color-scheme: light dark; --line: #d0d7de; --muted: #57606a; --head: #f6f8fa; }}
@media (prefers-color-scheme: dark) {{ :root {{ --line: #30363d; --muted: #8b949e; --head: #161b22; }} }}
body {{ font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px 20px; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }} h2 {{ font-size: 16px; margin: 22px 0 8px; }}
.muted {{ color: var(--muted); }} code {{ font-size: 12.5px; }} code.path {{ word-break: break-all; }}
td:first-child {{ max-width: 22em; }}
table {{ border-collapse: collapse; margin: 6px 0; }}
th, td {{ border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }}
th {{ background: var(--head); font-weight: 600; }} td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
.status {{ color: #fff; border-radius: 10px; padding: 1px 8px; font-size: 12px; white-space: nowrap; }}
.breach {{ color: #c62828; }} .error {{ color: #6d4c41; white-space: pre-wrap; }}
img.timeline {{ max-width: 100%; border: 1px solid var(--line); background: #fff; }}
</style></head><body>
{body}
<p class="muted">Read from each table's timeline at {escape(checked)} (UTC); reload to read again.</p>
</body></html>"""


def _checked() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def table_list(views: list[TableView], *, source: str) -> str:
    """The page of every table: one row each, the worst first."""
    order = [BEHIND, UNREADABLE, DUE, NO_TABLE, OK]
    rows = []
    for v in sorted(views, key=lambda v: (order.index(v.status), v.name)):
        h = v.health or {}
        pending = h.get("pending_compactions") or []
        cells = [
            f'<a href="tables/{quote(v.name, safe="")}">{escape(v.name)}</a><br><code class="muted path">'
            f"{escape(v.path)}</code>",
            _status(v),
            escape(h.get("table_type", "–")) + (f"<br>v{h['table_version']}" if "table_version" in h else ""),
        ]
        if v.health is None:
            message = MISSING if v.missing else v.error or ""
            cells.append(f'<td colspan="6" class="error">{escape(message)}</td>')
        else:
            cells += [
                f'<td class="n">{escape(str(h.get("latest_commit") or "–"))}<br>'
                f'<span class="muted">{_age(h.get("latest_commit_age_s"))} ago</span></td>',
                f'<td class="n">{h.get("delta_commits_since_compaction", 0)}</td>',
                f'<td class="n">{len(pending)}'
                + (f'<br><span class="muted">oldest {_age(h.get("oldest_pending_compaction_age_s"))}</span>'
                   if pending else "") + "</td>",
                f'<td class="n">{len(h.get("stale_instants") or [])}</td>',
                f'<td class="n">{h.get("active_commits", 0)}</td>',
                f'<td>{escape(", ".join(v.due()) or "nothing")}</td>',
            ]
        cells.append(_links(v, "../"))
        rows.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    head = ("<tr><th>table</th><th>status</th><th>type</th><th>latest commit</th><th>delta commits since "
            "compaction</th><th>pending compactions</th><th>stale writes</th><th>active commits</th>"
            "<th>due now</th><th>links</th></tr>")
    body = (f"<h1>Lake tables</h1><p class=\"muted\">{len(views)} tables of {escape(source)}</p>"
            + (f"<table>{head}{''.join(rows)}</table>" if rows else "<p>No tables.</p>"))
    return _frame("Lake tables", body, _checked())


def no_config(setting: str) -> str:
    body = ("<h1>Lake tables</h1><p>No maintenance config is set: name the maintenance manager's YAML file "
            f"with <code>{escape(setting)}</code> (docs/run-a-lake.md, \"The Lake tables page\").</p>")
    return _frame("Lake tables", body, _checked())


def config_error(message: str) -> str:
    """The page in place of the tables when the maintenance config cannot be used (or names no
    such table): what is wrong, as the DAG processor says it."""
    body = f'<h1>Lake tables</h1><p class="error">{escape(message)}</p>'
    return _frame("Lake tables", body, _checked())


def table_page(view: TableView, *, picture: str) -> str:
    """One table: decisions, thresholds, figures, pending instants, backlog and the timeline
    (the picture at `picture`, relative to the page, which is one level below the list)."""
    h, plan = view.health or {}, view.plan or {}
    parts = [f'<p><a href="../">← all tables</a></p><h1>{escape(view.name)} {_status(view)}</h1>',
             f'<p><code>{escape(view.path)}</code> · {_links(view, "../../")}</p>']
    if view.health is None:
        message = MISSING if view.missing else view.error or ""
        parts.append(f'<p class="error">{escape(message)}</p>')
        return _frame(view.name, "".join(parts), _checked())
    if view.plan is not None:
        items = [f"<li>roll back stale write <code>{escape(t)}</code></li>" for t in plan.get("rollback") or []]
        items += [f"<li>execute compaction plan <code>{escape(t)}</code></li>" for t in plan.get("execute") or []]
        for key, name in (("schedule", "schedule a compaction"), ("clean", "clean"), ("archive", "archive")):
            step = plan.get(key) or {}
            verb = name if step.get("due") else f"no need to {name}"
            items.append(f"<li><b>{escape(verb)}</b>: {escape(str(step.get('reason', '')))}</li>")
        parts.append("<h2>What the maintenance manager would run now</h2><ul>" + "".join(items) + "</ul>")
        breaches = plan.get("breaches") or []
        parts.append("<h2>Thresholds</h2>" + ("<ul>" + "".join(f'<li class="breach">{escape(b)}</li>'
                                                                for b in breaches) + "</ul>" if breaches
                                               else "<p>Every figure is within its threshold.</p>"))
    parts.append(f'<h2>Timeline</h2><img class="timeline" alt="timeline of {escape(view.name)}" '
                 f'src="{escape(picture)}">')
    figures = [("table type", h.get("table_type")), ("table version", h.get("table_version")),
               ("metadata table", f"v{h['metadata_table_version']}: {', '.join(h.get('metadata_partitions') or [])}"
                if h.get("metadata_table_version") else "none"),
               ("latest commit", f"{h.get('latest_commit') or '–'} ({_age(h.get('latest_commit_age_s'))} ago)"),
               ("latest compaction", h.get("latest_compaction") or "–"),
               ("delta commits since compaction", h.get("delta_commits_since_compaction")),
               ("compaction trigger", h.get("compaction_trigger")),
               ("compaction due", h.get("compaction_due")), ("compactable slices", h.get("compactable_slices")),
               ("slices with log files", h.get("slices_with_logs")), ("log files", h.get("log_files")),
               ("most log files in a slice", h.get("max_log_files_per_slice")),
               ("oldest pending compaction", _age(h.get("oldest_pending_compaction_age_s"))),
               ("active commits (not archived)", h.get("active_commits")),
               ("instants an archive would move", h.get("archivable_instants")),
               ("archival held back by", h.get("archival_blocked_by") or "–"),
               ("files a clean would delete", f"{h.get('clean_would_delete')} ({h.get('clean_policy')})")]
    parts.append("<h2>Health</h2><table>" + "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>"
                                                     for k, v in figures) + "</table>")
    pending = (h.get("pending_compactions") or []) + (h.get("pending") or [])
    if pending:
        rows = "".join(
            f"<tr><td><code>{escape(p['instant'])}</code></td><td>{escape(p['action'])}</td>"
            f"<td>{escape(p['state'].lower())}</td><td class=\"n\">{_age(p.get('age_s'))}</td>"
            f"<td>{escape(_beat(p))}</td></tr>" for p in pending)
        parts.append("<h2>Pending instants</h2><table><tr><th>instant</th><th>action</th><th>state</th>"
                     f"<th>age</th><th>writer</th></tr>{rows}</table>")
    backlog = h.get("backlog") or []
    if backlog:
        rows = "".join(f"<tr><td>{escape(b['partition'] or '(none)')}</td><td><code>{escape(b['file_id'])}</code></td>"
                       f"<td><code>{escape(b['base_instant'])}</code></td><td class=\"n\">{b['log_files']}</td>"
                       f"<td class=\"n\">{b['delta_commits']}</td></tr>" for b in backlog)
        parts.append("<h2>Compaction backlog (the slices with the most log files)</h2><table><tr><th>partition</th>"
                     "<th>file group</th><th>base instant</th><th>log files</th><th>delta commits</th></tr>"
                     f"{rows}</table>")
    return _frame(view.name, "".join(parts), _checked())


def _beat(p: dict[str, Any]) -> str:
    if p.get("heartbeat_expired") is None:
        return "not started" if p.get("state") == "REQUESTED" else "no heartbeat"
    age = _age(p.get("last_heartbeat_age_s"))
    return f"stale: last heartbeat {age} ago" if p["heartbeat_expired"] else f"alive (heartbeat {age} ago)"
