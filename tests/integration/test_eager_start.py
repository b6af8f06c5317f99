"""Eager workflow start: a start hands a new run's first workflow task straight to a worker of
the same client in this process, in the start's own transaction, when that worker has a free
slot. The history is the one a queued start gives; a start that starts nothing (refused, or
an existing run used) gives the reserved slot back."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    Client,
    Worker,
    WorkflowAlreadyStartedError,
    WorkflowIDConflictPolicy,
)

from ..interop.engine_code import HelloWF, SignalWF, say_hello


async def _poller_idle(worker: Worker, slots: int) -> None:
    """Wait until the worker's poller runs and holds no slot (a poll in flight reserves
    them all, and a start then goes through the queue)."""
    runner = worker._workflows
    assert runner is not None
    for _ in range(2000):
        if runner._loop is not None and runner.slots.free == slots:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"the worker's poller never freed its slots ({runner.slots.free}/{slots})")


def _shape(events: list) -> list[tuple[int, str]]:
    return [(e.event_id, e.event_type) for e in events]


async def test_a_start_hands_the_first_task_to_the_local_worker(
    client: Client, task_queue: str
) -> None:
    async with Worker(
        client, task_queue=task_queue, workflows=[HelloWF], activities=[say_hello]
    ) as worker:
        await _poller_idle(worker, 100)
        eager = await client.start_workflow(
            HelloWF.run, "eager", id="eager-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await eager.result() == "Hello, eager!"
        assert worker.metrics.snapshot()["eager_workflow_starts"] == 1

        await _poller_idle(worker, 100)
        queued = await client.start_workflow(
            HelloWF.run,
            "queued",
            id="queued-" + uuid.uuid4().hex,
            task_queue=task_queue,
            request_eager_start=False,
        )
        assert await queued.result() == "Hello, queued!"
        assert worker.metrics.eager_workflow_starts == 1  # this one went through the queue

        eager_history = (await eager.fetch_history()).events
        queued_history = (await queued.fetch_history()).events
        # The same history either way, with the worker's identity on the task it took.
        assert _shape(eager_history) == _shape(queued_history)
        started = next(e for e in eager_history if e.event_type == "WorkflowTaskStarted")
        assert started.event_id == 3
        assert started.attributes["identity"] == worker.identity


async def test_a_start_that_starts_nothing_gives_the_slot_back(
    client: Client, task_queue: str
) -> None:
    # One slot: if a refused start kept it, the worker could never take a task again.
    async with Worker(
        client, task_queue=task_queue, workflows=[SignalWF], max_concurrent_workflow_tasks=1
    ) as worker:
        workflow_id = "once-" + uuid.uuid4().hex
        await _poller_idle(worker, 1)
        first = await client.start_workflow(SignalWF.run, 1, id=workflow_id, task_queue=task_queue)
        await _poller_idle(worker, 1)
        with pytest.raises(WorkflowAlreadyStartedError):
            await client.start_workflow(SignalWF.run, 1, id=workflow_id, task_queue=task_queue)
        await _poller_idle(worker, 1)
        same = await client.start_workflow(
            SignalWF.run,
            1,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        assert same.result_run_id == first.result_run_id
        await _poller_idle(worker, 1)  # the slot is back after both
        await first.signal(SignalWF.add_message, "done")
        assert await asyncio.wait_for(first.result(), 60) == ["done"]
        assert worker.metrics.eager_workflow_starts == 1


async def test_no_eager_start_with_a_start_delay_or_for_another_queue(
    client: Client, task_queue: str
) -> None:
    async with (
        Worker(
            client, task_queue=task_queue, workflows=[HelloWF], activities=[say_hello]
        ) as worker,
        Worker(
            client, task_queue=task_queue + "-other", workflows=[HelloWF], activities=[say_hello]
        ) as other,
    ):
        await _poller_idle(worker, 100)
        await _poller_idle(other, 100)
        delayed = await client.start_workflow(
            HelloWF.run,
            "later",
            id="delayed-" + uuid.uuid4().hex,
            task_queue=task_queue,
            start_delay=timedelta(milliseconds=200),
        )
        assert await delayed.result() == "Hello, later!"
        assert worker.metrics.eager_workflow_starts == 0
        assert other.metrics.eager_workflow_starts == 0
        history = (await delayed.fetch_history()).events
        assert history[0].attributes["firstWorkflowTaskBackoff"] == "0.200s"


async def test_a_cancelled_start_still_hands_its_task_over(client: Client, task_queue: str) -> None:
    # The caller gives up while the start commits: the run exists with its first task
    # started for the worker, which must still run it (not leave it to time out).
    async with Worker(
        client, task_queue=task_queue, workflows=[HelloWF], activities=[say_hello]
    ) as worker:
        await _poller_idle(worker, 100)
        workflow_id = "cancelled-" + uuid.uuid4().hex
        start = asyncio.ensure_future(
            client.start_workflow(HelloWF.run, "anyway", id=workflow_id, task_queue=task_queue)
        )
        await asyncio.sleep(0)  # the start's transaction is on its way
        start.cancel()
        with pytest.raises(asyncio.CancelledError):
            await start
        for _ in range(2000):  # the start commits on its own
            if worker.metrics.eager_workflow_starts:
                break
            await asyncio.sleep(0.005)
        handle = client.get_workflow_handle(workflow_id)
        assert await asyncio.wait_for(handle.result(), 60) == "Hello, anyway!"
        types = [e.event_type for e in (await handle.fetch_history()).events]
        assert "WorkflowTaskTimedOut" not in types
        await _poller_idle(worker, 100)  # and the slot came back


async def test_a_worker_stopping_during_an_eager_start_still_runs_the_task(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = client.service
    real = service.start_workflow

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(0.3)  # still committing when the worker begins to stop
        return await real(*args)

    monkeypatch.setattr(service, "start_workflow", slow)
    worker = Worker(client, task_queue=task_queue, workflows=[SignalWF])
    worker.start()
    await _poller_idle(worker, 100)
    start = asyncio.ensure_future(
        client.start_workflow(SignalWF.run, 1, id="stop-" + uuid.uuid4().hex, task_queue=task_queue)
    )
    await asyncio.sleep(0.05)
    await worker.shutdown()
    handle = await start
    events = (await handle.fetch_history()).events
    # The stopping worker ran the task it was handed: completed, not left to time out.
    assert [e.event_type for e in events][:4] == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
    ]
    assert worker.metrics.eager_workflow_starts == 1
