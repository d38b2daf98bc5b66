"""What to install for an optional part, as a command that works: airflow-lake itself is on no
package index (it is installed from its repository or from the wheel `make dist` builds:
docs/quickstart.md), so a hint names the missing third-party requirement as pyproject.toml's
extra pins it (read from the installed package's metadata)."""

from __future__ import annotations

import re
from importlib import metadata


def install_hint(package: str, extra: str) -> str:
    """`pip install '<requirement>'` for `package`, pinned as the extra `extra` pins it."""
    try:
        requires = metadata.requires("airflow-lake") or []
    except metadata.PackageNotFoundError:
        requires = []
    name = re.compile(rf"{re.escape(package)}(?![\w.-])", re.I)
    for requirement in requires:
        spec, _, marker = requirement.partition(";")
        if name.match(spec.strip()) and re.search(rf"extra\s*==\s*['\"]{re.escape(extra)}['\"]", marker):
            package = spec.strip()
            break
    return f"pip install '{package}' (airflow-lake's `{extra}` extra)"
