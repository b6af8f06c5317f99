"""Handing the results of store transactions back to their callers, on their event loops,
and running the after-commit effects (shared by the SQLite and PostgreSQL writers)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .notify import Notifier
    from .tx import StoreTx

log = logging.getLogger("engine.store")

#: A change for the writer: function, arguments, the caller's loop and future, and when it
#: was asked for (``time.monotonic()``: the retry time counts from then).
Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.AbstractEventLoop | None", Any, float]


class Warm:
    """Put on a writer's queue to wake its thread (``Store.warm``): SQLite's writer skips
    it; a PostgreSQL writer runs ``SELECT 1`` on a pooled connection (``PgWriters._ping``)."""


#: The one :class:`Warm` item.
WARM = Warm()


def run_effects(effects: list[Callable[[], None]]) -> None:
    """The after-commit effects of committed transactions, in order; one that fails is
    logged (the change it follows is committed: nothing can undo it)."""
    for effect in effects:
        try:
            effect()
        except Exception:
            log.exception("an after-commit effect failed: %r", effect)


def announce(txs: Sequence[StoreTx], notifier: Notifier) -> None:
    """After one commit of the changes ``txs`` (in their order): their after-commit
    effects, then their wake-ups, each channel once."""
    wakeups: set[str] = set()
    messages: dict[str, Any] = {}
    effects: list[Callable[[], None]] = []
    for tx in txs:
        wakeups |= tx.wakeups
        messages.update(tx.messages)
        effects += tx.after
    run_effects(effects)
    notifier.notify_many(wakeups, messages)


def deliver_all(items: list[tuple[asyncio.AbstractEventLoop | None, Any, Any]]) -> None:
    """Hand a batch's results to their callers: one wake-up per event loop, not per result
    (waking a loop from another thread costs a system call)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Any, Any]]] = {}
    for loop, fut, result in items:
        if loop is None:
            if not fut.done():
                fut.set_result(result)
        elif not loop.is_closed():
            by_loop.setdefault(loop, []).append((fut, result))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(_settle_many, settled)


def _settle_many(items: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for fut, result in items:
        if not fut.done():
            fut.set_result(result)


def deliver(
    loop: asyncio.AbstractEventLoop | None, fut: Any, result: Any, error: BaseException | None
) -> None:
    """Settle one caller's future (once: a settled one is left as it is) from any thread:
    an asyncio future on its loop, a ``concurrent.futures`` one (``loop`` None) here."""
    if loop is None:
        _settle(fut, result, error)
        return
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
        loop.call_soon_threadsafe(_settle, fut, result, error)


def _settle(fut: Any, result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
