"""Validation of imported history JSON (Temporal's ``temporal workflow show --output json``).

:meth:`engine.history.WorkflowHistory.from_json` checks here the type of every field the
replay code reads, so that a malformed file is a :class:`HistoryFormatError` naming the
event and the JSON path (``events[7].activityTaskScheduledEventAttributes.activityType.name:
expected a string, got 3``), never an error from deep inside the Replayer.

Fields are checked by name wherever they appear in an event (Temporal's protos use each of
these names with one type); fields not named here are kept as they are, only bounded in
nesting. An unknown but well-formed event type is kept: Temporal adds event types.

Limits: a failure chain (``failure.cause.cause...``) may be at most
:data:`MAX_FAILURE_DEPTH` failures deep and any value at most :data:`MAX_NESTING` objects
or lists deep. We know of no limit Temporal documents for the chain (its payload and history
size limits bound it); 100 is far above what a workflow writes, and low enough that every
reader of the chain stays far from Python's recursion limit.
"""

from __future__ import annotations

import re
from typing import Any

from .common import timestamp_from_json
from .exceptions import HistoryFormatError

__all__ = [
    "MAX_FAILURE_DEPTH",
    "MAX_NESTING",
    "check_fields",
    "event_id_of",
    "event_time_of",
    "event_type_of",
    "int64_of",
]

MAX_FAILURE_DEPTH = 100
MAX_NESTING = 256
_INT64_MAX = 2**63 - 1
_QUOTE_CHARS = 200
_MAX_DURATION_SECONDS = 315_576_000_000  # protobuf's Duration range: +-10,000 years

_INT_TEXT = re.compile(r"-?\d{1,19}")
_EVENT_TYPE = re.compile(r"EVENT_TYPE_[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*|[A-Z][A-Za-z0-9]*")
_DURATION = re.compile(r"-?(\d{1,12})(?:\.\d{1,9})?s")

# What a field of each name must hold.
_STR, _INT, _BOOL, _MAP, _PAYLOAD, _PAYLOAD_LIST, _PAYLOAD_MAP, _FAILURE, _DURATION_KIND = range(9)
_TIME, _INT_LIST, _LIST, _ENUM, _OTHER = 9, 10, 11, 12, -1

_KIND: dict[str, int] = {
    **dict.fromkeys(
        [
            "activityId",
            "binaryChecksum",
            "continuedExecutionRunId",
            "control",
            "cronSchedule",
            "encoding",
            "firstExecutionRunId",
            "identity",
            "markerName",
            "message",
            "name",
            "namespace",
            "newExecutionRunId",
            "originalExecutionRunId",
            "parentWorkflowNamespace",
            "protocolInstanceId",
            "reason",
            "requestId",
            "runId",
            "signalName",
            "source",
            "stackTrace",
            "timerId",
            "type",
            "updateId",
            "workflowId",
        ],
        _STR,
    ),
    **dict.fromkeys(
        [
            "acceptedRequestSequencingEventId",
            "attempt",
            "eventId",
            "historySizeBytes",
            "initiatedEventId",
            "maximumAttempts",
            "scheduledEventId",
            "startedEventId",
            "taskId",
            "version",
            "workflowTaskCompletedEventId",
        ],
        _INT,
    ),
    **dict.fromkeys(["nonRetryable", "suggestContinueAsNew", "workerMayIgnore"], _BOOL),
    **dict.fromkeys(
        [
            "acceptedRequest",
            "activityType",
            "header",
            "input",
            "lastCompletionResult",
            "meta",
            "memo",
            "parentWorkflowExecution",
            "result",
            "retryPolicy",
            "rootWorkflowExecution",
            "args",
            "searchAttributes",
            "sdkMetadata",
            "taskQueue",
            "upsertedMemo",
            "userMetadata",
            "workflowExecution",
            "workflowType",
            "details",
            "heartbeatDetails",
            "lastHeartbeatDetails",
            "success",
            "outcome",
        ],
        _MAP,
    ),
    **dict.fromkeys(["encodedAttributes", "summary"], _PAYLOAD),
    "payloads": _PAYLOAD_LIST,
    **dict.fromkeys(["indexedFields", "fields"], _PAYLOAD_MAP),
    **dict.fromkeys(["failure", "lastFailure", "continuedFailure"], _FAILURE),
    "coreUsedFlags": _INT_LIST,
    "links": _LIST,
}
# enums: protobuf's JSON writes the name, and its readers accept the number too
_KIND.update(
    dict.fromkeys(
        [
            "initiator",
            "kind",
            "parentClosePolicy",
            "retryState",
            "timeoutType",
            "workflowIdReusePolicy",
        ],
        _ENUM,
    )
)
# userMetadata.details is one payload; every other "details" is a map of payload lists.
_PAYLOAD_UNDER = {"userMetadata": frozenset({"summary", "details"})}


