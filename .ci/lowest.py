"""Print pip constraints pinning each Airflow requirement of the `provider` extra to the
lowest version its range admits (`name>=X,<Y` -> `name==X`), for `make test-compat`.
The ranges in pyproject.toml are the one place the supported versions are written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def lowest_pins(pyproject: Path = PYPROJECT) -> list[str]:
    """`name==lowest` of every `apache-airflow*` requirement of the provider extra."""
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["provider"]
    pins = []
    for requirement in extra:
        match = re.fullmatch(r"(apache-airflow[a-z-]*)\s*>=\s*([0-9][0-9.]*)\s*(,.*)?", requirement.strip())
        if match:
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


if __name__ == "__main__":
    pins = lowest_pins()
    if not pins:
        sys.exit("no apache-airflow* >= ranges in the provider extra of pyproject.toml")
    print("\n".join(pins))
