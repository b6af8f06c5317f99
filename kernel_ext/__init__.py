"""Jupyter glue for durable-notebook (IPython and server extensions): see the Jupyter issue."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .kernel_session import Session

# --- IPython extension (kernel_ext/kernel.py, session.py, magics.py, display.py) --------
# ``%load_ext kernel_ext`` calls load_ipython_extension. IPython is imported lazily, so
# the Jupyter server can import this package without it.

__all__ = [
    "load_ipython_extension",
    "register",
    "session",
    "set_handle_view",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext kernel_ext``: a durable session with a background worker loop."""
    from .kernel import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext kernel_ext``: stop the kernel's workers and close its session."""
    from .kernel import unload_ipython_extension as unload

    unload(ipython)


def session() -> Session:
    """The kernel's durable session (after ``%load_ext kernel_ext``)."""
    from .kernel import session as current

    return current()


def register(*objs: Any, task_queue: str | None = None) -> Any:
    """Register cell-defined workflows and activities with the kernel's workers (also a
    decorator: ``@kernel_ext.register(task_queue="orders")``); see :func:`kernel.register`."""
    from .kernel import register as reg

    return reg(*objs, task_queue=task_queue)


def set_handle_view(factory: Any) -> None:
    """Display workflow handles with ``factory(handle)`` (the widgets hook); ``None`` resets."""
    from .kernel import set_handle_view as set_view

    set_view(factory)


# --- end of the IPython extension block ---------------------------------------------------


# --- Jupyter server extension (kernel_ext/server/) --------------------------------------
# Kept separate from the IPython extension above; jupyter_server imports this package and
# calls the function below. The server package is imported lazily so that the IPython
# extension does not pull in jupyter_server.


def _jupyter_server_extension_points() -> list[dict[str, object]]:
    """Entry point for jupyter_server: the app lives in ``kernel_ext.server``."""
    from .server.app import DurableExtension

    return [{"module": "kernel_ext", "app": DurableExtension}]


# --- end of the Jupyter server extension block -------------------------------------------
