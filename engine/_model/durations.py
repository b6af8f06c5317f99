"""Go durations (``1h30m``, ``250ms``, ``1.5s``), as Temporal writes them in cron
strings, schedule specs and list filters: one reader for all of them."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(text: str) -> float | None:
    """Seconds in an unsigned Go duration (``"0"`` is zero); None if ``text`` is not one."""
    if text == "0":
        return 0.0
    total, pos = 0.0, 0
    for part in _PART.finditer(text):
        if part.start() != pos:
            return None
        total += float(part[1]) * _UNITS[part[2]]
        pos = part.end()
    return total if text and pos == len(text) else None
