"""Pure view models: history events → table rows, compact rows, colours (the timeline's
lanes are in :mod:`widgets.timeline_model`, built on these).

Nothing here touches Jupyter, a widget or the database: the widgets render what these
functions return, and the tests check them without a browser. Times are seconds since the
run's first event (``offset``), so every view of one run shares one axis.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from engine import DataConverter, HistoryEvent
from engine.dataframes import (
    CLOSING_EVENT_TYPES,
    event_category,
    failure_text,
    payload_preview,
)

from .axis import axis_ticks, min_bar_seconds, tick_label, timeline_ticks

__all__ = [
    "CATEGORY_COLOURS",
    "CLOSE_EVENTS",
    "ENCODED",
    "STATUS_COLOURS",
    "CompactRow",
    "EventRow",
    "HistoryModel",
    "axis_ticks",
    "event_detail",
    "event_row",
    "is_failure",
    "metadata_text",
    "min_bar_seconds",
    "offset_text",
    "short_id",
    "tick_label",
    "timeline_ticks",
    "user_metadata",
]

#: Colour of each event category (``engine.dataframes.EVENT_CATEGORIES``).
CATEGORY_COLOURS: dict[str, str] = {
    "workflow": "#3b5bdb",
    "workflow_task": "#868e96",
    "activity": "#2b8a3e",
    "timer": "#e67700",
    "signal": "#9c36b5",
    "update": "#0c8599",
    "child": "#5c940d",
    "marker": "#495057",
    "other": "#adb5bd",
}

#: Colour of each status a compact row or a timeline bar can have.
#: (White text on each keeps a contrast of at least 4.5:1.)
STATUS_COLOURS: dict[str, str] = {
    "completed": "#2b8a3e",
    "fired": "#a85400",
    "running": "#1864ab",
    "scheduled": "#1c6ea4",
    "waiting": "#6c757d",
    "failed": "#c92a2a",
    "timed_out": "#a61e4d",
    "canceled": "#6c757d",
    "terminated": "#495057",
    "continued_as_new": "#6741d9",
    "recorded": "#495057",
    "accepted": "#0b7285",
    "received": "#862e9c",
}

#: Event types that close a run (the engine's own list).
CLOSE_EVENTS = CLOSING_EVENT_TYPES

_FAILURE_SUFFIXES = ("Failed", "TimedOut", "Terminated")
_PREVIEW = 80
_DETAIL_LIMIT = 20_000


def is_failure(event_type: str) -> bool:
    """Whether an event type records something going wrong (highlighted in every view)."""
    return event_type.endswith(_FAILURE_SUFFIXES)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _name(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("name") or "")
    return str(value or "")


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


def _failure(attributes: Mapping[str, Any]) -> str | None:
    failure = attributes.get("failure") or attributes.get("lastFailure")
    if failure is None and isinstance(attributes.get("outcome"), Mapping):
        failure = attributes["outcome"].get("failure")
    return failure_text(failure) if failure is not None else None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: What a summary or details payload that cannot be decoded shows as (a payload codec the
#: view's data converter does not have, an encoding that is not text).
ENCODED = "(encoded)"


def metadata_text(payload: Any, data_converter: DataConverter | None = None) -> str:
    """One payload of Temporal's ``userMetadata`` (a summary or details) as text.

    Decoded with ``data_converter`` (the client's: its payload codec is undone first;
    :attr:`DataConverter.default` when None). "" when there is no payload, ``"(encoded)"``
    when it cannot be decoded or is not text. The text is the user's own: every view shows
    it as plain text (Markdown unrendered, HTML escaped), never as markup.
    """
    if not isinstance(payload, Mapping):
        return ""
    converter = data_converter or DataConverter.default
    try:
        value = converter.from_payloads_json([payload])[0]
    except Exception:  # a codec this converter lacks, malformed data: still a view
        return ENCODED
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return ENCODED
    return json.dumps(value, default=str)


def user_metadata(
    event: HistoryEvent, data_converter: DataConverter | None = None
) -> tuple[str, str]:
    """The ``(summary, details)`` of an event's ``userMetadata`` as text ("" for none): the
    ``summary=`` of an activity, local activity (its marker) or timer, the
    ``static_summary`` / ``static_details`` of a run (its start event) or a child."""
    meta = event.extra.get("userMetadata")
    if not isinstance(meta, Mapping):
        return "", ""
    return (
        metadata_text(meta.get("summary"), data_converter),
        metadata_text(meta.get("details"), data_converter),
    )


def event_summary(event: HistoryEvent) -> str:
    """One short line saying what the event is about (names, ids, payloads, failure)."""
    a = event.attributes
    parts: list[str] = []
    for key, label in (
        ("workflowType", "workflow"),
        ("activityType", "activity"),
    ):
        if key in a:
            parts.append(f"{label} {_name(a[key])}")
    if "timerId" in a:
        parts.append(f"timer {a['timerId']}")
    if "startToFireTimeout" in a:
        parts.append(f"fires after {a['startToFireTimeout']}")
    if "signalName" in a:
        parts.append(f"signal {a['signalName']}")
    if "markerName" in a:
        parts.append(f"marker {a['markerName']}")
    if event.event_type == "ActivityTaskStarted" and "attempt" in a:
        parts.append(f"attempt {a['attempt']}")
    if "cause" in a and isinstance(a["cause"], str):
        parts.append(a["cause"].removeprefix("WORKFLOW_TASK_FAILED_CAUSE_"))
    preview = payload_preview(a, _PREVIEW)
    if preview:
        parts.append(preview)
    failure = _failure(a)
    if failure:
        parts.append(_cut(failure, 160))
    return " · ".join(parts)


def _decoded(node: Any) -> Any:
    """Attributes with every ``{"payloads": [...]}`` shown as its decoded text."""
    if isinstance(node, Mapping):
        payloads = node.get("payloads")
        if isinstance(payloads, list) and len(node) == 1:
            text = payload_preview({"input": node}, _DETAIL_LIMIT)
            return {"payloads (decoded)": text}
        return {k: _decoded(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_decoded(v) for v in node]
    return node


def _pull_traces(node: Any, path: str, traces: list[tuple[str, str]]) -> Any:
    """``node`` with every non-empty ``stackTrace`` string replaced by a pointer to where
    it is printed (as lines, after the JSON); the traces are added to ``traces``."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "stackTrace" and isinstance(value, str) and value.strip():
                lines = value.rstrip("\n").count("\n") + 1
                traces.append((where, value.rstrip()))
                out[key] = f"({lines} line{'' if lines == 1 else 's'}, below)"
            else:
                out[key] = _pull_traces(value, where, traces)
        return out
    if isinstance(node, list):
        return [_pull_traces(v, f"{path}[{i}]", traces) for i, v in enumerate(node)]
    return node


