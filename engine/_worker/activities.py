"""Polling an activity task queue and running activity attempts.

``async def`` activities run as tasks on the worker's loop; plain functions run in a thread
pool. Heartbeats are throttled; a heartbeat's reply is how a cancellation request (or the
news that the attempt is no longer current) reaches the activity.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

from .. import activity as activity_api
from .._model.definitions import ActivityDefinition, find_definition
from .._payload_size import json_payload_size, warn_payload_size
from .._service.handoff import Handoffs
from .._service.service import Service
from .._service.state import activity_channel
from .._service.types import ActivityTask, WorkflowTask
from ..common import Priority, RawValue, RetryPolicy
from ..converter import (
    MAX_PAYLOAD_BYTES,
    DataConverter,
    Payload,
    check_payloads_size,
)
from ..exceptions import (
    ActivityNotFoundError,
    ApplicationError,
    CancelledError,
    PayloadSizeError,
    StoreError,
    StoreUnavailableError,
)
from .metrics import WorkerMetrics
from .resend import until_accepted
from .slots import Poller

log = logging.getLogger("engine.worker")

DEFAULT_HEARTBEAT_THROTTLE = 30.0


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _td(seconds: float | None) -> timedelta | None:
    return None if not seconds else timedelta(seconds=seconds)


def _retry_policy(text: str | None) -> RetryPolicy | None:
    policy = json.loads(text) if text else None
    return RetryPolicy.from_json(policy) if policy else None


class _Running:
    """One attempt in progress: its heartbeat state, its context, and how to cancel it."""

    def __init__(
        self, runner: ActivityRunner, task: ActivityTask, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.runner = runner
        self.task = task
        self.loop = loop
        self.cancel_requested = False
        self.async_task: asyncio.Task[Any] | None = None
        self.pending_details: Sequence[Any] | None = None
        self.last_sent = 0.0
        self.flush_scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._sending: asyncio.Task[None] | None = None
        timeout = task.heartbeat_timeout
        self.throttle = (
            min(timeout * 0.8, DEFAULT_HEARTBEAT_THROTTLE)
            if timeout
            else DEFAULT_HEARTBEAT_THROTTLE
        )
        #: Set by the runner before the activity starts (see ``_execute``).
        self.context: activity_api._Context | None = None
        self._shields = 0  # depth of shield_thread_cancel_exception() blocks
        #: Off with @activity.defn(no_thread_cancel_exception=True).
        self.raises_on_cancel = True

    # called from activity code (any thread)
    def heartbeat(self, details: Sequence[Any]) -> None:
        if (
            self.cancel_requested
            and self.async_task is None
            and not self._shields
            and self.raises_on_cancel
        ):
            # A thread-pool activity learns of cancellation by its next heartbeat raising.
            raise CancelledError("Activity cancelled")
        self.pending_details = details
        if threading_is_loop_thread(self.loop):
            self._schedule()
        else:
            self.loop.call_soon_threadsafe(self._schedule)

    @contextlib.contextmanager
    def shield(self) -> Iterator[None]:
        """``activity.shield_thread_cancel_exception()`` in a plain-function activity."""
        self._shields += 1
        try:
            yield
        finally:
            self._shields -= 1
            if not self._shields and self.cancel_requested and self.raises_on_cancel:
                raise CancelledError("Activity cancelled")

    def _schedule(self) -> None:
        if self.flush_scheduled:
            return
        wait = self.last_sent + self.throttle - time.monotonic()
        self.flush_scheduled = True
        if wait <= 0:
            self._sending = self.loop.create_task(self._send())
        else:
            self._timer = self.loop.call_later(wait, self._send_soon)

    def _send_soon(self) -> None:
        self._sending = self.loop.create_task(self._send())

    async def flush(self) -> None:
        """Send a throttled heartbeat that is still waiting, and wait for one on its way
        (before the outcome is reported, so its details reach the next attempt: a
        heartbeat still in flight when the failure lands would be refused, its details
        lost)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._sending is not None and not self._sending.done():
            await asyncio.shield(self._sending)
        if self.pending_details is not None:
            await self._send()

    async def _send(self) -> None:
        self._timer = None
        self.flush_scheduled = False
        details = self.pending_details
        self.pending_details = None
        self.last_sent = time.monotonic()
        payloads = (
            None if details is None else self.runner.converter.to_payloads_json(list(details))
        )
        try:
            cancel = await self.runner.service.heartbeat_activity(self.task, payloads)
        except ActivityNotFoundError:
            # Timed out, or the run closed: stop the attempt.
            self.request_cancel(activity_api.ActivityCancellationDetails(not_found=True))
            return
        except StoreUnavailableError as err:  # the store logs outages itself
            log.debug("heartbeat failed: %s", err)
            return
        except StoreError as err:
            log.warning("heartbeat failed: %s", err)
            return
        if cancel:
            self.request_cancel(activity_api.ActivityCancellationDetails(cancel_requested=True))

    def request_cancel(self, why: activity_api.ActivityCancellationDetails) -> None:
        if self.context is not None:
            self.context.cancel(why)
        if self.cancel_requested:
            return
        self.cancel_requested = True
        if self.async_task is not None and not self.async_task.done():
            self.async_task.cancel()


