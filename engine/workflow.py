"""Writing workflows: decorators, and the calls workflow code makes (names of ``temporalio``).

Every call here is a one-line delegation to the runtime of the workflow currently running on
this thread's event loop (the deterministic loop of ``engine._replay``), so this module
never imports the worker. Calls made outside a workflow raise a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random as _random
import uuid as _uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar, overload

from ._model.definitions import (
    ActivityDefinition,
    HandlerDefinition,
    WorkflowDefinition,
    set_workflow_definition,
    type_hints,
)
from .common import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ParentClosePolicy,
    RetryPolicy,
    WorkflowIDReusePolicy,
)
from .exceptions import InvalidArgumentError, NondeterminismError

__all__ = [
    "ActivityCancellationType",
    "ActivityHandle",
    "ChildWorkflowCancellationType",
    "ChildWorkflowHandle",
    "ContinueAsNewError",
    "Info",
    "NondeterminismError",
    "ParentClosePolicy",
    "activity_name",
    "all_handlers_finished",
    "as_completed",
    "continue_as_new",
    "definition_name",
    "defn",
    "deprecate_patch",
    "execute_activity",
    "execute_activity_class",
    "execute_activity_method",
    "execute_child_workflow",
    "handler_name",
    "in_workflow",
    "info",
    "init",
    "logger",
    "now",
    "patched",
    "query",
    "random",
    "run",
    "signal",
    "sleep",
    "start_activity",
    "start_activity_class",
    "start_activity_method",
    "start_child_workflow",
    "time",
    "unsafe",
    "update",
    "uuid4",
    "wait",
    "wait_condition",
]

T = TypeVar("T")
C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------
# information about the running workflow
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Info:
    """What a workflow knows about its own run (``workflow.info()``)."""

    namespace: str
    workflow_id: str
    run_id: str
    workflow_type: str
    task_queue: str
    attempt: int
    start_time: datetime
    first_execution_run_id: str
    continued_run_id: str | None
    run_timeout: timedelta | None
    execution_timeout: timedelta | None
    task_timeout: timedelta
    history_length: int
    history_size: int
    continue_as_new_suggested: bool

    def get_current_history_length(self) -> int:
        """Events in the history so far, as of the current workflow task."""
        return _runtime().history_length()

    def get_current_history_size(self) -> int:
        """Bytes of history so far, as of the current workflow task."""
        return _runtime().history_size()

    def is_continue_as_new_suggested(self) -> bool:
        """True once the history is large enough that the run should continue as new."""
        return _runtime().continue_as_new_suggested()


class _Runtime(ABC):
    """What the deterministic event loop provides to this module."""

    @abstractmethod
    def info(self) -> Info: ...

    @abstractmethod
    def now(self) -> datetime: ...

    @abstractmethod
    def random(self) -> _random.Random: ...

    @abstractmethod
    def is_replaying(self) -> bool: ...

    @abstractmethod
    def history_length(self) -> int: ...

    @abstractmethod
    def history_size(self) -> int: ...

    @abstractmethod
    def continue_as_new_suggested(self) -> bool: ...

    @abstractmethod
    def start_activity(
        self, activity: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> ActivityHandle[Any]: ...

    @abstractmethod
    async def wait_condition(self, fn: Callable[[], bool], timeout: float | None) -> None: ...

    @abstractmethod
    async def start_child_workflow(
        self, workflow: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> ChildWorkflowHandle[Any]: ...

    @abstractmethod
    def patched(self, patch_id: str, deprecated: bool) -> bool: ...

    @abstractmethod
    def all_handlers_finished(self) -> bool: ...

    @abstractmethod
    def continue_as_new_error(
        self, args: Sequence[Any], options: dict[str, Any]
    ) -> BaseException: ...


def _runtime() -> _Runtime:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if isinstance(loop, _Runtime):
        return loop
    raise _NotInWorkflowError(
        "this function can only be called from workflow code (a method of a @workflow.defn "
        "class running in a worker); in an activity use engine.activity, elsewhere use the "
        "Client"
    )


class _NotInWorkflowError(RuntimeError):
    """A workflow-only function was called outside a workflow."""


def in_workflow() -> bool:
    """Whether the caller is workflow code running in a worker or replayer."""
    try:
        return isinstance(asyncio.get_running_loop(), _Runtime)
    except RuntimeError:
        return False


def info() -> Info:
    """Information about the running workflow."""
    return _runtime().info()


def now() -> datetime:
    """Replay-safe current time (UTC): the time of the current workflow task."""
    return _runtime().now()


def time() -> float:
    """Replay-safe current time as epoch seconds."""
    return now().timestamp()


def random() -> _random.Random:
    """A replay-safe random number generator (seeded per run)."""
    return _runtime().random()


def uuid4() -> _uuid.UUID:
    """A replay-safe UUID (drawn from :func:`random`)."""
    return _uuid.UUID(int=random().getrandbits(128), version=4)


class _ReplaySafeLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Logs with the workflow's ids, and stays quiet while the workflow replays."""

    def isEnabledFor(self, level: int) -> bool:
        if in_workflow() and _runtime().is_replaying():
            return False
        return bool(self.logger.isEnabledFor(level))

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        if in_workflow():
            i = _runtime().info()
            msg = f"{msg} ({{'workflow_id': {i.workflow_id!r}, 'run_id': {i.run_id!r}, 'workflow_type': {i.workflow_type!r}}})"
        return msg, kwargs


