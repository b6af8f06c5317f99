"""Histories, visibility listings, activity attempts and schedules' action logs as pandas
DataFrames.

pandas (and pyarrow, for Parquet) are optional: install them with
``pip install durable-notebook[data]``. They are imported when a function needs them, so
``import engine.dataframes`` always works; :func:`history_columns` needs no pandas at all.

Every frame has the same columns with the same dtypes whatever it holds (even when
empty), so code that plots or aggregates them does not depend on the data::

    history = await client.get_workflow_handle("order-8842").fetch_history()
    df = history_to_dataframe(history)
    df[df.category == "activity"].groupby("activity_type").duration_s.describe()
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any

from ._model.events import CLOSING_EVENT_TYPES
from ._schedule_frames import SCHEDULE_ACTION_COLUMNS, schedule_actions_dataframe
from .common import SearchAttributeIndexedValueType, WorkflowExecutionStatus

if TYPE_CHECKING:
    from .client import Client, WorkflowExecution
    from .history import HistoryEvent, WorkflowHistory

__all__ = [
    "ATTEMPT_OUTCOMES",
    "CLOSING_EVENT_TYPES",
    "EVENT_CATEGORIES",
    "SCHEDULE_ACTION_COLUMNS",
    "attempts_to_dataframe",
    "event_category",
    "executions_to_dataframe",
    "failure_text",
    "history_columns",
    "history_to_dataframe",
    "list_workflows_dataframe",
    "payload_preview",
    "schedule_actions_dataframe",
    "to_csv",
    "to_parquet",
]

EVENT_CATEGORIES = (
    "workflow",
    "workflow_task",
    "activity",
    "timer",
    "signal",
    "update",
    "child",
    "marker",
    "other",
)
"""The categories of the ``category`` column, in this order."""

ATTEMPT_OUTCOMES = ("running", "completed", "failed", "timed_out", "canceled")
"""The categories of the ``outcome`` column of :func:`attempts_to_dataframe`."""

HISTORY_COLUMNS = (
    "event_id",
    "time",
    "type",
    "category",
    "subject",
    "activity_type",
    "attempt",
    "scheduled_event_id",
    "duration_s",
    "payload_preview",
    "failure",
    "attributes",
)
"""The columns of :func:`history_to_dataframe`, in order."""

PREVIEW_CHARS = 80
"""``payload_preview`` texts longer than this are cut, ending in ``…``."""

FAILURE_CHARS = 1000
"""``failure`` texts (messages with their causes) longer than this are cut."""

_MISSING_PANDAS = (
    "this needs pandas (and pyarrow for Parquet), which are not installed: "
    "pip install 'durable-notebook[data]'"
)


def _pandas() -> Any:
    try:
        import pandas  # type: ignore[import-untyped]
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(_MISSING_PANDAS) from err
    return pandas


# -- categories ---------------------------------------------------------------------------

_CATEGORY_CACHE: dict[str, str] = {}

# Close events of a run: their duration is measured from WorkflowExecutionStarted.
_RUN_CLOSE = CLOSING_EVENT_TYPES

# Events that begin something later events refer to (their own id is the origin).
_ORIGINS = frozenset(
    {
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "ActivityTaskScheduled",
        "TimerStarted",
        "StartChildWorkflowExecutionInitiated",
        "SignalExternalWorkflowExecutionInitiated",
        "RequestCancelExternalWorkflowExecutionInitiated",
        "WorkflowExecutionUpdateAccepted",
    }
)


def _category_of(event_type: str) -> str:
    if event_type.startswith("WorkflowTask"):
        return "workflow_task"
    if event_type == "WorkflowExecutionSignaled" or "SignalExternalWorkflow" in event_type:
        return "signal"
    if event_type == "ExternalWorkflowExecutionSignaled":
        return "signal"
    if event_type.startswith("WorkflowExecutionUpdate"):
        return "update"
    if event_type.startswith("WorkflowExecution") or event_type in (
        "UpsertWorkflowSearchAttributes",
        "WorkflowPropertiesModified",
    ):
        return "workflow"
    if event_type.startswith("ActivityTask"):
        return "activity"
    if event_type.startswith("Timer"):
        return "timer"
    if event_type.startswith(("StartChildWorkflowExecution", "ChildWorkflowExecution")):
        return "child"
    if event_type == "MarkerRecorded":
        return "marker"
    return "other"


def event_category(event_type: str) -> str:
    """The category (one of :data:`EVENT_CATEGORIES`) of a short event type name.

    ``"ActivityTaskCompleted"`` → ``"activity"``, ``"WorkflowExecutionSignaled"`` →
    ``"signal"``, ``"WorkflowTaskStarted"`` → ``"workflow_task"``; unknown types (Nexus,
    external cancel requests, ...) → ``"other"``.
    """
    category = _CATEGORY_CACHE.get(event_type)
    if category is None:
        category = _CATEGORY_CACHE[event_type] = _category_of(event_type)
    return category


# -- payloads and failures ----------------------------------------------------------------

_ENCODING_CACHE: dict[str, str] = {}


def _encoding(raw: Any) -> str:
    if not isinstance(raw, str):
        return ""
    name = _ENCODING_CACHE.get(raw)
    if name is None:
        try:
            name = base64.b64decode(raw, validate=True).decode("utf-8", "replace")
        except (binascii.Error, ValueError):
            name = raw  # not base64: some exporters write the plain name
        _ENCODING_CACHE[raw] = name
    return name


def _one_payload(payload: Any) -> str:
    if not isinstance(payload, dict):
        return "<not a payload>"
    metadata = payload.get("metadata")
    encoding = _encoding(metadata.get("encoding")) if isinstance(metadata, dict) else ""
    if encoding == "binary/null":
        return "None"
    raw = payload.get("data") or ""
    try:
        data = base64.b64decode(raw, validate=True) if raw else b""
    except (binascii.Error, ValueError, TypeError):
        return "<undecodable payload>"
    if encoding in ("json/plain", "json/protobuf"):
        text = data.decode("utf-8", "replace")
        return " ".join(text.split()) if "\n" in text else text
    if encoding == "binary/plain":
        return f"<{len(data)} bytes>"
    return f"<{encoding or 'no encoding'}, {len(data)} bytes>"


def _cut(text: str, limit: int = PREVIEW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _payloads_text(value: Any) -> str | None:
    """``{"payloads": [...]}`` or a map of them (marker details) as text, else None."""
    if not isinstance(value, dict):
        return None
    payloads = value.get("payloads")
    if isinstance(payloads, list):
        return ", ".join(_one_payload(p) for p in payloads)
    if payloads is None and value and all(isinstance(v, dict) for v in value.values()):
        parts = []
        for name, inner in value.items():
            text = _payloads_text(inner)
            if text is not None:
                parts.append(f"{name}={text}")
        return ", ".join(parts) if parts else None
    return None


_PAYLOAD_KEYS = ("input", "result", "details", "heartbeatDetails", "lastHeartbeatDetails")


def payload_preview(attributes: Mapping[str, Any], limit: int = PREVIEW_CHARS) -> str | None:
    """The decoded input/result/details payloads of an event's attributes, cut to ``limit``.

    ``json/plain`` payloads show as their JSON text (``'"Hello, Ada!"'``), several payloads
    are joined with ``", "``, ``binary/null`` shows as ``None`` and other encodings as
    ``<encoding, N bytes>``. Update events show their arguments or outcome. None when the
    event carries no payloads.
    """
    for key in _PAYLOAD_KEYS:
        value = attributes.get(key)
        if value is not None:
            text = _payloads_text(value)
            if text is not None:
                return _cut(text, limit)
    request = attributes.get("acceptedRequest")
    if isinstance(request, dict):
        update_input = request.get("input")
        if isinstance(update_input, dict):
            text = _payloads_text(update_input.get("args"))
            if text is not None:
                return _cut(text, limit)
    outcome = attributes.get("outcome")
    if isinstance(outcome, dict):
        text = _payloads_text(outcome.get("success"))
        if text is not None:
            return _cut(text, limit)
    return None


def _failure_kind(failure: Mapping[str, Any]) -> str:
    info = failure.get("applicationFailureInfo")
    if isinstance(info, dict):
        return str(info.get("type") or "")
    info = failure.get("timeoutFailureInfo")
    if isinstance(info, dict):
        return str(info.get("timeoutType") or "Timeout")
    if "canceledFailureInfo" in failure:
        return "Canceled"
    if "terminatedFailureInfo" in failure:
        return "Terminated"
    if "serverFailureInfo" in failure:
        return "ServerError"
    return ""


def failure_text(failure: Any) -> str | None:
    """A Temporal Failure (JSON) as one line: each message with its type, causes after.

    ``"Activity task failed; cause: permanent failure for doomed (PermanentError)"``.
    None when ``failure`` is not a failure object.
    """
    parts: list[str] = []
    seen = 0
    while isinstance(failure, dict) and seen < 20:
        seen += 1
        text = str(failure.get("message") or "").strip() or "(no message)"
        kind = _failure_kind(failure)
        parts.append(f"{text} ({kind})" if kind else text)
        failure = failure.get("cause")
    return "; cause: ".join(parts) if parts else None


def _event_failure(event_type: str, attributes: Mapping[str, Any]) -> str | None:
    failure = attributes.get("failure")
    if failure is None:
        outcome = attributes.get("outcome")
        if isinstance(outcome, dict):
            failure = outcome.get("failure")
    if failure is not None:
        text = failure_text(failure)
    elif event_type == "WorkflowExecutionTerminated":
        text = f"terminated: {attributes.get('reason') or 'no reason given'}"
    elif event_type.endswith("Failed") and isinstance(attributes.get("cause"), str):
        text = str(attributes["cause"])  # e.g. StartChildWorkflowExecutionFailed
    else:
        return None
    return _cut(text, FAILURE_CHARS) if text else None


# -- histories ----------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _name(value: Any) -> str | None:
    if isinstance(value, dict):
        name = value.get("name")
        return str(name) if name else None
    return None


def history_columns(history: WorkflowHistory | Iterable[HistoryEvent]) -> dict[str, list[Any]]:
    """The columns of :func:`history_to_dataframe` as plain Python lists (no pandas needed).

    ``time`` holds epoch seconds (float) here; missing values are None (``duration_s``:
    NaN). Used by the CLI's table output, and by :func:`history_to_dataframe`.
    """
    events = list(history)
    nan = float("nan")
    event_ids: list[int] = []
    times: list[float] = []
    types: list[str] = []
    categories: list[str] = []
    subjects: list[str | None] = []
    activity_types: list[str | None] = []
    attempts: list[int | None] = []
    origins: list[int | None] = []
    durations: list[float] = []
    previews: list[str | None] = []
    failures: list[str | None] = []
    raw: list[dict[str, Any]] = []

    time_of: dict[int, float] = {}
    attempt_of: dict[int, int] = {}
    activity_of: dict[int, tuple[str | None, str | None]] = {}
    run_started: int | None = None

    for event in events:
        eid = event.event_id
        etype = event.event_type
        attrs = event.attributes
        t = event.event_time
        time_of[eid] = t
        category = _CATEGORY_CACHE.get(etype) or event_category(etype)
        subject: str | None = None
        activity_type: str | None = None
        origin: int | None = None

        attempt = attrs.get("attempt")
        attempt = attempt if isinstance(attempt, int) else _int(attempt)
        if attempt is not None:
            attempt_of[eid] = attempt

        if etype in _ORIGINS:
            origin = eid
            if etype == "WorkflowExecutionStarted" and run_started is None:
                run_started = eid
        elif etype in _RUN_CLOSE:
            origin = run_started
        else:
            origin = (
                _int(attrs.get("scheduledEventId"))
                or _int(attrs.get("initiatedEventId"))
                or _int(attrs.get("acceptedEventId"))
            )
            if origin is None and category == "timer":
                origin = _int(attrs.get("startedEventId"))

        if category == "activity":
            if etype == "ActivityTaskScheduled":
                subject = attrs.get("activityId")
                activity_type = _name(attrs.get("activityType"))
                activity_of[eid] = (subject, activity_type)
            elif origin is not None:
                subject, activity_type = activity_of.get(origin, (None, None))
        elif category == "timer":
            subject = attrs.get("timerId")
        elif category == "signal":
            subject = attrs.get("signalName")
        elif category == "child":
            subject = attrs.get("workflowId")
            if subject is None:
                execution = attrs.get("workflowExecution")
                if isinstance(execution, dict):
                    subject = execution.get("workflowId")
        elif category == "update":
            subject = attrs.get("protocolInstanceId")
            if subject is None:
                meta = attrs.get("meta")
                if isinstance(meta, dict):
                    subject = meta.get("updateId")
        elif category == "marker":
            subject = attrs.get("markerName")

        if attempt is None and category in ("activity", "workflow_task"):
            # A completion has the attempt of its started event; a workflow task's started
            # event has the attempt of its scheduled event.
            started = _int(attrs.get("startedEventId"))
            if started is not None:
                attempt = attempt_of.get(started)
            if attempt is None and category == "workflow_task" and origin is not None:
                attempt = attempt_of.get(origin)

        if origin is not None and origin != eid:
            start_time = time_of.get(origin)
            durations.append(t - start_time if start_time is not None else nan)
        else:
            durations.append(nan)

        event_ids.append(eid)
        times.append(t)
        types.append(etype)
        categories.append(category)
        subjects.append(None if subject is None else str(subject))
        activity_types.append(activity_type)
        attempts.append(attempt)
        origins.append(origin)
        previews.append(payload_preview(attrs) if attrs else None)
        failures.append(_event_failure(etype, attrs) if attrs else None)
        raw.append(attrs)

    return {
        "event_id": event_ids,
        "time": times,
        "type": types,
        "category": categories,
        "subject": subjects,
        "activity_type": activity_types,
        "attempt": attempts,
        "scheduled_event_id": origins,
        "duration_s": durations,
        "payload_preview": previews,
        "failure": failures,
        "attributes": raw,
    }


def _utc_times(pd: Any, epoch_seconds: list[float]) -> Any:
    """Epoch seconds (floats; NaN for missing) as ``datetime64[ns, UTC]``."""
    import numpy as np

    seconds = np.asarray(epoch_seconds, dtype="float64")
    missing = np.isnan(seconds)
    whole = np.floor(np.where(missing, 0.0, seconds))
    nanos = whole.astype("int64") * 1_000_000_000 + np.round(
        (np.where(missing, 0.0, seconds) - whole) * 1e9
    ).astype("int64")
    values = nanos.view("datetime64[ns]").copy()
    values[missing] = np.datetime64("NaT")
    return pd.Series(values).dt.tz_localize("UTC").astype("datetime64[ns, UTC]")


def _event_times(pd: Any, events: list[HistoryEvent], epoch_seconds: list[float]) -> Any:
    """Event times; to the nanosecond from Temporal's ``eventTime`` text when imported."""
    texts = [e.extra.get("eventTime") for e in events]
    if texts and all(isinstance(t, str) for t in texts):
        try:
            return pd.Series(pd.to_datetime(texts, utc=True, format="ISO8601")).astype(
                "datetime64[ns, UTC]"
            )
        except (ValueError, TypeError, OverflowError):
            pass  # unusual text: the parsed epoch seconds are close enough
    return _utc_times(pd, epoch_seconds)