def threading_is_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs on ``loop``'s thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


_Outcome = tuple[Callable[..., Awaitable["WorkflowTask | None"]], Any]


class ActivityRunner(Poller[ActivityTask]):
    """The activity half of a worker."""

    what = "activity tasks"

    def __init__(
        self,
        service: Service,
        *,
        namespace: str,
        task_queue: str,
        definitions: dict[str, ActivityDefinition],
        converter: DataConverter,
        identity: str,
        max_concurrent: int,
        poll_interval: float,
        metrics: WorkerMetrics,
        executor: ThreadPoolExecutor | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(
            service,
            namespace=namespace,
            task_queue=task_queue,
            identity=identity,
            max_concurrent=max_concurrent,
            poll_interval=poll_interval,
            channel=activity_channel(namespace, task_queue),
        )
        self.definitions = definitions
        self.converter = converter
        self.metrics = metrics
        metrics.activity_slots_total = max_concurrent
        self._pool = executor or ThreadPoolExecutor(
            max_workers=max_concurrent, thread_name_prefix="durable-activity"
        )
        self._running: dict[tuple[str, int, int], _Running] = {}
        self._jobs: set[asyncio.Task[None]] = set()
        #: ``activity.client()`` in async activities (the worker's client).
        self.client = client
        limits = getattr(client, "payload_limits", None)
        self._payloads_warn_size = limits.payloads_warn_size if limits is not None else 0
        self._shutdown = activity_api._Signal(None)

    def _register(self, handoffs: Handoffs) -> None:
        handoffs.register_activities(self)

    async def _poll(self, limit: int) -> list[ActivityTask]:
        self.metrics.activity_polls += 1
        return await self.service.poll_activity_tasks(
            self.namespace, self.task_queue, self.identity, limit
        )

    def _dispatch(self, tasks: Sequence[ActivityTask]) -> int:
        for task in tasks:
            self._start(task)
        return len(tasks)

    # -- hand-offs (see engine._service.handoff) ---------------------------------------

    def reserve_activity_slots(self, wanted: int) -> int:
        """Set aside up to ``wanted`` slots for attempts a completion starts eagerly."""
        if not self._on_loop():
            return 0
        return self.slots.take(wanted)

    def release_activity_slots(self, n: int) -> None:
        """Give back slots set aside and not used."""
        self.slots.give(n)

    def start_reserved_activity(self, task: ActivityTask) -> None:
        """Run an attempt started for this runner on a slot set aside."""
        self._start(task)

    def _start(self, task: ActivityTask) -> None:
        """Run a claimed attempt (its slot already reserved)."""
        self.metrics.activity_slots_used += 1
        self.metrics.record_schedule_to_start(
            max(0.0, (task.started_time - task.current_attempt_scheduled_time) * 1000.0)
        )
        job = asyncio.get_running_loop().create_task(self._run(task))
        self._jobs.add(job)
        job.add_done_callback(self._done)

    def _done(self, job: asyncio.Task[None]) -> None:
        self._jobs.discard(job)
        self.slots.give(1)
        self.metrics.activity_slots_used -= 1
        if not job.cancelled() and job.exception() is not None:
            log.error("activity handler crashed", exc_info=job.exception())

    def begin_stop(self) -> None:
        """Poll no more; tell running attempts the worker is shutting down
        (``activity.is_worker_shutdown()``)."""
        super().begin_stop()
        self._shutdown.set()
        for running in list(self._running.values()):
            if running.context is not None:
                running.context.worker_shutdown.set()

    async def stop(self, grace: float = 0.0) -> None:
        """Stop polling; cancel running attempts after ``grace`` seconds; wait for them."""
        self.begin_stop()
        if self._jobs and grace > 0:
            await asyncio.wait(list(self._jobs), timeout=grace)
        why = activity_api.ActivityCancellationDetails(worker_shutdown=True)
        for running in list(self._running.values()):
            running.request_cancel(why)
        if self._jobs:
            await asyncio.wait(list(self._jobs), timeout=5.0)
        # Outcomes still being sent again (the database is down) are given up on: the
        # service runs their attempts again after their timeouts.
        self._abandoned = True
        if self._jobs:
            _, late = await asyncio.wait(list(self._jobs), timeout=3.0)
            for job in late:
                job.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _run(self, task: ActivityTask) -> None:
        loop = asyncio.get_running_loop()
        defn = find_definition(self.definitions, task.activity_type)
        if defn is None:
            known = ", ".join(sorted(self.definitions)) or "none"
            err = ApplicationError(
                f"activity type {task.activity_type!r} is not registered on this worker "
                f"(task queue {self.task_queue!r}); it has: {known}",
                type="NotFoundError",
            )
            await self._report(task, (self.service.fail_activity, self.converter.to_failure(err)))
            return
        running = _Running(self, task, loop)
        self._running[task.token] = running
        try:
            outcome = await self._execute(defn, task, running)
            await running.flush()
        finally:
            self._running.pop(task.token, None)
            # The attempt's objects refer to each other (its context's heartbeat is a
            # method of ``running``, which holds the task whose context holds it): let go
            # so they are freed at once, not left to the cycle collector.
            running.context = None
            running.async_task = None
        if outcome is not None:
            await self._report(task, outcome)

    def _info(self, task: ActivityTask, details: Sequence[Any]) -> activity_api.Info:
        return activity_api.Info(
            activity_id=task.activity_id,
            activity_type=task.activity_type,
            attempt=task.attempt,
            current_attempt_scheduled_time=_dt(task.current_attempt_scheduled_time),
            heartbeat_details=details,
            heartbeat_timeout=_td(task.heartbeat_timeout),
            is_local=False,
            namespace=task.namespace,
            schedule_to_close_timeout=_td(task.schedule_to_close),
            scheduled_time=_dt(task.scheduled_time),
            start_to_close_timeout=_td(task.start_to_close),
            started_time=_dt(task.started_time),
            task_queue=task.task_queue,
            task_token=task.task_token,
            workflow_id=task.workflow_id,
            workflow_namespace=task.namespace,
            workflow_run_id=task.run_id,
            workflow_type=task.workflow_type,
            priority=Priority.default,
            retry_policy=_retry_policy(task.retry_policy),
        )

    async def _execute(
        self, defn: ActivityDefinition, task: ActivityTask, running: _Running
    ) -> _Outcome | None:
        """Run the attempt; its outcome to report, or None when the activity said it will
        be completed from elsewhere (``activity.raise_complete_async()``)."""
        try:
            if defn.dynamic:  # one sequence of the arguments, left encoded
                hints = [RawValue] * len(task.input or [])
                args = [self.converter.from_payloads_json(task.input, hints)]
            else:
                args = self.converter.from_payloads_json(task.input, defn.arg_types)
            details = self.converter.from_payloads_json(task.heartbeat_details)
        except Exception as err:
            return (self.service.fail_activity, self.converter.to_failure(err))
        loop = asyncio.get_running_loop()
        ctx = activity_api._Context(
            # Made when the activity first asks (most never do): the Info of every attempt
            # would cost more than the attempt's own bookkeeping.
            functools.cache(functools.partial(self._info, task, details)),
            running.heartbeat,
            cancelled=activity_api._Signal(loop),
            worker_shutdown=activity_api._Signal(loop),
            client=self.client if defn.is_async else None,
            payload_converter=self.converter.payload_converter,
            shield=None if defn.is_async else running.shield,
        )
        running.context = ctx
        running.raises_on_cancel = not defn.no_thread_cancel_exception
        if self._shutdown.is_set():
            ctx.worker_shutdown.set()
        context = contextvars.copy_context()
        context.run(activity_api._current.set, ctx)
        try:
            if defn.is_async:
                running.async_task = loop.create_task(defn.fn(*args), context=context)
                if running.cancel_requested:
                    running.async_task.cancel()
                result = await running.async_task
            else:
                call = functools.partial(context.run, defn.fn, *args)
                result = await loop.run_in_executor(self._pool, call)
        except activity_api._CompleteAsyncError:
            log.debug("activity %s will be completed asynchronously", task.activity_id)
            return None
        except BaseException as err:
            if (
                isinstance(err, (asyncio.CancelledError, CancelledError))
                and running.cancel_requested
            ):
                if self._stopping:
                    failure = self.converter.to_failure(
                        ApplicationError("worker shutting down", type="WorkerShutdown")
                    )
                    return (self.service.fail_activity, failure)
                return (self.service.cancel_activity, [])
            if isinstance(err, asyncio.CancelledError):
                raise
            if not isinstance(err, Exception):
                raise
            self.metrics.activities_failed += 1
            return (self.service.fail_activity, self.converter.to_failure(err))
        self.metrics.activities_completed += 1
        try:
            payloads = self.converter.to_payloads_json([result])
            size = sum(json_payload_size(p) for p in payloads)
            if size > MAX_PAYLOAD_BYTES:
                check_payloads_size(
                    [Payload.from_json(p) for p in payloads],
                    what=f"the result of activity {task.activity_type}",
                )
            warn_at = self._payloads_warn_size
            if warn_at and size > warn_at:
                warn_payload_size(f"the result of activity {task.activity_type}", size, warn_at)
        except PayloadSizeError as err:
            # As Temporal's worker does (sdk-core checks the completion against the
            # namespace's limit): the attempt fails instead, retried per its policy.
            refusal = ApplicationError(str(err), type="PayloadSizeLimitExceeded")
            return (self.service.fail_activity, self.converter.to_failure(refusal))
        except Exception as err:
            return (self.service.fail_activity, self.converter.to_failure(err))
        return (self.service.complete_activity, payloads)

    async def _report(self, task: ActivityTask, outcome: _Outcome) -> None:
        record, value = outcome
        # A workflow runner of this process holding the run may take the workflow task the
        # outcome schedules, started in the same transaction.
        offer = self.service.handoffs.offer_next(task.namespace, task.run_id)
        handed: WorkflowTask | None = None
        try:
            if offer is None:
                handed = await record(task, value, offer)
            else:  # on PostgreSQL the task's completion may commit with the outcome
                handed = await self.service.hold_outcome(
                    record, task, value, offer, lambda: self._resend(task, record, value)
                )
        except ActivityNotFoundError as err:
            log.debug("activity result dropped: %s", err)
        except StoreError:
            # Kept and sent again (without the hand-off: the slot it held is given back)
            # until the store takes it or refuses it as stale; see engine._worker.resend.
            if offer is not None:
                offer.settle(None)
                offer = None
            await self._resend(task, record, value)
        finally:
            if offer is not None:
                offer.settle(handed)

    async def _resend(
        self, task: ActivityTask, record: Callable[..., Awaitable[Any]], value: Any
    ) -> None:
        what = f"the outcome of activity {task.activity_id} (run {task.run_id})"
        try:
            await until_accepted(lambda: record(task, value, None), what, abandoned=self._gave_up)
        except ActivityNotFoundError as err:
            log.debug("activity result dropped: %s", err)
        except StoreError as err:
            log.error(
                "gave up recording %s as the worker stopped (%s): the service runs the "
                "activity again after its timeout",
                what,
                err,
            )
