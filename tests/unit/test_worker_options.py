"""Worker options that temporalio users pass: accepted with temporalio's names, refused
clearly where this engine has no counterpart."""

from __future__ import annotations

import pytest

from engine import Client, workflow
from engine.exceptions import InvalidArgumentError
from engine.worker import SandboxedWorkflowRunner, UnsandboxedWorkflowRunner, Worker


@workflow.defn
class Nothing:
    @workflow.run
    async def run(self) -> None:
        return None


async def test_temporal_worker_options_are_accepted_or_refused_by_name(tmp_path) -> None:
    client = await Client.connect(f"sqlite:///{tmp_path / 'd.db'}")
    try:
        for runner in (UnsandboxedWorkflowRunner(), SandboxedWorkflowRunner()):
            Worker(client, task_queue="q", workflows=[Nothing], workflow_runner=runner)
        Worker(
            client,
            task_queue="q",
            workflows=[Nothing],
            unsandboxed_workflow_runner=UnsandboxedWorkflowRunner(),
            max_concurrent_local_activities=5,
            disable_eager_activity_execution=True,
            interceptors=[],
        )
        with pytest.raises(InvalidArgumentError, match="workflow_runner must be"):
            Worker(client, task_queue="q", workflows=[Nothing], workflow_runner=object())  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="interceptors are not supported"):
            Worker(client, task_queue="q", workflows=[Nothing], interceptors=[object()])
        with pytest.raises(InvalidArgumentError, match="max_concurrent_local_activities"):
            Worker(client, task_queue="q", workflows=[Nothing], max_concurrent_local_activities=0)
        with pytest.raises(TypeError, match="no_such_option"):
            Worker(client, task_queue="q", workflows=[Nothing], no_such_option=1)  # type: ignore[call-arg]
        with pytest.raises(InvalidArgumentError, match="pass an instance"):
            from tests.interop.engine_code import Shout

            Worker(client, task_queue="q", activities=[Shout])
    finally:
        await client.close()
