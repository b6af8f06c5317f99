"""A timeline's time axis: round ticks and their labels, and the shortest bar worth
drawing. Used by the Timeline widget, its static figure and the web UI (through
``widgets.models``, which re-exports these names)."""

from __future__ import annotations

from typing import Any

__all__ = ["axis_ticks", "min_bar_seconds", "tick_label", "timeline_ticks"]

#: The units a timeline axis is labelled in, and the steps (in that unit) its ticks may
#: take: round values only (1, 2, 5, 10 ... seconds; 1, 2, 5, 10, 15, 30 minutes ...).
_AXIS_UNITS: tuple[tuple[str, float, tuple[float, ...]], ...] = (
    ("ms", 0.001, (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    ("s", 1.0, (1, 2, 5, 10, 15, 20, 30)),
    ("min", 60.0, (1, 2, 5, 10, 15, 20, 30)),
    ("h", 3600.0, (1, 2, 3, 6, 12)),
    ("d", 86400.0, (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)),
)
_MIN_STEP = 0.001  # the finest step: one millisecond


def _tick_step(span: float, max_ticks: int) -> tuple[str, float, float]:
    """The unit (name, seconds) and the step (seconds) of the ticks for ``span``."""
    raw = span / max(1, max_ticks)
    for name, unit, steps in _AXIS_UNITS:
        for step in steps:
            if step * unit >= raw:
                return name, unit, step * unit
    name, unit, steps = _AXIS_UNITS[-1]
    step = steps[-1] * unit
    while step < raw:  # a span of centuries: keep multiplying by ten
        step *= 10
    return name, unit, step


def tick_label(at: float, step: float) -> str:
    """The label of a tick at ``at`` seconds on an axis whose ticks are ``step`` apart:
    ``0``, ``500 ms``, ``1.5 s``, ``40 s``, ``1 min 20 s``, ``2 h``, ``1 d 12 h`` (never
    finer than the step, so every label of an axis is a round value)."""
    if at <= 0:
        return "0"
    if step < 1:
        return f"{at * 1000:.0f} ms" if at < 1 else f"{round(at, 3):g} s"
    finest = max(u for _n, u, _s in _AXIS_UNITS if u <= step)
    parts: list[str] = []
    rest = round(at)
    for name, unit, _steps in reversed(_AXIS_UNITS):
        if unit < finest:
            break
        count, rest = divmod(rest, round(unit))
        if count:
            parts.append(f"{count} {name}")
    return " ".join(parts) or f"{at:g} s"


def timeline_ticks(end: float | None, now: float | None) -> list[list[Any]]:
    """The axis ticks of a timeline whose bars end at ``end`` and whose "now" line is at
    ``now`` (seconds since the run's first event), as ``[[seconds, label], ...]``: what
    the Timeline widget and the web UI draw."""
    return [[at, label] for at, label in axis_ticks(max(end or 0.0, now or 0.0, 0.001))]


def axis_ticks(end: float, max_ticks: int = 8) -> list[tuple[float, str]]:
    """Ticks for an axis from 0 to ``end`` seconds: at most ``max_ticks`` (+1 for 0), at
    multiples of a round step (1, 2, 5, 10, 15, 30 s; 1, 2, 5 ... min; 1, 2, 3, 6, 12 h;
    days), each with its label. ``[(0.0, "0"), (1.0, "1 s"), (2.0, "2 s"), ...]``."""
    end = max(end, _MIN_STEP)
    _name, _unit, step = _tick_step(end, max_ticks)
    count = int(end / step + 1e-9)
    return [(round(i * step, 6), tick_label(i * step, step)) for i in range(count + 1)]


def min_bar_seconds(end: float, plot_pixels: float, min_pixels: float = 4.0) -> float:
    """The shortest a bar may be drawn, in seconds, on an axis of ``end`` seconds drawn
    ``plot_pixels`` wide: ``min_pixels``, so a millisecond activity stays visible."""
    return max(end, _MIN_STEP) * min_pixels / max(plot_pixels, 1.0)
