"""Result waiters' reads of their runs: those asked for in one turn of an event loop go in
one read transaction.

A result waited for in a process that does not close the run reads the run when the wait
begins and again when the close wakes it (``WorkflowHandle._wait_result``). A client that
started a few hundred workflows and awaits them all reads them all at once, and a commit
that closes twenty runs wakes twenty waiters in the same turn of the loop: one read each
made the client's thread hops, pooled connections and transactions cost more than the
workers that ran the workflows (a client in a process of its own, ``bench/scale.py``).

:meth:`CloseReads.read` queues its request and the first of a turn schedules the reading
for the loop's next turn, when every waiter woken with it has queued its own: one
transaction (``CloseReadOps.runs_and_close_events``) answers them all, each with its run or
its own error (a run not found). A failure of the transaction itself reaches each of
them. A waiter that gave up meanwhile (its ``rpc_timeout``) is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._json import loads as json_loads
from .._model.events import CLOSING_EVENT_TYPES, HistoryEvent
from .._store.gateway import Store
from .._store.tx import Row, StoreTx
from ..common import WorkflowExecutionStatus
from ..exceptions import RPCError
from .namespaces import not_found
from .operation import operation

if TYPE_CHECKING:
    from .service import Service

#: What a waiter asks for: namespace, workflow id, run id (None: the latest run).
Key = tuple[str, str, str | None]
_Waiter = tuple[Key, "asyncio.Future[tuple[Row, HistoryEvent | None]]"]


class CloseReads:
    """One service's queue of run reads, per event loop (see the module docstring)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        #: Requests waiting for their loop's next turn. Each loop touches only its own
        #: key, and one dict operation at a time holds the GIL: no lock is needed.
        self._queued: dict[asyncio.AbstractEventLoop, list[_Waiter]] = {}
        #: The reading tasks running (a reference, so none is collected mid-way).
        self._reading: set[asyncio.Task[None]] = set()
        #: Transactions run, and requests they answered (for tests and benchmarks).
        self.transactions = 0
        self.requests = 0

    async def read(
        self, namespace: str, workflow_id: str, run_id: str | None
    ) -> tuple[Row, HistoryEvent | None]:
        """The run (``run_id``, or the latest run of ``workflow_id``) and, if it is
        closed, the event that closed it; raises what reading it alone would raise."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[tuple[Row, HistoryEvent | None]] = loop.create_future()
        queued = self._queued.get(loop)
        if queued is None:
            queued = self._queued[loop] = []
            loop.call_soon(self._start, loop)
        queued.append(((namespace, workflow_id, run_id), fut))
        return await fut

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        waiters = [w for w in self._queued.pop(loop, ()) if not w[1].done()]
        if waiters:
            task = loop.create_task(self._answer(waiters), name="durable-close-reads")
            self._reading.add(task)
            task.add_done_callback(self._reading.discard)

    async def _answer(self, waiters: list[_Waiter]) -> None:
        keys = [key for key, _ in waiters]
        try:
            answers: list[Any] = await self.service.runs_and_close_events(keys)
        except asyncio.CancelledError:
            for _, fut in waiters:
                fut.cancel()
            raise
        except BaseException as err:  # the transaction failed: every waiter raises it
            for _, fut in waiters:
                if not fut.done():
                    fut.set_exception(err)
            return
        self.transactions += 1
        self.requests += len(waiters)
        for (_, fut), answer in zip(waiters, answers, strict=True):
            if fut.done():
                continue
            if isinstance(answer, BaseException):
                fut.set_exception(answer)
            else:
                fut.set_result(answer)


class CloseReadOps:
    """Reading runs and their closing events for result waiters (a mixin of ``Service``)."""

    store: Store
    close_reads: CloseReads

    async def run_and_close_event(
        self, namespace: str, workflow_id: str, run_id: str | None
    ) -> tuple[Row, HistoryEvent | None]:
        """The run row and, if the run is closed, its closing event. Those asked for in
        the same turn of the event loop are read in one transaction
        (:mod:`engine._service.close_reads`)."""
        return await self.close_reads.read(namespace, workflow_id, run_id)

    @operation(read=True)
    def runs_and_close_events(
        self, tx: StoreTx, keys: Sequence[tuple[str, str, str | None]]
    ) -> list[tuple[Row, HistoryEvent | None] | RPCError]:
        """For each (namespace, workflow id, run id or None for the latest run): the run
        row and, if the run is closed, its closing event; or the error a run not found
        raises. The runs named by id are read in one statement, the closing events of the
        closed ones in another."""
        by_id = tx.runs_by_id([run_id for _, _, run_id in keys if run_id])
        rows: list[Row | RPCError] = []
        for namespace, workflow_id, run_id in keys:
            row = by_id.get(run_id) if run_id else tx.find_latest_run(namespace, workflow_id)
            if row is None or row.workflow_id != workflow_id or row.namespace != namespace:
                rows.append(not_found(tx, namespace, workflow_id, run_id))
            else:
                rows.append(row)
        # A closed run's last event is the one that closed it (none comes after).
        last = tx.events_by_key(
            {
                str(row.run_id): row.next_event_id - 1
                for row in rows
                if not isinstance(row, RPCError) and row.status != WorkflowExecutionStatus.RUNNING
            }
        )
        out: list[tuple[Row, HistoryEvent | None] | RPCError] = []
        for row in rows:
            if isinstance(row, RPCError) or row.status == WorkflowExecutionStatus.RUNNING:
                out.append(row if isinstance(row, RPCError) else (row, None))
                continue
            event = last.get(str(row.run_id))
            if event is None or event.event_type not in CLOSING_EVENT_TYPES:
                event = tx.close_event(row.run_id) or tx.last_event(row.run_id)
            if event is None:
                out.append((row, None))
                continue
            attrs = json_loads(event.attributes)
            closing = HistoryEvent(event.event_id, event.event_time, event.event_type, attrs)
            out.append((row, closing))
        return out
