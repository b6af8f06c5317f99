"""Deadlock detection for workflow code that runs on the worker's own event-loop thread.

Activations run inline (no hop to another thread: the hop cost more than most activations).
A watchdog thread per worker checks, a few times per deadlock timeout, whether the current
activation has run too long. If so it records where the code is (its stack) and raises
:class:`_Interrupt` inside the loop thread with ``PyThreadState_SetAsyncExc``, so a busy
loop in workflow code (``while True: ...``) is stopped and the worker goes on. A call
blocked inside C (``time.sleep(60)``, a socket read) is interrupted when it returns: the
worker is stalled that long, then the task fails with the deadlock error as usual.

The hand-over is race-free: the watchdog interrupts only while holding the lock and while
the activation is armed; disarming takes the same lock, and an interrupt that was sent but
not yet raised is withdrawn before anything else runs on the loop thread.
"""

from __future__ import annotations

import asyncio
import ctypes
import linecache
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_SET_ASYNC_EXC: Any = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)


class _Interrupt(BaseException):
    """Raised inside workflow code that ran past the deadlock timeout (never escapes)."""


class DeadlockDetected(Exception):
    """An activation did not yield within the timeout; ``where`` is its innermost code."""

    def __init__(self, timeout: float, where: str, stack: str) -> None:
        super().__init__(f"did not yield within {timeout:g}s")
        self.timeout = timeout
        self.where = where
        self.stack = stack


class ActivationWatchdog:
    """Runs activations on the calling thread, interrupting one that runs too long."""

    def __init__(self, timeout: float, *, name: str = "durable-watchdog") -> None:
        self.timeout = timeout
        self._name = name
        self._lock = threading.Lock()
        self._armed = False
        self._since = 0.0
        self._tid = 0
        self._fired = 0
        self._where = ""
        self._stack = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the watchdog thread (idempotent)."""
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._watch, name=self._name, daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the watchdog thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on this thread; :class:`DeadlockDetected` if it ran past the timeout
        (whatever it returned or raised then: its state is not to be trusted)."""
        if self._thread is None:
            self.start()
        tid = threading.get_ident()
        previous = asyncio.events._get_running_loop()
        result: Any = None
        error: BaseException | None = None
        interrupted = False
        try:
            try:
                with self._lock:
                    self._armed = True
                    self._tid = tid
                    self._fired = 0
                    self._since = time.monotonic()
                result = fn(*args)
            except _Interrupt:
                interrupted = True
            except BaseException as err:  # re-raised below unless the watchdog fired
                error = err
            finally:
                with self._lock:
                    self._armed = False
                if self._fired:
                    _send(tid, None)  # withdraw an interrupt not yet raised
        except _Interrupt:
            interrupted = True
        if interrupted or self._fired:
            # An interrupt may have cut the activation's own clean-up short.
            asyncio.events._set_running_loop(previous)
            raise DeadlockDetected(self.timeout, self._where, self._stack) from None
        if error is not None:
            raise error
        return result  # type: ignore[no-any-return]

    # -- the watchdog thread -----------------------------------------------------------

    def _watch(self) -> None:
        period = max(0.01, min(0.25, self.timeout / 8))
        while not self._stop.wait(period):
            with self._lock:
                if not self._armed or time.monotonic() - self._since < self.timeout:
                    continue
                frame = sys._current_frames().get(self._tid)
                self._where, self._stack = _describe(frame)
                self._fired += 1
                # Again after another timeout, should the code swallow the interrupt.
                self._since = time.monotonic()
                _send(self._tid, _Interrupt)


def _send(tid: int, exc: type[BaseException] | None) -> None:
    if _SET_ASYNC_EXC is not None:
        # None is passed as NULL: that withdraws a pending interrupt.
        _SET_ASYNC_EXC(ctypes.c_ulong(tid), None if exc is None else ctypes.py_object(exc))


def _describe(frame: Any) -> tuple[str, str]:
    """The innermost frame of code outside the engine as ``file:line in fn: source``, and
    the stack from the workflow's code inwards."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()  # outermost first
    engine_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    replay_dir = os.path.join(engine_dir, "_replay") + os.sep
    start = 0
    for i, f in enumerate(frames):
        if f.f_code.co_filename.startswith(replay_dir):
            start = i + 1
    lines = []
    where = ""
    for f in frames[start:]:
        filename, lineno, name = f.f_code.co_filename, f.f_lineno, f.f_code.co_name
        source = linecache.getline(filename, lineno).strip()
        lines.append(f'  File "{filename}", line {lineno}, in {name}\n    {source}')
        if not filename.startswith(engine_dir) and f"{os.sep}asyncio{os.sep}" not in filename:
            where = f"{filename}:{lineno} in {name}" + (f": {source}" if source else "")
    return where, "\n".join(lines)
