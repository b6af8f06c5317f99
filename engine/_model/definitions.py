"""Workflow and activity definitions: what the decorators collect from user code."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import InvalidArgumentError

_WF_ATTR = "__durable_workflow_definition__"
_ACT_ATTR = "__durable_activity_definition__"


@dataclass
class HandlerDefinition:
    """A signal, query or update handler of a workflow class."""

    name: str | None  # None for a dynamic handler
    fn: Callable[..., Any]
    is_async: bool
    kind: str  # "signal" | "query" | "update"
    validator: Callable[..., Any] | None = None
    arg_types: list[Any] = field(default_factory=list)


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
        )


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
