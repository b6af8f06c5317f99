"""Messages to other runs (both backends): signals and cancel requests through
``workflow.get_external_workflow_handle``, and signal-with-start."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from engine import ApplicationError, Client, Worker, workflow
from engine.worker import Replayer


@workflow.defn
class Inbox:
    def __init__(self) -> None:
        self.messages: list[str] = []

    @workflow.run
    async def run(self, expected: int) -> list[str]:
        await workflow.wait_condition(lambda: len(self.messages) >= expected)
        return self.messages

    @workflow.signal
    def post(self, message: str) -> None:
        self.messages.append(message)


@workflow.defn
class Napper:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.sleep(timedelta(days=1))
        except asyncio.CancelledError:
            return "woken by a cancel request"
        return "slept"


@workflow.defn
class Sender:
    @workflow.run
    async def run(self, inbox_id: str, napper_id: str) -> list[str]:
        await workflow.get_external_workflow_handle(inbox_id).signal(Inbox.post, "hello")
        await workflow.get_external_workflow_handle_for(Inbox.run, inbox_id).signal(
            "post", args=["again"]
        )
        await workflow.get_external_workflow_handle(napper_id).cancel(reason="enough")
        outcomes = []
        ghost = workflow.get_external_workflow_handle(inbox_id + "-ghost")
        for attempt in (ghost.signal("post", "x"), ghost.cancel()):
            try:
                await attempt
            except ApplicationError as err:
                outcomes.append(f"{err.type}: {err.message}")
        return outcomes


async def test_signal_and_cancel_other_runs(client: Client, task_queue: str) -> None:
    base = uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[Inbox, Napper, Sender]):
        inbox = await client.start_workflow(Inbox.run, 2, id=f"inbox-{base}", task_queue=task_queue)
        napper = await client.start_workflow(Napper.run, id=f"nap-{base}", task_queue=task_queue)
        sender = await client.start_workflow(
            Sender.run, args=[inbox.id, napper.id], id=f"sender-{base}", task_queue=task_queue
        )
        outcomes = await asyncio.wait_for(sender.result(), 30)
        assert outcomes == [
            "ExternalWorkflowExecutionNotFound: Unable to signal external workflow because it "
            "was not found",
            "ExternalWorkflowExecutionNotFound: Unable to cancel external workflow because not "
            "found",
        ]
        assert await asyncio.wait_for(inbox.result(), 30) == ["hello", "again"]
        assert await asyncio.wait_for(napper.result(), 30) == "woken by a cancel request"
    events = (await sender.fetch_history()).events
    types = [e.event_type for e in events]
    for kind in (
        "SignalExternalWorkflowExecutionInitiated",
        "ExternalWorkflowExecutionSignaled",
        "RequestCancelExternalWorkflowExecutionInitiated",
        "ExternalWorkflowExecutionCancelRequested",
        "SignalExternalWorkflowExecutionFailed",
        "RequestCancelExternalWorkflowExecutionFailed",
    ):
        assert kind in types, kind
    failed = next(e for e in events if e.event_type == "SignalExternalWorkflowExecutionFailed")
    assert failed.attributes["cause"].endswith("EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND")
    # The receiver knows who signalled it.
    signaled = [
        e
        for e in (await inbox.fetch_history()).events
        if e.event_type == "WorkflowExecutionSignaled"
    ]
    assert signaled[0].attributes["externalWorkflowExecution"]["workflowId"] == sender.id
    requested = next(
        e
        for e in (await napper.fetch_history()).events
        if e.event_type == "WorkflowExecutionCancelRequested"
    )
    assert requested.attributes["externalWorkflowExecution"]["workflowId"] == sender.id
    # The sender's history replays.
    replayed = await Replayer(workflows=[Sender]).replay_workflow(await sender.fetch_history())
    assert replayed.replay_failure is None


async def test_signal_with_start(client: Client, task_queue: str) -> None:
    workflow_id = "inbox-" + uuid.uuid4().hex
    # No worker yet: the first call starts the run with its signal, the second only signals.
    first = await client.start_workflow(
        Inbox.run,
        2,
        id=workflow_id,
        task_queue=task_queue,
        start_signal="post",
        start_signal_args=["one"],
    )
    second = await client.start_workflow(
        Inbox.run,
        2,
        id=workflow_id,
        task_queue=task_queue,
        start_signal="post",
        start_signal_args=["two"],
    )
    assert second.result_run_id == first.result_run_id
    types = [e.event_type for e in (await first.fetch_history()).events]
    assert types == [
        "WorkflowExecutionStarted",
        "WorkflowExecutionSignaled",
        "WorkflowTaskScheduled",
        "WorkflowExecutionSignaled",
    ]
    async with Worker(client, task_queue=task_queue, workflows=[Inbox]):
        assert await asyncio.wait_for(first.result(), 30) == ["one", "two"]
    with pytest.raises(ValueError, match="start_signal"):
        await client.start_workflow(
            Inbox.run, 1, id=workflow_id, task_queue=task_queue, start_signal=""
        )


async def test_signal_with_start_waits_out_the_start_delay(env: object, task_queue: str) -> None:
    client = env.client  # type: ignore[attr-defined]
    handle = await client.start_workflow(
        Inbox.run,
        1,
        id="delayed-" + uuid.uuid4().hex,
        task_queue=task_queue,
        start_signal="post",
        start_signal_args=["later"],
        start_delay=timedelta(hours=1),
    )
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert types == ["WorkflowExecutionStarted", "WorkflowExecutionSignaled"]  # no task yet
    async with Worker(client, task_queue=task_queue, workflows=[Inbox]):
        assert await asyncio.wait_for(handle.result(), 30) == ["later"]
    events = (await handle.fetch_history()).events
    scheduled = next(e for e in events if e.event_type == "WorkflowTaskScheduled")
    assert scheduled.event_time - events[0].event_time >= 3600


@workflow.defn
class Relay:
    """Continues as new from a signal handler (allowed there, as in temporalio)."""

    @workflow.run
    async def run(self, generation: int) -> int:
        await workflow.wait_condition(lambda: generation >= 1)
        return generation

    @workflow.signal
    def next_generation(self) -> None:
        workflow.continue_as_new(1)


async def test_continue_as_new_from_a_signal_handler(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Relay]):
        handle = await client.start_workflow(
            Relay.run, 0, id="relay-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(Relay.next_generation)
        assert await asyncio.wait_for(handle.result(), 30) == 1
    first = client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
    assert (await first.fetch_history()).events[-1].event_type == "WorkflowExecutionContinuedAsNew"