def _epoch(value: Any) -> float:
    if value is None:
        return float("nan")
    if isinstance(value, int | float):
        return float(value)
    return float(value.timestamp())


def history_to_dataframe(history: WorkflowHistory | Iterable[HistoryEvent]) -> Any:
    """One row per event of a history, as a pandas DataFrame.

    Columns (dtypes are the same for every history, including an empty one):

    - ``event_id`` (int64), ``time`` (datetime64[ns, UTC]), ``type`` (string: the short
      name, ``"ActivityTaskScheduled"``), ``category`` (category: one of
      :data:`EVENT_CATEGORIES`);
    - ``subject`` (string): the activity id, timer id, child workflow id, signal name,
      update id or marker name the event concerns;
    - ``activity_type`` (string): for activity events, resolved through the scheduled event;
    - ``attempt`` (Int64): of the activity or workflow task (a completion takes the attempt
      of its started event), or of the run for ``WorkflowExecutionStarted``;
    - ``scheduled_event_id`` (Int64): the event that scheduled, started or initiated what
      this event concerns: ``scheduledEventId`` of activity and workflow task events, the
      ``TimerStarted`` of timer events, ``initiatedEventId`` of child events, the
      ``WorkflowExecutionStarted`` of run close events, and the event's own id for those
      scheduling events themselves: ``groupby("scheduled_event_id")`` groups each
      activity's (or timer's, ...) events;
    - ``duration_s`` (float64): seconds since that event (``ActivityTaskCompleted`` minus
      its ``ActivityTaskScheduled``, ``TimerFired`` minus ``TimerStarted``,
      ``WorkflowTaskCompleted`` minus ``WorkflowTaskScheduled``); NaN for the scheduling
      events themselves and events that concern nothing earlier (signals);
    - ``payload_preview`` (string): decoded input/result/details (see
      :func:`payload_preview`);
    - ``failure`` (string): the failure message with its cause chain (see
      :func:`failure_text`), the reason of a termination, or ``<NA>``;
    - ``attributes`` (object): the event's raw attribute dict, in Temporal's JSON.

    Needs pandas (``pip install durable-notebook[data]``).
    """
    pd = _pandas()
    events = list(history)
    cols = history_columns(events)
    string = pd.StringDtype()
    return pd.DataFrame(
        {
            "event_id": pd.Series(cols["event_id"], dtype="int64"),
            "time": _event_times(pd, events, cols["time"]),
            "type": pd.Series(cols["type"], dtype=string),
            "category": pd.Series(
                pd.Categorical(cols["category"], categories=list(EVENT_CATEGORIES))
            ),
            "subject": pd.Series(cols["subject"], dtype=string),
            "activity_type": pd.Series(cols["activity_type"], dtype=string),
            "attempt": pd.Series(cols["attempt"], dtype="Int64"),
            "scheduled_event_id": pd.Series(cols["scheduled_event_id"], dtype="Int64"),
            "duration_s": pd.Series(cols["duration_s"], dtype="float64"),
            "payload_preview": pd.Series(cols["payload_preview"], dtype=string),
            "failure": pd.Series(cols["failure"], dtype=string),
            "attributes": pd.Series(cols["attributes"], dtype=object),
        },
        columns=list(HISTORY_COLUMNS),
    )


