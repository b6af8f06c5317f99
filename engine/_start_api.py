"""What workflow code starts: activities (``start_activity`` / ``execute_activity`` and their
``_method`` and ``_class`` forms), child workflows, timers with a summary, and
continue-as-new, with ``temporalio.workflow``'s names and options; re-exported by
:mod:`engine.workflow`.

Summaries (``summary=`` on an activity or timer, ``static_summary`` / ``static_details`` on a
child) are Temporal's user metadata: payloads through the workflow's data converter (and its
codec), recorded as the event's top-level ``userMetadata`` and shown by the widgets, the web
UI and ``durable workflow show``. Replay does not compare them: changing a summary is safe.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from ._model.limits import check_enum, check_id
from ._search_attributes import encode as encode_search_attributes
from .common import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ParentClosePolicy,
    RetryPolicy,
    SearchAttributes,
    TypedSearchAttributes,
    WorkflowIDReusePolicy,
)
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:
    from .workflow import ActivityHandle, ChildWorkflowHandle, _Runtime

_missing: Any = inspect.Parameter.empty


def _runtime() -> _Runtime:
    from .workflow import _runtime as runtime

    return runtime()


def _timeout(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _merge_args(arg: Any, args: Sequence[Any]) -> list[Any]:
    if arg is not _missing:
        if args:
            raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
        return [arg]
    return list(args)


def _check_ids(**given: str | None) -> None:
    """Ids and task queues given by workflow code: Temporal's limits (a bad one fails the
    workflow task, as the server's refusal of the command would)."""
    for name, value in given.items():
        if value is not None:
            check_id(value, name)


