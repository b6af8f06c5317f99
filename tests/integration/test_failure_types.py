"""Which exceptions fail the run rather than the workflow task (both backends):
``@workflow.defn(failure_exception_types=...)`` and
``Worker(workflow_failure_exception_types=...)``, as temporalio decides it."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from engine import Client, Worker, WorkflowFailureError, workflow
from engine.client import WorkflowUpdateFailedError
from engine.exceptions import InvalidArgumentError
from engine.worker import Replayer


@workflow.defn(name="Strict")
class Strict:
    @workflow.run
    async def run(self) -> None:
        raise ValueError("a bad value")


@workflow.defn(name="Strict", failure_exception_types=[ValueError])
class StrictFails:
    @workflow.run
    async def run(self) -> None:
        raise ValueError("a bad value")


@workflow.defn(failure_exception_types=[KeyError])
class Lookup:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.done)
        return "still running after the failed update"

    @workflow.update
    async def find(self, key: str) -> str:
        return {"a": "found"}[key]

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def _history_types(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [e.event_type for e in history.events]


async def test_a_plain_exception_fails_the_task_unless_listed(
    client: Client, task_queue: str
) -> None:
    base = uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[Strict]):
        handle = await client.start_workflow(Strict.run, id=f"a-{base}", task_queue=task_queue)
        for _ in range(500):
            if "WorkflowTaskFailed" in await _history_types(client, handle.id):
                break
            await asyncio.sleep(0.01)
        types = await _history_types(client, handle.id)
        assert "WorkflowTaskFailed" in types and "WorkflowExecutionFailed" not in types
        await handle.terminate()
    async with Worker(client, task_queue=task_queue, workflows=[StrictFails]):
        handle = await client.start_workflow(StrictFails.run, id=f"b-{base}", task_queue=task_queue)
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        assert "a bad value" in str(failed.value.cause)
    history = await handle.fetch_history()
    assert (await Replayer(workflows=[StrictFails]).replay_workflow(history)).replay_failure is None
    # The same history, replayed by code that does not list ValueError, fails the task.
    other = await Replayer(workflows=[Strict]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert other.replay_failure is not None


async def test_the_worker_option(client: Client, task_queue: str) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Strict],
        workflow_failure_exception_types=[Exception],
    ):
        handle = await client.start_workflow(
            Strict.run, id="w-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[Strict], workflow_failure_exception_types=[Exception])
    assert (await replayer.replay_workflow(history)).replay_failure is None
    with pytest.raises(InvalidArgumentError, match="exception classes"):
        Worker(
            client,
            task_queue=task_queue,
            workflows=[Strict],
            workflow_failure_exception_types=["x"],
        )  # type: ignore[list-item]


async def test_a_listed_exception_in_an_update_fails_the_update(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Lookup]):
        handle = await client.start_workflow(
            Lookup.run, id="l-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.execute_update(Lookup.find, "a") == "found"
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update(Lookup.find, "b")
        assert getattr(failed.value.cause, "type", None) == "KeyError"
        await handle.signal(Lookup.finish)
        assert (
            await asyncio.wait_for(handle.result(), 30) == "still running after the failed update"
        )
