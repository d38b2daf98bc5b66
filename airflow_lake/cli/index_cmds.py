"""Secondary indexes: `index create|drop|list`, as Hudi's `CREATE INDEX` / `DROP INDEX` (a
Hudi 1.x table with the record index; the build is the `indexing` action on the timeline)."""

from __future__ import annotations

import click

from . import render
from .app import LakeGroup, common, open_table


@click.group("index", cls=LakeGroup)
def index_group() -> None:
    """Secondary indexes of a Hudi 1.x table (equality filters on the column read only the
    file groups holding matching keys)."""


@index_group.command("create")
@common
@click.argument("name")
@click.argument("column")
def index_create(path: str, options: dict[str, str], as_json: bool, name: str, column: str) -> None:
    """Build secondary index NAME on COLUMN from the latest snapshot (Hudi's CREATE INDEX
    NAME ON table (COLUMN)); later writes keep it current."""
    r = open_table(path, options, progress="scanning file groups").create_index(name, column)
    doc = {"table": path, "instant": r.instant, "index": r.partition, "column": r.column, "entries": r.entries}
    render.emit(as_json, doc, lambda out: out.print(
        f"built {r.partition} on {r.column} at {r.instant}: {r.entries} entries"))


@index_group.command("drop")
@common
@click.argument("name")
def index_drop(path: str, options: dict[str, str], as_json: bool, name: str) -> None:
    """Drop secondary index NAME (Hudi's DROP INDEX): its definition, listing and metadata
    table partition."""
    partition = open_table(path, options).drop_index(name)
    doc = {"table": path, "index": partition, "dropped": True}
    render.emit(as_json, doc, lambda out: out.print(f"dropped {partition}"))


@index_group.command("list")
@common
def index_list(path: str, options: dict[str, str], as_json: bool) -> None:
    """The table's secondary indexes: column, version, whether readers use it and our writes
    keep it."""
    indexes = open_table(path, options).indexes()
    doc = {"table": path, "indexes": indexes}
    render.emit(as_json, doc, lambda out: out.print(render.grid(
        f"{len(indexes)} secondary indexes", ["name", "column", "version", "listed", "maintained"],
        [(i["name"], i["column"], i["version"], "yes" if i["listed"] else "no", "yes" if i["maintained"] else "no")
         for i in indexes])))


COMMANDS = [index_group]
