"""Replaying many runs, as temporalio's users check a deploy: ``client.list_workflows(q)
.map_histories()`` into ``Replayer.replay_workflows`` or ``workflow_replay_iterator``."""

from __future__ import annotations

import uuid

from engine import Client, NondeterminismError, Worker, workflow
from engine.worker import Replayer
from tests.interop import engine_code as code


@workflow.defn(name="HelloWF")
class HelloWithATimer:
    """HelloWF changed: a timer where the activity was."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(1)
        return name


async def test_listed_histories_replay_one_by_one(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex[:8]
    async with Worker(
        client, task_queue=task_queue, workflows=[code.HelloWF], activities=code.ALL_ACTIVITIES
    ):
        for i in range(3):
            await client.execute_workflow(
                code.HelloWF.run, f"n{i}", id=f"many-{key}-{i}", task_queue=task_queue
            )
    query = f"WorkflowType = 'HelloWF' AND TaskQueue = '{task_queue}'"
    histories = client.list_workflows(query).map_histories()
    results = await Replayer(workflows=[code.HelloWF]).replay_workflows(histories)
    assert len(results.results) == 3 and not results.replay_failures
    assert {r.history.workflow_id for r in results.results} == {f"many-{key}-{i}" for i in range(3)}

    changed = Replayer(workflows=[HelloWithATimer])
    async with changed.workflow_replay_iterator(
        client.list_workflows(query).map_histories()
    ) as replayed:
        failures = [r.replay_failure async for r in replayed]
    assert len(failures) == 3
    assert all(isinstance(f, NondeterminismError) for f in failures)
    summary = await changed.replay_workflows(
        client.list_workflows(query).map_histories(), raise_on_replay_failure=False
    )
    assert len(summary.replay_failures) == 3
