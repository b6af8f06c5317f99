"""Workflow-task operations of the service (a mixin of :class:`Service`): claiming tasks,
turning completed tasks' commands into events, failing and retrying tasks."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._ids import random_uuid
from .._json import loads as json_loads
from .._model import commands as cmd
from .._model.events import HistoryEvent
from .._store.ahead import RunLock, Wanted
from .._store.gateway import Store
from .._store.schema import (
    UPDATE_ACCEPTED,
    UPDATE_COMPLETED,
    UPDATE_REJECTED,
    UPDATE_REQUESTED,
    WFT_SCHEDULED,
    WFT_STARTED,
)
from .._store.shared_time import now as tx_now
from .._store.tx import Row, StoreTx, column
from ..common import RetryPolicy, WorkflowExecutionStatus, duration_from_json, duration_to_json
from ..exceptions import InvalidArgumentError
from . import activities
from .children import ChildOps, signal_external
from .clock import Clock
from .operation import operation
from .search_attributes import (
    bad_search_attributes,
    held_search_attributes,
    still_registered,
    visibility_changes,
)
from .state import (
    HISTORY_MAX_BYTES,
    HISTORY_MAX_EVENTS,
    HISTORY_WARN_BYTES,
    HISTORY_WARN_EVENTS,
    WFT_RETRY_MAX_DELAY,
    RunState,
    activity_channel,
    add_timer,
    dumps,
    new_run_id,
    query_channel,
    started_attributes,
    task_queue_json,
    update_channel,
    wft_channel,
)
from .types import (
    ActivityTask,
    QueryTask,
    StartWorkflowRequest,
    StartWorkflowResult,
    WorkflowTask,
)

JsonDict = dict[str, Any]
log = logging.getLogger("engine.service")
S = WorkflowExecutionStatus


class TaskNotFoundError(Exception):
    """A completion for a task that is no longer current (timed out, run closed, ...)."""


@dataclass
class Completion:
    """What completing a workflow task gave back to the worker."""

    accepted: bool
    activities: list[ActivityTask] = field(default_factory=list)
    #: The events this completion wrote, while the run stays open: the worker keeps them,
    #: so its next task need not read them back.
    events: list[HistoryEvent] = field(default_factory=list)
    #: A heartbeat's next workflow task, started for the same worker.
    next_task: WorkflowTask | None = None


#: The commands that close a run.
_CLOSING = (
    cmd.CompleteWorkflowExecution,
    cmd.FailWorkflowExecution,
    cmd.CancelWorkflowExecution,
    cmd.ContinueAsNewWorkflowExecution,
)


def _task_locks(
    task: WorkflowTask, commands: Sequence[cmd.Command] = (), *_: Any, **__: Any
) -> tuple[RunLock, ...]:
    """A workflow task's completion locks its run (and reads its task row with it); one
    that closes the run reads what the run leaves pending too."""
    return (RunLock(task.run_id, closes=any(isinstance(c, _CLOSING) for c in commands)),)


class WorkflowTaskOps(ChildOps):
    """Claiming, completing and failing workflow tasks."""

    store: Store
    clock: Clock

    # Provided by Service (run-level operations that task completion also needs).
    _start_workflow: Callable[..., StartWorkflowResult]
    _terminate: Callable[..., None]

    @operation
    def poll_workflow_tasks(
        self,
        tx: StoreTx,
        namespace: str,
        task_queue: str,
        identity: str,
        cached: Mapping[str, int],
        limit: int = 1,
    ) -> list[WorkflowTask | QueryTask]:
        """Claim up to ``limit`` ready workflow tasks (and pending queries). ``cached``
        maps run id → the next event id a worker already holds, so only the new events
        are read."""
        now = tx_now(self.clock)
        tasks: list[WorkflowTask | QueryTask] = []
        for q in tx.take_queries(namespace, task_queue, 16):
            run = tx.get_execution(q.run_id)
            if run is None:
                tx.answer_query(q.id, None, json.dumps({"message": "the run no longer exists"}))
                tx.wake(query_channel(q.id))
                continue
            tasks.append(
                QueryTask(
                    query_id=q.id,
                    run_id=q.run_id,
                    workflow_id=run.workflow_id,
                    workflow_type=run.workflow_type,
                    namespace=namespace,
                    task_queue=task_queue,
                    query_type=q.query_type,
                    args=json_loads(q.args),
                )
            )
        found = tx.next_workflow_tasks(namespace, task_queue, now, limit) if limit else ()
        # Their runs and histories (from what the worker holds) in one round trip.
        tx.lock_ahead({run_id: Wanted(history_from=cached.get(run_id, 1)) for run_id in found})
        for run_id in found:
            rs = RunState.lock(tx, run_id, now)
            wft = rs.workflow_task() if rs is not None else None
            if rs is None or wft is None or wft.state != WFT_SCHEDULED:
                continue  # taken by another poller between our read and our lock
            tasks.append(self._start_task(rs, identity, cached))
        return tasks

    def _start_task(self, rs: RunState, identity: str, cached: Mapping[str, int]) -> WorkflowTask:
        """Mark the run's scheduled workflow task started and read what the worker needs."""
        tx, now, run_id, task_queue = rs.tx, rs.now, rs.run_id, rs.task_queue
        row = rs.row
        wft = rs.workflow_task()
        assert wft is not None and wft.state == WFT_SCHEDULED
        request_id = random_uuid()
        attempt = int(wft.attempt)
        transient: list[HistoryEvent] = []
        if attempt == 1:
            scheduled_event_id = int(wft.scheduled_event_id)
            started_attrs = started_attributes(rs, scheduled_event_id, identity, request_id)
            started_event_id = rs.add_event("WorkflowTaskStarted", started_attrs)
        else:
            # A retried task is transient: its events are shown to the worker but only
            # written to history if the attempt completes.
            scheduled_event_id = rs.next_event_id
            started_event_id = scheduled_event_id + 1
            started_attrs = started_attributes(rs, scheduled_event_id, identity, request_id)
            transient = [
                HistoryEvent(
                    scheduled_event_id,
                    now,
                    "WorkflowTaskScheduled",
                    {
                        "taskQueue": task_queue_json(task_queue),
                        "startToCloseTimeout": duration_to_json(float(wft.start_to_close)),
                        "attempt": attempt,
                    },
                ),
                HistoryEvent(started_event_id, now, "WorkflowTaskStarted", started_attrs),
            ]
        rs.update_workflow_task(
            state=WFT_STARTED,
            started_event_id=started_event_id,
            started_time=now,
            identity=identity,
            request_id=request_id,
            # The deadline lives on the task row; the timer loop scans it.
            timeout_at=now + float(wft.start_to_close),
        )
        rs.flush()
        first = cached.get(run_id, 1)
        if first > rs.next_event_id:
            first = 1
        fresh = rs.first_new_event_id  # events from here on were written by this change
        events = _read_history(tx, run_id, first, fresh - 1) if first < fresh else []
        events += rs.written_events(first)
        events += transient
        updates = [
            {
                "update_id": u.update_id,
                "name": u.name,
                "args": json_loads(u.args),
                "identity": u.identity,
            }
            for u in (tx.updates_of_run(run_id, UPDATE_REQUESTED) if rs.has_updates else ())
        ]
        return WorkflowTask(
            namespace=rs.namespace,
            workflow_id=row.workflow_id,
            run_id=run_id,
            workflow_type=row.workflow_type,
            task_queue=task_queue,
            attempt=attempt,
            scheduled_event_id=scheduled_event_id,
            started_event_id=started_event_id,
            request_id=request_id,
            events=events,
            started_time=now,
            updates=updates,
        )

    @operation(locks=_task_locks, inline=True)
    def complete_workflow_task(
        self,
        tx: StoreTx,
        task: WorkflowTask,
        commands: list[cmd.Command],
        identity: str,
        eager_activities: int = 0,
        rejections: list[tuple[str, JsonDict]] | None = None,
        sdk_flags: Sequence[int] = (),
        heartbeat: bool = False,
    ) -> Completion:
        """Record a completed workflow task and turn its commands into events.

        ``sdk_flags``: Temporal's core SDK flags the commands depend on, recorded in the
        ``WorkflowTaskCompleted`` event's ``sdkMetadata.coreUsedFlags`` as Temporal's SDKs
        record them (a patch's upsert of ``TemporalChangeVersion`` needs flag 2 for
        ``temporalio`` to replay the history).

        ``rejections`` are updates whose validator refused them: they are answered and
        leave no trace in the history.

        With ``eager_activities`` > 0, up to that many activities the task scheduled on
        the same task queue are started at once for this worker and returned, saving a
        round trip through the queue. ``accepted`` is False when the completion was
        refused because new events arrived while the task ran and it tried to close the
        run: the worker must replay afresh.

        ``heartbeat``: the task's local activities are still running near its timeout, so
        the worker completes it with the commands so far and the next task is scheduled
        and started for the same worker at once (``Completion.next_task``), as Temporal's
        workers keep a task alive (a ``WorkflowTaskCompleted`` then a new task's events).
        """
        rs, wft = self._current_wft(tx, task)
        bad = bad_search_attributes(rs, commands)
        if bad is not None:
            # Temporal fails such a task (BAD_SEARCH_ATTRIBUTES) and retries it: once the
            # attribute is registered, a retry goes through with nothing else changed.
            self._fail_task(
                rs, wft, "WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES", bad, identity
            )
            return Completion(accepted=False)
        for update_id, failure in rejections or []:
            row_id = tx.set_update(
                task.run_id, update_id, UPDATE_REJECTED, json.dumps({"failure": failure})
            )
            if row_id:
                tx.wake(update_channel(row_id))
        if wft.scheduled_event_id is None:
            scheduled_id, started_id = rs.write_transient_wft_events(wft)
        else:
            scheduled_id, started_id = int(wft.scheduled_event_id), int(wft.started_event_id)
        rs.forget_workflow_task()
        closing = [c for c in commands if isinstance(c, cmd.CLOSING_COMMANDS)]
        # New events (or updates) arrived while the task ran and it tries to close the run:
        # Temporal rejects the completion so the workflow sees them first.
        rs.buffered_possible = bool(wft.buffered)
        unhandled = None
        if closing and wft.buffered:
            unhandled = "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND"
        elif closing and rs.has_updates:
            delivered = {str(u["update_id"]) for u in task.updates}
            if any(
                u.update_id not in delivered
                for u in tx.updates_of_run(task.run_id, UPDATE_REQUESTED)
            ):
                unhandled = "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE"
        if unhandled is not None:
            rs.add_event(
                "WorkflowTaskFailed",
                {
                    "scheduledEventId": str(scheduled_id),
                    "startedEventId": str(started_id),
                    "cause": unhandled,
                    "identity": identity,
                },
            )
            rs.flush_buffered()
            rs.wft_wanted = True
            rs.flush()
            return Completion(accepted=False)
        completed_id = rs.add_event(
            "WorkflowTaskCompleted",
            {
                "scheduledEventId": str(scheduled_id),
                "startedEventId": str(started_id),
                "identity": identity,
                "sdkMetadata": {"coreUsedFlags": list(sdk_flags)} if sdk_flags else {},
                "meteringMetadata": {},
            },
        )
        continue_as_new: cmd.ContinueAsNewWorkflowExecution | None = None
        rs.eager_budget = eager_activities
        rs.eager_queue = task.task_queue
        rs.eager_identity = identity
        for command in commands:
            if not rs.is_open:
                break
            if isinstance(command, cmd.ContinueAsNewWorkflowExecution):
                continue_as_new = command
            self._apply_command(rs, command, completed_id, identity)
        for action in rs.after_commands:
            action()
        rs.after_commands = []
        if rs.is_open and rs.has_updates and tx.updates_of_run(task.run_id, UPDATE_REQUESTED):
            rs.wft_wanted = True  # updates that arrived while the task ran
        if rs.is_open:
            if wft.buffered and rs.flush_buffered():
                rs.wft_wanted = True
            if (
                rs.row.next_event_id <= HISTORY_WARN_EVENTS < rs.next_event_id
                or rs.row.history_size_bytes <= HISTORY_WARN_BYTES < rs.history_size
            ):
                log.warning(
                    "the history of workflow %s (run %s) passed %d events or %d MB; runs are "
                    "terminated at %d events or %d MB: consider continue-as-new",
                    rs.workflow_id,
                    rs.run_id,
                    HISTORY_WARN_EVENTS,
                    HISTORY_WARN_BYTES // (1024 * 1024),
                    HISTORY_MAX_EVENTS,
                    HISTORY_MAX_BYTES // (1024 * 1024),
                )
            if rs.next_event_id > HISTORY_MAX_EVENTS or rs.history_size > HISTORY_MAX_BYTES:
                self._terminate(
                    rs,
                    f"history size exceeds the limit ({HISTORY_MAX_EVENTS} events or "
                    f"{HISTORY_MAX_BYTES // (1024 * 1024)} MB): use continue-as-new",
                    None,
                    "service",
                )
        rs.flush()
        next_task = None
        if heartbeat and rs.is_open:
            if rs.workflow_task() is None:
                rs.schedule_workflow_task(defer_insert=True)
            # The worker holds everything up to this completion.
            next_task = self._start_task(rs, identity, {task.run_id: completed_id})
        if continue_as_new is not None:
            self._start_continued(tx, rs, continue_as_new, identity)
        elif rs.retry is not None:
            self._start_retry(tx, rs, identity)
        elif rs.cron_next is not None:
            self._start_cron(tx, rs, identity)
        started = rs.eager_started
        if started and len(started) == rs.eager_same_queue:
            # Nothing left for pollers of the queue: do not wake them for nothing.
            tx.wakeups.discard(activity_channel(task.namespace, task.task_queue))
        return Completion(
            accepted=True,
            activities=started,
            events=rs.written_events() if rs.is_open else [],
            next_task=next_task,
        )

    def _current_wft(self, tx: StoreTx, task: WorkflowTask) -> tuple[RunState, Row]:
        rs = RunState.lock(tx, task.run_id, tx_now(self.clock))
        if rs is None or not rs.is_open:
            raise TaskNotFoundError(f"run {task.run_id} is closed")
        wft = rs.workflow_task()
        if wft is None or wft.state != WFT_STARTED or wft.request_id != task.request_id:
            raise TaskNotFoundError(f"workflow task of run {task.run_id} is no longer current")
        return rs, wft

    def _apply_command(
        self, rs: RunState, command: cmd.Command, completed_id: int, identity: str
    ) -> None:
        wtc = str(completed_id)
        if isinstance(command, cmd.ScheduleActivityTask):
            eager = command.task_queue == rs.eager_queue
            rs.eager_same_queue += eager
            if eager and rs.eager_budget > len(rs.eager_started):
                eager_task = activities.schedule(rs, command, wtc, start_for=rs.eager_identity)
                assert eager_task is not None
                rs.eager_started.append(eager_task)
            else:
                activities.schedule(rs, command, wtc)
        elif isinstance(command, cmd.RequestCancelActivityTask):
            activities.request_cancel(rs, command, wtc, identity)
        elif isinstance(command, cmd.StartTimer):
            started = rs.add_event(
                "TimerStarted",
                {
                    "timerId": command.timer_id,
                    "startToFireTimeout": duration_to_json(command.duration),
                    "workflowTaskCompletedEventId": wtc,
                },
                user_metadata=command.user_metadata,
            )
            add_timer(
                rs.tx,
                rs.now,
                rs.run_id,
                "user",
                started,
                1,
                rs.now + command.duration,
                command.timer_id,
            )
        elif isinstance(command, cmd.CancelTimer):
            started_id = _user_timer_started_id(rs, command.timer_id)
            if not started_id:
                # The timer fired while this task ran (its TimerFired is buffered): the
                # cancel wins and the workflow never sees the firing, as in Temporal.
                started_id = rs.tx.drop_buffered_timer_fired(rs.run_id, command.timer_id)
            rs.add_event(
                "TimerCanceled",
                {
                    "timerId": command.timer_id,
                    "startedEventId": str(started_id),
                    "workflowTaskCompletedEventId": wtc,
                    "identity": identity,
                },
            )
            rs.tx.delete_timers(rs.run_id, ("user",), started_id)
        elif isinstance(command, cmd.UpsertWorkflowSearchAttributes):
            # Checked before the task was accepted (_bad_search_attributes); written to the
            # run's visibility row in this transaction.
            visible = rs.tx.get_visibility(rs.run_id)
            held = rs.visibility.get(
                "search_attributes", visible.search_attributes if visible else None
            )
            columns, after, recorded = visibility_changes(
                rs.tx, rs.namespace, command.search_attributes, json_loads(held) if held else None
            )
            rs.visibility.update(columns, search_attributes=dumps(after) if after else None)
            rs.add_event(
                "UpsertWorkflowSearchAttributes",
                {
                    "workflowTaskCompletedEventId": wtc,
                    "searchAttributes": {"indexedFields": recorded},
                },
            )
        elif isinstance(command, cmd.RecordMarker):
            attrs: JsonDict = {"markerName": command.marker_name, "details": command.details}
            attrs["workflowTaskCompletedEventId"] = wtc
            if command.failure:
                attrs["failure"] = command.failure
            rs.add_event("MarkerRecorded", attrs, user_metadata=command.user_metadata)
        elif isinstance(command, cmd.CompleteWorkflowExecution):
            attrs = {"result": {"payloads": command.result}, "workflowTaskCompletedEventId": wtc}
            if column(rs.row, "cron_schedule"):  # the schedule's next run follows
                new_id = new_run_id()
                rs.add_event("WorkflowExecutionCompleted", {**attrs, "newExecutionRunId": new_id})
                rs.close(S.COMPLETED, new_run_id=new_id)
                rs.cron_next = (command.result, None)
            else:
                rs.add_event("WorkflowExecutionCompleted", attrs)
                rs.close(S.COMPLETED)
        elif isinstance(command, cmd.FailWorkflowExecution):
            retry_state, delay = self._workflow_retry(rs, command.failure)
            attrs = {
                "failure": command.failure,
                "retryState": retry_state,
                "workflowTaskCompletedEventId": wtc,
            }
            if delay is None and column(rs.row, "cron_schedule"):
                # No retry left: the schedule's next run follows, as after a completion.
                new_id = new_run_id()
                rs.add_event("WorkflowExecutionFailed", {**attrs, "newExecutionRunId": new_id})
                rs.close(S.FAILED, new_run_id=new_id)
                rs.cron_next = (None, command.failure)
            elif delay is None:
                rs.add_event("WorkflowExecutionFailed", attrs)
                rs.close(S.FAILED)
            else:
                # A workflow with a retry policy runs again as a new run of the same id.
                new_id = new_run_id()
                rs.add_event("WorkflowExecutionFailed", {**attrs, "newExecutionRunId": new_id})
                rs.close(S.FAILED, new_run_id=new_id)
                rs.retry = (command.failure, delay)
        elif isinstance(command, cmd.CancelWorkflowExecution):
            attrs = {"workflowTaskCompletedEventId": wtc}
            if command.details:
                attrs["details"] = {"payloads": command.details}
            rs.add_event("WorkflowExecutionCanceled", attrs)
            rs.close(S.CANCELED)
        elif isinstance(command, cmd.ContinueAsNewWorkflowExecution):
            new_id = new_run_id()
            attrs = {
                "newExecutionRunId": new_id,
                "workflowType": {"name": command.workflow_type},
                "taskQueue": task_queue_json(command.task_queue),
                "input": {"payloads": command.input},
                "workflowTaskTimeout": duration_to_json(
                    command.task_timeout or float(rs.row.workflow_task_timeout)
                ),
                "workflowTaskCompletedEventId": wtc,
                "initiator": "CONTINUE_AS_NEW_INITIATOR_WORKFLOW",
            }
            if command.run_timeout:
                attrs["workflowRunTimeout"] = duration_to_json(command.run_timeout)
            if command.backoff_start_interval:
                attrs["backoffStartInterval"] = duration_to_json(command.backoff_start_interval)
            if command.memo:
                attrs["memo"] = command.memo
            if command.search_attributes:
                attrs["searchAttributes"] = {"indexedFields": command.search_attributes}
            rs.add_event("WorkflowExecutionContinuedAsNew", attrs)
            rs.close(S.CONTINUED_AS_NEW, new_run_id=new_id)
        elif isinstance(command, cmd.AcceptUpdate):
            accepted = rs.add_event(
                "WorkflowExecutionUpdateAccepted",
                {
                    "protocolInstanceId": command.update_id,
                    "acceptedRequestMessageId": f"{command.update_id}/request",
                    "acceptedRequestSequencingEventId": str(completed_id - 1),
                    "acceptedRequest": {
                        "meta": {"updateId": command.update_id, "identity": command.identity},
                        "input": {"name": command.name, "args": {"payloads": command.args}},
                    },
                },
            )
            rs.accepted_updates[command.update_id] = accepted
            row_id = rs.tx.set_update(rs.run_id, command.update_id, UPDATE_ACCEPTED, None)
            if row_id:
                rs.tx.wake(update_channel(row_id))
        elif isinstance(command, cmd.CompleteUpdate):
            outcome: JsonDict = (
                {"failure": command.failure}
                if command.failure is not None
                else {"success": {"payloads": command.result or []}}
            )
            accepted_id = rs.accepted_updates.get(command.update_id) or _accepted_event_id(
                rs, command.update_id
            )
            rs.add_event(
                "WorkflowExecutionUpdateCompleted",
                {
                    "meta": {"updateId": command.update_id},
                    "outcome": outcome,
                    "acceptedEventId": str(accepted_id),
                },
            )
            row_id = rs.tx.set_update(
                rs.run_id, command.update_id, UPDATE_COMPLETED, json.dumps(outcome)
            )
            if row_id:
                rs.tx.wake(update_channel(row_id))
        elif isinstance(command, cmd.StartChildWorkflowExecution):
            self._start_child(rs, command, wtc, identity)
        elif isinstance(command, cmd.RequestCancelExternalWorkflowExecution):
            self._cancel_external(rs, command, wtc, identity)
        elif isinstance(command, cmd.ModifyWorkflowProperties):
            rs.add_event(
                "WorkflowPropertiesModified",
                {
                    "workflowTaskCompletedEventId": wtc,
                    "upsertedMemo": {"fields": command.upserted_memo},
                },
            )
            rs.upsert_memo(command.upserted_memo)
        elif isinstance(command, cmd.SignalExternalWorkflowExecution):
            signal_external(rs, command, wtc, identity)
        else:
            raise InvalidArgumentError(f"unknown command {type(command).__name__}")

    def _workflow_retry(self, rs: RunState, failure: JsonDict) -> tuple[str, float | None]:
        """Retry state of a failing run, and the backoff before its retry (None: no retry).

        Workflows have no retry policy unless one was given when they were started.
        """
        first = rs.tx.first_event(rs.run_id)
        started = json_loads(first.attributes) if first is not None else {}
        policy_json = started.get("retryPolicy")
        if not policy_json:
            return "RETRY_STATE_RETRY_POLICY_NOT_SET", None
        policy = RetryPolicy.from_json(policy_json)
        attempt = int(started.get("attempt", 1))
        info = failure.get("applicationFailureInfo")
        if info is None or info.get("nonRetryable") or not policy.is_retryable(info.get("type")):
            return "RETRY_STATE_NON_RETRYABLE_FAILURE", None
        if policy.maximum_attempts and attempt >= policy.maximum_attempts:
            return "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED", None
        return "RETRY_STATE_IN_PROGRESS", policy.delay_for_attempt(attempt).total_seconds()

    def _successor_options(self, tx: StoreTx, rs: RunState) -> tuple[JsonDict, dict[str, Any]]:
        """The run's start attributes, and the start options that a run continuing it (its
        retry, or its cron schedule's next run) takes over: same type, queue, input,
        timeouts and retry policy."""
        first = tx.first_event(rs.run_id)
        assert first is not None
        started = json_loads(first.attributes)
        row = rs.row

        def seconds(key: str) -> float | None:
            value = started.get(key)
            return duration_from_json(value).total_seconds() if value else None

        return started, {
            "workflow_type": row.workflow_type,
            "task_queue": row.task_queue,
            "input": (started.get("input") or {}).get("payloads") or [],
            "execution_timeout": seconds("workflowExecutionTimeout"),
            "run_timeout": seconds("workflowRunTimeout"),
            "task_timeout": float(row.workflow_task_timeout),
            "retry_policy": started.get("retryPolicy"),
        }

    def _start_retry(self, tx: StoreTx, rs: RunState, identity: str) -> None:
        assert rs.retry is not None
        failure, delay = rs.retry
        started, options = self._successor_options(tx, rs)
        self._start_successor(
            tx,
            rs,
            **options,
            identity=identity,
            start_delay=delay,
            attempt=int(started.get("attempt", 1)) + 1,
            initiator="CONTINUE_AS_NEW_INITIATOR_RETRY",
            memo=started.get("memo"),
            last_failure=failure,
            cron_schedule=column(rs.row, "cron_schedule"),
            last_completion_result=(started.get("lastCompletionResult") or {}).get("payloads"),
        )

    def _start_cron(self, tx: StoreTx, rs: RunState, identity: str) -> None:
        """The next run of a cron schedule: the same input and options, waiting for the
        schedule's next time; it carries the last completed run's result (or the failure
        of the run that just failed), as Temporal's cron runs do."""
        assert rs.cron_next is not None
        result, failure = rs.cron_next
        started, options = self._successor_options(tx, rs)
        carried = (started.get("lastCompletionResult") or {}).get("payloads")
        self._start_successor(
            tx,
            rs,
            **options,
            memo=started.get("memo"),
            identity=identity,
            initiator="CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE",
            cron_schedule=str(rs.row.cron_schedule),
            cron_previous_time=column(rs.row, "execution_time"),
            last_completion_result=result if result is not None else carried,
            last_failure=failure,
        )

    def _start_continued(
        self,
        tx: StoreTx,
        rs: RunState,
        command: cmd.ContinueAsNewWorkflowExecution,
        identity: str,
    ) -> None:
        row = rs.row
        # What the command does not give is the run's: its retry policy, and the memo it
        # started with (upserted fields are not carried, as on Temporal).
        first = tx.first_event(rs.run_id)
        started = json_loads(first.attributes) if first is not None else {}
        self._start_successor(
            tx,
            rs,
            workflow_type=command.workflow_type,
            task_queue=command.task_queue,
            input=command.input,
            task_timeout=command.task_timeout or float(row.workflow_task_timeout),
            run_timeout=command.run_timeout or row.run_timeout,
            execution_timeout=row.execution_timeout,
            retry_policy=command.retry_policy or started.get("retryPolicy"),
            memo=command.memo or started.get("memo"),
            search_attributes=command.search_attributes,
            start_delay=command.backoff_start_interval or 0.0,
            identity=identity,
        )

    def _start_successor(self, tx: StoreTx, rs: RunState, **fields: Any) -> None:
        """Start the run that continues ``rs`` (continue-as-new or retry): same workflow
        id and parent, the run id its closing event announced."""
        row = rs.row
        if fields.get("search_attributes") is None:
            # What the run holds now goes on (as Temporal carries it to the next run),
            # but for attributes removed from the namespace meanwhile.
            held = still_registered(tx, rs.namespace, held_search_attributes(rs))
            fields["search_attributes"] = held or None
        req = StartWorkflowRequest(
            namespace=row.namespace,
            workflow_id=row.workflow_id,
            continued_from=row.run_id,
            first_run_id=row.first_run_id,
            parent_workflow_id=row.parent_workflow_id,
            parent_run_id=row.parent_run_id,
            parent_initiated_event_id=row.parent_initiated_event_id,
            parent_close_policy=row.parent_close_policy,
            # A child's successor keeps its root; a run without a parent is its own root.
            root_workflow_id=column(row, "root_workflow_id") if row.parent_run_id else None,
            root_run_id=column(row, "root_run_id") if row.parent_run_id else None,
            schedule_key=column(row, "schedule_key"),
            **fields,
        )
        self._start_workflow(tx, req, rs.new_run_id)
        if row.parent_started_event_id:
            tx.update_execution(
                str(rs.new_run_id), parent_started_event_id=row.parent_started_event_id
            )

    @operation
    def fail_workflow_task(
        self, tx: StoreTx, task: WorkflowTask, cause: str, failure: JsonDict, identity: str
    ) -> None:
        """Record a failed workflow task; the run stays open and the task is retried."""
        rs, wft = self._current_wft(tx, task)
        self._fail_task(rs, wft, cause, failure, identity)

    @staticmethod
    def _fail_task(rs: RunState, wft: Row, cause: str, failure: JsonDict, identity: str) -> None:
        attempt = int(wft.attempt)
        if wft.scheduled_event_id is not None:
            rs.add_event(
                "WorkflowTaskFailed",
                {
                    "scheduledEventId": str(wft.scheduled_event_id),
                    "startedEventId": str(wft.started_event_id),
                    "cause": cause,
                    "failure": failure,
                    "identity": identity,
                },
            )
        rs.forget_workflow_task()
        rs.flush_buffered()
        rs.schedule_workflow_task(attempt=attempt + 1, delay=wft_retry_delay(attempt))
        rs.flush()

    @operation
    def retry_workflow_tasks_now(self, tx: StoreTx, namespace: str, workflow_type: str) -> int:
        """Make backed-off workflow tasks of a type runnable at once (after a code fix)."""
        queues = tx.expedite_workflow_tasks(namespace, workflow_type, tx_now(self.clock))
        for queue in queues:
            tx.wake(wft_channel(namespace, queue))
        return len(queues)


