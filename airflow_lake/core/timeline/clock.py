"""Instant-time generation: strictly increasing, millisecond, 17 digits."""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timedelta, timezone

from ..errors import InvalidOptionError
from .instant import INSTANT_TIME

FORMAT = "%Y%m%d%H%M%S%f"
# an ISO date or date-time: `2026-11-25`, `2026-11-25 10:30:00`, `2026-11-25T10:30:00.250+01:00`
_ISO = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?P<fraction>\.[0-9]{1,9})?)?"
                  r"(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?")


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


class IssuedTimes:
    """The latest time this process read from each clock (UTC, LOCAL) for an instant: a new one
    waits until the clock has passed it, as Hudi's instant time generator does process-wide.
    Two timelines written one after the other within a millisecond (a data table and its
    metadata table) then never share a time: the MDT's deltacommit completes strictly before
    the data commit (v8 spec §2.4). Only clock readings count, so a timeline holding future
    times moves its own instants on, not other tables'."""

    PATIENCE_S = 1.0  # the longest wait (for a clock set back)

    def __init__(self) -> None:
        self._last: dict[str, str] = {}
        self._lock = threading.Lock()

    def next(self, after: str | None, zone: str = "UTC") -> str:
        """`max(now, after + 1 ms)` as a 17-digit instant, `now` later than the last reading."""
        with self._lock:
            last = self._last.get(zone)
            now = now_instant(zone)
            deadline = time.monotonic() + self.PATIENCE_S
            while last is not None and now <= last and time.monotonic() < deadline:
                time.sleep(0.0002)
                now = now_instant(zone)
            self._last[zone] = now
        if after is None or now > after:
            return now
        return format_instant(parse_instant(after) + timedelta(milliseconds=1))


_ISSUED = IssuedTimes()


def next_instant(after: str | None, zone: str = "UTC") -> str:
    """A new instant time: later than `after`, and read from the clock after it passed the last
    time this process read for an instant (`IssuedTimes`)."""
    return _ISSUED.next(after, zone)


def as_of_instant(value: str, zone: str, table: str | None = None) -> str:
    """The instant time a time-travel point names, as Hudi's Spark reader reads `as.of.instant`:
    an instant time (14 or 17 digits) as given; an ISO date (`2026-11-25`: `20261125000000`)
    or date-time (`2026-11-25 10:30:00`, `2026-11-25T10:30:00.250`) in the table's timeline
    zone (`zone`: UTC or LOCAL), one with an offset (`Z`, `+01:00`) converted to that zone;
    seconds give a 14-digit instant, a fraction a 17-digit one (milliseconds). Anything else is
    an `InvalidOptionError` naming the table and the value."""
    if isinstance(value, str) and INSTANT_TIME.fullmatch(value):
        return value
    match = _ISO.fullmatch(value) if isinstance(value, str) else None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00")) if match else None
    except ValueError:
        moment = None
    if moment is None:
        where = f"table {table}: " if table else ""
        raise InvalidOptionError(f"{where}{value!r} is not an instant time (yyyyMMddHHmmss[SSS]) nor an ISO "
                                 "date or date-time in the table's timeline zone (2026-11-25, "
                                 "2026-11-25 10:30:00[.SSS][+01:00])")
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc if zone == "UTC" else None).replace(tzinfo=None)
    return format_instant(moment) if match["fraction"] else moment.strftime("%Y%m%d%H%M%S")


def instant_epoch_ms(instant: str, zone: str) -> int:
    """Epoch ms of an instant time written in the table's timeline zone (UTC or LOCAL)."""
    moment = parse_instant(instant)
    moment = moment.replace(tzinfo=timezone.utc) if zone == "UTC" else moment.astimezone()
    return int(moment.timestamp() * 1000)


def instant_at_ms(epoch_ms: int, zone: str) -> str:
    """The instant time of an epoch ms in the table's timeline zone (UTC or LOCAL)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, timezone.utc)
    return format_instant(moment if zone == "UTC" else moment.astimezone().replace(tzinfo=None))
