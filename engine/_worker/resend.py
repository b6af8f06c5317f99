"""Re-sending what a worker finished until the store takes it.

A finished activity's outcome or a completed workflow task is work done: dropping it on a
database error would make the service wait for a timeout (an activity's start-to-close,
often minutes) and run it all again. The store itself waits out an outage for a while
(:class:`~engine._store.outage.RetryConfig`); when even that gives up, the worker keeps
the outcome and sends it again, with backoff, until the store accepts it, refuses it as
stale (the caller's own exceptions, e.g. ``ActivityNotFoundError``, pass through), or the
worker stops.

The store logs an outage once when it begins and once when it ends, so a retry here after
:class:`~engine.exceptions.StoreUnavailableError` is logged at debug level; another store
error (not an outage) is logged once per outcome as a warning.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..exceptions import StoreError, StoreUnavailableError

T = TypeVar("T")
log = logging.getLogger("engine.worker")

#: The first wait and the longest one between two sends, in seconds.
FIRST_WAIT = 0.1
LONGEST_WAIT = 2.0


async def until_accepted(
    send: Callable[[], Awaitable[T]],
    what: str,
    *,
    abandoned: Callable[[], bool],
) -> T:
    """``await send()`` until it does not fail with :class:`StoreError`.

    Raises the last :class:`StoreError` once ``abandoned()`` is true (the worker stopped
    and will not wait any more)."""
    wait = FIRST_WAIT
    warned = False
    while True:
        try:
            return await send()
        except StoreError as err:
            if abandoned():
                raise
            if isinstance(err, StoreUnavailableError) or warned:
                log.debug("could not record %s yet (%s); sending it again", what, err)
            else:
                warned = True
                log.warning("could not record %s (%s); sending it again", what, err)
        await asyncio.sleep(wait * random.uniform(0.8, 1.2))
        wait = min(wait * 2, LONGEST_WAIT)
