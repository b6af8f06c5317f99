"""The deterministic asyncio event loop under every workflow instance.

``call_soon`` appends to a deque; ``call_later`` becomes a durable ``StartTimer`` command
whose callback runs when the matching ``TimerFired`` event arrives; ``time()`` is the time
of the current workflow task. Nothing here blocks or does I/O.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
from collections.abc import Callable
from typing import Any

from .._model import commands as cmd

log = logging.getLogger("engine.workflow")


class DeterministicLoop(asyncio.AbstractEventLoop):
    """The event-loop half of a workflow instance."""

    def __init__(self) -> None:
        self._ready: collections.deque[asyncio.Handle] = collections.deque()
        self._now = 0.0
        self._commands: list[cmd.Command] = []
        self._timer_seq = 0
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._timer_seq_of: dict[int, int] = {}  # id(handle) -> seq
        self._callback_error: BaseException | None = None
        #: The tasks of this loop not done yet (``engine._replay.teardown`` ends them).
        self._tasks: set[asyncio.Task[Any]] = set()
        #: User metadata (a summary) for the next timer ``call_later`` makes, set just
        #: before ``workflow.sleep(summary=)`` or a timed ``wait_condition`` awaits.
        self._next_timer_metadata: dict[str, Any] | None = None

    def call_soon(  # type: ignore[override]
        self, callback: Callable[..., Any], *args: Any, context: contextvars.Context | None = None
    ) -> asyncio.Handle:
        """Queue a callback for this activation."""
        handle = asyncio.Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    def call_later(  # type: ignore[override]
        self,
        delay: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """A durable timer: emits StartTimer; the callback runs when TimerFired arrives."""
        metadata, self._next_timer_metadata = self._next_timer_metadata, None
        if delay <= 0:
            # Zero-length waits do not create timers (changing to/from zero is unsafe).
            handle0 = asyncio.TimerHandle(self._now, callback, args, self, context)
            self._ready.append(handle0)
            return handle0
        self._timer_seq += 1
        seq = self._timer_seq
        handle = asyncio.TimerHandle(self._now + delay, callback, args, self, context)
        handle._scheduled = True  # type: ignore[attr-defined]
        self._timers[seq] = handle
        self._timer_seq_of[id(handle)] = seq
        self._commands.append(
            cmd.StartTimer(seq=seq, timer_id=str(seq), duration=delay, user_metadata=metadata)
        )
        return handle

    def call_at(  # type: ignore[override]
        self,
        when: float,
        callback: Callable[..., Any],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        """Like call_later, at a workflow time."""
        return self.call_later(when - self._now, callback, *args, context=context)

    def _timer_handle_cancelled(self, handle: asyncio.TimerHandle) -> None:
        seq = self._timer_seq_of.pop(id(handle), None)
        if seq is None or seq not in self._timers:
            return
        del self._timers[seq]
        for command in self._commands:
            if isinstance(command, cmd.StartTimer) and command.seq == seq:
                self._commands.remove(command)  # never sent: just drop it
                return
        self._commands.append(cmd.CancelTimer(seq=seq, timer_id=str(seq)))

    def time(self) -> float:
        """Workflow time, epoch seconds."""
        return self._now

    def create_future(self) -> asyncio.Future[Any]:
        """A future bound to this loop."""
        return asyncio.Future(loop=self)

    def create_task(
        self, coro: Any, *, name: str | None = None, context: Any = None
    ) -> asyncio.Task[Any]:  # type: ignore[override]
        """A task bound to this loop."""
        task = asyncio.Task(coro, loop=self, name=name, context=context)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def get_debug(self) -> bool:
        """Never in debug mode."""
        return False

    def is_running(self) -> bool:
        """True: code only ever runs inside an activation."""
        return True

    def is_closed(self) -> bool:
        """Never closed."""
        return False

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        """An exception escaped a callback: fail the workflow task with it."""
        exc = context.get("exception")
        if isinstance(exc, BaseException) and not isinstance(exc, asyncio.CancelledError):
            self._callback_error = exc
        elif "message" in context and exc is None:
            log.debug("workflow loop: %s", context["message"])

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        """See call_exception_handler."""
        self.call_exception_handler(context)

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> Any:  # type: ignore[override]
        """Not allowed: workflow code must not do I/O. Use an activity."""
        raise RuntimeError(
            "workflow code cannot use run_in_executor (blocking I/O): do it in an activity"
        )
