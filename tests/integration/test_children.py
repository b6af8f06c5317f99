"""Child workflows: start, result, failure, cancel, parent close policy, on both backends."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from engine import ApplicationError, Worker, WorkflowExecutionStatus, WorkflowFailureError, workflow
from engine.exceptions import ChildWorkflowError
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer


@workflow.defn
class Child:
    @workflow.run
    async def run(self, what: str) -> str:
        if what == "fail":
            raise ApplicationError("child failed on purpose", type="ChildBroke")
        if what == "wait":
            await workflow.sleep(timedelta(days=3))
        return f"child did {what}"


@workflow.defn
class Parent:
    @workflow.run
    async def run(self, what: str) -> str:
        try:
            return await workflow.execute_child_workflow(
                Child.run, what, id=f"{workflow.info().workflow_id}-child"
            )
        except ChildWorkflowError as err:
            return f"caught {type(err.cause).__name__}: {err.cause}"


@workflow.defn
class ParentThatCancels:
    @workflow.run
    async def run(self) -> str:
        handle = await workflow.start_child_workflow(
            Child.run, "wait", id=f"{workflow.info().workflow_id}-child"
        )
        await workflow.sleep(1)
        handle.cancel()
        try:
            await handle
        except ChildWorkflowError as err:
            return f"child ended: {type(err.cause).__name__}"
        return "child finished"


@workflow.defn
class ParentThatLeaves:
    @workflow.run
    async def run(self) -> str:
        await workflow.start_child_workflow(
            Child.run, "wait", id=f"{workflow.info().workflow_id}-child"
        )
        return "left the child behind"


async def _run(env: WorkflowEnvironment, task_queue: str, wf, *args):  # type: ignore[no-untyped-def]
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[Child, Parent, ParentThatCancels, ParentThatLeaves],
    ):
        handle = await env.client.start_workflow(
            wf, args=list(args), id="p-" + uuid.uuid4().hex, task_queue=task_queue
        )
        return handle, await asyncio.wait_for(handle.result(), 30)


async def test_child_result_and_history(env: WorkflowEnvironment, task_queue: str) -> None:
    handle, result = await _run(env, task_queue, Parent.run, "the dishes")
    assert result == "child did the dishes"
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert types[4:7] == [
        "StartChildWorkflowExecutionInitiated",
        "ChildWorkflowExecutionStarted",
        "WorkflowTaskScheduled",
    ]
    assert "ChildWorkflowExecutionCompleted" in types
    child = env.client.get_workflow_handle(handle.id + "-child")
    child_start = (await child.fetch_history()).events[0].attributes
    assert child_start["parentWorkflowExecution"]["workflowId"] == handle.id
    # The parent's history replays.
    await Replayer(workflows=[Parent]).replay_workflow(await handle.fetch_history())


async def test_child_failure_reaches_the_parent(env: WorkflowEnvironment, task_queue: str) -> None:
    _, result = await _run(env, task_queue, Parent.run, "fail")
    assert result == "caught ApplicationError: ChildBroke: child failed on purpose"


async def test_cancelling_a_child(env: WorkflowEnvironment, task_queue: str) -> None:
    handle, result = await _run(env, task_queue, ParentThatCancels.run)
    assert result == "child ended: CancelledError"
    child = await env.client.get_workflow_handle(handle.id + "-child").describe()
    assert child.status == WorkflowExecutionStatus.CANCELED
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert "RequestCancelExternalWorkflowExecutionInitiated" in types
    assert "ExternalWorkflowExecutionCancelRequested" in types
    assert "ChildWorkflowExecutionCanceled" in types
    await Replayer(workflows=[ParentThatCancels]).replay_workflow(await handle.fetch_history())


async def test_parent_close_terminates_open_children(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    handle, result = await _run(env, task_queue, ParentThatLeaves.run)
    assert result == "left the child behind"
    child = env.client.get_workflow_handle(handle.id + "-child")
    assert (await child.describe()).status == WorkflowExecutionStatus.TERMINATED
    with pytest.raises(WorkflowFailureError):
        await child.result()
