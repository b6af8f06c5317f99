"""Text and HTML renderings for the kernel extension: tables, histories, handles."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from engine import HistoryEvent, WorkflowExecution, WorkflowExecutionDescription
from widgets.models import event_summary  # pure: needs no ipywidgets

from .kernel_session import ReplayReport, WorkerStatus

__all__ = [
    "HandleView",
    "format_history",
    "format_replay",
    "format_runs",
    "format_status",
    "handle_html",
    "handle_text",
]

#: A factory that turns a workflow handle into a richer display object (e.g. a live
#: history widget). ``widgets`` sets one through :func:`kernel_ext.set_handle_view`.
HandleView = Callable[[Any], Any]


def _time(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [len(h) for h in header]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)


def format_status(database_url: str, workers: Sequence[WorkerStatus]) -> str:
    """``%durable status``: the database and, per task queue, worker state and metrics."""
    lines = [f"database: {database_url}"]
    if not workers:
        lines.append("no task queues: define workflows or activities in a cell")
    for w in workers:
        state = "running" if w.running else "stopped"
        lines.append(f"task queue {w.task_queue!r}: worker {state}")
        lines.append(f"  workflows:  {', '.join(w.workflow_types) or '-'}")
        lines.append(f"  activities: {', '.join(w.activity_types) or '-'}")
        if w.metrics is not None:
            slots = w.metrics.get("temporal_worker_task_slots_available", {})
            failed = w.metrics.get("temporal_workflow_task_execution_failed", {})
            lines.append(
                "  metrics:    "
                f"workflow tasks completed {w.metrics.get('workflow_tasks_completed', 0)}, "
                f"failed {sum(failed.values()) if failed else 0}"
                + (f" {dict(failed)}" if failed else "")
                + f"; activities completed {w.metrics.get('activities_completed', 0)}, "
                f"failed {w.metrics.get('activities_failed', 0)}; "
                f"free slots {slots.get('WorkflowWorker', '?')} workflow / "
                f"{slots.get('ActivityWorker', '?')} activity; "
                f"sticky cache {w.metrics.get('temporal_sticky_cache_size', 0)}"
            )
    return "\n".join(lines)


def format_runs(runs: Sequence[WorkflowExecution]) -> str:
    """``%durable list``: one row per run."""
    if not runs:
        return "no runs match"
    rows = [
        [
            r.id,
            r.workflow_type,
            r.status.name,
            r.task_queue,
            _time(r.start_time),
            _time(r.close_time),
            str(r.history_length),
            r.run_id,
        ]
        for r in runs
    ]
    header = ["workflow id", "type", "status", "task queue", "started", "closed", "events"]
    return _table([*header, "run id"], rows)


def format_history(events: Sequence[HistoryEvent]) -> str:
    """``%durable history``: event id, type and a short summary per line (the summary
    the widgets show: names, payloads, attempt, failure)."""
    if not events:
        return "no events"
    width = max(len(e.event_type) for e in events)
    return "\n".join(
        f"{e.event_id:>4}  {e.event_type:<{width}}  {event_summary(e)}".rstrip() for e in events
    )


def format_replay(report: ReplayReport) -> str:
    """``%durable replay``: OK, or what went wrong."""
    where = f"{report.workflow_id} (run {report.run_id}, {report.events} events)"
    if report.problem:
        return f"cannot replay {where}: {report.problem}"
    if report.failure is None:
        return f"OK: {where} replays against the current {report.workflow_type} definition"
    return f"{type(report.failure).__name__}: {where}: {report.failure}"


def _handle_fields(desc: WorkflowExecutionDescription) -> list[tuple[str, str]]:
    return [
        ("workflow id", desc.id),
        ("run id", desc.run_id),
        ("type", desc.workflow_type),
        ("status", desc.status.name),
        ("task queue", desc.task_queue),
        ("history length", str(desc.history_length)),
    ]


def handle_text(desc: WorkflowExecutionDescription) -> str:
    """text/plain for a workflow handle."""
    f = dict(_handle_fields(desc))
    return (
        f"<WorkflowHandle {f['workflow id']} · {f['type']} · {f['status']} · "
        f"{f['history length']} events · run {f['run id']}>"
    )


def handle_html(desc: WorkflowExecutionDescription) -> str:
    """text/html for a workflow handle: a small definition table."""
    rows = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
        f"<td style='text-align:left'><code>{html.escape(v)}</code></td></tr>"
        for k, v in _handle_fields(desc)
    )
    return f"<table class='durable-handle' aria-label='workflow handle'>{rows}</table>"
