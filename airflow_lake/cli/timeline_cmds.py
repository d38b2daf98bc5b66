"""`timeline` (and its picture), `commits` and `commit show`."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ..core.errors import InstantNotFoundError
from ..core.timeline.instant import COMMIT_ACTIONS, check_instant_time
from . import history, render
from .app import common, open_table


@click.command("timeline")
@common
@click.option("--all-states", is_flag=True, help="every state file (requested, inflight, completed) with its time")
@click.option("--archived", is_flag=True, help="include the archived timeline")
@click.option("--limit", type=click.IntRange(min=0), help="only the newest N instants of the listing")
@click.option("--svg", "svg", type=click.Path(dir_okay=False), help="draw the timeline into this SVG file")
@click.option("--png", "png", type=click.Path(dir_okay=False), help="draw the timeline into this PNG file")
def timeline(path: str, options: dict, as_json: bool, all_states: bool, archived: bool, limit: int | None,
             svg: str | None, png: str | None) -> None:
    """Instants of the active timeline (and the archived one), oldest first, with the times
    of their states; `--svg`/`--png` draw them: one lane per action, requested -> inflight ->
    completed segments, pending instants highlighted, the archived boundary and the clean's
    retained window marked."""
    table = open_table(path, options)
    view = history.TimelineView.of(table, archived=archived or bool(svg or png))
    records, trusted, bound = view.records, view.times_known, view.retained_from
    archived_count = sum(r.archived for r in records)
    drawn = []
    for target, fmt in ((svg, "svg"), (png, "png")):
        if target:
            from .picture import draw_view

            draw_view(view, Path(target), fmt=fmt, now_ms=int(time.time() * 1000))
            drawn.append(target)
    shown = [r for r in records if archived or not r.archived]
    if limit is not None:
        shown = shown[-limit:] if limit > 0 else []
    doc = {"table": table.storage.uri, "timezone": table.config.timezone, "state_times_known": trusted,
           "archived_instants": archived_count if archived else None, "clean_retains_from": bound,
           "instants": [r.to_json() if all_states else {k: v for k, v in r.to_json().items() if k != "files"}
                        for r in shown],
           "pictures": drawn}

    def human(out) -> None:
        rows = []
        for r in shown:
            ordered = sorted(r.state_ms.items(), key=lambda kv: ["REQUESTED", "INFLIGHT", "COMPLETED"].index(kv[0]))
            # the first state with its date, the later ones with the time of day
            states = " -> ".join(f"{s.lower()} {render.when(ms) if n == 0 else render.when(ms)[11:]}" if ms
                                 else s.lower() for n, (s, ms) in enumerate(ordered))
            rows.append((r.time, r.action, r.state + (" (archived)" if r.archived else ""),
                         ", ".join(r.files) if all_states else states))
        out.print(render.grid(f"{len(shown)} instants", ["instant", "action", "state",
                                                          "state files" if all_states else "state times (UTC)"],
                              rows))
        if bound:
            out.print(f"the latest clean retains commits from {bound}")
        if not trusted:
            out.print("state times unknown: the state files' modification times are not those of the transitions "
                      "(copied or unpacked files)")
        for target in drawn:
            out.print(f"wrote {target}")

    render.emit(as_json, doc, human)


def commit_summary(time_: str, action: str, meta) -> dict:
    """hudi-cli's `commits show` row of one completed commit."""
    stats = meta.write_stats()
    return {
        "instant": time_, "action": action, "operation": meta.operation_type, "compacted": meta.compacted,
        "partitions": len(meta.partition_to_write_stats),
        "files_added": sum(1 for s in stats if (s.get("prevCommit") or "null") == "null"),
        "files_updated": sum(1 for s in stats if (s.get("prevCommit") or "null") != "null"),
        "records_written": sum(s.get("numWrites") or 0 for s in stats),
        "inserts": sum(s.get("numInserts") or 0 for s in stats),
        "updates": sum(s.get("numUpdateWrites") or 0 for s in stats),
        "deletes": sum(s.get("numDeletes") or 0 for s in stats),
        "bytes_written": sum(s.get("totalWriteBytes") or 0 for s in stats),
        "errors": sum(s.get("totalWriteErrors") or 0 for s in stats),
        "replaced_file_groups": len(meta.replaced_file_ids()),
    }


