"""Waking an event loop on time, for the timer loop.

asyncio waits in ``epoll_wait``, whose timeout Linux lets run late by a tenth of a percent
of its length (the kernel's slack for ``select``-like waits of ordinary processes) and
rounds up to a whole millisecond: a one-second wait ends about 1.2 ms late on the
project's machines, half of a lone timer's lateness on SQLite. A thread that sleeps on a
condition variable wakes within the thread's timer slack (50 microseconds by default).

:class:`Alarm` is one such thread: :meth:`Alarm.call_later` runs a callback on an event
loop at a given delay, through ``call_soon_threadsafe``, and returns a handle that can be
cancelled as asyncio's can. Nothing else changes: the callback runs on its loop, as
``loop.call_later``'s would.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from typing import Any


class AlarmHandle:
    """A callback an :class:`Alarm` will run, until :meth:`cancel` is called."""

    __slots__ = ("callback", "cancelled", "deadline", "loop")

    def __init__(
        self, deadline: float, loop: asyncio.AbstractEventLoop, callback: Callable[[], Any]
    ) -> None:
        self.deadline = deadline
        self.loop = loop
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (if it has not been handed to its loop yet)."""
        self.cancelled = True


class Alarm:
    """One thread that runs callbacks on their event loops at their time (see the module
    docstring). It starts with a callback and stops with :meth:`close` (the next callback
    starts it again)."""

    def __init__(self, name: str = "durable-alarm") -> None:
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, AlarmHandle]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        #: Bumped by :meth:`close`: a thread of an older generation exits.
        self._generation = 0

    def call_later(self, delay: float, callback: Callable[[], Any]) -> AlarmHandle:
        """Run ``callback()`` on the running event loop ``delay`` seconds from now."""
        loop = asyncio.get_running_loop()
        handle = AlarmHandle(time.monotonic() + max(delay, 0.0), loop, callback)
        with self._cond:
            heapq.heappush(self._heap, (handle.deadline, next(self._seq), handle))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._main, args=(self._generation,), name=self._name, daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is handle:
                self._cond.notify()  # earlier than what the thread waits for
        return handle

    def close(self) -> None:
        """Drop the callbacks not run yet and stop the thread."""
        with self._cond:
            self._generation += 1
            self._heap.clear()
            self._cond.notify()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    def _main(self, generation: int) -> None:
        while True:
            with self._cond:
                while True:
                    if generation != self._generation:
                        return
                    while self._heap and self._heap[0][2].cancelled:
                        heapq.heappop(self._heap)
                    if not self._heap:
                        self._cond.wait()
                        continue
                    wait = self._heap[0][0] - time.monotonic()
                    if wait <= 0:
                        handle = heapq.heappop(self._heap)[2]
                        break
                    self._cond.wait(wait)
            try:
                handle.loop.call_soon_threadsafe(_run, handle)
            except RuntimeError:  # its loop is closed: nobody waits for it any more
                pass


def _run(handle: AlarmHandle) -> None:
    if not handle.cancelled:
        handle.callback()
