"""IPython glue: loading the extension, picking up cell definitions, displaying handles.

Definitions take effect as their statement runs (an AST transformer adds a call after each
top-level ``class``/``def`` of a cell; a post_run_cell hook picks up the rest). The session
follows ``DURABLE_DATABASE_URL``: after each cell, in ``%durable``, in ``session()`` and in
``%load_ext kernel_ext`` run again, it moves to the database ``Client.connect()`` opens now.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Callable
from html import escape
from typing import Any, TypeVar, overload

from engine import WorkflowHandle

from . import display
from .kernel_session import Session, SessionMoveError, definition_kind

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
    """The kernel's durable session (after ``%load_ext kernel_ext``), on the database
    ``Client.connect()`` opens now: when ``DURABLE_DATABASE_URL`` changed, the session
    moves there first (raises :class:`SessionMoveError` if it cannot)."""
    if _session is None or _session.closed:
        raise RuntimeError("no durable session in this kernel: run %load_ext kernel_ext first")
    _follow_database(_session)
    return _session


def _follow_database(sess: Session, *, retry: bool = True) -> None:
    """Move ``sess`` to the database ``DURABLE_DATABASE_URL`` names now, saying so."""
    try:
        line = sess.follow_env(retry=retry)
    except SessionMoveError as err:
        err.reported = True  # raised to the caller, who shows it
        raise
    if line:
        print(line)


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
    Re-registering a workflow type replaces its definition; its open runs are replayed
    against the new code first, and a note says which ones it breaks (and where) and which
    are safe. Without ``task_queue``, the default queue ("notebook").
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
    if previous is not None and previous is not view:
        _retire(previous)
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


def _retire(view: Any) -> None:
    """A view the extension displayed is no longer wanted: stop its live refresh but keep
    its model, so the output stays visible (in a saved notebook too); ``close()`` only for
    objects that have no ``stop()``."""
    try:
        if callable(getattr(view, "stop", None)):
            view.stop()
        elif callable(getattr(view, "close", None)):
            view.close()
    except Exception as err:  # one view's trouble must not stop the others
        print(f"kernel_ext: could not stop a view: {err}", file=sys.stderr)


# -- definitions take effect as their statement runs ------------------------------------

_HOOK_MODULE = __name__
_DEFINED = "_cell_defined"
_LOAD_AGAIN = "_load_ext_again"


def _hook_call(function: str, *args: ast.expr) -> ast.Expr:
    """``__import__("kernel_ext.kernel", fromlist=[function]).function(*args)``: reachable
    from any cell without a name in the user's namespace."""
    module = ast.Call(
        func=ast.Name(id="__import__", ctx=ast.Load()),
        args=[ast.Constant(_HOOK_MODULE)],
        keywords=[
            ast.keyword(arg="fromlist", value=ast.List([ast.Constant(function)], ast.Load()))
        ],
    )
    call = ast.Call(
        func=ast.Attribute(value=module, attr=function, ctx=ast.Load()),
        args=list(args),
        keywords=[],
    )
    return ast.Expr(value=call)


def _is_load_ext_of_us(stmt: ast.stmt) -> bool:
    """``%load_ext kernel_ext``, as IPython turns it into Python."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "run_line_magic"):
        return False
    if not (isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name)):
        return False
    if func.value.func.id != "get_ipython" or len(call.args) != 2 or call.keywords:
        return False
    magic, line = call.args
    return (
        isinstance(magic, ast.Constant)
        and magic.value == "load_ext"
        and isinstance(line, ast.Constant)
        and isinstance(line.value, str)
        and line.value.strip() == "kernel_ext"
    )


def _callee_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class DefinitionHook(ast.NodeTransformer):
    """An IPython AST transformer: after each top-level ``class`` or ``def`` of a cell,
    a call registers what it defined, so a workflow or activity takes effect as its
    statement runs (the rest of the cell may await runs that need it). ``%load_ext
    kernel_ext`` run again (a notebook re-run from the top) is handed to the extension,
    which moves its session when ``DURABLE_DATABASE_URL`` changed."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        # A definition the cell passes to kernel_ext.register(...) itself is left to that
        # call (it names the task queue); without one, it goes where pick-up would put it.
        explicit = {
            arg.id
            for call in ast.walk(node)
            if isinstance(call, ast.Call) and _callee_name(call) == "register"
            for arg in call.args
            if isinstance(arg, ast.Name)
        }
        body: list[ast.stmt] = []
        for stmt in node.body:
            if _is_load_ext_of_us(stmt):
                body.append(ast.copy_location(_hook_call(_LOAD_AGAIN), stmt))
                continue
            body.append(stmt)
            if (
                isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and stmt.name not in explicit
            ):
                name = ast.Name(id=stmt.name, ctx=ast.Load())
                body.append(ast.copy_location(_hook_call(_DEFINED, name), stmt))
        node.body = body
        return node


_hook = DefinitionHook()


def _cell_defined(obj: object) -> None:
    """Called right after a cell's top-level definition: register it if it is a workflow
    or an activity (the post_run_cell pick-up then finds it seen, and stays quiet)."""
    sess = _session
    if sess is None or sess.closed or definition_kind(obj) is None:
        return
    try:
        line = sess.follow_env(retry=False)
    except SessionMoveError:  # the post_run_cell hook reports it; registering goes on
        line = None
    if line:
        print(line)
    try:
        notes = sess.pick_up({"": obj})
    except Exception as err:  # never break the cell over a registration problem
        print(
            f"kernel_ext: could not register {getattr(obj, '__qualname__', obj)!r}: {err}",
            file=sys.stderr,
        )
        return
    for note in notes:
        print(note)


def _load_ext_again(shell: Any = None) -> None:
    """``%load_ext kernel_ext`` in a cell run while the extension is loaded: instead of
    IPython's "already loaded", follow ``DURABLE_DATABASE_URL`` (the setup cell of a
    notebook run again may point it at a new database) and say where the session is."""
    shell = shell if shell is not None else _shell
    sess = _session
    loaded = shell is not None and "kernel_ext" in shell.extension_manager.loaded
    if not loaded or sess is None or sess.closed:
        if shell is not None:
            shell.run_line_magic("load_ext", "kernel_ext")
        return
    from IPython.core.error import UsageError

    try:
        line = sess.follow_env()
    except SessionMoveError as err:  # impossible: the cell fails here, saying what to do
        err.reported = True
        raise UsageError(f"%load_ext kernel_ext: {err}") from err
    print(line or f"kernel_ext is already loaded; its durable session uses {sess.database_url}")


def _post_run_cell(result: Any) -> None:
    if _session is None or _session.closed or _shell is None:
        return
    line = None
    try:
        line = _session.follow_env(retry=False)
    except SessionMoveError as err:  # once per failed move, not after every cell
        if not err.reported:
            err.reported = True
            print(f"kernel_ext: {err}", file=sys.stderr)
    if line:
        print(line)
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
    if _hook not in ipython.ast_transformers:
        ipython.ast_transformers.append(_hook)
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
    while _hook in ipython.ast_transformers:
        ipython.ast_transformers.remove(_hook)
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
        _retire(view)  # the outputs stay visible: the views stop, their models stay
    _shown.clear()
    if sess is not None:
        sess.close()