def event_detail(event: HistoryEvent) -> str:
    """The event's attributes as indented JSON, payloads decoded, and after it each
    failure's stack trace as lines (not a JSON string of ``\\n``); cut at 20,000 chars."""
    traces: list[tuple[str, str]] = []
    attributes = _pull_traces(_decoded(event.attributes), "", traces)
    text = json.dumps(attributes, indent=2, default=str, sort_keys=True)
    for where, trace in traces:
        text += f"\n\n{where}:\n{trace}"
    return _cut(text, _DETAIL_LIMIT)


def short_id(value: str, keep: int = 8) -> str:
    """A long id by its distinguishing end: ``…3f9a1c2d``.

    Run ids are UUIDs version 7, whose first characters are a timestamp: runs started
    together share them, so a shortened run id keeps the end, never the start. Ids of
    ``keep + 4`` characters or fewer are returned whole.
    """
    return value if len(value) <= keep + 4 else "…" + value[-keep:]


def offset_text(seconds: float | None, *, sign: str = "+") -> str:
    """``+0.25 s``, ``+12 ms``, ``+3.5 min``: a time since the run's start (or, with
    ``sign=""``, a duration), as the widgets' tables write it."""
    if seconds is None:
        return ""
    s = max(0.0, seconds)
    if s < 1:
        return f"{sign}{s * 1000:.0f} ms"
    if s < 120:
        return f"{sign}{s:.{2 if s < 10 else 1}f} s"
    if s < 7200:
        return f"{sign}{s / 60:.1f} min"
    if s < 172800:
        return f"{sign}{s / 3600:.1f} h"
    return f"{sign}{s / 86400:.1f} d"


