"""What a clean deletes (spec §4.3, §10), decided from a timeline and a file-system view alone:
the data table's clean and the metadata table's own clean plan with it."""

from __future__ import annotations

from datetime import timedelta

from .model import FileGroup
from .timeline.clock import format_instant, parse_instant
from .timeline.instant import SAVEPOINT, Instant
from .timeline.metadata import read_avro
from .timeline.payloads import SavepointMetadata
from .view import FileSystemView
from .vocabulary import KEEP_LATEST_BY_HOURS, KEEP_LATEST_COMMITS, KEEP_LATEST_FILE_VERSIONS


def savepointed_files(timeline) -> set[str]:
    """Names of the files the completed savepoints protect."""
    names: set[str] = set()
    for sp in timeline.actions(SAVEPOINT).completed():
        names |= SavepointMetadata.from_avro(read_avro(timeline.read_details(sp)) or {}).file_names()
    return names


def earliest_to_retain(timeline, policy: str, retained: int) -> Instant | None:
    """The earliest commit whose reads the clean must keep possible (None: keep everything)."""
    commits = timeline.commits().completed().instants
    if policy == KEEP_LATEST_COMMITS:
        if len(commits) <= retained:
            return None
        earliest = commits[len(commits) - retained]
    elif policy == KEEP_LATEST_BY_HOURS:
        if not commits:
            return None
        cutoff = format_instant(parse_instant(commits[-1].time) - timedelta(hours=retained))
        earliest = next((c for c in commits if c.time >= cutoff), None)
        if earliest is None or earliest == commits[0]:
            return None
    else:
        return None
    pending = [i for i in timeline.commits().pending()]
    if pending and pending[0].time < earliest.time:
        earliest = pending[0]
    return earliest


def slices_to_delete(group: FileGroup, policy: str, retained: int, earliest: str | None,
                     compacting: dict[tuple[str, str], str]) -> list:
    """The file slices of `group` that no retained read needs."""
    slices = list(reversed(group.slices))  # newest first
    being_compacted = compacting.get((group.partition, group.file_id))
    if policy == KEEP_LATEST_FILE_VERSIONS:
        return [sl for sl in slices[retained:] if sl.base_instant != being_compacted]
    if earliest is None:
        return []
    latest = slices[0].base_instant
    # the newest slice older than the window is what a query at `earliest` reads
    before = next((sl.base_instant for sl in slices if sl.base_instant < earliest), None)
    return [sl for sl in slices if sl.base_instant < earliest
            and sl.base_instant not in (latest, before, being_compacted)]


def files_to_clean(view: FileSystemView, timeline, policy: str,
                   retained: int) -> tuple[dict[str, list[str]], Instant | None]:
    """partition -> file paths (relative to the storage root) to delete, and the earliest
    instant to retain. `view` includes replaced file groups."""
    earliest = earliest_to_retain(timeline, policy, retained)
    protected = savepointed_files(timeline)
    compacting: dict[tuple[str, str], str] = {}
    for group in view.file_groups():
        t = view.pending_compaction_of(group.partition, group.file_id)
        if t is not None:
            for sl in group.slices:
                if sl.base_instant < t:
                    compacting[(group.partition, group.file_id)] = sl.base_instant
    files: dict[str, list[str]] = {}
    for group in view.file_groups():
        replaced_at = view.replaced_at.get((group.partition, group.file_id))
        if replaced_at is not None and (policy == KEEP_LATEST_FILE_VERSIONS
                                        or (earliest is not None and replaced_at < earliest.time)):
            doomed = group.slices
        else:
            doomed = slices_to_delete(group, policy, retained, earliest.time if earliest else None, compacting)
        for sl in doomed:
            names = ([sl.base_file.path] if sl.base_file else []) + [lf.path for lf in sl.log_files]
            names = [n for n in names if n.rsplit("/", 1)[-1] not in protected]
            if names:
                files.setdefault(group.partition, []).extend(names)
    return files, earliest
