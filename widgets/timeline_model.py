"""The timeline's view model: a run's history (and activity attempts) as lanes of bars and
ticks, in seconds since the run's first event, as the Timeline widget and the web UI draw
them. Pure, like :mod:`widgets.models`, whose grouped history it reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from engine import HistoryEvent
from engine.dataframes import failure_text

from .models import CATEGORY_COLOURS, STATUS_COLOURS, HistoryModel, _int, event_summary

__all__ = ["Bar", "Lane", "Tick", "TimelineData", "timeline"]


@dataclass
class Bar:
    """A span on a lane: an activity attempt, a backoff wait, a timer, a workflow task, a
    child run. ``end`` None: still going (drawn to "now")."""

    start: float
    end: float | None
    status: str
    label: str
    kind: str = "span"
    detail: str = ""


@dataclass
class Tick:
    """A point on a lane: a signal, an update, a marker, a due time."""

    at: float
    kind: str
    label: str
    #: The user's summary (a local activity's marker), as text.
    summary: str = ""


@dataclass
class Lane:
    """One row of the timeline; ``summary`` / ``details``: the user's, as text (the
    ``summary=`` of an activity or timer, a child's static summary and details)."""

    key: str
    label: str
    category: str
    bars: list[Bar] = field(default_factory=list)
    ticks: list[Tick] = field(default_factory=list)
    summary: str = ""
    details: str = ""


@dataclass
class TimelineData:
    """Everything the timeline draws; offsets are seconds since ``t0`` (epoch seconds)."""

    t0: float
    end: float
    now: float | None
    lanes: list[Lane]
    hidden_lanes: int = 0
    #: The run's ``static_summary`` / ``static_details``, as text ("" for none).
    summary: str = ""
    details: str = ""

    def to_json(self) -> dict[str, Any]:
        """As the widget front end reads it (statuses with their colours)."""
        data = asdict(self)
        for lane in data["lanes"]:
            lane["colour"] = CATEGORY_COLOURS.get(lane["category"], CATEGORY_COLOURS["other"])
            for bar in lane["bars"]:
                bar["colour"] = STATUS_COLOURS.get(bar["status"], STATUS_COLOURS["waiting"])
        return data


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    return float(value)


def _duration_seconds(text: Any) -> float | None:
    if isinstance(text, str) and text.endswith("s"):
        try:
            return float(text[:-1])
        except ValueError:
            return None
    return None


def _attempt_bars(
    attempts: Sequence[Mapping[str, Any]], t0: float, fallback: Sequence[Bar]
) -> list[Bar]:
    """Bars for one activity: each attempt, and the backoff waits between them."""
    if not attempts:
        return list(fallback)
    bars: list[Bar] = []
    previous_end: float | None = None
    for att in sorted(attempts, key=lambda a: int(a.get("attempt") or 0)):
        started = _epoch(att.get("started_time")) or _epoch(att.get("scheduled_time"))
        if started is None:
            continue
        ended = _epoch(att.get("ended_time"))
        if previous_end is not None and started - t0 > previous_end:
            bars.append(Bar(previous_end, started - t0, "waiting", "backoff", kind="backoff"))
        outcome = str(att.get("outcome") or "running")
        failure = att.get("failure")
        detail = failure_text(failure) if isinstance(failure, Mapping) else str(failure or "")
        bars.append(
            Bar(
                started - t0,
                None if ended is None else ended - t0,
                outcome,
                f"attempt {att.get('attempt')}",
                kind="attempt",
                detail=detail or "",
            )
        )
        previous_end = None if ended is None else ended - t0
    return bars


