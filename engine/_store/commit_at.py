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
    #: Called (on the store's thread) once the transaction is ready to commit, before the
    #: wait for the deadline, and ``on_done(committed)`` once the commit has come back: the
    #: caller may hand out what the transaction did, to be used from the deadline on,
    #: while it waits and commits (the timer loop's workflow tasks,
    #: ``engine._store.held.Committing``). ``committed`` is None when a PostgreSQL
    #: connection was lost with the ``COMMIT`` sent: the server may have committed or not.
    #: On SQLite a failed commit is told by the transaction function's next attempt
    #: (``handed_out`` set), or else by the caller, to whom the failure is raised.
    on_due: Callable[[], None] | None = None
    on_done: Callable[[bool | None], None] | None = None
    #: Set (on the store's thread) just before ``on_due`` is called: a transaction function
    #: run again after a failed commit must not hand the same things out twice (and tells
    #: ``on_done`` that the attempt that handed them out did not commit).
    handed_out: bool = False
    #: What the transaction function leaves for ``on_due`` to hand out.
    payload: Any = None
    #: PostgreSQL, set before ``on_due``: the transaction's id (``pg_current_xact_id()``),
    #: whose fate ``pg_xact_status`` tells when the ``COMMIT``'s answer was lost.
    xid: str | None = None


def wait_for(at: CommitAt) -> bool:
    """Note when the transaction was ready to commit, hand out what it did (``on_due``,
    once over the attempts of its transaction function), then sleep until
    ``at.deadline``. Whether this attempt handed out (its commit must then tell
    ``on_done`` how it went)."""
    at.ready = time.monotonic()
    handed = False
    if at.on_due is not None and not at.handed_out:
        at.handed_out = handed = True
        at.on_due()
    if (wait := at.deadline - time.monotonic()) > 0:
        time.sleep(wait)
    return handed
