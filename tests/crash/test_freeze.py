"""Stale work is fenced (issue 14, item 2): a worker frozen past its activity's timeout,
or a workflow task completed after its timeout, changes nothing when it comes back.

As on Temporal, an activity's task token names its attempt; once that attempt timed out
and another ran, the late heartbeat and completion no longer match and are refused. A
workflow task is fenced the same way by its started event (and request id).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from engine import Client, Worker, workflow
from engine._model import commands as cmd
from engine._service.workflow_tasks import TaskNotFoundError

from . import worker_proc
from .procs import WorkerProcess, assert_no_gaps, until
from .worker_proc import FreezeWF, freezable

pytestmark = pytest.mark.crash


async def test_a_worker_frozen_past_the_timeout_changes_nothing_when_thawed(
    client: Client, db_url: str, task_queue: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wid = "freeze-act"
    monkeypatch.setattr(worker_proc, "MARKERS", tmp_path)  # for attempt 2, run here
    frozen = WorkerProcess(db_url, task_queue, tmp_path, log_level="DEBUG")
    try:
        handle = await client.start_workflow(FreezeWF.run, "order", id=wid, task_queue=task_queue)

        async def attempt1_running() -> bool:
            return any(p.name.startswith(f"{wid}.attempt1.pid") for p in tmp_path.iterdir())

        await until(attempt1_running)
        frozen.freeze()  # in the middle of attempt 1 (start-to-close 2 s)
        # Attempt 1 times out; attempt 2 runs here and completes; the run waits on.
        async with Worker(
            client, task_queue=task_queue, workflows=[FreezeWF], activities=[freezable]
        ):

            async def activity_done() -> bool:
                # ... and the workflow task that saw it completed: the run waits quietly
                # for its signal, so its history stays as it is unless the thaw changes it.
                types = [e.event_type for e in (await handle.fetch_history()).events]
                return "ActivityTaskCompleted" in types and types[-1] == "WorkflowTaskCompleted"

            await until(activity_done, timeout=60)
            history = (await handle.fetch_history()).to_json_dict()
            attempts = await handle.fetch_attempts()
            assert [a["outcome"] for a in attempts] == ["timed_out", "completed"]

            frozen.thaw()  # attempt 1 goes on: a heartbeat, then a completion, too late

            async def refused() -> bool:
                cancelled = (tmp_path / f"{wid}.attempt1.cancelled.not_found=True").exists()
                return cancelled and "activity result dropped" in frozen.output()

            await until(refused, timeout=30)
            # Nothing changed: the history and the attempts are as they were.
            after = await handle.fetch_history()
            assert after.to_json_dict() == history
            assert await handle.fetch_attempts() == attempts
            await handle.signal(FreezeWF.release)
            assert await asyncio.wait_for(handle.result(), 30) == "order by attempt 2"
    finally:
        frozen.stop()
    # The heartbeat told attempt 1 it is gone (not_found); its completion was refused
    # because attempt 1 is over, as Temporal refuses a task token of an earlier attempt.
    out = frozen.output()
    refusal = out.split("activity result dropped", 1)[1].splitlines()[0]
    assert "attempt 1" in refusal, refusal
    assert "Traceback" not in out and "crashed" not in out
    assert_no_gaps((await handle.fetch_history()).events)


@workflow.defn
class Answer:
    @workflow.run
    async def run(self) -> str:
        return "from the live worker"


async def test_a_workflow_task_completed_after_its_timeout_is_refused(
    client: Client, task_queue: str
) -> None:
    handle = await client.start_workflow(
        Answer.run,
        id="late-wft",
        task_queue=task_queue,
        task_timeout=timedelta(seconds=1),
    )
    service = client.service
    # A worker takes the first workflow task... and goes silent past its 1 s timeout.
    stale = []
    while not stale:
        stale = await service.poll_workflow_tasks(
            client.namespace, task_queue, "frozen-worker", {}, 1
        )
    async with Worker(client, task_queue=task_queue, workflows=[Answer]):
        assert await asyncio.wait_for(handle.result(), 30) == "from the live worker"
    before = (await handle.fetch_history()).to_json_dict()
    types = [e["eventType"] for e in before["events"]]
    assert "EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT" in types
    # The frozen worker wakes up and completes its task with another result.
    done = cmd.CompleteWorkflowExecution(
        result=[client.data_converter.to_payloads_json(["from the frozen worker"])[0]]
    )
    with pytest.raises(TaskNotFoundError):
        await service.complete_workflow_task(stale[0], [done], "frozen-worker", 0, [], [])
    with pytest.raises(TaskNotFoundError):
        await service.fail_workflow_task(stale[0], "UNHANDLED_COMMAND", {}, "frozen-worker")
    assert (await handle.fetch_history()).to_json_dict() == before
    assert await handle.result() == "from the live worker"
