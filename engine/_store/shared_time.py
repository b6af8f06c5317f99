"""One time for every change of a group commit.

The writers run several callers' changes in one transaction (a batch) and commit them
together. Each change's events carry the engine's clock as the change reads it; inside a
batch, every change reads the same value: the clock as the batch's first change read it.
So a batch's events share one time, that of its transaction (as a change alone has the
time its own transaction read), and a change that waited its turn inside the batch is not
stamped later for it: twenty workflow tasks completed together start their timers at the
same time, not one after another at the pace the writer works through them (the timers'
lateness as the workflow code sees it fell by that much). Times still never run backwards
within a run: its changes in one batch share the time, a later batch reads the clock anew.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Protocol


class _Clock(Protocol):
    def now(self) -> float: ...


_local = threading.local()


@contextlib.contextmanager
def one_time() -> Iterator[None]:
    """Within the block, :func:`now` on this thread returns the first reading of the
    clock taken in it (a writer wraps a batch's changes in it)."""
    _local.slot = [None]
    try:
        yield
    finally:
        _local.slot = None


def now(clock: _Clock) -> float:
    """``clock.now()``, or inside :func:`one_time` the reading the block took first."""
    slot = getattr(_local, "slot", None)
    if slot is None:
        return clock.now()
    if slot[0] is None:
        slot[0] = clock.now()
    return slot[0]  # type: ignore[no-any-return]
