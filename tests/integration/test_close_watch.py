"""A result awaited in one process for a run another process closes, a second and a half
after the wait began. On PostgreSQL the close arrives through ``LISTEN``; the close
watcher's poll is only a safety net there, every few seconds, so none runs meanwhile (it
polled every half second before). On SQLite the poll is how the close arrives."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from engine import Client, Worker, workflow


@workflow.defn
class Quick:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(1.5)
        return "closed elsewhere"


async def test_a_close_made_by_another_process_reaches_the_waiter(
    db_url: str, elsewhere: Client, calls_of: Callable[[Any, str], list[list[Any]]]
) -> None:
    queue = "elsewhere-" + uuid.uuid4().hex
    async with await Client.connect(db_url) as waiter:
        polls = calls_of(waiter.service, "closed_among")
        # No worker of the waiting process serves the queue: the other one runs it.
        handle = await waiter.start_workflow(
            Quick.run, id="q-" + uuid.uuid4().hex, task_queue=queue
        )
        async with Worker(elsewhere, task_queue=queue, workflows=[Quick]):
            assert await handle.result() == "closed elsewhere"
    if waiter.store.postgres:
        assert polls == []
    else:
        assert polls and all(p == [handle.result_run_id] for p in polls)
