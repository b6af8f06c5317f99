"""Workflow code's calls that set and read its message handlers at run time (temporalio's
``workflow.set_signal_handler`` and its kin), re-exported by :mod:`engine.workflow`.

Each is a one-line delegation to the running workflow's runtime, which keeps the run's
handler tables (:class:`engine._replay.handlers.MessageHandlers`). A name of None stands
for the dynamic handler; a handler of None removes one. Handlers set here are plain
callables: they are called as they are, without the workflow object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

__all__ = [
    "get_dynamic_query_handler",
    "get_dynamic_signal_handler",
    "get_dynamic_update_handler",
    "get_query_handler",
    "get_signal_handler",
    "get_update_handler",
    "set_dynamic_query_handler",
    "set_dynamic_signal_handler",
    "set_dynamic_update_handler",
    "set_query_handler",
    "set_signal_handler",
    "set_update_handler",
]


class _HandlerRuntime(Protocol):
    def get_handler(self, kind: str, name: str | None) -> Callable[..., Any] | None: ...

    def set_handler(
        self,
        kind: str,
        name: str | None,
        fn: Callable[..., Any] | None,
        validator: Callable[..., Any] | None = None,
    ) -> None: ...


def _runtime() -> _HandlerRuntime:
    from . import workflow  # imported here: engine.workflow imports this module

    return cast(_HandlerRuntime, workflow._runtime())


def get_signal_handler(name: str) -> Callable[..., Any] | None:
    """The signal handler for ``name`` (decorated or set at run time), or None; never the
    dynamic one."""
    return _runtime().get_handler("signal", name)


def set_signal_handler(name: str, handler: Callable[..., Any] | None) -> None:
    """Set the signal handler for ``name``, replacing any (a decorated one too); None
    removes it. Signals of that name that came while no handler took them are handed to
    it now, in the order they came."""
    _runtime().set_handler("signal", name, handler)


def get_dynamic_signal_handler() -> Callable[..., Any] | None:
    """The dynamic signal handler (decorated or set at run time), or None."""
    return _runtime().get_handler("signal", None)


def set_dynamic_signal_handler(handler: Callable[..., Any] | None) -> None:
    """Set the dynamic signal handler, called as ``handler(name, args)`` with ``args`` a
    sequence of :class:`~engine.common.RawValue`; None removes it. Every signal that came
    while no handler took it is handed to it now."""
    _runtime().set_handler("signal", None, handler)


def get_query_handler(name: str) -> Callable[..., Any] | None:
    """The query handler for ``name``, or None; never the dynamic one."""
    return _runtime().get_handler("query", name)


def set_query_handler(name: str, handler: Callable[..., Any] | None) -> None:
    """Set the query handler for ``name``, replacing any; None removes it."""
    _runtime().set_handler("query", name, handler)


def get_dynamic_query_handler() -> Callable[..., Any] | None:
    """The dynamic query handler, or None."""
    return _runtime().get_handler("query", None)


def set_dynamic_query_handler(handler: Callable[..., Any] | None) -> None:
    """Set the dynamic query handler (``handler(name, args)``, raw values); None removes it."""
    _runtime().set_handler("query", None, handler)


def get_update_handler(name: str) -> Callable[..., Any] | None:
    """The update handler for ``name``, or None; never the dynamic one."""
    return _runtime().get_handler("update", name)


def set_update_handler(
    name: str, handler: Callable[..., Any] | None, *, validator: Callable[..., Any] | None = None
) -> None:
    """Set the update handler for ``name``, replacing any, with an optional ``validator``
    (a plain function, not ``async def``, called with the same arguments before the
    update is accepted); None removes it. An update is looked up when its own task runs,
    so a handler set at the top of the run method serves updates of the first task."""
    _runtime().set_handler("update", name, handler, validator)


def get_dynamic_update_handler() -> Callable[..., Any] | None:
    """The dynamic update handler, or None."""
    return _runtime().get_handler("update", None)


def set_dynamic_update_handler(
    handler: Callable[..., Any] | None, *, validator: Callable[..., Any] | None = None
) -> None:
    """Set the dynamic update handler (``handler(name, args)``, raw values), with an
    optional ``validator`` taking the same; None removes it."""
    _runtime().set_handler("update", None, handler, validator)
