"""Direct write markers (spec §5.6): `.hoodie/.temp/<instant>/<partition>/<file>.marker.<IO>`."""

from __future__ import annotations

from ..storage import Storage

TEMP = ".hoodie/.temp"
CREATE = "CREATE"
MERGE = "MERGE"
APPEND = "APPEND"


def marker_dir(instant: str) -> str:
    return f"{TEMP}/{instant}"


def create_marker(storage: Storage, instant: str, data_file_path: str, io_type: str) -> None:
    """Record (before writing it) that this instant may create `data_file_path`. The name is
    unique (it carries the write token) and the file empty: a plain write, nothing to tear."""
    storage.write(f"{marker_dir(instant)}/{data_file_path}.marker.{io_type}", b"")


def read_markers(storage: Storage, instant: str) -> list[tuple[str, str]]:
    """(data-file path relative to the base path, IO type) of every marker of the instant.

    Direct markers are listed; timeline-server `MARKERS<n>` files are read as well.
    """
    root = marker_dir(instant)
    found: set[tuple[str, str]] = set()

    def add(rel: str) -> None:
        cut = rel.rindex(".marker.")
        found.add((rel[:cut], rel[cut + len(".marker."):]))

    for f in storage.list(root, recursive=True):
        if ".marker." in f.name:
            add(f.path[len(root) + 1 :])
        elif f.name.startswith("MARKERS") and f.name != "MARKERS.type":
            for line in storage.read(f.path).decode().splitlines():
                if ".marker." in line.strip():
                    add(line.strip())
    return sorted(found)


def delete_markers(storage: Storage, instant: str) -> None:
    storage.delete_dir(marker_dir(instant))
