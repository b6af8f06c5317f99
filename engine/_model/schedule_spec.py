"""When a schedule's actions fall: Temporal's schedule specs, computed (no I/O).

A spec is the union of calendar matches, intervals and cron strings (read into calendars
and intervals, as Temporal's server reads them), minus the times a ``skip`` calendar
matches, kept between ``start_at`` and ``end_at``. Calendars match wall-clock time in the
spec's time zone (UTC when none), so "02:30 every day in America/New_York" follows the
zone's daylight-saving changes. Each nominal time may then be moved later by a jitter,
deterministic per schedule and time, never past the next nominal time.

This module is the groundwork of issue 16 (schedules): the rules and messages here were
checked on ``temporal server start-dev`` where a comment says so.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..exceptions import InvalidArgumentError, RPCError, RPCStatusCode
from .durations import go_duration

__all__ = [
    "CALENDAR_FIELDS",
    "Calendar",
    "CompiledSpec",
    "Interval",
    "Range",
    "ScheduleSpecError",
    "calendar_from_cron",
    "compile_spec",
]


class ScheduleSpecError(InvalidArgumentError, RPCError):
    """A spec Temporal would refuse ("Invalid schedule spec: ..."), naming the field. Also
    an ``RPCError`` with status ``INVALID_ARGUMENT``, as the server's refusal reaches
    ``temporalio`` code."""

    def __init__(self, message: str) -> None:
        RPCError.__init__(self, f"Invalid schedule spec: {message}", RPCStatusCode.INVALID_ARGUMENT)


#: The calendar fields: name, Temporal's name in messages, smallest and largest value.
FIELDS = (
    ("second", "Second", 0, 59),
    ("minute", "Minute", 0, 59),
    ("hour", "Hour", 0, 23),
    ("day_of_month", "DayOfMonth", 1, 31),
    ("month", "Month", 1, 12),
    ("year", "Year", 1970, 9999),
    ("day_of_week", "DayOfWeek", 0, 6),
)
_BOUNDS = {name: (said, lo, hi) for name, said, lo, hi in FIELDS}
#: The calendar fields' names, in order (``Calendar``'s and ``ScheduleCalendarSpec``'s).
CALENDAR_FIELDS = tuple(name for name, *_ in FIELDS)
#: How far ahead a calendar is searched before it is taken to match nothing more.
_HORIZON_YEARS = 100


@dataclass(frozen=True)
class Range:
    """Values ``start``, ``start + step``, ... up to ``end`` inclusive (Temporal's
    ``ScheduleRange``: an ``end`` below ``start`` means ``start``; a ``step`` of 0, 1)."""

    start: int
    end: int = 0
    step: int = 0

    def normalized(self) -> Range:
        return Range(self.start, max(self.end, self.start), self.step or 1)

    def values(self) -> range:
        r = self.normalized()
        return range(r.start, r.end + 1, r.step)


def _everything(name: str) -> tuple[Range, ...]:
    _, lo, hi = _BOUNDS[name]
    return (Range(lo, hi),)


@dataclass(frozen=True)
class Calendar:
    """Temporal's ``ScheduleCalendarSpec``: a time matches when each field has a range
    that holds it (``year`` empty: every year). The defaults match midnight every day."""

    second: tuple[Range, ...] = (Range(0),)
    minute: tuple[Range, ...] = (Range(0),)
    hour: tuple[Range, ...] = (Range(0),)
    day_of_month: tuple[Range, ...] = (Range(1, 31),)
    month: tuple[Range, ...] = (Range(1, 12),)
    year: tuple[Range, ...] = ()
    day_of_week: tuple[Range, ...] = (Range(0, 6),)
    comment: str = ""


@dataclass(frozen=True)
class Interval:
    """Times ``epoch + n * every + offset`` (seconds)."""

    every: float
    offset: float = 0.0


@dataclass(frozen=True)
class _Sets:
    """A calendar's fields as sets of values, for matching."""

    second: tuple[int, ...]
    minute: tuple[int, ...]
    hour: tuple[int, ...]
    day_of_month: frozenset[int]
    month: tuple[int, ...]
    year: frozenset[int] | None
    day_of_week: frozenset[int]

    def matches(self, t: datetime) -> bool:
        return (
            t.second in self.second
            and t.minute in self.minute
            and t.hour in self.hour
            and t.day in self.day_of_month
            and t.month in self.month
            and (self.year is None or t.year in self.year)
            and (t.isoweekday() % 7) in self.day_of_week
        )