@dataclass(frozen=True)
class EventRow:
    """One row of the full history table."""

    event_id: int
    time: str
    offset: float
    event_type: str
    category: str
    colour: str
    failed: bool
    summary: str
    #: The user's ``summary`` recorded on the event (its ``userMetadata``), as text; "" if none.
    user_summary: str = ""

    def to_json(self) -> dict[str, Any]:
        """The row as the widget front end reads it."""
        return asdict(self)


def event_row(event: HistoryEvent, t0: float, *, user_summary: str | None = None) -> EventRow:
    """The full-view row of ``event`` (``t0``: the time of the run's first event).

    ``user_summary``: the event's decoded summary (a :class:`HistoryModel` passes the one it
    decoded with its data converter); None decodes it with the default converter."""
    if user_summary is None:
        user_summary = user_metadata(event)[0]
    category = event_category(event.event_type)
    failed = is_failure(event.event_type)
    return EventRow(
        event_id=event.event_id,
        time=_iso(event.event_time),
        offset=round(event.event_time - t0, 6),
        event_type=event.event_type,
        category=category,
        colour=CATEGORY_COLOURS.get(category, CATEGORY_COLOURS["other"]),
        failed=failed,
        summary=event_summary(event),
        user_summary=user_summary,
    )


@dataclass
class CompactRow:
    """One row of the compact history: an activity, timer, child, signal, update, marker,
    the run itself, or a failed workflow task, with every event that belongs to it."""

    key: str
    kind: str
    label: str
    status: str
    start: float
    end: float | None = None
    attempts: int | None = None
    event_ids: list[int] = field(default_factory=list)
    summary: str = ""
    failed: bool = False
    #: The user's summary / details of the step (``summary=`` of an activity, local
    #: activity or timer; ``static_summary`` / ``static_details`` of a child or the run).
    user_summary: str = ""
    user_details: str = ""

    def to_json(self) -> dict[str, Any]:
        """The row as the widget front end reads it (details come with :meth:`detail`)."""
        category = "workflow_task" if self.kind == "workflow_task" else self.kind
        return {
            "key": self.key,
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
            "colour": CATEGORY_COLOURS.get(category, CATEGORY_COLOURS["other"]),
            "status_colour": STATUS_COLOURS.get(self.status, STATUS_COLOURS["waiting"]),
            "start": round(self.start, 6),
            "end": None if self.end is None else round(self.end, 6),
            "attempts": self.attempts,
            "event_ids": list(self.event_ids),
            "summary": self.summary,
            "failed": self.failed,
            "user_summary": self.user_summary,
            "user_details": self.user_details,
        }

    def detail(self, events: Mapping[int, HistoryEvent]) -> str:
        """Every event of the row with its attributes (payloads decoded)."""
        return "\n".join(
            f"#{i} {events[i].event_type}\n{event_detail(events[i])}"
            for i in self.event_ids
            if i in events
        )


# Which attribute of a later event names the event that opened its row.
_OPENER_FIELD = {
    "ActivityTask": "scheduledEventId",
    "Timer": "startedEventId",
    "ChildWorkflowExecution": "initiatedEventId",
    "StartChildWorkflowExecutionFailed": "initiatedEventId",
    "WorkflowExecutionUpdateCompleted": "acceptedEventId",
}

_STATUS_OF = {
    "ActivityTaskStarted": "running",
    "ActivityTaskCompleted": "completed",
    "ActivityTaskFailed": "failed",
    "ActivityTaskTimedOut": "timed_out",
    "ActivityTaskCancelRequested": "running",
    "ActivityTaskCanceled": "canceled",
    "TimerFired": "fired",
    "TimerCanceled": "canceled",
    "ChildWorkflowExecutionStarted": "running",
    "ChildWorkflowExecutionCompleted": "completed",
    "ChildWorkflowExecutionFailed": "failed",
    "ChildWorkflowExecutionTimedOut": "timed_out",
    "ChildWorkflowExecutionCanceled": "canceled",
    "ChildWorkflowExecutionTerminated": "terminated",
    "StartChildWorkflowExecutionFailed": "failed",
    "WorkflowExecutionUpdateCompleted": "completed",
    "WorkflowExecutionCompleted": "completed",
    "WorkflowExecutionFailed": "failed",
    "WorkflowExecutionTimedOut": "timed_out",
    "WorkflowExecutionCanceled": "canceled",
    "WorkflowExecutionTerminated": "terminated",
    "WorkflowExecutionContinuedAsNew": "continued_as_new",
}


