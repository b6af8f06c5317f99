"""The client: start, signal, cancel, terminate, describe runs and fetch their histories.

``Client.connect()`` with no argument opens the embedded default (``./.durable/durable.db``,
or ``DURABLE_DATABASE_URL`` when set); ``Client.connect(url)`` takes any SQLAlchemy URL for
SQLite or PostgreSQL. Clients and workers reach the service through the shared database.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import _schedule_api
from ._async_activity import AsyncActivityHandle, AsyncActivityIDReference, async_activity_handle
from ._client_updates import (
    WithStartWorkflowOperation,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
    start_update_with_start,
)
from ._ids import random_uuid
from ._listing import (
    WorkflowExecution,
    WorkflowExecutionAsyncIterator,
    WorkflowExecutionCount,
    WorkflowExecutionCountAggregationGroup,
    WorkflowExecutionDescription,
)
from ._model.cron import validate_cron
from ._model.definitions import WorkflowDefinition
from ._model.limits import check_enum, check_id, check_namespace, check_text
from ._model.schedules import ScheduleOverlapPolicy
from ._schedule_api import ScheduleAsyncIterator, ScheduleHandle
from ._schedule_types import (
    Schedule,
    ScheduleAction,
    ScheduleActionExecution,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionLogEntry,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleCalendarSpec,
    ScheduleDescription,
    ScheduleInfo,
    ScheduleIntervalSpec,
    ScheduleListAction,
    ScheduleListActionStartWorkflow,
    ScheduleListDescription,
    ScheduleListInfo,
    ScheduleListSchedule,
    ScheduleListState,
    SchedulePolicy,
    ScheduleRange,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from ._search_attributes import encode as encode_search_attributes
from ._service.clock import Clock
from ._service.host import ServiceHost
from ._service.service import Service
from ._service.types import StartWorkflowRequest, StartWorkflowResult
from ._store.dialects import parse_url
from ._store.gateway import Store, release_store, shared_store
from ._store.outage import RetryConfig
from ._workflow_handle import WorkflowHandle
from .common import (
    RetryPolicy,
    SearchAttributes,
    TypedSearchAttributes,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from .converter import DataConverter, check_payloads_size, user_metadata_json
from .exceptions import (
    AsyncActivityCancelledError,
    InvalidArgumentError,
    QueryRejectCondition,
    RPCTimeoutOrCancelledError,
    ScheduleAlreadyRunningError,
    ScheduleNotFoundError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from .history import WorkflowHistoryEventFilterType
from .service import PayloadLimitsConfig, within_rpc_timeout
from .workflow import definition_name

if TYPE_CHECKING:
    from ._namespace_api import WorkflowService
    from .operator import OperatorService

__all__ = [
    "AsyncActivityCancelledError",
    "AsyncActivityHandle",
    "AsyncActivityIDReference",
    "Client",
    "RPCTimeoutOrCancelledError",
    "RetryConfig",
    "Schedule",
    "ScheduleAction",
    "ScheduleActionExecution",
    "ScheduleActionExecutionStartWorkflow",
    "ScheduleActionLogEntry",
    "ScheduleActionResult",
    "ScheduleActionStartWorkflow",
    "ScheduleAlreadyRunningError",
    "ScheduleAsyncIterator",
    "ScheduleBackfill",
    "ScheduleCalendarSpec",
    "ScheduleDescription",
    "ScheduleHandle",
    "ScheduleInfo",
    "ScheduleIntervalSpec",
    "ScheduleListAction",
    "ScheduleListActionStartWorkflow",
    "ScheduleListDescription",
    "ScheduleListInfo",
    "ScheduleListSchedule",
    "ScheduleListState",
    "ScheduleNotFoundError",
    "ScheduleOverlapPolicy",
    "SchedulePolicy",
    "ScheduleRange",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleUpdate",
    "ScheduleUpdateInput",
    "WithStartWorkflowOperation",
    "WorkflowExecution",
    "WorkflowExecutionAsyncIterator",
    "WorkflowExecutionCount",
    "WorkflowExecutionCountAggregationGroup",
    "WorkflowExecutionDescription",
    "WorkflowExecutionStatus",
    "WorkflowHandle",
    "WorkflowHistoryEventFilterType",
    "WorkflowQueryFailedError",
    "WorkflowQueryRejectedError",
    "WorkflowUpdateFailedError",
    "WorkflowUpdateHandle",
    "WorkflowUpdateRPCTimeoutOrCancelledError",
    "WorkflowUpdateStage",
]

_missing: Any = inspect.Parameter.empty


def default_identity() -> str:
    """``pid@host``, as Temporal's SDKs identify workers and clients."""
    return f"{os.getpid()}@{socket.gethostname()}"


