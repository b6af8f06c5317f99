"""The service: turns requests and commands into history events. It never runs user code.

Each operation is one transaction on the store, written once as its transaction function
with ``@operation`` (``operation.py``): ``store.read`` for those that only read (on SQLite a
reader connection, no write lock), ``store.transaction`` for changes.
Workflow-task and run-level operations live here; activity operations in ``activities.py``;
timers in ``timers.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from .._ids import random_uuid
from .._json import compact_dumps
from .._json import loads as json_loads
from .._model.cron import cron_backoff
from .._model.events import HistoryEvent
from .._store.ahead import LatestRun
from .._store.gateway import Store
from .._store.schema import DEFAULT_RETENTION_SECONDS, WFT_STARTED
from .._store.shared_time import now as tx_now
from .._store.tx import Row, StoreTx
from ..common import (
    SearchAttributeIndexedValueType,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
    duration_to_json,
)
from ..exceptions import (
    InvalidArgumentError,
    WorkflowAlreadyStartedError,
    WorkflowNotFoundError,
    WorkflowQueryFailedError,
)
from .activity_ops import ActivityOps
from .clock import Clock
from .close_reads import CloseReadOps, CloseReads
from .handoff import Handoffs, Reservation
from .namespaces import NamespaceOps, not_found
from .operation import operation
from .schedules import ScheduleOps
from .search_attributes import SearchAttributeOps, visibility_changes
from .state import (
    RunState,
    add_timer,
    new_run_id,
    query_channel,
    task_queue_json,
    wft_channel,
)
from .types import (
    Description,
    StartWorkflowRequest,
    StartWorkflowResult,
)
from .update_ops import UpdateOps
from .visibility import TEXT_ORDER_COLUMNS, Attribute, compile_filter
from .watch import CloseWatcher
from .workflow_tasks import WorkflowTaskOps, _read_history

JsonDict = dict[str, Any]
S = WorkflowExecutionStatus

_dumps = compact_dumps()


def _start_locks(req: StartWorkflowRequest, *_: Any, **__: Any) -> tuple[LatestRun, ...]:
    """A start locks the latest run of its workflow id (its conflict and reuse checks)."""
    return (LatestRun(req.namespace, req.workflow_id),)


class Service(
    WorkflowTaskOps,
    ActivityOps,
    UpdateOps,
    SearchAttributeOps,
    NamespaceOps,
    ScheduleOps,
    CloseReadOps,
):
    """State transitions over one store. Any process may create one; all share the store."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock or Clock()
        self._namespaces: set[str] = set()
        self.close_watcher = CloseWatcher(self)
        self.close_reads = CloseReads(self)
        #: Runners of this process polling this store: work a transaction makes may be
        #: handed straight to one (see ``handoff.py``).
        self.handoffs = Handoffs()

    # =================================================================================
    # runs
    # =================================================================================

    # Another start of the same workflow id may win the race (PostgreSQL): run again, now
    # seeing its run, so the id policies decide as usual.
    @operation(conflict_retries=2, locks=_start_locks, inline=True)
    def start_workflow(
        self, tx: StoreTx, req: StartWorkflowRequest, eager: Reservation | None = None
    ) -> StartWorkflowResult:
        """Start a run, applying the id reuse and conflict policies.

        With ``eager`` (a worker of this process with a free slot on the run's task queue),
        a new run's first workflow task is started for that worker in the same transaction
        and returned in the result: no trip through the queue (Temporal's eager start).
        """
        return self._start_workflow(tx, req, None, eager)

    def _start_workflow(
        self,
        tx: StoreTx,
        req: StartWorkflowRequest,
        run_id: str | None = None,
        eager: Reservation | None = None,
    ) -> StartWorkflowResult:
        now = tx_now(self.clock)
        self.require_namespace(tx, req.namespace)
        latest = tx.find_latest_run(req.namespace, req.workflow_id, lock=True)
        if (
            latest is not None
            and req.request_id
            and latest.request_id == req.request_id
            and req.continued_from is None
        ):
            # This very request again: its first try committed, but the connection was
            # lost before the answer came back, and the store ran it again. Its run, as
            # Temporal answers a start whose request id it has seen.
            return StartWorkflowResult(latest.run_id, started=True)
        open_run = latest if latest is not None and latest.status == S.RUNNING else None
        if open_run is not None and req.start_signal is not None:
            # Signal-with-start of a running workflow: only the signal (as on Temporal,
            # whatever the conflict policy says).
            if req.request_id and not tx.claim_request(open_run.run_id, req.request_id, now):
                # Its signal is recorded already: this request again (see above).
                return StartWorkflowResult(open_run.run_id, started=False)
            rs = RunState(tx, tx.lock_execution(open_run.run_id) or open_run, now)
            self._record_signal(
                rs,
                req.start_signal,
                req.start_signal_input or [],
                req.identity,
                req.request_id,
            )
            rs.flush()
            return StartWorkflowResult(open_run.run_id, started=False)
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
        if req.cron_schedule and req.initiator != "CONTINUE_AS_NEW_INITIATOR_RETRY":
            # A cron run's first workflow task waits for the schedule's next time (a retry
            # of one waits for its backoff instead).
            scheduled = req.cron_previous_time if req.cron_previous_time is not None else now
            req = dataclasses.replace(
                req, start_delay=cron_backoff(req.cron_schedule, scheduled, now)
            )
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
            parent_workflow_id=req.parent_workflow_id,
            parent_run_id=req.parent_run_id,
            next_event_id=1,
            history_size_bytes=0,
            workflow_task_timeout=req.task_timeout,
            run_timeout=req.run_timeout,
            execution_timeout=req.execution_timeout,
            new_run_id=None,
            request_id=req.request_id or None,
            parent_initiated_event_id=req.parent_initiated_event_id,
            parent_started_event_id=None,
            parent_close_policy=req.parent_close_policy,
            has_updates=0,
            cron_schedule=req.cron_schedule or None,
            memo=_dumps(req.memo["fields"]) if req.memo and req.memo.get("fields") else None,
            root_workflow_id=req.root_workflow_id or req.workflow_id,
            root_run_id=req.root_run_id or run_id,
            execution_time=now + req.start_delay,
            schedule_key=req.schedule_key,
        )
        rs = RunState(tx, SimpleNamespace(**values), now, new=True)
        attrs: JsonDict = {
            "workflowType": {"name": req.workflow_type},
            "taskQueue": task_queue_json(req.task_queue),
            "input": {"payloads": req.input},
        }
        if req.parent_run_id:
            attrs["parentWorkflowNamespace"] = req.namespace
            attrs["parentWorkflowExecution"] = {
                "workflowId": req.parent_workflow_id,
                "runId": req.parent_run_id,
            }
            attrs["parentInitiatedEventId"] = str(req.parent_initiated_event_id or 0)
        if req.execution_timeout:
            attrs["workflowExecutionTimeout"] = duration_to_json(req.execution_timeout)
        if req.run_timeout:
            attrs["workflowRunTimeout"] = duration_to_json(req.run_timeout)
        attrs["workflowTaskTimeout"] = duration_to_json(req.task_timeout)
        if req.continued_from:
            attrs["continuedExecutionRunId"] = req.continued_from
            attrs["initiator"] = req.initiator or "CONTINUE_AS_NEW_INITIATOR_WORKFLOW"
        elif req.cron_schedule:
            attrs["initiator"] = "CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE"
        if req.last_failure:
            attrs["continuedFailure"] = req.last_failure
        if req.last_completion_result:
            attrs["lastCompletionResult"] = {"payloads": req.last_completion_result}
        attrs["originalExecutionRunId"] = run_id
        attrs["identity"] = req.identity
        attrs["firstExecutionRunId"] = first_run_id
        if req.retry_policy:
            attrs["retryPolicy"] = req.retry_policy
        attrs["attempt"] = req.attempt
        # In the protobuf's field order (cronSchedule 20, the backoff 21, memo 22).
        if req.cron_schedule:
            attrs["cronSchedule"] = req.cron_schedule
        attrs["firstWorkflowTaskBackoff"] = duration_to_json(req.start_delay)
        if req.memo:
            attrs["memo"] = req.memo
        if req.search_attributes:
            columns, held, recorded = visibility_changes(
                tx, req.namespace, req.search_attributes, None, scheduled=bool(req.schedule_key)
            )
            rs.visibility.update(columns, search_attributes=_dumps(held) if held else None)
            attrs["searchAttributes"] = {"indexedFields": recorded}
        attrs["workflowId"] = req.workflow_id
        if req.root_run_id:
            attrs["rootWorkflowExecution"] = {
                "workflowId": req.root_workflow_id,
                "runId": req.root_run_id,
            }
        rs.add_event("WorkflowExecutionStarted", attrs, user_metadata=req.user_metadata)
        if req.start_signal is not None:
            # Written as is, not as a signal that wants a task: the first task comes after
            # the start delay (or the cron schedule's next time), with the signal in it.
            rs.add_event(
                "WorkflowExecutionSignaled",
                self._signal_attrs(
                    req.start_signal, req.start_signal_input or [], req.identity, req.request_id
                ),
            )
        if eager is not None and (req.start_delay > 0 or eager.task_queue != req.task_queue):
            eager = None
        if req.start_delay > 0:
            add_timer(tx, now, run_id, "start_delay", 0, 1, now + req.start_delay, None)
        else:
            # An eager start keeps the task row in memory: it is inserted already started.
            rs.schedule_workflow_task(defer_insert=eager is not None)
        if req.run_timeout:
            add_timer(tx, now, run_id, "run_timeout", 0, 1, now + req.run_timeout, None)
        if req.execution_timeout:
            # The execution timeout spans retries and continue-as-new: it counts from the
            # start of the first run.
            first = tx.get_execution(first_run_id) if first_run_id != run_id else None
            began = float(first.start_time) if first is not None else now
            add_timer(tx, now, run_id, "run_timeout", 0, 1, began + req.execution_timeout, None)
        if eager is None:
            rs.flush()
            return StartWorkflowResult(run_id, started=True)
        # Started here (its row is written started): pollers of the queue are not woken.
        task = self._start_task(rs, eager.identity, eager.cached)
        return StartWorkflowResult(run_id, started=True, task=task)

    def _check_reuse(self, tx: StoreTx, req: StartWorkflowRequest, now: float, last: Row) -> None:
        ns = tx.get_namespace(req.namespace)
        retention = float(ns.retention_seconds) if ns is not None else DEFAULT_RETENTION_SECONDS
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

    @operation(inline=True)
    def signal_workflow(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        name: str,
        args: list[JsonDict],
        identity: str,
        request_id: str = "",
    ) -> None:
        """Record a signal on the open run (once per ``request_id``: the same request
        run again after an ambiguous commit records nothing)."""
        rs = self._open_run_once(tx, namespace, workflow_id, run_id, None, request_id)
        if rs is None:
            return
        self._record_signal(rs, name, args, identity, request_id)
        rs.flush()

    @staticmethod
    def _signal_attrs(name: str, args: list[JsonDict], identity: str, request_id: str) -> JsonDict:
        return {
            "signalName": name,
            "input": {"payloads": args},
            "identity": identity,
            "requestId": request_id or random_uuid(),
        }

    def _record_signal(
        self, rs: RunState, name: str, args: list[JsonDict], identity: str, request_id: str = ""
    ) -> None:
        rs.record("WorkflowExecutionSignaled", self._signal_attrs(name, args, identity, request_id))

    @operation
    def request_cancel(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        reason: str,
        identity: str,
        first_execution_run_id: str | None = None,
    ) -> None:
        """Ask the run to cancel: delivered into workflow code, which may clean up.
        ``first_execution_run_id``: the run must be of that run's chain (checked under
        the run's lock, so a new chain started meanwhile is never the one cancelled).

        As on Temporal, asking again, or asking a run that has closed, succeeds and
        changes nothing (so a request run again after an ambiguous commit is harmless);
        only a run that does not exist is :class:`WorkflowNotFoundError`."""
        row = self._target_run(tx, namespace, workflow_id, run_id)
        if row.status != S.RUNNING:
            return
        self._check_chain(tx, row, first_execution_run_id)
        rs = RunState(tx, row, tx_now(self.clock))
        attrs: JsonDict = {"identity": identity}
        if reason:
            attrs["cause"] = reason
        if rs.request_cancel(attrs):
            rs.flush()

    @operation
    def terminate(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        reason: str,
        details: list[JsonDict] | None,
        identity: str,
        first_execution_run_id: str | None = None,
        request_id: str = "",
    ) -> None:
        """End the run at once: no workflow code runs (``first_execution_run_id`` as for
        :meth:`request_cancel`). A closed run is :class:`WorkflowNotFoundError`, as on
        Temporal, except for the request that closed it, run again (``request_id``)."""
        rs = self._open_run_once(
            tx, namespace, workflow_id, run_id, first_execution_run_id, request_id
        )
        if rs is None:
            return
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
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        first_execution_run_id: str | None = None,
    ) -> RunState:
        """The run a request is for, locked, checked to be open."""
        rs = self._open_run_once(tx, namespace, workflow_id, run_id, first_execution_run_id, "")
        assert rs is not None
        return rs

    def _open_run_once(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        first_execution_run_id: str | None,
        request_id: str,
    ) -> RunState | None:
        """:meth:`_open_run` for request ``request_id`` (none: ""): None when that request
        has already been recorded on the run (run again after an ambiguous commit); else
        the request is noted on it."""
        row = self._target_run(tx, namespace, workflow_id, run_id)
        now = tx_now(self.clock)
        if request_id and not tx.claim_request(row.run_id, request_id, now):
            return None
        self._check_chain(tx, row, first_execution_run_id)
        if row.status != S.RUNNING:
            raise WorkflowNotFoundError(
                workflow_id, row.run_id, open_only=True, status=S(row.status).name
            )
        return RunState(tx, row, now)

    @staticmethod
    def _target_run(tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None) -> Row:
        """The run named (or the open run of the workflow id; else its latest), locked."""
        if run_id:
            row = tx.lock_execution(run_id)
            if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
                raise not_found(tx, namespace, workflow_id, run_id)
            return row
        found = tx.find_open_run(namespace, workflow_id) or tx.find_latest_run(
            namespace, workflow_id
        )
        if found is None:
            raise not_found(tx, namespace, workflow_id, None, open_only=True)
        row = tx.lock_execution(found.run_id)
        if row is None:  # deleted by the retention sweep since it was read
            raise not_found(tx, namespace, workflow_id, None, open_only=True)
        return row

    @staticmethod
    def _check_chain(tx: StoreTx, row: Row, first: str | None) -> None:
        if first and first not in (row.run_id, row.first_run_id):
            # Any run of the chain names it (a start that attached to a running run hands
            # out that run's id), as long as it shares the chain's first run.
            named = tx.get_execution(first)
            if named is None or named.first_run_id != row.first_run_id:
                raise WorkflowNotFoundError(row.workflow_id, first)

    # =================================================================================
    # reads
    # =================================================================================

    @operation(read=True)
    def resolve_run(self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None) -> Row:
        """The run row for (workflow id, run id), or the latest run of the workflow id."""
        return _resolve_run(tx, namespace, workflow_id, run_id)

    @operation(read=True)
    def history(
        self, tx: StoreTx, run_id: str, first_event_id: int = 1, last_event_id: int | None = None
    ) -> list[HistoryEvent]:
        """The stored history of a run (the events from ``first_event_id`` to
        ``last_event_id``)."""
        return _read_history(tx, run_id, first_event_id, last_event_id)

    @operation(read=True)
    def query_history(self, tx: StoreTx, run_id: str) -> tuple[list[HistoryEvent], bool]:
        """The history a query replays, and whether a workflow task of the run is running
        now: its answer then waits for the task, as Temporal's server holds a query back
        while a task is in flight (a signal that came in meanwhile is buffered, not yet in
        the history, and the query must see it)."""
        wft = tx.get_workflow_task(run_id)
        return _read_history(tx, run_id), wft is not None and wft.state == WFT_STARTED

    @operation(read=True)
    def run_history(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None
    ) -> tuple[Row, list[HistoryEvent]]:
        """The run row (as :meth:`resolve_run` finds it) and its whole history, read in
        one snapshot."""
        row = _resolve_run(tx, namespace, workflow_id, run_id)
        return row, _read_history(tx, row.run_id)

    async def query_workflow(
        self,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        query_type: str,
        args: list[JsonDict],
        timeout: float,
    ) -> list[JsonDict]:
        """Ask a worker of the run's task queue to answer a query; wait for the answer.

        Works on open and closed runs; nothing is written to the history.
        """
        query_id, task_queue = await self._ask_query(
            namespace, workflow_id, run_id, query_type, args
        )
        notifier = self.store.notifier
        channel = query_channel(query_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout

        try:
            while True:
                generation = notifier.generation(channel)
                # A read: the answered query is deleted below, in the ``finally``.
                row = await self.store.read(StoreTx.get_query, query_id)
                if row is not None and row.state == 3:
                    if row.failure:
                        raise WorkflowQueryFailedError(
                            json_loads(row.failure).get("message", "failed")
                        )
                    return list(json_loads(row.answer or "[]"))
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise WorkflowQueryFailedError(
                        f"no worker answered query {query_type!r} of workflow {workflow_id!r} "
                        f"within {timeout:g}s: is a worker with this workflow polling task "
                        f"queue {task_queue!r}?"
                    )
                await notifier.wait(channel, min(remaining, 0.5), since=generation)
        finally:
            await self._forget_query(query_id)

    @operation
    def _ask_query(
        self,
        tx: StoreTx,
        namespace: str,
        workflow_id: str,
        run_id: str | None,
        query_type: str,
        args: list[JsonDict],
    ) -> tuple[int, str]:
        """Queue a query for the run's task queue; its id and the task queue."""
        row = _resolve_run(tx, namespace, workflow_id, run_id)
        query_id = tx.insert_query(
            namespace=namespace,
            task_queue=row.task_queue,
            run_id=row.run_id,
            query_type=query_type,
            args=json.dumps(args),
            created_at=tx_now(self.clock),
        )
        tx.wake(wft_channel(namespace, row.task_queue))
        return query_id, str(row.task_queue)

    @operation
    def _forget_query(self, tx: StoreTx, query_id: int) -> None:
        """Delete a query, answered or given up on."""
        tx.delete_query(query_id)

    @operation
    def answer_query(
        self, tx: StoreTx, query_id: int, answer: list[JsonDict] | None, failure: str | None
    ) -> None:
        """Store a worker's answer to a query and wake the asker."""
        tx.answer_query(
            query_id,
            None if answer is None else json.dumps(answer),
            None if failure is None else json.dumps({"message": failure}),
        )
        tx.wake(query_channel(query_id))

    @operation(read=True)
    def closed_among(self, tx: StoreTx, run_ids: list[str]) -> list[str]:
        """Which of these runs are closed."""
        return tx.closed_among(run_ids)

    @operation(read=True)
    def attempts(self, tx: StoreTx, run_id: str) -> list[JsonDict]:
        """All activity attempts of a run."""
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
                    "failure": json_loads(r.failure) if r.failure else None,
                }
            )
        return out

    @operation(read=True)
    def describe(
        self, tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None
    ) -> Description:
        """Run row plus pending work."""
        row = _resolve_run(tx, namespace, workflow_id, run_id)
        pending = []
        for act in tx.activity_tasks_of_run(row.run_id):
            pending.append(
                {
                    "activity_id": act.activity_id,
                    "activity_type": act.activity_type,
                    "scheduled_event_id": act.scheduled_event_id,
                    "state": {1: "SCHEDULED", 2: "STARTED", 3: "BACKOFF"}[act.state],
                    "attempt": act.attempt,
                    "last_failure": json_loads(act.last_failure) if act.last_failure else None,
                    "last_heartbeat_time": act.last_heartbeat_time,
                    "heartbeat_details": json_loads(act.heartbeat_details)
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
        first = tx.first_event(row.run_id)
        visible = tx.get_visibility(row.run_id)
        held = visible.search_attributes if visible is not None else None
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
            memo=json_loads(row.memo) if row.memo else {},
            user_metadata=(json_loads(first.extra) if first and first.extra else {}).get(
                "userMetadata"
            )
            or {},
            root_workflow_id=row.root_workflow_id,
            root_run_id=row.root_run_id,
            execution_time=row.execution_time,
            search_attributes=json_loads(held) if held else {},
        )

    @operation(read=True)
    def list_runs(
        self,
        tx: StoreTx,
        namespace: str,
        limit: int = 100,
        query: str | None = None,
        after: Sequence[Any] | None = None,
    ) -> list[Row]:
        """Runs of the namespace matching the List Filter ``query``, in its order (open
        runs first, then closed ones newest first, when it gives none); with ``after``
        (the order values ``o0``, ``o1``... of a row), the page that follows that row."""
        self.require_namespace(tx, namespace)
        compiled = compile_filter(
            query, custom_attributes(tx, namespace), postgres=tx.postgres, namespace=namespace
        )
        if after is not None and (
            len(after) != len(compiled.order)
            or any(
                isinstance(value, str) != (column in TEXT_ORDER_COLUMNS)
                for value, (column, _) in zip(after, compiled.order, strict=True)
            )
        ):
            raise InvalidArgumentError(
                "the page token does not belong to this query's order: list again from "
                "the first page"
            )
        return tx.list_visibility(
            namespace, compiled.where, compiled.params, compiled.order, after, limit
        )

    @operation(read=True)
    def count_runs(
        self, tx: StoreTx, namespace: str, query: str | None = None
    ) -> list[tuple[Any, int]]:
        """How many runs match ``query``: ``[(None, n)]``, or ``[(status, n), ...]`` for
        ``GROUP BY ExecutionStatus``."""
        self.require_namespace(tx, namespace)
        compiled = compile_filter(
            query,
            custom_attributes(tx, namespace),
            postgres=tx.postgres,
            counting=True,
            namespace=namespace,
        )
        return tx.count_visibility(namespace, compiled.where, compiled.params, compiled.group_by)


def custom_attributes(tx: StoreTx, namespace: str) -> dict[str, Attribute]:
    """The custom search attributes registered in ``namespace``, by name."""
    return {
        r.name: Attribute(
            r.name, SearchAttributeIndexedValueType(r.value_type), r.column_name, True
        )
        for r in tx.search_attributes(namespace)
    }


def _resolve_run(tx: StoreTx, namespace: str, workflow_id: str, run_id: str | None) -> Row:
    row = tx.get_execution(run_id) if run_id else tx.find_latest_run(namespace, workflow_id)
    if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
        raise not_found(tx, namespace, workflow_id, run_id)
    return row


def _dt(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)
