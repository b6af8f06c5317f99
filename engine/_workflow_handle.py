"""A handle on one workflow id (and perhaps one run): result, describe, signal, query,
updates, cancel, terminate, history. Re-exported by :mod:`engine.client`, which makes them.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._client_updates import (
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
    start_update,
)
from ._ids import random_uuid
from ._json import loads as json_loads
from ._listing import (
    WorkflowExecutionDescription,
    _dt,
)
from ._model.definitions import type_hints
from ._service.state import closed_channel
from .common import (
    WorkflowExecutionStatus,
)
from .converter import Payload, check_payloads_size
from .exceptions import (
    CancelledError,
    InvalidArgumentError,
    QueryRejectCondition,
    TerminatedError,
    TimeoutError,
    TimeoutType,
    WorkflowContinuedAsNewError,
    WorkflowFailureError,
    WorkflowQueryRejectedError,
)
from .history import HistoryEvent, WorkflowHistory, WorkflowHistoryEventFilterType
from .service import within_rpc_timeout
from .workflow import handler_name

if TYPE_CHECKING:
    from .client import Client

_missing: Any = inspect.Parameter.empty
_no_metadata: Mapping[str, str | bytes] = {}


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

    async def result(
        self,
        *,
        follow_runs: bool = True,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> Any:
        """Wait for the run to close; return its result or raise WorkflowFailureError.

        Follows continue-as-new to the newest run unless ``follow_runs=False``, where a run
        that continued as new raises :class:`~engine.exceptions.WorkflowContinuedAsNewError`.
        ``rpc_timeout`` bounds the wait (``temporalio`` bounds each history long-poll, which
        waits for the close): a result not ready in time raises
        :class:`~engine.exceptions.RPCError` ``DEADLINE_EXCEEDED``; the run goes on.
        """
        with self._client.service.clock.waiting_for_result():
            waiting = self._wait_result(self.result_run_id or self.run_id, follow_runs)
            return await within_rpc_timeout(
                waiting, rpc_timeout, f"the result of workflow {self.id!r}", rpc_metadata
            )

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

    async def describe(
        self,
        *,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowExecutionDescription:
        """The run's status, times and pending work."""
        d = await within_rpc_timeout(
            self._client.service.describe(self._client.namespace, self.id, self.run_id),
            rpc_timeout,
            f"describing workflow {self.id!r}",
            rpc_metadata,
        )
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
            parent_id=d.parent_workflow_id,
            parent_run_id=d.parent_run_id,
            root_id=d.root_workflow_id,
            root_run_id=d.root_run_id,
            execution_time=_dt(d.execution_time),
            data_converter=self._client.data_converter,
            raw_memo=d.memo,
            raw_search_attributes=d.search_attributes,
            raw_user_metadata=d.user_metadata,
        )

    async def signal(
        self,
        signal: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Send a signal (asynchronous: no result)."""
        values = [arg] if arg is not _missing else list(args)
        payloads = self._client.data_converter.to_payloads(values)
        check_payloads_size(
            payloads,
            what="signal input",
            warn_at=self._client.payload_limits.payloads_warn_size,
        )
        sending = self._client.service.signal_workflow(
            self._client.namespace,
            self.id,
            self.run_id,
            handler_name(signal, "signal"),
            [p.to_json() for p in payloads],
            self._client.identity,
            # As temporalio's client: one request id per signal, the same on every try.
            random_uuid(),
        )
        await within_rpc_timeout(sending, rpc_timeout, "the signal", rpc_metadata)

    async def query(
        self,
        query: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        result_type: type | None = None,
        reject_condition: QueryRejectCondition | None = None,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
        timeout: timedelta = timedelta(seconds=10),
    ) -> Any:
        """Ask the run a read-only question (a ``@workflow.query`` handler).

        A worker of the run's task queue answers by replaying the history: it works on
        closed runs too, and adds nothing to the history. ``reject_condition`` (Temporal's
        ``QueryRejectCondition``; None: the client's
        ``default_workflow_query_reject_condition``): with ``NOT_OPEN`` a closed run is not
        asked, with ``NOT_COMPLETED_CLEANLY`` one that closed other than by completing is
        not; :class:`WorkflowQueryRejectedError` then says its status. ``timeout``: how long
        a worker has to answer; ``rpc_timeout`` bounds the whole call.
        """
        return await within_rpc_timeout(
            self._query(query, arg, args, result_type, reject_condition, timeout),
            rpc_timeout,
            "the query",
            rpc_metadata,
        )

    async def _query(
        self,
        query: Callable[..., Any] | str,
        arg: Any,
        args: Sequence[Any],
        result_type: type | None,
        reject_condition: QueryRejectCondition | None,
        timeout: timedelta,
    ) -> Any:
        values = [arg] if arg is not _missing else list(args)
        name = handler_name(query, "query")
        if reject_condition is None:
            reject_condition = self._client.default_workflow_query_reject_condition
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

    async def start_update(
        self,
        update: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        wait_for_stage: WorkflowUpdateStage,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: type | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowUpdateHandle[Any]:
        """Send an update (a ``@workflow.update`` handler) and wait until it reaches
        ``wait_for_stage``: ``ACCEPTED`` (validated and recorded) or ``COMPLETED``.

        Returns a :class:`WorkflowUpdateHandle`; its ``result()`` raises
        :class:`~engine.exceptions.WorkflowUpdateFailedError` when the validator rejected
        the update (nothing is written to the history then), the run has no such handler,
        or the handler failed. An ``id`` already sent to this run gets that update back
        (requests are idempotent by id). A closed run raises
        :class:`~engine.exceptions.WorkflowNotFoundError` (an ``RPCError`` ``NOT_FOUND``);
        ``rpc_timeout`` bounds the wait
        (:class:`~engine.exceptions.WorkflowUpdateRPCTimeoutOrCancelledError`).
        """
        del rpc_metadata
        return await start_update(
            self,
            update,
            arg,
            wait_for_stage=wait_for_stage,
            args=args,
            id=id,
            result_type=result_type,
            rpc_timeout=rpc_timeout,
        )

    async def execute_update(
        self,
        update: Callable[..., Any] | str,
        arg: Any = _missing,
        *,
        args: Sequence[Any] = (),
        id: str | None = None,
        result_type: type | None = None,
        rpc_metadata: Mapping[str, str | bytes] = {},
        rpc_timeout: timedelta | None = None,
    ) -> Any:
        """Send an update and wait for its result: :meth:`start_update` with
        ``wait_for_stage=COMPLETED``, then ``result()``."""
        handle = await self.start_update(
            update,
            arg,
            wait_for_stage=WorkflowUpdateStage.COMPLETED,
            args=args,
            id=id,
            result_type=result_type,
            rpc_metadata=rpc_metadata,
            rpc_timeout=rpc_timeout,
        )
        return await handle.result()

    def get_update_handle(
        self, id: str, *, workflow_run_id: str | None = None, result_type: type | None = None
    ) -> WorkflowUpdateHandle[Any]:
        """A handle to an update sent earlier, by its id (of this handle's run, or of
        ``workflow_run_id``). Nothing is read until ``result()``, which raises
        :class:`~engine.exceptions.RPCError` ``NOT_FOUND`` for an unknown id."""
        return WorkflowUpdateHandle(
            self._client,
            id,
            self.id,
            workflow_run_id=workflow_run_id or self.run_id,
            result_type=result_type,
        )

    def get_update_handle_for(
        self, update: Callable[..., Any], id: str, *, workflow_run_id: str | None = None
    ) -> WorkflowUpdateHandle[Any]:
        """:meth:`get_update_handle`, the result type taken from the handler method."""
        return self.get_update_handle(
            id, workflow_run_id=workflow_run_id, result_type=type_hints(update, skip_self=True)[1]
        )

    async def cancel(
        self,
        reason: str = "",
        *,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """Request cancellation: delivered into workflow code, which may clean up.

        With :attr:`first_execution_run_id` set, the run must belong to the run chain it
        started (else :class:`~engine.exceptions.WorkflowNotFoundError`), as in Temporal.
        """

        async def cancelling() -> None:
            await self._client.service.request_cancel(
                self._client.namespace,
                self.id,
                self.run_id,
                reason,
                self._client.identity,
                self.first_execution_run_id,
            )

        await within_rpc_timeout(cancelling(), rpc_timeout, "the cancel request", rpc_metadata)

    async def terminate(
        self,
        *args: Any,
        reason: str | None = None,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> None:
        """End the run immediately; no workflow code runs (unlike :meth:`cancel`). The run
        chain is checked against :attr:`first_execution_run_id` as by :meth:`cancel`."""
        details = self._client.data_converter.to_payloads_json(list(args)) if args else None

        async def terminating() -> None:
            await self._client.service.terminate(
                self._client.namespace,
                self.id,
                self.run_id,
                reason or "terminated by client",
                details,
                self._client.identity,
                self.first_execution_run_id,
                random_uuid(),
            )

        await within_rpc_timeout(terminating(), rpc_timeout, "the terminate", rpc_metadata)

    async def fetch_attempts(self) -> list[dict[str, Any]]:
        """Every activity attempt of the run (kept after the activity closes), in order.

        Each item has ``scheduled_event_id``, ``activity_id``, ``activity_type``,
        ``attempt``, ``scheduled_time``, ``started_time``, ``ended_time`` (datetimes, UTC),
        ``outcome`` (running, completed, failed, timed_out, canceled) and ``failure``.
        """
        row = await self._client.service.resolve_run(self._client.namespace, self.id, self.run_id)
        return await self._client.service.attempts(row.run_id)

    async def fetch_history(
        self,
        *,
        event_filter_type: WorkflowHistoryEventFilterType = WorkflowHistoryEventFilterType.ALL_EVENT,
        skip_archival: bool = False,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
    ) -> WorkflowHistory:
        """The run's event history (with ``CLOSE_EVENT``, only its closing event, if it
        closed). ``skip_archival`` is accepted: there is no archival here."""
        if event_filter_type != WorkflowHistoryEventFilterType.ALL_EVENT:
            events = self.fetch_history_events(
                event_filter_type=event_filter_type,
                rpc_metadata=rpc_metadata,
                rpc_timeout=rpc_timeout,
            )
            return WorkflowHistory(self.id, [event async for event in events])
        service = self._client.service
        _, events_ = await within_rpc_timeout(
            service.run_history(self._client.namespace, self.id, self.run_id),
            rpc_timeout,
            "fetching the history",
            rpc_metadata,
        )
        return WorkflowHistory(self.id, events_)

    async def fetch_history_events(
        self,
        *,
        page_size: int = 1000,
        wait_new_event: bool = False,
        event_filter_type: WorkflowHistoryEventFilterType = WorkflowHistoryEventFilterType.ALL_EVENT,
        skip_archival: bool = False,
        rpc_metadata: Mapping[str, str | bytes] = _no_metadata,
        rpc_timeout: timedelta | None = None,
        after_event_id: int = 0,
        poll_interval: timedelta = timedelta(milliseconds=250),
    ) -> AsyncIterator[HistoryEvent]:
        """The run's events in order, read ``page_size`` at a time, from the one after
        ``after_event_id``.

        With ``wait_new_event=True`` the iteration keeps going while the run is open,
        yielding each event soon after it is recorded (checking every ``poll_interval``),
        and ends with the run's closing event. The run is the one the handle names, or else
        the latest run of its workflow id when the iteration starts (it does not follow
        continue-as-new). ``event_filter_type=CLOSE_EVENT`` yields only the closing event
        (nothing for an open run, unless ``wait_new_event`` waits for it). ``rpc_timeout``
        bounds each read, waiting included (:class:`~engine.exceptions.RPCError`
        ``DEADLINE_EXCEEDED``, as a long-poll's deadline); ``skip_archival``: no archival.
        """
        if page_size < 1:
            raise InvalidArgumentError(f"page_size must be at least 1, not {page_size}")
        if after_event_id < 0:
            raise InvalidArgumentError(f"after_event_id must be 0 or more, not {after_event_id}")
        filter_type = WorkflowHistoryEventFilterType(event_filter_type)
        service, namespace = self._client.service, self._client.namespace
        row = await within_rpc_timeout(
            service.resolve_run(namespace, self.id, self.run_id),
            rpc_timeout,
            "fetching the history",
        )
        run_id, last, poll = row.run_id, after_event_id, poll_interval.total_seconds()
        if filter_type == WorkflowHistoryEventFilterType.CLOSE_EVENT:
            closing = await within_rpc_timeout(
                self._close_event(run_id, wait_new_event, poll),
                rpc_timeout,
                "waiting for the closing event",
            )
            if closing is not None and closing.event_id > after_event_id:
                yield closing
            return
        while True:
            page = await within_rpc_timeout(
                self._next_page(run_id, last, page_size, wait_new_event, poll),
                rpc_timeout,
                "fetching the history",
            )
            for event in page:
                yield event
            if not page or (len(page) < page_size and not wait_new_event):
                return
            last = page[-1].event_id

    async def _next_page(
        self, run_id: str, last: int, page_size: int, wait: bool, poll: float
    ) -> list[HistoryEvent]:
        """The events after ``last`` (at most ``page_size``); with ``wait``, waiting for one
        while the run is open. Empty: the history (or the closed run's) is all read."""
        service, namespace = self._client.service, self._client.namespace
        while True:
            page = await service.history(run_id, last + 1, last + page_size)
            if page or not wait:
                return page
            row = await service.resolve_run(namespace, self.id, run_id)
            if row.status != WorkflowExecutionStatus.RUNNING and last >= row.next_event_id - 1:
                return []
            if row.next_event_id - 1 <= last:
                await asyncio.sleep(poll)

    async def _close_event(self, run_id: str, wait: bool, poll: float) -> HistoryEvent | None:
        """The run's closing event; None while it is open, unless ``wait`` waits for it."""
        service, namespace = self._client.service, self._client.namespace
        while True:
            row, event = await service.run_and_close_event(namespace, self.id, run_id)
            if row.status != WorkflowExecutionStatus.RUNNING or not wait:
                return event
            await asyncio.sleep(poll)
