"""Forcing a group commit in a test: the calls queue behind changes that hold the writers
busy, so one writer runs them as one batch (SQLite's writer, or PostgreSQL's writer
threads: every one of them is held, then one alone is let go)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from engine import Client, activity, workflow
from engine._store.gateway import Store
from engine._store.tx import StoreTx


async def one_batch(client: Client | Store, calls: list[Awaitable[Any]]) -> list[Any]:
    """Run the store calls of ``calls`` (coroutines that each make one store transaction)
    as one group commit; their results, or the exceptions they raised."""
    store = client.store if isinstance(client, Client) else client
    writers = store._pg_writers
    assert store._writer is not None or writers is not None, "the store is not open"
    threads = 1 if writers is None else len(writers.threads)
    holds = [threading.Event() for _ in range(threads)]
    blockers = []
    for hold in holds:  # one at a time, so each holds a writer of its own
        holding = threading.Event()

        def block(
            tx: StoreTx, hold: threading.Event = hold, holding: threading.Event = holding
        ) -> None:
            holding.set()
            hold.wait(10)

        blockers.append(asyncio.ensure_future(store.transaction(block)))
        while not holding.is_set():
            await asyncio.sleep(0.001)
    jobs = [asyncio.ensure_future(c) for c in calls]
    await asyncio.sleep(0.05)  # all of them are queued behind the blockers
    holds[0].set()  # one writer is free: it takes them all
    if writers is not None:
        while not writers._queue.empty():
            await asyncio.sleep(0.001)
    for hold in holds[1:]:  # the others too, once the batch is taken
        hold.set()
    results = await asyncio.gather(*jobs, return_exceptions=True)
    await asyncio.gather(*blockers)
    return results


@activity.defn
async def never_run(x: int) -> int:  # completed by the test, not by a worker
    return x


@workflow.defn
class OneActivity:
    """Runs one activity on the task queue it is given (no worker serves it: the test
    takes the task and records its outcome)."""

    @workflow.run
    async def run(self, queue: str) -> int:
        return await workflow.execute_activity(
            never_run, 1, task_queue=queue, start_to_close_timeout=timedelta(seconds=60)
        )


async def activity_tasks(
    client: Client, n: int, queue: str, task_queue: str, prefix: str
) -> tuple[list[Any], list[Any]]:
    """Start ``n`` runs of :class:`OneActivity` (a worker of ``task_queue`` must serve
    them) and take their activity tasks from ``queue``: the runs' handles and the tasks."""
    handles = [
        await client.start_workflow(
            OneActivity.run, queue, id=f"{prefix}-{uuid.uuid4().hex[:8]}", task_queue=task_queue
        )
        for _ in range(n)
    ]
    tasks: list[Any] = []
    for _ in range(500):
        tasks += await client.service.poll_activity_tasks("default", queue, "test", 10)
        if len(tasks) == n:
            break
        await asyncio.sleep(0.01)
    assert len(tasks) == n
    return handles, tasks
