"""The file-system view: partitions -> file groups -> slices, as of an instant (spec §2.6)."""

from __future__ import annotations

import itertools
import posixpath
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from .model import BaseFile, FileGroup, FileSlice, LogFile
from .storage import Storage
from .timeline.active import Timeline
from .timeline.instant import COMMIT_ACTIONS, COMPACTION, REPLACE_COMMIT, State, check_instant_time
from .timeline.payloads import CompactionPlan

PARTITION_METAFILE = ".hoodie_partition_metadata"


def list_partition_files(storage: Storage, partitions: Iterable[str] | None = None) -> dict[str, list]:
    """Partition path -> file statuses, for folders holding a partition marker file: every
    folder of the table outside `.hoodie/`, or only the given partition paths (one listing
    each, not recursive)."""
    if partitions is not None:
        found = (f for p in sorted(set(partitions)) for f in storage.list(p))
    else:  # the root once, then each top folder (partition) once, recursively
        top_files, top_dirs = storage.list_entries("")
        found = itertools.chain(top_files, *(storage.list(d, recursive=True) for d in top_dirs if d != ".hoodie"))
    files_by_dir: dict[str, list] = defaultdict(list)
    marked: set[str] = set()
    for f in found:
        folder = posixpath.dirname(f.path)
        if f.name.startswith(PARTITION_METAFILE):
            marked.add(folder)
        else:
            files_by_dir[folder].append(f)
    return {p: files_by_dir.get(p, []) for p in marked}


