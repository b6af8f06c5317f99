"""Feeding history to a workflow instance: jobs per workflow task, and command matching.

The :class:`HistoryDriver` walks events in order. Events that the workflow reacts to become
jobs; each ``WorkflowTaskStarted`` that was completed in history is an activation replayed
with ``is_replaying`` true, and the commands it produces are compared, in order, with the
command events recorded after its ``WorkflowTaskCompleted``. A mismatch is a
:class:`~engine.exceptions.NondeterminismError` naming the event, what was recorded, and
what the code produced. The last ``WorkflowTaskStarted`` (the task being worked on now) is
activated for real and its commands are returned.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from .._model import commands as cmd
from .._model.events import HistoryEvent
from ..converter import DataConverter
from ..exceptions import NondeterminismError
from . import jobs as j
from .instance import WorkflowInstance
from .jobs import Job
from .local_activities import resolution_of
from .versioning import PATCH_MARKER

_ACTIVITY_RESOLUTIONS = {
    "ActivityTaskCompleted",
    "ActivityTaskFailed",
    "ActivityTaskTimedOut",
    "ActivityTaskCanceled",
}


#: Events that end the command events of a completed workflow task.
_TASK_BOUNDARY = frozenset({"WorkflowTaskScheduled", "WorkflowTaskStarted"})
#: How a signal or cancel request to another run ended (each names its initiated event).
_EXTERNAL_RESOLUTIONS = frozenset(
    {
        "ExternalWorkflowExecutionSignaled",
        "SignalExternalWorkflowExecutionFailed",
        "ExternalWorkflowExecutionCancelRequested",
        "RequestCancelExternalWorkflowExecutionFailed",
    }
)


_CHILD_START_EVENTS = frozenset(
    {"ChildWorkflowExecutionStarted", "StartChildWorkflowExecutionFailed"}
)
_CHILD_EVENTS = _CHILD_START_EVENTS | frozenset(
    {
        "ChildWorkflowExecutionCompleted",
        "ChildWorkflowExecutionFailed",
        "ChildWorkflowExecutionCanceled",
        "ChildWorkflowExecutionTerminated",
        "ChildWorkflowExecutionTimedOut",
    }
)


class CacheMismatchError(Exception):
    """A cached instance received events that do not continue its history: replay afresh."""


class HistoryDriver:
    """Drives one :class:`WorkflowInstance` through a history, possibly in increments."""

    def __init__(self, instance: WorkflowInstance) -> None:
        self.instance = instance
        self.next_event_id = 1
        self._jobs: list[Job] = []
        self._unmatched: list[cmd.Command] = []
        self._awaiting_completion = False
        #: The ``WorkflowTaskStarted`` of the live task being worked on (its activations
        #: for local activities' outcomes have its time).
        self._live_started: HistoryEvent | None = None
        self._live_activations = 0
        self._matching = False
        self._last_completed: HistoryEvent | None = None
        #: Called when a command is matched with its recorded event; for the stepper.
        self.on_recorded: Any = None
        #: Called before each activation with (started event, replaying); for the stepper.
        self.on_activation: Any = None

    def apply(
        self,
        events: Sequence[HistoryEvent],
        future: Sequence[HistoryEvent] = (),
        updates: Sequence[dict[str, Any]] = (),
    ) -> list[cmd.Command]:
        """Apply events that continue the history; return commands of a final open task.

        If the last event is a ``WorkflowTaskStarted`` with nothing after it (the task being
        worked on now), the workflow is activated for real and its commands are returned.
        Otherwise an empty list is returned (pure replay). ``future`` holds events after
        these that are already known (when stepping through a recorded history): they are
        looked at, not applied.
        """
        if events and events[0].event_id != self.next_event_id:
            raise CacheMismatchError(
                f"expected event {self.next_event_id}, got {events[0].event_id}"
            )
        produced: list[cmd.Command] = []
        n = len(events)
        for i, event in enumerate(events):
            self.next_event_id = event.event_id + 1
            kind = event.event_type
            if self._awaiting_completion:
                self._awaiting_completion = False
                if kind != "WorkflowTaskCompleted":
                    raise CacheMismatchError(
                        f"event {event.event_id} is {kind}, not the completion of the task "
                        "this instance worked on"
                    )
            if self._matching:
                if kind in cmd.COMMAND_EVENT_TYPES:
                    self._match_one(event)
                    continue
                if kind in _TASK_BOUNDARY:
                    self._end_matching(event)
                # Other events may sit between a task's command events (an activity
                # cancelled before it started is recorded as cancelled right away): they
                # are jobs for the next activation, and matching goes on.
            if kind == "WorkflowTaskStarted":
                following = events[i + 1] if i + 1 < n else (future[0] if future else None)
                if following is None:
                    for update in updates:  # requests delivered with this (live) task
                        self._jobs.append(
                            j.DoUpdate(
                                str(update["update_id"]),
                                str(update["name"]),
                                update.get("args") or [],
                                str(update.get("identity", "")),
                            )
                        )
                    produced = self._activate(event, replaying=False)
                    self._unmatched = list(produced)
                    self._awaiting_completion = True
                    self._live_started = event
                    self._live_activations = 0
                elif following.event_type == "WorkflowTaskCompleted":
                    upcoming = list(events[i + 2 :]) + list(future)
                    self._unmatched = self._activate(event, replaying=True, upcoming=upcoming)
                # A failed or timed-out task leaves its jobs for the next one.
            elif kind == "WorkflowTaskCompleted":
                self._matching = True
                self._last_completed = event
                metadata = event.attributes.get("sdkMetadata") or {}
                self.instance.note_recorded_flags(metadata.get("coreUsedFlags") or ())
            else:
                self._collect_job(event)
        return produced

    def resolve_local_activities(
        self, outcomes: Sequence[j.ResolveLocalActivity]
    ) -> list[cmd.Command]:
        """The worker ran the local activities the live task asked for: apply their
        outcomes in one more activation of the same task; the task's commands, all of them
        (they replace what the earlier activations returned)."""
        started = self._live_started
        assert started is not None, "no live workflow task to resolve local activities in"
        attrs = started.attributes
        self._live_activations += 1
        index = self._live_activations
        produced = self.instance.activate(
            [dataclasses.replace(o, activation_index=index) for o in outcomes],
            now=started.event_time,
            replaying=False,
            history_length=started.event_id,
            history_size=int(attrs.get("historySizeBytes", 0) or 0),
            suggest_continue_as_new=bool(attrs.get("suggestContinueAsNew", False)),
            same_task=True,
        )
        self._unmatched = list(produced)
        return produced

    def apply_pending(self, now: float) -> None:
        """Run events not yet seen by any workflow task (signals, activity results) in a
        throwaway activation, so a query sees every recorded event. Commands are dropped."""
        if self._jobs:
            jobs, self._jobs = self._jobs, []
            self.instance.activate(
                jobs, now=now, replaying=True, history_length=self.next_event_id - 1
            )

    def unmatched_commands(self) -> list[cmd.Command]:
        """Commands of the latest activation that no recorded event has matched (yet)."""
        return list(self._unmatched)

    def finish(self) -> None:
        """The recorded history ends here: commands the code produced must all be matched."""
        if self._matching:
            self._end_matching(None)

    # -- activation -----------------------------------------------------------------------

    def _activate(
        self,
        started: HistoryEvent,
        *,
        replaying: bool,
        upcoming: Sequence[HistoryEvent] = (),
    ) -> list[cmd.Command]:
        patches: list[Job] = []  # first, as Temporal orders them: before any code runs
        markers: list[j.ResolveLocalActivity] = []  # local activities' recorded outcomes
        jobs, self._jobs = self._jobs, []
        for event in upcoming:
            if event.event_type in _TASK_BOUNDARY:
                break
            patch_id = _patch_id(event, self.instance.converter)
            if patch_id is not None:
                patches.append(j.NotifyHasPatch(patch_id))
            local = resolution_of(event)
            if local is not None:
                markers.append(local)
            if event.event_type == "WorkflowExecutionUpdateAccepted":
                # Replay: the task ran this update's handler (its validator passed then).
                accepted = event.attributes
                request = accepted.get("acceptedRequest", {})
                given = request.get("input", {})
                jobs.append(
                    j.DoUpdate(
                        update_id=str(accepted.get("protocolInstanceId", "")),
                        name=str(given.get("name", "")),
                        input=(given.get("args") or {}).get("payloads") or [],
                        identity=str(request.get("meta", {}).get("identity", "")),
                        replay=True,
                    )
                )
        if patches:
            jobs = patches + jobs
        if markers:
            self.instance.note_local_markers(markers)
        attrs = started.attributes
        if self.on_activation is not None:
            self.on_activation(started, replaying)
        return self.instance.activate(
            jobs,
            now=started.event_time,
            replaying=replaying,
            history_length=started.event_id,
            history_size=int(attrs.get("historySizeBytes", 0) or 0),
            suggest_continue_as_new=bool(attrs.get("suggestContinueAsNew", False)),
        )

    def _collect_job(self, event: HistoryEvent) -> None:
        kind = event.event_type
        attrs = event.attributes
        job: Job
        if kind == "WorkflowExecutionStarted":
            job = j.InitializeWorkflow(event)
        elif kind in _ACTIVITY_RESOLUTIONS:
            seq = self.instance.activity_seq(int(attrs.get("scheduledEventId", 0)))
            if seq is None:
                return
            job = j.ResolveActivity(seq, event)
        elif kind in _CHILD_EVENTS:
            seq = self.instance.child_seq(int(attrs.get("initiatedEventId", 0)))
            if seq is None:
                return
            if kind in _CHILD_START_EVENTS:
                job = j.ResolveChildWorkflowExecutionStart(seq, event)
            else:
                job = j.ResolveChildWorkflowExecution(seq, event)
        elif kind == "TimerFired":
            seq = self.instance.timer_seq(str(attrs.get("timerId", "")))
            if seq is None:
                return
            job = j.FireTimer(seq)
        elif kind in _EXTERNAL_RESOLUTIONS:
            seq = self.instance.external_seq(int(attrs.get("initiatedEventId", 0)))
            if seq is None:
                return
            failed = kind.endswith("Failed")
            if kind.startswith("Signal") or kind == "ExternalWorkflowExecutionSignaled":
                job = j.ResolveSignalExternalWorkflow(seq, event, failed)
            else:
                job = j.ResolveRequestCancelExternalWorkflow(seq, event, failed)
        elif kind == "WorkflowExecutionSignaled":
            job = j.SignalWorkflow(
                attrs.get("signalName", ""), (attrs.get("input") or {}).get("payloads")
            )
        elif kind == "WorkflowExecutionCancelRequested":
            job = j.CancelWorkflow()
        else:
            return  # other events (task bookkeeping, starts of activities) need no job
        self._jobs.append(job)

    # -- matching -------------------------------------------------------------------------

    def _match_one(self, event: HistoryEvent) -> None:
        """Match one recorded command event with the next command the code produced.

        Two kinds are the SDK's bookkeeping, not the code's steps, and are matched
        leniently: patch markers (a marker the code no longer asks about is fine) and the
        upsert of ``TemporalChangeVersion`` that follows each marker (histories written
        before this engine made it, or without it, replay; one that has it matches it)."""
        while self._unmatched and _is_change_version(self._unmatched[0]):
            if cmd.is_change_version_event(event.event_type, event.attributes):
                self._recorded(self._unmatched.pop(0), event)
                return
            self._unmatched.pop(0)  # the history has no upsert here
        if not self._unmatched:
            if _patch_id(event, self.instance.converter) is not None:
                return  # a patch marker the code no longer asks about is fine
            if cmd.is_change_version_event(event.event_type, event.attributes):
                return
            raise self._mismatch(event, None)
        command = self._unmatched[0]
        if not command.matches(event.event_type, event.attributes):
            if _patch_id(event, self.instance.converter) is not None and not isinstance(
                command, cmd.RecordMarker
            ):
                return
            if cmd.is_change_version_event(event.event_type, event.attributes):
                return
            raise self._mismatch(event, command)
        self._unmatched.pop(0)
        self._recorded(command, event)

    def _end_matching(self, after: HistoryEvent | None) -> None:
        """The task's command events are over: the code must not have produced more."""
        self._matching = False
        leftovers = [
            c
            for c in self._unmatched
            if not (isinstance(c, cmd.RecordMarker) and c.marker_name == PATCH_MARKER)
            and not _is_change_version(c)
        ]
        self._unmatched = []
        if not leftovers:
            return
        extra = leftovers[0]
        last = self._last_completed
        where = f"after event {last.event_id}" if last is not None else ""
        raise NondeterminismError(
            f"workflow code produced {extra.describe()} but the workflow task completed at "
            f"event {last.event_id if last else '?'} recorded no such command. The code now "
            "does something the recorded run did not: was the workflow changed while this "
            "run was open? Use workflow.patched() for changes that add, remove or move "
            "commands.",
            event_id=after.event_id if after is not None else self.next_event_id - 1,
            recorded="nothing " + where if where else "nothing",
            produced=extra.describe(),
            workflow_id=self.instance.workflow_id,
            run_id=self.instance.run_id,
        )

    def _recorded(self, command: cmd.Command, event: HistoryEvent) -> None:
        if isinstance(command, cmd.ScheduleActivityTask):
            self.instance.activity_scheduled(command.seq, event.event_id)
        elif isinstance(command, cmd.StartChildWorkflowExecution):
            self.instance.child_initiated(command.seq, event.event_id)
        elif isinstance(
            command,
            cmd.SignalExternalWorkflowExecution | cmd.RequestCancelExternalWorkflowExecution,
        ):
            self.instance.external_initiated(command.seq, event.event_id)
        if self.on_recorded is not None:
            self.on_recorded(command, event)

    def _mismatch(self, event: HistoryEvent, command: cmd.Command | None) -> NondeterminismError:
        recorded = describe_event(event)
        if command is None:
            produced = "nothing"
            advice = (
                "The code no longer produces this command at this point: was a step removed "
                "or moved while this run was open?"
            )
        else:
            produced = command.describe()
            advice = (
                "The code's steps differ from the ones recorded: was the workflow changed "
                "while this run was open? Restore the old order, or guard the change with "
                "workflow.patched()."
            )
        return NondeterminismError(
            f"history event {event.event_id} recorded {recorded}, but the workflow code "
            f"produced {produced}. {advice}",
            event_id=event.event_id,
            recorded=recorded,
            produced=produced,
            workflow_id=self.instance.workflow_id,
            run_id=self.instance.run_id,
        )