# -- visibility and attempts --------------------------------------------------------------

EXECUTION_COLUMNS = (
    "id",
    "run_id",
    "workflow_type",
    "task_queue",
    "status",
    "start_time",
    "close_time",
    "duration_s",
    "history_length",
)
"""The columns of :func:`executions_to_dataframe`, in order."""


def executions_to_dataframe(
    executions: Iterable[WorkflowExecution],
    search_attributes: Mapping[str, SearchAttributeIndexedValueType] | None = None,
) -> Any:
    """Runs (``client.list_workflows()`` items, or ``describe()`` results) as a DataFrame.

    Columns: ``id``, ``run_id``, ``workflow_type``, ``task_queue`` (string), ``status``
    (category of :class:`~engine.WorkflowExecutionStatus` names, ``"COMPLETED"``, ...),
    ``start_time``, ``close_time`` (datetime64[ns, UTC]; NaT while open), ``duration_s``
    (float64: close minus start, NaN while open) and ``history_length`` (int64); then one
    column per search attribute, by name: those of ``search_attributes`` (name -> type;
    the namespace's registered ones, say) and any other a run holds. Each is typed by its
    attribute's type: Keyword and Text string, Int Int64, Double float64, Bool boolean,
    Datetime datetime64[ns, UTC], KeywordList object (a list; None where unset); a run
    without the attribute has the missing value. A column whose name an attribute shares
    with the columns above is called ``sa_<name>``.
    """
    pd = _pandas()
    rows = list(executions)
    frame = _execution_frame(pd, rows)
    held = [{pair.key.name: pair for pair in r.typed_search_attributes} for r in rows]
    kinds = dict(search_attributes or {})
    for pairs in held:
        for name, pair in pairs.items():
            kinds.setdefault(name, pair.key.indexed_value_type)
    for name in sorted(kinds):
        values = [pairs[name].value if name in pairs else None for pairs in held]
        column = f"sa_{name}" if name in EXECUTION_COLUMNS else name
        frame[column] = _attribute_series(pd, SearchAttributeIndexedValueType(kinds[name]), values)
    return frame


