"""Workflow histories in Temporal's JSON shape (``temporal workflow show --output json``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from . import _history_format as fmt
from ._model.events import HistoryEvent, attributes_key, enum_name, short_name
from .common import timestamp_to_json
from .exceptions import HistoryFormatError

__all__ = ["HistoryEvent", "WorkflowHistory", "WorkflowHistoryEventFilterType"]

#: Top-level int64 fields: protobuf's JSON writes int64 as a string.
_INT_TOP = ("taskId", "version")


class WorkflowHistoryEventFilterType(IntEnum):
    """Which events ``WorkflowHandle.fetch_history_events`` / ``fetch_history`` give
    (``temporalio.client.WorkflowHistoryEventFilterType``, re-exported by
    :mod:`engine.client`): every event, or only the run's closing event (waited for with
    ``wait_new_event=True``)."""

    ALL_EVENT = 1
    CLOSE_EVENT = 2


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

    def to_dataframe(self) -> Any:
        """One row per event as a pandas DataFrame (``pip install durable-notebook[data]``).

        Columns: event_id, time, type, category, subject, activity_type, attempt,
        scheduled_event_id, duration_s, payload_preview, failure, attributes (see
        :func:`engine.dataframes.history_to_dataframe`).
        """
        from .dataframes import history_to_dataframe

        return history_to_dataframe(self)

    def to_json_dict(self) -> dict[str, Any]:
        """The history as Temporal's JSON object (``{"events": [...]}``)."""
        return {"events": [_event_to_json(e) for e in self.events]}

    def to_json(self) -> str:
        """The history as Temporal's JSON text, readable by ``temporalio``'s Replayer."""
        return json.dumps(self.to_json_dict(), indent=2)

    @staticmethod
    def from_json(workflow_id: str, history: str | dict[str, Any]) -> WorkflowHistory:
        """Read Temporal's JSON (text or parsed), checking the type of every field the
        replay code reads (:mod:`engine._history_format`).

        Raises :class:`~engine.exceptions.HistoryFormatError` (an ``InvalidArgumentError``)
        naming the event index, its id and the JSON path of what is malformed."""
        if isinstance(history, str):
            try:
                data = json.loads(history)
            except json.JSONDecodeError as err:
                raise HistoryFormatError(
                    f"history JSON is malformed at line {err.lineno} column {err.colno}: "
                    f"{err.msg} (is the file truncated?)"
                ) from err
            except (ValueError, RecursionError) as err:  # a 5,000-digit number, deep nesting
                raise HistoryFormatError(f"history JSON cannot be read: {err}") from None
        else:
            data = history
        if not isinstance(data, dict) or not isinstance(data.get("events"), list):
            raise HistoryFormatError(
                "history JSON must be an object with an 'events' list, as written by "
                "'temporal workflow show --output json' or WorkflowHistory.to_json()"
            )
        return WorkflowHistory(
            workflow_id, [_event_from_json(i, e) for i, e in enumerate(data["events"])]
        )


def _event_to_json(event: HistoryEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"eventId": str(event.event_id)}
    event_time = event.extra.get("eventTime")
    if event_time or event.event_time:
        out["eventTime"] = event_time or timestamp_to_json(event.event_time)
    out["eventType"] = enum_name(event.event_type)
    after: dict[str, Any] = {}
    for key, value in event.extra.items():
        if key == "eventTime":
            continue
        if key in _AFTER_ATTRIBUTES:
            after[key] = value
        else:
            out[key] = _int64_text(value) if key in _INT_TOP else value
    out[attributes_key(event.event_type)] = _without_empty_lists(event.attributes)
    out.update(after)
    return out


#: Top-level fields whose protobuf numbers (300 and up) follow the attributes' (protobuf's
#: JSON writes fields in number order).
_AFTER_ATTRIBUTES = frozenset({"workerMayIgnore", "userMetadata", "links", "principal"})


def _without_empty_lists(node: Any) -> Any:
    """``node`` without ``[]`` values: protobuf's JSON never writes an empty repeated field
    (``{"input": {"payloads": []}}`` is written ``{"input": {}}``). Copies on change only."""
    if isinstance(node, dict):
        changed: dict[str, Any] = {}
        dropped = False
        for key, value in node.items():
            if isinstance(value, list) and not value:
                dropped = True
                continue
            new = _without_empty_lists(value)
            if new is not value:
                changed[key] = new
        if not dropped and not changed:
            return node
        return {
            k: changed.get(k, v) for k, v in node.items() if not (isinstance(v, list) and not v)
        }
    if isinstance(node, list):
        items = [_without_empty_lists(item) for item in node]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    return node


