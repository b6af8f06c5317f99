"""Hand-offs between runners of one process (``engine._service.handoff``), with real workers:
an activity's outcome gives the workflow task it schedules to the worker that caches the
run, a completion starts its activities for a worker of the same queue, a runner refuses
reservations from another event loop, and every reserved slot comes back."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest

from engine import Client, Worker, activity, workflow
from engine._worker.activities import ActivityRunner
from engine._worker.workflows import WorkflowRunner


@activity.defn
async def double(x: int) -> int:
    return 2 * x


@workflow.defn
class Chain:
    """Three activities in a row on the queue ``activity_queue`` names."""

    @workflow.run
    async def run(self, activity_queue: str) -> int:
        x = 1
        for _ in range(3):
            x = await workflow.execute_activity(
                double,
                x,
                task_queue=activity_queue,
                start_to_close_timeout=timedelta(seconds=30),
            )
        return x


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The activity types started eagerly (handed to an activity runner, not polled)."""
    types: list[str] = []
    start = ActivityRunner.start_reserved_activity

    def spy(self: ActivityRunner, task: Any) -> None:
        types.append(task.activity_type)
        start(self, task)

    monkeypatch.setattr(ActivityRunner, "start_reserved_activity", spy)
    return types


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str | None]]:
    """The workflow-task hand-offs settled: (reservation kind, run id of the task given,
    or None when the slot came back unused)."""
    settled: list[tuple[str, str | None]] = []
    settle = WorkflowRunner.settle_workflow_task

    def spy(self: WorkflowRunner, reservation: Any, task: Any) -> None:
        settled.append((reservation.kind, None if task is None else task.run_id))
        settle(self, reservation, task)

    monkeypatch.setattr(WorkflowRunner, "settle_workflow_task", spy)
    return settled


async def _idle(runner: WorkflowRunner | ActivityRunner) -> None:
    """Wait until the runner polls and every slot is free again."""
    for _ in range(2000):
        slots = runner.slots
        if runner._loop is not None and slots.free == slots.total and not slots.handoffs_pending:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(
        f"slots never all came back: {runner.slots.free}/{runner.slots.total} free, "
        f"{runner.slots.handoffs_pending} hand-offs pending"
    )


async def test_an_activity_outcome_hands_the_next_task_to_the_worker_caching_the_run(
    client: Client, task_queue: str, handed: list[tuple[str, str | None]]
) -> None:
    # Workflows and activities on two workers (two queues): the activity worker's outcome
    # still starts the run's next workflow task for the workflow worker, which holds it.
    activity_queue = task_queue + "-activities"
    async with (
        Worker(client, task_queue=task_queue, workflows=[Chain], identity="wf-worker") as wfs,
        Worker(
            client, task_queue=activity_queue, activities=[double], identity="act-worker"
        ) as acts,
    ):
        handle = await client.start_workflow(
            Chain.run,
            activity_queue,
            id="chain-" + uuid.uuid4().hex,
            task_queue=task_queue,
            request_eager_start=False,
        )
        assert await asyncio.wait_for(handle.result(), 60) == 8
        assert wfs._workflows is not None and acts._activities is not None
        await _idle(wfs._workflows)
        await _idle(acts._activities)
    run_id = handle.result_run_id
    # Three outcomes, each offered to the worker that caches the run; each offer took the
    # task (the run's queue is that worker's) or gave its slot back.
    assert len(handed) == 3 and all(kind == "next" for kind, _ in handed)
    assert [r for _, r in handed if r is not None], handed
    assert all(r in (None, run_id) for _, r in handed)
    events = (await handle.fetch_history()).events
    starts = [e for e in events if e.event_type == "WorkflowTaskStarted"]
    assert {e.attributes["identity"] for e in starts} == {"wf-worker"}
    assert "WorkflowTaskTimedOut" not in {e.event_type for e in events}


async def test_a_completion_starts_its_activities_for_a_worker_of_the_same_queue(
    client: Client, task_queue: str, started: list[str]
) -> None:
    # Workflow runner and activity runner in two workers, one queue. The activity worker
    # polls once, then only when its queue is notified: no poll of its can hold its slots
    # when a completion asks for them, so every attempt is started eagerly.
    async with (
        Worker(client, task_queue=task_queue, workflows=[Chain]) as wfs,
        Worker(
            client,
            task_queue=task_queue,
            activities=[double],
            poll_interval=timedelta(seconds=60),
        ) as acts,
    ):
        assert acts._activities is not None
        await _idle(acts._activities)
        handle = await client.start_workflow(
            Chain.run, task_queue, id="same-queue-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 60) == 8
        assert wfs._workflows is not None and acts._activities is not None
        await _idle(wfs._workflows)
        await _idle(acts._activities)
    assert started == ["double"] * 3  # none went through the queue


async def test_a_runner_refuses_reservations_from_another_event_loop(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Chain], activities=[double]) as w:
        assert w._workflows is not None
        await _idle(w._workflows)
        handoffs = client.service.handoffs
        found: list[Any] = []

        def elsewhere() -> None:
            async def ask() -> None:
                found.append(handoffs.offer_start(client.namespace, task_queue))
                found.append(handoffs.offer_activities(client.namespace, task_queue, 3).count)

            asyncio.run(ask())

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert found == [None, 0]
        # On the worker's own loop the same offer is given, and releasing it frees the slot.
        offer = handoffs.offer_start(client.namespace, task_queue)
        assert offer is not None and offer.kind == "start"
        assert w._workflows.slots.handoffs_pending == 1
        offer.release()
        await _idle(w._workflows)
    # A stopped worker is no longer registered.
    assert not handoffs.serves(client.namespace, task_queue)
    assert handoffs.offer_start(client.namespace, task_queue) is None


async def test_disable_eager_activity_execution_sends_activities_through_the_queue(
    client: Client, task_queue: str, started: list[str]
) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Chain],
        activities=[double],
        disable_eager_activity_execution=True,
    ):
        handle = await client.start_workflow(
            Chain.run, task_queue, id="no-eager-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 60) == 8
    assert started == []


@workflow.defn
class Naps:
    """Two short timers in a row."""

    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(0.3)
        await workflow.sleep(0.3)
        return "rested"


async def test_a_fired_timer_hands_the_task_it_schedules_to_the_worker_caching_the_run(
    client: Client, task_queue: str, handed: list[tuple[str, str | None]]
) -> None:
    # The timer loop (the worker's own host) reserves a slot with the worker that caches
    # the run before the timer is due; the transaction that fires the timer starts the
    # run's next workflow task for that worker, which is given it without polling.
    # The worker polls once, then only when its queue is notified: a poll in flight holds
    # the free slots, and a periodic one could hold them when a timer comes due.
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Naps],
        identity="napper",
        poll_interval=timedelta(seconds=60),
    ) as w:
        handle = await client.start_workflow(
            Naps.run, id="naps-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 60) == "rested"
        assert w._workflows is not None
        await _idle(w._workflows)
    run_id = handle.result_run_id
    # One hand-off per timer, each with the task.
    assert [r for kind, r in handed if kind == "next"] == [run_id, run_id], handed
    events = (await handle.fetch_history()).events
    kinds = [e.event_type for e in events]
    assert kinds.count("TimerFired") == 2
    assert "WorkflowTaskTimedOut" not in kinds
    for i, kind in enumerate(kinds):
        if kind == "TimerFired":  # the task it scheduled was started by the worker
            started = next(e for e in events[i:] if e.event_type == "WorkflowTaskStarted")
            assert started.attributes["identity"] == "napper"
