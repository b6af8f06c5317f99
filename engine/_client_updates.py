"""The client's side of updates (``temporalio.client``'s names): :class:`WorkflowUpdateStage`,
:class:`WorkflowUpdateHandle` and :class:`WithStartWorkflowOperation`, with the calls the
client and its workflow handles make through them (re-exported by :mod:`engine.client`).

One deliberate difference: cancelling a task that waits on an update raises
``asyncio.CancelledError`` as any asyncio call does (``temporalio`` raises
:class:`WorkflowUpdateRPCTimeoutOrCancelledError` instead), so ``asyncio.timeout`` and task
groups keep working around it. An ``rpc_timeout`` that passes raises that error, as in
``temporalio``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._ids import random_uuid
from ._model.cron import validate_cron
from ._model.decorators import handler_name
from ._model.definitions import type_hints
from ._model.limits import check_id
from ._service.update_ops import UpdateRef, UpdateState
from .common import (
    RetryPolicy,
    SearchAttributes,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from .converter import check_payloads_size
from .exceptions import (
    InvalidArgumentError,
    RPCError,
    RPCStatusCode,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)

if TYPE_CHECKING:
    from .client import Client, WorkflowHandle

T = TypeVar("T")
JsonDict = dict[str, Any]
_missing: Any = inspect.Parameter.empty  # the client's "no argument" sentinel


class WorkflowUpdateStage(IntEnum):
    """How far an update must have got before ``start_update`` returns: ``ACCEPTED`` (its
    validator passed and it is in the history) or ``COMPLETED`` (its handler finished).
    ``ADMITTED`` is Temporal's too, and refused there as here."""

    ADMITTED = 1
    ACCEPTED = 2
    COMPLETED = 3


