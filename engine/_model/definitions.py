"""Workflow and activity definitions: what the decorators collect from user code."""

from __future__ import annotations

import inspect
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from ..common import RawValue
from ..exceptions import InvalidArgumentError

_WF_ATTR = "__durable_workflow_definition__"
_ACT_ATTR = "__durable_activity_definition__"


class HandlerUnfinishedPolicy(Enum):
    """What happens to a signal or update handler still running when the run closes
    (Temporal's names): ``WARN_AND_ABANDON`` (the default) abandons it and issues an
    :class:`~engine.workflow.UnfinishedUpdateHandlersWarning` or
    :class:`~engine.workflow.UnfinishedSignalHandlersWarning`; ``ABANDON`` abandons it
    quietly. Either way, a client waiting on an abandoned update gets an error."""

    WARN_AND_ABANDON = 1
    ABANDON = 2


@dataclass(frozen=True)
class UpdateInfo:
    """The update whose handler is running (``workflow.current_update_info()``)."""

    id: str
    name: str


class UnfinishedUpdateHandlersWarning(RuntimeWarning):
    """The run closed while update handlers were still running (their callers get an
    error instead of a result). Wait for them with
    ``workflow.wait_condition(workflow.all_handlers_finished)``, or silence this with
    ``@workflow.update(unfinished_policy=HandlerUnfinishedPolicy.ABANDON)``."""


class UnfinishedSignalHandlersWarning(RuntimeWarning):
    """The run closed while signal handlers were still running. Wait for them with
    ``workflow.wait_condition(workflow.all_handlers_finished)``, or silence this with
    ``@workflow.signal(unfinished_policy=HandlerUnfinishedPolicy.ABANDON)``."""


@dataclass
class HandlerDefinition:
    """A signal, query or update handler of a workflow class."""

    name: str | None  # None for a dynamic handler
    fn: Callable[..., Any]
    is_async: bool
    kind: str  # "signal" | "query" | "update"
    validator: Callable[..., Any] | None = None
    arg_types: list[Any] = field(default_factory=list)
    unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON
    #: False for a handler set at run time (``workflow.set_signal_handler``): a plain
    #: callable, called as it is, not a method looked up on the workflow object.
    is_method: bool = True
    #: A dynamic signal or query handler of the older form ``(self, name, *args)``: called
    #: with the decoded arguments spread out, not with a sequence of raw values.
    dynamic_vararg: bool = False
    #: ``@workflow.signal(description=...)``: shown by ``__temporal_workflow_metadata``
    #: (and so by Temporal's UI).
    description: str | None = None


@dataclass
class WorkflowDefinition:
    """A class decorated with ``@workflow.defn``."""

    name: str
    cls: type
    run_fn: Callable[..., Any]
    signals: dict[str | None, HandlerDefinition]
    queries: dict[str | None, HandlerDefinition]
    updates: dict[str | None, HandlerDefinition]
    init_takes_args: bool
    arg_types: list[Any]
    return_type: Any
    #: ``@workflow.defn(failure_exception_types=[...])``: exceptions (besides Temporal's
    #: failures) that fail the run, or the update, instead of the workflow task.
    failure_exception_types: tuple[type[BaseException], ...] = ()
    #: ``@workflow.defn(dynamic=True)``: runs every workflow type its worker has no
    #: definition of; its run method takes one ``Sequence[RawValue]``.
    dynamic: bool = False

    @staticmethod
    def of(cls_or_fn: Any) -> WorkflowDefinition:
        """The definition of a decorated class (or of its run method)."""
        defn = getattr(cls_or_fn, _WF_ATTR, None)
        if isinstance(defn, WorkflowDefinition):
            return defn
        raise InvalidArgumentError(
            f"{getattr(cls_or_fn, '__qualname__', cls_or_fn)!r} is not a workflow: decorate "
            "the class with @workflow.defn and its entry method with @workflow.run"
        )