def _update_failed(attributes: Mapping[str, Any]) -> bool:
    outcome = attributes.get("outcome")
    return isinstance(outcome, Mapping) and outcome.get("failure") is not None


def _opener_id(event: HistoryEvent) -> int | None:
    for prefix, key in _OPENER_FIELD.items():
        if event.event_type.startswith(prefix):
            return _int(event.attributes.get(key))
    return None


class HistoryModel:
    """A run's events, growing as they arrive, seen as full rows or compact rows.

    Full rows are built only for the window asked for, so a 50,000-event history costs
    one pass to group the compact view and nothing per row until it is shown.
    """

    def __init__(
        self,
        events: Iterable[HistoryEvent] = (),
        *,
        data_converter: DataConverter | None = None,
    ) -> None:
        #: Decodes the events' summaries (the client's, so its payload codec applies).
        self.data_converter = data_converter
        self.events: list[HistoryEvent] = []
        #: The decoded ``(summary, details)`` of each event that has user metadata.
        self._user: dict[int, tuple[str, str]] = {}
        self._by_id: dict[int, HistoryEvent] = {}
        self._compact: list[CompactRow] = []
        self._row_of: dict[int, CompactRow] = {}
        self._workflow_row: CompactRow | None = None
        #: Events that record something going wrong (see :func:`is_failure`).
        self.failures = 0
        self._open_activities = 0
        self.extend(events)

    # -- growing ------------------------------------------------------------------------

    @property
    def t0(self) -> float:
        """The time of the first event (epoch seconds), or 0 before any."""
        return self.events[0].event_time if self.events else 0.0

    @property
    def last_event_id(self) -> int:
        """The id of the newest event (0 before any)."""
        return self.events[-1].event_id if self.events else 0

    @property
    def closed(self) -> bool:
        """Whether the run's closing event is in."""
        return bool(self.events) and self.events[-1].event_type in CLOSE_EVENTS

    def extend(self, events: Iterable[HistoryEvent]) -> int:
        """Add events newer than the last one (older or repeated ids are ignored); returns
        how many were added."""
        added = 0
        for event in events:
            if event.event_id <= self.last_event_id:
                continue
            self.events.append(event)
            self._by_id[event.event_id] = event
            if "userMetadata" in event.extra:
                self._user[event.event_id] = user_metadata(event, self.data_converter)
            self.failures += is_failure(event.event_type)
            self._group(event)
            added += 1
        return added

    def user_metadata(self, event_id: int) -> tuple[str, str]:
        """The decoded ``(summary, details)`` of event ``event_id`` ("" for none)."""
        return self._user.get(event_id, ("", ""))

    @property
    def static_summary(self) -> str:
        """The run's ``static_summary`` (from its start event), as text; "" if none."""
        return self.user_metadata(self.events[0].event_id)[0] if self.events else ""

    @property
    def static_details(self) -> str:
        """The run's ``static_details`` (from its start event), as text; "" if none."""
        return self.user_metadata(self.events[0].event_id)[1] if self.events else ""

    def _offset(self, event: HistoryEvent) -> float:
        return event.event_time - self.t0

    def _new_row(self, event: HistoryEvent, kind: str, label: str, status: str) -> CompactRow:
        row = CompactRow(
            key=f"{kind}:{event.event_id}",
            kind=kind,
            label=label,
            status=status,
            start=self._offset(event),
            event_ids=[event.event_id],
            summary=event_summary(event),
        )
        row.user_summary, row.user_details = self.user_metadata(event.event_id)
        self._compact.append(row)
        self._row_of[event.event_id] = row
        return row

    def _group(self, event: HistoryEvent) -> None:
        kind, a = event.event_type, event.attributes
        if kind == "WorkflowExecutionStarted":
            self._workflow_row = self._new_row(
                event, "workflow", _name(a.get("workflowType")) or "workflow", "running"
            )
            return
        if kind == "ActivityTaskScheduled":
            row = self._new_row(event, "activity", _name(a.get("activityType")), "scheduled")
            row.attempts = 0
            self._open_activities += 1
            return
        if kind == "TimerStarted":
            label = f"timer {a.get('timerId', '')} ({a.get('startToFireTimeout', '?')})"
            self._new_row(event, "timer", label, "running")
            return
        if kind == "StartChildWorkflowExecutionInitiated":
            label = f"child {_name(a.get('workflowType'))} {a.get('workflowId', '')}".strip()
            self._new_row(event, "child", label, "scheduled")
            return
        if kind == "WorkflowExecutionSignaled":
            row = self._new_row(event, "signal", str(a.get("signalName", "")), "received")
            row.end = row.start
            return
        if kind == "WorkflowExecutionUpdateAccepted":
            request = a.get("acceptedRequest") or {}
            name = (request.get("input") or {}).get("name", "") if isinstance(request, dict) else ""
            self._new_row(event, "update", str(name or "update"), "accepted")
            return
        if kind == "MarkerRecorded":
            row = self._new_row(event, "marker", str(a.get("markerName", "")), "recorded")
            row.end = row.start
            return
        if kind in ("WorkflowTaskFailed", "WorkflowTaskTimedOut"):
            status = "failed" if kind == "WorkflowTaskFailed" else "timed_out"
            row = self._new_row(event, "workflow_task", "workflow task", status)
            row.end, row.failed = row.start, True
            return
        if kind in CLOSE_EVENTS or kind == "WorkflowExecutionCancelRequested":
            row = self._workflow_row
            if row is not None:
                row.event_ids.append(event.event_id)
                if kind in CLOSE_EVENTS:
                    row.status = _STATUS_OF[kind]
                    row.end = self._offset(event)
                    row.failed = is_failure(kind)
                    row.summary = event_summary(event) or row.summary
            return
        opener = _opener_id(event)
        target = self._row_of.get(opener) if opener is not None else None
        if target is None:
            return  # workflow-task events and anything unknown: full view only
        target.event_ids.append(event.event_id)
        status = _STATUS_OF.get(kind)
        if kind == "WorkflowExecutionUpdateCompleted" and _update_failed(a):
            status = "failed"
        if status is not None:
            target.status = status
        if kind == "ActivityTaskStarted":
            target.attempts = _int(a.get("attempt")) or 1
        if kind.endswith(("Completed", "Failed", "TimedOut", "Canceled", "Fired", "Terminated")):
            if target.kind == "activity" and target.end is None:
                self._open_activities -= 1
            target.end = self._offset(event)
            target.failed = is_failure(kind) or status == "failed"
            target.summary = event_summary(event) or target.summary

    # -- reading ------------------------------------------------------------------------

    def count(self, mode: str) -> int:
        """How many rows ``mode`` ("full" or "compact") has."""
        return len(self.events) if mode == "full" else len(self._compact)

    def rows(self, mode: str, start: int, stop: int) -> list[dict[str, Any]]:
        """Rows ``start`` to ``stop`` (exclusive) of ``mode``, as the front end reads them."""
        start = max(0, start)
        if mode == "full":
            t0 = self.t0
            return [
                event_row(e, t0, user_summary=self.user_metadata(e.event_id)[0]).to_json()
                for e in self.events[start:stop]
            ]
        return [r.to_json() for r in self._compact[start:stop]]

    def detail(self, mode: str, index: int) -> str:
        """The attributes (payloads decoded) behind row ``index`` of ``mode``; "" if none."""
        if index < 0:
            return ""
        if mode == "full":
            return event_detail(self.events[index]) if index < len(self.events) else ""
        if index >= len(self._compact):
            return ""
        return self._compact[index].detail(self._by_id)

    def activities_open(self) -> bool:
        """Whether an activity is scheduled or running (its attempts may still change)."""
        return self._open_activities > 0

    def compact(self) -> list[CompactRow]:
        """Every compact row (live objects: read, do not change)."""
        return list(self._compact)

    def index_of(self, event_id: int, mode: str) -> int:
        """The row index that shows ``event_id`` in ``mode`` (-1 when none does)."""
        if mode == "full":
            if self.events and self.events[0].event_id <= event_id <= self.last_event_id:
                # Ids are contiguous in a stored history; fall back to a search if not.
                guess = event_id - self.events[0].event_id
                if guess < len(self.events) and self.events[guess].event_id == event_id:
                    return guess
            return next((i for i, e in enumerate(self.events) if e.event_id == event_id), -1)
        return next((i for i, r in enumerate(self._compact) if event_id in r.event_ids), -1)
