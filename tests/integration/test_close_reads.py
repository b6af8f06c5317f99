"""Results awaited in a process that does not run the workflows: the reads of the runs
asked for in one turn of the event loop go in one read transaction
(``engine._service.close_reads``), each waiter still gets its own run's outcome or its
own error, and a failed transaction reaches every waiter of its batch."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine._store import closes
from engine.exceptions import StoreError, WorkflowNotFoundError


@workflow.defn
class Double:
    @workflow.run
    async def run(self, x: int) -> int:
        return 2 * x


async def _closed_elsewhere(elsewhere: Client, queue: str, n: int) -> list[Any]:
    """``n`` runs of ``Double`` (of 0, 1, ...) started and closed by the other client."""
    async with Worker(elsewhere, task_queue=queue, workflows=[Double]):
        done = [
            await elsewhere.start_workflow(
                Double.run, i, id=f"done{i}-{uuid.uuid4().hex}", task_queue=queue
            )
            for i in range(n)
        ]
        for handle in done:
            await handle.result()
    return done


async def test_results_awaited_together_are_read_together(
    db_url: str,
    elsewhere: Client,
    monkeypatch: pytest.MonkeyPatch,
    calls_of: Callable[[Any, str], list[list[Any]]],
) -> None:
    monkeypatch.setattr(closes, "CHUNK", 5)  # 12 runs: three statements of each kind
    queue = "reads-" + uuid.uuid4().hex
    async with await Client.connect(db_url) as waiter:
        batches = calls_of(waiter.service, "runs_and_close_events")
        handles = [
            await waiter.start_workflow(
                Double.run, i, id=f"d{i}-{uuid.uuid4().hex}", task_queue=queue
            )
            for i in range(12)
        ]
        results = asyncio.ensure_future(asyncio.gather(*(h.result() for h in handles)))
        while not batches:
            await asyncio.sleep(0.01)
        # The twelve waits began in one turn: one transaction read the twelve runs.
        assert sorted(batches[0]) == sorted(
            (waiter.namespace, h.id, h.result_run_id) for h in handles
        )
        async with Worker(elsewhere, task_queue=queue, workflows=[Double]):
            assert await asyncio.wait_for(results, 30) == [2 * i for i in range(12)]
        # Each waiter read its run again once the close woke it, and found it closed.
        asked = [key for batch in batches for key in batch]
        assert sorted(asked) == sorted(
            2 * [(waiter.namespace, h.id, h.result_run_id) for h in handles]
        )
        assert waiter.service.close_reads.requests == 24
        assert waiter.service.close_reads.transactions == len(batches) < 24


async def test_each_waiter_of_a_batch_gets_its_own_outcome(
    db_url: str, elsewhere: Client, calls_of: Callable[[Any, str], list[list[Any]]]
) -> None:
    queue = "own-" + uuid.uuid4().hex
    async with await Client.connect(db_url) as waiter:
        done = await _closed_elsewhere(elsewhere, queue, 3)
        batches = calls_of(waiter.service, "runs_and_close_events")
        open_run = await waiter.start_workflow(
            Double.run, 7, id="open-" + uuid.uuid4().hex, task_queue=queue
        )
        waits = [
            *(waiter.get_workflow_handle(h.id).result() for h in done),
            waiter.get_workflow_handle("missing-" + uuid.uuid4().hex).result(),
            waiter.get_workflow_handle(done[0].id, run_id=str(uuid.uuid4())).result(),
            open_run.result(),
        ]
        tasks = [asyncio.ensure_future(w) for w in waits]
        while not batches:
            await asyncio.sleep(0.01)
        assert len(batches[0]) == 6  # read in one transaction
        outcomes = await asyncio.gather(*tasks[:5], return_exceptions=True)
        assert outcomes[:3] == [0, 2, 4]
        assert isinstance(outcomes[3], WorkflowNotFoundError)
        assert isinstance(outcomes[4], WorkflowNotFoundError)
        assert not tasks[5].done()  # the open run's waiter waits for its close
        async with Worker(elsewhere, task_queue=queue, workflows=[Double]):
            assert await asyncio.wait_for(tasks[5], 30) == 14


async def test_a_failed_read_reaches_every_waiter_of_its_batch(
    db_url: str, elsewhere: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = "fail-" + uuid.uuid4().hex
    async with await Client.connect(db_url) as waiter:
        done = await _closed_elsewhere(elsewhere, queue, 3)
        calls = 0
        real = waiter.service.runs_and_close_events

        async def failing_once(keys: list[Any]) -> Any:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise StoreError("the database went away")
            return await real(keys)

        monkeypatch.setattr(waiter.service, "runs_and_close_events", failing_once)
        outcomes = await asyncio.gather(
            *(waiter.get_workflow_handle(h.id).result() for h in done), return_exceptions=True
        )
        assert calls == 1
        assert all(isinstance(o, StoreError) for o in outcomes), outcomes
        # The next reads are a transaction of their own, and succeed.
        again = [waiter.get_workflow_handle(h.id).result() for h in done]
        assert await asyncio.gather(*again) == [0, 2, 4]
        assert calls == 2


async def test_a_waiter_that_gave_up_is_skipped(
    db_url: str, calls_of: Callable[[Any, str], list[list[Any]]]
) -> None:
    async with await Client.connect(db_url) as waiter:
        batches = calls_of(waiter.service, "runs_and_close_events")
        gone = asyncio.ensure_future(
            waiter.service.run_and_close_event(waiter.namespace, "nobody", None)
        )
        kept = asyncio.ensure_future(
            waiter.service.run_and_close_event(waiter.namespace, "nobody-either", None)
        )
        await asyncio.sleep(0)  # both queued for the next turn
        gone.cancel()
        with pytest.raises(WorkflowNotFoundError):
            await kept
        assert batches == [[(waiter.namespace, "nobody-either", None)]]
        assert gone.cancelled()
