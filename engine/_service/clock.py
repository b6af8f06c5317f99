"""Clocks for the service: real time, and a skipping clock for tests and teaching."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


class Clock:
    """Wall-clock time in epoch seconds. Subclasses may move time forward on their own."""

    skipping = False

    def waiting_for_result(self) -> contextlib.AbstractContextManager[None]:
        """Real time never skips: a no-op context."""
        return contextlib.nullcontext()

    def now(self) -> float:
        """Current time, epoch seconds (UTC)."""
        return time.time()

    def real_delay(self, until: float) -> float:
        """How many real seconds to wait until the clock reads ``until``."""
        return max(0.0, until - self.now())


class SkippingClock(Clock):
    """Real time plus an offset that jumps forward when everything is waiting on a timer.

    The host's timer loop calls :meth:`advance_to` when no task is ready or running, so a
    30-day timer or a retry backoff takes no real time. Time never goes backwards.
    """

    skipping = True

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()
        self._waiters = 0

    @property
    def auto_skip(self) -> bool:
        """Whether time may jump now: only while some caller awaits a workflow result,
        as in Temporal's time-skipping test server."""
        return self._waiters > 0

    @contextlib.contextmanager
    def waiting_for_result(self) -> Iterator[None]:
        """Allow skipping while the block runs (``handle.result()`` uses this)."""
        with self._lock:
            self._waiters += 1
        try:
            yield
        finally:
            with self._lock:
                self._waiters -= 1

    def now(self) -> float:
        """Virtual time: wall clock plus every jump so far."""
        return time.time() + self._offset

    def advance_to(self, target: float) -> None:
        """Jump forward so that :meth:`now` reads at least ``target``."""
        with self._lock:
            gap = target - self.now()
            if gap > 0:
                self._offset += gap

    def advance(self, seconds: float) -> None:
        """Jump forward by ``seconds``."""
        with self._lock:
            self._offset += max(0.0, seconds)
