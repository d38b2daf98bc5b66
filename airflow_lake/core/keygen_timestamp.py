"""TimestampBasedKeyGenerator's partition values, as Apache Hudi 0.14/0.15 renders them.

Java (`TimestampBasedAvroKeyGenerator` with `HoodieDateTimeParser`, Joda-Time) turns the
partition field's value into an instant in milliseconds, then prints it with the Joda
pattern `hoodie.keygen.timebased.output.dateformat` in the output time zone:

- `UNIX_TIMESTAMP` (seconds), `EPOCHMILLISECONDS`, `EPOCHMICROSECONDS` (Hudi 1.0) and `SCALAR`
  (`timestamp.scalar.time.unit`, default SECONDS) read a number: integers, floats and decimals
  truncated toward zero, converted like `TimeUnit.convert` (truncating, saturating).
- `DATE_STRING` and `MIXED` parse a string with the input format(s): several formats split by
  `input.dateformat.list.delimiter.regex` (default `,`), the first that parses the whole
  value wins.
- A null value is the number 1 in the field's unit (`1970-01-01T00:00:00.001Z` for
  milliseconds); for DATE_STRING it is that millisecond printed with the first input format.
- Zones: `timezone` sets both; else `input.timezone` / `output.timezone`. Without an output
  zone, Java prints in the zone of the parsed string (its offset, or the input zone), else
  in the writer JVM's default zone, which the table does not record: we then need
  `airflow_lake.keygen.timebased.jvm.timezone`.
- Arrow types as Java's Avro path sees them (Spark's default): `timestamp[ms]` is a long of
  milliseconds, other timestamp units a long of microseconds (the Avro types we write), a
  `date32` a long of days, each converted with the timestamp type's unit; with
  `hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled=true` a
  zoned timestamp is its instant instead.

Everything is vectorised (numpy civil-date arithmetic, Arrow regex extraction and time zone
offsets); the pattern translation runs once per key generator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import InvalidOptionError, PartitionPathError, UnsupportedFeatureError
from .values import describe_value

PREFIX = "hoodie.keygen.timebased."
OLD_PREFIX = "hoodie.deltastreamer.keygen.timebased."
TIMESTAMP_TYPE = PREFIX + "timestamp.type"
SCALAR_UNIT = PREFIX + "timestamp.scalar.time.unit"
INPUT_FORMAT = PREFIX + "input.dateformat"
INPUT_FORMAT_DELIMITER = PREFIX + "input.dateformat.list.delimiter.regex"
INPUT_TIMEZONE = PREFIX + "input.timezone"
OUTPUT_FORMAT = PREFIX + "output.dateformat"
OUTPUT_TIMEZONE = PREFIX + "output.timezone"
TIMEZONE = PREFIX + "timezone"
PARSER_CLASS = "hoodie.keygen.datetime.parser.class"
DEFAULT_PARSER = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"
CONSISTENT_LOGICAL_TIMESTAMP = "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"
JVM_TIMEZONE = "airflow_lake.keygen.timebased.jvm.timezone"
# the keys Java 0.14/0.15 persists in hoodie.properties (HoodieTableConfig.PERSISTED_CONFIG_LIST);
# `timestamp.type` is not among them
PERSISTED_KEYS = (SCALAR_UNIT, INPUT_FORMAT_DELIMITER, INPUT_FORMAT, INPUT_TIMEZONE, OUTPUT_FORMAT,
                  OUTPUT_TIMEZONE, TIMEZONE, PARSER_CLASS)
SETTING_KEYS = (TIMESTAMP_TYPE,) + PERSISTED_KEYS

TIMESTAMP_TYPES = ("UNIX_TIMESTAMP", "DATE_STRING", "MIXED", "EPOCHMILLISECONDS", "EPOCHMICROSECONDS", "SCALAR")
_UNIT_MS = {"NANOSECONDS": -1_000_000, "MICROSECONDS": -1_000, "MILLISECONDS": 1, "SECONDS": 1_000,
            "MINUTES": 60_000, "HOURS": 3_600_000, "DAYS": 86_400_000}  # negative: a divisor
_TYPE_UNIT = {"UNIX_TIMESTAMP": "SECONDS", "EPOCHMILLISECONDS": "MILLISECONDS",
              "EPOCHMICROSECONDS": "MICROSECONDS"}
_I64 = np.iinfo(np.int64)
_DAY_MS = 86_400_000

# Joda's DateTimeZone.forTimeZone maps these old three-letter IDs to regions (EST is New York
# with daylight saving, not a fixed -05:00)
_JODA_IDS = {
    "GMT": "UTC", "WET": "WET", "CET": "CET", "MET": "CET", "ECT": "CET", "EET": "EET",
    "MIT": "Pacific/Apia", "HST": "Pacific/Honolulu", "AST": "America/Anchorage",
    "PST": "America/Los_Angeles", "MST": "America/Denver", "PNT": "America/Phoenix",
    "CST": "America/Chicago", "EST": "America/New_York", "IET": "America/Indiana/Indianapolis",
    "PRT": "America/Puerto_Rico", "CNT": "America/St_Johns", "AGT": "America/Argentina/Buenos_Aires",
    "BET": "America/Sao_Paulo", "ART": "Africa/Cairo", "CAT": "Africa/Harare", "EAT": "Africa/Addis_Ababa",
    "NET": "Asia/Yerevan", "PLT": "Asia/Karachi", "IST": "Asia/Kolkata", "BST": "Asia/Dhaka",
    "VST": "Asia/Ho_Chi_Minh", "CTT": "Asia/Shanghai", "JST": "Asia/Tokyo", "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney", "SST": "Pacific/Guadalcanal", "NST": "Pacific/Auckland",
}
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def setting(props: dict[str, str], key: str) -> str | None:
    """A timebased setting under its key or Hudi's older `hoodie.deltastreamer.` alternative."""
    value = props.get(key)
    if value is None and key.startswith(PREFIX):
        value = props.get(OLD_PREFIX + key[len(PREFIX):])
    if value is None and key == PARSER_CLASS:
        value = props.get("hoodie.deltastreamer.keygen.datetime.parser.class")
    return value


