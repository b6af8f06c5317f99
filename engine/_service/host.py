"""Hosting the service's background duties: firing timers, and skipping time when idle.

Any process may run a :class:`ServiceHost` (the Jupyter server does, and so does every
:class:`~engine.Worker` unless told not to); timers are claimed transactionally, so several
hosts on one database never fire a timer twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ..exceptions import StoreUnavailableError
from .service import Service
from .state import TIMER_HORIZON, TIMERS_CHANNEL

log = logging.getLogger("engine.service")


class ServiceHost:
    """Runs the timer loop of a :class:`Service` as an asyncio task."""

    def __init__(self, service: Service, *, poll_interval: float = TIMER_HORIZON) -> None:
        self.service = service
        self.poll_interval = poll_interval
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        """Start the loop on the running event loop."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run(), name="durable-host")

    async def stop(self) -> None:
        """Stop the loop and wait for it."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        service = self.service
        clock = service.clock
        notifier = service.store.notifier
        while not self._stopping:
            try:
                generation = notifier.generation(TIMERS_CHANNEL)
                if await service.fire_due_timers():
                    continue
                if clock.skipping and getattr(clock, "auto_skip", False):
                    # Give in-process workers a moment to pick up anything just committed.
                    await asyncio.sleep(0.002)
                    if await service.skip_to_next_timer():
                        continue
                next_at = await service.next_timer_at()
                delay = self.poll_interval
                if next_at is not None:
                    delay = min(delay, clock.real_delay(next_at))
                    if clock.skipping:
                        delay = min(delay, 0.05)
                if delay > 0:
                    await notifier.wait(TIMERS_CHANNEL, delay, since=generation)
            except asyncio.CancelledError:
                raise
            except StoreUnavailableError as err:  # the store logs outages itself, once
                log.debug("timer loop: %s; retrying in a second", err)
                await asyncio.sleep(1.0)
            except Exception:
                log.exception("timer loop error; retrying in a second")
                await asyncio.sleep(1.0)
