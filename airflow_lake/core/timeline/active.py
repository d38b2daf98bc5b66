"""The active timeline: scan its folder, filter instants, make transitions by exclusive create.

Layout 1 (table version 6) keeps it in `.hoodie/`, layout 2 (versions 8 and 9) in
`.hoodie/timeline/` (`hoodie.timeline.path`), its completed instants named with their
completion time (`timeline.instant`).

An `ActiveTimeline` is one listing of `.hoodie/`. Its own transitions and deletions update it
in memory, so an operation lists once and passes the timeline along; it lists again
(`reload`) only where it needs other writers' instants, under the table lock. State files are
never rewritten, so their contents are cached and carried over to the reloaded timeline.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Collection, Iterable, Iterator

from ..errors import InstantNotFoundError, TimelineError
from ..storage import Storage
from . import tokens
from .clock import next_instant
from .instant import CLEAN, COMMIT_ACTIONS, REPLACE_COMMIT, SAVEPOINT, WRITE_ACTIONS, Instant, State
from .metadata import CommitMetadata, StateFileContent, read_avro

META = ".hoodie"


def timeline_folder(props: dict[str, str]) -> str:
    """The active timeline's folder for a table's properties: `.hoodie` for timeline layout 1,
    `.hoodie/<hoodie.timeline.path>` (default `timeline`) for layout 2 (spec v8 §1.2)."""
    version = int(props.get("hoodie.table.version") or 6)
    layout = int(props.get("hoodie.timeline.layout.version") or (2 if version >= 8 else 1))
    if layout < 2:
        return META
    return f"{META}/{(props.get('hoodie.timeline.path') or 'timeline').strip('/')}"




class Timeline:
    """An ordered, immutable selection of instants with Hudi's filters."""

    archive_folder = ".hoodie/archived"  # `hoodie.archivelog.folder`; `Table.timeline` sets it
    zone = "UTC"  # the clock of completion times (`hoodie.table.timeline.timezone`: UTC or LOCAL)

    def __init__(self, storage: Storage, instants: Iterable[Instant], mtimes: dict[str, int] | None = None,
                 details: dict[str, bytes] | None = None, *, ordered: bool = False, folder: str = META):
        self.storage = storage
        self.folder = folder  # where the state files are (`timeline_folder`)
        self.instants: list[Instant] = list(instants) if ordered else sorted(instants, key=_order)
        self._mtimes = mtimes if mtimes is not None else {}
        self._details = details if details is not None else {}
        self._archived: dict[Instant, dict] = {}  # archived payloads `find_token` found

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def __repr__(self) -> str:
        return f"Timeline({[str(i) for i in self.instants]})"

    def _select(self, keep) -> Timeline:
        return Timeline(self.storage, [i for i in self.instants if keep(i)], self._mtimes, self._details,
                        ordered=True, folder=self.folder)

    # -- filters ---------------------------------------------------------------------------
    def completed(self) -> Timeline:
        return self._select(lambda i: i.is_completed)

    def pending(self) -> Timeline:
        return self._select(lambda i: i.is_pending)

    def actions(self, *actions: str) -> Timeline:
        wanted = set(actions)
        return self._select(lambda i: i.action in wanted)

    def commits(self) -> Timeline:
        """commit, deltacommit and replacecommit instants."""
        return self._select(lambda i: i.action in COMMIT_ACTIONS)

    def writes(self) -> Timeline:
        """Commits plus compaction and log compaction."""
        return self._select(lambda i: i.action in WRITE_ACTIONS)

    def after(self, time: str) -> Timeline:
        return self._select(lambda i: i.time > time)

    def at_or_before(self, time: str) -> Timeline:
        return self._select(lambda i: i.time <= time)

    def before(self, time: str) -> Timeline:
        return self._select(lambda i: i.time < time)

    def completed_by(self, time: str) -> Timeline:
        """Completed instants that completed at or before `time` (by completion time in layout
        2, by requested time in layout 1)."""
        return self._select(lambda i: i.is_completed and (i.completion or i.time) <= time)

    def between(self, start: str, end: str) -> Timeline:
        """Instants in (start, end]."""
        return self._select(lambda i: start < i.time <= end)

    def contains(self, time: str) -> bool:
        return any(i.time == time for i in self.instants)

    def get(self, time: str) -> Instant:
        for i in self.instants:
            if i.time == time:
                return i
        raise InstantNotFoundError(f"table {self.storage.uri}: no instant {time} on the active timeline")

    @property
    def first(self) -> Instant | None:
        return self.instants[0] if self.instants else None

    @property
    def last(self) -> Instant | None:
        return self.instants[-1] if self.instants else None

    @property
    def times(self) -> list[str]:
        return [i.time for i in self.instants]

    def is_before_start(self, time: str) -> bool:
        """True if `time` predates the first write on the timeline (archived, hence committed).

        Cleans, rollbacks and savepoints do not start the timeline: they are archived by
        their own counts and may outlive older commits. Nor does a savepointed commit: with
        `hoodie.archive.beyond.savepoint` the commits around it are archived and it stays
        (Java's `getFirstNonSavepointCommit`)."""
        if not hasattr(self, "_start"):  # (an immutable selection: found once)
            savepointed = {i.time for i in self.instants if i.action == SAVEPOINT}
            writes = self.writes()
            self._start = next((i.time for i in writes if i.time not in savepointed), None) or \
                (writes.first.time if writes.first else None)  # (every write savepointed: the first)
        return self._start is not None and time < self._start

    def transition_time_ms(self, instant: Instant) -> int:
        """The modification time of the instant's state file (read on first use), 0 if gone."""
        name = instant.file_name
        mtime = self._mtimes.get(name)
        if mtime is None:
            status = self.storage.status(f"{self.folder}/{name}")
            mtime = self._mtimes[name] = status.mtime_ms if status is not None else 0
        return mtime

    # -- payloads --------------------------------------------------------------------------
    def read_details(self, instant: Instant) -> bytes:
        """The content of an instant's state file (cached: state files are never rewritten)."""
        name = instant.file_name
        data = self._details.get(name)
        if data is None:
            path = f"{self.folder}/{name}"
            try:
                data = StateFileContent(self.storage.read(path))
            except FileNotFoundError as e:
                raise InstantNotFoundError(f"table {self.storage.uri}: {path} is gone") from e
            data.where = f"table {self.storage.uri}: {path}"
            self._details[name] = data
        return data

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        return CommitMetadata.from_bytes(self.read_details(instant),
                                         f"{self.storage.uri}/{self.folder}/{instant.file_name}")

    @property
    def layout(self) -> int:
        """The timeline layout version: 1 (`.hoodie/`) or 2 (`.hoodie/timeline/`)."""
        return 1 if self.folder == META else 2

    def completion_time(self, time: str) -> str | None:
        """When the completed instant `time` completed (layout 2), else None: layout 1 has no
        completion times, and an instant not completed on this timeline has none known."""
        for instant in self.instants:
            if instant.time == time and instant.is_completed:
                return instant.completion
        return None

    def latest_clean_bound(self) -> str | None:
        """The earliest instant queries may read as of since the latest completed clean (None
        without one): its `earliestCommitToRetain`, or, once a restore or rollback has removed
        that instant, the latest completed commit before it (a cleaner keeps, in every file
        group, the newest slice older than its bound: what a read at that commit sees), else
        the first completed commit after it."""
        cleans = self.actions(CLEAN).completed().instants
        if not cleans:
            return None
        meta = read_avro(self.read_details(cleans[-1])) or {}
        bound = meta.get("earliestCommitToRetain") or None
        if bound is None or self.contains(bound):
            return bound
        commits = self.commits().completed()
        held = commits.before(bound).last or commits.after(bound).first
        return held.time if held is not None else None

    def schema_avro(self, create_schema: str | None = None) -> dict | None:
        """The table's Avro schema (no meta fields): the latest completed commit's, else
        `create_schema` (`hoodie.table.create.schema`)."""
        for instant in reversed(self.commits().completed().instants):
            schema = self.commit_metadata(instant).schema
            if schema:
                return json.loads(schema)
        return json.loads(create_schema) if create_schema else None

    def find_by_metadata(self, key: str, value: str) -> Instant | None:
        """The newest completed instant whose extraMetadata[key] == value, if any.

        For `airflow_lake.token` this is the token index (`find_token`: every action, cost
        independent of the timeline's length); any other key scans the completed commits."""
        if key == tokens.TOKEN_KEY:
            return self.find_token(value)
        for instant in reversed(self.commits().completed().instants):
            if self.commit_metadata(instant).extra_metadata.get(key) == value:
                return instant
        return None

    def find_token(self, token: str, *, pending: bool = False,
                   actions: Collection[str] | None = None) -> Instant | None:
        """The newest instant started with run token `token` (`timeline.tokens`) that is
        completed (on the active timeline, or archived), or, with `pending`, still pending;
        only of `actions` (completed action names: a compaction completes as `commit`) when
        given. A rolled-back attempt, or one that died before creating its instant, is not
        found. An archive run (no instant of its own) is found as `<time>.archive` once done.
        Cost: one small listing, plus the archived timeline only for an attempt older than the
        active timeline."""
        by_key = {(i.time, i.comparable_action): i for i in self.instants}
        archived = None
        for time, action in tokens.entries(self.storage, token):
            comparable = Instant(time, action, State.REQUESTED).comparable_action
            if actions is not None and comparable not in actions:
                continue
            if action == tokens.ARCHIVE:  # no instant: the entry exists once it is done
                return Instant(time, action, State.COMPLETED)
            instant = by_key.get((time, comparable))
            if instant is not None:
                if instant.is_completed or pending:
                    return instant
                continue
            if not self._may_be_archived(time, comparable):
                continue  # within the active window and gone: rolled back or never created
            if archived is None:
                from .archived import ArchivedTimeline

                archived = {(e.instant.time, e.instant.comparable_action): e
                            for e in ArchivedTimeline(self.storage, self.archive_folder).entries
                            if e.instant.is_completed}
            entry = archived.get((time, comparable))
            if entry is not None:
                self._archived[entry.instant] = entry.payload or {}
                return entry.instant
        return None

    def stored_commit_metadata(self, instant: Instant) -> CommitMetadata:
        """Commit metadata of a completed instant `find_token` returned, active or archived."""
        payload = self._archived.get(instant)
        if payload is None:
            return self.commit_metadata(instant)
        return CommitMetadata(payload.get("operationType") or "UNKNOWN", payload.get("partitionToWriteStats") or {},
                              dict(payload.get("extraMetadata") or {}), bool(payload.get("compacted")),
                              payload.get("partitionToReplaceFileIds"))

    def stored_avro_metadata(self, instant: Instant) -> dict:
        """The Avro metadata (clean, rollback, restore, savepoint) of a completed instant
        `find_token` returned, active or archived; empty when it is no longer kept."""
        payload = self._archived.get(instant)
        if payload is not None:
            return payload
        try:
            return read_avro(self.read_details(instant)) or {}
        except InstantNotFoundError:
            return {}

    def _may_be_archived(self, time: str, comparable: str) -> bool:
        """An instant absent from the active timeline can only have been archived if it is
        older than the oldest active instant of its kind (archival removes the oldest)."""
        kind = (lambda i: i.comparable_action == comparable) if comparable not in COMMIT_ACTIONS \
            else (lambda i: i.action in WRITE_ACTIONS)
        oldest = next((i for i in self.instants if kind(i)), None)
        return oldest is None or time < oldest.time


