"""The root command, what every command shares (`--json`, `--option`, opening the table, the
progress bar) and the error contract: exit 1 with one line naming the table and instant."""

from __future__ import annotations

import logging
import select
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click
import pyarrow as pa
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..core.engine import LocalEngine, group_slices
from ..core.errors import LakeError
from ..core.table import Table
from ..core.vocabulary import split_options
from . import render

T = TypeVar("T")
R = TypeVar("R")


class CommandError(click.ClickException):
    """A failure the command explains itself (one line on stderr; with `--json` also
    {"error": ...} on stdout); exit code 1."""

    as_json = False

    def show(self, file=None) -> None:
        message = " ".join(self.format_message().split())
        if self.as_json:
            render.emit_json({"error": message})
        click.echo(f"airflow-lake: error: {message}", err=True)


class LakeGroup(click.Group):
    """A group whose commands turn a `LakeError` (and I/O errors) into the one-line error."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CommandError as e:
            e.as_json = bool(ctx.find_root().meta.get("airflow_lake.json"))
            raise
        except LakeError as e:
            raise _failure(ctx, str(e)) from e
        except (OSError, ValueError) as e:
            if isinstance(e, click.ClickException) or (isinstance(e, BrokenPipeError) and output_closed()):
                raise  # (a broken pipe of our own output: its reader closed it, `| head`)
            raise _failure(ctx, f"{type(e).__name__}: {e}") from e


def output_closed() -> bool:
    """Whether the reader of stdout has closed it (a pipe whose other end is gone)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # (no such descriptor: not a pipe we can ask)
        return False


def _failure(ctx: click.Context, message: str) -> CommandError:
    error = CommandError(_with_table(ctx, message))
    error.as_json = bool(ctx.find_root().meta.get("airflow_lake.json"))
    return error


def _with_table(ctx: click.Context, message: str) -> str:
    path = ctx.find_root().meta.get("airflow_lake.path")
    return message if path is None or path in message or "table " in message else f"table {path}: {message}"


def _key_value(_ctx, _param, values: Iterable[str]) -> dict[str, str]:
    out = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {text!r}")
        out[key.strip()] = value
    return out


def json_option(fn: Callable) -> Callable:
    """`--json`: the result as one JSON document (errors too, as {"error": ...})."""

    def remember(ctx: click.Context, _param, value: bool) -> bool:
        if value:
            ctx.find_root().meta["airflow_lake.json"] = True
        return value

    return click.option("--json", "as_json", is_flag=True, callback=remember, expose_value=True,
                        is_eager=True, help="print the result as JSON")(fn)


def table_options(fn: Callable) -> Callable:
    """`--option KEY=VALUE` (repeatable): hoodie.*/airflow_lake.* keys are table options,
    others storage options (pyarrow file-system keywords)."""
    return click.option("--option", "-o", "options", multiple=True, callback=_key_value, metavar="KEY=VALUE",
                        help="table option (hoodie.*, airflow_lake.*) or storage option (e.g. region=...); "
                             "repeatable")(fn)


def path_argument(fn: Callable) -> Callable:
    def remember(ctx: click.Context, _param, value: str) -> str:
        ctx.find_root().meta["airflow_lake.path"] = value
        return value

    return click.argument("path", callback=remember)(fn)


def open_table(path: str, options: dict[str, str] | None = None, *, progress: str | None = None) -> Table:
    """Open the table on the local engine; with `progress`, tasks (files, file groups) show
    a progress bar labelled so on a terminal."""
    table_opts, storage_opts = split_options(options or {})
    engine = ProgressEngine(progress) if progress else None
    return Table.open(path, options=table_opts, storage_options=storage_opts or None, engine=engine)


class ProgressEngine:
    """The local engine, with a progress bar of tasks done / total on stderr when it is a
    terminal (quiet otherwise)."""

    def __init__(self, label: str, parallelism: int = 0):
        self.label = label
        self.inner = LocalEngine(parallelism)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        items = list(items)
        out = render.console(stderr=True)
        if not out.is_terminal or len(items) < 2:
            return self.inner.map(fn, items)
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=out, transient=True) as bar:
            task = bar.add_task(self.label, total=len(items))

            def step(item: T) -> R:
                result = fn(item)
                bar.advance(task)
                return result

            return self.inner.map(step, items)

    def write_groups(self, fn: Callable[[pa.Table], R], rows: pa.Table, key: str) -> list[R]:
        return self.map(fn, group_slices(rows, key, self.inner))


def common(fn: Callable) -> Callable:
    """PATH, `--option` and `--json`: what every table command takes."""
    return path_argument(table_options(json_option(fn)))


@click.group(cls=LakeGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("-v", "--verbose", is_flag=True, help="log what the core does (INFO) on stderr")
@click.version_option(package_name="airflow-lake", prog_name="airflow-lake")
def cli(verbose: bool) -> None:
    """Inspect and operate Apache Hudi tables (versions 6, 8 and 9): timeline, commits, files,
    table services, reads, diagnosis. Runs on the local engine; `--spark` submits the
    Spark job of a table service instead."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")


def register() -> None:
    """Attach every command group (import order = help order)."""
    from . import doctor, index_cmds, read_cmd, service_cmds, table_cmds, timeline_cmds

    for module in (table_cmds, timeline_cmds, service_cmds, index_cmds, read_cmd, doctor):
        for command in module.COMMANDS:
            cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """The console script `airflow-lake`. Output whose reader closed the pipe (`| head`) is
    not an error: exit 0, as when the closing comes at exit (click exits 1 with no line)."""
    try:
        cli.main(args=argv, prog_name="airflow-lake")
    except SystemExit as e:
        if e.code == 1 and type(sys.stdout).__name__.endswith("PacifyFlushWrapper") and output_closed():
            # (click's exit for a broken pipe of stdout)
            sys.exit(0)
        raise


register()