def timeline(
    events: Sequence[HistoryEvent] | HistoryModel,
    attempts: Sequence[Mapping[str, Any]] = (),
    *,
    now: float | None = None,
    max_lanes: int = 200,
) -> TimelineData:
    """Lanes for a run: its workflow tasks, each activity (one bar per attempt, backoff
    waits between), each timer (span to its firing, or to its due time while pending),
    each child, and one lane of signal / update / marker ticks.

    ``events`` may be a :class:`HistoryModel` already grouped (a live view keeps one).
    ``attempts`` are ``WorkflowHandle.fetch_attempts()`` items; without them (an imported
    history) an activity shows its last attempt only. ``now`` (epoch seconds) places the
    "now" line while the run is open.
    """
    model = events if isinstance(events, HistoryModel) else HistoryModel(events)
    if not model.events:
        return TimelineData(t0=now or 0.0, end=0.0, now=0.0 if now is not None else None, lanes=[])
    t0 = model.t0
    by_activity: dict[int, list[Mapping[str, Any]]] = {}
    for att in attempts:
        sid = _int(att.get("scheduled_event_id"))
        if sid is not None:
            by_activity.setdefault(sid, []).append(att)

    tasks = Lane("workflow_tasks", "workflow tasks", "workflow_task")
    messages = Lane("messages", "signals & updates", "signal")
    lanes: list[Lane] = [tasks]
    open_task: Bar | None = None
    for event in model.events:
        kind, offset = event.event_type, event.event_time - t0
        if kind == "WorkflowTaskScheduled":
            open_task = Bar(offset, None, "scheduled", f"task {event.event_id}", kind="task")
            tasks.bars.append(open_task)
        elif kind == "WorkflowTaskStarted" and open_task is not None:
            open_task.status = "running"
        elif kind.startswith("WorkflowTask") and open_task is not None:
            open_task.end = offset
            open_task.status = {
                "WorkflowTaskCompleted": "completed",
                "WorkflowTaskFailed": "failed",
                "WorkflowTaskTimedOut": "timed_out",
            }.get(kind, open_task.status)
            if kind == "WorkflowTaskFailed":
                open_task.detail = event_summary(event)
            open_task = None
        elif kind == "WorkflowExecutionSignaled":
            messages.ticks.append(Tick(offset, "signal", str(event.attributes.get("signalName"))))
        elif kind == "WorkflowExecutionUpdateAccepted":
            request = event.attributes.get("acceptedRequest") or {}
            name = (request.get("input") or {}).get("name", "update")
            messages.ticks.append(Tick(offset, "update", str(name)))
        elif kind == "MarkerRecorded":
            name = str(event.attributes.get("markerName", ""))
            summary = model.user_metadata(event.event_id)[0]
            messages.ticks.append(Tick(offset, "marker", name, summary=summary))

    for row in model.compact():
        first = model._by_id[row.event_ids[0]]
        if row.kind == "activity":
            fallback: list[Bar] = []
            started = next(
                (
                    model._by_id[i]
                    for i in row.event_ids
                    if model._by_id[i].event_type == "ActivityTaskStarted"
                ),
                None,
            )
            if started is not None:
                fallback.append(
                    Bar(
                        started.event_time - t0,
                        row.end,
                        row.status,
                        f"attempt {row.attempts or 1}",
                        kind="attempt",
                    )
                )
            lane = Lane(row.key, row.label, "activity", summary=row.user_summary)
            lane.bars = _attempt_bars(by_activity.get(first.event_id, []), t0, fallback)
            if not lane.bars:
                lane.bars.append(Bar(row.start, None, "scheduled", "scheduled", kind="attempt"))
            lanes.append(lane)
        elif row.kind == "timer":
            lane = Lane(row.key, row.label, "timer", summary=row.user_summary)
            due_after = _duration_seconds(first.attributes.get("startToFireTimeout"))
            due = None if due_after is None else row.start + due_after
            lane.bars.append(Bar(row.start, row.end, row.status, row.label, kind="timer"))
            if due is not None:
                lane.ticks.append(Tick(due, "due", f"due at +{due:.3f}s"))
            lanes.append(lane)
        elif row.kind == "child":
            lane = Lane(
                row.key, row.label, "child", summary=row.user_summary, details=row.user_details
            )
            lane.bars.append(Bar(row.start, row.end, row.status, row.label, kind="child"))
            lanes.append(lane)
    if messages.ticks:
        lanes.append(messages)

    hidden = max(0, len(lanes) - max_lanes)
    lanes = lanes[:max_lanes]
    now_offset = None if model.closed or now is None else max(0.0, now - t0)
    last = model.events[-1].event_time - t0
    ends = [last, now_offset or 0.0]
    for lane in lanes:
        ends += [b.end for b in lane.bars if b.end is not None]
        ends += [t.at for t in lane.ticks]
    return TimelineData(
        t0=t0,
        end=max(ends),
        now=now_offset,
        lanes=lanes,
        hidden_lanes=hidden,
        summary=model.static_summary,
        details=model.static_details,
    )
