"""Running workflow activations on a thread of their own, with deadlock detection.

Workflow code never runs on the worker's event loop: a call that blocks (``time.sleep``,
a socket read) must not stop the worker's polling, its activities' heartbeats or its other
workflows. Activations queue for one long-lived thread per worker, which runs them back to
back and hands each result to the event loop as soon as it is ready: a short activation
queued behind slow ones is not held back until they finish. Results that finish while the
loop has not yet taken the previous ones join them, so a busy worker pays one thread
hand-over (one ``call_soon_threadsafe``) per batch the loop takes, not per activation.

An activation still running after the deadlock timeout is reported at once as
:class:`DeadlockDetected`, with where its code is and its stack. Its thread is abandoned
(Python cannot safely stop a thread; interrupting one at an arbitrary point can leave a
lock held): it exits when the code returns, and a fresh thread takes the queue meanwhile.
"""

from __future__ import annotations

import asyncio
import collections
import linecache
import logging
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

log = logging.getLogger("engine.worker")


class DeadlockDetected(Exception):
    """An activation did not yield within the timeout; ``where`` is its innermost code."""

    def __init__(self, timeout: float, where: str, stack: str) -> None:
        super().__init__(f"did not yield within {timeout:g}s")
        self.timeout = timeout
        self.where = where
        self.stack = stack


class _Job:
    __slots__ = ("args", "fn", "fut", "loop", "not_before", "started")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop,
        fut: asyncio.Future[Any],
        not_before: float | None = None,
    ) -> None:
        self.fn = fn
        self.args = args
        self.loop = loop
        self.fut = fut
        #: ``time.monotonic()`` before which the job does not start (None: at once).
        self.not_before = not_before
        self.started: float | None = None


#: A finished activation: its job, its result and how long it ran, or its error.
_Done = tuple[_Job, Any, BaseException | None]


