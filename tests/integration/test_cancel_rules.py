"""Cancel requests as Temporal's server takes them (checked on ``temporal server
start-dev``; the ``cancel_rules`` case of ``tests/interop/cases.py`` has the recording):
asking again changes nothing, a run that has closed takes the request without an error and
without an event, and only a run that does not exist is an error. Terminating a closed run
is an error, as there."""

from __future__ import annotations

import asyncio

import pytest

from engine import Client, Worker, workflow
from engine.common import WorkflowExecutionStatus
from engine.exceptions import WorkflowNotFoundError


@workflow.defn
class Stubborn:
    """Catches the first cancel request and waits to be told to finish."""

    def __init__(self) -> None:
        self.finish = False
        self.cancels = 0

    @workflow.run
    async def run(self) -> int:
        try:
            await workflow.wait_condition(lambda: self.finish)
        except asyncio.CancelledError:
            self.cancels += 1
            await workflow.wait_condition(lambda: self.finish)
        return self.cancels

    @workflow.signal
    def finish_now(self) -> None:
        self.finish = True


async def _types(handle) -> list[str]:
    return [e.event_type for e in (await handle.fetch_history()).events]


async def _count(handle, event_type: str, n: int) -> None:
    for _ in range(1000):
        if (await _types(handle)).count(event_type) >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {n} x {event_type}")


async def test_asking_twice_is_recorded_once(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Stubborn]):
        handle = await client.start_workflow(Stubborn.run, id="s", task_queue=task_queue)
        # Inside its try block first (a request in its first task would cancel the start).
        await _count(handle, "WorkflowTaskCompleted", 1)
        await handle.cancel()
        await _count(handle, "WorkflowTaskCompleted", 2)  # it caught the request
        await handle.cancel(reason="again")
        await handle.signal(Stubborn.finish_now)
        assert await asyncio.wait_for(handle.result(), 30) == 1
    assert (await _types(handle)).count("WorkflowExecutionCancelRequested") == 1


async def test_a_closed_run_takes_a_cancel_request_and_nothing_changes(
    client: Client, task_queue: str
) -> None:
    handle = await client.start_workflow(Stubborn.run, id="s", task_queue=task_queue)
    await handle.terminate(reason="done with it")
    before = await _types(handle)
    await handle.cancel()
    await client.get_workflow_handle("s", run_id=handle.first_execution_run_id).cancel()
    assert await _types(handle) == before
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    # Terminating it again is refused, as on Temporal ("already completed").
    with pytest.raises(WorkflowNotFoundError, match="TERMINATED"):
        await handle.terminate()


async def test_cancelling_a_run_that_never_was_is_an_error(client: Client) -> None:
    with pytest.raises(WorkflowNotFoundError):
        await client.get_workflow_handle("nobody").cancel()
    with pytest.raises(WorkflowNotFoundError):
        await client.get_workflow_handle("nobody", run_id="no-such-run").cancel()


async def test_a_cancel_for_another_chain_is_still_refused(client: Client, task_queue: str) -> None:
    first = await client.start_workflow(Stubborn.run, id="s", task_queue=task_queue)
    await first.terminate()
    second = await client.start_workflow(Stubborn.run, id="s", task_queue=task_queue)
    stale = client.get_workflow_handle("s", first_execution_run_id=first.first_execution_run_id)
    with pytest.raises(WorkflowNotFoundError):
        await stale.cancel()
    assert "WorkflowExecutionCancelRequested" not in await _types(second)
