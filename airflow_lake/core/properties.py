"""`hoodie.properties` on storage: Java `.properties` text, the table checksum, and loading
and saving a `TableConfig`."""

from __future__ import annotations

import zlib
from datetime import datetime, timezone

from .config import TableConfig
from .errors import InvalidTableError, TableExistsError, TableNotFoundError
from .storage import Storage

PROPERTIES = ".hoodie/hoodie.properties"
PROPERTIES_BACKUP = ".hoodie/hoodie.properties.backup"


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in ":=#!":
            out.append("\\" + ch)
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\f":
            out.append("\\f")
        elif code < 0x20 or code > 0x7E:
            if code > 0xFFFF:  # UTF-16 surrogate pair, as Java stores it
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def _unescape(text: str) -> str:
    if "\\" not in text:  # (most keys and values: nothing to undo)
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    # re-join UTF-16 surrogate pairs
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text (logical lines, escapes, `=`/`:`/space separators)."""
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        key_end = 0
        while key_end < len(line):
            c = line[key_end]
            if c == "\\":
                key_end += 2
                continue
            if c in "=: \t\f":
                break
            key_end += 1
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t\f")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t\f")
        props[_unescape(key)] = _unescape(rest)
    return props


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def render_properties(props: dict[str, str], *, now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    head = [
        f"#Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z",
        "#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"),
    ]
    body = [f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items()]
    return "\n".join(head + body) + "\n"


def table_checksum(props: dict[str, str]) -> str:
    """CRC-32 of `<database>.<table>` (spec §1.3)."""
    db = props.get("hoodie.database.name", "")
    return str(zlib.crc32(f"{db}.{props['hoodie.table.name']}".encode()))


def load(storage: Storage, *, again: bool = True) -> TableConfig:
    """Read `hoodie.properties` (falling back to the backup) and validate the checksum."""
    errors = []
    for path in (PROPERTIES, PROPERTIES_BACKUP):
        if not storage.exists(path):
            continue
        try:  # a writer updating the table removes, then writes the file again (Java's protocol too)
            text = storage.read(path, replaced=True)
        except FileNotFoundError:
            continue
        props = parse_properties(text.decode("latin-1"))
        problem = _validate(props)
        if problem is None:
            return TableConfig(props)
        errors.append(f"{path}: {problem}")
    if not errors:
        instant = timeline_left(storage)
        if instant is not None and again and storage.exists(PROPERTIES):  # (a writer rewrote it meanwhile)
            return load(storage, again=False)
        if instant is not None:
            raise InvalidTableError(f"table {storage.uri}: {PROPERTIES} is missing (and its backup), but the timeline "
                                    f"holds instants ({instant}...): the table's settings are lost, not the table; "
                                    f"restore {PROPERTIES} from a copy of it (nothing was changed)")
        raise TableNotFoundError(f"{storage.uri} is not a Hudi table: no {PROPERTIES}")
    raise InvalidTableError(f"table {storage.uri}: invalid table config ({'; '.join(errors)})")


def timeline_left(storage: Storage) -> str | None:
    """The name of a timeline file in `.hoodie/` or `.hoodie/timeline/` (a table that lost its
    `hoodie.properties`), or None."""
    from .timeline.instant import Instant

    for folder in (".hoodie", ".hoodie/timeline"):
        for name, _ in storage.list_names(folder):
            if Instant.parse(name) is not None:
                return f"{folder}/{name}"
    return None


def save(storage: Storage, config: TableConfig, *, create: bool = False) -> None:
    """Write `config` as `hoodie.properties` with a fresh checksum (Java's backup protocol on
    update)."""
    config.props["hoodie.table.checksum"] = table_checksum(config.props)
    text = render_properties(config.props).encode("latin-1")
    if create:
        if not storage.create(PROPERTIES, text):
            raise TableExistsError(f"{storage.uri} already holds a Hudi table ({PROPERTIES} appeared meanwhile: "
                                   "another writer created it)")
        return
    if storage.exists(PROPERTIES_BACKUP):
        storage.write(PROPERTIES, storage.read(PROPERTIES_BACKUP))
    storage.write(PROPERTIES_BACKUP, storage.read(PROPERTIES))
    storage.write(PROPERTIES, text)
    load(storage)
    storage.delete(PROPERTIES_BACKUP)


def _validate(props: dict[str, str]) -> str | None:
    if "hoodie.table.name" not in props:
        return "hoodie.table.name is missing"
    checksum = props.get("hoodie.table.checksum")
    if checksum is None:
        return "hoodie.table.checksum is missing"
    expected = table_checksum(props)
    if checksum != expected:
        return f"checksum {checksum} does not match {expected}"
    return None
