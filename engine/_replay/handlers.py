"""Messages into a running workflow: signals, queries and updates (a mixin of the instance)."""

from __future__ import annotations

import asyncio
import linecache
import logging
import os
from collections.abc import Callable
from typing import Any

from .._model import commands as cmd
from .._model.definitions import WorkflowDefinition
from ..converter import DataConverter
from ..exceptions import (
    ApplicationError,
    CancelledError,
    FailureError,
    InvalidArgumentError,
)
from .jobs import DoUpdate, SignalWorkflow

log = logging.getLogger("engine.workflow")
JsonDict = dict[str, Any]


class WorkflowTaskError(Exception):
    """Workflow code raised something that is not a workflow failure: fail the task."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


class MessageHandlers:
    """Signal, query and update handling of :class:`~engine._replay.instance.WorkflowInstance`."""

    defn: WorkflowDefinition
    converter: DataConverter
    workflow_id: str
    _object: Any
    _commands: list[cmd.Command]
    _handlers_running: int
    _callback_error: BaseException | None
    _handler_failure: FailureError | None
    _rejections: list[tuple[str, JsonDict]]

    create_task: Callable[..., asyncio.Task[Any]]  # the event loop's

    # -- updates ------------------------------------------------------------------------

    def take_rejections(self) -> list[tuple[str, JsonDict]]:
        """Updates the validators refused in the last activation: (update id, failure)."""
        rejections, self._rejections = self._rejections, []
        return rejections

    def _apply_do_update(self, job: DoUpdate) -> None:
        update_id, name = job.update_id, job.name
        replaying = job.replay
        handler = self.defn.updates.get(name) or self.defn.updates.get(None)
        if handler is None:
            known = ", ".join(sorted(n for n in self.defn.updates if n)) or "none"
            err = ApplicationError(
                f"workflow {self.defn.name} has no update handler {name!r} (it has: {known})",
                type="UnknownUpdate",
            )
            if replaying:
                raise WorkflowTaskError(err)
            self._rejections.append((update_id, self.converter.to_failure(err)))
            return
        payloads = job.input
        if handler.name is None:
            args = [name, *self.converter.from_payloads_json(payloads, None)]
        else:
            args = self.converter.from_payloads_json(payloads, handler.arg_types)
        if not replaying and handler.validator is not None:
            try:
                handler.validator(self._object, *args)
            except Exception as err:  # refused before anything is recorded
                self._rejections.append((update_id, self.converter.to_failure(err)))
                return
        self._commands.append(cmd.AcceptUpdate(update_id, name, list(payloads), job.identity))
        bound = getattr(self._object, handler.fn.__name__)
        self._handlers_running += 1
        if handler.is_async:
            task = self.create_task(bound(*args), name=f"update:{name}")
            task.add_done_callback(lambda t: self._update_done(update_id, t))
            return
        try:
            value = bound(*args)
        except FailureError as err:
            self._finish_update(update_id, None, err)
        except Exception as err:
            raise WorkflowTaskError(err) from err
        else:
            self._finish_update(update_id, value, None)

    def _update_done(self, update_id: str, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self._finish_update(update_id, None, CancelledError("update handler cancelled"))
            return
        exc = task.exception()
        if exc is None:
            self._finish_update(update_id, task.result(), None)
        elif isinstance(exc, FailureError):
            self._finish_update(update_id, None, exc)
        else:
            self._handlers_running -= 1
            self._callback_error = exc  # not a failure: the workflow task fails

    def _finish_update(self, update_id: str, value: Any, err: BaseException | None) -> None:
        self._handlers_running -= 1
        if err is not None:
            self._commands.append(
                cmd.CompleteUpdate(update_id, failure=self.converter.to_failure(err))
            )
        else:
            self._commands.append(
                cmd.CompleteUpdate(update_id, result=self.converter.to_payloads_json([value]))
            )

    # -- queries ------------------------------------------------------------------------

    def query(self, name: str, payloads: list[JsonDict] | None) -> list[JsonDict]:
        """Run a query handler against the current state; return the encoded result.

        Two queries every run answers, as on Temporal: ``__stack_trace`` (where each of the
        run's coroutines waits, file and line: "where is my workflow stuck?") and
        ``__temporal_workflow_metadata`` (its query, signal and update handlers and its
        current details)."""
        if name == STACK_TRACE_QUERY:
            return self.converter.to_payloads_json([self.stack_trace()])
        if name == METADATA_QUERY:
            return self.converter.to_payloads_json([self.workflow_metadata()])
        handler = self.defn.queries.get(name) or self.defn.queries.get(None)
        if handler is None:
            known = ", ".join(sorted(n for n in self.defn.queries if n)) or "none"
            raise InvalidArgumentError(
                f"workflow {self.defn.name} has no query handler {name!r} (it has: {known})"
            )
        if handler.is_async:
            raise InvalidArgumentError(
                f"query handler {name!r} of {self.defn.name} is 'async def': query handlers "
                "must be plain methods that only read state"
            )
        if handler.name is None:
            args = [name, *self.converter.from_payloads_json(payloads, None)]
        else:
            args = self.converter.from_payloads_json(payloads, handler.arg_types)
        bound = getattr(self._object, handler.fn.__name__)
        previous = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(self)  # type: ignore[arg-type]
        try:
            value = bound(*args)
        finally:
            asyncio.events._set_running_loop(previous)
        return self.converter.to_payloads_json([value])

    def stack_trace(self) -> str:
        """Every unfinished coroutine of the run, with the user-code lines it waits on."""
        tasks = [t for t in asyncio.all_tasks(self) if not t.done()]  # type: ignore[arg-type]
        main = getattr(self, "_main", None)
        tasks.sort(key=lambda t: (t is not main, t.get_name()))
        return "\n\n".join(_task_stack(t, t is main) for t in tasks)

    def workflow_metadata(self) -> JsonDict:
        """``__temporal_workflow_metadata``: Temporal's ``WorkflowMetadata`` as JSON."""

        def named(handlers: dict[str | None, Any], builtin: tuple[str, ...] = ()) -> list[JsonDict]:
            names = sorted(n for n in handlers if n) + list(builtin)
            return [{"name": n} for n in names]

        definition: JsonDict = {
            "type": self.defn.name,
            "queryDefinitions": named(self.defn.queries, (STACK_TRACE_QUERY, METADATA_QUERY)),
            "signalDefinitions": named(self.defn.signals),
            "updateDefinitions": named(self.defn.updates),
        }
        metadata: JsonDict = {"definition": definition}
        details = self.current_details()  # type: ignore[attr-defined]
        if details:
            metadata["currentDetails"] = details
        return metadata

    # -- signals ------------------------------------------------------------------------

    def _apply_signal_workflow(self, job: SignalWorkflow) -> None:
        name, payloads = job.signal_name, job.input
        handler = self.defn.signals.get(name) or self.defn.signals.get(None)
        if handler is None:
            log.warning(
                "workflow %s (%s) has no signal handler %r; the signal is dropped",
                self.workflow_id,
                self.defn.name,
                name,
            )
            return
        hints = handler.arg_types
        if handler.name is None:
            args = [name, *self.converter.from_payloads_json(payloads, None)]
        else:
            args = self.converter.from_payloads_json(payloads, hints)
        bound = getattr(self._object, handler.fn.__name__)
        if handler.is_async:
            self._handlers_running += 1
            task = self.create_task(bound(*args), name=f"signal:{name}")
            task.add_done_callback(self._handler_done)
        else:
            try:
                bound(*args)
            except FailureError as err:
                self._handler_failure = err  # fails the run, as from the main method
            except Exception as err:
                raise WorkflowTaskError(err) from err

    def _handler_done(self, task: asyncio.Task[Any]) -> None:
        self._handlers_running -= 1
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            assert exc is not None
            if isinstance(exc, FailureError):
                self._handler_failure = exc  # a failure in a handler fails the run
            else:
                self._callback_error = exc


STACK_TRACE_QUERY = "__stack_trace"
METADATA_QUERY = "__temporal_workflow_metadata"


def _task_stack(task: asyncio.Task[Any], is_main: bool) -> str:
    """A task's user-code frames, outermost first, each with its source line."""
    title = "the workflow's run method" if is_main else f"task {task.get_name()}"
    lines = [f"{title} waits at (most recent call last):"]
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        code = frame.f_code
        if not code.co_filename.startswith(_INTERNAL_DIRS):
            source = linecache.getline(code.co_filename, frame.f_lineno).strip()
            lines.append(f'  File "{code.co_filename}", line {frame.f_lineno}, in {code.co_name}')
            if source:
                lines.append(f"    {source}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return "\n".join(lines)


#: Frames of the engine and of asyncio are left out of stack traces: they are the same in
#: every run and say nothing about the workflow's code.
_INTERNAL_DIRS = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep,
)