def _seconds(value: timedelta | float | None, field_name: str) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        raise InvalidArgumentError(f"{field_name} must not be negative (got {value!r})")
    return seconds


class Client:
    """A connection to the engine's store. Cheap to share; one per process is typical."""

    def __init__(
        self,
        store: Store,
        *,
        namespace: str = "default",
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        clock: Clock | None = None,
        default_workflow_query_reject_condition: QueryRejectCondition | None = None,
        payload_limits: PayloadLimitsConfig = PayloadLimitsConfig(),
    ) -> None:
        check_namespace(namespace)
        if identity is not None:
            check_id(identity, "identity")
        self.store = store
        self.namespace = namespace
        self.data_converter = data_converter or DataConverter.default
        self.identity = identity or default_identity()
        #: The ``reject_condition`` of ``WorkflowHandle.query()`` calls that pass none.
        self.default_workflow_query_reject_condition = default_workflow_query_reject_condition
        #: Warning thresholds for what this client and its workers send.
        self.payload_limits = payload_limits
        self.service = Service(store, clock)
        self._host: ServiceHost | None = None
        self._host_users = 0
        self._closed = False

    @classmethod
    async def connect(
        cls,
        target_url: str | None = None,
        *,
        namespace: str = "default",
        data_converter: DataConverter | None = None,
        identity: str | None = None,
        fsync: bool | None = None,
        clock: Clock | None = None,
        default_workflow_query_reject_condition: QueryRejectCondition | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        payload_limits: PayloadLimitsConfig = PayloadLimitsConfig(),
        retry_config: RetryConfig | None = None,
    ) -> Client:
        """Open (and migrate) the database at ``target_url``, or the embedded default.

        ``fsync=True`` makes SQLite sync every commit to disk (``synchronous=FULL``); the
        default (``NORMAL`` in WAL mode) survives process crashes but may lose the last
        commits on power loss. ``DURABLE_FSYNC=1`` sets it from the environment.

        ``default_workflow_query_reject_condition``: the ``reject_condition`` of queries
        that pass none (as in ``temporalio``). ``payload_limits``: when a payload sent by
        this client or its workers is big enough to log a warning (512 KiB; a memo 2 KiB).
        ``rpc_metadata`` is accepted and ignored (gRPC headers: there is no server
        connection here). ``temporalio``'s connection
        options (``tls``, ``api_key``, ``keep_alive_config``, ...) have no counterpart.

        ``retry_config``: how long every operation (of this client, its workers and any
        other client of this process on the same database) waits for a database that is
        unreachable or locked before it raises
        :class:`~engine.exceptions.StoreUnavailableError`; by default a minute, with
        waits growing from 0.1 s to 1 s (:class:`RetryConfig` says why that differs from
        ``temporalio``'s 10 s). A database that is starting up or shutting down when the
        client connects is waited for the same way; a refused connection fails at once.
        """
        check_namespace(namespace)  # before the database is opened
        if identity is not None:
            check_id(identity, "identity")
        del rpc_metadata
        if retry_config is not None and not isinstance(retry_config, RetryConfig):
            raise InvalidArgumentError(
                f"retry_config must be an engine.client.RetryConfig, not "
                f"{type(retry_config).__name__}"
            )
        if fsync is None:
            fsync = os.environ.get("DURABLE_FSYNC", "") in ("1", "true", "yes")
        store = await asyncio.to_thread(
            shared_store, target_url, fsync=fsync, retry_config=retry_config
        )
        return cls(
            store,
            namespace=namespace,
            data_converter=data_converter,
            identity=identity,
            clock=clock,
            default_workflow_query_reject_condition=default_workflow_query_reject_condition,
            payload_limits=payload_limits,
        )

    async def close(self) -> None:
        """Release the database connection (closed once no client in the process uses it)."""
        if self._closed:
            return
        self._closed = True
        if self._host is not None:
            host, self._host = self._host, None
            await host.stop()
        await asyncio.to_thread(release_store, self.store)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def database_url(self) -> str:
        """The database URL (password hidden)."""
        return self.store.display_url

    @staticmethod
    def resolve_database_url(url: str | None = None, *, hide_password: bool = True) -> str:
        """The database ``Client.connect(url)`` would open, as a normalised URL string:
        ``url=None`` resolves ``DURABLE_DATABASE_URL`` or the embedded default now. Raises
        :class:`~engine.exceptions.DatabaseURLError` for a malformed or unsupported URL.
        Two URLs naming the same database resolve to the same string (with
        ``hide_password=False``; never show that form)."""
        return parse_url(url).render_as_string(hide_password=hide_password)

    @property
    def clock(self) -> Clock:
        """The clock this client's runs are timed by (a :class:`~engine.SkippingClock`
        under time skipping): ``client.clock.now()`` is "now" in their histories."""
        return self.service.clock

    # -- service background duties (shared by the workers of this client) --------------

    def start_service(self) -> None:
        """Host the service's background duties in this process: fire durable timers,
        time out tasks, schedule retries, take schedules' actions. Call from a running
        event loop.

        Workers do this on their own; a process without workers that must keep timers
        firing (the Jupyter server) calls this. Several hosts on one database never fire a
        timer twice. Undo with :meth:`stop_service`.
        """
        self._acquire_host()

    async def stop_service(self) -> None:
        """Stop what :meth:`start_service` started."""
        await self._release_host()

    @contextlib.asynccontextmanager
    async def hosting_service(self) -> AsyncIterator[None]:
        """``async with client.hosting_service():`` — :meth:`start_service` for a block."""
        self.start_service()
        try:
            yield
        finally:
            await self.stop_service()

    def _acquire_host(self) -> None:
        self._host_users += 1
        if self._host is None:
            self._host = ServiceHost(self.service)
            self._host.start()

    async def _release_host(self) -> None:
        self._host_users -= 1
        if self._host_users <= 0 and self._host is not None:
            host, self._host = self._host, None
            await host.stop()

    # -- starting -----------------------------------------------------------------------

    async def start_workflow(
        self,
        workflow: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        id: str,
        task_queue: str,
        args: Sequence[Any] = (),
        execution_timeout: timedelta | None = None,
        run_timeout: timedelta | None = None,
        task_timeout: timedelta | None = None,
        id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy: WorkflowIDConflictPolicy = WorkflowIDConflictPolicy.UNSPECIFIED,
        retry_policy: RetryPolicy | None = None,
        memo: dict[str, Any] | None = None,
        start_delay: timedelta | None = None,
        result_type: type | None = None,
        request_id: str | None = None,
        request_eager_start: bool = True,
        start_signal: str | None = None,
        start_signal_args: Sequence[Any] = (),
        cron_schedule: str = "",
        static_summary: str | None = None,
        static_details: str | None = None,
        search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowHandle:
        """Start a run of ``workflow`` (a ``@workflow.run`` method, class, or type name).

        ``search_attributes`` (``TypedSearchAttributes([SearchAttributePair(key, v)])``,
        or the older dict of lists): what the run can be found by from its start on; each
        must be registered in the namespace first (else InvalidArgumentError, Temporal's
        "no mapping defined for search attribute").

        ``request_eager_start``: when a worker of this client polls ``task_queue`` in this
        process and has a free slot, the run's first workflow task is started for it in the
        same transaction as the start (Temporal's eager workflow start; the history is the
        same). On by default here, where client and worker usually share a process; pass
        False to always go through the queue. Never with ``start_delay``.

        ``start_signal`` (a signal name) with ``start_signal_args``: signal-with-start. A
        running run of ``id`` just gets the signal (whatever ``id_conflict_policy`` says);
        otherwise a new run starts with the signal recorded right after its start, so its
        first workflow task has it. Never eager.

        ``cron_schedule`` (``"*/15 * * * *"``, ``"@daily"``, ``"@every 10m"``,
        ``"CRON_TZ=Europe/Paris 0 9 * * *"``): the run waits for the schedule's next time,
        and each run that completes or fails (after its retries) starts the next one with
        the same input, as Temporal's cron workflows do (``workflow.
        get_last_completion_result()``, ``get_last_failure()``). Cancelling or terminating
        a run ends the schedule. Schedules (``client.create_schedule``) are the newer way.

        ``static_summary`` (a line) and ``static_details`` (any text, Markdown in Temporal's
        UI) describe the run where it is shown: the widgets, the web UI,
        ``describe().static_summary()``; recorded as the start event's user metadata.

        ``rpc_timeout`` bounds the start (``RPCError`` ``DEADLINE_EXCEEDED`` past it: the
        run may still have started, as with a gRPC deadline); ``rpc_metadata`` is ignored.
        """
        request, result_type = self._start_request(
            workflow,
            arg,
            id=id,
            task_queue=task_queue,
            args=args,
            execution_timeout=execution_timeout,
            run_timeout=run_timeout,
            task_timeout=task_timeout,
            id_reuse_policy=id_reuse_policy,
            id_conflict_policy=id_conflict_policy,
            retry_policy=retry_policy,
            memo=memo,
            start_delay=start_delay,
            result_type=result_type,
            request_id=request_id,
            static_summary=static_summary,
            static_details=static_details,
            search_attributes=search_attributes,
        )
        if cron_schedule:
            validate_cron(cron_schedule)
            if start_delay:
                raise InvalidArgumentError("cron_schedule and start_delay cannot be combined")
            request.cron_schedule = cron_schedule.strip()
        if start_signal is not None:
            check_id(start_signal, "start_signal (a signal name)")
            signal_payloads = self.data_converter.to_payloads(list(start_signal_args))
            check_payloads_size(
                signal_payloads,
                what=f"input of signal {start_signal!r}",
                warn_at=self.payload_limits.payloads_warn_size,
            )
            request.start_signal = start_signal
            request.start_signal_input = [p.to_json() for p in signal_payloads]
        offer = (
            self.service.handoffs.offer_start(self.namespace, task_queue)
            if request_eager_start
            and not start_delay
            and start_signal is None
            and not cron_schedule
            else None
        )
        starting: Awaitable[StartWorkflowResult]
        if offer is None:
            starting = self.service.start_workflow(request, None)
        else:
            # The reservation is settled when the start commits (its task handed over, or
            # the slot given back), even if this coroutine is cancelled meanwhile.
            pending = asyncio.ensure_future(self.service.start_workflow(request, offer))
            pending.add_done_callback(lambda f: offer.settle(_started_task(f)))
            starting = asyncio.shield(pending)
        result = await within_rpc_timeout(
            starting, rpc_timeout, f"the start of workflow {id!r}", rpc_metadata
        )
        handle = WorkflowHandle(
            self,
            id,
            run_id=None,
            result_run_id=result.run_id,
            first_execution_run_id=result.run_id,
            result_type=result_type,
        )
        if result.started:
            handle._started_run, handle._started_queue = result.run_id, task_queue
        return handle

    def _start_request(
        self,
        workflow: Callable[..., Any] | str,
        arg: Any,
        *,
        id: str,
        task_queue: str,
        args: Sequence[Any],
        execution_timeout: timedelta | None,
        run_timeout: timedelta | None,
        task_timeout: timedelta | None,
        id_reuse_policy: WorkflowIDReusePolicy,
        id_conflict_policy: WorkflowIDConflictPolicy,
        retry_policy: RetryPolicy | None,
        memo: dict[str, Any] | None,
        start_delay: timedelta | None,
        result_type: type | None,
        request_id: str | None,
        static_summary: str | None = None,
        static_details: str | None = None,
        search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
    ) -> tuple[StartWorkflowRequest, type | None]:
        """The service's start request for these options (checked), and the result type."""
        wf_type = definition_name(workflow)
        if result_type is None and not isinstance(workflow, str):
            result_type = WorkflowDefinition.of(workflow).return_type
        check_id(id, "id (the workflow id)")
        check_id(task_queue, "task_queue")
        check_id(wf_type, "the workflow type name")
        id_reuse_policy = check_enum(id_reuse_policy, WorkflowIDReusePolicy, "id_reuse_policy")
        id_conflict_policy = check_enum(
            id_conflict_policy, WorkflowIDConflictPolicy, "id_conflict_policy"
        )
        if request_id is not None:
            check_id(request_id, "request_id")
        for key in memo or {}:
            check_id(key, "a memo key")
        values = [arg] if arg is not _missing else list(args)
        if arg is not _missing and args:
            raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
        payloads = self.data_converter.to_payloads(values)
        limits = self.payload_limits
        check_payloads_size(
            payloads, what=f"input of workflow {wf_type!r}", warn_at=limits.payloads_warn_size
        )
        # The memo has a limit of its own (Temporal's limit.memoSize.error, 2 MB for all of
        # it); a field over it alone is named.
        memo_fields = {k: self.data_converter.to_payload(v) for k, v in (memo or {}).items()}
        for key, value in memo_fields.items():
            check_payloads_size([value], what=f"memo field {key!r}")
        check_payloads_size(list(memo_fields.values()), what="memo", warn_at=limits.memo_warn_size)
        if retry_policy is not None:
            retry_policy.validate()
        conflict = id_conflict_policy
        if conflict == WorkflowIDConflictPolicy.UNSPECIFIED:
            conflict = WorkflowIDConflictPolicy.FAIL
        task_seconds = _seconds(task_timeout, "task_timeout")
        request = StartWorkflowRequest(
            namespace=self.namespace,
            workflow_id=id,
            workflow_type=wf_type,
            task_queue=task_queue,
            input=[p.to_json() for p in payloads],
            id_reuse_policy=id_reuse_policy,
            id_conflict_policy=conflict,
            execution_timeout=_seconds(execution_timeout, "execution_timeout"),
            run_timeout=_seconds(run_timeout, "run_timeout"),
            task_timeout=task_seconds if task_seconds else 10.0,
            retry_policy=retry_policy.to_json() if retry_policy else None,
            memo={"fields": {k: v.to_json() for k, v in memo_fields.items()}}
            if memo_fields
            else None,
            identity=self.identity,
            request_id=request_id or random_uuid(),
            start_delay=_seconds(start_delay, "start_delay") or 0.0,
            user_metadata=user_metadata_json(
                self.data_converter,
                static_summary,
                static_details,
                names=("static_summary", "static_details"),
            ),
            search_attributes=encode_search_attributes(search_attributes) or None,
        )
        return request, result_type

    async def execute_workflow(
        self,
        workflow: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        id: str,
        task_queue: str,
        **kwargs: Any,
    ) -> Any:
        """Start a run and wait for its result."""
        handle = await self.start_workflow(workflow, arg, id=id, task_queue=task_queue, **kwargs)
        return await handle.result()

    async def start_update_with_start_workflow(
        self,
        update: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        start_workflow_operation: WithStartWorkflowOperation[Any],
        wait_for_stage: WorkflowUpdateStage,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: type | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowUpdateHandle[Any]:
        """Update-with-start: start the operation's run (or, with ``id_conflict_policy=
        USE_EXISTING``, take the running one) and send it the update, in one transaction,
        so the update is in the run's first workflow task; wait for ``wait_for_stage``.
        ``start_workflow_operation.workflow_handle()`` is then the run's handle (or raises
        what the start raised, e.g. ``WorkflowAlreadyStartedError`` with ``FAIL``)."""
        del rpc_metadata
        return await start_update_with_start(
            self,
            update,
            arg,
            start_workflow_operation=start_workflow_operation,
            wait_for_stage=wait_for_stage,
            args=args,
            id=id,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )

    async def execute_update_with_start_workflow(
        self,
        update: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        start_workflow_operation: WithStartWorkflowOperation[Any],
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: type | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> Any:
        """:meth:`start_update_with_start_workflow` waiting for the update's result."""
        handle = await self.start_update_with_start_workflow(
            update,
            arg,
            start_workflow_operation=start_workflow_operation,
            wait_for_stage=WorkflowUpdateStage.COMPLETED,
            args=args,
            id=id,
            result_type=result_type,
            rpc_metadata=rpc_metadata,
            rpc_timeout=rpc_timeout,
        )
        return await handle.result()

    def get_async_activity_handle(
        self,
        *,
        workflow_id: str | None = None,
        run_id: str | None = None,
        activity_id: str | None = None,
        task_token: bytes | None = None,
    ) -> AsyncActivityHandle:
        """A handle to heartbeat, complete, fail or cancel an activity that called
        ``activity.raise_complete_async()``: by its ``task_token``
        (``activity.info().task_token``), or by ``workflow_id`` and ``activity_id`` (and
        optionally ``run_id``; without it, the workflow's open run)."""
        return async_activity_handle(
            self,
            workflow_id=workflow_id,
            run_id=run_id,
            activity_id=activity_id,
            task_token=task_token,
        )

    def get_workflow_handle(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        first_execution_run_id: str | None = None,
        result_type: type | None = None,
    ) -> WorkflowHandle:
        """A handle to an existing workflow (its latest run unless ``run_id`` is given).

        ``first_execution_run_id``: ``cancel()`` and ``terminate()`` then act only on a run
        of the run chain that run belongs to (else ``WorkflowNotFoundError``)."""
        check_id(workflow_id, "workflow_id")
        for name, value in (("run_id", run_id), ("first_execution_run_id", first_execution_run_id)):
            if value is not None:
                check_id(value, name)
        return WorkflowHandle(
            self,
            workflow_id,
            run_id=run_id,
            result_run_id=run_id,
            first_execution_run_id=first_execution_run_id,
            result_type=result_type,
        )

    def get_workflow_handle_for(
        self,
        workflow: Callable[..., Any],
        workflow_id: str,
        *,
        run_id: str | None = None,
        first_execution_run_id: str | None = None,
    ) -> WorkflowHandle:
        """A handle whose result is decoded with the workflow's return type."""
        return self.get_workflow_handle(
            workflow_id,
            run_id=run_id,
            first_execution_run_id=first_execution_run_id,
            result_type=WorkflowDefinition.of(workflow).return_type,
        )

    @property
    def operator_service(self) -> OperatorService:
        """Temporal's operator calls for search attributes (``add_search_attributes``,
        ``list_search_attributes``, ``remove_search_attributes``): see engine.operator."""
        from .operator import OperatorService

        return OperatorService(self)

    @property
    def workflow_service(self) -> WorkflowService:
        """Temporal's namespace calls (``register_namespace``, ``describe_namespace``,
        ``list_namespaces``, ``update_namespace``): see engine.operator."""
        from ._namespace_api import WorkflowService

        return WorkflowService(self)

    # -- schedules --------------------------------------------------------------------

    async def create_schedule(
        self,
        id: str,
        schedule: Schedule,
        *,
        trigger_immediately: bool = False,
        backfill: Sequence[ScheduleBackfill] = [],
        memo: Mapping[str, Any] | None = None,
        search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> ScheduleHandle:
        """Create a schedule and return its handle (:class:`ScheduleAlreadyRunningError`
        if ``id`` is taken). The service's background duties take its actions, each once,
        in the transaction that starts its run. A spec, policy or action it could not run
        is refused naming the field, and nothing is created. ``trigger_immediately``: one
        action now; ``backfill``: past periods' action times, as if they were now."""
        return await _schedule_api.create_schedule(
            self,
            id,
            schedule,
            trigger_immediately=trigger_immediately,
            backfill=backfill,
            memo=memo,
            search_attributes=search_attributes,
            rpc_metadata=rpc_metadata,
            rpc_timeout=rpc_timeout,
        )

    def get_schedule_handle(self, id: str) -> ScheduleHandle:
        """A handle to the schedule ``id`` (nothing is looked up until a call)."""
        return ScheduleHandle(self, id)

    async def list_schedules(
        self,
        query: str | None = None,
        *,
        page_size: int = 1000,
        next_page_token: bytes | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> ScheduleAsyncIterator:
        """The namespace's schedules, by id, as ``async for`` pages. ``query``: a List
        Filter over ``ScheduleId``, ``TemporalSchedulePaused``, ``WorkflowType`` and the
        schedules' own custom search attributes (``TemporalSchedulePaused = true``)."""
        return ScheduleAsyncIterator(self, query, page_size, next_page_token)

    def list_workflows(
        self,
        query: str | None = None,
        *,
        limit: int | None = None,
        page_size: int = 1000,
        next_page_token: bytes | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowExecutionAsyncIterator:
        """Runs of the namespace matching ``query``, Temporal's List Filter
        (``WorkflowType = 'Order' AND ExecutionStatus = 'Running'``, ``StartTime >
        '2026-12-01T00:00:00Z'``, custom search attributes once registered; see
        ``engine._service.visibility`` for the whole language). Open runs come first, then
        closed ones by close time, newest first, unless the filter says ``ORDER BY``.

        ``async for`` reads every match (at most ``limit``), ``page_size`` at a time. To
        serve one page at a time (a UI, a REST API), call ``fetch_next_page()`` on the
        returned iterator and keep its ``next_page_token`` for the next request.
        ``rpc_timeout`` bounds each page's read (``RPCError`` ``DEADLINE_EXCEEDED``).
        """
        del rpc_metadata
        if query is not None:
            check_text(query, "the list filter (query)")
        return WorkflowExecutionAsyncIterator(
            self, query, limit, page_size, next_page_token, rpc_timeout=rpc_timeout
        )

    async def count_workflows(
        self,
        query: str | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowExecutionCount:
        """How many runs match the List Filter ``query``; with ``GROUP BY
        ExecutionStatus``, how many of each status too (``groups``), as Temporal counts."""
        del rpc_metadata
        if query is not None:
            check_text(query, "the list filter (query)")
        counted = await within_rpc_timeout(
            self.service.count_runs(self.namespace, query), rpc_timeout, "counting workflows"
        )
        return WorkflowExecutionCount.of(counted)


def _started_task(start: asyncio.Future[Any]) -> Any:
    """The workflow task a finished eager start handed over, or None (it failed, was
    cancelled, or started no run)."""
    if start.cancelled() or start.exception() is not None:
        return None
    return start.result().task
