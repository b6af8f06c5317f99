"""The service: turns requests and commands into history events. It never runs user code.

Each public coroutine is one transaction on the store. Workflow-task and run-level
operations live here; activity operations in ``activities.py``; timers in ``timers.py``.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from .._replay import commands as cmd
from .._replay.events import HistoryEvent
from .._store.gateway import Store
from .._store.schema import WFT_SCHEDULED, WFT_STARTED
from .._store.tx import Row, StoreTx
from ..common import (
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
    duration_to_json,
)
from ..exceptions import (
    InvalidArgumentError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
)
from . import activities, timers
from .clock import Clock
from .state import (
    HISTORY_MAX_BYTES,
    HISTORY_MAX_EVENTS,
    SUGGEST_CAN_BYTES,
    SUGGEST_CAN_EVENTS,
    TIMERS_CHANNEL,
    WFT_RETRY_MAX_DELAY,
    RunState,
    new_run_id,
    task_queue_json,
    wft_channel,
)
from .types import (
    ActivityTask,
    Description,
    StartWorkflowRequest,
    StartWorkflowResult,
    WorkflowTask,
)
from .watch import CloseWatcher

JsonDict = dict[str, Any]
S = WorkflowExecutionStatus

DEFAULT_RETENTION = 7 * 24 * 3600.0


class TaskNotFoundError(Exception):
    """A completion for a task that is no longer current (timed out, run closed, ...)."""


class ActivityService:
    """Activity operations of the service (mixed into :class:`Service`)."""

    store: Store
    clock: Clock

    async def poll_activity_tasks(
        self, namespace: str, task_queue: str, identity: str, limit: int
    ) -> list[ActivityTask]:
        """Claim up to ``limit`` ready activity attempts."""

        def fn(tx: StoreTx) -> list[ActivityTask]:
            return activities.claim(tx, namespace, task_queue, identity, self.clock.now(), limit)

        return await self.store.transaction(fn)

    async def complete_activity(self, task: ActivityTask, result: list[JsonDict]) -> None:
        """The attempt returned a result."""

        def fn(tx: StoreTx) -> None:
            rs = self._run_for_activity(tx, task)
            activities.complete(rs, activities.current(rs, task.token), result)
            rs.flush()

        await self.store.transaction(fn)

    async def fail_activity(self, task: ActivityTask, failure: JsonDict) -> None:
        """The attempt raised: retry or record the failure."""

        def fn(tx: StoreTx) -> None:
            rs = self._run_for_activity(tx, task)
            activities.failed(rs, activities.current(rs, task.token), failure)
            rs.flush()

        await self.store.transaction(fn)

    async def cancel_activity(self, task: ActivityTask, details: list[JsonDict]) -> None:
        """The attempt stopped after a cancellation request."""

        def fn(tx: StoreTx) -> None:
            rs = self._run_for_activity(tx, task)
            activities.canceled(rs, activities.current(rs, task.token), details)
            rs.flush()

        await self.store.transaction(fn)

    async def heartbeat_activity(self, task: ActivityTask, details: list[JsonDict] | None) -> bool:
        """Record a heartbeat; True when cancellation has been requested."""

        def fn(tx: StoreTx) -> bool:
            return activities.heartbeat(tx, task.token, details, self.clock.now())

        return await self.store.transaction(fn)

    def _run_for_activity(self, tx: StoreTx, task: ActivityTask) -> RunState:
        row = tx.lock_execution(task.run_id)
        if row is None or row.status != S.RUNNING:
            raise activities.ActivityNotFoundError(f"run {task.run_id} is closed")
        return RunState(tx, row, self.clock.now())

    # -- timers -------------------------------------------------------------------------

    async def fire_due_timers(self, limit: int = 200) -> int:
        """Fire timers that are due; return how many were looked at."""

        def due(tx: StoreTx) -> list[Row]:
            return list(tx.due_timers(self.clock.now(), limit))

        rows = await self.store.transaction(due)
        for row in rows:
            await self.store.transaction(self._fire_one, row.id, row.run_id)
        return len(rows)

    def _fire_one(self, tx: StoreTx, timer_id: int, run_id: str) -> None:
        timers.fire_due(tx, timer_id, run_id, self.clock.now())

    async def next_timer_at(self) -> float | None:
        """When the next timer is due."""

        def fn(tx: StoreTx) -> float | None:
            return tx.next_timer_at()

        return await self.store.transaction(fn)

    async def skip_to_next_timer(self) -> bool:
        """Time skipping: if no task is ready or running, move the clock to the next timer.

        The check and the jump happen inside one transaction (on SQLite it holds the write
        lock), so a timer or task committed meanwhile cannot be jumped over.
        """

        def fn(tx: StoreTx) -> bool:
            tx.consistent_snapshot()
            now = self.clock.now()
            if tx.work_in_progress(now):
                return False
            next_at = tx.next_timer_at()
            if next_at is None or next_at <= now:
                return False
            self.clock.advance_to(next_at)  # type: ignore[attr-defined]
            return True

        return await self.store.transaction(fn)


class Service(ActivityService):
    """State transitions over one store. Any process may create one; all share the store."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or Clock()
        self._namespaces: set[str] = set()
        self.close_watcher = CloseWatcher(self)

    # =================================================================================
    # runs
    # =================================================================================

    async def start_workflow(self, req: StartWorkflowRequest) -> StartWorkflowResult:
        """Start a run, applying the id reuse and conflict policies."""
        result = await self.store.transaction(self._start_workflow, req)
        self._namespaces.add(req.namespace)  # committed: no need to ensure it again
        return result

    def _start_workflow(
        self, tx: StoreTx, req: StartWorkflowRequest, run_id: str | None = None
    ) -> StartWorkflowResult:
        now = self.clock.now()
        if req.namespace not in self._namespaces:
            tx.ensure_namespace(req.namespace, DEFAULT_RETENTION, now)
        latest = tx.find_latest_run(req.namespace, req.workflow_id, lock=True)
        open_run = latest if latest is not None and latest.status == S.RUNNING else None
        if open_run is not None:
            policy = req.id_conflict_policy
            if req.id_reuse_policy == WorkflowIDReusePolicy.TERMINATE_IF_RUNNING:
                policy = WorkflowIDConflictPolicy.TERMINATE_EXISTING
            if policy == WorkflowIDConflictPolicy.USE_EXISTING:
                return StartWorkflowResult(open_run.run_id, started=False)
            if policy == WorkflowIDConflictPolicy.TERMINATE_EXISTING:
                rs = RunState(tx, tx.lock_execution(open_run.run_id) or open_run, now)
                self._terminate(rs, "terminated by a new start (TERMINATE_EXISTING)", None, "")
                rs.flush()
            else:
                raise WorkflowAlreadyStartedError(
                    req.workflow_id, open_run.workflow_type, run_id=open_run.run_id
                )
        elif req.continued_from is None and latest is not None:
            self._check_reuse(tx, req, now, latest)
        run_id = run_id or new_run_id()
        first_run_id = req.first_run_id or run_id
        values = dict(
            run_id=run_id,
            namespace=req.namespace,
            workflow_id=req.workflow_id,
            workflow_type=req.workflow_type,
            task_queue=req.task_queue,
            status=int(S.RUNNING),
            start_time=now,
            close_time=None,
            first_run_id=first_run_id,
            parent_workflow_id=None,
            parent_run_id=None,
            next_event_id=1,
            history_size_bytes=0,
            workflow_task_timeout=req.task_timeout,
            run_timeout=req.run_timeout,
            execution_timeout=req.execution_timeout,
            new_run_id=None,
            request_id=req.request_id or None,
        )
        tx.insert_execution(**values)
        rs = RunState(tx, SimpleNamespace(**values), now)
        attrs: JsonDict = {
            "workflowType": {"name": req.workflow_type},
            "taskQueue": task_queue_json(req.task_queue),
            "input": {"payloads": req.input},
        }
        if req.execution_timeout:
            attrs["workflowExecutionTimeout"] = duration_to_json(req.execution_timeout)
        if req.run_timeout:
            attrs["workflowRunTimeout"] = duration_to_json(req.run_timeout)
        attrs["workflowTaskTimeout"] = duration_to_json(req.task_timeout)
        if req.continued_from:
            attrs["continuedExecutionRunId"] = req.continued_from
            attrs["initiator"] = req.initiator or "CONTINUE_AS_NEW_INITIATOR_WORKFLOW"
        if req.last_failure:
            attrs["continuedFailure"] = req.last_failure
        attrs["originalExecutionRunId"] = run_id
        attrs["identity"] = req.identity
        attrs["firstExecutionRunId"] = first_run_id
        if req.retry_policy:
            attrs["retryPolicy"] = req.retry_policy
        attrs["attempt"] = req.attempt
        if req.memo:
            attrs["memo"] = req.memo
        attrs["firstWorkflowTaskBackoff"] = duration_to_json(req.start_delay)
        attrs["header"] = {}
        attrs["workflowId"] = req.workflow_id
        rs.add_event("WorkflowExecutionStarted", attrs)
        if req.start_delay > 0:
            tx.insert_timer(run_id, "start_delay", 0, 1, now + req.start_delay, None)
            tx.wake(TIMERS_CHANNEL)
        else:
            rs.schedule_workflow_task()
        if req.run_timeout:
            tx.insert_timer(run_id, "run_timeout", 0, 1, now + req.run_timeout, None)
            tx.wake(TIMERS_CHANNEL)
        if req.execution_timeout:
            tx.insert_timer(run_id, "run_timeout", 0, 1, now + req.execution_timeout, None)
            tx.wake(TIMERS_CHANNEL)
        rs.flush()
        return StartWorkflowResult(run_id, started=True)

    def _check_reuse(self, tx: StoreTx, req: StartWorkflowRequest, now: float, last: Row) -> None:
        ns = tx.get_namespace(req.namespace)
        retention = float(ns.retention_seconds) if ns is not None else DEFAULT_RETENTION
        if last.close_time is not None and last.close_time + retention < now:
            return  # outside retention: as if it never ran
        policy = req.id_reuse_policy
        status = S(last.status)
        if policy == WorkflowIDReusePolicy.REJECT_DUPLICATE or (
            policy == WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
            and status in (S.COMPLETED, S.CONTINUED_AS_NEW)
        ):
            raise WorkflowAlreadyStartedError(
                req.workflow_id,
                last.workflow_type,
                run_id=last.run_id,
                reason=(
                    f"a closed run ({status.name}) exists and the id reuse policy is {policy.name}"
                ),
            )

    async def signal_workflow(
        self,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        name: str,
        args: list[JsonDict],
        identity: str,
    ) -> None:
        """Record a signal on the open run."""
        await self.store.transaction(
            self._signal, namespace, workflow_id, run_id, name, args, identity
        )

    def _signal(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        name: str,
        args: list[JsonDict],
        identity: str,
    ) -> None:
        rs = self._open_run(tx, namespace, workflow_id, run_id)
        rs.record(
            "WorkflowExecutionSignaled",
            {
                "signalName": name,
                "input": {"payloads": args},
                "identity": identity,
                "header": {},
                "requestId": str(uuid.uuid4()),
            },
        )
        rs.flush()

    async def request_cancel(
        self, namespace: str, workflow_id: str, run_id: str | None, reason: str, identity: str
    ) -> None:
        """Ask the run to cancel: delivered into workflow code, which may clean up."""
        await self.store.transaction(
            self._request_cancel, namespace, workflow_id, run_id, reason, identity
        )

    def _request_cancel(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        reason: str,
        identity: str,
    ) -> None:
        rs = self._open_run(tx, namespace, workflow_id, run_id)
        attrs: JsonDict = {"identity": identity}
        if reason:
            attrs["cause"] = reason
        rs.record("WorkflowExecutionCancelRequested", attrs)
        rs.flush()

    async def terminate(
        self,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        reason: str,
        details: list[JsonDict] | None,
        identity: str,
    ) -> None:
        """End the run at once: no workflow code runs."""
        await self.store.transaction(
            self._terminate_tx, namespace, workflow_id, run_id, reason, details, identity
        )

    def _terminate_tx(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        reason: str,
        details: list[JsonDict] | None,
        identity: str,
    ) -> None:
        rs = self._open_run(tx, namespace, workflow_id, run_id)
        self._terminate(rs, reason, details, identity)
        rs.flush()

    def _terminate(
        self, rs: RunState, reason: str, details: list[JsonDict] | None, identity: str
    ) -> None:
        wft = rs.workflow_task()
        # A running task will never complete: record that it was cut short.
        if wft is not None and wft.state == WFT_STARTED and wft.scheduled_event_id is not None:
            rs.add_event(
                "WorkflowTaskFailed",
                {
                    "scheduledEventId": str(wft.scheduled_event_id),
                    "startedEventId": str(wft.started_event_id),
                    "cause": "WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND",
                    "identity": identity,
                },
            )
        rs.flush_buffered()
        attrs: JsonDict = {"reason": reason, "identity": identity}
        if details:
            attrs["details"] = {"payloads": details}
        rs.add_event("WorkflowExecutionTerminated", attrs)
        rs.close(S.TERMINATED)

    def _open_run(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None
    ) -> RunState:
        now = self.clock.now()
        if run_id:
            row = tx.lock_execution(run_id)
            if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
                raise WorkflowNotFoundError(workflow_id, run_id)
        else:
            found = tx.find_open_run(namespace, workflow_id)
            if found is None:
                raise WorkflowNotFoundError(workflow_id, None, open_only=True)
            row = tx.lock_execution(found.run_id)
            assert row is not None
        if row.status != S.RUNNING:
            raise WorkflowNotFoundError(
                workflow_id, row.run_id, open_only=True, status=S(row.status).name
            )
        return RunState(tx, row, now)

    # =================================================================================
    # reads
    # =================================================================================

    async def resolve_run(self, namespace: str, workflow_id: str, run_id: str | None) -> Row:
        """The run row for (workflow id, run id), or the latest run of the workflow id."""
        return await self.store.transaction(self._resolve_run, namespace, workflow_id, run_id)

    def _resolve_run(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None
    ) -> Row:
        row = tx.get_execution(run_id) if run_id else tx.find_latest_run(namespace, workflow_id)
        if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
            raise WorkflowNotFoundError(workflow_id, run_id)
        return row

    async def history(self, run_id: str, first_event_id: int = 1) -> list[HistoryEvent]:
        """The stored history of a run."""
        return await self.store.transaction(_read_history, run_id, first_event_id)

    async def closed_among(self, run_ids: list[str]) -> list[str]:
        """Which of these runs are closed."""

        def fn(tx: StoreTx) -> list[str]:
            return tx.closed_among(run_ids)

        return await self.store.transaction(fn)

    async def attempts(self, run_id: str) -> list[JsonDict]:
        """All activity attempts of a run."""

        def fn(tx: StoreTx) -> list[JsonDict]:
            out = []
            for r in tx.attempts_of_run(run_id):
                out.append(
                    {
                        "scheduled_event_id": r.scheduled_event_id,
                        "activity_id": r.activity_id,
                        "activity_type": r.activity_type,
                        "attempt": r.attempt,
                        "identity": r.identity,
                        "scheduled_time": _dt(r.scheduled_time),
                        "started_time": _dt(r.started_time),
                        "ended_time": _dt(r.ended_time),
                        "outcome": r.outcome,
                        "failure": json.loads(r.failure) if r.failure else None,
                    }
                )
            return out

        return await self.store.transaction(fn)

    async def close_event(self, run_id: str) -> HistoryEvent | None:
        """The last event of a run (its closing event once closed)."""

        def fn(tx: StoreTx) -> HistoryEvent | None:
            row = tx.last_event(run_id)
            if row is None:
                return None
            return HistoryEvent(
                row.event_id, row.event_time, row.event_type, json.loads(row.attributes)
            )

        return await self.store.transaction(fn)

    async def describe(self, namespace: str, workflow_id: str, run_id: str | None) -> Description:
        """Run row plus pending work."""
        return await self.store.transaction(self._describe, namespace, workflow_id, run_id)

    def _describe(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None
    ) -> Description:
        row = self._resolve_run(tx, namespace, workflow_id, run_id)
        pending = []
        for act in tx.activity_tasks_of_run(row.run_id):
            pending.append(
                {
                    "activity_id": act.activity_id,
                    "activity_type": act.activity_type,
                    "scheduled_event_id": act.scheduled_event_id,
                    "state": {1: "SCHEDULED", 2: "STARTED", 3: "BACKOFF"}[act.state],
                    "attempt": act.attempt,
                    "last_failure": json.loads(act.last_failure) if act.last_failure else None,
                    "last_heartbeat_time": act.last_heartbeat_time,
                    "heartbeat_details": json.loads(act.heartbeat_details)
                    if act.heartbeat_details
                    else [],
                    "cancel_requested": bool(act.cancel_requested),
                    "next_attempt_at": act.visible_at if act.state == 3 else None,
                }
            )
        wft = tx.get_workflow_task(row.run_id)
        pending_wft = None
        if wft is not None:
            pending_wft = {
                "state": "STARTED" if wft.state == WFT_STARTED else "SCHEDULED",
                "attempt": wft.attempt,
                "scheduled_time": wft.scheduled_time,
            }
        pending_timers = [
            {"timer_id": t.data, "fire_at": t.fire_at, "started_event_id": t.ref}
            for t in tx.timers_of_run(row.run_id)
            if t.kind == "user"
        ]
        return Description(
            namespace=row.namespace,
            workflow_id=row.workflow_id,
            run_id=row.run_id,
            workflow_type=row.workflow_type,
            task_queue=row.task_queue,
            status=row.status,
            start_time=row.start_time,
            close_time=row.close_time,
            history_length=row.next_event_id - 1,
            history_size_bytes=row.history_size_bytes,
            first_run_id=row.first_run_id,
            new_run_id=row.new_run_id,
            parent_workflow_id=row.parent_workflow_id,
            parent_run_id=row.parent_run_id,
            pending_activities=pending,
            pending_workflow_task=pending_wft,
            pending_timers=pending_timers,
        )

    async def list_runs(
        self, namespace: str, limit: int = 100, workflow_id: str | None = None
    ) -> list[Row]:
        """Runs of the namespace, newest first."""

        def fn(tx: StoreTx) -> list[Row]:
            return list(tx.list_executions(namespace, limit=limit, workflow_id=workflow_id))

        return await self.store.transaction(fn)

    # =================================================================================
    # workflow tasks
    # =================================================================================

    async def poll_workflow_task(
        self, namespace: str, task_queue: str, identity: str, cached: dict[str, int]
    ) -> WorkflowTask | None:
        """Claim a ready workflow task, or return None. ``cached`` maps run id → the next
        event id a worker already holds, so only the new events are read."""
        return await self.store.transaction(
            self._poll_workflow_task, namespace, task_queue, identity, cached
        )

    def _poll_workflow_task(
        self, tx: StoreTx, namespace: str, task_queue: str, identity: str, cached: dict[str, int]
    ) -> WorkflowTask | None:
        now = self.clock.now()
        run_id = tx.next_workflow_task(namespace, task_queue, now)
        if run_id is None:
            return None
        row = tx.lock_execution(run_id)
        assert row is not None
        rs = RunState(tx, row, now)
        wft = rs.workflow_task()
        assert wft is not None and wft.state == WFT_SCHEDULED
        request_id = str(uuid.uuid4())
        attempt = int(wft.attempt)
        transient: list[HistoryEvent] = []
        suggest = rs.next_event_id > SUGGEST_CAN_EVENTS or rs.history_size > SUGGEST_CAN_BYTES
        started_attrs: JsonDict = {
            "identity": identity,
            "requestId": request_id,
            "historySizeBytes": str(rs.history_size),
        }
        if suggest:
            started_attrs["suggestContinueAsNew"] = True
        if attempt == 1:
            started_attrs = {"scheduledEventId": str(wft.scheduled_event_id), **started_attrs}
            scheduled_event_id = int(wft.scheduled_event_id)
            started_event_id = rs.add_event("WorkflowTaskStarted", started_attrs)
        else:
            # A retried task is transient: its events are shown to the worker but only
            # written to history if the attempt completes.
            scheduled_event_id = rs.next_event_id
            started_event_id = scheduled_event_id + 1
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
                HistoryEvent(
                    started_event_id,
                    now,
                    "WorkflowTaskStarted",
                    {"scheduledEventId": str(scheduled_event_id), **started_attrs},
                ),
            ]
        tx.update_workflow_task(
            run_id,
            state=WFT_STARTED,
            started_event_id=started_event_id,
            started_time=now,
            identity=identity,
            request_id=request_id,
        )
        tx.insert_timer(
            run_id, "wft_timeout", started_event_id, attempt, now + float(wft.start_to_close), None
        )
        rs.flush()
        first = cached.get(run_id, 1)
        if first > rs.next_event_id:
            first = 1
        events = _read_history(tx, run_id, first) + transient
        return WorkflowTask(
            namespace=namespace,
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
        )

    async def complete_workflow_task(
        self, task: WorkflowTask, commands: list[cmd.Command], identity: str
    ) -> bool:
        """Record a completed workflow task and turn its commands into events.

        Returns False when the completion was refused because new events arrived while the
        task ran and it tried to close the run: the worker must replay afresh.
        """
        return await self.store.transaction(self._complete_workflow_task, task, commands, identity)

    def _current_wft(self, tx: StoreTx, task: WorkflowTask) -> tuple[RunState, Row]:
        row = tx.lock_execution(task.run_id)
        if row is None or row.status != S.RUNNING:
            raise TaskNotFoundError(f"run {task.run_id} is closed")
        rs = RunState(tx, row, self.clock.now())
        wft = rs.workflow_task()
        if wft is None or wft.state != WFT_STARTED or wft.request_id != task.request_id:
            raise TaskNotFoundError(f"workflow task of run {task.run_id} is no longer current")
        return rs, wft

    def _complete_workflow_task(
        self, tx: StoreTx, task: WorkflowTask, commands: list[cmd.Command], identity: str
    ) -> bool:
        rs, wft = self._current_wft(tx, task)
        if wft.scheduled_event_id is None:
            scheduled_id, started_id = rs.write_transient_wft_events(wft)
        else:
            scheduled_id, started_id = int(wft.scheduled_event_id), int(wft.started_event_id)
        rs.forget_workflow_task()
        closing = [c for c in commands if isinstance(c, cmd.CLOSING_COMMANDS)]
        # New events arrived while the task ran and it tries to close the run: Temporal
        # rejects the completion so the workflow sees them first.
        if closing and tx.has_buffered(task.run_id):
            rs.add_event(
                "WorkflowTaskFailed",
                {
                    "scheduledEventId": str(scheduled_id),
                    "startedEventId": str(started_id),
                    "cause": "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND",
                    "identity": identity,
                },
            )
            rs.flush_buffered()
            rs.wft_wanted = True
            rs.flush()
            return False
        completed_id = rs.add_event(
            "WorkflowTaskCompleted",
            {
                "scheduledEventId": str(scheduled_id),
                "startedEventId": str(started_id),
                "identity": identity,
                "sdkMetadata": {},
                "meteringMetadata": {},
            },
        )
        continue_as_new: cmd.ContinueAsNewWorkflowExecution | None = None
        for command in commands:
            if not rs.is_open:
                break
            if isinstance(command, cmd.ContinueAsNewWorkflowExecution):
                continue_as_new = command
            self._apply_command(rs, command, completed_id, identity)
        if rs.is_open:
            if rs.flush_buffered():
                rs.wft_wanted = True
            if rs.next_event_id > HISTORY_MAX_EVENTS or rs.history_size > HISTORY_MAX_BYTES:
                self._terminate(
                    rs,
                    f"history size exceeds the limit ({HISTORY_MAX_EVENTS} events or "
                    f"{HISTORY_MAX_BYTES // (1024 * 1024)} MB): use continue-as-new",
                    None,
                    "service",
                )
        rs.flush()
        if continue_as_new is not None:
            self._start_continued(tx, rs, continue_as_new, identity)
        return True

    def _apply_command(
        self, rs: RunState, command: cmd.Command, completed_id: int, identity: str
    ) -> None:
        wtc = str(completed_id)
        if isinstance(command, cmd.ScheduleActivityTask):
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
            )
            rs.tx.insert_timer(
                rs.run_id, "user", started, 1, rs.now + command.duration, command.timer_id
            )
            rs.tx.wake(TIMERS_CHANNEL)
        elif isinstance(command, cmd.CancelTimer):
            started_id = _user_timer_started_id(rs, command.timer_id)
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
        elif isinstance(command, cmd.RecordMarker):
            attrs: JsonDict = {"markerName": command.marker_name, "details": command.details}
            attrs["workflowTaskCompletedEventId"] = wtc
            if command.failure:
                attrs["failure"] = command.failure
            rs.add_event("MarkerRecorded", attrs)
        elif isinstance(command, cmd.CompleteWorkflowExecution):
            rs.add_event(
                "WorkflowExecutionCompleted",
                {"result": {"payloads": command.result}, "workflowTaskCompletedEventId": wtc},
            )
            rs.close(S.COMPLETED)
        elif isinstance(command, cmd.FailWorkflowExecution):
            rs.add_event(
                "WorkflowExecutionFailed",
                {
                    "failure": command.failure,
                    "retryState": "RETRY_STATE_RETRY_POLICY_NOT_SET",
                    "workflowTaskCompletedEventId": wtc,
                },
            )
            rs.close(S.FAILED)
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
            rs.add_event("WorkflowExecutionContinuedAsNew", attrs)
            rs.close(S.CONTINUED_AS_NEW, new_run_id=new_id)
        else:
            raise InvalidArgumentError(f"unknown command {type(command).__name__}")

    def _start_continued(
        self,
        tx: StoreTx,
        rs: RunState,
        command: cmd.ContinueAsNewWorkflowExecution,
        identity: str,
    ) -> None:
        row = rs.row
        req = StartWorkflowRequest(
            namespace=row.namespace,
            workflow_id=row.workflow_id,
            workflow_type=command.workflow_type,
            task_queue=command.task_queue,
            input=command.input,
            task_timeout=command.task_timeout or float(row.workflow_task_timeout),
            run_timeout=command.run_timeout or row.run_timeout,
            identity=identity,
            continued_from=row.run_id,
            first_run_id=row.first_run_id,
        )
        # The new run takes the id the closing event announced.
        self._start_workflow(tx, req, rs.new_run_id)

    async def fail_workflow_task(
        self, task: WorkflowTask, cause: str, failure: JsonDict, identity: str
    ) -> None:
        """Record a failed workflow task; the run stays open and the task is retried."""
        await self.store.transaction(self._fail_workflow_task, task, cause, failure, identity)

    def _fail_workflow_task(
        self, tx: StoreTx, task: WorkflowTask, cause: str, failure: JsonDict, identity: str
    ) -> None:
        rs, wft = self._current_wft(tx, task)
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

    async def retry_workflow_tasks_now(self, namespace: str, workflow_type: str) -> int:
        """Make backed-off workflow tasks of a type runnable at once (after a code fix)."""

        def fn(tx: StoreTx) -> int:
            queues = tx.expedite_workflow_tasks(namespace, workflow_type, self.clock.now())
            for queue in queues:
                tx.wake(wft_channel(namespace, queue))
            return len(queues)

        return await self.store.transaction(fn)


def wft_retry_delay(failed_attempt: int) -> float:
    """Backoff before retrying a workflow task that failed ``failed_attempt`` times."""
    if failed_attempt <= 1:
        return 0.0 if failed_attempt < 1 else 1.0
    return float(min(WFT_RETRY_MAX_DELAY, 2 ** (failed_attempt - 1)))


def _dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _user_timer_started_id(rs: RunState, timer_id: str) -> int:
    for timer in rs.tx.timers_of_run(rs.run_id):
        if timer.kind == "user" and timer.data == timer_id:
            return int(timer.ref)
    return 0


def _read_history(tx: StoreTx, run_id: str, first_event_id: int = 1) -> list[HistoryEvent]:
    return [
        HistoryEvent(r.event_id, r.event_time, r.event_type, json.loads(r.attributes))
        for r in tx.read_events(run_id, first_event_id)
    ]
