"""Writing workflows: decorators, and the calls workflow code makes (names of ``temporalio``).

Every call here is a one-line delegation to the runtime of the workflow currently running on
this thread's event loop (the deterministic loop of ``engine._replay``), so this module
never imports the worker. Calls made outside a workflow raise a clear error.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random as _random
import uuid as _uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from ._aio import as_completed, wait
from ._cron_api import (
    get_last_completion_result,
    get_last_failure,
    has_last_completion_result,
)
from ._external_api import (
    ExternalWorkflowHandle,
    get_external_workflow_handle,
    get_external_workflow_handle_for,
)
from ._handler_api import *  # noqa: F403 -- set_signal_handler, get_update_handler, ...
from ._handler_api import __all__ as _handler_calls
from ._local_api import (
    execute_local_activity,
    execute_local_activity_class,
    execute_local_activity_method,
    start_local_activity,
    start_local_activity_class,
    start_local_activity_method,
)
from ._model.decorators import (
    activity_name,
    definition_name,
    defn,
    handler_name,
    init,
    query,
    run,
    signal,
    update,
)
from ._model.definitions import (
    HandlerUnfinishedPolicy,
    UnfinishedSignalHandlersWarning,
    UnfinishedUpdateHandlersWarning,
    UpdateInfo,
)
from ._start_api import (
    continue_as_new,
    execute_activity,
    execute_activity_class,
    execute_activity_method,
    execute_child_workflow,
    sleep,
    start_activity,
    start_activity_class,
    start_activity_method,
    start_child_workflow,
    wait_condition,
)
from .common import (
    ActivityCancellationType,
    ChildWorkflowCancellationType,
    ParentClosePolicy,
    Priority,
    RetryPolicy,
    SearchAttributes,
    SearchAttributeUpdate,
    TypedSearchAttributes,
)
from .exceptions import InvalidArgumentError, NondeterminismError

__all__ = [
    "ActivityCancellationType",
    "ActivityHandle",
    "ChildWorkflowCancellationType",
    "ChildWorkflowHandle",
    "ContinueAsNewError",
    "ExternalWorkflowHandle",
    "HandlerUnfinishedPolicy",
    "Info",
    "NondeterminismError",
    "ParentClosePolicy",
    "ParentInfo",
    "RootInfo",
    "UnfinishedSignalHandlersWarning",
    "UnfinishedUpdateHandlersWarning",
    "UpdateInfo",
    "activity_name",
    "all_handlers_finished",
    "as_completed",
    "continue_as_new",
    "current_update_info",
    "definition_name",
    "defn",
    "deprecate_patch",
    "execute_activity",
    "execute_activity_class",
    "execute_activity_method",
    "execute_child_workflow",
    "execute_local_activity_method",
    "execute_local_activity_class",
    "execute_local_activity",
    "get_current_details",
    "has_last_completion_result",
    "get_last_failure",
    "get_last_completion_result",
    "get_external_workflow_handle",
    "get_external_workflow_handle_for",
    "handler_name",
    "in_workflow",
    "info",
    "init",
    "instance",
    "is_failure_exception",
    "logger",
    "memo",
    "memo_value",
    "new_random",
    "now",
    "patched",
    "payload_converter",
    "query",
    "random",
    "random_seed",
    "register_random_seed_callback",
    "run",
    "set_current_details",
    "signal",
    "sleep",
    "start_activity",
    "start_activity_class",
    "start_activity_method",
    "start_child_workflow",
    "start_local_activity_method",
    "start_local_activity_class",
    "start_local_activity",
    "time",
    "time_ns",
    "unsafe",
    "upsert_memo",
    "upsert_search_attributes",
    "update",
    "uuid4",
    "uuid7",
    "wait",
    "wait_condition",
    *_handler_calls,
]

T = TypeVar("T")
C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])


# ---------------------------------------------------------------------------------------
# information about the running workflow
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParentInfo:
    """The run that started this one as a child (``workflow.info().parent``)."""

    namespace: str
    run_id: str
    workflow_id: str


@dataclass(frozen=True)
class RootInfo:
    """The run at the top of this run's chain of parents (``workflow.info().root``)."""

    run_id: str
    workflow_id: str


