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
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ._async_activity import AsyncActivityHandle, AsyncActivityIDReference, async_activity_handle
from ._ids import random_uuid
from ._json import loads as json_loads
from ._listing import (
    WorkflowExecution,
    WorkflowExecutionAsyncIterator,
    WorkflowExecutionDescription,
    _dt,
)
from ._model.definitions import WorkflowDefinition, type_hints
from ._service.clock import Clock
from ._service.host import ServiceHost
from ._service.service import Service
from ._service.state import closed_channel
from ._service.types import StartWorkflowRequest
from ._store.dialects import parse_url
from ._store.gateway import Store, release_store, shared_store
from .common import (
    RetryPolicy,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from .converter import DataConverter, Payload, check_payloads_size
from .exceptions import (
    AsyncActivityCancelledError,
    CancelledError,
    InvalidArgumentError,
    QueryRejectCondition,
    TerminatedError,
    TimeoutError,
    TimeoutType,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
)
from .history import HistoryEvent, WorkflowHistory
from .workflow import definition_name, handler_name

__all__ = [
    "AsyncActivityCancelledError",
    "AsyncActivityHandle",
    "AsyncActivityIDReference",
    "Client",
    "WorkflowExecution",
    "WorkflowExecutionAsyncIterator",
    "WorkflowExecutionDescription",
    "WorkflowExecutionStatus",
    "WorkflowHandle",
    "WorkflowQueryFailedError",
    "WorkflowQueryRejectedError",
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
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.data_converter = data_converter or DataConverter.default
        self.identity = identity or default_identity()
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
    ) -> Client:
        """Open (and migrate) the database at ``target_url``, or the embedded default.

        ``fsync=True`` makes SQLite sync every commit to disk (``synchronous=FULL``); the
        default (``NORMAL`` in WAL mode) survives process crashes but may lose the last
        commits on power loss. ``DURABLE_FSYNC=1`` sets it from the environment.
        """
        if fsync is None:
            fsync = os.environ.get("DURABLE_FSYNC", "") in ("1", "true", "yes")
        store = await asyncio.to_thread(shared_store, target_url, fsync=fsync)
        return cls(
            store,
            namespace=namespace,
            data_converter=data_converter,
            identity=identity,
            clock=clock,
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
        time out tasks, schedule retries. Call from a running event loop.

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
    ) -> WorkflowHandle:
        """Start a run of ``workflow`` (a ``@workflow.run`` method, class, or type name).

        ``request_eager_start``: when a worker of this client polls ``task_queue`` in this
        process and has a free slot, the run's first workflow task is started for it in the
        same transaction as the start (Temporal's eager workflow start; the history is the
        same). On by default here, where client and worker usually share a process; pass
        False to always go through the queue. Never with ``start_delay``.
        """
        wf_type = definition_name(workflow)
        if result_type is None and not isinstance(workflow, str):
            result_type = WorkflowDefinition.of(workflow).return_type
        if not isinstance(id, str) or not id:
            raise InvalidArgumentError("id (the workflow id) must be a non-empty string")
        if not isinstance(task_queue, str) or not task_queue:
            raise InvalidArgumentError("task_queue must be a non-empty string")
        values = [arg] if arg is not _missing else list(args)
        if arg is not _missing and args:
            raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
        payloads = self.data_converter.to_payloads(values)
        check_payloads_size(payloads, what=f"input of workflow {wf_type!r}")
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
            memo={
                "fields": {k: self.data_converter.to_payload(v).to_json() for k, v in memo.items()}
            }
            if memo
            else None,
            identity=self.identity,
            request_id=request_id or random_uuid(),
            start_delay=_seconds(start_delay, "start_delay") or 0.0,
        )
        offer = (
            self.service.handoffs.offer_start(self.namespace, task_queue)
            if request_eager_start and not start_delay
            else None
        )
        if offer is None:
            result = await self.service.start_workflow(request, None)
        else:
            # The reservation is settled when the start commits (its task handed over, or
            # the slot given back), even if this coroutine is cancelled meanwhile.
            pending = asyncio.ensure_future(self.service.start_workflow(request, offer))
            pending.add_done_callback(lambda f: offer.settle(_started_task(f)))
            result = await asyncio.shield(pending)
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
        """A handle to an existing workflow (its latest run unless ``run_id`` is given)."""
        return WorkflowHandle(
            self,
            workflow_id,
            run_id=run_id,
            result_run_id=run_id,
            first_execution_run_id=first_execution_run_id,
            result_type=result_type,
        )

    def get_workflow_handle_for(
        self, workflow: Callable[..., Any], workflow_id: str, *, run_id: str | None = None
    ) -> WorkflowHandle:
        """A handle whose result is decoded with the workflow's return type."""
        return self.get_workflow_handle(
            workflow_id, run_id=run_id, result_type=WorkflowDefinition.of(workflow).return_type
        )

    def list_workflows(
        self,
        query: str | None = None,
        *,
        limit: int | None = None,
        page_size: int = 1000,
        next_page_token: bytes | None = None,
    ) -> WorkflowExecutionAsyncIterator:
        """Runs of the namespace, newest first, filtered by ``query``: terms such as
        ``WorkflowType = 'Order' AND ExecutionStatus = 'Running'`` (also WorkflowId, RunId,
        TaskQueue), a subset of Temporal's list filter.

        ``async for`` reads every match (at most ``limit``), ``page_size`` at a time. To
        serve one page at a time (a UI, a REST API), call ``fetch_next_page()`` on the
        returned iterator and keep its ``next_page_token`` for the next request.
        """
        return WorkflowExecutionAsyncIterator(self, query, limit, page_size, next_page_token)


