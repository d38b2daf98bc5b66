"""`table create`, `table show` and `files`: what a table is and which files it holds."""

from __future__ import annotations

from functools import partial

import click
import pyarrow.parquet as pq

from ..core.formats.lance import EXTENSION as LANCE
from ..core.formats.lance import lance_num_rows
from ..core.model import BaseFile
from ..core.read import Reader
from ..core.storage import Storage
from ..core.table import Table
from ..core.view import FileSystemView, list_partition_files
from ..core.vocabulary import COPY_ON_WRITE, TABLE_TYPES
from . import render
from .app import LakeGroup, common, open_table, split_options


@click.group("table", cls=LakeGroup)
def table_group() -> None:
    """Create a table, or show its properties, schema, partitions and sizes."""


@table_group.command("create")
@common
@click.option("--name", required=True, help="hoodie.table.name")
@click.option("--type", "table_type", type=click.Choice(TABLE_TYPES.spellings, case_sensitive=False),
              help="default COPY_ON_WRITE")
@click.option("--record-key", required=True, help="record key field(s), comma separated")
@click.option("--precombine-field", help="ordering field: the larger value wins")
@click.option("--partition-fields", help="partition field(s), comma separated (f:TIMESTAMP typed)")
@click.option("--hive-style", is_flag=True, help="partition folders named field=value")
@click.option("--if-missing", is_flag=True, help="when PATH holds a table, keep it: each setting given must "
                                                 "equal the table's own")
def create(path: str, options: dict, as_json: bool, name: str, table_type: str | None, record_key: str,
           precombine_field: str | None, partition_fields: str | None, hive_style: bool, if_missing: bool) -> None:
    """Create an empty table at PATH (hoodie.properties and the .hoodie folders)."""
    table_opts, storage_opts = split_options(options)
    settings = {"name": name, "table_type": table_type, "record_key": record_key,
                "precombine_field": precombine_field, "partition_fields": partition_fields,
                "hive_style_partitioning": hive_style or None}
    if if_missing:
        table, created = Table.open_or_create(path, **settings, options=table_opts,
                                              storage_options=storage_opts or None)
    else:
        table, created = Table.create(path, name=name, table_type=table_type or COPY_ON_WRITE,
                                      record_key=record_key, precombine_field=precombine_field,
                                      partition_fields=partition_fields or (), hive_style_partitioning=hive_style,
                                      options=table_opts, storage_options=storage_opts or None), True
    doc = {"table": table.storage.uri, "type": table.config.table_type, "created": created,
           "properties": dict(table.config.props)}
    verb = "created" if created else "kept the existing"
    render.emit(as_json, doc, lambda out: out.print(f"{verb} {table.config.table_type} table "
                                                    f"{table.config.name!r} at {table.storage.uri}"))


def _footer_rows(storage: Storage, base: BaseFile) -> int:
    if base.name.endswith(LANCE):
        return lance_num_rows(storage, base.path)
    return pq.read_metadata(storage.open_input(base.path)).num_rows


def describe(table: Table) -> dict:
    """Properties, schema, partitions with file groups, files, rows (base-file footers) and
    sizes of the latest slices, and the timeline's extent."""
    timeline = table.timeline
    files = list_partition_files(table.storage)
    view = FileSystemView(table.storage, timeline, partition_files=files)
    latest = {p: [view.read_slice(g) for g in view.file_groups(p)] for p in view.partitions}
    bases = [base for slices in latest.values() for base, _ in slices if base is not None]
    counted = table.engine.map(partial(_footer_rows, table.storage), bases)
    footer_rows = dict(zip([b.path for b in bases], counted, strict=True))
    partitions = []
    for p, slices in latest.items():
        mine = [base for base, _ in slices if base is not None]
        logs = [lf for _, slice_logs in slices for lf in slice_logs]
        partitions.append({"partition": p, "file_groups": len(slices), "base_files": len(mine),
                           "log_files": len(logs), "rows_in_base_files": sum(footer_rows[b.path] for b in mine),
                           "bytes": sum(b.size for b in mine) + sum(lf.size for lf in logs)})
    on_storage = sum(len(v) for v in files.values())
    commits = timeline.commits().completed()
    schema = table.schema()
    return {
        "table": table.storage.uri, "name": table.config.name, "type": table.config.table_type,
        "version": table.config.version, "record_key": table.config.record_key_fields,
        "precombine_field": table.config.precombine_field, "partition_fields": table.config.partition_fields,
        "properties": dict(sorted(table.config.props.items())),
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in schema],
        "partitions": partitions,
        "totals": {"partitions": len(partitions), "file_groups": sum(p["file_groups"] for p in partitions),
                   "base_files": sum(p["base_files"] for p in partitions),
                   "log_files": sum(p["log_files"] for p in partitions),
                   "rows_in_base_files": sum(p["rows_in_base_files"] for p in partitions),
                   "bytes": sum(p["bytes"] for p in partitions),
                   "data_files_on_storage": on_storage,
                   "bytes_on_storage": sum(f.size for v in files.values() for f in v)},
        "timeline": {"instants": len(timeline), "completed_commits": len(commits),
                     "first": commits.first.time if commits.first else None,
                     "last": commits.last.time if commits.last else None,
                     "pending": [f"{i.time}.{i.action}.{i.state.name}" for i in timeline.pending()]},
    }


