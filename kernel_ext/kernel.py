"""IPython glue: loading the extension, picking up cell definitions, displaying handles."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from html import escape
from typing import Any, TypeVar, overload

from engine import WorkflowHandle

from . import display
from .kernel_session import Session

__all__ = [
    "load_ipython_extension",
    "register",
    "session",
    "set_handle_view",
    "unload_ipython_extension",
]

T = TypeVar("T")

_session: Session | None = None
_shell: Any = None
_handle_view: display.HandleView | None = None
_view_chosen = False  # set_handle_view() was called: keep the user's choice
#: The view last displayed for each run (closed when the run is displayed again).
_shown: dict[tuple[str, str | None], Any] = {}


def session() -> Session:
    """The kernel's durable session (after ``%load_ext kernel_ext``)."""
    if _session is None or _session.closed:
        raise RuntimeError("no durable session in this kernel: run %load_ext kernel_ext first")
    return _session


@overload
def register(*, task_queue: str | None = None) -> Callable[[T], T]: ...


@overload
def register(obj: T, /, *, task_queue: str | None = None) -> T: ...


@overload
def register(
    obj: object, obj2: object, /, *more: object, task_queue: str | None = None
) -> None: ...


def register(*objs: Any, task_queue: str | None = None) -> Any:
    """Register workflow classes and activity functions with the kernel's worker(s).

    ``kernel_ext.register(Order, charge, task_queue="orders")``, or as a decorator above
    ``@workflow.defn`` / ``@activity.defn``: ``@kernel_ext.register(task_queue="orders")``.
    Re-registering a type name replaces its definition and prints which open runs will
    replay against the new code. Without ``task_queue``, the default queue ("notebook").
    """
    if not objs:

        def decorate(obj: T) -> T:
            register(obj, task_queue=task_queue)
            return obj

        return decorate
    for note in session().register(objs, task_queue=task_queue):
        print(note)
    return objs[0] if len(objs) == 1 else None


def set_handle_view(factory: display.HandleView | None) -> None:
    """Show workflow handles through ``factory(handle)`` (e.g. a live history widget)
    instead of the built-in text and HTML summary; ``None`` restores the summary."""
    global _handle_view, _view_chosen
    _handle_view, _view_chosen = factory, True
    if _shell is not None:
        _install_view(_shell)


def _default_view() -> display.HandleView | None:
    """The live history widget, when the widgets' dependencies are installed."""
    try:
        from widgets import HistoryView
    except ImportError:  # ipywidgets / anywidget missing: the text and HTML summary
        return None
    return HistoryView  # type: ignore[no-any-return]


def _install_view(ipython: Any) -> None:
    # IPython's ipython_display formatter takes over whenever a type is registered with
    # it, so it is registered only while a view is set.
    formatter = ipython.display_formatter.ipython_display_formatter
    if _active_view() is None:
        formatter.pop(WorkflowHandle, None)
    else:
        formatter.for_type(WorkflowHandle, _rich)


def _describe(handle: WorkflowHandle) -> Any:
    # The handle's own client belongs to the kernel's loop: ask through the session's.
    return session().describe(handle.id, handle.run_id or handle.result_run_id)


def _plain(handle: WorkflowHandle, printer: Any, cycle: bool) -> None:
    try:
        printer.text(display.handle_text(_describe(handle)))
    except Exception as err:  # a display must never raise: fall back to the repr
        printer.text(f"{handle!r} (status unavailable: {err})")


def _html(handle: WorkflowHandle) -> str | None:
    try:
        return display.handle_html(_describe(handle))
    except Exception:
        return None


def _rich(handle: WorkflowHandle) -> None:
    """The extension point: when a handle view is set, display it instead.

    The default view (the live history widget) needs a front end that renders widgets:
    in a terminal IPython it is skipped. A view that fails falls back to the summary,
    with the reason. Showing the same run again closes the view shown before, so
    re-running a cell does not leave refreshes behind.
    """
    from IPython.display import display as ipy_display

    factory = _active_view()
    if factory is None:
        _publish_summary(handle)
        return
    try:
        view = factory(handle)
    except Exception as err:  # a display must never raise: the summary, and why
        _publish_summary(handle, note=f"(the live view is unavailable: {err})")
        return
    key = (handle.id, handle.run_id or handle.result_run_id)
    previous = _shown.pop(key, None)
    if previous is not None and previous is not view and hasattr(previous, "close"):
        previous.close()
    _shown[key] = view
    ipy_display(view)  # type: ignore[no-untyped-call]


def _active_view() -> display.HandleView | None:
    """The view handles show through: the one set, or the default live view when a front
    end that renders widgets is there; None for the summary."""
    if _handle_view is None or (not _view_chosen and not _has_widget_frontend()):
        return None
    return _handle_view


def _has_widget_frontend() -> bool:
    # A kernel (ipykernel) talks to a front end that can render widgets; a terminal
    # shell has no kernel.
    return getattr(_shell, "kernel", None) is not None


def _publish_summary(handle: WorkflowHandle, note: str = "") -> None:
    from IPython.display import display as ipy_display

    try:
        desc = _describe(handle)
    except Exception as err:
        ipy_display({"text/plain": f"{handle!r} (status unavailable: {err})"}, raw=True)  # type: ignore[no-untyped-call]
        return
    text = display.handle_text(desc) + (f"\n{note}" if note else "")
    html = display.handle_html(desc) + (f"<p>{escape(note)}</p>" if note else "")
    ipy_display({"text/plain": text, "text/html": html}, raw=True)  # type: ignore[no-untyped-call]


def _post_run_cell(result: Any) -> None:
    if _session is None or _session.closed or _shell is None:
        return
    try:
        notes = _session.pick_up(_shell.user_ns)
    except Exception as err:  # never break the cell over a registration problem
        print(f"kernel_ext: could not register the cell's definitions: {err}", file=sys.stderr)
        return
    for note in notes:
        print(note)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kernel_ext``: connect to the store, start the background loop, add
    ``%durable``, pick up cell definitions after each cell, and display handles."""
    global _session, _shell, _handle_view
    if _session is not None and not _session.closed:
        return
    from .magics import DurableMagics

    if not _view_chosen:
        _handle_view = _default_view()
    _session = Session(os.environ.get("DURABLE_DATABASE_URL") or None)
    _shell = ipython
    ipython.register_magics(DurableMagics(ipython, _session))
    ipython.events.register("post_run_cell", _post_run_cell)
    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].for_type(WorkflowHandle, _plain)
    formatters["text/html"].for_type(WorkflowHandle, _html)
    _install_view(ipython)
    _session.pick_up(ipython.user_ns)  # definitions made before the extension was loaded


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext kernel_ext``: stop the workers, close the session, remove the hooks."""
    global _session, _shell, _handle_view, _view_chosen
    try:
        ipython.events.unregister("post_run_cell", _post_run_cell)
    except ValueError:
        pass
    ipython.magics_manager.magics["line"].pop("durable", None)
    fmt = ipython.display_formatter
    for formatter in (
        fmt.formatters["text/plain"],
        fmt.formatters["text/html"],
        fmt.ipython_display_formatter,
    ):
        formatter.pop(WorkflowHandle, None)
    sess, _session, _shell = _session, None, None
    _handle_view, _view_chosen = None, False
    for view in list(_shown.values()):
        if hasattr(view, "close"):
            view.close()
    _shown.clear()
    if sess is not None:
        sess.close()
