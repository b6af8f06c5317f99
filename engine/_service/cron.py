"""Cron schedules of workflow runs (``start_workflow(cron_schedule=...)``), as Temporal reads
them: five-field cron expressions, the descriptors ``@yearly``, ``@monthly``, ``@weekly``,
``@daily``, ``@hourly``, ``@every <duration>`` (``@every 90s``, ``@every 1h30m``), and a
``CRON_TZ=<IANA zone>`` prefix (times are UTC otherwise).

Expressions are read by ``croniter``; ``@every`` (Temporal's, not standard cron) here.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..exceptions import InvalidArgumentError

_EVERY = re.compile(r"@every\s+(\S+)")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _every(spec: str) -> float | None:
    """The interval of an ``@every`` schedule in seconds, or None for other schedules."""
    match = _EVERY.fullmatch(spec)
    if match is None:
        return None
    text, total, pos = match.group(1), 0.0, 0
    for part in _DURATION_PART.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _UNITS[part.group(2)]
        pos = part.end()
    if pos != len(text) or total < 1.0:
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


def next_fire(schedule: str, after: float) -> float:
    """The first time (epoch seconds) strictly after ``after`` that ``schedule`` names."""
    spec, zone = _split_zone(schedule)
    every = _every(spec)
    if every is not None:
        return float(int(after)) + every
    start = datetime.fromtimestamp(after, zone or UTC)
    return float(croniter(spec, start).get_next(float))
