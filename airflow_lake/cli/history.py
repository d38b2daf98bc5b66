"""The timeline as records with state times: what `timeline` lists and `picture` draws.

A layout-1 timeline keeps no completion times: a state's time is the modification time of its
state file (the requested state's is the instant time). Archived entries carry
`stateTransitionTime`. Files copied without their times (an unzipped archive, a copy) give
useless times; `trusted_times` tells, and the records then carry the instant time only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.table import Table
from ..core.timeline.active import ActiveTimeline
from ..core.timeline.archived import ArchivedTimeline
from ..core.timeline.instant import COMPACTION, SAVEPOINT, Instant, State
from .render import instant_epoch_ms


@dataclass
class InstantRecord:
    """One instant (its highest state) with the epoch ms of each state it reached."""

    time: str
    action: str
    state: str
    archived: bool = False
    start_ms: int = 0  # the instant time
    state_ms: dict[str, int | None] = field(default_factory=dict)  # REQUESTED/INFLIGHT/COMPLETED -> ms
    files: list[str] = field(default_factory=list)  # `--all-states`: the state files (active only)

    @property
    def pending(self) -> bool:
        return self.state != State.COMPLETED.name

    @property
    def end_ms(self) -> int | None:
        """When it completed, else when it went inflight; None when unknown."""
        return self.state_ms.get("COMPLETED") or self.state_ms.get("INFLIGHT")

    def to_json(self) -> dict:
        doc = {"time": self.time, "action": self.action, "state": self.state, "archived": self.archived,
               "state_times_ms": self.state_ms}
        if self.files:
            doc["files"] = self.files
        return doc


@dataclass
class TimelineView:
    """What the timeline listing and picture show of a table: its records (archived first),
    whether their state times are real, and the clean's retained bound."""

    title: str
    records: list[InstantRecord]
    times_known: bool
    retained_from: str | None

    @classmethod
    def of(cls, table: Table, *, archived: bool = True) -> TimelineView:
        timeline = table.timeline  # (each access lists .hoodie/)
        records = (archived_records(table) if archived else []) + active_records(table, timeline)
        trusted = trusted_times(records)
        if not trusted:
            drop_times(records)
        return cls(f"{table.config.name} ({table.config.table_type})", records, trusted,
                   timeline.latest_clean_bound())

    @property
    def archived_until(self) -> str | None:
        """The newest archived instant, if any."""
        archived = [r.time for r in self.records if r.archived]
        return archived[-1] if archived else None


def active_records(table: Table, timeline: ActiveTimeline, *, with_times: bool = True) -> list[InstantRecord]:
    zone = _zone(table)
    records = []
    for instant in timeline:
        names = [n for n in timeline.state_files(instant.time)
                 if Instant.parse(n).comparable_action == instant.comparable_action]
        # a completed compaction is a `commit` on the timeline: its lane is the compaction's
        action = COMPACTION if any(n.endswith(".compaction.requested") for n in names) else instant.action
        rec = InstantRecord(instant.time, action, instant.state.name, start_ms=instant_epoch_ms(instant.time, zone),
                            files=names)
        if with_times:
            for name in names:
                state = Instant.parse(name)
                # layout 2 names the completion time; other states: the file's modification time
                mtime = instant_epoch_ms(state.completion, zone) if state.completion \
                    else timeline.transition_time_ms(state) or None
                rec.state_ms[state.state.name] = mtime
        records.append(rec)
    return records


def placed(record: InstantRecord) -> int:
    """Where an instant starts on a time axis: its instant time, but a savepoint (named after
    the commit it protects) when it was taken."""
    if record.action == SAVEPOINT:
        return record.state_ms.get("INFLIGHT") or record.state_ms.get("COMPLETED") or record.start_ms
    return record.start_ms


def archived_records(table: Table) -> list[InstantRecord]:
    zone = _zone(table)
    by_key: dict[tuple[str, str], InstantRecord] = {}
    for entry in ArchivedTimeline(table.storage, table.config.archive_folder).entries:
        i = entry.instant
        rec = by_key.setdefault((i.time, i.comparable_action),
                                InstantRecord(i.time, i.action, i.state.name, archived=True,
                                              start_ms=instant_epoch_ms(i.time, zone)))
        if i.state > State[rec.state]:
            rec.state = i.state.name
        if i.action == COMPACTION:
            rec.action = COMPACTION
        moment = entry.record.get("stateTransitionTime")
        rec.state_ms[i.state.name] = instant_epoch_ms(moment, zone) if moment and moment.isdigit() else None
    return sorted(by_key.values(), key=lambda r: (r.time, r.action))


def trusted_times(records: list[InstantRecord]) -> bool:
    """False when state-file times cannot be the times of the transitions: most completions
    before their instant or more than a day after the newest instant began, or all of them
    close together while the instants span much more (files copied or unpacked without
    their times)."""
    done = [(r.start_ms, r.state_ms.get("COMPLETED")) for r in records if r.state_ms.get("COMPLETED")]
    if not done:
        return True
    # (layout 2 names completion times in the files: then the file times of the states before,
    # taken from the files, after the completion say the files were copied or unpacked)
    after = sum(1 for r in records if r.state_ms.get("COMPLETED") and any(
        (r.state_ms.get(k) or 0) > r.state_ms["COMPLETED"] + 60_000 for k in ("REQUESTED", "INFLIGHT")))
    if after * 2 > len(done):
        return False
    starts = [s for s, _ in done]
    before = sum(1 for start, end in done if end < start - 60_000)
    late = sum(1 for _, end in done if end > max(starts) + 86_400_000)  # a day after the newest instant began
    if (before + late) * 2 > len(done):
        return False
    ends = [e for _, e in done]
    span = max(starts) - min(starts)
    return not (len(done) >= 3 and span > 10_000 and max(ends) - min(ends) < span / 20)


def drop_times(records: list[InstantRecord]) -> None:
    for r in records:
        r.state_ms = {k: None for k in r.state_ms}


def _zone(table: Table) -> str:
    return "UTC" if table.config.timezone == "UTC" else "LOCAL"