@dataclass
class ActivityDefinition:
    """A function decorated with ``@activity.defn``."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    arg_types: list[Any]
    return_type: Any
    #: ``@activity.defn(no_thread_cancel_exception=True)``: a plain-function activity's
    #: heartbeat never raises the cancellation (it polls ``activity.is_cancelled()``).
    no_thread_cancel_exception: bool = False
    #: ``@activity.defn(dynamic=True)``: runs every activity type its worker has no
    #: definition of; it takes one ``Sequence[RawValue]``.
    dynamic: bool = False

    @staticmethod
    def of(fn: Any) -> ActivityDefinition:
        """The definition of a decorated function, or of what stands for one: a bound
        method whose function was decorated, an instance of a decorated callable class.
        Given such a stand-in, the definition calls it (its arguments exclude ``self``)."""
        defn = getattr(fn, _ACT_ATTR, None)
        if not isinstance(defn, ActivityDefinition):
            raise InvalidArgumentError(
                f"{getattr(fn, '__qualname__', fn)!r} is not an activity: decorate it with "
                "@activity.defn"
            )
        if fn is defn.fn or isinstance(fn, type):
            return defn
        arg_types, return_type = callable_hints(fn)
        return ActivityDefinition(
            name=defn.name,
            fn=fn,
            is_async=is_async_callable(fn),
            arg_types=arg_types,
            return_type=return_type,
            no_thread_cancel_exception=defn.no_thread_cancel_exception,
            dynamic=defn.dynamic,
        )


D = TypeVar("D", WorkflowDefinition, ActivityDefinition)


def find_definition(definitions: Mapping[str, D], type_name: str) -> D | None:
    """The definition a worker runs ``type_name`` with: the one registered for that name,
    else its dynamic one (as temporalio's worker), else None."""
    defn = definitions.get(type_name)
    if defn is not None and not defn.dynamic:
        return defn
    return next((d for d in definitions.values() if d.dynamic), None)


def check_one_dynamic(definitions: Mapping[str, D], new: D, what: str) -> None:
    """Refuse a second dynamic workflow or activity on one worker (temporalio does too)."""
    if new.dynamic and any(d.dynamic and d.name != new.name for d in definitions.values()):
        raise InvalidArgumentError(
            f"More than one dynamic {what}: a worker runs unknown types with at most one"
        )


def _is_raw_values(hint: Any) -> bool:
    return hint in (Sequence[RawValue], typing.Sequence[RawValue])


def check_dynamic_run(what: str, arg_types: list[Any]) -> None:
    """A dynamic workflow's run method or a dynamic activity takes one
    ``Sequence[RawValue]`` (annotated so), as temporalio requires."""
    if len(arg_types) != 1 or not _is_raw_values(arg_types[0]):
        raise InvalidArgumentError(
            f"Dynamic {what} must accept a single Sequence[engine.common.RawValue]"
        )


def check_dynamic_handler(
    kind: str, fn: Callable[..., Any], arg_types: list[Any], *, is_method: bool
) -> bool:
    """Check a dynamic handler's parameters as temporalio does: ``(name: str, args:
    Sequence[RawValue])``, after ``self`` for a method. True for the older signal or query
    form ``(name, *args)`` (allowed with a deprecation warning); an update may not use it."""
    params = list(inspect.signature(fn).parameters.values())[1 if is_method else 0 :]
    if (
        len(params) == 2
        and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        and params[1].kind is inspect.Parameter.VAR_POSITIONAL
    ):
        if kind == "update":
            raise InvalidArgumentError(
                "Dynamic updates do not support a vararg third param, use Sequence[RawValue]"
            )
        warnings.warn(
            f"Dynamic {kind}s with vararg third param is deprecated, use Sequence[RawValue]",
            DeprecationWarning,
            stacklevel=4,
        )
        return True
    if len(arg_types) != 2 or arg_types[0] is not str or not _is_raw_values(arg_types[1]):
        raise InvalidArgumentError(
            "Dynamic handler must have 3 arguments: self, str, and Sequence[RawValue] "
            "(a handler set at run time: str and Sequence[RawValue])"
        )
    return False


def is_async_callable(fn: Any) -> bool:
    """Whether calling ``fn`` (a function, bound method, class instance with ``__call__``,
    or a class whose instances are called) gives a coroutine."""
    if isinstance(fn, type):
        return inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )


def callable_hints(fn: Any) -> tuple[list[Any], Any]:
    """Argument and return hints of what a call of ``fn`` runs (``self`` left out)."""
    if isinstance(fn, type):
        return type_hints(fn.__call__, skip_self=True)  # type: ignore[operator]
    if inspect.isfunction(fn) or inspect.ismethod(fn):
        hints_of = fn.__func__ if inspect.ismethod(fn) else fn
        args, ret = type_hints(hints_of, skip_self=inspect.ismethod(fn))
        return args, ret
    call = type(fn).__call__
    return type_hints(call, skip_self=True)


def type_hints(fn: Callable[..., Any], *, skip_self: bool) -> tuple[list[Any], Any]:
    """Parameter and return type hints, for decoding payloads into dataclasses."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
    params = list(inspect.signature(fn).parameters.values())
    if skip_self and params:
        params = params[1:]
    args = [
        hints.get(p.name) for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return args, hints.get("return")


def set_workflow_definition(cls: type, defn: WorkflowDefinition) -> None:
    """Attach a definition to its class and run method."""
    setattr(cls, _WF_ATTR, defn)
    owner = defn.run_fn.__qualname__.rpartition(".")[0]
    if owner != cls.__qualname__ and hasattr(defn.run_fn, _WF_ATTR):
        return  # an inherited run method keeps naming the class that defined it
    try:
        setattr(defn.run_fn, _WF_ATTR, defn)
    except AttributeError:
        pass


def set_activity_definition(fn: Callable[..., Any], defn: ActivityDefinition) -> None:
    """Attach a definition to its function."""
    setattr(fn, _ACT_ATTR, defn)
