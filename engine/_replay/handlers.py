"""Messages into a running workflow: signals, queries and updates (a mixin of the instance)."""

from __future__ import annotations

import asyncio
import inspect
import json
import linecache
import logging
import os
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

from .. import workflow
from .._model import commands as cmd
from .._model.definitions import (
    HandlerDefinition,
    HandlerUnfinishedPolicy,
    WorkflowDefinition,
    callable_hints,
    check_dynamic_handler,
    is_async_callable,
)
from ..common import RawValue
from ..converter import DataConverter
from ..exceptions import (
    CancelledError,
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
    _handler_failure: BaseException | None
    is_failure_exception: Callable[[BaseException], bool]
    _rejections: list[tuple[str, JsonDict]]
    #: Handlers running now, for the unfinished-handler warnings: update id -> (name,
    #: policy); a signal's number in this run -> (name, policy).
    _running_updates: dict[str, tuple[str, HandlerUnfinishedPolicy]]
    _running_signals: dict[int, tuple[str, HandlerUnfinishedPolicy]]
    _signal_seq: int
    _info: workflow.Info | None
    #: The run's handlers by name (None: the dynamic one): its class's at first, then as
    #: workflow code sets and removes them (``workflow.set_signal_handler``, ...).
    _signals: dict[str | None, HandlerDefinition]
    _queries: dict[str | None, HandlerDefinition]
    _updates: dict[str | None, HandlerDefinition]
    #: Signals that came when no handler could take them, by name, in their order: given
    #: to the handler set for them later (temporalio buffers them the same way).
    _buffered_signals: dict[str, list[SignalWorkflow]]

    create_task: Callable[..., asyncio.Task[Any]]  # the event loop's

    def __init__(self) -> None:
        self._signals = dict(self.defn.signals)
        self._queries = dict(self.defn.queries)
        self._updates = dict(self.defn.updates)
        self._buffered_signals = {}
        super().__init__()

    # -- handlers set at run time ---------------------------------------------------------

    def _table(self, kind: str) -> dict[str | None, HandlerDefinition]:
        return {"signal": self._signals, "query": self._queries, "update": self._updates}[kind]

    def get_handler(self, kind: str, name: str | None) -> Callable[..., Any] | None:
        """The ``kind`` handler for ``name`` (None: the dynamic one), bound to the workflow
        object if it is a method; None when there is none (no fallback to the dynamic one
        for a name, as in temporalio)."""
        handler = self._table(kind).get(name)
        return None if handler is None else self._callable(handler)

    def set_handler(
        self,
        kind: str,
        name: str | None,
        fn: Callable[..., Any] | None,
        validator: Callable[..., Any] | None = None,
    ) -> None:
        """Set (``fn`` None: remove) the ``kind`` handler for ``name`` (None: the dynamic
        one), replacing a decorated one. Setting a signal handler hands it, in order, the
        buffered signals it takes: those of its name, or all of them for a dynamic one."""
        table = self._table(kind)
        if fn is None:
            table.pop(name, None)
            return
        if validator is not None and inspect.iscoroutinefunction(validator):
            raise ValueError("Update validator must not be an async function")
        arg_types, _ = callable_hints(fn)
        handler = HandlerDefinition(
            name=name,
            fn=fn,
            is_async=is_async_callable(fn),
            kind=kind,
            validator=validator,
            arg_types=arg_types,
            is_method=False,
            dynamic_vararg=name is None
            and check_dynamic_handler(kind, fn, arg_types, is_method=False),
        )
        table[name] = handler
        if kind != "signal":
            return
        if name is not None:
            buffered = self._buffered_signals.pop(name, [])
        else:
            buffered = [job for jobs in self._buffered_signals.values() for job in jobs]
            self._buffered_signals.clear()
        for job in buffered:
            self._deliver_signal(handler, job)

    def _callable(self, handler: HandlerDefinition) -> Callable[..., Any]:
        if not handler.is_method:
            return handler.fn
        return getattr(self._object, handler.fn.__name__)  # type: ignore[no-any-return]

    def _handler_args(
        self, handler: HandlerDefinition, name: str, payloads: list[JsonDict] | None
    ) -> list[Any]:
        """A handler's arguments: decoded by its hints; for a dynamic one the name and the
        arguments as raw values (or spread out, decoded, for the older ``*args`` form)."""
        if handler.name is not None:
            return self.converter.from_payloads_json(payloads, handler.arg_types)
        if handler.dynamic_vararg:
            return [name, *self.converter.from_payloads_json(payloads, handler.arg_types[1:])]
        raw = self.converter.from_payloads_json(payloads, [RawValue] * len(payloads or []))
        return [name, raw]

    def start_args(self, payloads: list[JsonDict] | None) -> list[Any]:
        """The run method's arguments: decoded by its hints, or for a dynamic workflow one
        sequence of raw values."""
        if not self.defn.dynamic:
            return self.converter.from_payloads_json(payloads, self.defn.arg_types)
        return [self.converter.from_payloads_json(payloads, [RawValue] * len(payloads or []))]

    # -- updates ------------------------------------------------------------------------

    def take_rejections(self) -> list[tuple[str, JsonDict]]:
        """Updates the validators refused in the last activation: (update id, failure)."""
        rejections, self._rejections = self._rejections, []
        return rejections

    def _apply_do_update(self, job: DoUpdate) -> None:
        # As in temporalio, everything happens in the update's own task, so its accepted
        # and completed events are ordered among the commands of the run's other tasks as
        # Temporal records them: the completion straight after the handler returns,
        # before code that the return unblocks runs.
        self._handlers_running += 1
        self.create_task(self._run_update(job), name=f"update:{job.name}")

    async def _run_update(self, job: DoUpdate) -> None:
        update_id, name = job.update_id, job.name
        workflow._current_update_info.set(workflow.UpdateInfo(update_id, name))
        accepted = False
        try:
            handler = self._updates.get(name) or self._updates.get(None)
            if handler is None:
                known = " ".join(sorted(n for n in self._updates if n))
                raise RuntimeError(
                    f"workflow {self.defn.name} has no update handler {name!r} and no "
                    f"dynamic one (its update handlers: [{known}])"
                )
            self._running_updates[update_id] = (name, handler.unfinished_policy)
            args = self._handler_args(handler, name, job.input)
            if not job.replay and handler.validator is not None:
                if handler.is_method:
                    handler.validator(self._object, *args)
                else:
                    handler.validator(*args)
                # Decoded again, so a validator that changed them cannot make the handler
                # see other arguments than on replay (where no validator runs).
                args = self._handler_args(handler, name, job.input)
            self._commands.append(cmd.AcceptUpdate(update_id, name, list(job.input), job.identity))
            accepted = True
            value = self._callable(handler)(*args)
            if handler.is_async:
                value = await value
            self._commands.append(
                cmd.CompleteUpdate(
                    update_id, result=self.converter.to_payloads_json([value]), name=name
                )
            )
        except (Exception, asyncio.CancelledError) as err:
            if isinstance(err, asyncio.CancelledError):
                err = CancelledError(f"update {name!r} was cancelled")
            if not accepted:
                if job.replay:  # the recorded run accepted it: this code does not
                    self._callback_error = err
                else:  # refused before anything is recorded
                    self._rejections.append((update_id, self.converter.to_failure(err)))
            elif self.is_failure_exception(err):
                self._commands.append(
                    cmd.CompleteUpdate(update_id, failure=self.converter.to_failure(err), name=name)
                )
            else:
                self._callback_error = err  # not a failure: the workflow task fails
        except workflow.ContinueAsNewError:
            # Only the run method and signal handlers may continue as new (as temporalio).
            self._callback_error = RuntimeError(
                f"update handler {name!r} called continue_as_new: continue as new from the "
                "run method or a signal handler, not from an update handler"
            )
        finally:
            self._handlers_running -= 1
            self._running_updates.pop(update_id, None)

    def warn_unfinished_handlers(self) -> None:
        """The run closes: warn about handlers still running whose policy says so."""
        if not self._running_updates and not self._running_signals:
            return
        updates = [
            {"name": name, "id": update_id}
            for update_id, (name, policy) in self._running_updates.items()
            if policy == HandlerUnfinishedPolicy.WARN_AND_ABANDON
        ]
        if updates:
            warnings.warn(
                workflow.UnfinishedUpdateHandlersWarning(
                    f"[TMPRL1102] workflow {self.workflow_id} ({self.defn.name}) closed with "
                    f"update handlers still running: {json.dumps(updates)}. Their callers "
                    "get an error, not a result. Wait for them before returning (await "
                    "workflow.wait_condition(workflow.all_handlers_finished)), or pass "
                    "unfinished_policy=HandlerUnfinishedPolicy.ABANDON to @workflow.update "
                    "if abandoning them is intended."
                ),
                stacklevel=2,
            )
        signals = Counter(
            name
            for name, policy in self._running_signals.values()
            if policy == HandlerUnfinishedPolicy.WARN_AND_ABANDON
        )
        if signals:
            listed = [{"name": n, "count": c} for n, c in signals.most_common()]
            warnings.warn(
                workflow.UnfinishedSignalHandlersWarning(
                    f"[TMPRL1102] workflow {self.workflow_id} ({self.defn.name}) closed with "
                    f"signal handlers still running: {json.dumps(listed)}. Wait for them "
                    "before returning (await workflow.wait_condition("
                    "workflow.all_handlers_finished)), or pass unfinished_policy="
                    "HandlerUnfinishedPolicy.ABANDON to @workflow.signal if abandoning them "
                    "is intended."
                ),
                stacklevel=2,
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
        handler = self._queries.get(name) or self._queries.get(None)
        if handler is None:
            known = ", ".join(sorted(n for n in self._queries if n)) or "none"
            raise InvalidArgumentError(
                f"workflow {self.defn.name} has no query handler {name!r} (it has: {known})"
            )
        if handler.is_async:
            raise InvalidArgumentError(
                f"query handler {name!r} of {self.defn.name} is 'async def': query handlers "
                "must be plain methods that only read state"
            )
        args = self._handler_args(handler, name, payloads)
        bound = self._callable(handler)
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
            # As temporalio lists them: every handler, the built-in queries and a dynamic
            # handler (name "") among them, sorted by name; a description when it has one.
            found = {name or "": getattr(h, "description", None) for name, h in handlers.items()}
            found.update({name: None for name in builtin if name not in found})
            out: list[JsonDict] = []
            for name in sorted(found):
                item: JsonDict = {"name": name}
                if found[name]:
                    item["description"] = found[name]
                out.append(item)
            return out

        definition: JsonDict = {
            "type": self.defn.name if self._info is None else self._info.workflow_type,
            "queryDefinitions": named(self._queries, (STACK_TRACE_QUERY, METADATA_QUERY)),
            "signalDefinitions": named(self._signals),
            "updateDefinitions": named(self._updates),
        }
        metadata: JsonDict = {"definition": definition}
        details = self.current_details()  # type: ignore[attr-defined]
        if details:
            metadata["currentDetails"] = details
        return metadata

    # -- signals ------------------------------------------------------------------------

    def _apply_signal_workflow(self, job: SignalWorkflow) -> None:
        name = job.signal_name
        handler = self._signals.get(name) or self._signals.get(None)
        if handler is None:  # kept for a handler set later
            self._buffered_signals.setdefault(name, []).append(job)
            return
        self._deliver_signal(handler, job)

    def _deliver_signal(self, handler: HandlerDefinition, job: SignalWorkflow) -> None:
        # Each signal runs in a task of its own, sync handlers too (as in temporalio), so
        # its commands fall among the other tasks' in the order Temporal records them.
        name = job.signal_name
        self._handlers_running += 1
        self._signal_seq += 1
        seq = self._signal_seq
        self._running_signals[seq] = (name, handler.unfinished_policy)
        self.create_task(self._run_signal(seq, handler, job), name=f"signal:{name}")

    async def _run_signal(self, seq: int, handler: HandlerDefinition, job: SignalWorkflow) -> None:
        name, payloads = job.signal_name, job.input
        try:
            args = self._handler_args(handler, name, payloads)
        except Exception:
            log.exception(
                "workflow %s (%s): the input of signal %r cannot be decoded; the signal is dropped",
                self.workflow_id,
                self.defn.name,
                name,
            )
            self._handlers_running -= 1
            self._running_signals.pop(seq, None)
            return
        try:
            result = self._callable(handler)(*args)
            if handler.is_async:
                await result
        except asyncio.CancelledError:
            pass
        except workflow.ContinueAsNewError as err:
            self._handler_failure = err  # continues the run as new, as from the run method
        except Exception as err:
            if self.is_failure_exception(err):
                self._handler_failure = err  # a failure in a handler fails the run
            else:
                self._callback_error = err  # not a failure: the workflow task fails
        finally:
            self._handlers_running -= 1
            self._running_signals.pop(seq, None)


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
