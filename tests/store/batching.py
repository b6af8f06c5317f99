"""Forcing a SQLite group commit in a test: the calls queue behind a change that holds the
writer busy, so the writer runs them as one batch."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

from engine import Client
from engine._store.tx import StoreTx


async def one_batch(client: Client, calls: list[Awaitable[Any]]) -> list[Any]:
    """Run the store calls of ``calls`` (coroutines that each make one store transaction)
    as one SQLite group commit; their results, or the exceptions they raised."""
    store = client.store
    assert store._writer is not None, "group commits are SQLite's"
    hold, holding = threading.Event(), threading.Event()

    def block(tx: StoreTx) -> None:
        holding.set()
        hold.wait(10)

    blocker = asyncio.ensure_future(store.transaction(block))
    while not holding.is_set():
        await asyncio.sleep(0.001)
    jobs = [asyncio.ensure_future(c) for c in calls]
    await asyncio.sleep(0.05)  # all of them are queued behind the blocker
    hold.set()
    await blocker
    return await asyncio.gather(*jobs, return_exceptions=True)
