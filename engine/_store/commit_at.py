"""When a transaction may commit, at the earliest: the timer loop's firing pass started
ahead of its timers commits when they are due (``StoreTx.commit_not_before``; see
``engine._service.host``), and on PostgreSQL hands out what it did as its ``COMMIT`` goes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class CommitAt:
    """When a transaction may commit, at the earliest (see
    :meth:`StoreTx.commit_not_before`)."""

    #: ``time.monotonic()`` before which the ``COMMIT`` is not sent.
    deadline: float
    #: Set by the commit: when everything before the ``COMMIT`` had reached the server and
    #: come back (``time.monotonic()``), for the caller to see how long that took.
    ready: float | None = None
    #: PostgreSQL: called (on the store's thread) once the deadline has come, just before
    #: the ``COMMIT`` is sent, and ``on_done(committed)`` once it has come back: the caller
    #: may hand out what the transaction did while its commit travels (the timer loop's
    #: workflow tasks, ``engine._store.held.Committing``). ``committed`` is None when the
    #: connection was lost with the ``COMMIT`` sent: the server may have committed or not.
    on_due: Callable[[], None] | None = None
    on_done: Callable[[bool | None], None] | None = None
    #: Set (on the store's thread) just before ``on_due`` is called: a transaction function
    #: run again after a failed commit must not hand the same things out twice.
    handed_out: bool = False
    #: What the transaction function leaves for ``on_due`` to hand out.
    payload: Any = None
    #: PostgreSQL, set before ``on_due``: the transaction's id (``pg_current_xact_id()``),
    #: whose fate ``pg_xact_status`` tells when the ``COMMIT``'s answer was lost.
    xid: str | None = None


def wait_for(at: CommitAt) -> None:
    """Note when the transaction was ready to commit, then sleep until ``at.deadline``."""
    at.ready = time.monotonic()
    if (wait := at.deadline - at.ready) > 0:
        time.sleep(wait)
