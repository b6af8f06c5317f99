"""One time for every change of a group commit.

The writers run several callers' changes in one transaction (a batch) and commit them
together. Each change's events carry the engine's clock as the change reads it; inside a
batch, every change reads the same value: the clock as the batch's first change read it.
So a batch's events share one time, that of its transaction (as a change alone has the
time its own transaction read), and a change that waited its turn inside the batch is not
stamped later for it: twenty workflow tasks completed together start their timers at the
same time, not one after another at the pace the writer works through them (the timers'
lateness as the workflow code sees it fell by that much).

Within a run, times follow the order of its events as far as the clock does: its changes
in one batch share the time, and a firing pass that commits at its timers' due time
(``StoreTx.commit_not_before``) moves the batch's time to it (:func:`not_before`), since
what is batched after the pass commits with it. On PostgreSQL two writers commit batches
side by side: a change late in a batch can carry a time earlier than one the other writer
committed for the same run meanwhile, by at most the batch's duration (milliseconds), as
two clock reads on two threads can anyway.
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
    outer = getattr(_local, "slot", None)
    _local.slot = [None]
    try:
        yield
    finally:
        _local.slot = outer


def now(clock: _Clock) -> float:
    """``clock.now()``, or inside :func:`one_time` the reading the block took first."""
    slot = getattr(_local, "slot", None)
    if slot is None:
        return clock.now()
    if slot[0] is None:
        slot[0] = clock.now()
    return slot[0]  # type: ignore[no-any-return]


def not_before(at: float) -> None:
    """Inside :func:`one_time`: the changes that read the time from now on read at least
    ``at`` (a firing pass in the batch commits at ``at``, and what follows it with it)."""
    slot = getattr(_local, "slot", None)
    if slot is not None and (slot[0] is None or slot[0] < at):
        slot[0] = at
