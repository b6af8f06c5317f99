"""WorkerMonitor: a worker's task slots, polls, sticky cache, task failures and latency, live."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from html import escape
from typing import Any

import anywidget
import traitlets

from engine import Worker

from . import _live
from ._snapshot import StaticDisplay, html_table
from ._source import seconds
from ._static import CSS, esm

__all__ = ["MonitorRow", "WorkerMonitor", "monitor_rows"]

log = logging.getLogger("widgets")


#: The groups of rows, in the order the widget shows them.
GROUPS = {
    "slots": "Task slots",
    "polls": "Polls",
    "tasks": "Tasks",
    "cache": "Sticky cache",
    "failures": "Workflow task failures",
    "latency": "Activity schedule-to-start",
}

_SLOT_KINDS = (
    ("workflow", "WorkflowWorker", "Workflow tasks"),
    ("activity", "ActivityWorker", "Activities"),
)


# -- pure view model --------------------------------------------------------------------


@dataclass(frozen=True)
class MonitorRow:
    """One figure of the monitor: ``value`` is the number, ``text`` how it reads."""

    group: str
    key: str
    label: str
    value: float | None
    text: str
    detail: str = ""
    rate: float | None = None
    fraction: float | None = None  # of a capacity, for a bar
    level: str = ""  # "busy" (slots full) or "bad" (failures)

    def to_json(self) -> dict[str, Any]:
        """The row as the front end reads it."""
        return asdict(self)


def _rate(
    key: str, snapshot: Mapping[str, Any], previous: Mapping[str, Any] | None, elapsed: float
) -> float | None:
    if previous is None or elapsed <= 0 or key not in previous:
        return None
    return max(0.0, (float(snapshot.get(key) or 0) - float(previous[key] or 0)) / elapsed)


def _per_second(rate: float | None) -> str:
    if rate is None:
        return ""
    return f"{rate:.1f} / s" if rate < 100 else f"{rate:.0f} / s"


def _ms(value: float | None) -> str:
    if value is None:
        return "no samples"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def monitor_rows(
    snapshot: Mapping[str, Any],
    previous: Mapping[str, Any] | None = None,
    elapsed: float = 0.0,
    *,
    slots_total: Mapping[str, int] | None = None,
) -> list[MonitorRow]:
    """The monitor's rows from ``worker.metrics.snapshot()``.

    Rates (polls, tasks per second) come from the difference with the ``previous``
    snapshot, taken ``elapsed`` seconds earlier (none without one). ``slots_total``
    (``{"WorkflowWorker": n, "ActivityWorker": n}``) turns the slots available into
    slots in use; without it only availability is shown.
    """
    rows: list[MonitorRow] = []
    available: Mapping[str, int] = snapshot.get("temporal_worker_task_slots_available") or {}
    totals = slots_total or {}
    for kind, name, label in _SLOT_KINDS:
        free = available.get(name)
        total = totals.get(name)
        if not total:  # no such runner (or not started): nothing to show
            if free:
                rows.append(MonitorRow("slots", f"slots.{kind}", label, None, f"{free} available"))
            continue
        free = total if free is None else free
        used = max(0, total - free)
        rows.append(
            MonitorRow(
                "slots",
                f"slots.{kind}",
                label,
                used,
                f"{used} / {total} in use",
                f"{free} available",
                fraction=used / total,
                level="busy" if free <= 0 else "",
            )
        )
    for kind, key, label in (
        ("workflow", "workflow_polls", "Workflow task polls"),
        ("activity", "activity_polls", "Activity task polls"),
    ):
        rate = _rate(key, snapshot, previous, elapsed)
        n = int(snapshot.get(key) or 0)
        rows.append(MonitorRow("polls", f"polls.{kind}", label, n, str(n), _per_second(rate), rate))
    for key, label in (
        ("workflow_tasks_completed", "Workflow tasks completed"),
        ("activities_completed", "Activities completed"),
        ("activities_failed", "Activity attempts failed"),
    ):
        rate = _rate(key, snapshot, previous, elapsed)
        n = int(snapshot.get(key) or 0)
        level = "bad" if key == "activities_failed" and n else ""
        rows.append(
            MonitorRow(
                "tasks", f"tasks.{key}", label, n, str(n), _per_second(rate), rate, None, level
            )
        )
    size = int(snapshot.get("temporal_sticky_cache_size") or 0)
    hits = int(snapshot.get("temporal_sticky_cache_hit") or 0)
    misses = int(snapshot.get("temporal_sticky_cache_miss") or 0)
    evictions = int(snapshot.get("temporal_sticky_cache_total_forced_eviction") or 0)
    lookups = hits + misses
    ratio = f"{100 * hits / lookups:.0f}% of lookups" if lookups else ""
    rows += [
        MonitorRow("cache", "cache.size", "Cached runs", size, str(size)),
        MonitorRow("cache", "cache.hit", "Hits", hits, str(hits), ratio),
        MonitorRow("cache", "cache.miss", "Misses", misses, str(misses)),
        MonitorRow(
            "cache",
            "cache.forced_eviction",
            "Forced evictions",
            evictions,
            str(evictions),
            level="bad" if evictions else "",
        ),
    ]
    failed: Mapping[str, int] = snapshot.get("temporal_workflow_task_execution_failed") or {}
    if not failed:
        rows.append(MonitorRow("failures", "failures", "None", 0, "0"))
    for reason, n in sorted(failed.items(), key=lambda item: (-item[1], item[0])):
        rows.append(MonitorRow("failures", f"failures.{reason}", reason, n, str(n), level="bad"))
    latency: Mapping[str, Any] = snapshot.get("temporal_activity_schedule_to_start_latency") or {}
    samples = int(latency.get("count") or 0)
    median, longest = latency.get("median_ms"), latency.get("max_ms")
    rows.append(
        MonitorRow(
            "latency",
            "latency.median",
            "Median",
            median,
            _ms(median),
            f"of the last {samples} attempt{'' if samples == 1 else 's'}" if samples else "",
        )
    )
    rows.append(MonitorRow("latency", "latency.max", "Max", longest, _ms(longest)))
    return rows


# -- the widget -------------------------------------------------------------------------


class WorkerMonitor(StaticDisplay, anywidget.AnyWidget):  # type: ignore[misc]
    """A worker's health, live: task slots in use and available, polls per second, the
    sticky cache (size, hits, misses, forced evictions), workflow task failures by
    reason and activity schedule-to-start latency.

    Reads ``worker.metrics`` every ``refresh_interval`` on the widgets' background
    thread (no database access), and not at all while no view of it is shown. A failed
    read shows in :attr:`error` and is retried after a growing pause; after five in a
    row the refresh stops and says so. :meth:`stop` ends the refresh and leaves the
    figures on screen as they are; :meth:`close` also removes the widget.

    Its display data holds, besides the widget view, the figures as an HTML table, so a
    saved notebook shows them without a kernel.
    """

    _esm = esm("worker_monitor.js")
    _css = CSS

    title = traitlets.Unicode("").tag(sync=True)
    running = traitlets.Bool(False).tag(sync=True)
    workflow_types: traitlets.List[str] = traitlets.List([]).tag(sync=True)
    activity_types: traitlets.List[str] = traitlets.List([]).tag(sync=True)
    groups = traitlets.Dict({}).tag(sync=True)
    rows: traitlets.List[dict[str, Any]] = traitlets.List([]).tag(sync=True)
    live = traitlets.Bool(False).tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(
        self, worker: Worker, *, refresh_interval: float | timedelta = 1.0, **kwargs: Any
    ) -> None:
        if not isinstance(worker, Worker):
            raise TypeError(f"expected an engine Worker, not {type(worker).__name__}")
        self._interval = seconds(refresh_interval)
        self._worker = worker
        self._previous: dict[str, Any] | None = None
        self._previous_at = 0.0
        self._views = _live.Views()  # the open front-end views
        super().__init__(
            title=f"Worker · task queue {worker.task_queue}",
            workflow_types=worker.workflow_types,
            activity_types=worker.activity_types,
            groups=GROUPS,
            **kwargs,
        )
        self.update()
        self.on_msg(self._on_message)
        self._subscription = _live.subscribe(self._refresh, f"worker {worker.task_queue}")
        self.live = True

    def __repr__(self) -> str:
        if not hasattr(self, "_worker"):  # the constructor failed
            return "<WorkerMonitor (not built)>"
        state = "polling" if self.running else "stopped"
        return f"<WorkerMonitor task queue {self._worker.task_queue} · {state}" + (
            " · live>" if self.live else ">"
        )

    @property
    def refreshing(self) -> bool:
        """Whether the live refresh runs."""
        return self._subscription.active

    def row(self, key: str) -> dict[str, Any] | None:
        """The row with ``key`` (``"slots.activity"``, ``"failures.WorkflowError"``...)."""
        return next((r for r in self.rows if r["key"] == key), None)

    def _slots_total(self) -> dict[str, int]:
        # The snapshot has slots available only; the capacities are on the metrics object.
        metrics = self._worker.metrics
        return {
            "WorkflowWorker": int(getattr(metrics, "workflow_slots_total", 0) or 0),
            "ActivityWorker": int(getattr(metrics, "activity_slots_total", 0) or 0),
        }

    def update(self) -> None:
        """Read the worker's metrics now (raises what reading them raised)."""
        worker = self._worker
        for attempt in range(3):
            try:
                snapshot = worker.metrics.snapshot()
                break
            except RuntimeError as err:  # a counter changed size while copied: again
                if attempt == 2:
                    raise
                log.debug("worker metrics snapshot failed, reading again: %s", err)
        now = time.monotonic()
        previous, elapsed = self._previous, now - self._previous_at
        rows = monitor_rows(snapshot, previous, elapsed, slots_total=self._slots_total())
        self._previous, self._previous_at = snapshot, now
        with self.hold_sync():
            self.rows = [r.to_json() for r in rows]
            self.running = worker.is_running
            self.workflow_types = worker.workflow_types
            self.activity_types = worker.activity_types

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        self._views.message(content)

    async def _refresh(self) -> None:
        await asyncio.sleep(self._interval)  # the constructor has just read them

        async def read() -> None:
            self.update()

        await _live.refresh_loop(
            read,
            lambda _: True,
            interval=self._interval,
            views=self._views,
            on_error=self._refresh_failed,
            name=f"worker metrics of {self._worker.task_queue}",
            what="could not read the worker's metrics: ",
        )
        self._publish_snapshot()  # the refresh gave up: the outputs get the last figures

    def _refresh_failed(self, message: str, stopped: bool) -> None:
        with self.hold_sync():
            self.error = message
            if stopped:
                self.live = False

    def _end_refresh(self) -> None:
        subscription = getattr(self, "_subscription", None)  # None: construction failed
        if subscription is not None:
            subscription.cancel()
            self.live = False

    def stop(self) -> None:
        """Stop the refresh and keep the widget on screen with the figures it shows now
        (no background thread is left once no widget is live; the saved output gets a
        static snapshot of them). :meth:`close` removes the widget as well."""
        self._end_refresh()
        self._publish_snapshot()

    def close(self) -> None:
        """Stop the refresh and close the widget (ipywidgets' close: every view of it
        is removed, its output goes blank; see :meth:`stop` to keep it)."""
        self._end_refresh()
        super().close()

    # -- static fallbacks ---------------------------------------------------------------

    def _types(self) -> str:
        return " · ".join(
            f"{what}: {', '.join(names)}"
            for what, names in (
                ("workflows", self.workflow_types),
                ("activities", self.activity_types),
            )
            if names
        )

    def _static_html(self) -> str:
        groups = dict(self.groups)
        rows = list(self.rows)
        table = html_table(
            ["group", "figure", "value", "detail"],
            [
                (groups.get(r["group"], r["group"]), r["label"], r["text"], r["detail"])
                for r in rows
            ],
            failed=[r.get("level") == "bad" for r in rows],
        )
        state = "polling" if self.running else "stopped"
        types = self._types()
        note = f"<p>{escape(types)}</p>" if types else ""
        return (
            f'<div class="dn-static dn-wm"><p><strong>{escape(self.title)}</strong> · '
            f"{state}</p>{note}{table}</div>"
        )

    def _static_text(self) -> str:
        lines = [repr(self)]
        types = self._types()
        if types:
            lines.append(types)
        groups = dict(self.groups)
        for r in self.rows:
            detail = f" ({r['detail']})" if r["detail"] else ""
            lines.append(
                f"  {groups.get(r['group'], r['group'])} · {r['label']}: {r['text']}{detail}"
            )
        return "\n".join(lines)
