"""In-process wake-ups: pollers wait on named channels that committed transactions notify.

A channel carries a generation counter, so a waiter that read the generation before looking
for work never misses a notification sent in between. Notifications are thread-safe and
cross event loops: the store's transactions run in threads, pollers in asyncio loops.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from typing import Any, Protocol


class _Cancellable(Protocol):
    def cancel(self) -> None: ...


class Notifier:
    """Named wake-up channels shared by every client and worker of one store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._counter = 0
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]]] = (
            defaultdict(set)
        )
        self._messages: OrderedDict[str, Any] = OrderedDict()

    #: Messages kept at most (the newest; a waiter that finds none reads the database).
    MAX_MESSAGES = 1024

    def generation(self, channel: str) -> int:
        """The channel's counter; pass it to :meth:`wait` to catch notifications since now."""
        with self._lock:
            return self._generations.get(channel, 0)

    #: Channels remembered at most; older ones without waiters are forgotten (a waiter
    #: that read a forgotten generation is woken at once, so nothing is missed).
    MAX_CHANNELS = 10_000

    def notify(self, channel: str, message: Any = None) -> None:
        """Wake every waiter on ``channel`` (callable from any thread). A ``message`` is
        kept (:meth:`message`) until a newer one, or until it is among the oldest past
        :attr:`MAX_MESSAGES`."""
        self.notify_many({channel}, None if message is None else {channel: message})

    def _take(
        self, channel: str, message: Any
    ) -> set[tuple[asyncio.AbstractEventLoop, asyncio.Future[bool]]]:
        # Called with the lock held. Values come from one increasing counter, so a
        # channel forgotten and notified again never repeats a generation a waiter holds.
        self._counter += 1
        self._generations[channel] = self._counter
        waiters = self._waiters.pop(channel, set())
        # Without a message the last one stays: a close is announced once, and its echo
        # from the PostgreSQL listener carries none. Kept with or without waiters: a result
        # awaited just after the close takes it from here.
        if message is not None:
            self._messages[channel] = message
            if len(self._messages) > self.MAX_MESSAGES:
                self._messages.popitem(last=False)
        if len(self._generations) > self.MAX_CHANNELS:
            self._forget_idle()
        return waiters

    def _forget_idle(self) -> None:
        # One entry per closed run or answered query would otherwise pile up forever in
        # a long-lived process (the Jupyter server).
        for name in list(self._generations)[: len(self._generations) // 2]:
            if not self._waiters.get(name):
                del self._generations[name]
                self._waiters.pop(name, None)

    def notify_many(self, channels: set[str], messages: dict[str, Any] | None = None) -> None:
        """Notify several channels (with their ``messages``, if any): one wake-up per
        event loop (waking a loop from another thread costs a system call)."""
        if not channels:
            return
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[bool]]] = {}
        with self._lock:
            for channel in channels:
                for loop, fut in self._take(channel, messages.get(channel) if messages else None):
                    by_loop.setdefault(loop, []).append(fut)
        for loop, futs in by_loop.items():
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve_all, futs)

    def wake_all(self) -> None:
        """Wake every waiter on every channel: each looks in the database once (after
        wake-ups from other processes may have been missed, e.g. while the PostgreSQL
        LISTEN connection was down)."""
        with self._lock:
            # Every channel known, not only those waited on now: a poller between its
            # poll and its wait (``since=`` a generation) must see a change too.
            channels = set(self._waiters) | set(self._generations)
        self.notify_many(channels)

    def message(self, channel: str) -> Any:
        """What the last notification of ``channel`` with a message carried, or None
        (none, forgotten, or only notifications from other processes). Only channels
        announced once (a run's close) carry messages."""
        with self._lock:
            return self._messages.get(channel)

    async def wait(
        self,
        channel: str,
        timeout: float | None,
        since: int | None = None,
        call_later: Callable[[float, Callable[[], Any]], _Cancellable] | None = None,
    ) -> bool:
        """Wait until ``channel`` is notified (True) or ``timeout`` seconds pass (False;
        ``None``: no timeout).

        With ``since``, return at once if the generation has moved past it. The timeout
        is the loop's ``call_later``, or ``call_later`` when given (the timer loop's
        ``Alarm``, which wakes on time to well under a millisecond).
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            if since is not None and self._generations.get(channel, 0) != since:
                return True
            self._waiters[channel].add(entry)
        # A timer handle instead of asyncio.wait_for: this runs for every wait of every
        # poller and result, and wait_for costs a task and several callbacks each time.
        timer: _Cancellable | None = None
        try:
            if timeout is not None:
                if call_later is None:
                    timer = loop.call_later(timeout, _expire, fut)
                else:
                    timer = call_later(timeout, lambda: _expire(fut))
            await fut
            return fut.result()
        finally:
            if timer is not None:
                timer.cancel()
            with self._lock:
                waiting = self._waiters.get(channel)
                if waiting is not None:
                    waiting.discard(entry)
                    if not waiting:
                        del self._waiters[channel]


def _resolve_all(futs: list[asyncio.Future[bool]]) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(True)


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