# -- time zones --------------------------------------------------------------------------


@dataclass(frozen=True)
class Zone:
    """A Joda time zone: a fixed offset, or a region Arrow's time zone database knows."""

    name: str  # as configured
    arrow: str  # Arrow's time zone string
    fixed_ms: int | None  # fixed offset, when there are no transitions

    def offsets(self, utc_ms: np.ndarray) -> np.ndarray:
        """The offset (ms) of this zone at each instant."""
        if self.fixed_ms is not None or not len(utc_ms):
            return np.full(len(utc_ms), self.fixed_ms or 0, dtype=np.int64)
        ts = pa.array(utc_ms, pa.timestamp("ms", self.arrow))
        local = pc.local_timestamp(ts).cast(pa.int64()).to_numpy(zero_copy_only=False)
        offsets = local - utc_ms
        late = utc_ms >= _ARROW_TZ_LIMIT_MS
        if late.any():
            offsets[late] = _python_offsets(self.arrow, utc_ms[late], local=False)
        return offsets

    def from_local(self, local_ms: np.ndarray, describe) -> np.ndarray:
        """Instants of local wall times in this zone (Joda: the earlier one in an overlap;
        a time inside a daylight-saving gap is an error)."""
        if self.fixed_ms is not None or not len(local_ms):
            return local_ms - (self.fixed_ms or 0)
        late = local_ms >= _ARROW_TZ_LIMIT_MS
        naive = pa.array(np.where(late, 0, local_ms), pa.timestamp("ms"))
        try:
            zoned = pc.assume_timezone(naive, self.arrow, ambiguous="earliest", nonexistent="raise")
        except pa.ArrowInvalid as e:
            raise InvalidOptionError(f"{describe()}: a local time does not exist in time zone {self.name} "
                                     f"(daylight-saving gap): {e}") from e
        utc = zoned.cast(pa.int64()).to_numpy(zero_copy_only=False).copy()
        if late.any():
            utc[late] = local_ms[late] - _python_offsets(self.arrow, local_ms[late], local=True)
        return utc


# Arrow's zone database stops at the last transition its tzfile lists (2037): later instants get
# the last offset, not the recurring daylight-saving rule Joda applies. Those use zoneinfo, once
# per distinct minute (transitions fall on whole minutes).
_ARROW_TZ_LIMIT_MS = 2_145_916_800_000  # 2038-01-01