def _text(value: str | None, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(f"{name} must be a string, not {type(value).__name__}")
    return value or None


# -- timers -----------------------------------------------------------------------------


async def sleep(duration: float | timedelta, *, summary: str | None = None) -> None:
    """Durable timer: resume after at least ``duration`` (survives worker crashes).

    ``summary`` (a line of text) is recorded with the timer and shown in the widgets and
    the web UI. ``asyncio.sleep`` is the same timer, without a summary."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    summary = _text(summary, "summary")
    if summary is None or seconds <= 0:
        await asyncio.sleep(seconds)
        return
    await _runtime().sleep(seconds, summary)


async def wait_condition(
    fn: Callable[[], bool],
    *,
    timeout: float | timedelta | None = None,
    timeout_summary: str | None = None,
) -> None:
    """Wait until ``fn()`` is true (checked after every step of the workflow).

    With ``timeout``, raises :class:`asyncio.TimeoutError` when it passes first; the timer
    is recorded with ``timeout_summary`` if given."""
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    await _runtime().wait_condition(fn, seconds, _text(timeout_summary, "timeout_summary"))


# -- activities -------------------------------------------------------------------------


def start_activity(
    activity: Callable[..., Any] | str,
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    result_type: type | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    summary: str | None = None,
) -> ActivityHandle[Any]:
    """Schedule an activity and return a handle to it (await the handle for the result).

    One of ``start_to_close_timeout`` or ``schedule_to_close_timeout`` is required.
    ``summary`` (a line of text) is recorded with the ``ActivityTaskScheduled`` event.
    """
    all_args = _merge_args(arg, args)
    if start_to_close_timeout is None and schedule_to_close_timeout is None:
        name = activity if isinstance(activity, str) else getattr(activity, "__name__", activity)
        raise InvalidArgumentError(
            f"activity {name!r} needs start_to_close_timeout or schedule_to_close_timeout: "
            "without one a lost attempt could hang forever. Set start_to_close_timeout to "
            "the longest one attempt may take, e.g. timedelta(seconds=30)"
        )
    if retry_policy is not None:
        retry_policy.validate()
    _check_ids(activity_id=activity_id, task_queue=task_queue)
    if isinstance(activity, str):
        check_id(activity, "the activity type name")
    cancellation_type = check_enum(cancellation_type, ActivityCancellationType, "cancellation_type")
    options = {
        "task_queue": task_queue,
        "schedule_to_close": _timeout(schedule_to_close_timeout),
        "schedule_to_start": _timeout(schedule_to_start_timeout),
        "start_to_close": _timeout(start_to_close_timeout),
        "heartbeat": _timeout(heartbeat_timeout),
        "retry_policy": retry_policy,
        "cancellation_type": cancellation_type,
        "activity_id": activity_id,
        "result_type": result_type,
        "summary": _text(summary, "summary"),
    }
    return _runtime().start_activity(activity, all_args, options)


async def execute_activity(
    activity: Callable[..., Any] | str,
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    result_type: type | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    summary: str | None = None,
) -> Any:
    """Run an activity and wait for its result (see :func:`start_activity`)."""
    return await start_activity(
        activity,
        arg,
        args=args,
        task_queue=task_queue,
        result_type=result_type,
        schedule_to_close_timeout=schedule_to_close_timeout,
        schedule_to_start_timeout=schedule_to_start_timeout,
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
        cancellation_type=cancellation_type,
        activity_id=activity_id,
        summary=summary,
    )


def start_activity_method(
    activity: Callable[..., Any], arg: Any = _missing, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_activity` for an activity that is a method (``Store.charge``); the
    worker runs it on the instance it was given (``activities=[store.charge]``)."""
    return start_activity(activity, arg, **options)


async def execute_activity_method(
    activity: Callable[..., Any], arg: Any = _missing, **options: Any
) -> Any:
    """:func:`execute_activity` for an activity that is a method."""
    return await start_activity(activity, arg, **options)


def start_activity_class(
    activity: type, arg: Any = _missing, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_activity` for an activity that is a callable class (``Charger``); the
    worker calls the instance it was given (``activities=[Charger(db)]``)."""
    return start_activity(activity, arg, **options)


async def execute_activity_class(activity: type, arg: Any = _missing, **options: Any) -> Any:
    """:func:`execute_activity` for an activity that is a callable class."""
    return await start_activity(activity, arg, **options)


# -- child workflows --------------------------------------------------------------------


async def start_child_workflow(
    workflow: Callable[..., Any] | str,
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    result_type: type | None = None,
    cancellation_type: ChildWorkflowCancellationType = (
        ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED
    ),
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    retry_policy: RetryPolicy | None = None,
    cron_schedule: str = "",
    memo: Mapping[str, Any] | None = None,
    search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
    static_summary: str | None = None,
    static_details: str | None = None,
) -> ChildWorkflowHandle[Any]:
    """Start a child workflow and wait until it has started; return its handle.

    The child gets its own history (and its own limits). By default it is terminated
    when this workflow closes (``parent_close_policy``). ``retry_policy``, ``cron_schedule``
    and ``memo`` are the child's, as for a run started by a client; ``static_summary`` and
    ``static_details`` are shown with it (and with this run's event that starts it).
    """
    if retry_policy is not None:
        retry_policy.validate()
    if cron_schedule:
        from ._model.cron import validate_cron

        validate_cron(cron_schedule)
    if memo is not None and not isinstance(memo, Mapping):
        raise InvalidArgumentError(f"memo must be a mapping, not {type(memo).__name__}")
    _check_ids(id=id, task_queue=task_queue)
    if isinstance(workflow, str):
        check_id(workflow, "the workflow type name")
    cancellation_type = check_enum(
        cancellation_type, ChildWorkflowCancellationType, "cancellation_type"
    )
    parent_close_policy = check_enum(parent_close_policy, ParentClosePolicy, "parent_close_policy")
    id_reuse_policy = check_enum(id_reuse_policy, WorkflowIDReusePolicy, "id_reuse_policy")
    options = {
        "id": id,
        "task_queue": task_queue,
        "execution_timeout": _timeout(execution_timeout),
        "run_timeout": _timeout(run_timeout),
        "task_timeout": _timeout(task_timeout),
        "id_reuse_policy": id_reuse_policy,
        "parent_close_policy": parent_close_policy,
        "cancellation_type": cancellation_type,
        "result_type": result_type,
        "retry_policy": retry_policy,
        "cron_schedule": cron_schedule.strip() if cron_schedule else "",
        "memo": dict(memo) if memo else None,
        "search_attributes": encode_search_attributes(search_attributes) or None,
        "static_summary": _text(static_summary, "static_summary"),
        "static_details": _text(static_details, "static_details"),
    }
    return await _runtime().start_child_workflow(workflow, _merge_args(arg, args), options)


async def execute_child_workflow(
    workflow: Callable[..., Any] | str,
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    result_type: type | None = None,
    cancellation_type: ChildWorkflowCancellationType = (
        ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED
    ),
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    retry_policy: RetryPolicy | None = None,
    cron_schedule: str = "",
    memo: Mapping[str, Any] | None = None,
    search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
    static_summary: str | None = None,
    static_details: str | None = None,
) -> Any:
    """Start a child workflow and wait for its result (see :func:`start_child_workflow`)."""
    handle = await start_child_workflow(
        workflow,
        arg,
        args=args,
        id=id,
        task_queue=task_queue,
        result_type=result_type,
        cancellation_type=cancellation_type,
        parent_close_policy=parent_close_policy,
        execution_timeout=execution_timeout,
        run_timeout=run_timeout,
        task_timeout=task_timeout,
        id_reuse_policy=id_reuse_policy,
        retry_policy=retry_policy,
        cron_schedule=cron_schedule,
        memo=memo,
        search_attributes=search_attributes,
        static_summary=static_summary,
        static_details=static_details,
    )
    return await handle


# -- continue-as-new --------------------------------------------------------------------


def continue_as_new(
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    workflow: Callable[..., Any] | str | None = None,
    task_queue: str | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    backoff_start_interval: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    memo: Mapping[str, Any] | None = None,
    search_attributes: TypedSearchAttributes | SearchAttributes | None = None,
) -> NoReturn:
    """Close this run and start a fresh one (same workflow id, new run id, empty history).

    What is not given is this run's: its workflow, task queue, timeouts, retry policy, and
    the memo it was started with (as on Temporal, not the fields ``upsert_memo`` changed),
    and the search attributes it holds now. ``backoff_start_interval`` delays the new
    run's first workflow task."""
    if retry_policy is not None:
        retry_policy.validate()
    if memo is not None and not isinstance(memo, Mapping):
        raise InvalidArgumentError(f"memo must be a mapping, not {type(memo).__name__}")
    raise _runtime().continue_as_new_error(
        _merge_args(arg, args),
        {
            "workflow": workflow,
            "task_queue": task_queue,
            "run_timeout": _timeout(run_timeout),
            "task_timeout": _timeout(task_timeout),
            "backoff_start_interval": _timeout(backoff_start_interval),
            "retry_policy": retry_policy,
            "memo": None if memo is None else dict(memo),
            "search_attributes": (
                None if search_attributes is None else encode_search_attributes(search_attributes)
            ),
        },
    )