#: Replay-safe logger: records nothing while a workflow is replaying.
logger = _ReplaySafeLogger(logging.getLogger("engine.workflow"), {})


async def sleep(duration: float | timedelta) -> None:
    """Durable timer: resume after at least ``duration`` (survives worker crashes)."""
    seconds = duration.total_seconds() if isinstance(duration, timedelta) else float(duration)
    await asyncio.sleep(seconds)


async def wait_condition(
    fn: Callable[[], bool], *, timeout: float | timedelta | None = None
) -> None:
    """Wait until ``fn()`` is true (checked after every step of the workflow).

    With ``timeout``, raises :class:`asyncio.TimeoutError` when it passes first.
    """
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    await _runtime().wait_condition(fn, seconds)


async def wait(
    fs: Iterable[asyncio.Future[Any]],
    *,
    timeout: float | None = None,
    return_when: str = asyncio.ALL_COMPLETED,
) -> tuple[list[asyncio.Future[Any]], list[asyncio.Future[Any]]]:
    """``asyncio.wait`` for workflow code: wait for the tasks or futures ``fs`` (an
    activity or child handle, ``asyncio.create_task(...)``) until ``return_when``
    (``asyncio.FIRST_COMPLETED``, ``FIRST_EXCEPTION`` or ``ALL_COMPLETED``) or ``timeout``
    seconds (a durable timer). Returns ``(done, pending)`` as lists in the order given:
    ``asyncio.wait``'s sets iterate in an order that can differ on replay."""
    if asyncio.isfuture(fs) or asyncio.iscoroutine(fs):
        raise TypeError(f"wait() takes an iterable of tasks or futures, not {type(fs).__name__}")
    if return_when not in (asyncio.FIRST_COMPLETED, asyncio.FIRST_EXCEPTION, asyncio.ALL_COMPLETED):
        raise ValueError(f"return_when must be an asyncio constant, not {return_when!r}")
    futures = list(fs)
    if not futures:
        raise ValueError("wait() needs at least one task or future")
    if any(asyncio.iscoroutine(f) for f in futures):
        raise TypeError("wait() takes tasks, not coroutines: wrap each in asyncio.create_task()")
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()
    left = len(futures)

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    def one_done(f: asyncio.Future[Any]) -> None:
        nonlocal left
        left -= 1
        failed = not f.cancelled() and f.exception() is not None
        if (
            left <= 0
            or return_when == asyncio.FIRST_COMPLETED
            or (return_when == asyncio.FIRST_EXCEPTION and failed)
        ):
            wake()

    for f in futures:
        f.add_done_callback(one_done)
    timer = loop.call_later(timeout, wake) if timeout is not None else None
    try:
        await woken
    finally:
        if timer is not None:
            timer.cancel()
        for f in futures:
            f.remove_done_callback(one_done)
    return [f for f in futures if f.done()], [f for f in futures if not f.done()]