def _attribute_series(pd: Any, kind: SearchAttributeIndexedValueType, values: list[Any]) -> Any:
    T = SearchAttributeIndexedValueType
    if kind in (T.KEYWORD, T.TEXT):
        return pd.Series(values, dtype=pd.StringDtype())
    if kind == T.INT:
        return pd.Series(values, dtype="Int64")
    if kind == T.DOUBLE:
        return pd.Series([float("nan") if v is None else v for v in values], dtype="float64")
    if kind == T.BOOL:
        return pd.Series(values, dtype="boolean")
    if kind == T.DATETIME:
        return _utc_times(pd, [_epoch(v) for v in values])
    return pd.Series([None if v is None else list(v) for v in values], dtype=object)


def _execution_frame(pd: Any, rows: list[WorkflowExecution]) -> Any:
    starts = [_epoch(r.start_time) for r in rows]
    closes = [_epoch(r.close_time) for r in rows]
    string = pd.StringDtype()
    statuses = [s.name for s in WorkflowExecutionStatus]
    return pd.DataFrame(
        {
            "id": pd.Series([r.id for r in rows], dtype=string),
            "run_id": pd.Series([r.run_id for r in rows], dtype=string),
            "workflow_type": pd.Series([r.workflow_type for r in rows], dtype=string),
            "task_queue": pd.Series([r.task_queue for r in rows], dtype=string),
            "status": pd.Series(
                pd.Categorical(
                    [WorkflowExecutionStatus(r.status).name for r in rows], categories=statuses
                )
            ),
            "start_time": _utc_times(pd, starts),
            "close_time": _utc_times(pd, closes),
            "duration_s": pd.Series(
                [c - s for s, c in zip(starts, closes, strict=True)], dtype="float64"
            ),
            "history_length": pd.Series([r.history_length for r in rows], dtype="int64"),
        },
        columns=list(EXECUTION_COLUMNS),
    )