class WorkflowHandle:
    """A workflow id (and perhaps a run id) to act on."""

    def __init__(
        self,
        client: Client,
        id: str,
        *,
        run_id: str | None = None,
        result_run_id: str | None = None,
        first_execution_run_id: str | None = None,
        result_type: type | None = None,
    ) -> None:
        self._client = client
        self.id = id
        self.run_id = run_id
        self.result_run_id = result_run_id
        self.first_execution_run_id = first_execution_run_id
        self._result_type = result_type
        #: A run this handle's start created (in this process), and its task queue: until
        #: it closes, nothing has notified its close channel (see :meth:`_wait_result`).
        self._started_run: str | None = None
        self._started_queue = ""

    @property
    def client(self) -> Client:
        """The client this handle uses."""
        return self._client

    def __repr__(self) -> str:
        run = self.run_id or self.result_run_id
        return f"WorkflowHandle(id={self.id!r}, run_id={run!r})"

    async def result(self, *, follow_runs: bool = True) -> Any:
        """Wait for the run to close; return its result or raise WorkflowFailureError.

        Follows continue-as-new to the newest run unless ``follow_runs=False``, where a run
        that continued as new raises :class:`~engine.exceptions.WorkflowContinuedAsNewError`.
        """
        with self._client.service.clock.waiting_for_result():
            return await self._wait_result(self.result_run_id or self.run_id, follow_runs)

    async def _wait_result(self, run_id: str | None, follow_runs: bool) -> Any:
        client = self._client
        service = client.service
        notifier = client.store.notifier
        # The run this handle started, with a worker of this process on its queue: nothing
        # announced its close before it existed, so wait from generation 0 without reading
        # the run first (a close in this process wakes at once with its outcome; one made
        # elsewhere is seen by the close watcher, then read).
        unread = (
            run_id is not None
            and run_id == self._started_run
            and service.handoffs.serves(client.namespace, self._started_queue)
        )
        while True:
            channel = closed_channel(run_id) if run_id else ""
            event: HistoryEvent | None = None
            outcome: Any = None
            if unread:
                unread = False
                generation, status, new_run_id = 0, WorkflowExecutionStatus.RUNNING, None
                outcome = notifier.message(channel)  # closed already, here
            else:
                generation = notifier.generation(channel)
                row, event = await service.run_and_close_event(client.namespace, self.id, run_id)
                run_id = row.run_id
                status = WorkflowExecutionStatus(row.status)
                new_run_id = row.new_run_id
            if status == WorkflowExecutionStatus.RUNNING:
                assert run_id is not None
                channel = closed_channel(run_id)
                if outcome is None:
                    with service.close_watcher.watching(run_id):
                        woken = await notifier.wait(channel, 60.0, since=generation)
                    # A close in this process brings its outcome along: no read needed.
                    outcome = notifier.message(channel) if woken else None
                if outcome is None:
                    continue
                status = WorkflowExecutionStatus(outcome.status)
                new_run_id = outcome.new_run_id
                event = HistoryEvent(
                    outcome.event_id,
                    outcome.event_time,
                    outcome.event_type,
                    json_loads(outcome.attributes),
                )
            if new_run_id and follow_runs:
                run_id = new_run_id  # continued as new, or failed and retried
                continue
            assert event is not None
            return self._outcome(status, event.attributes)

    def _outcome(self, status: WorkflowExecutionStatus, attrs: dict[str, Any]) -> Any:
        dc = self._client.data_converter
        if status == WorkflowExecutionStatus.COMPLETED:
            payloads = (attrs.get("result") or {}).get("payloads") or []
            values = dc.from_payloads([Payload.from_json(p) for p in payloads], [self._result_type])
            return values[0] if values else None
        cause: Any
        if status == WorkflowExecutionStatus.FAILED:
            cause = dc.from_failure(attrs.get("failure") or {"message": "failed"})
        elif status == WorkflowExecutionStatus.CANCELED:
            details = dc.from_payloads_json((attrs.get("details") or {}).get("payloads"))
            cause = CancelledError("Workflow cancelled", *details)
        elif status == WorkflowExecutionStatus.TERMINATED:
            cause = TerminatedError(attrs.get("reason") or "Workflow terminated")
        elif status == WorkflowExecutionStatus.TIMED_OUT:
            cause = TimeoutError(
                "Workflow timed out", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]
            )
        else:  # continued as new, not followed
            raise WorkflowContinuedAsNewError(attrs.get("newExecutionRunId", ""))
        raise WorkflowFailureError(cause=cause)

    async def describe(self) -> WorkflowExecutionDescription:
        """The run's status, times and pending work."""
        d = await self._client.service.describe(self._client.namespace, self.id, self.run_id)
        return WorkflowExecutionDescription(
            id=d.workflow_id,
            run_id=d.run_id,
            workflow_type=d.workflow_type,
            task_queue=d.task_queue,
            status=WorkflowExecutionStatus(d.status),
            start_time=datetime.fromtimestamp(d.start_time, UTC),
            close_time=_dt(d.close_time),
            history_length=d.history_length,
            namespace=d.namespace,
            pending_activities=d.pending_activities,
            pending_timers=d.pending_timers,
            pending_workflow_task=d.pending_workflow_task,
            history_size_bytes=d.history_size_bytes,
            first_execution_run_id=d.first_run_id,
            continued_as_new_run_id=d.new_run_id,
        )

    async def signal(
        self, signal: Callable[..., Any] | str, arg: Any = _missing, *, args: Sequence[Any] = ()
    ) -> None:
        """Send a signal (asynchronous: no result)."""
        values = [arg] if arg is not _missing else list(args)
        payloads = self._client.data_converter.to_payloads(values)
        check_payloads_size(payloads, what="signal input")
        await self._client.service.signal_workflow(
            self._client.namespace,
            self.id,
            self.run_id,
            handler_name(signal, "signal"),
            [p.to_json() for p in payloads],
            self._client.identity,
        )

    async def query(
        self,
        query: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        result_type: type | None = None,
        reject_condition: QueryRejectCondition | None = None,
        timeout: timedelta = timedelta(seconds=10),
    ) -> Any:
        """Ask the run a read-only question (a ``@workflow.query`` handler).

        A worker of the run's task queue answers by replaying the history: it works on
        closed runs too, and adds nothing to the history. ``reject_condition`` (Temporal's
        ``QueryRejectCondition``): with ``NOT_OPEN`` a closed run is not asked, with
        ``NOT_COMPLETED_CLEANLY`` one that closed other than by completing is not;
        :class:`WorkflowQueryRejectedError` then says its status.
        """
        values = [arg] if arg is not _missing else list(args)
        name = handler_name(query, "query")
        if reject_condition not in (None, QueryRejectCondition.NONE):
            status = (await self.describe()).status
            open_ = status == WorkflowExecutionStatus.RUNNING
            clean = open_ or status == WorkflowExecutionStatus.COMPLETED
            if (reject_condition == QueryRejectCondition.NOT_OPEN and not open_) or (
                reject_condition == QueryRejectCondition.NOT_COMPLETED_CLEANLY and not clean
            ):
                raise WorkflowQueryRejectedError(status)
        if result_type is None and not isinstance(query, str):
            result_type = type_hints(query, skip_self=True)[1]
        payloads = await self._client.service.query_workflow(
            self._client.namespace,
            self.id,
            self.run_id,
            name,
            self._client.data_converter.to_payloads_json(values),
            timeout.total_seconds(),
        )
        decoded = self._client.data_converter.from_payloads_json(payloads, [result_type])
        return decoded[0] if decoded else None

    async def execute_update(
        self,
        update: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: type | None = None,
        timeout: timedelta = timedelta(seconds=60),
    ) -> Any:
        """Send an update (a ``@workflow.update`` handler) and wait for its result.

        The handler's validator, if any, runs first: a rejected update is not recorded in
        the history. Raises :class:`~engine.exceptions.WorkflowUpdateFailedError` (with the
        validator's or handler's error as ``cause``) when it is rejected or fails.
        """
        values = [arg] if arg is not _missing else list(args)
        name = handler_name(update, "update")
        if result_type is None and not isinstance(update, str):
            result_type = type_hints(update, skip_self=True)[1]
        dc = self._client.data_converter
        payloads = dc.to_payloads(values)
        check_payloads_size(payloads, what=f"input of update {name!r}")
        outcome = await self._client.service.update_workflow(
            self._client.namespace,
            self.id,
            self.run_id,
            name,
            [p.to_json() for p in payloads],
            id or random_uuid(),
            self._client.identity,
            timeout.total_seconds(),
        )
        if "failure" in outcome:
            cause = dc.from_failure(outcome["failure"])
            raise WorkflowUpdateFailedError(f"update {name!r} failed: {cause}", cause=cause)
        values_out = dc.from_payloads_json(
            (outcome.get("success") or {}).get("payloads"), [result_type]
        )
        return values_out[0] if values_out else None

    async def cancel(self, reason: str = "") -> None:
        """Request cancellation: delivered into workflow code, which may clean up."""
        await self._client.service.request_cancel(
            self._client.namespace, self.id, self.run_id, reason, self._client.identity
        )

    async def terminate(self, *args: Any, reason: str | None = None) -> None:
        """End the run immediately; no workflow code runs (unlike :meth:`cancel`)."""
        details = self._client.data_converter.to_payloads_json(list(args)) if args else None
        await self._client.service.terminate(
            self._client.namespace,
            self.id,
            self.run_id,
            reason or "terminated by client",
            details,
            self._client.identity,
        )

    async def fetch_attempts(self) -> list[dict[str, Any]]:
        """Every activity attempt of the run (kept after the activity closes), in order.

        Each item has ``scheduled_event_id``, ``activity_id``, ``activity_type``,
        ``attempt``, ``scheduled_time``, ``started_time``, ``ended_time`` (datetimes, UTC),
        ``outcome`` (running, completed, failed, timed_out, canceled) and ``failure``.
        """
        row = await self._client.service.resolve_run(self._client.namespace, self.id, self.run_id)
        return await self._client.service.attempts(row.run_id)

    async def fetch_history(self) -> WorkflowHistory:
        """The run's event history."""
        service = self._client.service
        _, events = await service.run_history(self._client.namespace, self.id, self.run_id)
        return WorkflowHistory(self.id, events)

    async def fetch_history_events(
        self,
        *,
        page_size: int = 1000,
        wait_new_event: bool = False,
        after_event_id: int = 0,
        poll_interval: timedelta = timedelta(milliseconds=250),
    ) -> AsyncIterator[HistoryEvent]:
        """The run's events in order, read ``page_size`` at a time, from the one after
        ``after_event_id``.

        With ``wait_new_event=True`` the iteration keeps going while the run is open,
        yielding each event soon after it is recorded (checking every ``poll_interval``),
        and ends with the run's closing event. The run is the one the handle names, or else
        the latest run of its workflow id when the iteration starts (it does not follow
        continue-as-new).
        """
        if page_size < 1:
            raise InvalidArgumentError(f"page_size must be at least 1, not {page_size}")
        if after_event_id < 0:
            raise InvalidArgumentError(f"after_event_id must be 0 or more, not {after_event_id}")
        service, namespace = self._client.service, self._client.namespace
        row = await service.resolve_run(namespace, self.id, self.run_id)
        run_id, last = row.run_id, after_event_id
        while True:
            page = await service.history(run_id, last + 1, last + page_size)
            for event in page:
                yield event
            if page:
                last = page[-1].event_id
            if len(page) == page_size:
                continue
            if not wait_new_event:
                return
            row = await service.resolve_run(namespace, self.id, run_id)
            if row.status != WorkflowExecutionStatus.RUNNING and last >= row.next_event_id - 1:
                return
            if row.next_event_id - 1 <= last:
                await asyncio.sleep(poll_interval.total_seconds())


def _started_task(start: asyncio.Future[Any]) -> Any:
    """The workflow task a finished eager start handed over, or None (it failed, was
    cancelled, or started no run)."""
    if start.cancelled() or start.exception() is not None:
        return None
    return start.result().task