def as_completed(
    fs: Iterable[Awaitable[T]], *, timeout: float | None = None
) -> Iterator[Awaitable[T]]:
    """``asyncio.as_completed`` for workflow code: an iterator of awaitables, each giving
    the next result (or raising the next failure) in the order the awaitables finish;
    after ``timeout`` seconds (a durable timer) the rest raise ``TimeoutError``."""
    if asyncio.isfuture(fs) or asyncio.iscoroutine(fs):
        raise TypeError(f"as_completed() takes an iterable of awaitables, not {type(fs).__name__}")
    loop = asyncio.get_running_loop()
    todo: list[asyncio.Future[T]] = [asyncio.ensure_future(f) for f in list(fs)]
    finished: asyncio.Queue[asyncio.Future[T] | None] = asyncio.Queue()
    count = len(todo)
    timer: asyncio.TimerHandle | None = None

    def one_done(f: asyncio.Future[T]) -> None:
        if f in todo:
            todo.remove(f)
            finished.put_nowait(f)
        if not todo and timer is not None:
            timer.cancel()

    def expire() -> None:
        for f in todo:
            f.remove_done_callback(one_done)
            finished.put_nowait(None)
        todo.clear()

    async def next_result() -> T:
        f = await finished.get()
        if f is None:
            raise TimeoutError("as_completed() timed out")
        return f.result()

    for f in todo:
        f.add_done_callback(one_done)
    if todo and timeout is not None:
        timer = loop.call_later(timeout, expire)
    for _ in range(count):
        yield next_result()


def patched(patch_id: str) -> bool:
    """Versioning: True on new runs (recording a marker), False on runs made before."""
    return _runtime().patched(patch_id, False)


def deprecate_patch(patch_id: str) -> None:
    """Mark a patch as the only path now; runs from before it must have completed."""
    _runtime().patched(patch_id, True)


def all_handlers_finished() -> bool:
    """Whether no signal or update handler is still running."""
    return _runtime().all_handlers_finished()


# ---------------------------------------------------------------------------------------
# activities
# ---------------------------------------------------------------------------------------


class ActivityHandle(asyncio.Task[T]):
    """A scheduled activity: await it for its result, ``cancel()`` it to request cancel."""


def _timeout(value: float | timedelta | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def start_activity(
    activity: Callable[..., Any] | str,
    arg: Any = inspect.Parameter.empty,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    result_type: type | None = None,
) -> ActivityHandle[Any]:
    """Schedule an activity and return a handle to it (await the handle for the result).

    One of ``start_to_close_timeout`` or ``schedule_to_close_timeout`` is required.
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
    }
    return _runtime().start_activity(activity, all_args, options)


async def execute_activity(
    activity: Callable[..., Any] | str,
    arg: Any = inspect.Parameter.empty,
    *,
    args: Sequence[Any] = (),
    task_queue: str | None = None,
    schedule_to_close_timeout: timedelta | None = None,
    schedule_to_start_timeout: timedelta | None = None,
    start_to_close_timeout: timedelta | None = None,
    heartbeat_timeout: timedelta | None = None,
    retry_policy: RetryPolicy | None = None,
    cancellation_type: ActivityCancellationType = ActivityCancellationType.TRY_CANCEL,
    activity_id: str | None = None,
    result_type: type | None = None,
) -> Any:
    """Run an activity and wait for its result (see :func:`start_activity`)."""
    return await start_activity(
        activity,
        arg,
        args=args,
        task_queue=task_queue,
        schedule_to_close_timeout=schedule_to_close_timeout,
        schedule_to_start_timeout=schedule_to_start_timeout,
        start_to_close_timeout=start_to_close_timeout,
        heartbeat_timeout=heartbeat_timeout,
        retry_policy=retry_policy,
        cancellation_type=cancellation_type,
        activity_id=activity_id,
        result_type=result_type,
    )


def start_activity_method(
    activity: Callable[..., Any], arg: Any = inspect.Parameter.empty, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_activity` for an activity that is a method (``Store.charge``); the
    worker runs it on the instance it was given (``activities=[store.charge]``)."""
    return start_activity(activity, arg, **options)


async def execute_activity_method(
    activity: Callable[..., Any], arg: Any = inspect.Parameter.empty, **options: Any
) -> Any:
    """:func:`execute_activity` for an activity that is a method."""
    return await start_activity(activity, arg, **options)


def start_activity_class(
    activity: type, arg: Any = inspect.Parameter.empty, **options: Any
) -> ActivityHandle[Any]:
    """:func:`start_activity` for an activity that is a callable class (``Charger``); the
    worker calls the instance it was given (``activities=[Charger(db)]``)."""
    return start_activity(activity, arg, **options)


async def execute_activity_class(
    activity: type, arg: Any = inspect.Parameter.empty, **options: Any
) -> Any:
    """:func:`execute_activity` for an activity that is a callable class."""
    return await start_activity(activity, arg, **options)


def _merge_args(arg: Any, args: Sequence[Any]) -> list[Any]:
    if arg is not inspect.Parameter.empty:
        if args:
            raise InvalidArgumentError("pass either one positional arg or args=[...], not both")
        return [arg]
    return list(args)


# ---------------------------------------------------------------------------------------
# child workflows
# ---------------------------------------------------------------------------------------


class ChildWorkflowHandle(asyncio.Task[T]):
    """A started child workflow: await it for its result; ``cancel()`` asks it to cancel.

    ``id`` is the child's workflow id, ``first_execution_run_id`` its first run id.
    """

    id: str
    first_execution_run_id: str | None


async def start_child_workflow(
    workflow: Callable[..., Any] | str,
    arg: Any = inspect.Parameter.empty,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    cancellation_type: ChildWorkflowCancellationType = (
        ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED
    ),
    result_type: type | None = None,
) -> ChildWorkflowHandle[Any]:
    """Start a child workflow and wait until it has started; return its handle.

    The child gets its own history (and its own limits). By default it is terminated
    when this workflow closes (``parent_close_policy``).
    """
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
    }
    return await _runtime().start_child_workflow(workflow, _merge_args(arg, args), options)


