"""Running a local activity in the workflow worker: its attempts, retries and timeouts.

The workflow runner calls :func:`run_local_activity` for each local activity an
activation asks for, while the workflow task is open, and gives the outcome back to the
run (see ``engine/_replay/local_activities.py``). Attempts run here, one after another:
a failure is retried after the policy's backoff when that is at most the request's local
retry threshold; a longer backoff is handed back, and the run waits on a durable timer
before asking for the next attempt. Timeouts: ``start_to_close`` per attempt,
``schedule_to_close`` over all attempts since the first was scheduled.
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import functools
import time
from collections.abc import Mapping
from concurrent.futures import Executor
from typing import Any

from .. import activity as activity_api
from .._model.definitions import ActivityDefinition, find_definition
from .._replay.jobs import LocalActivityRequest, ResolveLocalActivity
from ..common import Priority, RetryPolicy
from ..converter import DataConverter
from ..exceptions import ApplicationError, TimeoutError, TimeoutType
from .activities import _dt, _td


async def run_local_activity(
    request: LocalActivityRequest,
    definitions: Mapping[str, ActivityDefinition],
    converter: DataConverter,
    executor: Executor | None,
    client: Any = None,
) -> ResolveLocalActivity:
    """Run ``request``'s attempts; how they ended. The workflow runner keeps the workflow
    task alive meanwhile (its heartbeat), so attempts and backoffs up to the local retry
    threshold may take longer than the task's timeout, as on Temporal."""
    loop = asyncio.get_running_loop()
    defn = find_definition(definitions, request.activity_type)
    policy = RetryPolicy.from_json(request.retry_policy)
    attempt = request.attempt
    began = request.original_schedule_time or time.time()
    while True:
        started = time.time()
        try:
            if defn is None:
                known = ", ".join(sorted(n for n in definitions if n)) or "none"
                raise ApplicationError(
                    f"local activity type {request.activity_type!r} is not registered on this "
                    f"worker (it has: {known}); a local activity runs in the worker of its "
                    "workflow, so register it there: Worker(..., activities=[...])",
                    type="NotFoundError",
                    non_retryable=True,
                )
            value = await _attempt(
                request, defn, converter, executor, client, attempt, started, loop
            )
            result = converter.to_payloads_json([value])  # a result that cannot be encoded fails
        except Exception as err:
            failure = converter.to_failure(err)
            retryable = not _final(err, policy, attempt, request, began)
            delay = _delay(err, policy, attempt) if retryable else None
            if delay is None:
                return ResolveLocalActivity(
                    request.seq,
                    attempt,
                    failure=failure,
                    complete_time=time.time(),
                    original_schedule_time=began,
                )
            if delay > request.local_retry_threshold:
                return ResolveLocalActivity(
                    request.seq,
                    attempt,
                    failure=failure,
                    backoff=delay,
                    complete_time=time.time(),
                    original_schedule_time=began,
                )
            await asyncio.sleep(delay)
            attempt += 1
            continue
        return ResolveLocalActivity(
            request.seq,
            attempt,
            result=result,
            complete_time=time.time(),
            original_schedule_time=began,
        )


async def _attempt(
    request: LocalActivityRequest,
    defn: ActivityDefinition,
    converter: DataConverter,
    executor: Executor | None,
    client: Any,
    attempt: int,
    started: float,
    loop: asyncio.AbstractEventLoop,
) -> Any:
    args = converter.from_payloads_json(request.input, defn.arg_types)
    info = activity_api.Info(
        activity_id=request.activity_id,
        activity_type=request.activity_type,
        attempt=attempt,
        current_attempt_scheduled_time=_dt(started),
        heartbeat_details=[],
        heartbeat_timeout=None,
        is_local=True,
        namespace=request.namespace,
        schedule_to_close_timeout=_td(request.schedule_to_close),
        scheduled_time=_dt(request.original_schedule_time or started),
        start_to_close_timeout=_td(request.start_to_close),
        started_time=_dt(started),
        task_queue=request.task_queue,
        task_token=b"",
        workflow_id=request.workflow_id,
        workflow_namespace=request.namespace,
        workflow_run_id=request.run_id,
        workflow_type=request.workflow_type,
        priority=Priority.default,
        retry_policy=RetryPolicy.from_json(request.retry_policy),
    )
    ctx = activity_api._Context(
        info,
        lambda details: None,  # a local activity's heartbeats go nowhere (as in Temporal)
        cancelled=activity_api._Signal(loop),
        worker_shutdown=activity_api._Signal(loop),
        client=client if defn.is_async else None,
        payload_converter=converter.payload_converter,
    )
    context = contextvars.copy_context()
    context.run(activity_api._current.set, ctx)
    timeout = _remaining(request, started)
    if defn.is_async:
        task = loop.create_task(defn.fn(*args), context=context)
    else:
        call = functools.partial(context.run, defn.fn, *args)
        task = asyncio.ensure_future(loop.run_in_executor(executor, call))
    try:
        return await asyncio.wait_for(task, timeout)
    except builtins.TimeoutError:
        kind = (
            TimeoutType.START_TO_CLOSE
            if request.start_to_close is not None and timeout == request.start_to_close
            else TimeoutType.SCHEDULE_TO_CLOSE
        )
        raise TimeoutError(
            f"local activity timed out ({kind.name})", type=kind, last_heartbeat_details=()
        ) from None


def _remaining(request: LocalActivityRequest, started: float) -> float | None:
    """The attempt's time limit: start-to-close, cut to what schedule-to-close leaves."""
    limits = []
    if request.start_to_close is not None:
        limits.append(request.start_to_close)
    if request.schedule_to_close is not None:
        began = request.original_schedule_time or started
        limits.append(max(began + request.schedule_to_close - started, 0.0))
    return min(limits) if limits else None


def _final(
    err: BaseException,
    policy: RetryPolicy,
    attempt: int,
    request: LocalActivityRequest,
    began: float,
) -> bool:
    if isinstance(err, ApplicationError) and err.non_retryable:
        return True
    kind = err.type if isinstance(err, ApplicationError) else type(err).__name__
    if policy.non_retryable_error_types and kind in policy.non_retryable_error_types:
        return True
    if isinstance(err, TimeoutError) and err.type == TimeoutType.SCHEDULE_TO_CLOSE:
        return True
    if policy.maximum_attempts and attempt >= policy.maximum_attempts:
        return True
    if request.schedule_to_close is not None:
        delay = policy.delay_for_attempt(attempt).total_seconds()
        return time.time() + delay >= began + request.schedule_to_close
    return False


def _delay(err: BaseException, policy: RetryPolicy, attempt: int) -> float:
    if isinstance(err, ApplicationError) and err.next_retry_delay is not None:
        return err.next_retry_delay.total_seconds()
    return policy.delay_for_attempt(attempt).total_seconds()
