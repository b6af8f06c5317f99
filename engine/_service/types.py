"""Requests and replies exchanged between clients/workers and the service (plain data)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._model.events import HistoryEvent
from ..common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from ..exceptions import InvalidArgumentError

JsonDict = dict[str, Any]


@dataclass
class StartWorkflowRequest:
    """Everything needed to start a run."""

    namespace: str
    workflow_id: str
    workflow_type: str
    task_queue: str
    input: list[JsonDict]
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE
    id_conflict_policy: WorkflowIDConflictPolicy = WorkflowIDConflictPolicy.FAIL
    execution_timeout: float | None = None
    run_timeout: float | None = None
    task_timeout: float = 10.0
    retry_policy: JsonDict | None = None
    memo: JsonDict | None = None
    identity: str = ""
    request_id: str = ""
    start_delay: float = 0.0
    # Set for continue-as-new and retries: the run this one continues.
    continued_from: str | None = None
    first_run_id: str | None = None
    attempt: int = 1
    initiator: str | None = None
    last_failure: JsonDict | None = None
    # Set for child workflows: the parent run and where it recorded the child.
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    #: The run at the top of the parent chain (``workflow.info().root``), for a child.
    root_workflow_id: str | None = None
    root_run_id: str | None = None
    parent_initiated_event_id: int | None = None
    parent_close_policy: int | None = None
    #: Signal-with-start: the signal's name and payloads. A running run of the workflow id
    #: just gets the signal; a new one records it right after its start event.
    start_signal: str | None = None
    start_signal_input: list[JsonDict] | None = None
    #: A cron schedule: the run waits for its next time, and each close starts the next.
    cron_schedule: str | None = None
    #: A cron run after one that completed: that run's result.
    last_completion_result: list[JsonDict] | None = None
    #: A cron schedule's next run: when the run before it was scheduled to start (its
    #: next time counts from there, as on Temporal, not from when that run closed).
    cron_previous_time: float | None = None
    #: ``static_summary`` / ``static_details`` as Temporal's ``UserMetadata``
    #: (``{"summary": payload, "details": payload}``), recorded on the start event.
    user_metadata: JsonDict | None = None
    #: Search attributes set at start: Temporal's ``indexedFields`` (name -> payload).
    search_attributes: dict[str, JsonDict] | None = None
    #: Set for a run a schedule starts (and its successors): the schedule's key. The run
    #: may carry the scheduler's search attributes, and its close wakes the schedule.
    schedule_key: str | None = None


@dataclass
class StartWorkflowResult:
    """The run a start request resolved to."""

    run_id: str
    started: bool
    #: The run's first workflow task, already started for the worker that offered to take
    #: it (an eager start), or None when it waits in the queue.
    task: WorkflowTask | None = None


@dataclass
class WorkflowTask:
    """A claimed workflow task: the run, and the history the worker must apply."""

    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int
    scheduled_event_id: int
    started_event_id: int
    request_id: str
    #: History from ``events[0].event_id`` (1 for a full history) to the started event.
    events: list[HistoryEvent]
    started_time: float
    #: Update requests to deliver in this task: {update_id, name, args, identity}.
    updates: list[JsonDict] = field(default_factory=list)
    #: The transaction that started this task, if it was not committed when the task was
    #: handed out: held open for its completion (PostgreSQL,
    #: ``engine._store.held.HeldTransaction``) or committing (``Committing``); else None.
    held: Any = field(default=None, repr=False, compare=False)
    #: ``time.monotonic()`` before which the worker does not run the task's workflow code:
    #: the timer loop hands out the tasks a firing pass started a little before the
    #: timers are due (see ``engine._service.host``). None: at once.
    not_before: float | None = field(default=None, repr=False, compare=False)


@dataclass
class ActivityTask:
    """A claimed activity attempt."""

    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str
    activity_id: str
    activity_type: str
    task_queue: str
    scheduled_event_id: int
    attempt: int
    input: list[JsonDict]
    scheduled_time: float
    current_attempt_scheduled_time: float
    started_time: float
    schedule_to_close: float | None
    start_to_close: float | None
    heartbeat_timeout: float | None
    heartbeat_details: list[JsonDict] = field(default_factory=list)
    request_id: str = ""
    #: The activity's retry policy as Temporal JSON text (parsed only for activity.info()).
    retry_policy: str | None = None

    @property
    def token(self) -> tuple[str, int, int]:
        """Identifies this attempt in completions and heartbeats."""
        return (self.run_id, self.scheduled_event_id, self.attempt)

    @property
    def task_token(self) -> bytes:
        """This attempt's task token (``activity.info().task_token``), for async completion."""
        return ActivityRef(
            namespace=self.namespace,
            workflow_id=self.workflow_id,
            run_id=self.run_id,
            activity_id=self.activity_id,
            scheduled_event_id=self.scheduled_event_id,
            attempt=self.attempt,
        ).to_token()


