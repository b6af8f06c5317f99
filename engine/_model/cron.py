"""Cron schedules of workflow runs (``start_workflow(cron_schedule=...)``), as Temporal reads
them: five-field cron expressions, the descriptors ``@yearly``, ``@monthly``, ``@weekly``,
``@daily``, ``@hourly``, ``@every <duration>`` (``@every 90s``, ``@every 1h30m``), and a
``CRON_TZ=<IANA zone>`` prefix (times are UTC otherwise).

Expressions are read by ``croniter``; ``@every`` (Temporal's, not standard cron) here.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..exceptions import InvalidArgumentError
from .durations import go_duration

_EVERY = re.compile(r"@every\s+(\S+)")


def _every(spec: str) -> float | None:
    """The interval of an ``@every`` schedule in seconds, or None for other schedules."""
    match = _EVERY.fullmatch(spec)
    if match is None:
        return None
    total = go_duration(match.group(1))
    if total is None or total < 1.0:
        raise InvalidArgumentError(
            f"cron_schedule {spec!r}: @every takes a duration of one second or more, such as "
            "'@every 30s' or '@every 1h30m'"
        )
    return total


def _split_zone(schedule: str) -> tuple[str, ZoneInfo | None]:
    spec = schedule.strip()
    if not spec.startswith("CRON_TZ="):
        return spec, None
    zone_name, _, rest = spec[len("CRON_TZ=") :].partition(" ")
    try:
        return rest.strip(), ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgumentError(
            f"cron_schedule {schedule!r}: {zone_name!r} is not an IANA time zone "
            "(e.g. CRON_TZ=Europe/Paris)"
        ) from None


def validate_cron(schedule: str) -> None:
    """Raise :class:`InvalidArgumentError` saying what is wrong with ``schedule``."""
    if not isinstance(schedule, str) or not schedule.strip():
        raise InvalidArgumentError("cron_schedule must be a non-empty string like '0 * * * *'")
    spec, _ = _split_zone(schedule)
    if _every(spec) is not None:
        return
    if not croniter.is_valid(spec):
        raise InvalidArgumentError(
            f"cron_schedule {schedule!r} is not a cron expression: give five fields (minute "
            "hour day-of-month month day-of-week, e.g. '*/15 * * * *'), a descriptor such as "
            "'@hourly', or '@every 10m'"
        )


def cron_backoff(schedule: str, scheduled: float, now: float) -> float:
    """How long a cron run waits before its first workflow task, as Temporal's server
    computes it: the schedule's first time after the previous run's scheduled time
    (``scheduled``; ``now`` for the first run) that is not before ``now`` (times missed
    while a run was still going are skipped), rounded up to whole seconds."""
    if now < scheduled:
        fire = scheduled
    else:
        spec, _ = _split_zone(schedule)
        every = _every(spec)
        if every is not None:
            # Each step is "the whole second before, plus the interval": from the whole
            # second of ``scheduled``, the first step that is not before ``now``.
            base = float(int(scheduled))
            fire = base + every * max(1, math.ceil(round((now - base) / every, 9)))
        else:
            # The first time of the schedule after ``scheduled`` that is not before
            # ``now`` (one step, however many times a long run missed).
            fire = next_fire(schedule, max(scheduled, now - 1e-6))
    return float(math.ceil(round(fire - now, 9)))


def next_fire(schedule: str, after: float) -> float:
    """The first time (epoch seconds) strictly after ``after`` that ``schedule`` names."""
    spec, zone = _split_zone(schedule)
    every = _every(spec)
    if every is not None:
        return float(int(after)) + every
    start = datetime.fromtimestamp(after, zone or UTC)
    return float(croniter(spec, start).get_next(float))
