"""Writing activities: ``@activity.defn`` and what activity code can ask while it runs.

Names follow ``temporalio.activity``: ``info()``, ``heartbeat(*details)``,
``is_cancelled()``. Activities may be ``async def`` (run on the worker's event loop) or
plain functions (run in the worker's thread pool).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from ._model.definitions import ActivityDefinition, set_activity_definition, type_hints
from .exceptions import InvalidArgumentError

__all__ = ["Info", "defn", "heartbeat", "in_activity", "info", "is_cancelled"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Info:
    """About the running activity attempt (``activity.info()``)."""

    activity_id: str
    activity_type: str
    attempt: int
    task_queue: str
    workflow_id: str
    workflow_run_id: str
    workflow_type: str
    workflow_namespace: str
    scheduled_time: datetime
    current_attempt_scheduled_time: datetime
    started_time: datetime
    schedule_to_close_timeout: timedelta | None
    start_to_close_timeout: timedelta | None
    heartbeat_timeout: timedelta | None
    heartbeat_details: Sequence[Any]
    is_local: bool = False


class _Context:
    """What the worker provides to running activity code (set in a context variable)."""

    def __init__(
        self,
        info: Info,
        heartbeat: Callable[[Sequence[Any]], None],
        is_cancelled: Callable[[], bool],
    ) -> None:
        self.info = info
        self.heartbeat = heartbeat
        self.is_cancelled = is_cancelled


_current: contextvars.ContextVar[_Context | None] = contextvars.ContextVar(
    "durable_activity", default=None
)


def _context() -> _Context:
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError(
            "not in an activity: engine.activity functions work only inside a function "
            "decorated with @activity.defn while a worker runs it"
        )
    return ctx


def in_activity() -> bool:
    """Whether the caller is activity code run by a worker."""
    return _current.get() is not None


def info() -> Info:
    """Information about the running attempt."""
    return _context().info


def heartbeat(*details: Any) -> None:
    """Say the attempt is alive, with optional progress details for the next attempt.

    Heartbeats are throttled (at most one write per 80% of the heartbeat timeout). The
    latest details are kept. Cancellation reaches an activity only through heartbeats.
    """
    _context().heartbeat(details)


def is_cancelled() -> bool:
    """Whether cancellation of this attempt was requested (learned from a heartbeat)."""
    return _context().is_cancelled()


@overload
def defn(fn: F) -> F: ...


@overload
def defn(*, name: str | None = None) -> Callable[[F], F]: ...


def defn(fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
    """Mark a function as an activity. ``name`` (the activity type) defaults to its name."""

    def decorate(f: F) -> F:
        if not callable(f):
            raise InvalidArgumentError("@activity.defn must decorate a function")
        arg_types, return_type = type_hints(f, skip_self=False)
        set_activity_definition(
            f,
            ActivityDefinition(
                name=name or f.__name__,
                fn=f,
                is_async=inspect.iscoroutinefunction(f),
                arg_types=arg_types,
                return_type=return_type,
            ),
        )
        return f

    return decorate(fn) if fn is not None else decorate