class ActivationThread:
    """One thread that runs a worker's workflow activations, one after another."""

    def __init__(self, timeout: float, *, name: str = "durable-workflow") -> None:
        self.timeout = timeout
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._queue: collections.deque[_Job] = collections.deque()
        self._thread: threading.Thread | None = None
        self._generation = 0  # bumped when the running thread is abandoned
        self._current: _Job | None = None
        #: Finished activations their event loops have not taken yet. A loop is a key
        #: exactly while a hand-over to it is scheduled: what finishes meanwhile joins it.
        self._done: dict[asyncio.AbstractEventLoop, list[_Done]] = {}
        self._idle = False
        self._stopped = False
        #: Threads given up on because their code never yielded (still running it).
        self.abandoned = 0
        #: One deadlock watchdog per event loop with activations in flight (a timer per
        #: activation would cost a heap push and a cancel each), and how many are in flight.
        self._watchdogs: dict[asyncio.AbstractEventLoop, asyncio.TimerHandle] = {}
        self._inflight: dict[asyncio.AbstractEventLoop, int] = {}

    async def run(
        self, fn: Callable[..., T], *args: Any, not_before: float | None = None
    ) -> tuple[T, float]:
        """``fn(*args)`` on the activation thread, and how long it ran (seconds, not
        counting its wait in the queue); :class:`DeadlockDetected` if it runs past the
        timeout (the worker goes on meanwhile).

        ``not_before`` (``time.monotonic()``): not before then. The thread runs the jobs
        that may start first, and wakes by itself when this one may: a workflow task handed
        out a little before its timer is due (``engine._service.host``) starts on time
        without waiting for the event loop to be free."""
        loop = asyncio.get_running_loop()
        job = _Job(fn, args, loop, loop.create_future(), not_before)
        with self._cond:
            if self._stopped:
                raise RuntimeError("the worker is stopping")
            self._queue.append(job)
            if self._thread is None:
                self._start_thread()
            elif self._idle:
                self._idle = False
                self._cond.notify()
        self._inflight[loop] = self._inflight.get(loop, 0) + 1
        if loop not in self._watchdogs:
            self._watchdogs[loop] = loop.call_later(self.timeout, self._watch, loop)
        try:
            return await job.fut  # type: ignore[no-any-return]
        finally:
            left = self._inflight[loop] - 1
            if left:
                self._inflight[loop] = left
            else:
                del self._inflight[loop]
                watchdog = self._watchdogs.pop(loop, None)
                if watchdog is not None:
                    watchdog.cancel()

    def warm(self) -> None:
        """Wake the thread if it waits for work; it finds none and waits again. Done a
        moment before work is expected (``WorkflowRunner.warm``): a thread that slept
        long can be slow to wake on a virtual machine, one woken recently is not."""
        with self._cond:
            if self._thread is not None and self._idle:
                self._cond.notify()

    def stop(self) -> None:
        """Let the thread finish what it runs and exit; queued activations are dropped."""
        with self._cond:
            self._stopped = True
            dropped = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for job in dropped:
            job.loop.call_soon_threadsafe(_cancel, job.fut)

    # -- deadlock detection (on the event loop) ----------------------------------------

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watchdog of ``loop``'s activations: only the running one can be stuck, and
        it is due ``timeout`` after it started; look again then while any is in flight."""
        self._watchdogs.pop(loop, None)
        job = self._current
        wait = self.timeout  # nothing of this loop's is running: any job starts later
        if job is not None and job.loop is loop and job.started is not None:
            overdue = time.monotonic() - job.started
            if overdue >= self.timeout:
                # Also when its caller stopped waiting (cancelled): the code still holds the
                # thread, and what is queued behind it must not wait for it.
                self._give_up(job)
            else:
                wait = max(self.timeout - overdue, 0.001)
        if self._inflight.get(loop):
            self._watchdogs[loop] = loop.call_later(wait, self._watch, loop)

    def _give_up(self, job: _Job) -> None:
        """Fail ``job`` as a deadlock and leave its thread to itself."""
        with self._cond:
            if self._current is not job:
                return  # it finished just now
            thread = self._thread
            frame = sys._current_frames().get(thread.ident) if thread and thread.ident else None
            where, stack = _describe(frame)
            self._generation += 1  # the running thread is on its own now
            self._current = None
            self.abandoned += 1
            self._thread = None
            if self._queue and not self._stopped:
                self._start_thread()
        if self.abandoned in (1, 10, 100):
            log.warning(
                "%d workflow-code thread(s) given up on so far (code that never yielded, "
                "still running): each holds a thread until its code returns",
                self.abandoned,
            )
        if not job.fut.done():
            job.fut.set_exception(DeadlockDetected(self.timeout, where, stack))

    # -- the thread --------------------------------------------------------------------

    def _start_thread(self) -> None:
        # Called with the lock held.
        self._thread = threading.Thread(
            target=self._main, args=(self._generation,), name=self._name, daemon=True
        )
        self._thread.start()

    def _main(self, generation: int) -> None:
        while True:
            with self._cond:
                if generation != self._generation:
                    return
                job, wait = self._next(time.monotonic()) if self._queue else (None, None)
                if job is not None:
                    self._current = job
                    job.started = began = time.monotonic()
                else:
                    if self._stopped and not self._queue:
                        return
                    self._idle = True
                    self._cond.wait(wait)
                    self._idle = False
                    continue
            result: Any = None
            error: BaseException | None = None
            try:
                result = (job.fn(*job.args), time.monotonic() - began)
            except BaseException as err:  # handed to the caller, who raises it
                error = err
            with self._cond:
                if generation != self._generation:
                    return  # given up on while it ran: its caller has its answer
                self._current = None
                batch = self._done.get(job.loop)
                if batch is not None:
                    batch.append((job, result, error))  # a hand-over is on its way
                    continue
                self._done[job.loop] = [(job, result, error)]
            self._hand_over(job.loop)

    def _next(self, now: float) -> tuple[_Job | None, float | None]:
        """Take the first queued job that may start at ``now``; else None and how long
        until one may (called with the lock held, the queue not empty)."""
        head = self._queue[0]
        if head.not_before is None or head.not_before <= now:
            return self._queue.popleft(), None
        soonest = head.not_before
        for i, job in enumerate(self._queue):
            if job.not_before is None or job.not_before <= now:
                del self._queue[i]
                return job, None
            soonest = min(soonest, job.not_before)
        return None, soonest - now

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Schedule ``loop`` to take its finished activations (from the thread)."""
        try:
            loop.call_soon_threadsafe(self._take, loop)
        except RuntimeError:  # the loop is closed: nobody waits for these any more
            with self._cond:
                self._done.pop(loop, None)

    def _take(self, loop: asyncio.AbstractEventLoop) -> None:
        """Settle the futures of ``loop``'s finished activations (on ``loop``)."""
        with self._cond:
            items = self._done.pop(loop, ())
        for job, result, error in items:
            if job.fut.done():
                continue
            if error is not None:
                job.fut.set_exception(error)
            else:
                job.fut.set_result(result)


def _cancel(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.cancel()


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
    asyncio_dir = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep
    for i, f in enumerate(frames):
        if f.f_code.co_filename.startswith(replay_dir):
            start = i + 1
    # The stack starts below the engine's workflow loop and asyncio's task step.
    while start < len(frames) and frames[start].f_code.co_filename.startswith(asyncio_dir):
        start += 1
    lines = []
    where = innermost = ""
    for f in frames[start:]:
        filename, lineno, name = f.f_code.co_filename, f.f_lineno, f.f_code.co_name
        source = linecache.getline(filename, lineno).strip()
        lines.append(f'  File "{filename}", line {lineno}, in {name}\n    {source}')
        innermost = f"{filename}:{lineno} in {name}" + (f": {source}" if source else "")
        if not filename.startswith((engine_dir, *_LIBRARY_DIRS)):
            where = innermost  # the user's own code, not a library it called
    return where or innermost, "\n".join(lines)


_LIBRARY_DIRS = tuple(
    sorted(
        {
            os.path.abspath(path) + os.sep
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (path := sysconfig.get_paths().get(key))
        }
    )
)