def _values(name: str, ranges: Sequence[Range]) -> list[int]:
    """The values of a calendar field; out-of-range bounds refused with Temporal's words
    (checked on the dev server: ``DayOfWeek Start is not in range [0-6], DayOfWeek End is
    before Start or not in range [0-6]``; an end of 0 means "the start")."""
    said, lo, hi = _BOUNDS[name]
    out: set[int] = set()
    for r in ranges:
        problems = []
        if not lo <= r.start <= hi:
            problems.append(f"{said} Start is not in range [{lo}-{hi}]")
        if r.end != 0 and (r.end < r.start or not lo <= r.end <= hi):
            problems.append(f"{said} End is before Start or not in range [{lo}-{hi}]")
        if r.step < 0:
            problems.append(f"{said} Step is negative")
        if problems:
            raise ScheduleSpecError("invalid calendar spec: " + ", ".join(problems))
        out.update(r.values())
    return sorted(out)


def _sets(cal: Calendar) -> _Sets:
    return _Sets(
        second=tuple(_values("second", cal.second)),
        minute=tuple(_values("minute", cal.minute)),
        hour=tuple(_values("hour", cal.hour)),
        day_of_month=frozenset(_values("day_of_month", cal.day_of_month)),
        month=tuple(_values("month", cal.month)),
        year=frozenset(_values("year", cal.year)) if cal.year else None,
        day_of_week=frozenset(_values("day_of_week", cal.day_of_week)),
    )


@dataclass(frozen=True)
class CompiledSpec:
    """A checked spec, ready to say when its actions fall."""

    calendars: tuple[_Sets, ...] = ()
    intervals: tuple[Interval, ...] = ()
    skip: tuple[_Sets, ...] = ()
    start_at: float | None = None
    end_at: float | None = None
    jitter: float = 0.0
    zone: ZoneInfo | None = None
    #: The cron strings' calendars and intervals, as Temporal's describe shows them.
    cron_calendars: tuple[Calendar, ...] = field(default=(), compare=False)
    cron_intervals: tuple[Interval, ...] = field(default=(), compare=False)

    def next_nominal(self, after: float) -> float | None:
        """The first nominal time strictly after ``after`` (epoch seconds), or None."""
        floor = after
        if self.start_at is not None and self.start_at > after:
            floor = math.nextafter(self.start_at, -math.inf)
        t = floor
        for _ in range(100_000):  # skips: each turn passes one skipped time
            candidates = [c for c in (self._next_interval(t), self._next_calendar(t)) if c]
            if not candidates:
                return None
            t = min(candidates)
            if self.end_at is not None and t > self.end_at:
                return None
            if not any(s.matches(self._wall(t)) for s in self.skip):
                return t
        return None

    def next_action(self, after: float, schedule_id: str) -> tuple[float, float] | None:
        """(nominal, actual) of the first action after ``after``: the actual time is the
        nominal one plus the jitter, never at or past the next nominal time."""
        nominal = self.next_nominal(after)
        if nominal is None:
            return None
        return nominal, nominal + self._jitter_of(nominal, schedule_id)

    def times(self, after: float, count: int) -> list[float]:
        """The next ``count`` nominal times after ``after``."""
        out: list[float] = []
        t: float | None = after
        while len(out) < count and t is not None:
            t = self.next_nominal(t)
            if t is not None:
                out.append(t)
        return out

    # -- parts ------------------------------------------------------------------------

    def _wall(self, t: float) -> datetime:
        return datetime.fromtimestamp(t, self.zone or UTC)

    def _jitter_of(self, nominal: float, schedule_id: str) -> float:
        if self.jitter <= 0:
            return 0.0
        following = self.next_nominal(nominal)
        room = self.jitter if following is None else min(self.jitter, following - nominal)
        digest = hashlib.sha256(f"{schedule_id}\x00{nominal!r}".encode()).digest()
        fraction = int.from_bytes(digest[:8], "big") / 2**64
        return fraction * room

    def _next_interval(self, after: float) -> float | None:
        best = None
        for iv in self.intervals:
            n = math.floor((after - iv.offset) / iv.every) + 1
            t = n * iv.every + iv.offset
            if t <= after:  # float rounding
                t += iv.every
            best = t if best is None else min(best, t)
        return best

    def _next_calendar(self, after: float) -> float | None:
        best = None
        for cal in self.calendars:
            found = _next_match(cal, after, self.zone or UTC)
            if found is not None:
                best = found if best is None else min(best, found)
        return best


