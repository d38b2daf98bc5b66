"""Instant times are strictly increasing within a process, across timelines (as Hudi's
generator), so a data table and its metadata table never share one."""

from __future__ import annotations

from airflow_lake.core.timeline.clock import IssuedTimes, next_instant, now_instant


def test_times_issued_one_after_another_are_strictly_increasing():
    issued = [next_instant(None) for _ in range(200)]  # (many within one millisecond)
    assert issued == sorted(set(issued)), "two instants shared a time"


def test_a_timeline_with_future_times_moves_only_its_own_instants_on():
    times = IssuedTimes()
    assert times.next("29991231235959000") == "29991231235959001"
    later = times.next(None)  # another timeline: the clock's time, after the last reading
    assert later <= now_instant() < "2999"
    assert times.next(None) > later