def describe_event(event: HistoryEvent) -> str:
    """A short description of a command event, in the words of the commands."""
    a = event.attributes
    kind = event.event_type
    if kind == "ActivityTaskScheduled":
        return (
            f"ScheduleActivityTask({a.get('activityType', {}).get('name')}, "
            f"activity id {a.get('activityId')})"
        )
    if kind == "TimerStarted":
        return f"StartTimer(timer id {a.get('timerId')}, {a.get('startToFireTimeout')})"
    if kind == "TimerCanceled":
        return f"CancelTimer(timer id {a.get('timerId')})"
    if kind == "MarkerRecorded":
        return f"RecordMarker({a.get('markerName')})"
    if kind == "ActivityTaskCancelRequested":
        return f"RequestCancelActivityTask(scheduled event {a.get('scheduledEventId')})"
    names = {
        "WorkflowExecutionCompleted": "CompleteWorkflowExecution",
        "WorkflowExecutionFailed": "FailWorkflowExecution",
        "WorkflowExecutionCanceled": "CancelWorkflowExecution",
        "WorkflowExecutionContinuedAsNew": "ContinueAsNewWorkflowExecution",
    }
    return names.get(kind, kind)


def _is_change_version(command: cmd.Command) -> bool:
    return isinstance(command, cmd.UpsertWorkflowSearchAttributes) and command.is_change_version


def _patch_id(event: HistoryEvent, converter: DataConverter | None = None) -> str | None:
    """The patch id a ``core_patch`` marker records, or None for any other event.

    Temporal's SDKs (and this engine) write the marker's payload as plain JSON; earlier
    versions of this engine sent it through the payload codec, so a payload in another
    encoding is decoded with ``converter`` (the run's data converter) when one is given."""
    if event.event_type != "MarkerRecorded":
        return None
    attrs = event.attributes
    if attrs.get("markerName") != PATCH_MARKER:
        return None
    details = attrs.get("details") or {}
    payloads = (details.get("patch_data") or details.get("patch-data") or {}).get("payloads")
    if not payloads:
        return None
    data: Any = None
    try:
        encoding = base64.b64decode((payloads[0].get("metadata") or {}).get("encoding", ""))
        if encoding == b"json/plain":
            data = json.loads(base64.b64decode(payloads[0].get("data", "")))
        elif converter is not None:
            data = converter.from_payloads_json(payloads[:1])[0]
    except Exception:  # a damaged marker names no patch
        return None
    value = data.get("id") if isinstance(data, dict) else None
    return str(value) if value is not None else None
