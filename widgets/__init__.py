"""Widgets over the engine's public API: live histories, timelines, a replay stepper,
execution lists and worker metrics (ipywidgets; anywidget for the custom views).

    from widgets import HistoryView, Timeline
    HistoryView(handle)        # the event history, growing while the run progresses
    Timeline(handle)           # lanes of activity attempts, timers, children, signals

Each widget is built on a pure view model in :mod:`widgets.models`. Live widgets refresh
from the store on a background thread that exists only while one is open; ``close()``
stops a widget's refresh.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .execution_list import ExecutionList
    from .history_view import HistoryView
    from .stepper import ReplayStepper
    from .timeline import Timeline
    from .worker_monitor import WorkerMonitor

__all__ = ["ExecutionList", "HistoryView", "ReplayStepper", "Timeline", "WorkerMonitor"]

_WHERE = {
    "ExecutionList": "execution_list",
    "HistoryView": "history_view",
    "ReplayStepper": "stepper",
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
