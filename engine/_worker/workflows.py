"""Polling a workflow task queue and running workflow tasks, with a sticky cache.

Workflow code runs on a thread of the worker's own, one activation at a time (see
``activation.py``): code that blocks never stops the worker's event loop. An activation that
does not yield within the deadlock timeout fails its task at once with where its code was.
Cached instances skip replay; evicted ones replay from event 1. Queries replay in a small
thread pool, so a slow one never holds up workflow tasks.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .._model import commands as cmd
from .._model.definitions import ActivityDefinition, WorkflowDefinition, find_definition
from .._model.events import HistoryEvent
from .._replay.driver import CacheMismatchError, HistoryDriver
from .._replay.handlers import WorkflowTaskError
from .._replay.instance import WorkflowInstance
from .._replay.jobs import LocalActivityRequest, ResolveLocalActivity
from .._replay.replayer import answer_query
from .._replay.teardown import tear_down
from .._service.handoff import Handoffs, Reservation
from .._service.operation import tx_function
from .._service.service import Service
from .._service.state import wft_channel
from .._service.types import QueryTask, WorkflowTask
from .._service.workflow_tasks import TaskNotFoundError
from .._store.held import _TaskRolledBack
from ..common import duration_from_json
from ..converter import (
    DataConverter,
)
from ..exceptions import NondeterminismError, PayloadSizeError, StoreError
from ..service import PayloadLimitsConfig
from .activation import ActivationThread, DeadlockDetected
from .command_sizes import check_command_sizes, size_refusal
from .local import run_local_activity
from .metrics import WorkerMetrics
from .resend import until_accepted
from .slots import Poller

log = logging.getLogger("engine.worker")

#: An activation this long (and slower than 20,000 events/s, a fifth of replay's speed) is
#: reported once per workflow type: the worker's other workflows wait for it meanwhile.
SLOW_ACTIVATION_SECONDS = 0.5
CAUSE_NDE = "WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR"
CAUSE_UNHANDLED = "WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE"
#: How long a query waits for a running workflow task of its run before it is answered
#: from the history as it is (Temporal holds a query back until the task completes).
QUERY_WAIT_FOR_TASK = 10.0


@dataclass
class _Cached:
    driver: HistoryDriver
    workflow_type: str
    #: Events the last completion wrote, which the driver has not seen yet: they lead the
    #: next task's events, so it reads fewer.
    written: list[HistoryEvent] | None = None


class WorkflowRunner(Poller["WorkflowTask | QueryTask"]):
    """The workflow half of a worker."""

    what = "workflow tasks"

    def __init__(
        self,
        service: Service,
        *,
        namespace: str,
        task_queue: str,
        definitions: dict[str, WorkflowDefinition],
        converter: DataConverter,
        identity: str,
        max_concurrent: int,
        max_cached: int,
        deadlock_timeout: float,
        poll_interval: float,
        metrics: WorkerMetrics,
        eager_activities: bool = True,
        local_activities: Mapping[str, ActivityDefinition] | None = None,
        client: Any = None,
        failure_exception_types: Sequence[type[BaseException]] = (),
        local_executor: Executor | None = None,
        max_concurrent_local: int = 100,
    ) -> None:
        super().__init__(
            service,
            namespace=namespace,
            task_queue=task_queue,
            identity=identity,
            max_concurrent=max_concurrent,
            poll_interval=poll_interval,
            channel=wft_channel(namespace, task_queue),
        )
        self.definitions = definitions
        self.converter = converter
        self.max_cached = max_cached
        self.deadlock_timeout = deadlock_timeout
        self.metrics = metrics
        metrics.workflow_slots_total = max_concurrent
        #: Off with Worker(disable_eager_activity_execution=True).
        self.eager_activities = eager_activities
        #: The worker's activities, which its workflows may run as local activities.
        self.local_activities: Mapping[str, ActivityDefinition] = local_activities or {}
        self.client = client
        self._payload_limits: PayloadLimitsConfig | None = getattr(client, "payload_limits", None)
        #: Worker(workflow_failure_exception_types=...): added to each definition's.
        self.failure_exception_types = tuple(failure_exception_types)
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="durable-query")
        #: Sync local activities run here (Worker(activity_executor=...), else a pool of
        #: the runner's own); at most ``max_concurrent_local`` run at once.
        self._own_local_pool = local_executor is None
        self._local_pool: Executor = local_executor or ThreadPoolExecutor(
            max_workers=max_concurrent_local, thread_name_prefix="durable-local-activity"
        )
        self._local_slots = asyncio.Semaphore(max_concurrent_local)
        self._activations = ActivationThread(
            deadlock_timeout, name=f"durable-workflow-{task_queue}"
        )
        self._cache: collections.OrderedDict[str, _Cached] = collections.OrderedDict()
        #: run id -> next event id held; the store thread reads it (through the read-only
        #: view) when it starts a task for this runner, to send only the events after it.
        self._cache_next: dict[str, int] = {}
        self._cached_view = MappingProxyType(self._cache_next)
        self._inflight: set[asyncio.Task[None]] = set()
        #: Workflow tasks being handled (from their start to their completion's answer).
        self._busy = 0
        #: Runs with a task being handled (run id -> how many): an instance of theirs that
        #: leaves the cache is torn down only once the handling is over (it may still run
        #: the task's local activities' outcomes), from ``_retired``.
        self._handling: dict[str, int] = {}
        self._retired: dict[str, list[WorkflowInstance]] = {}
        #: Teardowns of dropped instances queued for the activation thread.
        self._teardowns: set[asyncio.Task[None]] = set()
        self._reported_slow: set[str] = set()

    # -- definitions --------------------------------------------------------------------

    def replace_definition(self, defn: WorkflowDefinition) -> None:
        """Use a new definition for its type; cached runs of the type replay against it."""
        self.definitions[defn.name] = defn
        for run_id, entry in list(self._cache.items()):
            if find_definition(self.definitions, entry.workflow_type) is defn:
                self._evict(run_id, forced=False)

    # -- polling ------------------------------------------------------------------------

    def _register(self, handoffs: Handoffs) -> None:
        handoffs.register_workflows(self)

    async def _poll(self, limit: int) -> list[WorkflowTask | QueryTask]:
        self.metrics.workflow_polls += 1
        return await self.service.poll_workflow_tasks(
            self.namespace, self.task_queue, self.identity, self._cached_view, limit
        )

    def _dispatch(self, tasks: Sequence[WorkflowTask | QueryTask]) -> int:
        """Run claimed tasks on their reserved slots and answer queries (no slot)."""
        used = 0
        for task in tasks:
            if isinstance(task, QueryTask):
                job = asyncio.get_running_loop().create_task(self._answer(task))
                self._inflight.add(job)
                job.add_done_callback(self._inflight.discard)
            else:
                self._spawn(task)
                used += 1
        return used

    def _spawn(self, task: WorkflowTask) -> None:
        """Handle a task whose slot is already reserved."""
        self.metrics.workflow_slots_used += 1
        job = asyncio.get_running_loop().create_task(self._handle(task))
        self._inflight.add(job)
        job.add_done_callback(self._done)

    def _done(self, job: asyncio.Task[None]) -> None:
        self._inflight.discard(job)
        self.slots.give(1)
        self.metrics.workflow_slots_used -= 1
        if not job.cancelled() and job.exception() is not None:
            log.error("workflow task handler crashed", exc_info=job.exception())

    # -- queries ------------------------------------------------------------------------

    async def _answer(self, query: QueryTask) -> None:
        """Answer a query by replaying the run's history into a fresh instance."""
        defn = find_definition(self.definitions, query.workflow_type)
        answer: list[dict[str, Any]] | None = None
        failure: str | None = None
        if defn is None:
            failure = (
                f"workflow type {query.workflow_type!r} is not registered on the worker "
                f"that took the query (task queue {self.task_queue!r})"
            )
        else:
            try:
                events = await self._history_for_query(query.run_id)
                fut = asyncio.get_running_loop().run_in_executor(
                    self._pool,
                    answer_query,
                    events,
                    defn,
                    self.converter,
                    query.workflow_id,
                    query.query_type,
                    query.args,
                )
                answer = await asyncio.wait_for(asyncio.shield(fut), self.deadlock_timeout)
            except TimeoutError:
                failure = (
                    f"query {query.query_type!r} did not return within {self.deadlock_timeout:g}s"
                )
            except Exception as err:
                failure = str(err) or type(err).__name__
        try:
            await self.service.answer_query(query.query_id, answer, failure)
        except StoreError as err:
            log.warning("could not store the answer to a query: %s", err)

    async def _history_for_query(self, run_id: str) -> list[Any]:
        """The run's history once no workflow task of it is running (waiting at most
        :data:`QUERY_WAIT_FOR_TASK` seconds: a task stuck longer is answered around)."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + QUERY_WAIT_FOR_TASK
        pause = 0.002
        while True:
            events, task_running = await self.service.query_history(run_id)
            if not task_running or loop.time() >= give_up:
                return list(events)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.05)

    # -- hand-offs (see engine._service.handoff) ---------------------------------------

    def reserve_workflow_task(self, run_id: str | None) -> Reservation | None:
        """A slot for a new run's first task (``run_id`` None) or for the next task of a
        run in the cache; None when stopping, full, not cached, or not on this loop."""
        if not self._on_loop():
            return None
        if run_id is not None and run_id not in self._cache_next:
            return None
        if not self.slots.reserve_handoff():
            return None
        return Reservation(
            self,
            "start" if run_id is None else "next",
            self.task_queue,
            self.identity,
            self._cached_view,
            idle=not self._busy,
        )

    def warm(self, run_ids: Collection[str]) -> None:
        """A timer of one of ``run_ids`` comes due soon: if this runner holds one of them,
        wake its activation thread now (see ``Store.warm``). From any thread."""
        cached = self._cache_next
        if any(run_id in cached for run_id in run_ids):
            self._activations.warm()

    def settle_workflow_task(self, reservation: Reservation, task: WorkflowTask | None) -> None:
        """Run the task the service started for the reservation, or free its slot.

        A runner that began stopping meanwhile still runs the task: :meth:`stop` waits for
        reservations to be settled before it waits for running tasks."""
        self.slots.settle_handoff(task is not None)
        if task is not None:
            if reservation.kind == "start":
                self.metrics.eager_workflow_starts += 1
            self._spawn(task)

    async def stop(self) -> None:
        """Stop polling and let running workflow tasks finish."""
        self.begin_stop()
        # Hand-offs in flight (a start or an activity outcome still committing) bring
        # their task here when they commit: wait for them, then for the tasks running.
        await self.slots.handoffs_settled(self.deadlock_timeout + 5)
        if self._inflight:
            await asyncio.wait(list(self._inflight), timeout=self.deadlock_timeout + 5)
        # Completions still being sent again (the database is down) are given up on:
        # their tasks time out and run again.
        self._abandoned = True
        if self._inflight:
            _, late = await asyncio.wait(list(self._inflight), timeout=3.0)
            for job in late:
                job.cancel()
            if late:  # (their runs' instances are torn down as they unwind)
                await asyncio.wait(late, timeout=3.0)
        # The runs still cached end their code now, on the activation thread.
        for run_id in list(self._cache):
            self._evict(run_id, forced=False)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.deadlock_timeout + 5
        while self._teardowns and (left := give_up - loop.time()) > 0:
            await asyncio.wait(list(self._teardowns), timeout=left)
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._own_local_pool:
            self._local_pool.shutdown(wait=False, cancel_futures=True)
        self._activations.stop()

    # -- one task -----------------------------------------------------------------------

    async def _handle(self, task: WorkflowTask) -> None:
        held = task.held
        run_id = task.run_id
        self._busy += 1
        self._handling[run_id] = self._handling.get(run_id, 0) + 1
        try:
            try:
                await self._handle_task(task)
            finally:
                self._busy -= 1
                if self._handling[run_id] > 1:
                    self._handling[run_id] -= 1
                else:
                    del self._handling[run_id]
                    for instance in self._retired.pop(run_id, ()):
                        self._tear_down(instance)
        except _TaskRolledBack as err:  # it never existed: its next task comes afresh
            log.info("workflow task dropped: %s", err)
            self._evict(task.run_id, forced=False)
        finally:
            if held is not None:  # whatever happened, the change that started it commits
                await held.commit()

    async def _send(self, task: WorkflowTask, method: Any, *args: Any) -> Any:
        """``method(*args)``, an operation on ``task``: in the transaction that started the
        task if it is held open (``engine._store.held``), else in one of its own."""
        held = task.held
        if held is not None:
            fn = tx_function(method)
            if fn is not None:  # (joins it, or waits for it to end and runs alone)
                return await held.commit_with(fn, *args)
            await held.commit()
        return await method(*args)

    async def _handle_task(self, task: WorkflowTask) -> None:
        defn = find_definition(self.definitions, task.workflow_type)
        if defn is None:
            known = ", ".join(sorted(self.definitions)) or "none"
            await self._fail(
                task,
                CAUSE_UNHANDLED,
                RuntimeError(
                    f"workflow type {task.workflow_type!r} is not registered on this worker "
                    f"(task queue {self.task_queue!r}); it has: {known}. Register it with "
                    "Worker(..., workflows=[...]) or route the run to a worker that has it."
                ),
                reason="WorkflowError",
            )
            return
        # The task the run is on: a later one than ``task`` once long local activities made
        # the worker heartbeat (what a failure below must be reported against).
        current = [task]
        try:
            try:
                commands, instance = await self._activate(current, defn, time.time())
            finally:
                task = current[0]
        except TaskNotFoundError as err:  # a heartbeat found the task gone
            log.info("workflow task dropped: %s", err)
            self._evict(task.run_id, forced=False)
            return
        except StoreError as err:  # its history could not be read: it times out, runs again
            log.warning("workflow task of run %s left to time out: %s", task.run_id, err)
            self._evict(task.run_id, forced=False)
            return
        except CacheMismatchError as err:  # after a heartbeat: start the run afresh
            self._evict(task.run_id, forced=False)
            await self._fail(task, CAUSE_UNHANDLED, RuntimeError(str(err)), reason="WorkflowError")
            return
        except PayloadSizeError as err:  # the commands of a heartbeat
            self._evict(task.run_id, forced=False)
            cause, refusal = size_refusal(err)
            await self._fail(task, cause, refusal, reason="PayloadsTooLarge")
            return
        except NondeterminismError as err:
            self._evict(task.run_id, forced=False)
            await self._fail(task, CAUSE_NDE, err, reason="NonDeterminismError")
            return
        except WorkflowTaskError as err:
            self._evict(task.run_id, forced=False)
            await self._fail(task, CAUSE_UNHANDLED, err.cause, reason="WorkflowError")
            return
        except DeadlockDetected as err:
            # Its abandoned thread may still be running the instance's code: no teardown.
            self._evict(task.run_id, forced=False, tear=False)
            await self._fail(
                task,
                CAUSE_UNHANDLED,
                _deadlock_error(task, err),
                reason="WorkflowError",
                stack=err.stack,
            )
            return
        try:
            check_command_sizes(commands, self._payload_limits)
        except PayloadSizeError as err:
            # Refused before anything is recorded: the task fails, the run stays open and
            # the task is retried (see check_command_sizes in command_sizes.py for what Temporal does).
            self._evict(task.run_id, forced=False)
            cause, refusal = size_refusal(err)
            await self._fail(task, cause, refusal, reason="PayloadsTooLarge")
            return
        wanted = (
            sum(
                1
                for c in commands
                if isinstance(c, cmd.ScheduleActivityTask) and c.task_queue == self.task_queue
            )
            if self.eager_activities
            else 0
        )
        eager = self.service.handoffs.offer_activities(self.namespace, self.task_queue, wanted)
        # (From the instance that ran the task: the run may have left the cache meanwhile.)
        rejections = instance.take_rejections()
        flags = instance.take_sdk_flags()
        try:
            completion = await until_accepted(
                lambda: self._send(
                    task,
                    self.service.complete_workflow_task,
                    task,
                    commands,
                    self.identity,
                    eager.count,
                    rejections,
                    flags,
                ),
                f"the completion of a workflow task of {task.workflow_id} (run {task.run_id})",
                abandoned=self._gave_up,
            )
        except TaskNotFoundError as err:
            log.info("workflow task dropped: %s", err)
            self._evict(task.run_id, forced=False)
            eager.release()
            return
        except StoreError as err:  # the worker stopped while the database was down
            log.error("gave up completing a workflow task of run %s: %s", task.run_id, err)
            self._evict(task.run_id, forced=False)
            eager.release()
            return
        except BaseException:
            eager.release()
            raise
        eager.settle(completion.activities)
        self.metrics.workflow_tasks_completed += 1
        entry = self._cache.get(task.run_id)
        if not completion.accepted or (entry is not None and entry.driver.instance.completed):
            self._evict(task.run_id, forced=False)
        elif (
            entry is not None
            and completion.events
            and completion.events[0].event_id == entry.driver.next_event_id
        ):
            entry.written = completion.events
            self._cache_next[task.run_id] = completion.events[-1].event_id + 1

    async def _activate(
        self, current: list[WorkflowTask], defn: WorkflowDefinition, received: float
    ) -> tuple[list[cmd.Command], WorkflowInstance]:
        """The commands of the task in ``current[0]`` (received at ``received``, epoch
        seconds), and the instance that produced them; long local activities may make it
        heartbeat, and ``current[0]`` is then the run's later task that the commands
        complete."""
        task = current[0]
        entry = self._cache.get(task.run_id)
        events = task.events
        if entry is not None and entry.written is not None:
            written, entry.written = entry.written, None
            # The task was claimed after the worker noted its completion's events: they
            # come first (else the store read them back and they are in task.events).
            if events and events[0].event_id == written[-1].event_id + 1:
                events = written + events
        if entry is not None and events and events[0].event_id == entry.driver.next_event_id:
            self.metrics.sticky_cache_hit += 1
            self._cache.move_to_end(task.run_id)
        else:
            if entry is not None:
                self._evict(task.run_id, forced=False)
            self.metrics.sticky_cache_miss += 1
            if not events or events[0].event_id != 1:
                events = await self._full_history(task)
            entry = self._new_entry(task, defn)
        run = self._activations.run
        try:
            commands, took = await run(
                entry.driver.apply, events, (), task.updates, not_before=task.not_before
            )
        except CacheMismatchError:
            self._evict(task.run_id, forced=False)
            entry = self._new_entry(task, defn)
            events = await self._full_history(task)
            commands, took = await run(entry.driver.apply, events, (), task.updates)
        self._cache_next[task.run_id] = entry.driver.next_event_id
        if took >= max(SLOW_ACTIVATION_SECONDS, len(events) / 20_000):
            self._report_slow(task, took, len(events))
        # Local activities run now, inside the task; their outcomes go back to the run in
        # more activations of the same task, until it asks for none.
        requests = entry.driver.instance.take_local_requests()
        if not requests:
            return commands, entry.driver.instance
        if task.held is not None:  # local activities may run long: commit the start now
            await task.held.commit()
            if task.held.rolled_back:
                # No local activity for a task that never existed (its run goes on from
                # the task that comes through the queue).
                raise _TaskRolledBack("the transaction that started this workflow task failed")
        heartbeat_at = _heartbeat_time(task, received)
        instance = entry.driver.instance
        while requests:
            running = {r.seq: asyncio.ensure_future(self._run_local(r)) for r in requests}
            try:
                while not all(f.done() for f in running.values()):
                    await asyncio.wait(
                        running.values(), timeout=max(heartbeat_at - time.time(), 0.0)
                    )
                    if all(f.done() for f in running.values()):
                        break
                    # Near the task's timeout with local activities still running: complete
                    # it with the commands so far and go on in the next task (Temporal's
                    # workflow task heartbeat).
                    task = current[0] = await self._heartbeat(task, entry, commands)
                    heartbeat_at = _heartbeat_time(task, time.time())
                    commands, _ = await run(entry.driver.apply, task.events, (), task.updates)
                    if self._cache.get(task.run_id) is entry:
                        self._cache_next[task.run_id] = entry.driver.next_event_id
                    for seq in instance.take_local_cancels():  # the code cancelled them
                        cancelled = running.pop(seq, None)
                        if cancelled is not None:
                            cancelled.cancel()
                    for more in instance.take_local_requests():
                        running[more.seq] = asyncio.ensure_future(self._run_local(more))
            except BaseException:
                for future in running.values():
                    future.cancel()
                raise
            outcomes = [future.result() for future in running.values()]
            commands, _ = await run(entry.driver.resolve_local_activities, outcomes)
            requests = entry.driver.instance.take_local_requests()
        return commands, instance

    async def _run_local(self, request: LocalActivityRequest) -> ResolveLocalActivity:
        async with self._local_slots:
            return await run_local_activity(
                request, self.local_activities, self.converter, self._local_pool, self.client
            )

    async def _heartbeat(
        self, task: WorkflowTask, entry: _Cached, commands: list[cmd.Command]
    ) -> WorkflowTask:
        """Complete ``task`` with ``commands`` and take the next task of the run at once
        (``entry`` holds the run's instance, even if the cache has let it go meanwhile)."""
        check_command_sizes(commands, self._payload_limits)
        instance = entry.driver.instance
        rejections, flags = instance.take_rejections(), instance.take_sdk_flags()
        completion = await until_accepted(
            lambda: self.service.complete_workflow_task(
                task, commands, self.identity, 0, rejections, flags, heartbeat=True
            ),
            f"a workflow task heartbeat of run {task.run_id}",
            abandoned=self._gave_up,
        )
        self.metrics.workflow_tasks_completed += 1
        if not completion.accepted or completion.next_task is None:
            raise TaskNotFoundError(f"run {task.run_id} took no heartbeat: it closed")
        return completion.next_task

    def _report_slow(self, task: WorkflowTask, took: float, n_events: int) -> None:
        if task.workflow_type in self._reported_slow:
            return
        self._reported_slow.add(task.workflow_type)
        log.warning(
            "workflow code of %s took %.2fs in one activation (run %s, %d events; reported "
            "once per workflow type): the worker runs workflow code one activation at a "
            "time, so its other workflows wait meanwhile. Use workflow.sleep instead of "
            "time.sleep, and do I/O and heavy computation in activities.",
            task.workflow_type,
            took,
            task.run_id,
            n_events,
        )

    def _new_entry(self, task: WorkflowTask, defn: WorkflowDefinition) -> _Cached:
        instance = WorkflowInstance(  # type: ignore[abstract]
            defn,
            namespace=task.namespace,
            workflow_id=task.workflow_id,
            run_id=task.run_id,
            task_queue=task.task_queue,
            converter=self.converter,
        )
        instance.failure_types += self.failure_exception_types
        entry = _Cached(HistoryDriver(instance), task.workflow_type)
        while len(self._cache) >= self.max_cached and self._cache:
            oldest = next(iter(self._cache))
            self._evict(oldest, forced=True)
        self._cache[task.run_id] = entry
        self.metrics.sticky_cache_size = len(self._cache)
        return entry

    async def _full_history(self, task: WorkflowTask) -> list[HistoryEvent]:
        stored = await self.service.history(task.run_id)
        last = stored[-1].event_id if stored else 0
        return stored + [e for e in task.events if e.event_id > last]

    def _evict(self, run_id: str, *, forced: bool, tear: bool = True) -> None:
        entry = self._cache.pop(run_id, None)
        if entry is not None:
            instance = entry.driver.instance
            if tear and not instance.release():  # (a completed run is freed at once)
                if run_id in self._handling:
                    self._retired.setdefault(run_id, []).append(instance)
                else:
                    self._tear_down(instance)
            if forced:
                self.metrics.sticky_cache_forced_eviction += 1
        self._cache_next.pop(run_id, None)
        self.metrics.sticky_cache_size = len(self._cache)

    def _tear_down(self, instance: WorkflowInstance) -> None:
        """End the code of a dropped instance that still waits, on the activation thread
        (``engine._replay.teardown``), not whenever the collector closes it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or loop is not self._loop:
            return  # (a definition replaced from elsewhere) left to the collector, as before

        async def tear() -> None:
            try:
                await self._activations.run(tear_down, instance)
            except Exception as err:  # stopping, or code that would not end: the collector
                log.debug("left the code of run %s to the collector: %s", instance.run_id, err)

        job = loop.create_task(tear())
        self._teardowns.add(job)
        job.add_done_callback(self._teardowns.discard)

    async def _fail(
        self,
        task: WorkflowTask,
        cause: str,
        err: BaseException,
        *,
        reason: str,
        stack: str = "",
    ) -> None:
        self.metrics.workflow_task_failed[reason] += 1
        level = logging.WARNING if task.attempt == 1 else logging.DEBUG
        log.log(
            level,
            "workflow task failed for %s (run %s, attempt %d): %s",
            task.workflow_id,
            task.run_id,
            task.attempt,
            err,
        )
        failure = self.converter.to_failure(err)
        if stack:
            failure["stackTrace"] = stack
        try:
            await until_accepted(
                lambda: self._send(
                    task, self.service.fail_workflow_task, task, cause, failure, self.identity
                ),
                f"the failure of a workflow task of run {task.run_id}",
                abandoned=self._gave_up,
            )
        except TaskNotFoundError:
            pass
        except StoreError as err:  # the worker stopped: the task times out instead
            log.error("gave up failing a workflow task of run %s: %s", task.run_id, err)


def _deadlock_error(task: WorkflowTask, err: DeadlockDetected) -> RuntimeError:
    where = f" It is at {err.where}." if err.where else ""
    return RuntimeError(
        f"potential deadlock: workflow code of {task.workflow_type} did not yield within "
        f"{err.timeout:g}s.{where} Workflow code must not block: use workflow.sleep instead "
        "of time.sleep, and do I/O in activities. (The worker goes on; the thread running "
        "that code is given up on until it returns.)"
    )


def _heartbeat_time(task: WorkflowTask, received: float) -> float:
    """When a task still running local activities is completed and the next one taken:
    80 % into the workflow task's start-to-close timeout from when the worker got it
    (``received``, epoch seconds), as sdk-core's workers do."""
    timeout = 10.0
    for event in reversed(task.events):
        if event.event_type == "WorkflowTaskScheduled":
            value = event.attributes.get("startToCloseTimeout")
            if value:
                timeout = duration_from_json(value).total_seconds()
            break
    return received + 0.8 * timeout
