"""Waiting for runs to close without one database poll per waiter.

In-process closes (and, on PostgreSQL, closes anywhere) wake waiters at once through the
notifier. For closes made by another process on SQLite, one loop per service polls the
statuses of every awaited run together and notifies the ones that closed.

On PostgreSQL that poll is only a safety net: every close reaches every process through
``LISTEN``, and a listener that lost its connection wakes every waiter once it is back.
So it polls every :data:`PG_INTERVAL` seconds there, not every half second. (Every half
second it also ran a transaction at the very moment the timers of runs started with the
waiters came due, a whole second later: one more transaction for the firing pass to
share the process with.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .state import closed_channel

if TYPE_CHECKING:
    from .service import Service

log = logging.getLogger("engine.service")


#: Seconds between two polls on SQLite, where only the poll sees another process's closes.
SQLITE_INTERVAL = 0.5
#: Seconds between two polls on PostgreSQL (a safety net: see the module docstring).
PG_INTERVAL = 5.0


class CloseWatcher:
    """Shared fallback poll for awaited runs."""

    def __init__(self, service: Service, interval: float | None = None) -> None:
        self.service = service
        #: Seconds between two polls (None: by the store's database).
        self.interval = interval
        self._waiting: Counter[str] = Counter()
        self._tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}
        #: Waiters per event loop: a loop's poll stops with its last waiter, so no task is
        #: left pending on a loop its owner closes right after (a notebook cell, a test).
        self._per_loop: Counter[asyncio.AbstractEventLoop] = Counter()

    @contextlib.contextmanager
    def watching(self, run_id: str) -> Iterator[None]:
        """Include ``run_id`` in the shared poll while the block runs."""
        self._waiting[run_id] += 1
        loop = asyncio.get_running_loop()
        self._per_loop[loop] += 1
        task = self._tasks.get(loop)
        if task is None or task.done():
            self._tasks[loop] = loop.create_task(self._poll(), name="durable-close-watch")
        try:
            yield
        finally:
            self._waiting[run_id] -= 1
            if self._waiting[run_id] <= 0:
                del self._waiting[run_id]
            self._per_loop[loop] -= 1
            if self._per_loop[loop] <= 0:
                del self._per_loop[loop]
                task = self._tasks.pop(loop, None)
                if task is not None:
                    task.cancel()

    async def _poll(self) -> None:
        store = self.service.store
        notifier = store.notifier
        interval = self.interval
        if interval is None:
            interval = PG_INTERVAL if store.postgres else SQLITE_INTERVAL
        while self._waiting:
            await asyncio.sleep(interval)
            run_ids = list(self._waiting)
            if not run_ids:
                break
            try:
                closed = await self.service.closed_among(run_ids)
            except Exception as err:  # keep waiting; the next poll retries
                log.debug("close poll failed: %s", err)
                continue
            for run_id in closed:
                notifier.notify(closed_channel(run_id))