def _python_offsets(zone: str, ms: np.ndarray, *, local: bool) -> np.ndarray:
    from datetime import datetime, timedelta, timezone
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    minutes, index = np.unique(ms // 60_000, return_inverse=True)
    epoch = datetime(1970, 1, 1)
    out = np.empty(len(minutes), np.int64)
    for i, m in enumerate(minutes.tolist()):
        try:
            if local:  # fold=0: the earlier instant of a repeated hour, as Joda
                offset = (epoch + timedelta(minutes=m)).replace(tzinfo=tz, fold=0).utcoffset()
            else:
                offset = (epoch.replace(tzinfo=timezone.utc) + timedelta(minutes=m)).astimezone(tz).utcoffset()
        except OverflowError:
            offset = tz.utcoffset(datetime(9999, 12, 31))
        out[i] = int(offset.total_seconds() * 1000)
    return out[index]


@lru_cache(maxsize=64)
def java_zone(name: str) -> Zone:
    """The zone Java's `DateTimeZone.forTimeZone(TimeZone.getTimeZone(name))` gives, or an
    error for IDs Java would silently turn into GMT."""
    text = name.strip()
    m = re.fullmatch(r"GMT([+-])(\d{1,2})(?::?(\d{2}))?", text)
    if m and int(m.group(2)) <= 23 and int(m.group(3) or 0) <= 59:
        sign = -1 if m.group(1) == "-" else 1
        minutes = int(m.group(2)) * 60 + int(m.group(3) or 0)
        if minutes == 0:
            return Zone(name, "UTC", 0)
        return Zone(name, f"{m.group(1)}{minutes // 60:02d}:{minutes % 60:02d}", sign * minutes * 60_000)
    region = "UTC" if text == "UTC" else _JODA_IDS.get(text, text)
    if region in ("UTC", "Etc/UTC", "Etc/GMT", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu", "UCT"):
        return Zone(name, "UTC", 0)
    try:
        pc.local_timestamp(pa.array([0], pa.timestamp("ms", region)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        raise InvalidOptionError(f"time zone {name!r} is not a zone ID Java recognises (Java silently uses "
                                 "GMT for unknown IDs; set the zone the table was written with, e.g. 'UTC', "
                                 "'GMT+08:00' or 'America/New_York')") from e
    return Zone(name, region, None)


# -- Joda patterns -----------------------------------------------------------------------

Token = tuple[str, int] | str  # (pattern letter, count) or a literal


@lru_cache(maxsize=64)
def tokenize(pattern: str) -> tuple[Token, ...]:
    """Split a Joda `DateTimeFormat` pattern into letters with counts and literals."""
    tokens: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            if i + 1 < n and pattern[i + 1] == "'":
                tokens.append("'")
                i += 2
                continue
            j = i + 1
            text = []
            while j < n:
                if pattern[j] == "'":
                    if j + 1 < n and pattern[j + 1] == "'":
                        text.append("'")
                        j += 2
                        continue
                    break
                text.append(pattern[j])
                j += 1
            tokens.append("".join(text))
            i = j + 1
        elif ch.isascii() and ch.isalpha():
            j = i
            while j < n and pattern[j] == ch:
                j += 1
            tokens.append((ch, j - i))
            i = j
        else:
            tokens.append(ch)
            i += 1
    return tuple(t for t in tokens if t != "")


_PRINTABLE = set("yYMdDHhkKmsSaEeZ")
_SUPPORTED_TEXT = {True: "yyyy M MM d dd H HH h hh k K m mm s ss S.. a Z ZZ",
                   False: "yyyy yy M MM MMM MMMM d D H h k K m s S.. a E EEEE e Z ZZ"}
_PARSABLE = set("yYMdHhkKmsSaZ")
_NUMERIC = set("yYdDHhkKmsSe")


def check_pattern(pattern: str, *, parse: bool, where: str, key: str) -> tuple[Token, ...]:
    """Tokens of a pattern whose letters we render like Joda; any other letter is refused."""
    tokens = tokenize(pattern)
    allowed = _PARSABLE if parse else _PRINTABLE
    for t in tokens:
        if isinstance(t, tuple):
            letter, count = t
            bad = letter not in allowed or (letter == "Z" and count > 2) \
                or (parse and letter in "yY" and count == 2) or (parse and letter == "M" and count >= 3)
            if bad:
                raise UnsupportedFeatureError(
                    f"{where}: {key}={pattern!r}: pattern letters {letter * count!r} are not supported "
                    f"for {'parsing' if parse else 'printing'} (supported: {_SUPPORTED_TEXT[parse]} and quoted "
                    "literals)")
    return tokens


# -- civil dates -------------------------------------------------------------------------


def _floor_div(a: np.ndarray, b: int) -> np.ndarray:
    return np.floor_divide(a, b)


def _civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(year, month, day) of days since 1970-01-01, proleptic Gregorian (as Joda's ISO chronology
    for years after 1582)."""
    z = days + 719468
    era = _floor_div(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return y + (m <= 2), m, d


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    y = y - (m <= 2)
    era = _floor_div(y, 400)
    yoe = y - era * 400
    doy = (153 * np.where(m > 2, m - 3, m + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


# -- printing ----------------------------------------------------------------------------


def _pad(values: np.ndarray, width: int) -> pa.Array:
    text = pa.array(values.astype(np.int64)).cast(pa.string())
    return pc.utf8_lpad(text, width=width, padding="0") if width > 1 else text


def _signed_pad(values: np.ndarray, width: int) -> pa.Array:
    body = _pad(np.abs(values), width)
    return pc.if_else(pa.array(values < 0), pc.binary_join_element_wise("-", body, ""), body)


def _offset_text(offset_ms: np.ndarray, colon: bool) -> pa.Array:
    minutes = offset_ms // 60_000
    sign = pa.array(np.where(minutes < 0, "-", "+"))
    hours, mins = np.abs(minutes) // 60, np.abs(minutes) % 60
    return pc.binary_join_element_wise(sign, _pad(hours, 2), ":" if colon else "", _pad(mins, 2), "")


def _finest_ms(tokens: tuple[Token, ...]) -> int:
    """The smallest time step the pattern prints (a day when it prints no time of day)."""
    steps = {"S": 1, "s": 1000, "m": 60_000, "H": 3_600_000, "h": 3_600_000, "k": 3_600_000,
             "K": 3_600_000, "a": 3_600_000}
    return min((steps.get(t[0], _DAY_MS) for t in tokens if isinstance(t, tuple)), default=_DAY_MS)


def format_instants(utc_ms: np.ndarray, offset_ms: np.ndarray, tokens: tuple[Token, ...]) -> pa.Array:
    """Print instants (ms) shifted by their zone offsets with a checked Joda pattern. Partition
    patterns print few distinct values: each distinct local time step is printed once."""
    local = utc_ms + offset_ms
    step = _finest_ms(tokens)
    if len(local) > 1024 and step > 1 and not any(isinstance(t, tuple) and t[0] == "Z" for t in tokens):
        distinct, index = np.unique(_floor_div(local, step), return_inverse=True)
        starts = distinct * step
        return _format_local(starts, np.zeros(len(starts), np.int64), tokens).take(pa.array(index))
    return _format_local(local, offset_ms, tokens)


def _format_local(local: np.ndarray, offset_ms: np.ndarray, tokens: tuple[Token, ...]) -> pa.Array:
    days = _floor_div(local, _DAY_MS)
    ms_of_day = local - days * _DAY_MS
    year, month, day = _civil_from_days(days)
    hour, minute = ms_of_day // 3_600_000, (ms_of_day // 60_000) % 60
    second, millis = (ms_of_day // 1000) % 60, ms_of_day % 1000
    n = len(local)
    parts: list[pa.Array] = []
    for t in tokens:
        if isinstance(t, str):
            parts.append(pa.array(np.full(n, t, dtype=object), pa.string()))
            continue
        letter, count = t
        if letter in "yY":
            parts.append(_pad(np.mod(year, 100), 2) if count == 2 else _signed_pad(year, count))
        elif letter == "M":
            if count >= 3:
                names = [m if count >= 4 else m[:3] for m in _MONTHS]
                parts.append(pa.array(names, pa.string()).take(pa.array(month - 1)))
            else:
                parts.append(_pad(month, count))
        elif letter == "d":
            parts.append(_pad(day, count))
        elif letter == "D":
            parts.append(_pad(days - _days_from_civil(year, np.ones_like(year), np.ones_like(year)) + 1, count))
        elif letter == "H":
            parts.append(_pad(hour, count))
        elif letter == "h":
            parts.append(_pad(np.where(hour % 12 == 0, 12, hour % 12), count))
        elif letter == "k":
            parts.append(_pad(np.where(hour == 0, 24, hour), count))
        elif letter == "K":
            parts.append(_pad(hour % 12, count))
        elif letter == "m":
            parts.append(_pad(minute, count))
        elif letter == "s":
            parts.append(_pad(second, count))
        elif letter == "S":
            frac = _pad(millis, 3)
            parts.append(pc.utf8_slice_codeunits(frac, 0, count) if count <= 3
                         else pc.binary_join_element_wise(frac, "0" * (count - 3), ""))
        elif letter == "a":
            parts.append(pa.array(np.where(hour < 12, "AM", "PM")))
        elif letter in "Ee":
            dow = (days + 3) % 7  # 0 = Monday
            if letter == "e":
                parts.append(_pad(dow + 1, count))
            else:
                names = [d if count >= 4 else d[:3] for d in _DAYS]
                parts.append(pa.array(names, pa.string()).take(pa.array(dow)))
        elif letter == "Z":
            parts.append(_offset_text(offset_ms, colon=count == 2))
    if not parts:
        return pa.array(np.full(n, "", dtype=object), pa.string())
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "")


# -- parsing -----------------------------------------------------------------------------


def _parse_regex(tokens: tuple[Token, ...]) -> str:
    """An anchored regex with one named group per field (Joda parses a numeric field followed
    by another numeric field with a fixed width, otherwise with up to its maximum digits)."""
    out = ["^"]
    for i, t in enumerate(tokens):
        if isinstance(t, str):
            out.append(re.escape(t))
            continue
        letter, count = t
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        fixed = isinstance(nxt, tuple) and (nxt[0] in _NUMERIC or (nxt[0] == "M" and nxt[1] < 3))
        name = f"f{i}"
        if letter in "yY":
            body = rf"\d{{{count}}}" if fixed else r"[-+]?\d{1,9}"
        elif letter == "S":
            body = rf"\d{{{count}}}" if fixed else r"\d{1,9}"
        elif letter == "a":
            body = r"(?i:AM|PM)"
        elif letter == "Z":
            body = r"Z|[-+]\d{2}:?\d{2}"
        else:
            body = rf"\d{{{count}}}" if fixed else rf"\d{{1,{max(count, 2)}}}"
        out.append(f"(?P<{name}>{body})")
    out.append("$")
    return "".join(out)


@dataclass
class _Parsed:
    local_ms: np.ndarray
    offset_ms: np.ndarray  # parsed offset where `has_offset`
    has_offset: np.ndarray


def _parse_with(strings: pa.Array, tokens: tuple[Token, ...]) -> tuple[np.ndarray, _Parsed]:
    """Rows the pattern parses, with their local wall time and parsed offsets."""
    n = len(strings)
    matched = pc.extract_regex(strings, _parse_regex(tokens))
    ok = pc.fill_null(matched.is_valid(), False).to_numpy(zero_copy_only=False)
    fields = {"y": np.full(n, 1970, np.int64), "M": np.ones(n, np.int64), "d": np.ones(n, np.int64),
              "H": np.zeros(n, np.int64), "m": np.zeros(n, np.int64), "s": np.zeros(n, np.int64),
              "S": np.zeros(n, np.int64)}
    pm = np.zeros(n, dtype=bool)
    offset = np.zeros(n, np.int64)
    has_offset = np.zeros(n, dtype=bool)
    bad = np.zeros(n, dtype=bool)

    def ints(name: str) -> np.ndarray:
        col = pc.if_else(matched.is_valid(), pc.struct_field(matched, name), "0")
        return pc.cast(pc.replace_substring(col, "+", ""), pa.int64()).to_numpy(zero_copy_only=False)

    for i, t in enumerate(tokens):
        if isinstance(t, str):
            continue
        letter, count = t
        name = f"f{i}"
        if letter == "S":
            text = pc.if_else(matched.is_valid(), pc.struct_field(matched, name), "0")
            first3 = pc.utf8_rpad(pc.utf8_slice_codeunits(text, 0, 3), width=3, padding="0")
            fields["S"] = pc.cast(first3, pa.int64()).to_numpy(zero_copy_only=False)
        elif letter == "a":
            text = pc.if_else(matched.is_valid(), pc.struct_field(matched, name), "AM")
            pm = pc.equal(pc.utf8_upper(text), "PM").to_numpy(zero_copy_only=False)
        elif letter == "Z":
            text = pc.if_else(matched.is_valid(), pc.struct_field(matched, name), "Z")
            is_z = pc.equal(text, "Z").to_numpy(zero_copy_only=False)
            digits = pc.replace_substring(pc.replace_substring(pc.if_else(pc.equal(text, "Z"), "+0000", text),
                                                               ":", ""), "+", "")
            hhmm = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
            sign = np.where(hhmm < 0, -1, 1)
            hhmm = np.abs(hhmm)
            bad |= (hhmm % 100) > 59
            offset = np.where(is_z, 0, sign * ((hhmm // 100) * 60 + hhmm % 100) * 60_000)
            has_offset[:] = True
        elif letter in "yY":
            fields["y"] = ints(name)
        elif letter == "M":
            fields["M"] = ints(name)
        elif letter == "d":
            fields["d"] = ints(name)
        elif letter == "H":
            fields["H"] = ints(name)
            bad |= fields["H"] > 23
        elif letter in "hkK":
            v = ints(name)
            if letter == "h":  # clock hour of half day, 1..12 (12 is 0)
                bad |= (v < 1) | (v > 12)
                v = v % 12
            elif letter == "K":
                bad |= v > 11
            else:  # k: clock hour of day, 1..24 (24 is 0)
                bad |= (v < 1) | (v > 24)
                v = v % 24
            fields["H"] = v
            fields["_half"] = np.ones(n, dtype=bool) if letter in "hK" else np.zeros(n, dtype=bool)
        elif letter == "m":
            fields["m"] = ints(name)
            bad |= fields["m"] > 59
        elif letter == "s":
            fields["s"] = ints(name)
            bad |= fields["s"] > 59
    hour = fields["H"]
    if "_half" in fields:
        hour = np.where(fields["_half"] & pm, hour + 12, hour)
    y, mo, d = fields["y"], fields["M"], fields["d"]
    days = _days_from_civil(y, np.clip(mo, 1, 12), d)
    # a day or month out of range (Feb 30, month 13) does not round-trip
    cy, cm, cd = _civil_from_days(days)
    bad |= (mo < 1) | (mo > 12) | (cy != y) | (cm != mo) | (cd != d)
    local = days * _DAY_MS + hour * 3_600_000 + fields["m"] * 60_000 + fields["s"] * 1000 + fields["S"]
    return ok & ~bad, _Parsed(local, offset, has_offset)


# -- the key generator's partition values ------------------------------------------------


@dataclass(frozen=True)
class TimestampPartitioner:
    """One TIMESTAMP partition field's renderer, built from `hoodie.keygen.timebased.*`."""

    where: str
    timestamp_type: str
    unit: str | None  # TimeUnit name for numbers, None for DATE_STRING / MIXED
    input_formats: tuple[str, ...]
    output_format: str
    input_zone: Zone | None
    output_zone: Zone | None
    jvm_zone: Zone | None
    consistent_logical: bool

    @staticmethod
    def from_settings(props: dict[str, str], where: str) -> TimestampPartitioner:
        """Validate the settings; a missing one is asked for by name."""
        missing = [k for k in (TIMESTAMP_TYPE, OUTPUT_FORMAT) if not (setting(props, k) or "").strip()]
        ttype = (setting(props, TIMESTAMP_TYPE) or "").strip().upper()
        if ttype in ("DATE_STRING", "MIXED") and not (setting(props, INPUT_FORMAT) or "").strip():
            missing.append(INPUT_FORMAT)
        if missing:
            raise InvalidOptionError(
                f"{where}: the TimestampBasedKeyGenerator needs {', '.join(missing)}, which the table's "
                "hoodie.properties does not hold (Java keeps hoodie.keygen.timebased.timestamp.type only in the "
                "writer's config); pass the values the table was written with as options, e.g. "
                f"Table.open(path, options={{{missing[0]!r}: ...}})")
        if ttype not in TIMESTAMP_TYPES:
            raise InvalidOptionError(f"{where}: {TIMESTAMP_TYPE}={ttype!r} is not one of {', '.join(TIMESTAMP_TYPES)}")
        parser = (setting(props, PARSER_CLASS) or DEFAULT_PARSER).strip()
        if parser != DEFAULT_PARSER:
            raise UnsupportedFeatureError(f"{where}: {PARSER_CLASS}={parser!r} is not implemented (only "
                                          f"{DEFAULT_PARSER})")
        unit = _TYPE_UNIT.get(ttype)
        if ttype == "SCALAR":
            unit = (setting(props, SCALAR_UNIT) or "SECONDS").strip().upper()
            if unit not in _UNIT_MS:
                raise InvalidOptionError(f"{where}: {SCALAR_UNIT}={unit!r} is not one of {', '.join(_UNIT_MS)}")
        output = setting(props, OUTPUT_FORMAT) or ""
        check_pattern(output, parse=False, where=where, key=OUTPUT_FORMAT)
        formats: tuple[str, ...] = ()
        if ttype in ("DATE_STRING", "MIXED"):
            delimiter = (setting(props, INPUT_FORMAT_DELIMITER) or ",").strip() or ","
            formats = tuple(f.strip() for f in re.split(delimiter, setting(props, INPUT_FORMAT) or ""))
            for f in formats:
                check_pattern(f, parse=True, where=where, key=INPUT_FORMAT)

        def zone(key: str) -> Zone | None:
            value = setting(props, key)
            if value is None or not value.strip():
                return None
            try:
                return java_zone(value)
            except InvalidOptionError as e:
                raise InvalidOptionError(f"{where}: {key}: {e}") from None

        if setting(props, TIMEZONE) is not None:  # present, even empty, it replaces the other two
            in_zone = out_zone = zone(TIMEZONE)
        else:
            in_zone, out_zone = zone(INPUT_TIMEZONE), zone(OUTPUT_TIMEZONE)
        consistent = (props.get(CONSISTENT_LOGICAL_TIMESTAMP) or "false").strip().lower() == "true"
        return TimestampPartitioner(where, ttype, unit, formats, output, in_zone, out_zone, zone(JVM_TIMEZONE),
                                    consistent)

    def _jvm(self, why: str) -> Zone:
        if self.jvm_zone is None:
            raise InvalidOptionError(
                f"{self.where}: no {TIMEZONE}, {INPUT_TIMEZONE} or {OUTPUT_TIMEZONE} is set, so Java used the "
                f"writer JVM's default time zone {why}, which the table does not record; set {JVM_TIMEZONE} "
                f"to that zone (e.g. 'UTC'), or {OUTPUT_TIMEZONE} if the table's writers set it")
        return self.jvm_zone

    # -- values --------------------------------------------------------------------------
    def render(self, col: pa.Array, field: str) -> pa.Array:
        """The formatted partition value of every row (before URL encoding and hive style)."""
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
            return self._render_strings(col.cast(pa.string()), field)
        utc = self._instants(col, field)
        zone = self.output_zone or self._jvm("to print numeric values")
        return format_instants(utc, zone.offsets(utc), tokenize(self.output_format))

    def _instants(self, col: pa.Array, field: str) -> np.ndarray:
        t = col.type
        if self.unit is None:
            raise InvalidOptionError(f"{self.where}: partition field {field!r} holds {t} values but "
                                     f"{TIMESTAMP_TYPE}={self.timestamp_type} parses strings (Java fails: no "
                                     f"{SCALAR_UNIT} for a scalar value)")
        if pa.types.is_timestamp(t):
            if self.consistent_logical and t.tz is not None:  # java.sql.Timestamp: the instant
                ms = pc.cast(col, pa.timestamp("ms", t.tz), safe=False).cast(pa.int64())
                return np.where(pc.is_null(ms).to_numpy(zero_copy_only=False),
                                self._to_ms(np.ones(1, np.int64)),
                                pc.fill_null(ms, 0).to_numpy(zero_copy_only=False))
            unit = "ms" if t.unit == "ms" else "us"  # the Avro logical type we store it as
            raw = pc.cast(col, pa.timestamp(unit, t.tz), safe=False).cast(pa.int64())
        elif pa.types.is_date(t):
            raw = pc.cast(col, pa.date32()).cast(pa.int32()).cast(pa.int64())
        elif pa.types.is_integer(t):
            raw = col.cast(pa.int64())
        elif pa.types.is_floating(t) or pa.types.is_decimal(t):
            raw = self._truncated(col)
        else:
            raise InvalidOptionError(f"{self.where}: partition field {field!r} has type {t}, which the "
                                     "TimestampBasedKeyGenerator does not accept (numbers, strings, dates, timestamps)")
        values = pc.fill_null(raw, 1).to_numpy(zero_copy_only=False).astype(np.int64)  # Java: null -> 1
        return self._to_ms(values)

    @staticmethod
    def _truncated(col: pa.Array) -> pa.Array:
        """Java's `longValue()`: toward zero, NaN 0, saturating."""
        f = pc.cast(col, pa.float64()) if pa.types.is_floating(col.type) else None
        if f is not None:
            arr = f.to_numpy(zero_copy_only=False)
            nulls = pc.is_null(col).to_numpy(zero_copy_only=False)
            arr = np.nan_to_num(np.trunc(arr), nan=0.0, posinf=float(_I64.max), neginf=float(_I64.min))
            with np.errstate(invalid="ignore"):
                ints = np.where(arr >= 2.0**63, _I64.max, np.where(arr < -(2.0**63), _I64.min,
                                                                    arr.astype(np.int64)))
            return pa.array(ints, pa.int64(), mask=nulls)
        return pc.cast(pc.trunc(col), pa.int64())

    def _to_ms(self, values: np.ndarray) -> np.ndarray:
        """`TimeUnit.convert(v, unit)` to milliseconds: truncating toward zero, saturating."""
        factor = _UNIT_MS[self.unit or "MILLISECONDS"]
        if factor < 0:
            d = -factor
            return np.sign(values) * (np.abs(values) // d)
        limit = _I64.max // factor
        return np.where(values > limit, _I64.max,
                        np.where(values < -limit, _I64.min, values * factor)).astype(np.int64)

    def _default_string(self) -> str:
        """Java's value for a null DATE_STRING field: 1 ms after the epoch in the first format."""
        zone = self.input_zone or self.output_zone or java_zone("GMT")
        one = np.ones(1, np.int64)
        return format_instants(one, zone.offsets(one), check_pattern(
            self.input_formats[0], parse=False, where=self.where, key=INPUT_FORMAT))[0].as_py()

    def _render_strings(self, strings: pa.Array, field: str) -> pa.Array:
        if self.unit is not None and self.timestamp_type not in ("DATE_STRING", "MIXED"):
            raise InvalidOptionError(f"{self.where}: partition field {field!r} holds strings but "
                                     f"{TIMESTAMP_TYPE}={self.timestamp_type} expects numbers (Java: missing "
                                     f"input formatter; use DATE_STRING with {INPUT_FORMAT})")
        if strings.null_count:
            strings = pc.fill_null(strings, self._default_string())
        if len(strings) > 1024:  # repeated values are parsed and printed once
            encoded = strings.dictionary_encode()
            encoded = encoded.combine_chunks() if isinstance(encoded, pa.ChunkedArray) else encoded
            if len(encoded.dictionary) * 2 <= len(strings):
                return self._render_strings(encoded.dictionary, field).take(encoded.indices)
        n = len(strings)
        done = np.zeros(n, dtype=bool)
        local = np.zeros(n, np.int64)
        offset = np.zeros(n, np.int64)
        has_offset = np.zeros(n, dtype=bool)
        for fmt in self.input_formats:
            ok, parsed = _parse_with(strings, tokenize(fmt))
            take = ok & ~done
            local = np.where(take, parsed.local_ms, local)
            offset = np.where(take, parsed.offset_ms, offset)
            has_offset = np.where(take, parsed.has_offset, has_offset)
            done |= take
            if done.all():
                break
        if not done.all():
            row = int(np.argmin(done))
            raise PartitionPathError(f"{self.where}: partition field {field!r} value {describe_value(strings[row])} "
                                     f"(row {row}) matches none of the input formats {list(self.input_formats)} "
                                     f"({INPUT_FORMAT})")
        # instants: a parsed offset wins unless an input zone is set (Joda's withZone)
        describe = lambda: f"{self.where}: partition field {field!r}"  # noqa: E731
        utc = local - offset
        if (~has_offset).any():
            zone_in = self.input_zone or self._jvm("to read date strings without an offset")
            utc[~has_offset] = zone_in.from_local(local[~has_offset], describe)
        # printing zone: the output zone, else the parsed value's zone
        if self.output_zone is not None:
            out_offset = self.output_zone.offsets(utc)
        elif self.input_zone is not None:
            out_offset = self.input_zone.offsets(utc)
        else:
            out_offset = offset
            if (~has_offset).any():
                out_offset = np.where(has_offset, offset, self._jvm("to print date strings without an offset")
                                      .offsets(utc))
        return format_instants(utc, out_offset, tokenize(self.output_format))