def _quote(value: Any) -> str:
    """``value`` for a message: at most ~200 characters, never a deep or huge repr."""
    if isinstance(value, dict):
        return f"an object with {len(value)} field(s)"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 600:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "...'"


def _fail(where: str, path: str, what: str, value: Any) -> HistoryFormatError:
    return HistoryFormatError(f"{where}: {path}: expected {what}, got {_quote(value)}")


def event_id_of(index: int, raw: dict[str, Any]) -> int:
    """The event's ``eventId``: an int, or int text as protobuf's JSON writes int64."""
    where = f"history event at index {index}"
    if "eventId" not in raw:
        raise HistoryFormatError(f"{where}: events[{index}].eventId: field is missing")
    value = raw["eventId"]
    event_id = int64_of(value)
    if event_id is None or not 1 <= event_id <= _INT64_MAX:
        raise _fail(where, f"events[{index}].eventId", "an integer in 1..2**63-1", value)
    return event_id


def int64_of(value: Any) -> int | None:
    """``value`` as an int64 (an int, or its text as protobuf's JSON writes it), else None."""
    if type(value) is int:
        return value if -_INT64_MAX - 1 <= value <= _INT64_MAX else None
    if type(value) is str and len(value) < 19 and value.isdigit() and value.isascii():
        return int(value)
    if isinstance(value, str) and _INT_TEXT.fullmatch(value):
        number = int(value)
        return number if -_INT64_MAX - 1 <= number <= _INT64_MAX else None
    return None


def event_type_of(where: str, index: int, raw: dict[str, Any]) -> str:
    """The ``eventType`` as written: ``EVENT_TYPE_<NAME>`` (or the short ``<Name>``)."""
    value = raw.get("eventType")
    if not isinstance(value, str) or not _EVENT_TYPE.fullmatch(value):
        raise _fail(where, f"events[{index}].eventType", "a string EVENT_TYPE_<NAME>", value)
    return value


def event_time_of(where: str, index: int, raw: dict[str, Any]) -> float:
    """The ``eventTime`` as epoch seconds (0.0 when missing)."""
    value = raw.get("eventTime")
    if value is None or value == "":
        return 0.0
    try:
        return timestamp_from_json(value) if isinstance(value, str) else _no_time()
    except (ValueError, OverflowError):
        raise _fail(where, f"events[{index}].eventTime", "an RFC 3339 timestamp", value) from None


def _no_time() -> float:
    raise ValueError


def _kind_of(key: str) -> int:
    """The kind of a field named ``key`` outside a failure (memoized)."""
    kind = _KIND_CACHE.get(key)
    if kind is None:
        kind = _KIND.get(key, _OTHER)
        if kind == _OTHER and key.endswith(("Timeout", "Interval", "Backoff", "Delay")):
            kind = _DURATION_KIND
        elif kind == _OTHER and key.endswith("Time"):
            kind = _TIME
        if len(_KIND_CACHE) < 10_000:
            _KIND_CACHE[key] = kind
    return kind


_KIND_CACHE: dict[str, int] = {"cause": _ENUM}
_Path = tuple[Any, ...]  # (parent path, key or index), rendered only for a message


def _render(path: _Path | str) -> str:
    parts: list[str] = []
    while isinstance(path, tuple):
        path, step = path
        parts.append(f"[{step}]" if isinstance(step, int) else f".{step}")
    return str(path) + "".join(reversed(parts))


