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

    As the clock of Temporal's time-skipping test server: time runs at the wall clock's
    pace and jumps only while someone lets it, and only when no task is ready or running.
    A caller awaiting a workflow result lets it (:meth:`waiting_for_result`; the host's
    timer loop then calls :meth:`advance_to` with the next timer), unless
    :meth:`auto_skipping_disabled` was in force when the wait began.
    ``WorkflowEnvironment.sleep`` moves it itself, from timer to timer, within
    :meth:`sleeping_until`: while such a sleep runs, no jump passes its end. Time never
    goes backwards.
    """

    skipping = True

    def __init__(self) -> None:
        self._offset = 0.0
        self._lock = threading.Lock()
        self._waiters = 0
        self._auto_skip_disabled = 0
        self._sleep_ends: list[float] = []

    @property
    def auto_skip(self) -> bool:
        """Whether time may jump now: only while some caller awaits a workflow result,
        as in Temporal's time-skipping test server."""
        return self._waiters > 0

    @contextlib.contextmanager
    def waiting_for_result(self) -> Iterator[None]:
        """Allow skipping while the block runs (``handle.result()`` uses this), unless
        :meth:`auto_skipping_disabled` is in force as it begins (then for the whole block,
        as Temporal decides when the wait begins)."""
        with self._lock:
            counted = self._auto_skip_disabled == 0
            if counted:
                self._waiters += 1
        try:
            yield
        finally:
            if counted:
                with self._lock:
                    self._waiters -= 1

    @contextlib.contextmanager
    def auto_skipping_disabled(self) -> Iterator[None]:
        """Waits for a result that begin in the block do not let time skip (they wait in
        real time); ``WorkflowEnvironment.auto_time_skipping_disabled()`` uses this."""
        with self._lock:
            self._auto_skip_disabled += 1
        try:
            yield
        finally:
            with self._lock:
                self._auto_skip_disabled -= 1

    @contextlib.contextmanager
    def sleeping_until(self, end: float) -> Iterator[None]:
        """While the block runs, no jump (:meth:`advance_to`) goes past ``end``: the end of
        a ``WorkflowEnvironment.sleep``, as the sleep's own timer on Temporal's server is
        the next thing the clock stops at."""
        with self._lock:
            self._sleep_ends.append(end)
        try:
            yield
        finally:
            with self._lock:
                self._sleep_ends.remove(end)

    def now(self) -> float:
        """Virtual time: wall clock plus every jump so far."""
        return time.time() + self._offset

    def advance_to(self, target: float) -> None:
        """Jump forward so that :meth:`now` reads at least ``target`` (but no further than
        the end of a sleep in progress, :meth:`sleeping_until`)."""
        with self._lock:
            if self._sleep_ends:
                target = min(target, min(self._sleep_ends))
            gap = target - self.now()
            if gap > 0:
                self._offset += gap

    def advance(self, seconds: float) -> None:
        """Jump forward by ``seconds``."""
        with self._lock:
            self._offset += max(0.0, seconds)