class FileSystemView:
    """Visible file groups of a table as of an instant (None: the latest completed one).

    A base file is visible iff its instant is a completed commit (or predates the active
    timeline) at or before the bound; groups replaced by a completed replacecommit at or
    before the bound are hidden.
    """

    def __init__(self, storage: Storage, timeline: Timeline, as_of: str | None = None,
                 partition_files: dict[str, list] | None = None, *, include_replaced: bool = False,
                 completed_by: str | None = None):
        """`completed_by` (timeline layout 2): only commits that completed by then count, and
        `as_of` is the latest of them (an incremental read's end is a completion time)."""
        self.storage = storage
        self.timeline = timeline
        commits = timeline.commits().completed()
        self._archived: dict[str, str] | None = None
        self._late: set[str] = set()  # archived commits requested before the bound, completed after it
        if completed_by is not None:
            commits = commits.completed_by(completed_by)
            # the latest commit completed by then, archived ones included (their completion
            # times from the archived timeline)
            archived = self._archived_commits()
            done = [commits.last.time] if commits.last else []
            done += [t for t, c in archived.items() if c <= completed_by]
            as_of = max(done, default="0" * 17)
            self._late = {t for t, c in archived.items() if c > completed_by}
        if as_of is not None:
            commits = commits.at_or_before(check_instant_time(as_of, storage.uri))
        self.as_of = as_of
        self.completed = set(commits.times)
        self.replaced_at: dict[tuple[str, str], str] = {}
        for instant in commits.actions(REPLACE_COMMIT):
            for key in timeline.commit_metadata(instant).replaced_file_ids():
                self.replaced_at.setdefault(key, instant.time)
        self.replaced = set() if include_replaced else set(self.replaced_at)
        self._pending_compaction: dict[tuple[str, str], str] | None = None
        self._completions: dict[str, str] | None = None
        files = partition_files if partition_files is not None else list_partition_files(storage)
        self.groups: dict[str, dict[str, FileGroup]] = {}
        for partition, statuses in files.items():
            self.groups[partition] = self._build_groups(partition, statuses)

    def is_visible(self, instant: str) -> bool:
        if instant in self.completed:
            return True
        if (self.as_of is not None and instant > self.as_of) or instant in self._late:
            return False
        return self.timeline.is_before_start(instant)

    def _build_groups(self, partition: str, statuses: list) -> dict[str, FileGroup]:
        slices: dict[tuple[str, str], FileSlice] = {}
        logs: list[LogFile] = []
        for st in statuses:
            base = BaseFile.parse(partition, st.name, st.size)
            if base is not None:
                if self.is_visible(base.instant) and (partition, base.file_id) not in self.replaced:
                    slices[(base.file_id, base.instant)] = FileSlice(partition, base.file_id, base.instant, base)
                continue
            log = LogFile.parse(partition, st.name, st.size)
            if log is not None and (partition, log.file_id) not in self.replaced:
                logs.append(log)
        slice_of = self._slice_by_completion(partition, slices, logs) if self.timeline.layout == 2 else {}
        for log in logs:
            key = (log.file_id, slice_of.get(log.name, log.base_instant))
            if key not in slices:
                slices[key] = FileSlice(partition, log.file_id, log.base_instant)
            slices[key].log_files.append(log)
        groups: dict[str, FileGroup] = {}
        for (file_id, _), sl in sorted(slices.items(), key=lambda kv: kv[0][1]):
            sl.log_files.sort(key=lambda lf: lf.sort_key)
            groups.setdefault(file_id, FileGroup(partition, file_id)).slices.append(sl)
        return groups

    def _slice_by_completion(self, partition: str, slices: dict[tuple[str, str], FileSlice],
                             logs: list[LogFile]) -> dict[str, str]:
        """Layout 2 (v8 spec §2.7): a log file is named by the deltacommit that wrote it, and
        belongs to the slice with the greatest base instant (a visible base file, or a pending
        compaction of its group) at or before that deltacommit's completion time; with none,
        it starts a slice of its own; a log of a pending deltacommit goes with the latest slice
        (its blocks are not visible anyway). Returns log name -> slice instant."""
        completion = self._completion_times()
        bases: dict[str, set[str]] = {}
        for file_id, instant in slices:
            bases.setdefault(file_id, set()).add(instant)
        out: dict[str, str] = {}
        # in instant order: a log that starts a slice of its own (no base at or before it) is a
        # slice the group's later logs join (Java's `HoodieFileGroup.getBaseInstantTime`)
        for log in sorted(logs, key=lambda lf: lf.sort_key):
            instants = bases.setdefault(log.file_id, set())
            pending = self.pending_compaction_of(partition, log.file_id)
            candidates = instants | ({pending} if pending is not None else set())
            done = completion.get(log.base_instant)
            if done is None and self.timeline.is_before_start(log.base_instant):
                # archived: its completion time from the LSM history, else (legacy) its own (v8 spec §2.5)
                done = self._archived_completion(log.base_instant) or log.base_instant
            if done is None:
                out[log.name] = max(candidates, default=log.base_instant)
            else:
                out[log.name] = max((i for i in candidates if i <= done), default=log.base_instant)
            instants.add(out[log.name])
        return out

    def _archived_completion(self, time: str) -> str | None:
        if self._archived is None:
            from .timeline.archived import ArchivedTimeline

            self._archived = ArchivedTimeline(self.storage, self.timeline.archive_folder).completion_times
        return self._archived.get(time)

    def _archived_commits(self) -> dict[str, str]:
        """Requested -> completion time of the archived completed commits (none archived: {})."""
        from .timeline.archived import ArchivedTimeline, has_archived

        folder = getattr(self.timeline, "archive_folder", None)
        if not folder or not has_archived(self.storage, folder):
            return {}
        entries = ArchivedTimeline(self.storage, folder).entries
        return {e.instant.time: e.instant.completion or e.instant.time for e in entries
                if e.instant.is_completed and e.instant.comparable_action in COMMIT_ACTIONS}

    def _completion_times(self) -> dict[str, str]:
        """Requested time -> completion time of the completed commits (layout 2; a savepoint
        shares its commit's requested time, not its completion)."""
        if self._completions is None:
            self._completions = {i.time: i.completion or i.time for i in self.timeline.commits().completed()}
        return self._completions

    @property
    def partitions(self) -> list[str]:
        return sorted(self.groups)

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        parts = [partition] if partition is not None else self.partitions
        return [g for p in parts for g in self.groups.get(p, {}).values()]

    def pending_compaction_of(self, partition: str, file_id: str) -> str | None:
        """The instant of a pending compaction plan that covers this file group, if any."""
        if self._pending_compaction is None:
            self._pending_compaction = {}
            for instant in self.timeline.actions(COMPACTION).pending():
                plan = CompactionPlan.from_bytes(self.timeline.read_details(instant.to(State.REQUESTED)))
                for group in plan.file_groups():
                    self._pending_compaction[group] = instant.time
        return self._pending_compaction.get((partition, file_id))

    def read_slice(self, group: FileGroup) -> tuple[BaseFile | None, list[LogFile]]:
        """What a snapshot reads of a group: the newest visible base file and every log file
        of that slice and of the newer slices (a pending compaction, or a log-only start).

        Log files whose base instant is after the query bound are left out.
        """
        logs: list[LogFile] = []
        for sl in reversed(group.slices):
            if self.as_of is not None and sl.base_instant > self.as_of:
                continue
            logs = sl.log_files + logs
            if sl.base_file is not None:
                return sl.base_file, logs
        return None, logs

    def latest_base_files(self, partitions: list[str] | None = None) -> list[BaseFile]:
        out = []
        for p in partitions if partitions is not None else self.partitions:
            for g in self.groups.get(p, {}).values():
                base = next((s.base_file for s in reversed(g.slices) if s.base_file is not None), None)
                if base is not None:
                    out.append(base)
        return out