@dataclass(frozen=True)
class Info:
    """What a workflow knows about its own run (``workflow.info()``): the fields of
    ``temporalio.workflow.Info``, in its order. ``start_time`` is when the run's first
    workflow task began, ``workflow_start_time`` when the run started. ``headers`` and the
    search attributes are empty here (no interceptors; search attributes: a later
    version), and so is ``cron_schedule`` unless the run was started with one."""

    attempt: int
    continued_run_id: str | None
    cron_schedule: str | None
    execution_timeout: timedelta | None
    first_execution_run_id: str
    headers: Mapping[str, Any]
    namespace: str
    original_execution_run_id: str
    parent: ParentInfo | None
    root: RootInfo | None
    priority: Priority
    raw_memo: Mapping[str, Any]
    retry_policy: RetryPolicy | None
    run_id: str
    run_timeout: timedelta | None
    #: The deprecated untyped form: name -> list of values (upserts change it in place).
    search_attributes: Mapping[str, Any]
    start_time: datetime
    task_queue: str
    task_timeout: timedelta
    #: The run's search attributes now (its start's, with its upserts).
    typed_search_attributes: TypedSearchAttributes
    workflow_id: str
    workflow_start_time: datetime
    workflow_type: str
    #: Kept from earlier versions of this engine: as of the run's first workflow task.
    #: Use the methods below for the current values.
    history_length: int = 0
    history_size: int = 0
    continue_as_new_suggested: bool = False

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
    def random_seed(self) -> int: ...

    @abstractmethod
    def instance(self) -> Any: ...

    @abstractmethod
    def payload_converter(self) -> Any: ...

    @abstractmethod
    def current_details(self, new: str | None = None) -> str: ...

    @abstractmethod
    def memo(self) -> Mapping[str, Any]: ...

    @abstractmethod
    def memo_value(self, key: str, default: Any, type_hint: type | None) -> Any: ...

    @abstractmethod
    def is_failure_exception(self, err: BaseException) -> bool: ...

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
    def start_local_activity(
        self, activity: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> ActivityHandle[Any]: ...

    @abstractmethod
    async def wait_condition(
        self, fn: Callable[[], bool], timeout: float | None, timeout_summary: str | None = None
    ) -> None: ...

    @abstractmethod
    async def sleep(self, seconds: float, summary: str) -> None: ...

    @abstractmethod
    async def start_child_workflow(
        self, workflow: Any, args: Sequence[Any], options: dict[str, Any]
    ) -> ChildWorkflowHandle[Any]: ...

    @abstractmethod
    async def signal_external(
        self, workflow_id: str, run_id: str | None, signal_name: str, args: Sequence[Any]
    ) -> None: ...

    @abstractmethod
    async def cancel_external(self, workflow_id: str, run_id: str | None, reason: str) -> None: ...

    @abstractmethod
    def last_completion_result(self, type_hint: type | None) -> tuple[bool, Any]: ...

    @abstractmethod
    def last_failure(self) -> BaseException | None: ...

    @abstractmethod
    def upsert_memo(self, updates: Mapping[str, Any]) -> None: ...

    @abstractmethod
    def upsert_search_attributes(self, updates: Any) -> None: ...

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


def uuid7() -> _uuid.UUID:
    """A replay-safe UUID version 7 (RFC 9562): the workflow time in its first 48 bits (so
    ids made in later workflow tasks sort later), the rest drawn from :func:`random`. Ids
    made in one workflow task share their time part and are not ordered among themselves."""
    millis = (time_ns() // 1_000_000) & ((1 << 48) - 1)
    rng = random()
    high_random, low_random = rng.getrandbits(12), rng.getrandbits(62)
    value = (millis << 80) | (0x7 << 76) | (high_random << 64) | (0b10 << 62) | low_random
    return _uuid.UUID(int=value)


def time_ns() -> int:
    """Replay-safe current time as epoch nanoseconds (``time.time_ns`` for workflows)."""
    moment = now()
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def random_seed() -> int:
    """The seed of the run's :func:`random` (fixed for the run here: this engine has no
    workflow reset, which is when Temporal's seed changes)."""
    return _runtime().random_seed()


def new_random(name: str | None = None) -> _random.Random:
    """A new replay-safe generator seeded from the run's seed: without ``name`` it starts
    as :func:`random` did, with one its own sequence (another name, another sequence)."""
    seed = random_seed()
    return _random.Random(seed if name is None else f"{seed}/{name}")


def register_random_seed_callback(callback: Callable[[int], None]) -> None:
    """Accepted for Temporal's code: the callback would be told of a new seed, which a run
    never gets here (no workflow reset)."""
    _runtime().random_seed()  # in a workflow, as temporalio requires


def instance() -> Any:
    """The running workflow's object (the instance of the ``@workflow.defn`` class)."""
    return _runtime().instance()


def payload_converter() -> Any:
    """The payload converter of the worker's data converter (for dynamic handlers)."""
    return _runtime().payload_converter()


def get_current_details() -> str:
    """The run's current details (a short status text; set with :func:`set_current_details`),
    shown by ``__temporal_workflow_metadata`` and the views."""
    return _runtime().current_details()


def set_current_details(description: str) -> None:
    """Set the run's current details: what it is doing now, for people watching it."""
    if not isinstance(description, str):
        raise InvalidArgumentError(
            f"set_current_details takes a string, not {type(description).__name__}"
        )
    _runtime().current_details(description)


def memo() -> Mapping[str, Any]:
    """The run's memo, decoded (``start_workflow(..., memo={...})``)."""
    return _runtime().memo()


def upsert_memo(updates: Mapping[str, Any]) -> None:
    """Change the run's memo: set each key to its value, remove the keys given None
    (recorded as a ``WorkflowPropertiesModified`` event; ``workflow.memo()`` sees it)."""
    _runtime().upsert_memo(updates)


def upsert_search_attributes(
    attributes: Sequence[SearchAttributeUpdate[Any]] | SearchAttributes,
) -> None:
    """Change the run's search attributes: ``[key.value_set(v), key.value_unset()]``
    (or the older dict of lists). Recorded as an ``UpsertWorkflowSearchAttributes`` event
    and written to the run's visibility row, so ``list_workflows`` finds the run by its
    new values from then on; ``workflow.info().typed_search_attributes`` shows them at
    once. An attribute that is not registered in the namespace fails the workflow task
    (it is retried: register the attribute and the run goes on)."""
    _runtime().upsert_search_attributes(attributes)


_NO_DEFAULT: Any = object()


def memo_value(key: str, default: Any = _NO_DEFAULT, *, type_hint: type | None = None) -> Any:
    """One memo value, decoded (into ``type_hint`` when given); ``default`` when the memo
    has no ``key``, else :class:`KeyError`."""
    return _runtime().memo_value(key, default, type_hint)


def is_failure_exception(err: BaseException) -> bool:
    """Whether ``err``, raised out of the workflow, fails the run (rather than the workflow
    task, which is retried): a Temporal failure (``ApplicationError``, ...) does."""
    return _runtime().is_failure_exception(err)


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


def patched(id: str) -> bool:
    """Versioning: True on new runs (recording a marker), False on runs made before."""
    return _runtime().patched(id, False)


def deprecate_patch(id: str) -> None:
    """Mark a patch as the only path now; runs from before it must have completed."""
    _runtime().patched(id, True)


def all_handlers_finished() -> bool:
    """Whether no signal or update handler is still running."""
    return _runtime().all_handlers_finished()


#: Set in each update handler's task (and so in the tasks it starts): contextvars follow
#: asyncio tasks, as in ``temporalio``.
_current_update_info: contextvars.ContextVar[UpdateInfo] = contextvars.ContextVar(
    "durable_current_update_info"
)


def current_update_info() -> UpdateInfo | None:
    """The update being handled by the code calling this (in an update handler or a task
    it started), or None elsewhere."""
    return _current_update_info.get(None)


# ---------------------------------------------------------------------------------------
# activities
# ---------------------------------------------------------------------------------------


class ActivityHandle(asyncio.Task[T]):
    """A scheduled activity: await it for its result, ``cancel()`` it to request cancel."""


# ---------------------------------------------------------------------------------------
# child workflows
# ---------------------------------------------------------------------------------------


class ChildWorkflowHandle(asyncio.Task[T]):
    """A started child workflow: await it for its result; ``cancel()`` asks it to cancel.

    ``id`` is the child's workflow id, ``first_execution_run_id`` its first run id.
    """

    id: str
    first_execution_run_id: str | None


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


# ---------------------------------------------------------------------------------------
# decorators (defined with the definitions they build: engine/_model/decorators.py)
# ---------------------------------------------------------------------------------------


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
