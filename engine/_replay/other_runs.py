"""Other runs, from inside a workflow (a mixin of the instance): child workflows, and
``workflow.get_external_workflow_handle(...)``'s signals and cancel requests to any run.

An external signal or cancel is a command (``SignalExternalWorkflowExecution``,
``RequestCancelExternalWorkflowExecution``) whose outcome comes back as an event naming
the command's event (``ExternalWorkflowExecutionSignaled`` or
``SignalExternalWorkflowExecutionFailed``; ``ExternalWorkflowExecutionCancelRequested`` or
``RequestCancelExternalWorkflowExecutionFailed``): the awaiting code resumes then, and a
failure is raised as Temporal's SDKs raise it, an :class:`ApplicationError` of type
``ExternalWorkflowExecutionNotFound``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import workflow
from .._model import commands as cmd
from .._model.definitions import WorkflowDefinition
from ..common import ChildWorkflowCancellationType
from ..converter import DataConverter
from ..exceptions import ApplicationError, CancelledError, WorkflowAlreadyStartedError
from . import jobs as j

JsonDict = dict[str, Any]


@dataclass
class _PendingChild:
    seq: int
    command: cmd.StartChildWorkflowExecution
    started: asyncio.Future[None]
    result: asyncio.Future[Any]
    cancellation_type: ChildWorkflowCancellationType
    result_type: Any
    initiated_event_id: int | None = None
    started_event_id: int | None = None
    run_id: str | None = None
    cancel_sent: bool = False


@dataclass
class _PendingExternal:
    seq: int
    command: cmd.SignalExternalWorkflowExecution | cmd.RequestCancelExternalWorkflowExecution
    result: asyncio.Future[None]


class OtherRuns:
    """Child workflows and external handles of :class:`~engine._replay.instance.WorkflowInstance`."""

    namespace: str
    workflow_id: str
    run_id: str
    task_queue: str
    converter: DataConverter
    _commands: list[cmd.Command]
    _child_seq: int
    _external_seq: int
    _children: dict[int, _PendingChild]
    _children_by_event: dict[int, int]
    _externals: dict[int, _PendingExternal]
    _externals_by_event: dict[int, int]

    create_future: Callable[[], asyncio.Future[Any]]
    random: Callable[[], Any]
    _user_metadata: Callable[..., JsonDict | None]
    _memo_json: Callable[[Mapping[str, Any] | None], JsonDict | None]

    # -- child workflows ----------------------------------------------------------------

    async def start_child_workflow(
        self, workflow_ref: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> workflow.ChildWorkflowHandle[Any]:
        """Emit StartChildWorkflowExecution; resolve once the child has started."""
        wf_type = workflow.definition_name(workflow_ref)
        result_type = options.get("result_type")
        if result_type is None and not isinstance(workflow_ref, str):
            result_type = WorkflowDefinition.of(workflow_ref).return_type
        self._child_seq += 1
        seq = self._child_seq
        child_id = (
            options.get("id")
            or f"{self.workflow_id}-child-{seq}-{self.random().getrandbits(32):08x}"
        )
        command = cmd.StartChildWorkflowExecution(
            seq=seq,
            workflow_id=child_id,
            workflow_type=wf_type,
            task_queue=options.get("task_queue") or self.task_queue,
            input=self.converter.to_payloads_json(args),
            execution_timeout=options.get("execution_timeout"),
            run_timeout=options.get("run_timeout"),
            task_timeout=options.get("task_timeout"),
            id_reuse_policy=int(options.get("id_reuse_policy") or 1),
            parent_close_policy=int(options.get("parent_close_policy") or 1),
            retry_policy=policy.to_json() if (policy := options.get("retry_policy")) else None,
            cron_schedule=options.get("cron_schedule") or "",
            memo=self._memo_json(options.get("memo")),
            search_attributes=options.get("search_attributes"),
            user_metadata=self._user_metadata(
                options.get("static_summary"), options.get("static_details")
            ),
        )
        self._commands.append(command)
        pending = _PendingChild(
            seq=seq,
            command=command,
            started=self.create_future(),
            result=self.create_future(),
            cancellation_type=options.get("cancellation_type")
            or ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED,
            result_type=result_type,
        )
        self._children[seq] = pending
        try:
            await asyncio.shield(pending.started)
        except asyncio.CancelledError:
            self._cancel_child(pending)
            raise
        handle: workflow.ChildWorkflowHandle[Any] = workflow.ChildWorkflowHandle(
            self._await_child(pending),
            loop=self,  # type: ignore[arg-type]  # the instance is the loop
        )
        handle.id = child_id
        handle.first_execution_run_id = pending.run_id
        return handle

    async def _await_child(self, pending: _PendingChild) -> Any:
        return await until_resolved(pending.result, lambda: self._cancel_child(pending))

    def _cancel_child(self, pending: _PendingChild) -> None:
        if pending.cancel_sent:
            return
        pending.cancel_sent = True
        if pending.command in self._commands and pending.initiated_event_id is None:
            # Never sent: take the start back.
            self._commands.remove(pending.command)
            self._children.pop(pending.seq, None)
            err = CancelledError("Child workflow cancelled before it started")
            if not pending.started.done():
                pending.started.set_exception(err)
            if not pending.result.done():
                pending.result.set_exception(err)
            return
        kind = pending.cancellation_type
        if kind != ChildWorkflowCancellationType.ABANDON:
            self._external_seq += 1
            self._commands.append(
                cmd.RequestCancelExternalWorkflowExecution(
                    seq=self._external_seq,
                    workflow_id=pending.command.workflow_id,
                    run_id=pending.run_id,
                )
            )
        if (
            kind
            in (
                ChildWorkflowCancellationType.ABANDON,
                ChildWorkflowCancellationType.TRY_CANCEL,
            )
            and not pending.result.done()
        ):
            pending.result.set_exception(CancelledError("Child workflow cancelled"))

    def child_initiated(self, seq: int, initiated_event_id: int) -> None:
        """The StartChildWorkflowExecution command with ``seq`` was recorded."""
        pending = self._children.get(seq)
        if pending is not None:
            pending.initiated_event_id = initiated_event_id
        self._children_by_event[initiated_event_id] = seq

    def child_seq(self, initiated_event_id: int) -> int | None:
        """The child seq recorded at ``initiated_event_id``."""
        return self._children_by_event.get(initiated_event_id)

    def _apply_resolve_child_workflow_execution_start(
        self, job: j.ResolveChildWorkflowExecutionStart
    ) -> None:
        pending = self._children.get(job.seq)
        if pending is None:
            return
        event = job.event
        if event.event_type == "ChildWorkflowExecutionStarted":
            execution = event.attributes.get("workflowExecution", {})
            pending.run_id = str(execution.get("runId", ""))
            pending.started_event_id = event.event_id
            if not pending.started.done():
                pending.started.set_result(None)
            return
        # StartChildWorkflowExecutionFailed
        self._children.pop(job.seq, None)
        err = WorkflowAlreadyStartedError(
            pending.command.workflow_id, pending.command.workflow_type
        )
        if not pending.started.done():
            pending.started.set_exception(err)

    def _apply_resolve_child_workflow_execution(self, job: j.ResolveChildWorkflowExecution) -> None:
        pending = self._children.pop(job.seq, None)
        if pending is None or pending.result.done():
            return
        event = job.event
        attrs = event.attributes
        kind = event.event_type
        if kind == "ChildWorkflowExecutionCompleted":
            payloads = (attrs.get("result") or {}).get("payloads") or []
            values = self.converter.from_payloads_json(payloads, [pending.result_type])
            pending.result.set_result(values[0] if values else None)
            return
        causes = {
            "ChildWorkflowExecutionFailed": attrs.get("failure") or {"message": "failed"},
            "ChildWorkflowExecutionCanceled": {
                "message": "Child workflow cancelled",
                "canceledFailureInfo": {"details": attrs["details"]} if "details" in attrs else {},
            },
            "ChildWorkflowExecutionTerminated": {
                "message": "Child workflow terminated",
                "terminatedFailureInfo": {},
            },
            "ChildWorkflowExecutionTimedOut": {
                "message": "Child workflow timed out",
                "timeoutFailureInfo": {"timeoutType": "TIMEOUT_TYPE_START_TO_CLOSE"},
            },
        }
        wrapper = {
            "message": "Child Workflow execution failed",
            "cause": causes.get(kind, {"message": kind}),
            "childWorkflowExecutionFailureInfo": {
                "namespace": attrs.get("namespace", self.namespace),
                "workflowExecution": attrs.get("workflowExecution", {}),
                "workflowType": attrs.get("workflowType", {}),
                "initiatedEventId": str(attrs.get("initiatedEventId", "0")),
                "startedEventId": str(attrs.get("startedEventId", "0")),
                "retryState": attrs.get("retryState", "RETRY_STATE_NON_RETRYABLE_FAILURE"),
            },
        }
        pending.result.set_exception(self.converter.from_failure(wrapper))

    # -- external workflow handles -----------------------------------------------------

    async def signal_external(
        self, workflow_id: str, run_id: str | None, signal_name: str, args: Sequence[Any]
    ) -> None:
        """Signal another run; resolves once the signal is recorded there."""
        self._external_seq += 1
        command = cmd.SignalExternalWorkflowExecution(
            seq=self._external_seq,
            workflow_id=workflow_id,
            run_id=run_id,
            signal_name=signal_name,
            input=self.converter.to_payloads_json(list(args)),
        )
        await self._external(command)

    async def cancel_external(self, workflow_id: str, run_id: str | None, reason: str) -> None:
        """Ask another run to cancel; resolves once the request is recorded there."""
        self._external_seq += 1
        command = cmd.RequestCancelExternalWorkflowExecution(
            seq=self._external_seq,
            workflow_id=workflow_id,
            run_id=run_id,
            child_workflow_only=False,
            reason=(
                f"Cancel requested by workflow with run id {self.run_id} with reason: {reason}"
            ),
        )
        await self._external(command)

    async def _external(
        self,
        command: cmd.SignalExternalWorkflowExecution | cmd.RequestCancelExternalWorkflowExecution,
    ) -> None:
        pending = _PendingExternal(command.seq, command, self.create_future())
        self._externals[command.seq] = pending
        self._commands.append(command)
        try:
            await asyncio.shield(pending.result)
        except asyncio.CancelledError:
            if pending.result.done():
                raise
            if command in self._commands:  # never sent: take it back
                self._commands.remove(command)
                self._externals.pop(command.seq, None)
            raise

    def external_initiated(self, seq: int, initiated_event_id: int) -> None:
        """The external signal or cancel command with ``seq`` was recorded."""
        if seq in self._externals:
            self._externals_by_event[initiated_event_id] = seq

    def external_seq(self, initiated_event_id: int) -> int | None:
        """The external command seq recorded at ``initiated_event_id``."""
        return self._externals_by_event.get(initiated_event_id)

    def _apply_resolve_signal_external_workflow(self, job: j.ResolveSignalExternalWorkflow) -> None:
        self._resolve_external(job.seq, job.failed, "signal", "it was not found")

    def _apply_resolve_request_cancel_external_workflow(
        self, job: j.ResolveRequestCancelExternalWorkflow
    ) -> None:
        self._resolve_external(job.seq, job.failed, "cancel", "not found")

    def _resolve_external(self, seq: int, failed: bool, what: str, why: str) -> None:
        pending = self._externals.pop(seq, None)
        if pending is None or pending.result.done():
            return
        if failed:  # the words and type Temporal's core SDK gives this failure
            pending.result.set_exception(
                ApplicationError(
                    f"Unable to {what} external workflow because {why}",
                    type="ExternalWorkflowExecutionNotFound",
                )
            )
        else:
            pending.result.set_result(None)


async def until_resolved(result: asyncio.Future[Any], request_cancel: Callable[[], None]) -> Any:
    """Await a command's result; cancelling the awaiting task requests cancellation of the
    command (per its cancellation type) and keeps waiting for how it ends."""
    while True:
        try:
            return await asyncio.shield(result)
        except asyncio.CancelledError:
            if result.done():
                return result.result()
            request_cancel()
            if result.done():
                return result.result()
