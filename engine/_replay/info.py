"""``workflow.info()`` of a run, read from its ``WorkflowExecutionStarted`` event."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .. import _search_attributes as sa
from .. import workflow
from ..common import Priority, RetryPolicy, duration_from_json

if TYPE_CHECKING:
    from .instance import WorkflowInstance

JsonDict = dict[str, Any]


def info_from_start(
    inst: WorkflowInstance, attrs: JsonDict, start_time: float, task_time: float
) -> workflow.Info:
    """The run's info: ``start_time`` is its start event's time, ``task_time`` that of the
    workflow task that runs its code first."""

    def dur(key: str) -> timedelta | None:
        value = attrs.get(key)
        if not value:
            return None
        parsed = duration_from_json(value)
        return parsed if parsed.total_seconds() > 0 else None

    parent: workflow.ParentInfo | None = None
    parent_run = attrs.get("parentWorkflowExecution") or {}
    if parent_run.get("runId"):
        parent = workflow.ParentInfo(
            namespace=attrs.get("parentWorkflowNamespace") or inst.namespace,
            run_id=parent_run["runId"],
            workflow_id=parent_run.get("workflowId", ""),
        )
    root: workflow.RootInfo | None = None
    root_run = attrs.get("rootWorkflowExecution") or {}
    if root_run.get("runId"):
        root = workflow.RootInfo(
            run_id=root_run["runId"], workflow_id=root_run.get("workflowId", "")
        )
    policy = attrs.get("retryPolicy")
    fields = dict((attrs.get("searchAttributes") or {}).get("indexedFields") or {})
    return workflow.Info(
        attempt=int(attrs.get("attempt", 1)),
        continued_run_id=attrs.get("continuedExecutionRunId"),
        cron_schedule=attrs.get("cronSchedule") or None,
        execution_timeout=dur("workflowExecutionTimeout"),
        first_execution_run_id=attrs.get("firstExecutionRunId", inst.run_id),
        headers={},
        namespace=inst.namespace,
        original_execution_run_id=attrs.get("originalExecutionRunId") or inst.run_id,
        parent=parent,
        root=root,
        priority=Priority.default,
        raw_memo=dict(((attrs.get("memo") or {}).get("fields")) or {}),
        retry_policy=RetryPolicy.from_json(policy) if policy else None,
        run_id=inst.run_id,
        run_timeout=dur("workflowRunTimeout"),
        search_attributes=sa.decode(fields),
        start_time=datetime.fromtimestamp(task_time or start_time, UTC),
        task_queue=inst.task_queue,
        task_timeout=dur("workflowTaskTimeout") or timedelta(seconds=10),
        typed_search_attributes=sa.decode_typed(fields),
        workflow_id=inst.workflow_id,
        workflow_start_time=datetime.fromtimestamp(start_time, UTC),
        # The type the run was started as: a dynamic workflow runs types not its own.
        workflow_type=str((attrs.get("workflowType") or {}).get("name") or inst.defn.name),
    )