class ActiveTimeline(Timeline):
    """The instants of the timeline folder (read from `hoodie.properties` unless given), with
    the rules of spec §2.5 (v8 spec §2.5 for layout 2)."""

    def __init__(self, storage: Storage, files: list[tuple[str, int | None]] | None = None,
                 details: dict[str, bytes] | None = None, *, folder: str | None = None):
        config = None
        if folder is None:  # the table's: where its timeline, its archive and its clock are
            from ..properties import load

            config = load(storage)
            folder = timeline_folder(config.props)
        files = storage.list_names(folder) if files is None else files
        self._by_time: dict[str, dict[str, Instant]] = {}  # time -> state file name -> instant
        mtimes: dict[str, int] = {}  # where the listing gave them; others are read on demand
        layout = 1 if folder == META else 2
        for name, mtime in files:
            instant = _parse(name)
            # a completed instant is `T.action` in layout 1, `T_C.action` in layout 2: the
            # other form is a foreign file there
            if instant is not None and (instant.completion is None) == (layout == 1 or instant.is_pending):
                if mtime is not None:
                    mtimes[name] = mtime
                self._by_time.setdefault(instant.time, {})[name] = instant
        self._raw: dict[tuple[str, str], Instant] = {}
        for names in self._by_time.values():
            for instant in names.values():
                self._keep_highest(instant)
        kept = {n for names in self._by_time.values() for n in names if n in (details or {})}
        super().__init__(storage, self._raw.values(), mtimes, {n: details[n] for n in kept} if details else None,
                         folder=folder)
        if config is not None:
            self.archive_folder = config.archive_folder
            self.zone = "UTC" if config.timezone == "UTC" else "LOCAL"

    def _keep_highest(self, instant: Instant) -> None:
        key = (instant.time, instant.comparable_action)
        held = self._raw.get(key)
        if held is None or instant.state > held.state:
            self._raw[key] = instant

    def _changed(self, time: str) -> None:
        """Recompute the instants of `time` after a state file of it was added or removed."""
        for key in [k for k in self._raw if k[0] == time]:
            del self._raw[key]
        for instant in self._by_time.get(time, {}).values():
            self._keep_highest(instant)
        self.instants = sorted(self._raw.values(), key=_order)
        self.__dict__.pop("_start", None)

    def reload(self) -> ActiveTimeline:
        """A fresh listing of `.hoodie/` (other writers' instants included), keeping the
        cached contents of state files that are still there."""
        timeline = ActiveTimeline(self.storage, details=self._details, folder=self.folder)
        timeline.archive_folder, timeline.zone = self.archive_folder, self.zone
        return timeline

    def has_file(self, name: str) -> bool:
        """Whether this listing (with its own changes since) holds the state file `name`."""
        instant = Instant.parse(name)
        return instant is not None and name in self._by_time.get(instant.time, {})

    def state_files(self, time: str) -> list[str]:
        """Every `.hoodie/` timeline file of an instant time, requested first."""
        found = self._by_time.get(time, {})
        return [n for n, _ in sorted(found.items(), key=lambda kv: kv[1].state)]

    # -- transitions -----------------------------------------------------------------------
    def create(self, instant: Instant, content: bytes = b"", *, token: str | None = None) -> Instant:
        """Create a state file; fail if it exists. Completed files are never empty. A run
        `token` is recorded in the token index first (see `timeline.tokens`)."""
        if self.layout == 2:  # Avro commit metadata; a completed name carries the completion time
            content = layout2_content(instant, content)
            if instant.is_completed and instant.completion is None:
                instant = Instant(instant.time, instant.action, instant.state, self.next_completion())
        if instant.is_completed and not content:
            raise TimelineError(f"table {self.storage.uri}: refusing to write an empty completed {instant}")
        tokens.record(self.storage, token, instant.time, instant.action)
        name = instant.file_name
        if not self.storage.create(f"{self.folder}/{name}", content):
            raise TimelineError(f"table {self.storage.uri}: {name} already exists")
        self._by_time.setdefault(instant.time, {})[name] = Instant.parse(name)
        self._details[name] = content
        self._changed(instant.time)
        return instant

    def next_completion(self) -> str:
        """A completion time later than every instant and completion time of this listing
        (layout 2: taken under the table lock, v8 spec §2.4)."""
        last = max((t for i in self._raw.values() for t in (i.time, i.completion) if t), default=None)
        return next_instant(last, self.zone)

    def transition(self, instant: Instant, state: State, content: bytes = b"") -> Instant:
        """Move a pending instant to `state`: its previous state file must exist."""
        if not self.storage.exists(f"{self.folder}/{instant.file_name}"):
            raise TimelineError(f"table {self.storage.uri}: cannot move {instant} to {state.name}: "
                                f"{instant.file_name} does not exist")
        return self.create(instant.to(state), content)

    def delete_file(self, name: str) -> None:
        """Delete one `.hoodie/` state file (absent is fine) and forget it."""
        self.storage.delete(f"{self.folder}/{name}")
        instant = Instant.parse(name)
        if instant is not None and self._by_time.get(instant.time, {}).pop(name, None) is not None:
            self._details.pop(name, None)
            self._changed(instant.time)

    def delete_instant_files(self, time: str, *, keep_completed: bool = False) -> None:
        """Delete an instant's state files: inflight, then requested (rollback, spec §2.4)."""
        names = self.state_files(time)
        completed = [n for n in names if Instant.parse(n).is_completed]
        pending = [n for n in names if n not in completed]
        if completed and not keep_completed:
            for n in completed:
                self.delete_file(n)
        for n in reversed(pending):
            self.delete_file(n)


def layout2_content(instant: Instant, content: bytes) -> bytes:
    """A state file's content in layout 2: commit metadata (JSON in layout 1) as the Avro
    `HoodieCommitMetadata`, or `HoodieReplaceCommitMetadata` for a completed replacecommit;
    everything else is Avro (or empty) in both layouts."""
    if not content.startswith(b"{") or instant.state == State.REQUESTED:
        return content
    meta = CommitMetadata.from_bytes(content)
    return meta.to_avro(replace=instant.is_completed and instant.comparable_action == REPLACE_COMMIT)


_parse = functools.lru_cache(maxsize=1 << 16)(Instant.parse)  # names recur in every listing


def _order(instant: Instant) -> tuple:
    return (instant.time, instant.comparable_action, instant.state)
