"""Commands: what workflow code asks the service to do, and how each matches its event.

Commands are in the imperative (``StartTimer``); the events they become are in the past
tense (``TimerStarted``). Replay compares the commands code produces, in order, with the
command events recorded after each ``WorkflowTaskCompleted``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JsonDict = dict[str, Any]

#: Events written as the direct result of a command, in the order commands were given.
COMMAND_EVENT_TYPES = frozenset(
    {
        "ActivityTaskScheduled",
        "ActivityTaskCancelRequested",
        "TimerStarted",
        "TimerCanceled",
        "MarkerRecorded",
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",
        "WorkflowExecutionCanceled",
        "WorkflowExecutionContinuedAsNew",
        "StartChildWorkflowExecutionInitiated",
        "RequestCancelExternalWorkflowExecutionInitiated",
        "SignalExternalWorkflowExecutionInitiated",
        "UpsertWorkflowSearchAttributes",
        "WorkflowPropertiesModified",
        "WorkflowExecutionUpdateAccepted",
        "WorkflowExecutionUpdateCompleted",
    }
)


@dataclass
class Command:
    """Base of all commands.

    ``user_metadata`` is Temporal's ``UserMetadata`` of the command (``{"summary": payload,
    "details": payload}``, payloads through the data converter): the summary given to an
    activity, timer or child, recorded as the event's top-level ``userMetadata``. Replay
    does not compare it (a changed summary is a safe edit, as in Temporal)."""

    #: The event type this command is recorded as.
    event_type = ""
    user_metadata: JsonDict | None = field(default=None, kw_only=True, repr=False)

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Whether a recorded command event is the record of this command."""
        return event_type == self.event_type

    def describe(self) -> str:
        """A short human description, used in non-determinism errors."""
        return self.event_type


@dataclass
class ScheduleActivityTask(Command):
    """Schedule an activity (becomes ActivityTaskScheduled)."""

    seq: int
    activity_id: str
    activity_type: str
    task_queue: str
    input: list[JsonDict]
    schedule_to_close: float | None
    schedule_to_start: float | None
    start_to_close: float | None
    heartbeat_timeout: float | None
    retry_policy: JsonDict
    #: Set by the service when it records the command (for eager dispatch).
    scheduled_event_id: int = 0
    event_type = "ActivityTaskScheduled"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same activity id and type."""
        return (
            event_type == self.event_type
            and attrs.get("activityId") == self.activity_id
            and attrs.get("activityType", {}).get("name") == self.activity_type
        )

    def describe(self) -> str:
        """E.g. ``ScheduleActivityTask(charge, activity id 1)``."""
        return f"ScheduleActivityTask({self.activity_type}, activity id {self.activity_id})"


@dataclass
class RequestCancelActivityTask(Command):
    """Ask to cancel a scheduled activity (becomes ActivityTaskCancelRequested)."""

    seq: int
    scheduled_event_id: int
    event_type = "ActivityTaskCancelRequested"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same scheduled event id."""
        return event_type == self.event_type and int(attrs.get("scheduledEventId", 0)) == (
            self.scheduled_event_id
        )

    def describe(self) -> str:
        """Description."""
        return f"RequestCancelActivityTask(scheduled event {self.scheduled_event_id})"


@dataclass
class StartTimer(Command):
    """Start a durable timer (becomes TimerStarted)."""

    seq: int
    timer_id: str
    duration: float
    event_type = "TimerStarted"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same timer id (a changed duration is a safe edit)."""
        return event_type == self.event_type and attrs.get("timerId") == self.timer_id

    def describe(self) -> str:
        """Description."""
        return f"StartTimer(timer id {self.timer_id}, {self.duration:g}s)"


@dataclass
class CancelTimer(Command):
    """Cancel a running timer (becomes TimerCanceled)."""

    seq: int
    timer_id: str
    event_type = "TimerCanceled"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same timer id."""
        return event_type == self.event_type and attrs.get("timerId") == self.timer_id

    def describe(self) -> str:
        """Description."""
        return f"CancelTimer(timer id {self.timer_id})"


