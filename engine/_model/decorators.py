"""The workflow decorators (``@workflow.defn``, ``run``, ``init``, ``signal``, ``query``,
``update``) and the names they give, re-exported by :mod:`engine.workflow`: they build the
definitions of this package from user classes and touch no running workflow."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, overload

from ..exceptions import InvalidArgumentError
from .definitions import (
    ActivityDefinition,
    HandlerDefinition,
    HandlerUnfinishedPolicy,
    WorkflowDefinition,
    check_dynamic_handler,
    check_dynamic_run,
    set_workflow_definition,
    type_hints,
)
from .limits import check_id

C = TypeVar("C", bound=type)
F = TypeVar("F", bound=Callable[..., Any])

_RUN = "__durable_run__"
_INIT = "__durable_init__"
_HANDLER = "__durable_handler__"


@overload
def defn(cls: C) -> C: ...


@overload
def defn(
    *,
    name: str | None = None,
    sandboxed: bool = True,
    dynamic: bool = False,
    failure_exception_types: Sequence[type[BaseException]] = (),
) -> Callable[[C], C]: ...


def defn(
    cls: C | None = None,
    *,
    name: str | None = None,
    sandboxed: bool = True,
    dynamic: bool = False,
    failure_exception_types: Sequence[type[BaseException]] = (),
) -> C | Callable[[C], C]:
    """Mark a class as a workflow definition. ``name`` defaults to the class name.

    ``dynamic=True`` (``name`` is then ignored, as in temporalio) makes it the workflow
    its worker runs for every type it has no definition of: the run method takes one
    ``Sequence[RawValue]`` and ``workflow.info().workflow_type`` says which type it runs.
    ``failure_exception_types``: exception types that, raised out of the workflow's code,
    fail the run (or, out of an update handler, the update) instead of failing the workflow
    task and retrying it, as in temporalio (``[Exception]`` fails the run on any error).
    ``sandboxed`` is accepted for compatibility and ignored: there is no import sandbox;
    determinism is enforced by the event loop and by replay.
    """
    types = tuple(failure_exception_types)
    for t in types:
        if not (isinstance(t, type) and issubclass(t, BaseException)):
            raise InvalidArgumentError(
                f"failure_exception_types takes exception classes, not {t!r}"
            )

    def decorate(c: C) -> C:
        _build_definition(c, c.__name__ if dynamic else (name or c.__name__), dynamic, types)
        return c

    return decorate(cls) if cls is not None else decorate


def _build_definition(
    cls: type,
    name: str,
    dynamic: bool = False,
    failure_exception_types: tuple[type[BaseException], ...] = (),
) -> None:
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
    if dynamic:
        check_dynamic_run("workflow", arg_types)
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
            dynamic=dynamic,
            failure_exception_types=failure_exception_types,
        ),
    )


def run(fn: F) -> F:
    """Mark the workflow's entry method (``async def``)."""
    setattr(fn, _RUN, True)
    return fn


def init(init_fn: F) -> F:
    """Mark ``__init__`` as taking the workflow's arguments too."""
    setattr(init_fn, _INIT, True)
    return init_fn


def _handler_decorator(kind: str) -> Callable[..., Any]:
    def decorator(
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        dynamic: bool = False,
        unfinished_policy: HandlerUnfinishedPolicy = HandlerUnfinishedPolicy.WARN_AND_ABANDON,
        description: str | None = None,
        **_ignored: Any,
    ) -> Any:
        def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
            handler_name = None if dynamic else (name or f.__name__)
            arg_types, _ = type_hints(f, skip_self=True)
            vararg = dynamic and check_dynamic_handler(kind, f, arg_types, is_method=True)
            handler = HandlerDefinition(
                name=handler_name,
                fn=f,
                is_async=inspect.iscoroutinefunction(f),
                kind=kind,
                arg_types=arg_types,
                unfinished_policy=HandlerUnfinishedPolicy(unfinished_policy),
                dynamic_vararg=vararg,
                description=description,
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
    defn = WorkflowDefinition.of(fn_or_cls)
    if defn.dynamic:
        raise InvalidArgumentError(
            f"{defn.name} is a dynamic workflow: it has no type of its own; start or call "
            "the workflow by its type name (a string)"
        )
    return defn.name


def activity_name(fn: Any) -> str:
    """The activity type name of an activity function, or a string as is."""
    if isinstance(fn, str):
        return fn
    defn = ActivityDefinition.of(fn)
    if defn.dynamic:
        raise InvalidArgumentError(
            f"{defn.name} is a dynamic activity: it has no type of its own; call the "
            "activity by its type name (a string)"
        )
    return defn.name


def handler_name(fn: Any, kind: str) -> str:
    """The signal/query/update name of a handler method, or a string as is (checked:
    at most 1,000 bytes in UTF-8, storable text)."""
    if isinstance(fn, str):
        return check_id(fn, f"the {kind} name")
    handler = getattr(fn, _HANDLER, None)
    if isinstance(handler, HandlerDefinition) and handler.kind == kind and handler.name:
        return handler.name
    raise InvalidArgumentError(
        f"{getattr(fn, '__qualname__', fn)!r} is not a @workflow.{kind} handler"
    )
