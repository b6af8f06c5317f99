"""The exceptions the engine raises, as one tree whose names follow ``temporalio.exceptions``.

```
DurableError (alias TemporalError)
├── FailureError              errors that travel between worker, service and client as
│   │                         Temporal Failures (JSON), keeping that JSON on ``.failure``
│   │                         (a read-only :class:`Failure` view with protobuf's field names)
│   ├── ApplicationError      raised by user code; the only failure user code should raise
│   ├── CancelledError        a workflow, activity or child was cancelled
│   ├── TerminatedError       a run was terminated
│   ├── TimeoutError          an activity, child or run timed out
│   ├── ServerError           the service itself failed something
│   ├── ActivityError         wraps (as ``.cause``) why an activity failed
│   ├── ChildWorkflowError    wraps (as ``.cause``) why a child workflow failed
│   └── WorkflowAlreadyStartedError
├── WorkflowFailureError      ``handle.result()`` of a run that failed, was cancelled,
│                             terminated or timed out; ``.cause`` says why
├── WorkflowContinuedAsNewError
│                             ``handle.result(follow_runs=False)`` of a run that continued
│                             as new; ``.new_run_id`` names the next run
├── NondeterminismError       workflow code no longer produces what its history recorded
├── RPCError                  the service refused a request; ``.status`` is an
│   │                         :class:`RPCStatusCode` (``temporalio.service.RPCError``)
│   ├── WorkflowNotFoundError NOT_FOUND: no such run, or it is closed
│   ├── NamespaceNotFoundError
│   │                         NOT_FOUND: no such namespace (create it first)
│   ├── ScheduleNotFoundError NOT_FOUND: no such schedule
│   └── ActivityNotFoundError NOT_FOUND: no such activity attempt to complete or heartbeat
│                             by token or id (it ended, timed out, or its run closed)
├── RPCTimeoutOrCancelledError
│   │                         a call gave up waiting (its ``rpc_timeout``) or was cancelled
│   └── WorkflowUpdateRPCTimeoutOrCancelledError
│                             waiting for an update's stage gave up; the update goes on
├── ScheduleAlreadyRunningError
│                             ``create_schedule`` of an id the namespace has a schedule of
├── AsyncActivityCancelledError
│                             an async-completed activity's heartbeat learned that it was
│                             cancelled; ``.details`` says why
├── WorkflowQueryFailedError  a query found no handler, its handler raised, or no worker
│                             answered in time
├── WorkflowQueryRejectedError
│                             a query's ``reject_condition`` (a :class:`QueryRejectCondition`)
│                             held for the run; ``.status`` is the run's status
├── WorkflowUpdateFailedError an update's validator rejected it or its handler failed;
│                             ``.cause`` says why
├── StoreError                a database operation failed (translated at the store boundary)
│   ├── StoreConflictError    two changes raced for one unique fact; the loser rolled back
│   └── StoreUnavailableError the database stayed unreachable (or busy) for the whole retry
│                             time; also an ``RPCError`` with status ``UNAVAILABLE``
├── InvalidArgumentError (also a ValueError)
│   ├── PayloadSizeError      a payload or request over the size limit
│   ├── DatabaseURLError      a malformed or unsupported database URL
│   └── HistoryFormatError    a malformed history JSON (names the event and the JSON path)
└── SchemaVersionError        a database written by a newer (or unknown) schema version
```

The enums the errors use are here too: :class:`TimeoutType`, :class:`RetryState`,
:class:`ApplicationErrorCategory`, :class:`QueryRejectCondition` and :class:`RPCStatusCode`.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ._failure import (
    ApplicationErrorCategory,
    Failure,
    QueryRejectCondition,
    RetryState,
    RPCStatusCode,
    TimeoutType,
    _as_failure,
)

if TYPE_CHECKING:
    from .common import WorkflowExecutionStatus

__all__ = [
    "ActivityError",
    "ActivityNotFoundError",
    "ApplicationError",
    "ApplicationErrorCategory",
    "AsyncActivityCancelledError",
    "CancelledError",
    "ChildWorkflowError",
    "DatabaseURLError",
    "DurableError",
    "Failure",
    "FailureError",
    "HistoryFormatError",
    "InvalidArgumentError",
    "NamespaceNotFoundError",
    "NondeterminismError",
    "PayloadSizeError",
    "QueryRejectCondition",
    "RPCError",
    "RPCStatusCode",
    "RPCTimeoutOrCancelledError",
    "RetryState",
    "ScheduleAlreadyRunningError",
    "ScheduleNotFoundError",
    "SchemaVersionError",
    "ServerError",
    "StoreConflictError",
    "StoreError",
    "StoreUnavailableError",
    "TemporalError",
    "TerminatedError",
    "TimeoutError",
    "TimeoutType",
    "WorkflowAlreadyStartedError",
    "WorkflowContinuedAsNewError",
    "WorkflowFailureError",
    "WorkflowNotFoundError",
    "WorkflowQueryFailedError",
    "WorkflowQueryRejectedError",
    "WorkflowUpdateFailedError",
    "WorkflowUpdateRPCTimeoutOrCancelledError",
    "is_cancelled_exception",
]


class DurableError(Exception):
    """Base of every exception the engine raises."""

    @property
    def cause(self) -> BaseException | None:
        """The exception this one was raised from (the same as ``__cause__``)."""
        return self.__cause__


TemporalError = DurableError
"""Alias, so code written for ``temporalio.exceptions.TemporalError`` keeps working."""


class FailureError(DurableError):
    """Base of errors that travel as Temporal Failures (JSON) between worker, service and client.

    ``message`` is the failure's message; ``failure`` is the Failure this error was decoded
    from, if it was decoded (a read-only :class:`Failure` view of its JSON, with the field
    names of temporalio's protobuf ``Failure``), and is written back unchanged if the error
    is raised on. ``exc_args`` sets ``args`` (and so ``str()``), by default ``(message,)``.
    """

    def __init__(
        self,
        message: str,
        *,
        failure: Failure | Mapping[str, Any] | None = None,
        exc_args: tuple[Any, ...] | None = None,
    ) -> None:
        """Create a failure error with ``message`` (and the Failure it came from: a view, its
        JSON, or a protobuf ``Failure``)."""
        super().__init__(*((message,) if exc_args is None else exc_args))
        self._message = message
        self._failure = _as_failure(failure)

    @property
    def message(self) -> str:
        """The failure's message, without any type prefix."""
        return self._message

    @property
    def failure(self) -> Failure | None:
        """The Failure this error was decoded from, or ``None`` if it was raised locally."""
        return self._failure

    def _set_failure(self, failure: Failure | Mapping[str, Any] | None) -> None:
        # Used by the failure converter, which builds errors before attaching their JSON.
        self._failure = _as_failure(failure)


class ApplicationError(FailureError):
    """An error raised on purpose by workflow or activity code.

    ``str()`` gives ``"<type>: <message>"`` when a type is set, as temporalio does.
    ``type`` is what a retry policy's ``non_retryable_error_types`` matches against;
    ``non_retryable=True`` stops retries whatever the policy says; ``next_retry_delay``
    overrides the policy's backoff for the next attempt; ``category`` marks an expected
    failure (:attr:`ApplicationErrorCategory.BENIGN`).
    """

    def __init__(
        self,
        message: str,
        *details: Any,
        type: str | None = None,
        non_retryable: bool = False,
        next_retry_delay: timedelta | None = None,
        category: ApplicationErrorCategory = ApplicationErrorCategory.UNSPECIFIED,
    ) -> None:
        """Create an application error; ``details`` are any values the data converter can encode."""
        # The string form carries the type so that logs and f-strings show it.
        super().__init__(message, exc_args=(f"{type}: {message}" if type else message,))
        self._details = details
        self._type = type
        self._non_retryable = non_retryable
        self._next_retry_delay = next_retry_delay
        self._category = category

    @property
    def details(self) -> tuple[Any, ...]:
        """Values attached to the error by the code that raised it."""
        return self._details

    @property
    def type(self) -> str | None:
        """The error's type name, matched by ``RetryPolicy.non_retryable_error_types``."""
        return self._type

    @property
    def non_retryable(self) -> bool:
        """Whether the raiser marked the error as never to be retried."""
        return self._non_retryable

    @property
    def next_retry_delay(self) -> timedelta | None:
        """Delay before the next attempt chosen by the raiser, overriding the backoff."""
        return self._next_retry_delay

    @property
    def category(self) -> ApplicationErrorCategory:
        """The error's severity category (``UNSPECIFIED`` unless the raiser set one)."""
        return self._category


class CancelledError(FailureError):
    """A workflow, activity or child workflow was cancelled."""

    def __init__(self, message: str = "Cancelled", *details: Any) -> None:
        """Create a cancellation error with optional details."""
        super().__init__(message)
        self._details = details

    @property
    def details(self) -> tuple[Any, ...]:
        """Values attached to the cancellation."""
        return self._details


class TerminatedError(FailureError):
    """A workflow run was terminated."""

    def __init__(self, message: str, *details: Any) -> None:
        """Create a termination error (the message is the termination reason)."""
        super().__init__(message)
        self._details = details

    @property
    def details(self) -> tuple[Any, ...]:
        """Values attached to the termination."""
        return self._details


class TimeoutError(FailureError):
    """An activity, child workflow or run exceeded one of its timeouts."""

    def __init__(
        self,
        message: str,
        *,
        type: TimeoutType | None,
        last_heartbeat_details: Sequence[Any],
    ) -> None:
        """Create a timeout error of the given type."""
        super().__init__(message)
        self._type = type
        self._last_heartbeat_details = tuple(last_heartbeat_details)

    @property
    def type(self) -> TimeoutType | None:
        """Which timeout fired."""
        return self._type

    @property
    def last_heartbeat_details(self) -> tuple[Any, ...]:
        """Details of the activity's last heartbeat, if it sent any."""
        return self._last_heartbeat_details


class ServerError(FailureError):
    """The service itself failed a task or run."""

    def __init__(self, message: str, *, non_retryable: bool = False) -> None:
        """Create a server error."""
        super().__init__(message)
        self._non_retryable = non_retryable

    @property
    def non_retryable(self) -> bool:
        """Whether retrying cannot help."""
        return self._non_retryable


class ActivityError(FailureError):
    """An activity called from a workflow failed; ``cause`` holds why (its last failure)."""

    def __init__(
        self,
        message: str,
        *,
        scheduled_event_id: int,
        started_event_id: int,
        identity: str,
        activity_type: str,
        activity_id: str,
        retry_state: RetryState | None,
    ) -> None:
        """Create an activity error describing the failed activity."""
        super().__init__(message)
        self._scheduled_event_id = scheduled_event_id
        self._started_event_id = started_event_id
        self._identity = identity
        self._activity_type = activity_type
        self._activity_id = activity_id
        self._retry_state = retry_state

    @property
    def scheduled_event_id(self) -> int:
        """Event id of the activity's ``ActivityTaskScheduled`` event."""
        return self._scheduled_event_id

    @property
    def started_event_id(self) -> int:
        """Event id of its ``ActivityTaskStarted`` event (0 if it never started)."""
        return self._started_event_id

    @property
    def identity(self) -> str:
        """Identity of the worker that ran the last attempt."""
        return self._identity

    @property
    def activity_type(self) -> str:
        """The activity's type name."""
        return self._activity_type

    @property
    def activity_id(self) -> str:
        """The activity's id within its workflow run."""
        return self._activity_id

    @property
    def retry_state(self) -> RetryState | None:
        """Why retries stopped."""
        return self._retry_state


class ChildWorkflowError(FailureError):
    """A child workflow failed; ``cause`` holds why."""

    def __init__(
        self,
        message: str,
        *,
        namespace: str,
        workflow_id: str,
        run_id: str,
        workflow_type: str,
        initiated_event_id: int,
        started_event_id: int,
        retry_state: RetryState | None,
    ) -> None:
        """Create a child workflow error describing the failed child run."""
        super().__init__(message)
        self._namespace = namespace
        self._workflow_id = workflow_id
        self._run_id = run_id
        self._workflow_type = workflow_type
        self._initiated_event_id = initiated_event_id
        self._started_event_id = started_event_id
        self._retry_state = retry_state

    @property
    def namespace(self) -> str:
        """The child's namespace."""
        return self._namespace

    @property
    def workflow_id(self) -> str:
        """The child's workflow id."""
        return self._workflow_id

    @property
    def run_id(self) -> str:
        """The child's run id."""
        return self._run_id

    @property
    def workflow_type(self) -> str:
        """The child's workflow type name."""
        return self._workflow_type

    @property
    def initiated_event_id(self) -> int:
        """Event id of the parent's ``StartChildWorkflowExecutionInitiated`` event."""
        return self._initiated_event_id

    @property
    def started_event_id(self) -> int:
        """Event id of the parent's ``ChildWorkflowExecutionStarted`` event."""
        return self._started_event_id

    @property
    def retry_state(self) -> RetryState | None:
        """Why the child's retries stopped."""
        return self._retry_state


class WorkflowAlreadyStartedError(FailureError):
    """A workflow could not start because its id is taken by an open (or retained) run."""

    def __init__(
        self,
        workflow_id: str,
        workflow_type: str,
        *,
        run_id: str | None = None,
        first_run_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Create the error for ``workflow_id`` (and the run holding it, if known)."""
        if reason is None:
            holder = f" by open run {run_id}" if run_id else ""
            advice = (
                "Choose another id, or pass id_conflict_policy="
                "WorkflowIDConflictPolicy.USE_EXISTING (or TERMINATE_EXISTING)."
            )
        else:
            holder = f": {reason} (run {run_id})"
            advice = (
                "Choose another id, or pass id_reuse_policy="
                "WorkflowIDReusePolicy.ALLOW_DUPLICATE to start a new run under it."
            )
        super().__init__(
            f"Workflow id {workflow_id!r} (type {workflow_type}) is already in use{holder}. "
            + advice
        )
        self.workflow_id = workflow_id
        """The workflow id that is taken."""
        self.workflow_type = workflow_type
        """The type of the workflow that was being started."""
        self.run_id = run_id
        """The run that holds the id, when the service reported it."""
        self.first_run_id = first_run_id
        """The first run of the holding run's chain (continue-as-new, retries), if reported."""


def _describe_chain(cause: BaseException) -> str:
    text = str(cause)
    seen = {id(cause)}
    inner = cause.__cause__
    while inner is not None and id(inner) not in seen:
        seen.add(id(inner))
        text += f" (caused by {type(inner).__name__}: {inner})"
        inner = inner.__cause__
    return text


class WorkflowFailureError(DurableError):
    """Raised by ``handle.result()`` when the run failed, was cancelled, terminated or timed out.

    ``cause`` is the failure that closed the run (an ``ApplicationError``,
    ``ActivityError``, ``CancelledError``, ``TerminatedError``, ``TimeoutError``, ...).
    """

    def __init__(self, *, cause: FailureError) -> None:
        """Create the error for a run that closed with ``cause``."""
        super().__init__(f"Workflow execution failed: {_describe_chain(cause)}")
        self.__cause__ = cause

    @property
    def cause(self) -> FailureError:
        """The failure that closed the run."""
        assert isinstance(self.__cause__, FailureError)
        return self.__cause__


class WorkflowContinuedAsNewError(DurableError):
    """Raised by ``handle.result(follow_runs=False)`` when the run continued as new.

    ``new_run_id`` is the run it continued as; ``handle.result()`` (which follows runs)
    waits for the last run's result instead.
    """

    def __init__(self, new_run_id: str) -> None:
        """Create the error for a run that continued as run ``new_run_id``."""
        super().__init__(f"the run continued as new as run {new_run_id}")
        self.new_run_id = new_run_id
        """The run id of the run this one continued as."""

    @property
    def new_execution_run_id(self) -> str:
        """The run id of the run this one continued as (temporalio's name for ``new_run_id``)."""
        return self.new_run_id


class NondeterminismError(DurableError):
    """Workflow code, replayed against its history, produced different commands.

    This fails the workflow *task*, not the run: the run stays open until the code is
    fixed (or the change is guarded with ``workflow.patched``).
    """

    def __init__(
        self,
        message: str,
        *,
        event_id: int | None = None,
        recorded: str | None = None,
        produced: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Create the error; the keyword fields say where the history and code disagree."""
        where = []
        if workflow_id is not None:
            where.append(f"workflow {workflow_id!r}")
        if run_id is not None:
            where.append(f"run {run_id}")
        if event_id is not None:
            where.append(f"event {event_id}")
        text = message
        if where:
            text += f" [{', '.join(where)}]"
        # Messages written by the replayer already say both; others get them appended.
        if recorded is not None and recorded not in message:
            text += f"; history recorded: {recorded}"
        if produced is not None and produced not in message:
            text += f"; code produced: {produced}"
        super().__init__(text)
        self.message = message
        """The message without the location details."""
        self.event_id = event_id
        """The history event where replay diverged."""
        self.recorded = recorded
        """What the history recorded there."""
        self.produced = produced
        """What the workflow code produced instead."""
        self.workflow_id = workflow_id
        """The workflow id of the run being replayed."""
        self.run_id = run_id
        """The run id of the run being replayed."""


class RPCError(DurableError):
    """The service refused a request (``temporalio.service.RPCError``): ``status`` says
    how, ``message`` why. Code written for Temporal that catches ``RPCError`` and looks at
    ``status`` (``NOT_FOUND`` above all) works unchanged."""

    def __init__(self, message: str, status: RPCStatusCode, raw_grpc_status: bytes = b"") -> None:
        """Create the error."""
        super().__init__(message)
        self._message = message
        self._status = RPCStatusCode(status)
        self._raw_grpc_status = raw_grpc_status

    @property
    def message(self) -> str:
        """Why the request was refused."""
        return self._message

    @property
    def status(self) -> RPCStatusCode:
        """How the request was refused."""
        return self._status

    @property
    def raw_grpc_status(self) -> bytes:
        """Empty: there is no gRPC status here (kept for code that reads it)."""
        return self._raw_grpc_status


class RPCTimeoutOrCancelledError(DurableError):
    """A call stopped waiting: its ``rpc_timeout`` passed or it was cancelled. What it
    waited for may still happen."""


class WorkflowUpdateRPCTimeoutOrCancelledError(RPCTimeoutOrCancelledError):
    """Waiting for an update's stage or result stopped (timeout or cancellation). The
    update itself is not cancelled: ``handle.get_update_handle(id).result()`` waits again."""

    def __init__(self, message: str = "Timeout or cancellation waiting for update") -> None:
        """Create the error."""
        super().__init__(message)


class WorkflowNotFoundError(RPCError):
    """No workflow run with the given id (and run id) exists, or it is closed and cannot
    take the request (``status`` ``NOT_FOUND``, as Temporal's ``RPCError``)."""

    def __init__(
        self,
        workflow_id: str,
        run_id: str | None = None,
        *,
        open_only: bool = False,
        status: str | None = None,
    ) -> None:
        """Create the error for the missing ``workflow_id`` / ``run_id``."""
        what = (
            f"run {run_id} of workflow {workflow_id!r}" if run_id else f"workflow {workflow_id!r}"
        )
        if status is not None:
            message = f"{what} is not running (it is {status}): it cannot take this request"
        elif open_only:
            message = (
                f"no open run of {what}: it has closed or never started; check the id, and "
                "that the client uses the same database and namespace"
            )
        else:
            message = (
                f"{what} not found: check the id, and that the client uses the same database "
                "and namespace (closed runs are removed once their retention period has passed)"
            )
        super().__init__(message, RPCStatusCode.NOT_FOUND)
        self.workflow_id = workflow_id
        """The workflow id looked up."""
        self.run_id = run_id
        """The run id looked up, if any."""


class NamespaceNotFoundError(RPCError):
    """No namespace of that name (``status`` ``NOT_FOUND``; Temporal's message)."""

    def __init__(self, namespace: str) -> None:
        """Create the error for the missing ``namespace``."""
        super().__init__(
            f"Namespace {namespace} is not found. Create it first: durable operator namespace "
            f"create {shlex.quote(namespace)} (or client.workflow_service.register_namespace)",
            RPCStatusCode.NOT_FOUND,
        )
        self.namespace = namespace
        """The namespace looked up."""


class ScheduleNotFoundError(RPCError):
    """No schedule of that id in the namespace (``status`` ``NOT_FOUND``)."""

    def __init__(self, schedule_id: str, namespace: str = "default") -> None:
        """Create the error for the missing schedule."""
        super().__init__(  # Temporal's words first (its schedules are workflows)
            f"workflow not found for ID: temporal-sys-scheduler:{schedule_id} (no schedule "
            f"{schedule_id!r} in namespace {namespace!r}: durable schedule list shows them)",
            RPCStatusCode.NOT_FOUND,
        )
        self.schedule_id = schedule_id
        """The id looked up."""


class ScheduleAlreadyRunningError(DurableError):
    """A schedule with this id exists in the namespace (``temporalio.client``'s)."""

    def __init__(self, schedule_id: str = "") -> None:
        """Create the error (Temporal's message)."""
        super().__init__("Schedule already running")
        self.schedule_id = schedule_id
        """The id asked for."""


class ActivityNotFoundError(RPCError):
    """No current attempt matches: the activity completed, failed, timed out or was
    cancelled, its run closed, or the ids name nothing (``status`` ``NOT_FOUND``, the
    ``RPCError`` ``temporalio`` raises here)."""

    def __init__(self, message: str) -> None:
        """Create the error with ``message``."""
        super().__init__(message, RPCStatusCode.NOT_FOUND)


class AsyncActivityCancelledError(DurableError):
    """A heartbeat through an async activity handle learned that the activity was asked to
    cancel (``temporalio.client.AsyncActivityCancelledError``)."""

    def __init__(self, details: Any = None) -> None:
        """Create the error; ``details`` is the ``activity.ActivityCancellationDetails``."""
        super().__init__("Activity cancelled")
        self.details = details


class WorkflowQueryFailedError(DurableError):
    """A query could not be answered: no such handler, the handler raised, or no worker
    answered in time. The message says which."""

    def __init__(self, message: str) -> None:
        """Create the error with ``message``."""
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        """Why the query failed."""
        return self._message


class WorkflowQueryRejectedError(DurableError):
    """A query was rejected: the run's state met the query's ``reject_condition`` (a
    :class:`QueryRejectCondition`); ``status`` is the run's status then."""

    def __init__(self, status: WorkflowExecutionStatus | None) -> None:
        """Create the error for a run whose status is ``status``."""
        super().__init__(f"Query rejected, status: {status}")
        self._status = status

    @property
    def status(self) -> WorkflowExecutionStatus | None:
        """The status of the run that rejected the query."""
        return self._status


class WorkflowUpdateFailedError(DurableError):
    """An update was rejected (by its validator, or for want of a handler) or its handler
    failed; ``cause`` is the failure the workflow reported."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        """Create the error; ``cause`` is the failure the workflow reported."""
        super().__init__(message)
        self.__cause__ = cause

    @property
    def cause(self) -> BaseException | None:
        """Why the update failed (an :class:`ApplicationError`, usually)."""
        return self.__cause__


class StoreError(DurableError):
    """A database operation failed (connection lost, database locked, ...).

    Raised by the store from the database driver's error, which stays on ``__cause__``.
    """


class StoreConflictError(StoreError):
    """Two changes raced for the same unique fact (e.g. two starts of one workflow id);
    the losing transaction was rolled back and may be run again."""


class StoreUnavailableError(StoreError, RPCError):
    """The database could not be reached (or stayed locked) for as long as the store waits
    for it (``RetryConfig.max_elapsed_time_millis``, a minute by default): the operation
    gave up. Also an :class:`RPCError` with status ``UNAVAILABLE``, which is what
    ``temporalio`` raises when its server cannot be reached."""

    def __init__(
        self, database: str, waited: float, retries: int, last_error: str, *, busy: bool = False
    ) -> None:
        """Create the error for ``database``, tried ``retries`` more times over ``waited`` s."""
        state = "stayed locked by other work" if busy else "could not be reached"
        message = (
            f"the database {database} {state} for {waited:.1f} s ({retries} retries; the "
            f"last error: {last_error}). Check that the database server is running and "
            "reachable; Client.connect(retry_config=RetryConfig(max_elapsed_time_millis=...)) "
            "sets how long operations wait for it"
        )
        RPCError.__init__(self, message, RPCStatusCode.UNAVAILABLE)
        self.database = database
        """The database (password hidden)."""
        self.waited = waited
        """How long the operation waited, in seconds (since it was asked for)."""
        self.retries = retries
        """How many times it was tried again."""


class InvalidArgumentError(DurableError, ValueError):
    """An argument or field has a value that is not allowed; the message names it."""


class HistoryFormatError(InvalidArgumentError):
    """A history's JSON is malformed; the message names the event, its id and the JSON path
    (``WorkflowHistory.from_json``)."""


class PayloadSizeError(InvalidArgumentError):
    """A payload, or a whole request, is larger than the engine accepts."""


class DatabaseURLError(InvalidArgumentError):
    """A database URL is malformed or names an unsupported database."""


class SchemaVersionError(DurableError):
    """The database was created by a newer (or an unknown) version of the schema."""


def is_cancelled_exception(exception: BaseException) -> bool:
    """Whether ``exception`` means "cancelled".

    True for ``asyncio.CancelledError``, for our :class:`CancelledError`, and for an
    :class:`ActivityError` or :class:`ChildWorkflowError` whose cause is a
    :class:`CancelledError`.
    """
    if isinstance(exception, asyncio.CancelledError | CancelledError):
        return True
    return isinstance(exception, ActivityError | ChildWorkflowError) and isinstance(
        exception.__cause__, CancelledError
    )
