"""Output: rich tables for people, one JSON document with `--json`, sizes and times."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from rich.console import Console
from rich.table import Table as RichTable

from ..core.timeline.clock import instant_epoch_ms  # noqa: F401 (callers use render.instant_epoch_ms)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader closed the pipe (`| head`): rich exits 1 with no line; that is no error."""
        try:
            super().on_broken_pipe()
        except SystemExit:
            raise SystemExit(0) from None


def console(*, stderr: bool = False) -> Console:
    """A console on the current stdout (stderr); wide when not a terminal, so piped output
    keeps whole paths and instant times on one line."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    kind = Console if stderr else _Console  # (a broken stderr says nothing of the command's output)
    return kind(file=stream, width=None if terminal else 4000, soft_wrap=not terminal,
                highlight=False, no_color=not terminal)


def emit_json(data: Any) -> None:
    """The command's result as one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def emit(as_json: bool, data: Any, human: Callable[[Console], None]) -> None:
    """`data` as JSON, or what `human` prints (lines without the padding rich adds)."""
    if as_json:
        emit_json(data)
        return
    out = console()
    with out.capture() as captured:
        human(out)
    sys.stdout.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def grid(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
         right: Iterable[str] = (), header: bool = True) -> RichTable:
    """A rich table; `right` names the columns aligned right (numbers)."""
    right = set(right)
    table = RichTable(title=title, title_justify="left", show_edge=False, pad_edge=False, box=None,
                      header_style="bold", show_header=header)
    for c in columns:
        table.add_column(c, justify="right" if c in right else "left", overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    return table


def pairs(title: str | None, items: Iterable[tuple[str, Any]]) -> RichTable:
    """A two-column key/value table."""
    return grid(title, ["", ""], ((f"[bold]{k}[/bold]", v) for k, v in items), header=False)


def size(n: int | float | None) -> str:
    if n is None:
        return ""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def when(ms: int | None) -> str:
    """Epoch ms as local `YYYY-MM-DD HH:MM:SS` (UTC marked)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def age(ms: int | None, now_ms: int | None = None) -> str:
    """`3h 12m`: how long ago epoch ms `ms` was."""
    if ms is None:
        return "never"
    seconds = max(0, int(((now_ms if now_ms is not None else time.time() * 1000) - ms) / 1000))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