async def execute_child_workflow(
    workflow: Callable[..., Any] | str,
    arg: Any = inspect.Parameter.empty,
    *,
    args: Sequence[Any] = (),
    id: str | None = None,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    parent_close_policy: ParentClosePolicy = ParentClosePolicy.TERMINATE,
    cancellation_type: ChildWorkflowCancellationType = (
        ChildWorkflowCancellationType.WAIT_CANCELLATION_COMPLETED
    ),
    result_type: type | None = None,
) -> Any:
    """Start a child workflow and wait for its result."""
    handle = await start_child_workflow(
        workflow,
        arg,
        args=args,
        id=id,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
        run_timeout=run_timeout,
        task_timeout=task_timeout,
        id_reuse_policy=id_reuse_policy,
        parent_close_policy=parent_close_policy,
        cancellation_type=cancellation_type,
        result_type=result_type,
    )
    return await handle


# ---------------------------------------------------------------------------------------
# continue-as-new
# ---------------------------------------------------------------------------------------


class ContinueAsNewError(BaseException):
    """Raised by :func:`continue_as_new`; the worker turns it into the closing command.

    A ``BaseException`` so that ``except Exception`` in workflow code cannot swallow it.
    """

    def __init__(self, args: Sequence[Any], options: dict[str, Any]) -> None:
        super().__init__("continue as new")
        self.input_args = list(args)
        self.options = options


def continue_as_new(
    arg: Any = inspect.Parameter.empty,
    *,
    args: Sequence[Any] = (),
    workflow: Callable[..., Any] | str | None = None,
    task_queue: str | None = None,
    run_timeout: timedelta | None = None,
    task_timeout: timedelta | None = None,
) -> Any:
    """Close this run and start a fresh one (same workflow id, new run id, empty history)."""
    raise _runtime().continue_as_new_error(
        _merge_args(arg, args),
        {
            "workflow": workflow,
            "task_queue": task_queue,
            "run_timeout": _timeout(run_timeout),
            "task_timeout": _timeout(task_timeout),
        },
    )


# ---------------------------------------------------------------------------------------
# decorators
# ---------------------------------------------------------------------------------------

_RUN = "__durable_run__"
_INIT = "__durable_init__"
_HANDLER = "__durable_handler__"


@overload
def defn(cls: C) -> C: ...


@overload
def defn(
    *, name: str | None = None, sandboxed: bool = True, dynamic: bool = False
) -> Callable[[C], C]: ...


def defn(
    cls: C | None = None,
    *,
    name: str | None = None,
    sandboxed: bool = True,
    dynamic: bool = False,
) -> C | Callable[[C], C]:
    """Mark a class as a workflow definition. ``name`` defaults to the class name.

    ``sandboxed`` is accepted for compatibility and ignored: there is no import sandbox;
    determinism is enforced by the event loop and by replay.
    """

    def decorate(c: C) -> C:
        _build_definition(c, name or c.__name__)
        return c

    return decorate(cls) if cls is not None else decorate


