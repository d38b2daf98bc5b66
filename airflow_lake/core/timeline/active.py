"""The active timeline: scan `.hoodie/`, filter instants, make transitions by exclusive create."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..errors import InstantNotFoundError, TimelineError
from ..storage import Storage
from .instant import COMMIT_ACTIONS, WRITE_ACTIONS, Instant, State
from .metadata import CommitMetadata

META = ".hoodie"


class Timeline:
    """An ordered, immutable selection of instants with Hudi's filters."""

    def __init__(self, storage: Storage, instants: Iterable[Instant], mtimes: dict[str, int] | None = None):
        self.storage = storage
        self.instants: list[Instant] = sorted(instants, key=lambda i: (i.time, i.comparable_action, i.state))
        self._mtimes = mtimes or {}

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def __repr__(self) -> str:
        return f"Timeline({[str(i) for i in self.instants]})"

    def _select(self, keep) -> Timeline:
        return Timeline(self.storage, [i for i in self.instants if keep(i)], self._mtimes)

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
        their own counts and may outlive older commits."""
        first = self.writes().first
        return first is not None and time < first.time

    def transition_time_ms(self, instant: Instant) -> int:
        return self._mtimes.get(instant.file_name, 0)

    # -- payloads --------------------------------------------------------------------------
    def read_details(self, instant: Instant) -> bytes:
        path = f"{META}/{instant.file_name}"
        try:
            return self.storage.read(path)
        except FileNotFoundError as e:
            raise InstantNotFoundError(f"table {self.storage.uri}: {path} is gone") from e

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        return CommitMetadata.from_bytes(self.read_details(instant), f"{self.storage.uri}/{META}/{instant.file_name}")

    def find_by_metadata(self, key: str, value: str) -> Instant | None:
        """The newest completed commit whose extraMetadata[key] == value, if any."""
        for instant in reversed(self.commits().completed().instants):
            if self.commit_metadata(instant).extra_metadata.get(key) == value:
                return instant
        return None


class ActiveTimeline(Timeline):
    """The instants in `.hoodie/`, with the layout-1 rules of spec §2.5."""

    def __init__(self, storage: Storage):
        files = storage.list(META)
        raw: dict[tuple[str, str], Instant] = {}
        mtimes: dict[str, int] = {}
        for f in files:
            instant = Instant.parse(f.name)
            if instant is None:
                continue
            mtimes[f.name] = f.mtime_ms
            key = (instant.time, instant.comparable_action)
            held = raw.get(key)
            if held is None or instant.state > held.state:
                raw[key] = instant
        super().__init__(storage, raw.values(), mtimes)
        self._files = {f.name for f in files}

    def state_files(self, time: str) -> list[str]:
        """Every `.hoodie/` timeline file of an instant time, requested first."""
        found = [Instant.parse(n) for n in self._files if n.startswith(time)]
        return [i.file_name for i in sorted(found, key=lambda i: i.state) if i and i.time == time]

    # -- transitions -----------------------------------------------------------------------
    def create(self, instant: Instant, content: bytes = b"") -> Instant:
        """Create a state file; fail if it exists. Completed files are never empty."""
        if instant.is_completed and not content:
            raise TimelineError(f"table {self.storage.uri}: refusing to write an empty completed {instant}")
        if not self.storage.create(f"{META}/{instant.file_name}", content):
            raise TimelineError(f"table {self.storage.uri}: {instant.file_name} already exists")
        return instant

    def transition(self, instant: Instant, state: State, content: bytes = b"") -> Instant:
        """Move a pending instant to `state`: its previous state file must exist."""
        if not self.storage.exists(f"{META}/{instant.file_name}"):
            raise TimelineError(f"table {self.storage.uri}: cannot move {instant} to {state.name}: "
                                f"{instant.file_name} does not exist")
        return self.create(instant.to(state), content)

    def delete_instant_files(self, time: str, *, keep_completed: bool = False) -> None:
        """Delete an instant's state files: inflight, then requested (rollback, spec §2.4)."""
        names = self.state_files(time)
        completed = [n for n in names if Instant.parse(n).is_completed]
        pending = [n for n in names if n not in completed]
        if completed and not keep_completed:
            for n in completed:
                self.storage.delete(f"{META}/{n}")
        for n in reversed(pending):
            self.storage.delete(f"{META}/{n}")

