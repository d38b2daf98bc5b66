"""The run-token index: which instants were started with an `airflow_lake.token`.

One empty file per (token, instant): `.hoodie/.aux/airflow_lake/tokens/<sha256(token)[:32]>/
<time>.<action>`, created (create-if-absent) under the table lock just before the instant's
first state file, so every instant carrying a token in its metadata has an entry. An entry
only says "this instant was started with this token": whether it is done is read from the
timeline (a pending, rolled-back or never-created instant is not done). A lookup lists one
small folder (the attempts of one run, usually one) instead of reading every commit, so its
cost does not grow with the timeline. Apache Hudi ignores `.hoodie/.aux/airflow_lake`.

Archive writes no instant: its entry (`<time>.archive`, a time taken like an instant's) is
created once it is done and holds its result as JSON, so the entry alone says it is done.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidOptionError
from ..storage import Storage
from ..values import describe_value
from .instant import INSTANT_TIME

TOKEN_KEY = "airflow_lake.token"
FOLDER = ".hoodie/.aux/airflow_lake/tokens"
ARCHIVE = "archive"  # the one service without an instant: its entry is its completion


def token_folder(token: str) -> str:
    return f"{FOLDER}/{hashlib.sha256(token.encode()).hexdigest()[:32]}"


def record(storage: Storage, token: str | None, time: str, action: str) -> None:
    """Note that the instant `time` (`action`) is started with `token` (no-op without one)."""
    if token:
        storage.create(f"{token_folder(token)}/{time}.{action}", token.encode())


def entries(storage: Storage, token: str) -> list[tuple[str, str]]:
    """(time, action) of every instant started with `token`, newest first."""
    found = []
    for status in storage.list(token_folder(token)):
        time, _, action = status.name.partition(".")
        if INSTANT_TIME.fullmatch(time) and action:
            found.append((time, action))
    return sorted(found, reverse=True)


def check_extra_metadata(where: str, extra_metadata: Any) -> dict[str, str]:
    """`extra_metadata` as a commit keeps it (Hudi's `extraMetadata` is a Map<String, String>),
    else an `InvalidOptionError` naming `where` (the table), the key and the value."""
    if extra_metadata is None:
        return {}
    if not isinstance(extra_metadata, Mapping):
        raise InvalidOptionError(f"{where}: extra_metadata={describe_value(extra_metadata)} is not a mapping of "
                                 "text keys to text values")
    for key, value in extra_metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidOptionError(
                f"{where}: extra_metadata[{describe_value(key)}]={describe_value(value)} ({type(value).__name__}): "
                "commit metadata maps text keys to text values (Hudi's Map<String, String>); nothing was written")
    return dict(extra_metadata)


def token_of(extra_metadata: dict[str, str] | None, where: str) -> str | None:
    """The run token of `extra_metadata` (checked: `check_extra_metadata`), if any."""
    return check_extra_metadata(where, extra_metadata).get(TOKEN_KEY) or None


def record_result(storage: Storage, token: str | None, time: str, action: str, result: dict[str, Any]) -> None:
    """Note that `action`, which writes no instant, is done for `token` with `result`."""
    if token:
        storage.create(f"{token_folder(token)}/{time}.{action}", json.dumps(result, sort_keys=True).encode())


def stored_result(storage: Storage, token: str, time: str, action: str) -> dict[str, Any]:
    """The result `record_result` kept."""
    return json.loads(storage.read(f"{token_folder(token)}/{time}.{action}"))
