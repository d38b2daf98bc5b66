"""How secret options reach a job without a command line: the caller (the hook, the CLI)
puts them, JSON-encoded, in spark-submit's environment (`SECRET_OPTIONS_ENV`), which the JVM
and the Python driver inherit and only their user can read (`/proc/<pid>/environ` is 0400);
the job takes them out of its environment at start. Executors get the storage options inside
the pickled `TableContext` of their tasks, as before. Non-secret options stay `--option`s.
No pyspark here."""

from __future__ import annotations

import json
import os
from collections.abc import MutableMapping

SECRET_OPTIONS_ENV = "AIRFLOW_LAKE_SECRET_OPTIONS"


def encode(values: dict[str, str]) -> dict[str, str]:
    """The environment carrying `values` (`KEY` -> the text an `--option KEY=...` would carry)."""
    return {SECRET_OPTIONS_ENV: json.dumps(values)} if values else {}


def take_secret_options(environ: MutableMapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The (key, text) pairs of the secret options in `environ` (default `os.environ`),
    removed from it so that nothing this process starts later inherits them."""
    environ = os.environ if environ is None else environ
    raw = environ.pop(SECRET_OPTIONS_ENV, None)
    if not raw:
        return []
    try:
        values = json.loads(raw)
    except ValueError:
        values = None
    if not isinstance(values, dict):
        raise ValueError(f"{SECRET_OPTIONS_ENV} is not a JSON object of option texts")
    return [(str(k), str(v)) for k, v in values.items()]