@dataclass(frozen=True)
class UnreferencedFile:
    """A data file no completed instant references: `instant` is its writer (from its name
    or its log blocks' header), None when it cannot be told."""

    path: str
    size: int
    instant: str | None
    reason: str


def emptied_commits(timeline: Timeline) -> list[str]:
    """Completed writes whose commit file is empty (0 bytes: damaged, its write stats lost)."""
    return [i.time for i in timeline.writes().completed() if not timeline.read_details(i)]


def unreferenced_files(storage: Storage, timeline: Timeline, archive_folder: str = ".hoodie/archived",
                       partition_files: dict[str, list] | None = None) -> list[UnreferencedFile]:
    """Base and log files in the table's partitions that no completed commit lists in its
    write stats (active or archived timeline) and that no pending instant is writing: left
    by a write that died and was never rolled back, or a rollback that could not delete them.
    No query reads them. Files older than the active timeline whose commit the archive does
    not hold are taken as committed (nothing tells otherwise). Log files not listed are
    judged by their first block's instant header (one read each)."""
    from .timeline.archived import ArchivedTimeline

    referenced: set[str] = set()
    emptied = set(emptied_commits(timeline))  # (what they wrote cannot be told: their files are not judged)
    for instant in timeline.writes().completed():
        referenced.update(s["path"] for s in timeline.commit_metadata(instant).write_stats() if s.get("path"))
    archived_times: set[str] = set()
    for entry in ArchivedTimeline(storage, archive_folder).entries:
        archived_times.add(entry.instant.time)
        payload = entry.payload if entry.instant.is_completed else None
        if isinstance(payload, dict):
            for stats in (payload.get("partitionToWriteStats") or {}).values():
                referenced.update(s["path"] for s in stats or [] if s.get("path"))
    pending = {i.time for i in timeline.pending()}
    completed = {i.time for i in timeline.completed()}
    files = partition_files if partition_files is not None else list_partition_files(storage)
    found: list[UnreferencedFile] = []
    for partition, statuses in sorted(files.items()):
        for st in statuses:
            base = BaseFile.parse(partition, st.name, st.size)
            log = None if base is not None else LogFile.parse(partition, st.name, st.size)
            if (base is None and log is None) or st.path in referenced:
                continue
            instant = base.instant if base is not None else _first_block_instant(storage, st.path)
            if instant is not None and instant in emptied:
                continue  # its commit file is empty (damaged): queries read its files, they are not orphans
            if instant is not None and instant in pending:
                continue  # being written
            if instant is not None and instant not in completed and instant not in archived_times \
                    and timeline.is_before_start(instant):
                continue  # older than the active timeline and unknown to the archive: taken as committed
            if instant is None:
                reason = "its log blocks name no instant (unreadable)"
            elif instant in completed or instant in archived_times:
                reason = f"written by {instant}, whose commit does not list it"
            else:
                reason = f"written by {instant}, which is on no timeline (failed and not rolled back)"
            found.append(UnreferencedFile(st.path, st.size, instant, reason))
    return found


def _first_block_instant(storage: Storage, path: str) -> str | None:
    from .formats.log import read_log_file

    try:
        blocks = read_log_file(storage.read(path), f"{storage.uri}/{path}")
    except FileNotFoundError:
        return None
    return next((b.instant for b in blocks if b.instant), None)