def check_fields(where: str, path: str, node: Any) -> None:
    """Check, without recursion, every field of ``node`` named in the rules above."""
    # (path, value, kind, depth, failure depth, parent key)
    stack: list[tuple[_Path | str, Any, int, int, int, str]] = [(path, node, _MAP, 1, 0, "")]
    while stack:
        at, value, kind, depth, fdepth, parent = stack.pop()
        if kind in (_MAP, _FAILURE):
            if type(value) is not dict:
                raise _fail(where, _render(at), "an object", value)
            if depth > MAX_NESTING:
                raise HistoryFormatError(
                    f"{where}: {_render(at)}: nested deeper than {MAX_NESTING}"
                )
            if kind == _FAILURE:
                fdepth += 1
                if fdepth > MAX_FAILURE_DEPTH:
                    raise HistoryFormatError(
                        f"{where}: {_render(at)}: failure chain deeper than "
                        f"{MAX_FAILURE_DEPTH} causes"
                    )
            under = _PAYLOAD_UNDER.get(parent)
            for key, sub in value.items():
                sub_kind = _KIND_CACHE.get(key)
                if sub_kind is None:
                    if type(key) is not str:
                        raise _fail(where, _render(at), "string field names", key)
                    sub_kind = _kind_of(key)
                if kind == _FAILURE and (key == "cause" or key.endswith("FailureInfo")):
                    if key == "cause" and sub is None:
                        continue
                    sub_kind = _FAILURE if key == "cause" else _MAP
                elif under is not None and key in under:
                    sub_kind = _PAYLOAD
                elif parent == "details" and sub_kind == _OTHER:
                    sub_kind = _MAP  # a marker's details: a map of payload lists
                if sub_kind in (_STR, _OTHER):
                    if type(sub) is str:
                        if not sub.isascii():
                            _check_text(where, (at, key), sub)
                        continue
                    if sub_kind == _STR:
                        raise _fail(where, _render((at, key)), "a string", sub)
                    if type(sub) is not dict and type(sub) is not list:
                        continue
                elif sub_kind == _INT:
                    if int64_of(sub) is None:
                        raise _fail(where, _render((at, key)), "an int64 (a number or text)", sub)
                    continue
                stack.append(((at, key), sub, sub_kind, depth + 1, fdepth, key))
        elif kind in (_OTHER, _LIST):  # a value of a field not named above
            if type(value) is dict:
                stack.append((at, value, _MAP, depth, fdepth, parent))
            elif type(value) is list:
                if depth > MAX_NESTING:
                    raise HistoryFormatError(
                        f"{where}: {_render(at)}: nested deeper than {MAX_NESTING}"
                    )
                for i, item in enumerate(value):
                    if isinstance(item, dict | list) or (
                        isinstance(item, str) and not item.isascii()
                    ):
                        stack.append(((at, i), item, _OTHER, depth + 1, fdepth, parent))
            elif kind == _LIST:
                raise _fail(where, _render(at), "a list", value)
            elif isinstance(value, str):
                _check_text(where, at, value)
        else:
            _check_leaf(where, at, value, kind)


def _check_leaf(where: str, at: _Path | str, value: Any, kind: int) -> None:
    if kind == _BOOL:
        if not isinstance(value, bool):
            raise _fail(where, _render(at), "true or false", value)
    elif kind == _PAYLOAD:
        _check_payload(where, at, value)
    elif kind == _PAYLOAD_LIST:
        if type(value) is not list:
            raise _fail(where, _render(at), "a list of payloads", value)
        for i, item in enumerate(value):
            _check_payload(where, (at, i), item)
    elif kind == _PAYLOAD_MAP:
        if type(value) is not dict:
            raise _fail(where, _render(at), "an object of payloads", value)
        for key, item in value.items():
            _check_payload(where, (at, key), item)
    elif kind == _DURATION_KIND:
        match = _DURATION.fullmatch(value) if isinstance(value, str) else None
        if match is None or int(match.group(1)) > _MAX_DURATION_SECONDS:
            raise _fail(where, _render(at), 'a duration such as "10s" or "0.5s"', value)
    elif kind == _TIME:
        try:
            timestamp_from_json(value) if isinstance(value, str) else _no_time()
        except (ValueError, OverflowError):
            raise _fail(where, _render(at), "an RFC 3339 timestamp", value) from None
    elif kind == _ENUM:
        if not (isinstance(value, str) and value.isascii()) and int64_of(value) is None:
            raise _fail(where, _render(at), "an enum name or number", value)
    elif kind == _INT_LIST and (type(value) is not list or any(int64_of(v) is None for v in value)):
        raise _fail(where, _render(at), "a list of integers", value)


def _check_text(where: str, at: _Path | str, text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _fail(where, _render(at), "valid Unicode text (no lone surrogates)", text) from None


def _check_payload(where: str, at: _Path | str, payload: Any) -> None:
    """A payload: ``{"metadata": {name: base64 text}, "data": base64 text}``."""
    path = _render(at) if type(payload) is not dict else at
    if type(payload) is not dict:
        raise _fail(where, _render(path), "a payload object", payload)
    metadata = payload.get("metadata", {})
    if type(metadata) is not dict:
        raise _fail(where, _render((path, "metadata")), "an object of strings", metadata)
    for key, value in metadata.items():
        if type(value) is not str or not value.isascii():
            raise _fail(where, _render(((path, "metadata"), key)), "a base64 string", value)
    data = payload.get("data", "")
    if type(data) is not str or not data.isascii():
        raise _fail(where, _render((path, "data")), "a base64 string", data)
    if len(payload) > ("metadata" in payload) + ("data" in payload):
        extra = {k: v for k, v in payload.items() if k not in ("metadata", "data")}
        check_fields(where, _render(path), extra)
