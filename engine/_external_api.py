"""``workflow.get_external_workflow_handle`` and its handle (``temporalio.workflow``'s
names), re-exported by :mod:`engine.workflow`: signals and cancel requests to other runs
from workflow code. The commands and their outcomes are in ``engine/_replay/other_runs.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ._model.decorators import handler_name
from ._model.limits import check_id


def _runtime() -> Any:
    from .workflow import _runtime as runtime

    return runtime()


class ExternalWorkflowHandle:
    """Another run, named by workflow id (and run id, or its latest open run), to signal or
    ask to cancel from workflow code (``workflow.get_external_workflow_handle(id)``).

    Both calls are recorded commands: they resolve once the other run has the signal or
    the request, and raise an :class:`~engine.exceptions.ApplicationError` of type
    ``ExternalWorkflowExecutionNotFound`` when it has no open run, as on Temporal."""

    def __init__(self, workflow_id: str, run_id: str | None = None) -> None:
        self._id = workflow_id
        self._run_id = run_id

    @property
    def id(self) -> str:
        """The other run's workflow id."""
        return self._id

    @property
    def run_id(self) -> str | None:
        """The other run's run id, if one was given."""
        return self._run_id

    async def signal(
        self,
        signal: Callable[..., Any] | str,
        arg: Any = inspect.Parameter.empty,
        *,
        args: Sequence[Any] = (),
        **_ignored: Any,
    ) -> None:
        """Send the signal (a handler method of the other workflow, or its name)."""
        values = [arg] if arg is not inspect.Parameter.empty else list(args)
        await _runtime().signal_external(
            self._id, self._run_id, handler_name(signal, "signal"), values
        )

    async def cancel(self, *, reason: str = "", **_ignored: Any) -> None:
        """Ask the other run to cancel (it sees a cancellation in its code)."""
        await _runtime().cancel_external(self._id, self._run_id, reason)


def get_external_workflow_handle(
    workflow_id: str, *, run_id: str | None = None
) -> ExternalWorkflowHandle:
    """A handle to signal or cancel another run from workflow code."""
    _runtime()  # only inside a workflow
    check_id(workflow_id, "workflow_id")
    if run_id is not None:
        check_id(run_id, "run_id")
    return ExternalWorkflowHandle(workflow_id, run_id)


def get_external_workflow_handle_for(
    workflow: Callable[..., Any], workflow_id: str, *, run_id: str | None = None
) -> ExternalWorkflowHandle:
    """:func:`get_external_workflow_handle`, typed by the other workflow's run method."""
    del workflow  # for type checkers only, as in temporalio
    return get_external_workflow_handle(workflow_id, run_id=run_id)
