"""Writing activities: ``@activity.defn`` and what activity code can ask while it runs.

Names, signatures and behaviour follow ``temporalio.activity``: ``info()``,
``heartbeat(*details)``, ``logger``, ``is_cancelled()`` and ``wait_for_cancelled(_sync)``,
``cancellation_details()``, ``is_worker_shutdown()`` and ``wait_for_worker_shutdown(_sync)``,
``raise_complete_async()``, ``client()``, ``payload_converter()`` and
``shield_thread_cancel_exception()``. Activities may be ``async def`` (run on the worker's
event loop) or plain functions (run in the worker's thread pool).

One difference, because this engine never injects exceptions into threads: a plain-function
activity learns that it was cancelled when its next ``heartbeat()`` raises
:class:`~engine.exceptions.CancelledError` (or by polling ``is_cancelled()`` or waiting in
``wait_for_cancelled_sync()``), where ``temporalio`` raises into the thread at once.
``shield_thread_cancel_exception()`` holds that error back until its block ends, as there.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar, overload

from ._model.definitions import (
    ActivityDefinition,
    callable_hints,
    check_dynamic_run,
    is_async_callable,
    set_activity_definition,
    type_hints,
)
from .common import Priority, RetryPolicy
from .exceptions import InvalidArgumentError

__all__ = [
    "ActivityCancellationDetails",
    "Info",
    "LoggerAdapter",
    "cancellation_details",
    "client",
    "defn",
    "heartbeat",
    "in_activity",
    "info",
    "is_cancelled",
    "is_worker_shutdown",
    "logger",
    "payload_converter",
    "raise_complete_async",
    "shield_thread_cancel_exception",
    "wait_for_cancelled",
    "wait_for_cancelled_sync",
    "wait_for_worker_shutdown",
    "wait_for_worker_shutdown_sync",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Info:
    """About the running activity attempt (``activity.info()``); the fields of
    ``temporalio.activity.Info``, in its order."""

    activity_id: str
    activity_type: str
    attempt: int
    current_attempt_scheduled_time: datetime
    heartbeat_details: Sequence[Any]
    heartbeat_timeout: timedelta | None
    is_local: bool
    namespace: str
    schedule_to_close_timeout: timedelta | None
    scheduled_time: datetime
    start_to_close_timeout: timedelta | None
    started_time: datetime
    task_queue: str
    #: Names this attempt to :meth:`engine.client.Client.get_async_activity_handle`.
    task_token: bytes
    workflow_id: str | None
    #: Deprecated in ``temporalio`` in favour of :attr:`namespace`; the same value.
    workflow_namespace: str | None
    workflow_run_id: str | None
    workflow_type: str | None
    priority: Priority
    retry_policy: RetryPolicy | None
    activity_run_id: str | None = None

    @property
    def in_workflow(self) -> bool:
        """Whether a workflow scheduled this activity."""
        return self.workflow_id is not None

    def _logger_details(self) -> Mapping[str, Any]:
        return {
            "activity_id": self.activity_id,
            "activity_type": self.activity_type,
            "attempt": self.attempt,
            "namespace": self.namespace,
            "task_queue": self.task_queue,
            "workflow_id": self.workflow_id,
            "workflow_run_id": self.workflow_run_id,
            "workflow_type": self.workflow_type,
        }


@dataclass(frozen=True)
class ActivityCancellationDetails:
    """Why the attempt was cancelled (``cancellation_details()``); set once."""

    not_found: bool = False
    cancel_requested: bool = False
    paused: bool = False
    reset: bool = False
    timed_out: bool = False
    worker_shutdown: bool = False


class _CompleteAsyncError(BaseException):
    """Raised by :func:`raise_complete_async`: the worker reports no outcome."""


class _Signal:
    """Something that happens once (a cancellation, the worker's shutdown): waited for on
    the activity's event loop or, blocking, from any thread.

    Most attempts never wait on theirs, so the events behind a signal are made by the
    first waiter (under one lock shared by all signals, taken only then and when a
    signal is set): an attempt costs a flag, not two events and a condition."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop
        self._happened = False
        self._sync: threading.Event | None = None
        self._async: asyncio.Event | None = None

    def set(self) -> None:
        """Mark it happened (from any thread)."""
        with _SIGNAL_LOCK:
            if self._happened:
                return
            self._happened = True
            sync, aio = self._sync, self._async
        if sync is not None:
            sync.set()
        if aio is not None and self._loop is not None:
            if _running_loop() is self._loop:
                aio.set()
            elif not self._loop.is_closed():
                self._loop.call_soon_threadsafe(aio.set)

    def is_set(self) -> bool:
        return self._happened

    async def wait(self, what: str) -> None:
        if self._loop is None or _running_loop() is not self._loop:
            raise RuntimeError(
                f"{what}() waits on the activity's event loop, in an async def activity; "
                f"in a plain-function activity use {what}_sync()"
            )
        with _SIGNAL_LOCK:
            if self._happened:
                return
            if self._async is None:
                self._async = asyncio.Event()
            aio = self._async
        await aio.wait()

    def wait_sync(self, timeout: timedelta | float | None) -> None:
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        with _SIGNAL_LOCK:
            if self._happened:
                return
            if self._sync is None:
                self._sync = threading.Event()
            sync = self._sync
        sync.wait(seconds)


_SIGNAL_LOCK = threading.Lock()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Context:
    """What the worker (or an ``ActivityEnvironment``) gives running activity code; held in
    a context variable for the attempt's task or thread."""

    def __init__(
        self,
        info: Info | Callable[[], Info],
        heartbeat: Callable[[Sequence[Any]], None],
        *,
        cancelled: _Signal,
        worker_shutdown: _Signal,
        client: Any = None,
        payload_converter: Any = None,
        shield: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        #: The attempt's info, or a function giving it (the worker's makes it on first call,
        #: ``ActivityEnvironment``'s gives the current one).
        self._info = info
        self.heartbeat = heartbeat
        self.cancelled = cancelled
        self.worker_shutdown = worker_shutdown
        self.cancellation_details: ActivityCancellationDetails | None = None
        self.client = client
        self.payload_converter = payload_converter
        self.shield = shield

    @property
    def info(self) -> Info:
        return self._info if isinstance(self._info, Info) else self._info()

    @property
    def logger_details(self) -> Mapping[str, Any]:
        return self.info._logger_details()

    def cancel(self, details: ActivityCancellationDetails) -> None:
        """Record why (the first reason stays) and signal the cancellation."""
        if self.cancellation_details is None:
            self.cancellation_details = details
        self.cancelled.set()


_current: contextvars.ContextVar[_Context | None] = contextvars.ContextVar(
    "durable_activity", default=None
)


def _context() -> _Context:
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError(
            "not in an activity: engine.activity functions work only inside a function "
            "decorated with @activity.defn while a worker (or ActivityEnvironment) runs it"
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
    return _context().cancelled.is_set()


async def wait_for_cancelled() -> None:
    """Wait until this attempt is cancelled (``async def`` activities)."""
    await _context().cancelled.wait("wait_for_cancelled")


def wait_for_cancelled_sync(timeout: timedelta | float | None = None) -> None:
    """Block until this attempt is cancelled or ``timeout`` passes (plain functions)."""
    _context().cancelled.wait_sync(timeout)


def cancellation_details() -> ActivityCancellationDetails | None:
    """Why this attempt was cancelled, or None while it is not."""
    return _context().cancellation_details


def is_worker_shutdown() -> bool:
    """Whether the worker running this attempt has begun to shut down."""
    return _context().worker_shutdown.is_set()


async def wait_for_worker_shutdown() -> None:
    """Wait until the worker begins to shut down (``async def`` activities)."""
    await _context().worker_shutdown.wait("wait_for_worker_shutdown")


def wait_for_worker_shutdown_sync(timeout: timedelta | float | None = None) -> None:
    """Block until the worker begins to shut down or ``timeout`` passes."""
    _context().worker_shutdown.wait_sync(timeout)


def raise_complete_async() -> NoReturn:
    """End the activity function without an outcome: something else will complete, fail or
    cancel the attempt later through ``client.get_async_activity_handle(task_token=
    activity.info().task_token)`` (its start-to-close and heartbeat timeouts still run)."""
    raise _CompleteAsyncError()


def client() -> Any:
    """The :class:`~engine.client.Client` of the worker running this attempt (``async
    def`` activities only, as in ``temporalio``)."""
    found = _context().client
    if found is None:
        raise RuntimeError(
            "no client here: activity.client() works in async def activities run by a "
            "worker; a plain-function activity has none, and in tests pass one to "
            "ActivityEnvironment(client=...)"
        )
    return found


def payload_converter() -> Any:
    """The payload converter of the worker's data converter (for dynamic activities)."""
    return _context().payload_converter


@contextmanager
def shield_thread_cancel_exception() -> Iterator[None]:
    """In a plain-function activity, hold back the cancellation error a heartbeat would
    raise until the block ends (then it is raised, in place of what the block returned or
    raised). Blocks nest: only the outermost raises. Does nothing in ``async def`` code."""
    shield = _context().shield
    if shield is None:
        yield
    else:
        with shield():
            yield


class LoggerAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """A logger that adds the running attempt's details to each record, as
    ``temporalio.activity.LoggerAdapter`` does: appended to the message
    (``activity_info_on_message``), as ``record.temporal_activity``
    (``activity_info_on_extra``), and the whole :class:`Info` as ``record.activity_info``
    (``full_activity_info_on_extra``, off by default). Outside an activity it logs as the
    plain logger."""

    def __init__(self, logger: logging.Logger, extra: Mapping[str, Any] | None) -> None:
        super().__init__(logger, extra or {})
        self.activity_info_on_message = True
        self.activity_info_on_extra = True
        self.full_activity_info_on_extra = False

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        ctx = _current.get()
        if ctx is None:
            return msg, kwargs
        if self.activity_info_on_message:
            msg = f"{msg} ({dict(ctx.logger_details)})"
        if self.activity_info_on_extra or self.full_activity_info_on_extra:
            extra = dict(kwargs.get("extra") or {})  # never the caller's own dict
            if self.activity_info_on_extra:
                extra["temporal_activity"] = ctx.logger_details
            if self.full_activity_info_on_extra:
                extra["activity_info"] = ctx.info
            kwargs["extra"] = extra
        return msg, kwargs

    @property
    def base_logger(self) -> logging.Logger:
        """The logger underneath, to add handlers or set levels on."""
        base: logging.Logger = self.logger
        return base


#: The activity logger (``engine.activity``): each record carries the attempt's details.
logger = LoggerAdapter(logging.getLogger(__name__), None)


@overload
def defn(fn: F) -> F: ...


@overload
def defn(
    *, name: str | None = None, no_thread_cancel_exception: bool = False, dynamic: bool = False
) -> Callable[[F], F]: ...


def defn(
    fn: F | None = None,
    *,
    name: str | None = None,
    no_thread_cancel_exception: bool = False,
    dynamic: bool = False,
) -> F | Callable[[F], F]:
    """Mark an activity: a function, a method (register the bound method of an instance
    with the worker: ``activities=[store.charge]``) or a class whose instances are called
    (``activities=[Charger(db)]``). ``name`` (the activity type) defaults to the function's
    or class's name. ``no_thread_cancel_exception=True``: a plain-function activity's
    heartbeat never raises its cancellation; it checks ``activity.is_cancelled()``.
    ``dynamic=True`` (``name`` is then ignored): the worker runs it for every activity type
    it has no definition of; it takes one ``Sequence[RawValue]``, and
    ``activity.info().activity_type`` says which type it runs."""

    def decorate(f: F) -> F:
        if not callable(f):
            raise InvalidArgumentError("@activity.defn must decorate a function or a class")
        if getattr(f, "__durable_activity_definition__", None) is not None and not isinstance(
            f, type
        ):
            raise InvalidArgumentError(
                f"{getattr(f, '__qualname__', f)!r} is decorated with @activity.defn twice"
            )
        for param in inspect.signature(
            f.__call__ if isinstance(f, type) else f
        ).parameters.values():  # type: ignore[operator]
            if param.kind == inspect.Parameter.KEYWORD_ONLY:
                raise InvalidArgumentError(
                    f"activity {getattr(f, '__qualname__', f)!r} has the keyword-only "
                    f"parameter {param.name!r}: activity arguments are positional, as in "
                    "Temporal"
                )
        arg_types, return_type = (
            callable_hints(f)
            if isinstance(f, type)
            else type_hints(f, skip_self=_is_method_in_class_body(f))
        )
        if dynamic:
            check_dynamic_run("activity", arg_types)
        set_activity_definition(
            f,
            ActivityDefinition(
                name=f.__name__ if dynamic else (name or f.__name__),
                fn=f,
                is_async=is_async_callable(f),
                arg_types=arg_types,
                return_type=return_type,
                no_thread_cancel_exception=no_thread_cancel_exception,
                dynamic=dynamic,
            ),
        )
        return f

    return decorate(fn) if fn is not None else decorate


def _is_method_in_class_body(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is being defined in a class body (its first parameter is ``self``)."""
    qualname = getattr(fn, "__qualname__", "")
    params = list(inspect.signature(fn).parameters)
    return "." in qualname.replace("<locals>.", "") and bool(params) and params[0] == "self"