@dataclass
class RecordMarker(Command):
    """Record a marker (side effects, local activities, patches)."""

    marker_name: str
    details: dict[str, JsonDict] = field(default_factory=dict)
    failure: JsonDict | None = None
    event_type = "MarkerRecorded"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same marker name."""
        return event_type == self.event_type and attrs.get("markerName") == self.marker_name

    def describe(self) -> str:
        """Description."""
        return f"RecordMarker({self.marker_name})"


#: The search attribute in which Temporal's SDKs list the patches a run has used.
CHANGE_VERSION_ATTRIBUTE = "TemporalChangeVersion"


@dataclass
class UpsertWorkflowSearchAttributes(Command):
    """Set search attributes of the run (becomes UpsertWorkflowSearchAttributes).

    ``search_attributes`` maps each name to its payload JSON (Temporal's ``indexedFields``;
    search attributes never go through the payload codec)."""

    search_attributes: dict[str, JsonDict]
    event_type = "UpsertWorkflowSearchAttributes"

    @property
    def is_change_version(self) -> bool:
        """Whether this is the upsert ``patched()`` makes, listing the patches used."""
        return set(self.search_attributes) == {CHANGE_VERSION_ATTRIBUTE}

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """The same attribute names."""
        fields = ((attrs.get("searchAttributes") or {}).get("indexedFields")) or {}
        return event_type == self.event_type and set(fields) == set(self.search_attributes)

    def describe(self) -> str:
        """Description."""
        return f"UpsertWorkflowSearchAttributes({', '.join(sorted(self.search_attributes))})"


def is_change_version_event(event_type: str, attrs: JsonDict) -> bool:
    """Whether a recorded event is the upsert of the patches a run has used."""
    if event_type != "UpsertWorkflowSearchAttributes":
        return False
    fields = ((attrs.get("searchAttributes") or {}).get("indexedFields")) or {}
    return set(fields) == {CHANGE_VERSION_ATTRIBUTE}


@dataclass
class CompleteWorkflowExecution(Command):
    """Finish the run with a result."""

    result: list[JsonDict]
    event_type = "WorkflowExecutionCompleted"

    def describe(self) -> str:
        """Description."""
        return "CompleteWorkflowExecution"


@dataclass
class FailWorkflowExecution(Command):
    """Fail the run."""

    failure: JsonDict
    event_type = "WorkflowExecutionFailed"

    def describe(self) -> str:
        """Description."""
        return "FailWorkflowExecution"


@dataclass
class CancelWorkflowExecution(Command):
    """End the run as cancelled."""

    details: list[JsonDict] = field(default_factory=list)
    event_type = "WorkflowExecutionCanceled"

    def describe(self) -> str:
        """Description."""
        return "CancelWorkflowExecution"


@dataclass
class ContinueAsNewWorkflowExecution(Command):
    """Close this run and start a fresh one with the same workflow id."""

    workflow_type: str
    task_queue: str
    input: list[JsonDict]
    run_timeout: float | None = None
    task_timeout: float | None = None
    #: Delay before the new run's first workflow task.
    backoff_start_interval: float | None = None
    #: None: the current run's retry policy; its start memo (``{"fields": ...}``).
    retry_policy: JsonDict | None = None
    memo: JsonDict | None = None
    #: ``indexedFields``; None: the search attributes the current run holds.
    search_attributes: dict[str, JsonDict] | None = None
    event_type = "WorkflowExecutionContinuedAsNew"

    def describe(self) -> str:
        """Description."""
        return f"ContinueAsNewWorkflowExecution({self.workflow_type})"


@dataclass
class StartChildWorkflowExecution(Command):
    """Start a child workflow (becomes StartChildWorkflowExecutionInitiated)."""

    seq: int
    workflow_id: str
    workflow_type: str
    task_queue: str
    input: list[JsonDict]
    execution_timeout: float | None = None
    run_timeout: float | None = None
    task_timeout: float | None = None
    id_reuse_policy: int = 1
    parent_close_policy: int = 1
    retry_policy: JsonDict | None = None
    cron_schedule: str = ""
    #: Temporal's ``memo`` (``{"fields": {key: payload}}``), or None.
    memo: JsonDict | None = None
    #: The child's search attributes (``indexedFields``), or None.
    search_attributes: dict[str, JsonDict] | None = None
    event_type = "StartChildWorkflowExecutionInitiated"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same child workflow id and type."""
        return (
            event_type == self.event_type
            and attrs.get("workflowId") == self.workflow_id
            and attrs.get("workflowType", {}).get("name") == self.workflow_type
        )

    def describe(self) -> str:
        """Description."""
        return f"StartChildWorkflowExecution({self.workflow_type}, workflow id {self.workflow_id})"