@click.command("commits")
@common
@click.option("--limit", type=click.IntRange(min=0), default=None, help="only the newest N commits")
def commits(path: str, options: dict, as_json: bool, limit: int | None) -> None:
    """Completed commits, deltacommits and replacecommits (compactions complete as commits),
    newest first: operation, partitions and files written, records, bytes."""
    table = open_table(path, options)
    active = table.timeline
    done = list(reversed(active.commits().completed().instants))
    if limit is not None:
        done = done[:limit]
    rows = [commit_summary(i.time, i.action, active.commit_metadata(i)) for i in done]
    doc = {"table": table.storage.uri, "commits": rows}
    columns = ["instant", "action", "operation", "partitions", "files_added", "files_updated", "records_written",
               "inserts", "updates", "deletes", "bytes_written"]

    def human(out) -> None:
        out.print(render.grid(f"{len(rows)} commits (newest first)", [c.replace("_", " ") for c in columns],
                              [[render.size(r[c]) if c == "bytes_written" else r[c] for c in columns] for r in rows],
                              right=[c.replace("_", " ") for c in columns[3:]]))

    render.emit(as_json, doc, human)


@click.group("commit")
def commit_group() -> None:
    """One commit in detail."""


@commit_group.command("show")
@common
@click.argument("instant")
def commit_show(path: str, options: dict, as_json: bool, instant: str) -> None:
    """Write stats of the completed commit INSTANT per partition and file."""
    check_instant_time(instant)
    table = open_table(path, options)
    active = table.timeline
    found = [i for i in active.completed() if i.time == instant and i.action in COMMIT_ACTIONS]
    if not found:
        state = [f"{i.action} {i.state.name}" for i in active if i.time == instant]
        raise InstantNotFoundError(f"table {table.storage.uri}: instant {instant} is not a completed commit on the "
                                   f"active timeline" + (f" (it is {', '.join(state)})" if state else ""))
    meta = active.commit_metadata(found[0])
    partitions = []
    for p, stats in sorted(meta.partition_to_write_stats.items()):
        partitions.append({"partition": p, "files": [
            {k: s.get(k) for k in ("fileId", "path", "prevCommit", "numWrites", "numInserts", "numUpdateWrites",
                                    "numDeletes", "totalWriteBytes", "fileSizeInBytes", "totalWriteErrors",
                                    "totalLogRecords", "totalLogBlocks")} for s in stats]})
    doc = {"table": table.storage.uri, **commit_summary(instant, found[0].action, meta),
           "extra_metadata": {k: v for k, v in meta.extra_metadata.items() if k != "schema"},
           "replaced_file_ids": {p: ids for p, ids in (meta.partition_to_replace_file_ids or {}).items()},
           "partitions_detail": partitions}

    def human(out) -> None:
        out.print(f"{found[0].action} {instant}: {meta.operation_type}, {doc['records_written']} records written "
                  f"({doc['inserts']} inserts, {doc['updates']} updates, {doc['deletes']} deletes), "
                  f"{render.size(doc['bytes_written'])}")
        rows = []
        for p in partitions:
            fs = p["files"]
            total = {k: sum(f[k] or 0 for f in fs) for k in ("numWrites", "numInserts", "numUpdateWrites",
                                                             "numDeletes", "totalWriteBytes")}
            rows.append((p["partition"] or "(none)", f"{len(fs)} files", "", total["numWrites"], total["numInserts"],
                         total["numUpdateWrites"], total["numDeletes"], render.size(total["totalWriteBytes"])))
            for f in fs:
                rows.append(("", (f["path"] or "").rsplit("/", 1)[-1], f["prevCommit"], f["numWrites"],
                             f["numInserts"], f["numUpdateWrites"], f["numDeletes"],
                             render.size(f["totalWriteBytes"])))
        nums = ["writes", "inserts", "updates", "deletes", "bytes"]
        out.print(render.grid(None, ["partition", "file", "prev commit", *nums], rows, right=nums))
        if doc["replaced_file_ids"]:
            out.print(f"replaced file groups: {doc['replaced_file_ids']}")
        if doc["extra_metadata"]:
            out.print(render.pairs("extra metadata", doc["extra_metadata"].items()))

    render.emit(as_json, doc, human)


COMMANDS = [timeline, commits, commit_group]