#: Every task token starts with this (the rest is JSON): a token from elsewhere is named so.
TASK_TOKEN_PREFIX = b"durable-activity-v1:"


@dataclass(frozen=True)
class ActivityRef:
    """An activity named from outside its worker: by task token (one attempt) or by
    workflow id, optional run id and activity id (its current attempt)."""

    namespace: str
    workflow_id: str
    run_id: str | None
    activity_id: str | None
    #: Set from a task token only: the attempt it was issued to.
    scheduled_event_id: int | None = None
    attempt: int | None = None

    def to_token(self) -> bytes:
        body = {
            "namespace": self.namespace,
            "workflow_id": self.workflow_id,
            "run_id": self.run_id,
            "activity_id": self.activity_id,
            "scheduled_event_id": self.scheduled_event_id,
            "attempt": self.attempt,
        }
        return TASK_TOKEN_PREFIX + json.dumps(body, separators=(",", ":")).encode()

    @classmethod
    def from_token(cls, token: object) -> ActivityRef:
        """Read a task token; :class:`InvalidArgumentError` says what is wrong with one
        this engine did not issue."""
        if not isinstance(token, bytes | bytearray):
            raise InvalidArgumentError(
                f"task_token must be bytes (activity.info().task_token), got {type(token).__name__}"
            )
        token = bytes(token)
        if not token.startswith(TASK_TOKEN_PREFIX):
            raise InvalidArgumentError(
                "task_token was not issued by this engine: pass activity.info().task_token "
                f"of the attempt to complete (got {token[:32]!r}"
                f"{'...' if len(token) > 32 else ''})"
            )
        try:
            body = json.loads(token[len(TASK_TOKEN_PREFIX) :])
            ref = cls(
                namespace=_text(body, "namespace"),
                workflow_id=_text(body, "workflow_id"),
                run_id=_text(body, "run_id"),
                activity_id=_text(body, "activity_id"),
                scheduled_event_id=_count(body, "scheduled_event_id"),
                attempt=_count(body, "attempt"),
            )
        except (ValueError, TypeError, KeyError) as err:
            raise InvalidArgumentError(f"task_token is damaged: {err}") from None
        return ref


def _text(body: dict[str, Any], key: str) -> str:
    value = body[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} is {value!r}, not a non-empty string")
    return value


def _count(body: dict[str, Any], key: str) -> int:
    value = body[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{key} is {value!r}, not a positive integer")
    return value


@dataclass
class Description:
    """What describe() reads from the store."""

    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    status: int
    start_time: float
    close_time: float | None
    history_length: int
    history_size_bytes: int
    first_run_id: str
    new_run_id: str | None
    parent_workflow_id: str | None
    parent_run_id: str | None
    pending_activities: list[JsonDict]
    pending_workflow_task: JsonDict | None
    pending_timers: list[JsonDict]
    #: The memo now (field -> payload JSON), and the start's user metadata.
    memo: JsonDict
    user_metadata: JsonDict
    root_workflow_id: str | None
    root_run_id: str | None
    #: When the first workflow task was due (start time plus its backoff), epoch seconds.
    execution_time: float | None
    #: The search attributes the run holds now: ``indexedFields`` JSON (name -> payload).
    search_attributes: JsonDict = field(default_factory=dict)


@dataclass
class QueryTask:
    """A query a worker must answer by replaying the run's history."""

    query_id: int
    run_id: str
    workflow_id: str
    workflow_type: str
    namespace: str
    task_queue: str
    query_type: str
    args: list[JsonDict]
