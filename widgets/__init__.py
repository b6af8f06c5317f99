"""Widgets over the engine's public API: live histories, timelines, a replay stepper,
execution lists and worker metrics (ipywidgets; anywidget for the custom views).

    from widgets import HistoryView, Timeline
    HistoryView(handle)        # the event history, growing while the run progresses
    Timeline(handle)           # lanes of activity attempts, timers, children, signals
    ScheduleView(client, "id") # a schedule's action times: taken, skipped, missed, upcoming

Each widget is built on a pure view model (:mod:`widgets.models`,
:mod:`widgets.timeline_model`, :mod:`widgets.stepper_model`). Live widgets refresh from the
store on a background thread that exists only while one of them is live.

``stop()`` (on every widget) ends a widget's refresh and leaves it on screen, showing
what it shows then: the clean-up of a notebook, so that after "Run All" every output above
it is still there. ``close()`` is ipywidgets' close: it stops the widget and destroys its
front-end model, so its views disappear (the output goes blank). A run's views stop by
themselves when the run closes.

Each widget's display data also holds a static snapshot of what it shows (``text/html``
tables; the timeline as ``image/png``; a ``text/plain`` summary), so a saved notebook
shows the history on GitHub or nbviewer, without a kernel. A widget displayed by IPython
has its output updated with its final state when it stops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .execution_list import ExecutionList
    from .history_view import HistoryView
    from .schedule_view import ScheduleView
    from .stepper import ReplayStepper
    from .timeline import Timeline
    from .worker_monitor import WorkerMonitor

__all__ = [
    "ExecutionList",
    "HistoryView",
    "ReplayStepper",
    "ScheduleView",
    "Timeline",
    "WorkerMonitor",
]

_WHERE = {
    "ExecutionList": "execution_list",
    "HistoryView": "history_view",
    "ReplayStepper": "stepper",
    "ScheduleView": "schedule_view",
    "Timeline": "timeline",
    "WorkerMonitor": "worker_monitor",
}


def __getattr__(name: str) -> Any:
    # Imported on first use, so ``import widgets`` stays cheap and ipywidgets loads late.
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'widgets' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
