"""In-process wake-ups: pollers wait on named channels that committed transactions notify.

A channel carries a generation counter, so a waiter that read the generation before looking
for work never misses a notification sent in between. Notifications are thread-safe and
cross event loops: the store's transactions run in threads, pollers in asyncio loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict


class Notifier:
    """Named wake-up channels shared by every client and worker of one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = defaultdict(int)
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]]] = (
            defaultdict(set)
        )

    def generation(self, channel: str) -> int:
        """The channel's counter; pass it to :meth:`wait` to catch notifications since now."""
        with self._lock:
            return self._generations[channel]

    def notify(self, channel: str) -> None:
        """Wake every waiter on ``channel`` (callable from any thread)."""
        with self._lock:
            self._generations[channel] += 1
            waiters = self._waiters.pop(channel, set())
        for loop, fut in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, fut)

    def notify_many(self, channels: set[str]) -> None:
        """Notify several channels."""
        for channel in channels:
            self.notify(channel)

    async def wait(self, channel: str, timeout: float, since: int | None = None) -> bool:
        """Wait until ``channel`` is notified (True) or ``timeout`` seconds pass (False).

        With ``since``, return at once if the generation has moved past it.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if since is not None and self._generations[channel] != since:
                return True
            self._waiters[channel].add(entry)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                self._waiters.get(channel, set()).discard(entry)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
