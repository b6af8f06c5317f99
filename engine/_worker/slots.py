"""Slots and the poll loop, shared by the workflow and the activity runner (:class:`Poller`).

A runner has ``max_concurrent`` slots. A poll reserves every free slot while it is in flight
(it may claim that many tasks) and gives back what it did not claim; a task gives its slot
back when it ends; a hand-off (see ``engine._service.handoff``) holds one until it is
settled. Everything here runs on the runner's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar

from .._service.handoff import Handoffs
from .._service.service import Service
from ..exceptions import StoreUnavailableError

log = logging.getLogger("engine.worker")

T = TypeVar("T")

#: How long a poll that failed (the database unreachable, say) waits before the next one.
POLL_RETRY_SECONDS = 1.0


class Slots:
    """A runner's slots: how many are free, and how many hand-offs are not settled yet."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.free = total
        #: Slots reserved for hand-offs whose transaction has not settled them yet.
        self.handoffs_pending = 0
        self._changed = asyncio.Event()

    def take(self, wanted: int) -> int:
        """Reserve up to ``wanted`` free slots; return how many."""
        n = max(0, min(wanted, self.free))
        self.free -= n
        return n

    def give(self, n: int) -> None:
        """Give back ``n`` reserved slots (nothing with ``n <= 0``)."""
        if n > 0:
            self.free += n
            self._changed.set()

    def wake(self) -> None:
        """Wake a poll loop waiting for a free slot (to see that it should stop)."""
        self._changed.set()

    async def wait_changed(self) -> None:
        """Wait until a slot is given back or :meth:`wake` is called."""
        self._changed.clear()
        await self._changed.wait()

    # -- hand-offs ----------------------------------------------------------------------

    def reserve_handoff(self) -> bool:
        """Reserve one slot for a hand-off; False when none is free."""
        if self.take(1) == 0:
            return False
        self.handoffs_pending += 1
        return True

    def settle_handoff(self, used: bool) -> None:
        """The hand-off's transaction ended: its slot now runs a task (``used``) or is free."""
        self.handoffs_pending -= 1
        if not used:
            self.give(1)

    async def handoffs_settled(self, timeout: float) -> bool:
        """Wait (up to ``timeout`` seconds) until every hand-off is settled."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.handoffs_pending > 0 and loop.time() < deadline:
            await asyncio.sleep(0.005)
        return self.handoffs_pending == 0


class Poller(ABC, Generic[T]):
    """What the workflow and the activity runner share: the service, the queue, the slots,
    the poll loop and how polling stops. A subclass says how to poll and what to do with
    what it claimed, and which half of the hand-off protocol it offers."""

    #: What the runner polls, for log lines ("workflow tasks").
    what = "tasks"

    def __init__(
        self,
        service: Service,
        *,
        namespace: str,
        task_queue: str,
        identity: str,
        max_concurrent: int,
        poll_interval: float,
        channel: str,
    ) -> None:
        self.service = service
        self.namespace = namespace
        self.task_queue = task_queue
        self.identity = identity
        self.poll_interval = poll_interval
        self.slots = Slots(max_concurrent)
        self._channel = channel
        self._stopping = False
        #: Set at the end of a stop: what cannot be recorded any more is given up on.
        self._abandoned = False
        #: The loop the runner polls on; it takes hand-offs only from code on that loop.
        self._loop: asyncio.AbstractEventLoop | None = None

    @abstractmethod
    async def _poll(self, limit: int) -> Sequence[T]:
        """Claim up to ``limit`` tasks."""

    @abstractmethod
    def _dispatch(self, claimed: Sequence[T]) -> int:
        """Start what a poll claimed; return how many of the reserved slots it took."""

    @abstractmethod
    def _register(self, handoffs: Handoffs) -> None:
        """Offer this runner's half of the hand-off protocol."""

    def _gave_up(self) -> bool:
        """Whether work that could not be recorded is not sent again: the runner stopped,
        or its store was closed (nothing sent to it would ever be done)."""
        return self._abandoned or self.service.store.closed

    def _on_loop(self) -> bool:
        """Whether the caller runs on this runner's loop and it still takes work."""
        return not self._stopping and asyncio.get_running_loop() is self._loop

    async def run(self) -> None:
        """Poll until :meth:`begin_stop`, taking hand-offs from this process meanwhile.

        A poll reserves every free slot while it is in flight and gives back what it did
        not claim; when nothing came, the loop sleeps until the queue's channel is
        notified or ``poll_interval`` passes. A failed poll (a database outage) is logged
        and retried after a second: it never ends the loop. A poll in flight is never
        cancelled by a stop: what it claimed is started.
        """
        self._loop = asyncio.get_running_loop()
        handoffs = self.service.handoffs
        notifier = self.service.store.notifier
        slots = self.slots
        self._register(handoffs)
        try:
            while not self._stopping:
                if slots.free <= 0:
                    await slots.wait_changed()
                    continue
                generation = notifier.generation(self._channel)
                limit = slots.take(slots.free)
                try:
                    claimed = await self._poll(limit)
                except Exception as err:  # a database hiccup must not stop the worker
                    slots.give(limit)
                    # An outage is logged by the store, once; anything else here.
                    level = (
                        logging.DEBUG if isinstance(err, StoreUnavailableError) else logging.WARNING
                    )
                    log.log(level, "polling %s failed (%s); retrying in a second", self.what, err)
                    await asyncio.sleep(POLL_RETRY_SECONDS)
                    continue
                slots.give(limit - self._dispatch(claimed))
                if not claimed:
                    await notifier.wait(self._channel, self.poll_interval, since=generation)
        finally:
            handoffs.unregister(self)

    def begin_stop(self) -> None:
        """Poll no more and take no hand-offs (a poll in flight still starts its tasks)."""
        self._stopping = True
        self.service.handoffs.unregister(self)
        self.slots.wake()
        self.service.store.notifier.notify(self._channel)
