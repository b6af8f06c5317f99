"""A run's mutable state inside one transaction: appends events, buffers, schedules tasks.

Every service operation on a run loads a :class:`RunState` (which locks the run), records
events through it, and calls :meth:`RunState.flush` before the transaction commits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NamedTuple

from .._ids import time_ordered_uuid
from .._json import compact_dumps
from .._json import loads as json_loads
from .._model.events import HistoryEvent
from .._store.rows import as_stored, exec_row
from .._store.schema import OPEN_CLOSE_ORDER, WFT_SCHEDULED, WFT_STARTED
from .._store.tx import Row, StoreTx, column
from ..common import WorkflowExecutionStatus, duration_to_json, removes_memo_field

JsonDict = dict[str, Any]

#: Temporal's limits on a history: warn, and terminate the run beyond them.
HISTORY_WARN_EVENTS = 10_240
HISTORY_WARN_BYTES = 10 * 1024 * 1024
HISTORY_MAX_EVENTS = 51_200
HISTORY_MAX_BYTES = 50 * 1024 * 1024
#: When workflow.info().is_continue_as_new_suggested() turns true.
SUGGEST_CAN_EVENTS = 4 * 1024
SUGGEST_CAN_BYTES = 4 * 1024 * 1024

# Workflow-task retry backoff after repeated failures (the run stays open meanwhile).
WFT_RETRY_MAX_DELAY = 10.0


#: Compact JSON, as stored in the attributes column.
dumps = compact_dumps()


def task_queue_json(name: str) -> JsonDict:
    """Temporal's taskQueue object."""
    return {"name": name, "kind": "TASK_QUEUE_KIND_NORMAL"}


def wft_channel(namespace: str, task_queue: str) -> str:
    """Wake-up channel of a workflow task queue."""
    return f"wft:{namespace}:{task_queue}"


def activity_channel(namespace: str, task_queue: str) -> str:
    """Wake-up channel of an activity task queue."""
    return f"act:{namespace}:{task_queue}"


#: Close events up to this size (JSON characters) travel with the close wake-up.
CLOSE_MESSAGE_LIMIT = 64 * 1024


class RunOutcome(NamedTuple):
    """A run's close as its wake-up carries it: status, next run, the close event."""

    status: int
    new_run_id: str | None
    event_id: int
    event_time: float
    event_type: str
    attributes: str


def closed_channel(run_id: str) -> str:
    """Wake-up channel notified when a run closes."""
    return f"closed:{run_id}"


TIMERS_CHANNEL = "timers"


def update_channel(row_id: int) -> str:
    """Wake-up channel notified when an update is accepted, completed or rejected."""
    return f"update:{row_id}"


def query_channel(query_id: int) -> str:
    """Wake-up channel notified when a query is answered."""
    return f"query:{query_id}"


#: The timer loop looks at the timers table at least this often (seconds); a new timer
#: due later than that needs no wake-up.
TIMER_HORIZON = 0.5


def add_timer(
    tx: StoreTx,
    now: float,
    run_id: str,
    kind: str,
    ref: int,
    attempt: int,
    fire_at: float,
    data: str | None = None,
) -> None:
    """Insert a durable timer; wake the timer loop only if it is due soon."""
    tx.insert_timer(run_id, kind, ref, attempt, fire_at, data)
    if fire_at <= now + TIMER_HORIZON:
        tx.wake(TIMERS_CHANNEL)