@table_group.command("show")
@common
def show(path: str, options: dict, as_json: bool) -> None:
    """Properties, schema, partitions, file and row counts, sizes of the table at PATH.
    Rows are counted from base-file footers (on MERGE_ON_READ, log records come on top)."""
    doc = describe(open_table(path, options, progress="reading base-file footers"))

    def human(out) -> None:
        t = doc["totals"]
        out.print(render.pairs(f"{doc['name']} ({doc['type']}, version {doc['version']}) at {doc['table']}", [
            ("record key", ",".join(doc["record_key"])), ("precombine", doc["precombine_field"] or "-"),
            ("partition fields", ",".join(doc["partition_fields"]) or "-"),
            ("commits", f"{doc['timeline']['completed_commits']} completed, "
                        f"{doc['timeline']['first'] or '-'} .. {doc['timeline']['last'] or '-'}"),
            ("pending", ", ".join(doc["timeline"]["pending"]) or "none"),
            ("latest slices", f"{t['file_groups']} file groups, {t['base_files']} base files, "
                              f"{t['log_files']} log files, {t['rows_in_base_files']} rows in base files, "
                              f"{render.size(t['bytes'])}"),
            ("on storage", f"{t['data_files_on_storage']} data files, {render.size(t['bytes_on_storage'])}"),
        ]))
        out.print()
        out.print(render.grid("schema", ["column", "type", "nullable"],
                              [(f["name"], f["type"], "yes" if f["nullable"] else "no") for f in doc["schema"]]))
        out.print()
        out.print(render.grid("partitions", ["partition", "file groups", "base", "log", "rows", "size"],
                              [(p["partition"] or "(none)", p["file_groups"], p["base_files"], p["log_files"],
                                p["rows_in_base_files"], render.size(p["bytes"])) for p in doc["partitions"]],
                              right=["file groups", "base", "log", "rows", "size"]))
        out.print()
        out.print(render.pairs("hoodie.properties", doc["properties"].items()))

    render.emit(as_json, doc, human)


@click.command("files")
@common
@click.option("--partition", "-p", help="only this partition path")
@click.option("--as-of", help="the view as of this instant or ISO date / date-time (default: the latest)")
def files(path: str, options: dict, as_json: bool, partition: str | None, as_of: str | None) -> None:
    """File groups, their slices, base and log files with sizes; a slice under a pending
    compaction plan is marked."""
    table = open_table(path, options)
    reader = Reader(table)
    parts = [partition] if partition is not None else None
    as_of = reader.as_of(as_of)  # (refused where the cleaner removed what it needs, as a read)
    view = FileSystemView(table.storage, reader.timeline, as_of, list_partition_files(table.storage, parts))
    groups = []
    for g in view.file_groups(partition):
        groups.append({
            "partition": g.partition, "file_id": g.file_id,
            "pending_compaction": view.pending_compaction_of(g.partition, g.file_id),
            "slices": [{"base_instant": s.base_instant,
                        "base_file": {"name": s.base_file.name, "size": s.base_file.size} if s.base_file else None,
                        "log_files": [{"name": lf.name, "size": lf.size} for lf in s.log_files]}
                       for s in g.slices]})
    doc = {"table": table.storage.uri, "as_of": as_of, "partition": partition, "file_groups": groups}

    def human(out) -> None:
        rows = []
        for g in groups:
            for n, s in enumerate(g["slices"]):
                mark = " (compacting: " + g["pending_compaction"] + ")" \
                    if g["pending_compaction"] and n == len(g["slices"]) - 1 else ""
                size = (s["base_file"]["size"] if s["base_file"] else 0) + sum(lf["size"] for lf in s["log_files"])
                rows.append(((g["partition"] or "(none)") if n == 0 else "", g["file_id"] if n == 0 else "",
                             s["base_instant"] + mark,
                             s["base_file"]["name"] if s["base_file"] else "-", len(s["log_files"]),
                             render.size(size)))
                rows += [("", "", "", f"  {lf['name']} ({render.size(lf['size'])})", "", "")
                         for lf in s["log_files"]]
        out.print(render.grid(f"{len(groups)} file groups", ["partition", "file id", "slice", "base file / log files",
                                                             "logs", "size"], rows, right=["logs", "size"]))

    render.emit(as_json, doc, human)


COMMANDS = [table_group, files]
