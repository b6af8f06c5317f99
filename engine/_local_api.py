"""``workflow.start_local_activity`` / ``execute_local_activity`` and their ``_method`` and
``_class`` forms (``temporalio.workflow``'s names), re-exported by :mod:`engine.workflow`.

A local activity runs in the worker of the workflow task, inside the task: no queue, no
activity task; its outcome is a ``core_local_activity`` marker in the history (see
``engine/_replay/local_activities.py``). Use it for short steps (well under the workflow
task timeout); retries with a backoff up to ``local_retry_threshold`` (one minute by
default) happen inside the task, longer ones wait on a durable timer.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ._model.limits import check_enum, check_id
from .common import ActivityCancellationType, RetryPolicy
from .exceptions import InvalidArgumentError

if TYPE_CHECKING:
    from .workflow import ActivityHandle

_missing: Any = inspect.Parameter.empty


def _seconds(value: timedelta | None, name: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, timedelta):
        raise InvalidArgumentError(f"{name} must be a timedelta, not {type(value).__name__}")
    if value <= timedelta(0):
        raise InvalidArgumentError(f"{name} must be positive, got {value!r}")
    return value.total_seconds()


def start_local_activity(
    activity: Callable[..., Any] | str,
    arg: Any = _missing,
    *,
    args: Sequence[Any] = (),
    result_type: type | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    local_retry_threshold: timedelta | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    summary: str | None = None,
    **_ignored: Any,
) -> ActivityHandle[Any]:
    """Run an activity in this worker, inside the workflow task; a handle to await.

    One of ``start_to_close_timeout`` or ``schedule_to_close_timeout`` is required.
    ``summary`` is recorded with the activity's marker; ``schedule_to_start_timeout`` is
    accepted and has nothing to bound (a local activity starts at once, in this worker)."""
    from .workflow import _runtime

    if arg is not _missing and args:
        raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
    values = [arg] if arg is not _missing else list(args)
    if start_to_close_timeout is None and schedule_to_close_timeout is None:
        name = activity if isinstance(activity, str) else getattr(activity, "__name__", activity)
        raise InvalidArgumentError(
            f"local activity {name!r} needs start_to_close_timeout or "
            "schedule_to_close_timeout: set start_to_close_timeout to the longest one attempt "
            "may take, e.g. timedelta(seconds=5)"
        )
    if retry_policy is not None:
        retry_policy.validate()
    if activity_id is not None:
        check_id(activity_id, "activity_id")
    if isinstance(activity, str):
        check_id(activity, "the activity type name")
    cancellation_type = check_enum(cancellation_type, ActivityCancellationType, "cancellation_type")
    del schedule_to_start_timeout
    if summary is not None and not isinstance(summary, str):
        raise InvalidArgumentError(f"summary must be a string, not {type(summary).__name__}")
    options = {
        "schedule_to_close": _seconds(schedule_to_close_timeout, "schedule_to_close_timeout"),
        "start_to_close": _seconds(start_to_close_timeout, "start_to_close_timeout"),
        "retry_policy": retry_policy,
        "local_retry_threshold": (
            None if local_retry_threshold is None else local_retry_threshold.total_seconds()
        ),
        "cancellation_type": cancellation_type,
        "activity_id": activity_id,
        "result_type": result_type,
        "summary": summary or None,
    }
    return _runtime().start_local_activity(activity, values, options)


async def execute_local_activity(
    activity: Callable[..., Any] | str, arg: Any = _missing, **options: Any
) -> Any:
    """Run a local activity and wait for its result (see :func:`start_local_activity`)."""
    return await start_local_activity(activity, arg, **options)


def start_local_activity_method(
    activity: Callable[..., Any], arg: Any = _missing, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_local_activity` for an activity that is a method."""
    return start_local_activity(activity, arg, **options)


async def execute_local_activity_method(
    activity: Callable[..., Any], arg: Any = _missing, **options: Any
) -> Any:
    """:func:`execute_local_activity` for an activity that is a method."""
    return await start_local_activity(activity, arg, **options)


def start_local_activity_class(
    activity: type, arg: Any = _missing, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_local_activity` for an activity that is a callable class."""
    return start_local_activity(activity, arg, **options)


async def execute_local_activity_class(activity: type, arg: Any = _missing, **options: Any) -> Any:
    """:func:`execute_local_activity` for an activity that is a callable class."""
    return await start_local_activity(activity, arg, **options)