def _days(cal: _Sets, first: date) -> Iterator[date]:
    """The days from ``first`` on that the calendar's date fields match, in order."""
    for year in range(first.year, first.year + _HORIZON_YEARS + 1):
        if cal.year is not None and year not in cal.year:
            continue
        for month in cal.month:
            if (year, month) < (first.year, first.month):
                continue
            start_day = first.day if (year, month) == (first.year, first.month) else 1
            for day in range(start_day, 32):
                try:
                    d = date(year, month, day)
                except ValueError:
                    break
                if day in cal.day_of_month and (d.isoweekday() % 7) in cal.day_of_week:
                    yield d


def _instants(wall: datetime) -> tuple[float, ...]:
    """The instants a wall-clock time (with its zone) stands for: none for a time a
    daylight-saving change skips (02:30 on the spring-forward day in New York), two for a
    time that happens twice (01:30 on the fall-back day), else one. Temporal's server does
    the same: no action that day for the first, one at each for the second (checked on the
    dev server)."""
    first = wall.replace(fold=0)
    t = first.timestamp()
    back = datetime.fromtimestamp(t, wall.tzinfo)
    if back.replace(tzinfo=None) != first.replace(tzinfo=None):
        return ()  # skipped by the clock change
    second = wall.replace(fold=1).timestamp()
    return (t,) if second == t else (t, second)


def _next_match(cal: _Sets, after: float, zone: tzinfo) -> float | None:
    """The first time after ``after`` whose wall clock in ``zone`` the calendar matches
    (see :func:`_instants` for the times a daylight-saving change skips or repeats)."""
    start = datetime.fromtimestamp(after, zone).date() - timedelta(days=1)
    found_on: date | None = None
    best: float | None = None
    for day in _days(cal, start):
        if found_on is not None and day > found_on + timedelta(days=1):
            break
        for hour in cal.hour:
            for minute in cal.minute:
                for second in cal.second:
                    wall = datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=zone)
                    for t in _instants(wall):
                        if t > after and (best is None or t < best):
                            best = t
                            found_on = found_on or day
    return best


# -- cron strings -----------------------------------------------------------------------

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _duration(text: str, cron: str) -> float:
    seconds = go_duration(text)
    if seconds is None:
        raise ScheduleSpecError(f"invalid duration {text!r} in cron string {cron!r}")
    return seconds


def calendar_from_cron(cron: str) -> tuple[str | None, Calendar | None, Interval | None]:
    """A cron string read as Temporal reads one: ``(time zone or None, calendar, interval)``,
    one of the last two set. Five fields are minute, hour, day of month, month and day of
    week; six add the year at the end, seven the second at the start as well (checked on
    the dev server: ``0 30 9 * * *`` is refused, 30 not being an hour). ``@every 90m`` (and
    ``@every 1h/15m`` with an offset) is an interval; ``@daily`` and friends are calendars;
    ``CRON_TZ=Zone`` (or ``TZ=``) in front names the zone."""
    text = cron.strip()
    zone = None
    for prefix in ("CRON_TZ=", "TZ="):
        if text.startswith(prefix):
            zone, _, text = text[len(prefix) :].partition(" ")
            text = text.strip()
    if text.startswith("@every"):
        every, _, offset = text[len("@every") :].strip().partition("/")
        return (
            zone,
            None,
            Interval(_duration(every, cron), _duration(offset, cron) if offset else 0.0),
        )
    text = _DESCRIPTORS.get(text, text)
    parts = text.split()
    if len(parts) == 5:
        parts = ["0", *parts, "*"]
    elif len(parts) == 6:
        parts = ["0", *parts]
    elif len(parts) != 7:
        raise ScheduleSpecError(
            f"CronString does not have 5-7 fields: cron string {cron!r} has {len(parts)} "
            "fields: give 5 (minute hour day-of-month "
            "month day-of-week), 6 (and a year) or 7 (a second first, and a year)"
        )
    _check_cron_ranges(parts, cron)
    try:
        fields, nth = croniter.expand(" ".join(parts), second_at_beginning=True)
    except Exception as err:  # croniter's own errors name what it could not read
        raise ScheduleSpecError(f"cron string {cron!r}: {err}") from None
    if nth or any("l" in f for f in fields):  # refused above; croniter reads more
        raise ScheduleSpecError(f"cron string {cron!r}: L and # are not supported")
    minute, hour, dom, month, dow, second, year = fields
    return (
        zone,
        Calendar(
            second=_ranges("second", second),
            minute=_ranges("minute", minute),
            hour=_ranges("hour", hour),
            day_of_month=_ranges("day_of_month", dom),
            month=_ranges("month", month),
            year=() if year == ["*"] else _ranges("year", year),
            day_of_week=_ranges("day_of_week", dow),
            comment="",
        ),
        None,
    )