async def list_workflows_dataframe(
    client: Client, query: str | None = None, *, limit: int = 1000
) -> Any:
    """``client.list_workflows(query)`` (Temporal's List Filter; open runs first, then
    closed ones newest first) as :func:`executions_to_dataframe`, with a typed column for
    each search attribute registered in the client's namespace, whether or not a listed
    run holds it (and for ``TemporalChangeVersion`` when one does)."""
    _pandas()  # fail before querying when pandas is missing
    registered = await client.service.list_search_attributes(client.namespace)
    executions = [e async for e in client.list_workflows(query, limit=limit)]
    return executions_to_dataframe(
        executions, {n: SearchAttributeIndexedValueType(int(t)) for n, t in registered.items()}
    )


ATTEMPT_COLUMNS = (
    "scheduled_event_id",
    "activity_id",
    "activity_type",
    "attempt",
    "identity",
    "scheduled_time",
    "started_time",
    "ended_time",
    "schedule_to_start_s",
    "duration_s",
    "outcome",
    "failure",
)
"""The columns of :func:`attempts_to_dataframe`, in order."""


def attempts_to_dataframe(attempts: Iterable[Mapping[str, Any]]) -> Any:
    """Activity attempts (``await handle.fetch_attempts()``) as a DataFrame.

    Columns: ``scheduled_event_id``, ``attempt`` (Int64), ``activity_id``,
    ``activity_type``, ``identity`` (string), ``scheduled_time``, ``started_time``,
    ``ended_time`` (datetime64[ns, UTC]), ``schedule_to_start_s`` (started minus
    scheduled), ``duration_s`` (ended minus started; float64, NaN while unknown),
    ``outcome`` (category: :data:`ATTEMPT_OUTCOMES`) and ``failure`` (string, see
    :func:`failure_text`).
    """
    pd = _pandas()
    rows = list(attempts)
    string = pd.StringDtype()
    scheduled = [_epoch(r.get("scheduled_time")) for r in rows]
    started = [_epoch(r.get("started_time")) for r in rows]
    ended = [_epoch(r.get("ended_time")) for r in rows]

    def text(key: str) -> Any:
        return pd.Series(
            [None if r.get(key) is None else str(r.get(key)) for r in rows], dtype=string
        )

    return pd.DataFrame(
        {
            "scheduled_event_id": pd.Series(
                [_int(r.get("scheduled_event_id")) for r in rows], dtype="Int64"
            ),
            "activity_id": text("activity_id"),
            "activity_type": text("activity_type"),
            "attempt": pd.Series([_int(r.get("attempt")) for r in rows], dtype="Int64"),
            "identity": text("identity"),
            "scheduled_time": _utc_times(pd, scheduled),
            "started_time": _utc_times(pd, started),
            "ended_time": _utc_times(pd, ended),
            "schedule_to_start_s": pd.Series(
                [b - a for a, b in zip(scheduled, started, strict=True)], dtype="float64"
            ),
            "duration_s": pd.Series(
                [b - a for a, b in zip(started, ended, strict=True)], dtype="float64"
            ),
            "outcome": pd.Series(
                pd.Categorical([r.get("outcome") for r in rows], categories=list(ATTEMPT_OUTCOMES))
            ),
            "failure": pd.Series([failure_text(r.get("failure")) for r in rows], dtype=string),
        },
        columns=list(ATTEMPT_COLUMNS),
    )


# -- exports ------------------------------------------------------------------------------


def _json_cell(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and value != value:  # NaN
        return None
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def _flat(df: Any) -> Any:
    """A copy whose object columns (``attributes``) hold JSON text, as pandas strings."""
    pd = _pandas()
    out = df.copy(deep=False)
    for name in out.columns:
        if out[name].dtype == object:
            out[name] = pd.Series(
                [_json_cell(v) for v in out[name].tolist()], index=out.index, dtype="string"
            )
    return out


def to_csv(df: Any, path: str | os.PathLike[str] | IO[str]) -> None:
    """Write a frame of this module as CSV (UTF-8, no index).

    Object columns (``attributes``) are written as JSON text; times as ISO 8601 with the
    UTC offset; missing values as empty cells.
    """
    _flat(df).to_csv(path, index=False)


def to_parquet(df: Any, path: str | os.PathLike[str] | IO[bytes]) -> None:
    """Write a frame of this module as Parquet (needs pyarrow), keeping the dtypes.

    Object columns (``attributes``) are stored as JSON text (``json.loads`` reads them back).
    """
    try:
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError(_MISSING_PANDAS) from err
    _flat(df).to_parquet(path, index=False, engine="pyarrow")