class RunState:
    """A locked run being changed in the current transaction."""

    def __init__(self, tx: StoreTx, row: Row, now: float, *, new: bool = False) -> None:
        self.tx = tx
        self.row = row
        self.now = now
        self.run_id: str = row.run_id
        self.namespace: str = row.namespace
        self.workflow_id: str = row.workflow_id
        self.task_queue: str = row.task_queue
        self.status = WorkflowExecutionStatus(row.status)
        self.next_event_id: int = row.next_event_id
        self.history_size: int = row.history_size_bytes
        self._events: list[tuple[int, float, str, str]] = []
        #: Events :meth:`flush` wrote in this transaction (ids from ``first_new_event_id``
        #: on): a task started in the same transaction takes them from here, not the table.
        self.written: list[tuple[int, float, str, str]] = []
        #: The attributes of the events added in this change, as given (event id -> dict):
        #: handed to the worker as they are, instead of parsed back from their JSON.
        self.event_attrs: dict[int, JsonDict] = {}
        #: Top-level fields of events added in this change, for the few that have any
        #: (event id -> ``{"userMetadata": ...}``).
        self.event_extra: dict[int, JsonDict] = {}
        self.first_new_event_id: int = row.next_event_id
        #: Whether an update may be pending. Runs started since schema 7 say 0 until one
        #: is asked for; older runs (NULL) are looked at every time, as before.
        self.has_updates = column(row, "has_updates") != 0
        self._changes: dict[str, Any] = {}
        #: Changes to the run's visibility row (search attributes upserted), written by
        #: :meth:`flush` with the row's own changes at start and close.
        self.visibility: dict[str, Any] = {}
        #: A run started in this change: its row is inserted by :meth:`flush` (one insert
        #: instead of insert and update), and it has no workflow task yet.
        self._insert_values: dict[str, Any] | None = dict(vars(row)) if new else None
        self._wft: Row | None = None
        self._wft_loaded = new
        self._wft_insert: dict[str, Any] | None = None
        self.wft_wanted = False
        self.new_run_id: str | None = None
        self._closed_with: tuple[WorkflowExecutionStatus, JsonDict] | None = None
        #: Update id -> WorkflowExecutionUpdateAccepted event id, within this change.
        self.accepted_updates: dict[str, int] = {}
        #: False once known that no event is buffered for the run (skips a read on close).
        self.buffered_possible = True
        #: Set when a failing run is retried: (failure, backoff seconds).
        self.retry: tuple[JsonDict, float] | None = None
        #: A cron run closed: (its result payloads, or None; its failure, or None).
        self.cron_next: tuple[list[JsonDict] | None, JsonDict | None] | None = None
        # Eager dispatch while a completed task's commands are applied.
        self.eager_budget = 0
        self.eager_queue = ""
        self.eager_identity = ""
        self.eager_same_queue = 0
        self.eager_started: list[Any] = []
        #: Where runs' rows are kept (``StoreTx.known_runs``): the run's row as the last
        #: flush of this change left it; ``row_untold`` once a flush could not tell.
        self._flushed_row: Any = None
        self.row_untold = False
        #: False once known that the run has no open child (skips a read on close).
        self._open_children = True
        #: Work to do once all of a task's commands are recorded (child starts, ...).
        self.after_commands: list[Callable[[], None]] = []

    @classmethod
    def lock(
        cls,
        tx: StoreTx,
        run_id: str,
        now: float,
        activity: int | None = None,
        timer: int | None = None,
    ) -> RunState | None:
        """Lock a run and read it with its workflow task (one read on SQLite, one round
        trip on PostgreSQL, which also reads the row of ``activity``, a scheduled event id,
        and of ``timer``, a timer id, when given); None if the run does not exist."""
        row, wft = tx.lock_execution_and_workflow_task(run_id, activity, timer)
        if row is None:
            return None
        rs = cls(tx, row, now)
        rs._wft, rs._wft_loaded = wft, True
        return rs

    # -- events -----------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether the run is still running."""
        return self.status == WorkflowExecutionStatus.RUNNING

    def add_event(
        self,
        event_type: str,
        attrs: JsonDict,
        event_time: float | None = None,
        *,
        user_metadata: JsonDict | None = None,
    ) -> int:
        """Append an event to the history now (dated ``event_time`` if given); return its id.

        ``user_metadata`` (``{"summary": payload, "details": payload}``) is Temporal's
        top-level ``userMetadata`` of the event."""
        event_id = self.next_event_id
        self.next_event_id += 1
        self.event_attrs[event_id] = attrs
        text = dumps(attrs)
        self.history_size += len(text)
        if user_metadata:
            self.event_extra[event_id] = {"userMetadata": user_metadata}
            self.history_size += len(dumps(user_metadata))
        self._events.append(
            (event_id, self.now if event_time is None else event_time, event_type, text)
        )
        return event_id

    def written_events(self, first: int = 1) -> list[HistoryEvent]:
        """The events this change wrote (from id ``first`` on), with their attributes as
        given to :meth:`add_event` (they hold only JSON types, so they equal their JSON)."""
        attrs, extra = self.event_attrs, self.event_extra
        return [
            HistoryEvent(i, t, k, attrs[i], extra.get(i) or {})
            for i, t, k, _ in self.written
            if i >= first
        ]

    def request_cancel(self, attrs: JsonDict) -> bool:
        """Record WorkflowExecutionCancelRequested unless the run was asked already (then
        nothing changes, as on Temporal: cancelling is idempotent). True if recorded."""
        if self._changes.get("cancel_requested", column(self.row, "cancel_requested")):
            return False
        self._changes["cancel_requested"] = 1
        self.record("WorkflowExecutionCancelRequested", attrs)
        return True

    def record(
        self, event_type: str, attrs: JsonDict, event_time: float | None = None
    ) -> int | None:
        """Record an event that the workflow must see in a new workflow task.

        While a workflow task is running the event is buffered (written when that task
        ends, so the worker's view of history never changes under it); otherwise it is
        appended and a workflow task is scheduled. Returns the event id, or None if buffered.
        """
        wft = self.workflow_task()
        when = self.now if event_time is None else event_time
        if wft is not None and wft.state == WFT_STARTED:
            self.tx.buffer_event(self.run_id, when, event_type, dumps(attrs))
            if not wft.buffered:
                # Flag the task so its completion knows to look (most tasks never do).
                self.tx.update_workflow_task(self.run_id, buffered=1)
                if self.tx.known_runs is not None:
                    self._wft = _with(wft, buffered=1)
            return None
        event_id = self.add_event(event_type, attrs, when)
        self.wft_wanted = True
        return event_id

    # -- workflow task ----------------------------------------------------------------

    def workflow_task(self) -> Row | None:
        """The run's pending workflow task (cached for the transaction)."""
        if not self._wft_loaded:
            self._wft = self.tx.get_workflow_task(self.run_id)
            self._wft_loaded = True
        return self._wft

    def forget_workflow_task(self) -> None:
        """Delete the workflow task row (and its retry timer, which only a retried
        attempt can have)."""
        wft = self._wft if self._wft_loaded else None
        self._wft_insert = None
        self.tx.delete_workflow_task(self.run_id)
        if wft is None or int(wft.attempt) > 1:
            self.tx.delete_timers(self.run_id, ("wft_retry",))
        self._wft = None
        self._wft_loaded = True

    def schedule_workflow_task(
        self, *, attempt: int = 1, delay: float = 0.0, defer_insert: bool = False
    ) -> None:
        """Schedule a workflow task unless one is pending. Attempts > 1 stay transient.

        With ``defer_insert`` the task row is kept in memory until it is started in the
        same transaction (eager hand-off: one insert instead of insert, read, update) or
        until :meth:`flush`.
        """
        if self.workflow_task() is not None or not self.is_open:
            return
        timeout = float(self.row.workflow_task_timeout)
        scheduled_event_id: int | None = None
        if attempt == 1:
            scheduled_event_id = self.add_event(
                "WorkflowTaskScheduled",
                {
                    "taskQueue": task_queue_json(self.task_queue),
                    "startToCloseTimeout": duration_to_json(timeout),
                    "attempt": 1,
                },
            )
        visible_at = self.now + delay
        values: dict[str, Any] = dict(
            run_id=self.run_id,
            namespace=self.namespace,
            task_queue=self.task_queue,
            state=WFT_SCHEDULED,
            attempt=attempt,
            scheduled_event_id=scheduled_event_id,
            scheduled_time=self.now,
            visible_at=visible_at,
            start_to_close=timeout,
        )
        deferred = defer_insert and delay <= 0
        if deferred or self.tx.known_runs is not None:
            # The row as it stands (kept for the change that follows, where rows are kept).
            self._wft = SimpleNamespace(
                **as_stored("dn_workflow_tasks", values),
                started_event_id=None,
                started_time=None,
                identity=None,
                request_id=None,
                timeout_at=None,
                buffered=None,
            )
        if deferred:
            self._wft_insert = values
            self._wft_loaded = True
        else:
            self.tx.insert_workflow_task(**values)
            self._wft_loaded = self.tx.known_runs is not None
        if delay > 0:
            add_timer(self.tx, self.now, self.run_id, "wft_retry", 0, attempt, visible_at, None)
        elif self._wft_insert is None:  # a deferred row wakes them if written unstarted
            self.tx.wake(wft_channel(self.namespace, self.task_queue))

    def update_workflow_task(self, **values: Any) -> None:
        """Change the run's workflow task (writing a deferred insert, if any, at once)."""
        if self._wft_insert is not None:
            self.tx.insert_workflow_task(**{**self._wft_insert, **values})
            self._wft_insert = None
        else:
            self.tx.update_workflow_task(self.run_id, **values)
        if self.tx.known_runs is not None and self._wft_loaded and self._wft is not None:
            # A held transaction: the row as it now stands, for the change that follows.
            self._wft = _with(self._wft, **values)
        else:
            self._wft_loaded = False

    def write_transient_wft_events(self, wft: Row) -> tuple[int, int]:
        """Persist the Scheduled/Started events of a retried (transient) workflow task,
        exactly as the worker was shown them when the task started."""
        attrs = started_attributes(
            self, self.next_event_id, wft.identity or "", wft.request_id or ""
        )
        scheduled = self.add_event(
            "WorkflowTaskScheduled",
            {
                "taskQueue": task_queue_json(self.task_queue),
                "startToCloseTimeout": duration_to_json(float(wft.start_to_close)),
                "attempt": int(wft.attempt),
            },
            float(wft.started_time),
        )
        started = self.add_event("WorkflowTaskStarted", attrs, float(wft.started_time))
        return scheduled, started

    def flush_buffered(self) -> int:
        """Write buffered events to history; return how many there were."""
        rows = self.tx.take_buffered(self.run_id)
        started_ids: dict[str, int] = {}
        for row in rows:
            attrs = json_loads(row.attributes)
            if row.event_type == "ActivityTaskStarted":
                # Ids are only known now: patch the close event that refers to this start.
                event_id = self.next_event_id
                started_ids[attrs["scheduledEventId"]] = event_id
            elif row.event_type.startswith("ActivityTask") and "startedEventId" in attrs:
                sched = attrs.get("scheduledEventId")
                if sched in started_ids:
                    attrs["startedEventId"] = str(started_ids[sched])
            self.add_event(row.event_type, attrs, float(row.event_time))
        return len(rows)

    # -- closing ----------------------------------------------------------------------

    def close(self, status: WorkflowExecutionStatus, *, new_run_id: str | None = None) -> None:
        """Mark the run closed and drop everything pending for it."""
        self.status = status
        self._changes.update(status=int(status), close_time=self.now)
        if new_run_id is not None:
            self._changes["new_run_id"] = new_run_id
        self.new_run_id = new_run_id
        if not (self._wft_loaded and self._wft is None):  # else known gone in this change
            self.tx.delete_workflow_task(self.run_id)
        self._wft = None
        self._wft_loaded = True
        self._wft_insert = None
        # Most runs close with nothing left: one read instead of two deletes and a read.
        activities, timers, children = self.tx.leftovers_of_run(self.run_id)
        if activities:
            self.tx.delete_activity_tasks_of_run(self.run_id)
        # On PostgreSQL an attempt being claimed meanwhile (it locks its activity, not the
        # run) may add a heartbeat timer the read above did not see: delete after it.
        if timers or (activities and self.tx.postgres):
            self.tx.delete_timers_of_run(self.run_id)
        self._open_children = children
        if self.buffered_possible:
            self.tx.take_buffered(self.run_id)
        self.wft_wanted = False
        # The close event was just added. Waiters for the result in this process get it
        # with the wake-up (small ones only), so they need not read it back.
        outcome = None
        if self._events and len(self._events[-1][3]) <= CLOSE_MESSAGE_LIMIT:
            outcome = RunOutcome(int(status), new_run_id, *self._events[-1])
        self.tx.wake(closed_channel(self.run_id), outcome)
        if self.has_updates:  # updates not finished are abandoned: their callers hear so
            name = WorkflowExecutionStatus(status).name
            requested = dumps({"abandoned": name})
            accepted = dumps({"abandoned": name, "accepted": True})
            for row_id in self.tx.abandon_updates(self.run_id, requested, accepted):
                self.tx.wake(update_channel(row_id))
        # The parent (if any) hears of it on flush.
        self._closed_with = (status, self.event_attrs[self._events[-1][0]] if self._events else {})

    def child_started(self) -> None:
        """A child run was started in this change (after a close, if abandoned)."""
        self._open_children = True

    def upsert_memo(self, fields: dict[str, JsonDict]) -> None:
        """Change the run's memo column: set each field, remove those set to a null
        payload (``workflow.upsert_memo({"key": None})``)."""
        current = self._changes.get("memo", column(self.row, "memo"))
        memo: dict[str, JsonDict] = json_loads(current) if current else {}
        for key, payload in fields.items():
            if removes_memo_field(payload):
                memo.pop(key, None)
            else:
                memo[key] = payload
        self.set(memo=dumps(memo) if memo else None)

    def set(self, **changes: Any) -> None:
        """Queue column changes for the run row."""
        self._changes.update(changes)

    def flush(self) -> None:
        """Write events and run changes; schedule a workflow task if one is wanted."""
        if self._wft_insert is not None:
            # Deferred for an eager hand-off that did not happen: it waits in the queue.
            self.tx.insert_workflow_task(**self._wft_insert)
            self._wft_insert = None
            self.tx.wake(wft_channel(self.namespace, self.task_queue))
        if self.wft_wanted and self.is_open:
            self.schedule_workflow_task()
        self.wft_wanted = False
        self.tx.insert_events(self.run_id, self._events, self.event_extra)
        self.written += self._events
        self._events = []
        inserted = None
        if self._insert_values is not None:
            values = inserted = {
                **self._insert_values,
                "next_event_id": self.next_event_id,
                "history_size_bytes": self.history_size,
                **self._changes,
            }
            self.tx.insert_execution(**values)
            row = _visibility_of_new_run(values)
            if "close_time" in self._changes:
                row.update(self._visibility_at_close())
            self.tx.insert_visibility(**{**row, **self.visibility})
            self._insert_values = None
        else:
            self.tx.update_execution(
                self.run_id,
                next_event_id=self.next_event_id,
                history_size_bytes=self.history_size,
                **self._changes,
            )
            if "close_time" in self._changes:
                self.visibility.update(self._visibility_at_close())
            if self.visibility:
                self.tx.update_visibility(self.run_id, **self.visibility)
        known = self.tx.known_runs
        if known is not None and not self.row_untold:
            # The run's rows as this change leaves them, so that the change that follows
            # need not read them again (see StoreTx.known_runs).
            flushed = (
                exec_row(inserted)
                if inserted is not None
                else _updated(
                    self._flushed_row or self.row,
                    self.next_event_id,
                    self.history_size,
                    self._changes,
                )
            )
            if flushed is None:
                self.row_untold = True  # a later flush of this change cannot tell either
            else:
                self._flushed_row = flushed  # a later flush of this change starts from it
                if not self.is_open:
                    known.pop(self.run_id, None)  # rarely changed again: not kept
                elif self._wft_loaded and self._wft_insert is None:
                    known[self.run_id] = (flushed, self._wft)
        self._changes = {}
        self.visibility = {}
        if self._closed_with is not None:
            status, attrs = self._closed_with
            self._closed_with = None
            self._tell_parent(status, attrs)
            if self._open_children:
                self._close_children()
            schedule_key = column(self.row, "schedule_key")
            if schedule_key and self.new_run_id is None:
                # A run a schedule started closed: wake the schedule now (a buffered action
                # may start, pause-on-failure may apply). A timer, not a change to the
                # schedule's row: its passes lock that row first, then runs.
                add_timer(self.tx, self.now, schedule_key, "schedule", 0, 1, self.now, None)

    def _visibility_at_close(self) -> dict[str, Any]:
        closed = float(self._changes["close_time"])
        began = column(self.row, "execution_time")
        return {
            "status": int(self._changes.get("status", self.status)),
            "close_time": closed,
            "close_order": closed,
            "execution_duration": max(0.0, closed - float(began or self.row.start_time)),
            "history_length": self.next_event_id - 1,
            "history_size_bytes": self.history_size,
        }

    # -- child workflows ----------------------------------------------------------------

    def _tell_parent(self, status: WorkflowExecutionStatus, attrs: JsonDict) -> None:
        """A child run closed: record it in the parent's history."""
        parent_run = getattr(self.row, "parent_run_id", None)
        if not parent_run or self.new_run_id is not None:
            return  # a continued or retried run's successor reports instead
        parent = self.tx.lock_execution(parent_run)
        if parent is None or parent.status != WorkflowExecutionStatus.RUNNING:
            return
        prs = RunState(self.tx, parent, self.now)
        base: JsonDict = {
            "namespace": self.namespace,
            "workflowExecution": {"workflowId": self.workflow_id, "runId": self.run_id},
            "workflowType": {"name": self.row.workflow_type},
            "initiatedEventId": str(self.row.parent_initiated_event_id or 0),
            "startedEventId": str(self.row.parent_started_event_id or 0),
        }
        S = WorkflowExecutionStatus
        if status == S.COMPLETED:
            prs.record(
                "ChildWorkflowExecutionCompleted", {"result": attrs.get("result", {}), **base}
            )
        elif status == S.FAILED:
            prs.record(
                "ChildWorkflowExecutionFailed",
                {
                    "failure": attrs.get("failure", {}),
                    **base,
                    "retryState": attrs.get("retryState", "RETRY_STATE_RETRY_POLICY_NOT_SET"),
                },
            )
        elif status == S.CANCELED:
            extra = {"details": attrs["details"]} if "details" in attrs else {}
            prs.record("ChildWorkflowExecutionCanceled", {**extra, **base})
        elif status == S.TERMINATED:
            prs.record("ChildWorkflowExecutionTerminated", base)
        elif status == S.TIMED_OUT:
            prs.record(
                "ChildWorkflowExecutionTimedOut", {**base, "retryState": "RETRY_STATE_TIMEOUT"}
            )
        prs.flush()

    def _close_children(self) -> None:
        """Apply each open child's parent close policy (terminate by default)."""
        for child in self.tx.open_children(self.run_id):
            policy = child.parent_close_policy or 1
            if policy == 2:  # abandon
                continue
            row = self.tx.lock_execution(child.run_id)
            if row is None or row.status != WorkflowExecutionStatus.RUNNING:
                continue
            crs = RunState(self.tx, row, self.now)
            if policy == 3:  # request cancel
                crs.request_cancel({"cause": "parent closed (parent close policy REQUEST_CANCEL)"})
            else:
                crs.flush_buffered()
                crs.add_event(
                    "WorkflowExecutionTerminated",
                    {"reason": "parent closed (parent close policy TERMINATE)", "identity": ""},
                )
                crs.close(WorkflowExecutionStatus.TERMINATED)
            crs.flush()