_NAMES = ("Second", "Minute", "Hour", "DayOfMonth", "Month", "DayOfWeek", "Year")


_MONTH_OR_DAY_NAME = re.compile(
    r"jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|sun|mon|tue|wed|thu|fri|sat", re.I
)


def _check_cron_ranges(parts: list[str], cron: str) -> None:
    """Numbers out of their field's range, and what Temporal's cron reading does not take
    (``L``, ``W``, ``#``, ``?``), refused with its message (the dev server's:
    ``DayOfMonth is not in range [1-31]`` for ``0 12 L * *`` and for ``0 12 ? * MON``)."""
    bounds = [_BOUNDS[n] for n in ("second", "minute", "hour", "day_of_month", "month")]
    bounds += [("DayOfWeek", 0, 7), _BOUNDS["year"]]
    for text, (said, lo, hi) in zip(parts, bounds, strict=True):
        body, _, step = text.partition("/")
        plain = _MONTH_OR_DAY_NAME.sub("", body)
        numbers = re.findall(r"\d+", plain)
        if re.sub(r"[\d,*-]", "", plain) or (step and not step.isdigit()):
            raise ScheduleSpecError(f"{said} is not in range [{lo}-{hi}]")
        for number in numbers:
            if not lo <= int(number) <= hi:
                raise ScheduleSpecError(f"{said} is not in range [{lo}-{hi}]")


def _ranges(name: str, values: Sequence[object]) -> tuple[Range, ...]:
    if values == ["*"]:
        return _everything(name)
    ints = [int(str(v)) for v in values]
    numbers = sorted({v % 7 if name == "day_of_week" else v for v in ints})
    out: list[Range] = []
    for v in numbers:
        if out and out[-1].end == v - 1:
            out[-1] = Range(out[-1].start, v)
        else:
            out.append(Range(v, v))
    return tuple(out)


# -- the whole spec -----------------------------------------------------------------------


def compile_spec(
    *,
    calendars: Sequence[Calendar] = (),
    intervals: Sequence[Interval] = (),
    cron_expressions: Sequence[str] = (),
    skip: Sequence[Calendar] = (),
    start_at: float | None = None,
    end_at: float | None = None,
    jitter: float = 0.0,
    time_zone_name: str | None = None,
) -> CompiledSpec:
    """Check a spec and make it ready; :class:`ScheduleSpecError` says what is wrong."""
    zone_name = time_zone_name or None
    cron_cals: list[Calendar] = []
    cron_ivs: list[Interval] = []
    for cron in cron_expressions:
        zone, cal, iv = calendar_from_cron(cron)
        if zone:
            if zone_name and zone != zone_name:
                raise ScheduleSpecError(
                    f"cron string {cron!r} names time zone {zone} but the spec's is {zone_name}"
                )
            zone_name = zone
        if cal is not None:
            cron_cals.append(cal)
        if iv is not None:
            cron_ivs.append(iv)
    zone_info = None
    if zone_name and zone_name != "UTC":
        try:
            zone_info = ZoneInfo(zone_name)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScheduleSpecError(f"unknown time zone {zone_name}") from None
    all_intervals = [*intervals, *cron_ivs]
    for iv in all_intervals:
        if not iv.every >= 1.0 or not math.isfinite(iv.every):
            raise ScheduleSpecError("interval is too small")  # Temporal's words (dev server)
        if iv.offset < 0:
            raise ScheduleSpecError("phase cannot be negative")
        if iv.offset > iv.every:
            raise ScheduleSpecError("phase cannot be greater than Interval")  # the dev server's
    if jitter < 0 or not math.isfinite(jitter):
        raise ScheduleSpecError("jitter must not be negative")
    return CompiledSpec(
        calendars=tuple(_sets(c) for c in [*calendars, *cron_cals]),
        intervals=tuple(all_intervals),
        skip=tuple(_sets(c) for c in skip),
        start_at=start_at,
        end_at=end_at,
        jitter=jitter,
        zone=zone_info,
        cron_calendars=tuple(cron_cals),
        cron_intervals=tuple(cron_ivs),
    )
