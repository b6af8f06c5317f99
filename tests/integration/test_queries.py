"""Queries: read-only, no history entry, answered on open and closed runs (both backends)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import pytest

from engine import Client, Worker, workflow
from engine.exceptions import WorkflowQueryFailedError

from .test_basics import _wait_for_event


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.done = False

    @workflow.run
    async def run(self) -> int:
        await workflow.wait_condition(lambda: self.done)
        return self.count

    @workflow.signal
    def add(self, n: int) -> None:
        self.count += n

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def current(self) -> int:
        return self.count

    @workflow.query
    def times(self, factor: int) -> int:
        return self.count * factor

    @workflow.query
    def broken(self) -> int:
        raise ValueError("this query handler is broken")


async def test_query_open_and_closed_runs(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Counter]):
        handle = await client.start_workflow(
            Counter.run, id="q-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(Counter.add, 3)
        await handle.signal(Counter.add, 4)
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        for _ in range(100):  # wait until both signals are processed
            if await handle.query(Counter.current) == 7:
                break
        assert await handle.query(Counter.current) == 7
        assert await handle.query("times", 10) == 70
        before = len((await handle.fetch_history()).events)
        await handle.query(Counter.current)
        assert len((await handle.fetch_history()).events) == before  # no history entry
        with pytest.raises(WorkflowQueryFailedError, match=r"no query handler 'nope'.*current"):
            await handle.query("nope")
        with pytest.raises(WorkflowQueryFailedError, match="broken"):
            await handle.query(Counter.broken)
        await handle.signal(Counter.finish)
        assert await handle.result() == 7
        assert await handle.query(Counter.current) == 7  # closed runs answer too


async def test_query_without_a_worker_times_out_clearly(client: Client, task_queue: str) -> None:
    handle = await client.start_workflow(
        Counter.run, id="q-" + uuid.uuid4().hex, task_queue=task_queue
    )
    with pytest.raises(WorkflowQueryFailedError, match=f"polling task queue '{task_queue}'"):
        await handle.query(Counter.current, timeout=timedelta(milliseconds=300))


async def test_query_sees_a_signal_no_task_has_processed_yet(
    client: Client, task_queue: str
) -> None:
    handle = await client.start_workflow(
        Counter.run, id="q-" + uuid.uuid4().hex, task_queue=task_queue
    )
    async with Worker(client, task_queue=task_queue, workflows=[Counter]):
        await _wait_for_event(handle, "WorkflowTaskCompleted")
    # No worker runs while the signal arrives: only the query's replay can apply it.
    await handle.signal(Counter.add, 5)
    async with Worker(client, task_queue=task_queue, workflows=[Counter]):
        assert await handle.query(Counter.current) == 5


@workflow.defn
class StrictCounter(Counter):
    @workflow.signal
    def add(self, n: int) -> None:
        if n < 0:
            from engine import ApplicationError

            raise ApplicationError("negative amounts are refused", type="Negative")
        self.count += n


async def test_application_error_in_a_signal_handler_fails_the_run(
    client: Client, task_queue: str
) -> None:
    from engine import WorkflowExecutionStatus, WorkflowFailureError

    async with Worker(client, task_queue=task_queue, workflows=[StrictCounter]):
        # By type name: StrictCounter.run is the inherited Counter.run function itself.
        handle = await client.start_workflow(
            "StrictCounter", id="sc-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(StrictCounter.add, -1)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert "negative amounts" in str(info.value.cause)
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED


async def test_reject_condition_refuses_closed_runs_as_temporal_does(
    client: Client, task_queue: str
) -> None:
    from engine import WorkflowExecutionStatus
    from engine.client import WorkflowQueryRejectedError
    from engine.common import QueryRejectCondition

    async with Worker(client, task_queue=task_queue, workflows=[Counter]):
        handle = await client.start_workflow(
            Counter.run, id="reject-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(Counter.add, 2)
        # Open: every condition lets the query through.
        for condition in QueryRejectCondition:
            assert await handle.query(Counter.current, reject_condition=condition) == 2
        await handle.signal(Counter.finish)
        assert await handle.result() == 2
        with pytest.raises(WorkflowQueryRejectedError) as rejected:
            await handle.query(Counter.current, reject_condition=QueryRejectCondition.NOT_OPEN)
        assert rejected.value.status == WorkflowExecutionStatus.COMPLETED
        # Completed cleanly: NOT_COMPLETED_CLEANLY still answers.
        clean = QueryRejectCondition.NOT_COMPLETED_CLEANLY
        assert await handle.query(Counter.current, reject_condition=clean) == 2

        failed = await client.start_workflow(
            Counter.run, id="reject-t-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await failed.terminate("stop")
        with pytest.raises(WorkflowQueryRejectedError) as rejected:
            await failed.query(Counter.current, reject_condition=clean)
        assert rejected.value.status == WorkflowExecutionStatus.TERMINATED


@workflow.defn
class Stuck:
    def __init__(self) -> None:
        self.approved = False

    @workflow.run
    async def run(self) -> str:
        workflow.set_current_details("waiting for a manager")
        helper = asyncio.create_task(self._remind(), name="reminder")
        await self._wait_for_approval()
        helper.cancel()
        return "approved"

    async def _wait_for_approval(self) -> None:
        await workflow.wait_condition(lambda: self.approved)  # STUCK-HERE

    async def _remind(self) -> None:
        await workflow.sleep(3600)  # REMINDER-HERE

    @workflow.signal(description="A manager says yes")
    def approve(self) -> None:
        self.approved = True

    @workflow.query
    def status(self) -> bool:
        return self.approved


async def test_built_in_queries_say_where_the_run_waits(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Stuck]):
        handle = await client.start_workflow(
            Stuck.run, id="stuck-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "TimerStarted")
        trace = await handle.query("__stack_trace")
        metadata = await handle.query("__temporal_workflow_metadata")
        await handle.signal(Stuck.approve)
        assert await handle.result() == "approved"
    here = __file__
    main, reminder = trace.split("\n\n")
    assert main.startswith("the workflow's run method waits at")
    assert f'File "{here}"' in main and "in _wait_for_approval" in main
    assert "# STUCK-HERE" in main and "in run" in main
    assert reminder.startswith("task reminder waits at") and "# REMINDER-HERE" in reminder
    assert "engine/" not in trace.replace(here, "")  # the engine's own frames are left out
    assert metadata["definition"]["type"] == "Stuck"
    # As temporalio lists them: sorted by name, the built-in ones among the others, a
    # description where the handler has one.
    assert metadata["definition"]["queryDefinitions"] == [
        {"name": "__stack_trace"},
        {"name": "__temporal_workflow_metadata"},
        {"name": "status"},
    ]
    assert metadata["definition"]["signalDefinitions"] == [
        {"name": "approve", "description": "A manager says yes"}
    ]
    assert metadata["currentDetails"] == "waiting for a manager"


@workflow.defn
class SlowFirstTask:
    def __init__(self) -> None:
        self.notes: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.query
    def seen(self) -> list[str]:
        return self.notes

    @workflow.run
    async def run(self) -> None:
        time.sleep(0.4)  # the first workflow task is still running when the signal comes
        await workflow.wait_condition(lambda: False)


async def test_a_query_after_a_signal_sees_it_even_while_a_task_runs(
    client: Client, task_queue: str
) -> None:
    """A signal that arrives while a workflow task is running waits outside the history
    until the task ends; a query asked then waits for that task, as Temporal's server holds
    it back, so it sees the signal (read after write)."""
    async with Worker(client, task_queue=task_queue, workflows=[SlowFirstTask]):
        handle = await client.start_workflow(
            SlowFirstTask.run, id="slow-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(SlowFirstTask.note, "hello")
        assert await handle.query(SlowFirstTask.seen) == ["hello"]
        await handle.terminate()