class WorkflowUpdateHandle(Generic[T]):
    """An update sent to a run: its ``id``, and :meth:`result` to wait for its outcome.

    Made by ``WorkflowHandle.start_update`` or ``get_update_handle``, not directly.
    """

    def __init__(
        self,
        client: Client,
        id: str,
        workflow_id: str,
        *,
        workflow_run_id: str | None = None,
        result_type: type | None = None,
        known_outcome: JsonDict | None = None,
    ) -> None:
        self._client = client
        self._id = id
        self._workflow_id = workflow_id
        self._workflow_run_id = workflow_run_id
        self._result_type = result_type
        self._known_outcome = known_outcome
        self._ref: UpdateRef | None = None

    @property
    def id(self) -> str:
        """The update's id (given to ``start_update``, or a new UUID)."""
        return self._id

    @property
    def workflow_id(self) -> str:
        """The workflow the update was sent to."""
        return self._workflow_id

    @property
    def workflow_run_id(self) -> str | None:
        """The run the update was sent to, when known."""
        return self._workflow_run_id

    def __repr__(self) -> str:
        return f"WorkflowUpdateHandle(id={self._id!r}, workflow_id={self._workflow_id!r})"

    async def result(
        self,
        *,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> T:
        """Wait for the update's handler to finish; its return value.

        Raises :class:`WorkflowUpdateFailedError` (``cause``: the failure) when it was
        rejected or its handler failed, :class:`RPCError` ``NOT_FOUND`` when the run
        closed before the handler finished, and
        :class:`WorkflowUpdateRPCTimeoutOrCancelledError` when ``rpc_timeout`` passes
        first (the update goes on; ask again). ``rpc_metadata`` is accepted and unused.
        """
        del rpc_metadata
        if self._known_outcome is None:
            state = await self._wait(WorkflowUpdateStage.COMPLETED, rpc_timeout)
            self._known_outcome = state.outcome
        return self._decode(self._known_outcome)

    async def _wait(self, stage: WorkflowUpdateStage, timeout: timedelta | None) -> UpdateState:
        service = self._client.service
        if self._ref is None:
            self._ref = await service.find_update(
                self._client.namespace, self._workflow_id, self._workflow_run_id, self._id
            )
            self._workflow_run_id = self._ref.run_id
        seconds = None if timeout is None else max(timeout.total_seconds(), 0.0)
        state = await service.wait_update(self._ref, int(stage), seconds)
        if state is None:
            raise WorkflowUpdateRPCTimeoutOrCancelledError(
                f"update {self._id!r} of workflow {self._workflow_id!r} did not reach "
                f"{stage.name} within the rpc_timeout of {seconds:g}s (the update goes on: "
                "ask again with get_update_handle(id).result())"
            )
        if state.abandoned is not None and (
            stage == WorkflowUpdateStage.COMPLETED or not state.accepted
        ):
            raise RPCError(
                f"workflow execution already completed: run {self._ref.run_id} of workflow "
                f"{self._workflow_id!r} closed ({state.abandoned}) before update {self._id!r} "
                "finished. To let handlers finish, wait for them before the run returns: "
                "await workflow.wait_condition(workflow.all_handlers_finished)",
                RPCStatusCode.NOT_FOUND,
            )
        return state

    def _decode(self, outcome: JsonDict | None) -> T:
        dc = self._client.data_converter
        outcome = outcome or {}
        if "failure" in outcome:
            cause = dc.from_failure(outcome["failure"])
            raise WorkflowUpdateFailedError(f"Workflow update failed: {cause}", cause=cause)
        payloads = (outcome.get("success") or {}).get("payloads")
        values = dc.from_payloads_json(payloads, [self._result_type])
        return values[0] if values else None  # type: ignore[return-value]


class WithStartWorkflowOperation(Generic[T]):
    """The start half of update-with-start: the workflow to start (or, with
    ``id_conflict_policy=USE_EXISTING``, to find running) and its start options, which are
    ``Client.start_workflow``'s. Give it to ``Client.execute_update_with_start_workflow``
    or ``start_update_with_start_workflow``; then :meth:`workflow_handle` is the run's
    handle. ``id_conflict_policy`` is required, as in ``temporalio``."""

    def __init__(
        self,
        workflow: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        id: str,
        task_queue: str,
        id_conflict_policy: WorkflowIDConflictPolicy,
        result_type: type | None = None,
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        task_timeout: timedelta | None = None,
        id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        retry_policy: RetryPolicy | None = None,
        memo: Mapping[str, Any] | None = None,
        start_delay: timedelta | None = None,
        static_summary: str | None = None,
        static_details: str | None = None,
        cron_schedule: str = "",
        search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
        **unsupported: Any,
    ) -> None:
        if unsupported:
            raise TypeError(
                "WithStartWorkflowOperation got options this engine does not support: "
                + ", ".join(sorted(unsupported))
            )
        if id_conflict_policy == WorkflowIDConflictPolicy.UNSPECIFIED:
            raise InvalidArgumentError(
                "id_conflict_policy must be given for update-with-start: FAIL (the run must "
                "be new) or USE_EXISTING (send the update to the running one)"
            )
        self._workflow = workflow
        self._arg = arg
        self._options: dict[str, Any] = dict(
            args=args,
            id=id,
            task_queue=task_queue,
            id_conflict_policy=id_conflict_policy,
            result_type=result_type,
            execution_timeout=execution_timeout,
            run_timeout=run_timeout,
            task_timeout=task_timeout,
            id_reuse_policy=id_reuse_policy,
            retry_policy=retry_policy,
            memo=dict(memo) if memo else None,
            start_delay=start_delay,
            static_summary=static_summary,
            static_details=static_details,
            search_attributes=search_attributes,
        )
        if cron_schedule:
            validate_cron(cron_schedule)
            if start_delay:
                raise InvalidArgumentError("cron_schedule and start_delay cannot be combined")
        self._cron_schedule = cron_schedule.strip() if cron_schedule else ""
        self._used = False
        self._handle: asyncio.Future[WorkflowHandle] | None = None

    def _future(self) -> asyncio.Future[WorkflowHandle]:
        if self._handle is None:
            self._handle = asyncio.get_running_loop().create_future()
        return self._handle

    async def workflow_handle(self) -> WorkflowHandle:
        """The started (or found) run's handle, once the update-with-start call has got
        that far; raises what the start raised."""
        return await self._future()


async def start_update(
    handle: WorkflowHandle,
    update: Callable[..., Any] | str,
    arg: Any,
    *,
    wait_for_stage: WorkflowUpdateStage,
    args: Sequence[Any],
    id: str | None,
    result_type: type | None,
    rpc_timeout: timedelta | None,
) -> WorkflowUpdateHandle[Any]:
    """``WorkflowHandle.start_update``: send the update, wait for ``wait_for_stage``."""
    client = handle.client
    stage = _check_stage(wait_for_stage)
    name, payloads, result_type = _update_request(client, update, arg, args, result_type, id)
    ref = await client.service.request_update(
        client.namespace,
        handle.id,
        handle.run_id,
        name,
        payloads,
        id or random_uuid(),
        client.identity,
    )
    return await _until_stage(client, ref, stage, result_type, rpc_timeout)


async def start_update_with_start(
    client: Client,
    update: Callable[..., Any] | str,
    arg: Any,
    *,
    start_workflow_operation: WithStartWorkflowOperation[Any],
    wait_for_stage: WorkflowUpdateStage,
    args: Sequence[Any],
    id: str | None,
    result_type: type | None,
    rpc_timeout: timedelta | None,
) -> WorkflowUpdateHandle[Any]:
    """``Client.start_update_with_start_workflow``: start (or find) the run and send it
    the update in one transaction, then wait for ``wait_for_stage``."""
    from .client import WorkflowHandle

    op = start_workflow_operation
    stage = _check_stage(wait_for_stage)
    if op._used:
        raise RuntimeError("a WithStartWorkflowOperation can be used once only")
    op._used = True
    future = op._future()
    try:
        name, payloads, result_type = _update_request(client, update, arg, args, result_type, id)
        request, wf_result_type = client._start_request(
            op._workflow, op._arg, request_id=None, **op._options
        )
        request.cron_schedule = op._cron_schedule or None
        started, ref = await client.service.update_with_start(
            request, name, payloads, id or random_uuid()
        )
    except BaseException as err:
        if not future.done():
            future.set_exception(err)
            future.exception()  # retrieved: no "never retrieved" warning if unused
        raise
    run_handle = WorkflowHandle(
        client,
        request.workflow_id,
        result_run_id=started.run_id,
        first_execution_run_id=started.run_id,
        result_type=wf_result_type,
    )
    future.set_result(run_handle)
    return await _until_stage(client, ref, stage, result_type, rpc_timeout)


def _check_stage(stage: WorkflowUpdateStage) -> WorkflowUpdateStage:
    stage = WorkflowUpdateStage(stage)
    if stage == WorkflowUpdateStage.ADMITTED:
        raise InvalidArgumentError(
            "wait_for_stage=ADMITTED is not supported (nor in Temporal): wait for ACCEPTED "
            "or COMPLETED"
        )
    return stage


def _update_request(
    client: Client,
    update: Callable[..., Any] | str,
    arg: Any,
    args: Sequence[Any],
    result_type: type | None,
    update_id: str | None = None,
) -> tuple[str, list[JsonDict], type | None]:
    name = handler_name(update, "update")
    if update_id is not None:
        check_id(update_id, "id (the update id)")
    if arg is not _missing and args:
        raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
    values = [arg] if arg is not _missing else list(args)
    if result_type is None and not isinstance(update, str):
        result_type = type_hints(update, skip_self=True)[1]
    payloads = client.data_converter.to_payloads(values)
    check_payloads_size(
        payloads,
        what=f"input of update {name!r}",
        warn_at=client.payload_limits.payloads_warn_size,
    )
    return name, [p.to_json() for p in payloads], result_type


async def _until_stage(
    client: Client,
    ref: UpdateRef,
    stage: WorkflowUpdateStage,
    result_type: type | None,
    rpc_timeout: timedelta | None,
) -> WorkflowUpdateHandle[Any]:
    update = WorkflowUpdateHandle[Any](
        client, ref.update_id, ref.workflow_id, workflow_run_id=ref.run_id, result_type=result_type
    )
    update._ref = ref
    state = await update._wait(stage, rpc_timeout)
    update._known_outcome = state.outcome
    return update
