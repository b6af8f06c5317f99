"""Cron schedules of runs (both backends, time-skipping clock): each run waits for the
schedule's next time; a run that completes or fails starts the next, which sees the last
result or the failure; terminating the latest run ends the schedule."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from engine import ApplicationError, Worker, workflow
from engine.exceptions import InvalidArgumentError
from engine.testing import WorkflowEnvironment


@workflow.defn
class Ticker:
    @workflow.run
    async def run(self, fail_on: int) -> int:
        previous = workflow.get_last_completion_result(int) or 0
        failure = workflow.get_last_failure()
        if failure is not None:
            previous += 100  # the run after a failed one knows why it came
        count = previous + 1
        if count == fail_on:
            raise ApplicationError(f"tick {count} fails", non_retryable=True)
        return count


_CLOSES = {"WorkflowExecutionCompleted", "WorkflowExecutionFailed"}


async def _chain(env: WorkflowEnvironment, workflow_id: str, runs: int) -> list[dict]:
    """The first ``runs`` runs of the workflow id, oldest first: start and close events."""
    client = env.client
    run_id = (await client.get_workflow_handle(workflow_id).describe()).run_id
    chain: list[dict] = []
    while len(chain) < runs:
        events = (
            await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        ).events
        if events[-1].event_type in _CLOSES:
            chain.append({"start": events[0], "close": events[-1]})
            run_id = events[-1].attributes["newExecutionRunId"]
        else:
            await env.sleep(60)  # the time-skipping clock: on to the schedule's next time
    return chain


async def test_a_cron_chain(env: WorkflowEnvironment, task_queue: str) -> None:
    client = env.client
    workflow_id = "ticker-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[Ticker]):
        await client.start_workflow(
            Ticker.run, 2, id=workflow_id, task_queue=task_queue, cron_schedule="*/10 * * * *"
        )
        chain = await asyncio.wait_for(_chain(env, workflow_id, 3), 60)
        await client.get_workflow_handle(workflow_id).terminate(reason="enough")
    starts = [c["start"].attributes for c in chain]
    closes = [c["close"] for c in chain]
    assert [c.event_type for c in closes] == [
        "WorkflowExecutionCompleted",
        "WorkflowExecutionFailed",  # tick 2 fails
        "WorkflowExecutionCompleted",
    ]
    assert all(s["cronSchedule"] == "*/10 * * * *" for s in starts)
    assert all(s["initiator"] == "CONTINUE_AS_NEW_INITIATOR_CRON_SCHEDULE" for s in starts)
    assert "lastCompletionResult" in starts[1] and "continuedFailure" in starts[2]
    # The run after the failed one still has the last completed result (1) and the failure.
    results = [
        client.data_converter.from_payloads_json(c.attributes["result"]["payloads"], [int])[0]
        for c in closes
        if c.event_type == "WorkflowExecutionCompleted"
    ]
    assert results == [1, 102]
    # Every run started its first workflow task on a 10-minute boundary of the clock.
    for c in chain:
        run_id = c["start"].attributes["originalExecutionRunId"]
        events = (
            await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        ).events
        scheduled = next(e for e in events if e.event_type == "WorkflowTaskScheduled")
        when = datetime.fromtimestamp(scheduled.event_time, UTC)
        assert when.minute % 10 == 0 and when.second == 0, when
    # Terminating the latest run ended the schedule.
    latest = await client.get_workflow_handle(workflow_id).describe()
    assert latest.status.name == "TERMINATED"


async def test_bad_cron_schedules_are_refused(env: WorkflowEnvironment, task_queue: str) -> None:
    for bad, says in (
        ("every day", "not a cron expression"),
        ("@every 0s", "one second or more"),
        ("CRON_TZ=Nowhere/Land 0 9 * * *", "IANA"),
    ):
        with pytest.raises(InvalidArgumentError, match=says):
            await env.client.start_workflow(
                Ticker.run,
                0,
                id="bad-" + uuid.uuid4().hex,
                task_queue=task_queue,
                cron_schedule=bad,
            )