def _build_definition(cls: type, name: str) -> None:
    run_fn: Callable[..., Any] | None = None
    handlers: dict[str, dict[str | None, HandlerDefinition]] = {
        "signal": {},
        "query": {},
        "update": {},
    }
    for klass in reversed(cls.__mro__):
        for attr, member in vars(klass).items():
            if getattr(member, _RUN, False):
                run_fn = getattr(cls, attr)
            handler = getattr(member, _HANDLER, None)
            if isinstance(handler, HandlerDefinition):
                handlers[handler.kind][handler.name] = handler
    if run_fn is None:
        raise InvalidArgumentError(
            f"workflow class {cls.__qualname__} has no @workflow.run method: mark the async "
            "method that runs the workflow with @workflow.run"
        )
    if not inspect.iscoroutinefunction(run_fn):
        raise InvalidArgumentError(
            f"{cls.__qualname__}.{run_fn.__name__} must be 'async def' to be a @workflow.run"
        )
    init = cls.__dict__.get("__init__")
    arg_types, return_type = type_hints(run_fn, skip_self=True)
    set_workflow_definition(
        cls,
        WorkflowDefinition(
            name=name,
            cls=cls,
            run_fn=run_fn,
            signals=handlers["signal"],
            queries=handlers["query"],
            updates=handlers["update"],
            init_takes_args=bool(init is not None and getattr(init, _INIT, False)),
            arg_types=arg_types,
            return_type=return_type,
        ),
    )


def run(fn: F) -> F:
    """Mark the workflow's entry method (``async def``)."""
    setattr(fn, _RUN, True)
    return fn


def init(fn: F) -> F:
    """Mark ``__init__`` as taking the workflow's arguments too."""
    setattr(fn, _INIT, True)
    return fn


def _handler_decorator(kind: str) -> Callable[..., Any]:
    def decorator(
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        dynamic: bool = False,
        **_ignored: Any,
    ) -> Any:
        def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
            handler_name = None if dynamic else (name or f.__name__)
            arg_types, _ = type_hints(f, skip_self=True)
            handler = HandlerDefinition(
                name=handler_name,
                fn=f,
                is_async=inspect.iscoroutinefunction(f),
                kind=kind,
                arg_types=arg_types,
            )
            setattr(f, _HANDLER, handler)
            if kind == "update":

                def validator(v: Callable[..., Any]) -> Callable[..., Any]:
                    handler.validator = v
                    return v

                f.validator = validator  # type: ignore[attr-defined]
            return f

        return decorate(fn) if fn is not None else decorate

    return decorator


#: Mark a method as a signal handler (``@workflow.signal`` or ``@workflow.signal(name=...)``).
signal = _handler_decorator("signal")
#: Mark a method as a query handler: read-only, must not block.
query = _handler_decorator("query")
#: Mark a method as an update handler; add a validator with ``@method.validator``.
update = _handler_decorator("update")


def definition_name(fn_or_cls: Any) -> str:
    """The workflow type name of a workflow class or its run method, or a string as is."""
    if isinstance(fn_or_cls, str):
        return fn_or_cls
    return WorkflowDefinition.of(fn_or_cls).name


def activity_name(fn: Any) -> str:
    """The activity type name of an activity function, or a string as is."""
    if isinstance(fn, str):
        return fn
    return ActivityDefinition.of(fn).name


def handler_name(fn: Any, kind: str) -> str:
    """The signal/query/update name of a handler method, or a string as is."""
    if isinstance(fn, str):
        return fn
    handler = getattr(fn, _HANDLER, None)
    if isinstance(handler, HandlerDefinition) and handler.kind == kind and handler.name:
        return handler.name
    raise InvalidArgumentError(
        f"{getattr(fn, '__qualname__', fn)!r} is not a @workflow.{kind} handler"
    )


class unsafe:
    """Escape hatches, named as in ``temporalio.workflow.unsafe``."""

    @staticmethod
    def is_replaying() -> bool:
        """Whether the workflow is replaying history (no side effects should happen)."""
        return _runtime().is_replaying()

    @staticmethod
    @contextlib.contextmanager
    def imports_passed_through() -> Iterator[None]:
        """No-op: there is no import sandbox here. Kept so temporalio code runs unchanged."""
        yield

    @staticmethod
    @contextlib.contextmanager
    def sandbox_unrestricted() -> Iterator[None]:
        """No-op: there is no sandbox. Kept so temporalio code runs unchanged."""
        yield
