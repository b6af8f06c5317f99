"""A result awaited in one process for a run another process closes, a second and a half
after the wait began. On PostgreSQL the close arrives through ``LISTEN``; the close
watcher's poll is only a safety net there, every few seconds, so none runs meanwhile (it
polled every half second before). On SQLite the poll is how the close arrives."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine._store.gateway import Store


@workflow.defn
class Quick:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(1.5)
        return "closed elsewhere"


async def test_a_close_made_by_another_process_reaches_the_waiter(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = "elsewhere-" + uuid.uuid4().hex
    other_store = Store(db_url)  # another process's store, in effect
    other_store.open()
    other = Client(other_store)
    async with await Client.connect(db_url) as waiter:
        polls: list[list[str]] = []
        real = waiter.service.closed_among

        async def counted(run_ids: list[str]) -> Any:
            polls.append(list(run_ids))
            return await real(run_ids)

        monkeypatch.setattr(waiter.service, "closed_among", counted)
        # No worker of the waiting process serves the queue: the other one runs it.
        handle = await waiter.start_workflow(
            Quick.run, id="q-" + uuid.uuid4().hex, task_queue=queue
        )
        try:
            async with Worker(other, task_queue=queue, workflows=[Quick]):
                assert await handle.result() == "closed elsewhere"
        finally:
            await other.close()
            other_store.close()
    if waiter.store.postgres:
        assert polls == []
    else:
        assert polls and all(p == [handle.result_run_id] for p in polls)
