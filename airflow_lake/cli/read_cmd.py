"""`read`: snapshot, as-of, read-optimized and incremental reads, as a table, JSON, CSV or parquet."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import click
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console

from ..core.errors import InvalidOptionError
from ..core.read import FILTER_OPS
from ..core.schema import META_SCHEMA
from . import render
from .app import common, open_table

FILTER = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*("
                    + "|".join(re.escape(op) for op in sorted(FILTER_OPS, key=len, reverse=True))
                    + r")\s*(.*?)\s*$", re.IGNORECASE)
TABLE_ROWS = 50  # rows a human table shows without --limit


def parse_filter(text: str, schema: pa.Schema, uri: str) -> tuple[str, str, Any]:
    """`fare > 20`, `city = sao_paulo`, `uuid in t1,t2` -> a pyarrow DNF tuple, the value cast
    to the column's type."""
    m = FILTER.match(text)
    if not m:
        raise InvalidOptionError(f"table {uri}: filter {text!r} is not COLUMN OP VALUE "
                                 "(ops: = != < <= > >= in, not in)")
    column, op, raw = m.group(1), m.group(2).lower(), m.group(3)
    if column not in schema.names:
        raise InvalidOptionError(f"table {uri}: filter {text!r} names no column of the table "
                                 f"({', '.join(schema.names)})")
    kind = schema.field(column).type
    op = "=" if op == "==" else op
    if op in ("in", "not in"):
        return column, op, [_typed(v.strip(), kind, text, uri) for v in raw.strip("()[]").split(",") if v.strip()]
    return column, op, _typed(raw, kind, text, uri)


def _typed(raw: str, kind: pa.DataType, text: str, uri: str) -> Any:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    try:
        return pc.cast(pa.array([raw]), kind)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidOptionError(f"table {uri}: filter {text!r}: {raw!r} is not a {kind} value") from e


@click.command("read")
@common
@click.option("--as-of", help="time travel: the table as of this instant, or ISO date / date-time in the "
                              "table's timeline zone (2026-11-25, 2026-11-25T10:30:00.250, ...+01:00)")
@click.option("--incremental", "start", metavar="START", help="rows whose latest write is a commit after START")
@click.option("--end", metavar="END", help="with --incremental: up to END (default: the latest commit)")
@click.option("--read-optimized", is_flag=True, help="base files only (MERGE_ON_READ without log files)")
@click.option("--columns", "-c", help="columns to return, comma separated (default: all, meta columns too)")
@click.option("--filter", "-f", "filters", multiple=True, metavar="'COL OP VALUE'",
              help="keep rows where COL OP VALUE (=, !=, <, <=, >, >=, in, not in; repeatable, AND)")
@click.option("--limit", "-n", type=click.IntRange(min=0),
              help=f"at most N rows (a table shows {TABLE_ROWS} without it)")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv", "parquet"]), default="table",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write to this file (required for parquet)")
def read(path: str, options: dict[str, str], as_json: bool, as_of: str | None, start: str | None,
         end: str | None, read_optimized: bool, columns: str | None, filters: tuple[str, ...],
         limit: int | None, fmt: str, output: str | None) -> None:
    """Read the table at PATH: the latest snapshot, `--as-of` an instant, or `--incremental
    START [--end END]`; a progress bar counts the file groups read."""
    fmt = "json" if as_json else fmt
    table = open_table(path, options, progress="reading file groups")
    uri = table.storage.uri
    if end and not start:
        raise InvalidOptionError(f"table {uri}: --end needs --incremental START")
    if start and (as_of or read_optimized):
        raise InvalidOptionError(f"table {uri}: --incremental cannot be combined with --as-of or --read-optimized")
    if fmt == "parquet" and not output:
        raise InvalidOptionError(f"table {uri}: --format parquet needs --output FILE")
    cols = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    schema = pa.schema(list(META_SCHEMA) + [f for f in table.schema() if f.name not in META_SCHEMA.names])
    if cols:
        missing = [c for c in cols if c not in schema.names]
        if missing:
            raise InvalidOptionError(f"table {uri}: no column {missing[0]!r} (columns: {', '.join(schema.names)})")
    dnf = [parse_filter(f, schema, uri) for f in filters] or None
    if start:
        data = table.read_incremental(start, end, columns=cols, filters=dnf)
    else:
        data = table.read(as_of=as_of, columns=cols, filters=dnf,
                          query_type="read_optimized" if read_optimized else "snapshot")
    total = data.num_rows
    shown = limit if limit is not None else (TABLE_ROWS if fmt == "table" and not output else None)
    if shown is not None:
        data = data.slice(0, max(shown, 0))
    write(data, fmt, output, uri)
    if fmt == "table" and not output and data.num_rows < total:
        render.console().print(f"({total - data.num_rows} more rows; --limit N or --format csv for all)")
    elif output:
        render.console(stderr=True).print(f"wrote {data.num_rows} rows to {output}")


def write(data: pa.Table, fmt: str, output: str | None, uri: str) -> None:
    """Rows as a rich table, a JSON array of objects, CSV or parquet, to `output` or stdout."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(data, output)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        nested = [f.name for f in data.schema if pa.types.is_nested(f.type)]
        if nested:
            raise InvalidOptionError(f"table {uri}: column {nested[0]!r} is nested and has no CSV form; use "
                                     "--format json or parquet, or --columns")
        if output:
            pacsv.write_csv(data, output)
        else:
            sink = pa.BufferOutputStream()
            pacsv.write_csv(data, sink)
            sys.stdout.write(sink.getvalue().to_pybytes().decode())
    elif fmt == "json":
        text = json.dumps(data.to_pylist(), indent=None if output else 1, default=str)
        if output:
            with open(output, "w") as f:
                f.write(text + "\n")
        else:
            sys.stdout.write(text + "\n")
    else:
        rows = data.to_pylist()
        grid = render.grid(None, data.column_names, [[r[c] for c in data.column_names] for r in rows])
        if output:
            with open(output, "w") as f:
                Console(file=f, width=220, no_color=True).print(grid)
        else:
            render.emit(False, None, lambda out: out.print(grid))


COMMANDS = [read]
