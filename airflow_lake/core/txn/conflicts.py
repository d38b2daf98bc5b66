"""Optimistic concurrency at commit: what appeared on the timeline since a write started and
touches what it wrote. The transaction asks this under the table lock before completing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..timeline.active import ActiveTimeline
from ..timeline.instant import COMPACTION, Instant, State
from ..timeline.metadata import CommitMetadata
from ..timeline.payloads import CompactionPlan

KeyClash = Callable[[dict[str, list[str]]], "str | None"]
"""Given the base files a concurrent commit wrote ({partition: [paths]}), a key this write
inserts that one of them holds, or None."""


@dataclass(frozen=True)
class ConflictCheck:
    """What one write must not clash with: instants it `saw` at its start are not
    concurrent; `touched` (partition, file id) pairs it changed; `key_clash` finds a key it
    inserts in a concurrent commit's base files; under the BUCKET index a group is its
    bucket (the file id's first 8 characters)."""

    seen: frozenset[str]
    touched: frozenset[tuple[str, str]]
    key_clash: KeyClash
    bucket: bool = False

    def group(self, partition: str, file_id: str) -> tuple[str, str]:
        return (partition, file_id[:8]) if self.bucket else (partition, file_id)


def find_conflict(uri: str, timeline: ActiveTimeline, inflight: Instant, check: ConflictCheck) -> str | None:
    """Why `inflight` may not complete, or None: a commit or compaction plan that appeared
    since it started touches one of its file groups, or inserted one of the keys it inserts.
    `timeline` is listed under the lock."""
    mine = {check.group(p, f) for p, f in check.touched}
    for other in timeline.writes():
        if other.time in check.seen or other.time == inflight.time:
            continue
        if other.action == COMPACTION:
            plan = CompactionPlan.from_bytes(timeline.read_details(other.to(State.REQUESTED)))
            theirs = {check.group(p, f) for p, f in plan.file_groups()}
        elif other.is_completed:
            meta = timeline.commit_metadata(other)
            theirs = {check.group(p, f) for p, f in meta.file_ids() | meta.replaced_file_ids()}
            written = base_files(meta)
            dup = check.key_clash(written) if written else None
            if dup:
                return (f"table {uri}: write {inflight.time} inserts key {dup!r}, which {other.action} {other.time} "
                        "inserted after this write started; it was rolled back, retry it (it will update the key)")
        else:
            continue
        clash = mine & theirs
        if clash:
            p, f = sorted(clash)[0]
            return (f"table {uri}: write {inflight.time} conflicts with {other.action} {other.time}, which changed "
                    f"file group {f} in partition {p!r} after this write started; it was rolled back, retry it")
    return None


def base_files(meta: CommitMetadata) -> dict[str, list[str]]:
    """The base files a commit wrote, per partition (paths relative to the table)."""
    out: dict[str, list[str]] = {}
    for stat in meta.stats():
        if (stat.path or "").endswith(".parquet"):
            out.setdefault(stat.partition, []).append(stat.path)
    return out