@dataclass
class RequestCancelExternalWorkflowExecution(Command):
    """Ask another workflow to cancel: a child of this run (``child_workflow_only``), or
    any run through ``workflow.get_external_workflow_handle(...).cancel()``."""

    seq: int
    workflow_id: str
    run_id: str | None
    child_workflow_only: bool = True
    reason: str = ""
    event_type = "RequestCancelExternalWorkflowExecutionInitiated"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same target workflow id."""
        target = attrs.get("workflowExecution", {})
        return event_type == self.event_type and target.get("workflowId") == self.workflow_id

    def describe(self) -> str:
        """Description."""
        return f"RequestCancelExternalWorkflowExecution(workflow id {self.workflow_id})"


@dataclass
class ModifyWorkflowProperties(Command):
    """``workflow.upsert_memo``: memo fields set (a ``null`` payload removes one)."""

    upserted_memo: dict[str, JsonDict]
    event_type = "WorkflowPropertiesModified"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same memo keys."""
        fields = (attrs.get("upsertedMemo") or {}).get("fields") or {}
        return event_type == self.event_type and set(fields) == set(self.upserted_memo)

    def describe(self) -> str:
        """Description."""
        return f"ModifyWorkflowProperties(memo keys {sorted(self.upserted_memo)})"


@dataclass
class SignalExternalWorkflowExecution(Command):
    """Signal another run (``workflow.get_external_workflow_handle(...).signal()``)."""

    seq: int
    workflow_id: str
    run_id: str | None
    signal_name: str
    input: list[JsonDict]
    event_type = "SignalExternalWorkflowExecutionInitiated"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same target workflow id and signal name."""
        target = attrs.get("workflowExecution", {})
        return (
            event_type == self.event_type
            and target.get("workflowId") == self.workflow_id
            and attrs.get("signalName") == self.signal_name
        )

    def describe(self) -> str:
        """Description."""
        return (
            f"SignalExternalWorkflowExecution({self.signal_name}, workflow id {self.workflow_id})"
        )


@dataclass
class AcceptUpdate(Command):
    """The validator passed: record the update (WorkflowExecutionUpdateAccepted)."""

    update_id: str
    name: str
    args: list[JsonDict]
    identity: str = ""
    event_type = "WorkflowExecutionUpdateAccepted"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same update id."""
        return event_type == self.event_type and attrs.get("protocolInstanceId") == self.update_id

    def describe(self) -> str:
        """Description."""
        return f"AcceptUpdate({self.name}, update id {self.update_id})"


@dataclass
class CompleteUpdate(Command):
    """The handler finished: record its result or failure (WorkflowExecutionUpdateCompleted)."""

    update_id: str
    result: list[JsonDict] | None = None
    failure: JsonDict | None = None
    #: The update's name (not recorded: for messages such as the payload-size refusal).
    name: str = ""
    event_type = "WorkflowExecutionUpdateCompleted"

    def matches(self, event_type: str, attrs: JsonDict) -> bool:
        """Same update id."""
        return (
            event_type == self.event_type
            and attrs.get("meta", {}).get("updateId") == self.update_id
        )

    def describe(self) -> str:
        """Description."""
        return f"CompleteUpdate(update id {self.update_id})"


CLOSING_COMMANDS = (
    CompleteWorkflowExecution,
    FailWorkflowExecution,
    CancelWorkflowExecution,
    ContinueAsNewWorkflowExecution,
)
