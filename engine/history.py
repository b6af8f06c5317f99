"""Workflow histories in Temporal's JSON shape (``temporal workflow show --output json``)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._replay.events import HistoryEvent, attributes_key, enum_name, short_name
from .common import timestamp_from_json, timestamp_to_json
from .exceptions import InvalidArgumentError

__all__ = ["HistoryEvent", "WorkflowHistory"]

_INT_TOP = ("taskId", "version")


@dataclass
class WorkflowHistory:
    """The events of one run, with the workflow id they belong to."""

    workflow_id: str
    events: list[HistoryEvent] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        """The run id, from the started event (``originalExecutionRunId``)."""
        if not self.events:
            return ""
        attrs = self.events[0].attributes
        return str(attrs.get("originalExecutionRunId", ""))

    @property
    def workflow_type(self) -> str:
        """The workflow type, from the started event."""
        if not self.events:
            return ""
        return str(self.events[0].attributes.get("workflowType", {}).get("name", ""))

    def __iter__(self) -> Iterator[HistoryEvent]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)

    def to_json_dict(self) -> dict[str, Any]:
        """The history as Temporal's JSON object (``{"events": [...]}``)."""
        return {"events": [_event_to_json(e) for e in self.events]}

    def to_json(self) -> str:
        """The history as Temporal's JSON text, readable by ``temporalio``'s Replayer."""
        return json.dumps(self.to_json_dict(), indent=2)

    @staticmethod
    def from_json(workflow_id: str, history: str | dict[str, Any]) -> WorkflowHistory:
        """Read Temporal's JSON (text or parsed). Errors name the event index and field."""
        if isinstance(history, str):
            try:
                data = json.loads(history)
            except json.JSONDecodeError as err:
                raise InvalidArgumentError(
                    f"history JSON is malformed at line {err.lineno} column {err.colno}: "
                    f"{err.msg} (is the file truncated?)"
                ) from err
        else:
            data = history
        if not isinstance(data, dict) or not isinstance(data.get("events"), list):
            raise InvalidArgumentError(
                "history JSON must be an object with an 'events' list, as written by "
                "'temporal workflow show --output json' or WorkflowHistory.to_json()"
            )
        return WorkflowHistory(
            workflow_id, [_event_from_json(i, e) for i, e in enumerate(data["events"])]
        )


def _event_to_json(event: HistoryEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "eventId": str(event.event_id),
        "eventTime": event.extra.get("eventTime") or timestamp_to_json(event.event_time),
        "eventType": enum_name(event.event_type),
    }
    for key, value in event.extra.items():
        if key != "eventTime":
            out[key] = value
    out[attributes_key(event.event_type)] = event.attributes
    return out


def _event_from_json(index: int, raw: Any) -> HistoryEvent:
    where = f"event at index {index}"
    if not isinstance(raw, dict):
        raise InvalidArgumentError(f"{where} is not a JSON object")
    try:
        event_id = int(raw["eventId"])
    except (KeyError, TypeError, ValueError) as err:
        raise InvalidArgumentError(f"{where}: field 'eventId' is missing or not a number") from err
    where = f"event {event_id} (index {index})"
    type_value = raw.get("eventType")
    if not isinstance(type_value, str) or not type_value:
        raise InvalidArgumentError(f"{where}: field 'eventType' is missing")
    event_type = short_name(type_value) if type_value.startswith("EVENT_TYPE_") else type_value
    time_text = raw.get("eventTime")
    try:
        event_time = timestamp_from_json(time_text) if time_text else 0.0
    except ValueError as err:
        raise InvalidArgumentError(
            f"{where}: field 'eventTime' is not a timestamp: {time_text!r}"
        ) from err
    key = attributes_key(event_type)
    attrs = raw.get(key, {})
    if not isinstance(attrs, dict):
        raise InvalidArgumentError(f"{where}: field {key!r} must be an object")
    extra = {k: v for k, v in raw.items() if k not in ("eventId", "eventType", key)}
    return HistoryEvent(event_id, event_time, event_type, attrs, extra)


def events_of(histories: Sequence[WorkflowHistory]) -> int:
    """Total events across histories."""
    return sum(len(h.events) for h in histories)
