"""Child workflows and cancel requests to other runs: commands of a completed workflow task
that reach beyond the run (a mixin of :class:`~engine._service.service.Service`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._ids import random_uuid
from .._json import loads as json_loads
from .._model import commands as cmd
from ..common import WorkflowExecutionStatus, WorkflowIDReusePolicy, duration_to_json
from ..exceptions import WorkflowAlreadyStartedError
from .state import RunState, task_queue_json
from .types import StartWorkflowRequest, StartWorkflowResult

JsonDict = dict[str, Any]
S = WorkflowExecutionStatus

_PARENT_CLOSE = {0: "UNSPECIFIED", 1: "TERMINATE", 2: "ABANDON", 3: "REQUEST_CANCEL"}
_REUSE = {
    0: "UNSPECIFIED",
    1: "ALLOW_DUPLICATE",
    2: "ALLOW_DUPLICATE_FAILED_ONLY",
    3: "REJECT_DUPLICATE",
    4: "TERMINATE_IF_RUNNING",
}


class ChildOps:
    """Starting child workflows and asking other runs to cancel."""

    _start_workflow: Callable[..., StartWorkflowResult]

    def _start_child(
        self, rs: RunState, c: cmd.StartChildWorkflowExecution, wtc: str, identity: str
    ) -> None:
        attrs: JsonDict = {
            "namespace": rs.namespace,
            "workflowId": c.workflow_id,
            "workflowType": {"name": c.workflow_type},
            "taskQueue": task_queue_json(c.task_queue),
            "input": {"payloads": c.input},
        }
        if c.execution_timeout:
            attrs["workflowExecutionTimeout"] = duration_to_json(c.execution_timeout)
        if c.run_timeout:
            attrs["workflowRunTimeout"] = duration_to_json(c.run_timeout)
        attrs["workflowTaskTimeout"] = duration_to_json(c.task_timeout or 10.0)
        attrs["parentClosePolicy"] = "PARENT_CLOSE_POLICY_" + _PARENT_CLOSE[c.parent_close_policy]
        attrs["workflowTaskCompletedEventId"] = wtc
        attrs["workflowIdReusePolicy"] = "WORKFLOW_ID_REUSE_POLICY_" + _REUSE[c.id_reuse_policy]
        if c.retry_policy:
            attrs["retryPolicy"] = c.retry_policy
        if c.cron_schedule:
            attrs["cronSchedule"] = c.cron_schedule
        attrs["header"] = {}
        if c.memo:
            attrs["memo"] = c.memo
        if c.search_attributes:
            attrs["searchAttributes"] = {"indexedFields": c.search_attributes}
        initiated = rs.add_event(
            "StartChildWorkflowExecutionInitiated", attrs, user_metadata=c.user_metadata
        )

        def start() -> None:
            # After all of the task's commands: the child's start is a new fact for the
            # parent, recorded after its command events (as Temporal does).
            if not rs.is_open and c.parent_close_policy != 2:
                return  # the parent closed in the same task: the child would end at once
            root = _root_of(rs)
            req = StartWorkflowRequest(
                namespace=rs.namespace,
                workflow_id=c.workflow_id,
                workflow_type=c.workflow_type,
                task_queue=c.task_queue,
                input=c.input,
                id_reuse_policy=WorkflowIDReusePolicy(c.id_reuse_policy),
                execution_timeout=c.execution_timeout,
                run_timeout=c.run_timeout,
                task_timeout=c.task_timeout or 10.0,
                identity=identity,
                request_id=random_uuid(),
                parent_workflow_id=rs.workflow_id,
                parent_run_id=rs.run_id,
                root_workflow_id=root.get("workflowId"),
                root_run_id=root.get("runId"),
                parent_initiated_event_id=initiated,
                parent_close_policy=c.parent_close_policy,
                retry_policy=c.retry_policy,
                memo=c.memo,
                search_attributes=c.search_attributes,
                cron_schedule=c.cron_schedule or None,
                user_metadata=c.user_metadata,
            )
            base = {
                "namespace": rs.namespace,
                "initiatedEventId": str(initiated),
            }
            try:
                result = self._start_workflow(rs.tx, req)
            except WorkflowAlreadyStartedError:
                if not rs.is_open:
                    return
                rs.add_event(
                    "StartChildWorkflowExecutionFailed",
                    {
                        **base,
                        "workflowId": c.workflow_id,
                        "workflowType": {"name": c.workflow_type},
                        "cause": "START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_WORKFLOW_ALREADY_EXISTS",
                        "workflowTaskCompletedEventId": wtc,
                    },
                )
            else:
                rs.child_started()
                if not rs.is_open:
                    return  # abandoned child of a closed parent: nothing more to record
                started = rs.add_event(
                    "ChildWorkflowExecutionStarted",
                    {
                        **base,
                        "workflowExecution": {"workflowId": c.workflow_id, "runId": result.run_id},
                        "workflowType": {"name": c.workflow_type},
                        "header": {},
                    },
                )
                rs.tx.update_execution(result.run_id, parent_started_event_id=started)
            rs.wft_wanted = True

        rs.after_commands.append(start)

    def _cancel_external(
        self,
        rs: RunState,
        c: cmd.RequestCancelExternalWorkflowExecution,
        wtc: str,
        identity: str,
    ) -> None:
        target: JsonDict = {"workflowId": c.workflow_id}
        if c.run_id:
            target["runId"] = c.run_id
        attrs: JsonDict = {
            "workflowTaskCompletedEventId": wtc,
            "namespace": rs.namespace,
            "workflowExecution": target,
        }
        if c.child_workflow_only:
            attrs["childWorkflowOnly"] = True
        if c.reason:
            attrs["reason"] = c.reason
        initiated = rs.add_event("RequestCancelExternalWorkflowExecutionInitiated", attrs)

        def request() -> None:
            tx = rs.tx
            # Without a run id: the workflow id's current run, open or not (Temporal's).
            row = (
                tx.get_execution(c.run_id)
                if c.run_id
                else tx.find_open_run(rs.namespace, c.workflow_id)
                or tx.find_latest_run(rs.namespace, c.workflow_id)
            )
            if row is not None:
                row = tx.lock_execution(row.run_id)
            if row is None or row.workflow_id != c.workflow_id or row.namespace != rs.namespace:
                if not rs.is_open:
                    return
                rs.add_event(
                    "RequestCancelExternalWorkflowExecutionFailed",
                    {
                        "cause": "CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND",
                        "workflowTaskCompletedEventId": wtc,
                        "namespace": rs.namespace,
                        "workflowExecution": target,
                        "initiatedEventId": str(initiated),
                    },
                )
            else:
                if row.status == S.RUNNING:
                    # A run asked already, or one that has closed, takes the request
                    # without a change, and the requester hears it was delivered (as
                    # on Temporal).
                    other = RunState(tx, row, rs.now)
                    asked = other.request_cancel(
                        {
                            "externalInitiatedEventId": str(initiated),
                            "externalWorkflowExecution": {
                                "workflowId": rs.workflow_id,
                                "runId": rs.run_id,
                            },
                            "identity": identity,
                        }
                    )
                    if asked:
                        other.flush()
                if not rs.is_open:
                    return  # the request goes out; the closed run records nothing more
                rs.add_event(
                    "ExternalWorkflowExecutionCancelRequested",
                    {
                        "initiatedEventId": str(initiated),
                        "namespace": rs.namespace,
                        "workflowExecution": target,
                    },
                )
            rs.wft_wanted = True

        rs.after_commands.append(request)


def signal_external(
    rs: RunState, c: cmd.SignalExternalWorkflowExecution, wtc: str, identity: str
) -> None:
    """``SignalExternalWorkflowExecution``: record its initiated event now and, once the
    task's commands are applied, the signal on the target (its latest open run, or the
    run named) and how it went (``ExternalWorkflowExecutionSignaled``, or
    ``SignalExternalWorkflowExecutionFailed`` when there is no such open run)."""
    target: JsonDict = {"workflowId": c.workflow_id}
    if c.run_id:
        target["runId"] = c.run_id
    initiated = rs.add_event(
        "SignalExternalWorkflowExecutionInitiated",
        {
            "workflowTaskCompletedEventId": wtc,
            "namespace": rs.namespace,
            "workflowExecution": target,
            "signalName": c.signal_name,
            "input": {"payloads": c.input},
        },
    )

    def deliver() -> None:
        tx = rs.tx
        found = (
            tx.get_execution(c.run_id)
            if c.run_id
            else tx.find_open_run(rs.namespace, c.workflow_id)
        )
        row = tx.lock_execution(found.run_id) if found is not None else None
        if (
            row is None
            or row.status != S.RUNNING
            or row.workflow_id != c.workflow_id
            or row.namespace != rs.namespace
        ):
            if rs.is_open:
                rs.add_event(
                    "SignalExternalWorkflowExecutionFailed",
                    {
                        "cause": "SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND",
                        "workflowTaskCompletedEventId": wtc,
                        "namespace": rs.namespace,
                        "workflowExecution": target,
                        "initiatedEventId": str(initiated),
                    },
                )
                rs.wft_wanted = True
            return
        other = rs if row.run_id == rs.run_id else RunState(tx, row, rs.now)
        other.record(
            "WorkflowExecutionSignaled",
            {
                "signalName": c.signal_name,
                "input": {"payloads": c.input},
                "identity": identity,
                "externalWorkflowExecution": {"workflowId": rs.workflow_id, "runId": rs.run_id},
            },
        )
        if other is not rs:
            other.flush()
        if rs.is_open:
            rs.add_event(
                "ExternalWorkflowExecutionSignaled",
                {
                    "initiatedEventId": str(initiated),
                    "namespace": rs.namespace,
                    "workflowExecution": target,
                },
            )
            rs.wft_wanted = True

    rs.after_commands.append(deliver)


def _root_of(parent: RunState) -> JsonDict:
    """The root a child of ``parent`` has: the parent's own root, or the parent itself."""
    started = parent.tx.first_event(parent.run_id)
    if started is not None:
        recorded = json_loads(started.attributes).get("rootWorkflowExecution")
        if recorded:
            return dict(recorded)
    return {"workflowId": parent.workflow_id, "runId": parent.run_id}