def wft_retry_delay(failed_attempt: int) -> float:
    """Backoff before retrying a workflow task that failed ``failed_attempt`` times."""
    if failed_attempt <= 1:
        return 0.0 if failed_attempt < 1 else 1.0
    return float(min(WFT_RETRY_MAX_DELAY, 2 ** (failed_attempt - 1)))


def _user_timer_started_id(rs: RunState, timer_id: str) -> int:
    for timer in rs.tx.timers_of_run(rs.run_id):
        if timer.kind == "user" and timer.data == timer_id:
            return int(timer.ref)
    return 0


def _accepted_event_id(rs: RunState, update_id: str) -> int:
    for row in rs.tx.events_of_type(rs.run_id, "WorkflowExecutionUpdateAccepted"):
        if json_loads(row.attributes).get("protocolInstanceId") == update_id:
            return int(row.event_id)
    return 0


def _read_history(
    tx: StoreTx, run_id: str, first_event_id: int = 1, last_event_id: int | None = None
) -> list[HistoryEvent]:
    return [
        HistoryEvent(
            r.event_id,
            r.event_time,
            r.event_type,
            json_loads(r.attributes),
            json_loads(r.extra) if r.extra else {},
        )
        for r in tx.read_events(run_id, first_event_id, last_event_id)
    ]
