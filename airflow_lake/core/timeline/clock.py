"""Instant-time generation: strictly increasing, millisecond, 17 digits."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

FORMAT = "%Y%m%d%H%M%S%f"


def format_instant(moment: datetime) -> str:
    return moment.strftime(FORMAT)[:-3]


def parse_instant(time: str) -> datetime:
    """A naive datetime for an instant string; 14-digit instants get millisecond 999."""
    if len(time) == 14:
        time += "999"
    return datetime.strptime(time[:17] + "000", FORMAT)


def now_instant(zone: str = "UTC") -> str:
    moment = datetime.now(timezone.utc) if zone == "UTC" else datetime.now()
    return format_instant(moment)


def next_instant(after: str | None, zone: str = "UTC") -> str:
    """`max(now, after + 1 ms)` as a 17-digit instant."""
    now = now_instant(zone)
    if after is None or now > after:
        return now
    return format_instant(parse_instant(after) + timedelta(milliseconds=1))