def _int64_text(value: Any) -> Any:
    """An int64 as protobuf's JSON writes it: a string (``42`` -> ``"42"``)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


_NOT_EXTRA = frozenset({"eventId", "eventType", "eventTime"})
_INT_TOP_KEYS = frozenset(_INT_TOP)


def _event_from_json(index: int, raw: Any) -> HistoryEvent:
    if not isinstance(raw, dict):
        raise HistoryFormatError(
            f"history event at index {index}: events[{index}]: expected an object, "
            f"got {fmt._quote(raw)}"
        )
    event_id = fmt.event_id_of(index, raw)
    where = f"history event at index {index} (event id {event_id})"
    type_value = fmt.event_type_of(where, index, raw)
    event_type = short_name(type_value) if type_value.startswith("EVENT_TYPE_") else type_value
    event_time = fmt.event_time_of(where, index, raw)
    key = attributes_key(event_type)
    attrs = raw.get(key, {})
    fmt.check_fields(where, f"events[{index}].{key}", attrs)
    extra = {k: v for k, v in raw.items() if k not in _NOT_EXTRA and k != key}
    if extra and not (  # the common case, checked quickly: only taskId and version
        extra.keys() <= _INT_TOP_KEYS and all(fmt.int64_of(v) is not None for v in extra.values())
    ):
        fmt.check_fields(where, f"events[{index}]", extra)
    if "eventTime" in raw:
        extra["eventTime"] = raw["eventTime"]
        extra = {k: _int64_text(v) if k in _INT_TOP else v for k, v in extra.items()}
    attrs = _canonical_enums(attrs, _ENUM_FIELDS_OF.get(event_type, _ENUM_FIELDS))
    return HistoryEvent(event_id, event_time, event_type, attrs, extra)


# ---------------------------------------------------------------------------------------
# enum spellings
# ---------------------------------------------------------------------------------------
# Temporal writes enums as ``RETRY_STATE_NON_RETRYABLE_FAILURE``; histories exported by
# older Temporal tools spell them ``NonRetryableFailure`` (``temporalio``'s reader accepts
# both). Both are read into the first spelling, so what ``to_json()`` writes back is what
# Temporal writes. The fields are the enum fields of Temporal's history event protos.

_FAILURE = "<failure>"
_Spec = dict[str, Any]  # field -> enum prefix | nested _Spec | _FAILURE

_ENUM_FIELDS: _Spec = {
    "initiator": "CONTINUE_AS_NEW_INITIATOR",
    "retryState": "RETRY_STATE",
    "taskQueue": {"kind": "TASK_QUEUE_KIND"},
    "failure": _FAILURE,
}
_ENUM_FIELDS_OF: dict[str, _Spec] = {
    "ActivityTaskStarted": {**_ENUM_FIELDS, "lastFailure": _FAILURE},
    "WorkflowExecutionStarted": {**_ENUM_FIELDS, "continuedFailure": _FAILURE},
    "WorkflowTaskTimedOut": {**_ENUM_FIELDS, "timeoutType": "TIMEOUT_TYPE"},
    "WorkflowTaskFailed": {**_ENUM_FIELDS, "cause": "WORKFLOW_TASK_FAILED_CAUSE"},
    "StartChildWorkflowExecutionInitiated": {
        **_ENUM_FIELDS,
        "parentClosePolicy": "PARENT_CLOSE_POLICY",
        "workflowIdReusePolicy": "WORKFLOW_ID_REUSE_POLICY",
    },
    "StartChildWorkflowExecutionFailed": {
        **_ENUM_FIELDS,
        "cause": "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE",
    },
    "SignalExternalWorkflowExecutionFailed": {
        **_ENUM_FIELDS,
        "cause": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE",
    },
    "RequestCancelExternalWorkflowExecutionFailed": {
        **_ENUM_FIELDS,
        "cause": "CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE",
    },
}
_FAILURE_INFO_ENUMS: _Spec = {
    "retryState": "RETRY_STATE",
    "timeoutType": "TIMEOUT_TYPE",
    "category": "APPLICATION_ERROR_CATEGORY",
}
_UPPER_RUN = re.compile(r"([A-Z]+)")


def _enum_value(prefix: str, value: Any) -> Any:
    """``NonRetryableFailure`` -> ``RETRY_STATE_NON_RETRYABLE_FAILURE``; others as they are."""
    if not isinstance(value, str) or not value or value.startswith(prefix + "_"):
        return value
    if not value[0].isupper() or "_" in value:
        return value  # not the PascalCase spelling: leave it for the protobuf reader to judge
    return prefix + _UPPER_RUN.sub(r"_\1", value).upper()


def _canonical_enums(node: Any, spec: _Spec) -> Any:
    """``node`` with the enums ``spec`` names spelled as Temporal does.

    Never mutates: returns ``node`` itself when nothing changes, else a copy of the
    containers on the way to the changed values (the caller's dict stays as it was).
    """
    if isinstance(node, list):
        items = [_canonical_enums(item, spec) for item in node]
        return items if any(a is not b for a, b in zip(items, node, strict=True)) else node
    if not isinstance(node, dict):
        return node
    changed: dict[str, Any] = {}
    for key, sub in spec.items():
        if key not in node:
            continue
        value = node[key]
        if sub == _FAILURE:
            new = _canonical_failure(value)
        elif isinstance(sub, str):
            new = _enum_value(sub, value)
        else:
            new = _canonical_enums(value, sub)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


def _canonical_failure(failure: Any) -> Any:
    """A Temporal ``Failure`` with the enums of its ``...FailureInfo`` and causes canonical."""
    if not isinstance(failure, dict):
        return failure
    changed: dict[str, Any] = {}
    for key, value in failure.items():
        if key == "cause":
            new = _canonical_failure(value)
        elif key.endswith("FailureInfo"):
            new = _canonical_enums(value, _FAILURE_INFO_ENUMS)
        else:
            continue
        if new is not value:
            changed[key] = new
    return {**failure, **changed} if changed else failure