def _with(row: Any, **values: Any) -> Any:
    """A copy of ``row``, a workflow task's (a driver's named tuple, a SimpleNamespace, or
    a SQLite row, copied as a SimpleNamespace), with ``values`` as the database keeps them."""
    values = as_stored("dn_workflow_tasks", values)
    if isinstance(row, SimpleNamespace):
        return SimpleNamespace(**{**vars(row), **values})
    if isinstance(row, sqlite3.Row):
        return SimpleNamespace(**{**dict(zip(row.keys(), row, strict=True)), **values})
    return row._replace(**values)


def _updated(
    row: Any, next_event_id: int, history_size: int, changes: dict[str, Any]
) -> Any | None:
    """The execution ``row`` once flushed with these values; None when it cannot be told
    (a column changed that the row does not hold)."""
    fields = getattr(row, "_fields", None)
    if fields is None or any(key not in fields for key in changes):
        return None
    if changes:
        changes = as_stored("dn_executions", changes)
    return row._replace(next_event_id=next_event_id, history_size_bytes=history_size, **changes)


def _visibility_of_new_run(values: dict[str, Any]) -> dict[str, Any]:
    """The visibility row of a run being inserted with ``values`` (its dn_executions row)."""
    closed = values.get("close_time")
    return {
        "run_id": values["run_id"],
        "namespace": values["namespace"],
        "workflow_id": values["workflow_id"],
        "workflow_type": values["workflow_type"],
        "task_queue": values["task_queue"],
        "status": values["status"],
        "start_time": values["start_time"],
        "execution_time": values.get("execution_time") or values["start_time"],
        "close_time": closed,
        "close_order": OPEN_CLOSE_ORDER if closed is None else closed,
        "parent_workflow_id": values.get("parent_workflow_id"),
        "parent_run_id": values.get("parent_run_id"),
        "root_workflow_id": values.get("root_workflow_id") or values["workflow_id"],
        "root_run_id": values.get("root_run_id") or values["run_id"],
    }


def started_attributes(
    rs: RunState, scheduled_event_id: int, identity: str, request_id: str
) -> JsonDict:
    """WorkflowTaskStarted's attributes (history size as it stands, before the event)."""
    attrs: JsonDict = {
        "scheduledEventId": str(scheduled_event_id),
        "identity": identity,
        "requestId": request_id,
        "historySizeBytes": str(rs.history_size),
    }
    if rs.next_event_id > SUGGEST_CAN_EVENTS or rs.history_size > SUGGEST_CAN_BYTES:
        attrs["suggestContinueAsNew"] = True
    return attrs


def new_run_id() -> str:
    """A fresh run id: a UUID version 7 (RFC 9562), time-ordered. Time-ordered ids put a
    new run's rows next to the last run's in every index keyed by run id, so a commit
    dirties a few pages at the end of each index, not one page per run scattered through
    it (about a third less SQLite work per run under load). Like Temporal's run ids it is
    opaque: only its uniqueness counts."""
    return time_ordered_uuid()
