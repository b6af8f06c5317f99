"""Activation jobs: what happened since the last activation, one dataclass per kind.

The :class:`~engine._replay.driver.HistoryDriver` turns history events (and the updates
delivered with a live workflow task) into jobs; :meth:`WorkflowInstance.activate
<engine._replay.instance.WorkflowInstance.activate>` applies each with the ``_apply_<job>``
method its type names. The kinds and their fields are named after Temporal's workflow
activation jobs where this engine has a counterpart.

Queries are not jobs here: they read the state of an instance between activations
(:meth:`~engine._replay.handlers.MessageHandlers.query`) and produce no commands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._model.events import HistoryEvent

JsonDict = dict[str, Any]


@dataclass(frozen=True, slots=True)
class NotifyHasPatch:
    """History recorded the marker of ``patch_id``: ``workflow.patched`` answers true."""

    patch_id: str


@dataclass(frozen=True, slots=True)
class InitializeWorkflow:
    """The run started (``WorkflowExecutionStarted``): make the object, run its method."""

    event: HistoryEvent


@dataclass(frozen=True, slots=True)
class FireTimer:
    """The timer with ``seq`` fired."""

    seq: int


@dataclass(frozen=True, slots=True)
class ResolveActivity:
    """The activity with ``seq`` completed, failed, timed out or was cancelled."""

    seq: int
    event: HistoryEvent


@dataclass(frozen=True, slots=True)
class ResolveChildWorkflowExecutionStart:
    """The child with ``seq`` started, or could not be started."""

    seq: int
    event: HistoryEvent


@dataclass(frozen=True, slots=True)
class ResolveChildWorkflowExecution:
    """The child with ``seq`` closed (completed, failed, cancelled, terminated, timed out)."""

    seq: int
    event: HistoryEvent


@dataclass(frozen=True, slots=True)
class ResolveSignalExternalWorkflow:
    """The signal with ``seq`` to another run was delivered (``failed`` False) or not
    (``event`` is the ``SignalExternalWorkflowExecutionFailed``)."""

    seq: int
    event: HistoryEvent
    failed: bool


@dataclass(frozen=True, slots=True)
class ResolveRequestCancelExternalWorkflow:
    """The cancel request with ``seq`` reached another run (``failed`` False) or not."""

    seq: int
    event: HistoryEvent
    failed: bool


@dataclass(frozen=True, slots=True)
class LocalActivityRequest:
    """A local activity the worker is to run now, within the workflow task."""

    seq: int
    activity_id: str
    activity_type: str
    input: list[JsonDict]
    attempt: int
    #: When the first attempt was scheduled (epoch seconds), for schedule-to-close.
    original_schedule_time: float
    schedule_to_close: float | None
    start_to_close: float | None
    retry_policy: JsonDict
    #: Longest backoff waited for inside the task; a longer one becomes a timer.
    local_retry_threshold: float
    workflow_id: str
    run_id: str
    workflow_type: str
    namespace: str
    task_queue: str


@dataclass(frozen=True, slots=True)
class ResolveLocalActivity:
    """How a local activity's attempts ended: ``result`` payloads, or a ``failure``, or a
    ``backoff`` (seconds) before attempt ``attempt + 1`` that is longer than the local
    retry threshold. ``marker`` is the recorded event on replay."""

    seq: int
    attempt: int
    result: list[JsonDict] | None = None
    failure: JsonDict | None = None
    backoff: float | None = None
    complete_time: float = 0.0
    original_schedule_time: float = 0.0
    #: Which activation of its workflow task resolved it (1 for the first after the
    #: request), as Temporal's marker records it.
    activation_index: int = 1


@dataclass(frozen=True, slots=True)
class SignalWorkflow:
    """A signal arrived."""

    signal_name: str
    input: list[JsonDict] | None


@dataclass(frozen=True, slots=True)
class DoUpdate:
    """An update to run; ``replay``: one the recorded run accepted (no validator runs)."""

    update_id: str
    name: str
    input: list[JsonDict]
    identity: str = ""
    replay: bool = False


@dataclass(frozen=True, slots=True)
class CancelWorkflow:
    """Cancellation of the run was requested."""


#: Every job kind. ``WorkflowInstance`` has one ``_apply_<job>`` method for each; a kind
#: without one makes importing the instance module fail.
Job = (
    NotifyHasPatch
    | InitializeWorkflow
    | FireTimer
    | ResolveActivity
    | ResolveChildWorkflowExecutionStart
    | ResolveChildWorkflowExecution
    | ResolveLocalActivity
    | ResolveSignalExternalWorkflow
    | ResolveRequestCancelExternalWorkflow
    | SignalWorkflow
    | DoUpdate
    | CancelWorkflow
)
