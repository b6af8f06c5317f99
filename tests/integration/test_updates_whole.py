"""Updates as temporalio has them (both backends): start_update and its stages, update
handles by id, idempotent update ids, update-with-start, current_update_info, and what
happens to handlers still running when the run closes."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from datetime import timedelta

import pytest

from engine import ApplicationError, Client, Worker, activity, workflow
from engine.client import (
    WithStartWorkflowOperation,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from engine.common import WorkflowIDConflictPolicy
from engine.exceptions import InvalidArgumentError, WorkflowAlreadyStartedError
from engine.service import RPCError, RPCStatusCode
from engine.worker import Replayer
from engine.workflow import HandlerUnfinishedPolicy, UnfinishedUpdateHandlersWarning


@activity.defn
async def stamp(text: str) -> str:
    return f"stamped {text}"


@workflow.defn
class Desk:
    def __init__(self) -> None:
        self.open = True
        self.go = False
        self.seen: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: not self.open)
        return self.seen

    @workflow.signal
    def close(self) -> None:
        self.open = False

    @workflow.signal
    def proceed(self) -> None:
        self.go = True

    @workflow.update
    async def slow(self, text: str) -> str:
        """Accepted at once; completes once ``proceed`` is signalled."""
        await workflow.wait_condition(lambda: self.go)
        self.seen.append(text)
        return f"done {text}"

    @workflow.update
    async def who(self) -> list[str]:
        """The update info seen by the handler and by a task it starts."""
        info = workflow.current_update_info()
        assert info is not None

        async def child() -> str:
            child_info = workflow.current_update_info()
            assert child_info is not None
            return child_info.id

        inner = await asyncio.create_task(child())
        return [info.name, info.id, inner]

    @workflow.update
    def checked(self, n: int) -> int:
        return n * 2

    @checked.validator
    def check(self, n: int) -> None:
        if n < 0:
            raise ApplicationError("n must not be negative", type="Negative")

    @workflow.query
    def outside_update(self) -> bool:
        return workflow.current_update_info() is None


async def _start(client: Client, task_queue: str) -> object:
    return await client.start_workflow(
        Desk.run, id="desk-" + uuid.uuid4().hex, task_queue=task_queue
    )


def _count(events: list, kind: str) -> int:
    return sum(e.event_type == kind for e in events)


async def test_start_update_returns_at_acceptance_and_result_waits(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Desk], activities=[stamp]):
        handle = await _start(client, task_queue)
        update = await handle.start_update(
            Desk.slow, "a", wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="slow-1"
        )
        assert (update.id, update.workflow_id) == ("slow-1", handle.id)
        assert update.workflow_run_id == handle.result_run_id
        events = (await handle.fetch_history()).events
        assert _count(events, "WorkflowExecutionUpdateAccepted") == 1
        assert _count(events, "WorkflowExecutionUpdateCompleted") == 0  # still waiting
        # The same id again is the same update: no second acceptance.
        again = await handle.start_update(
            Desk.slow, "other", wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="slow-1"
        )
        await handle.signal(Desk.proceed)
        assert await update.result() == "done a"
        assert await again.result() == "done a"
        # A handle by id, on its own: typed from the method, or not.
        assert await handle.get_update_handle_for(Desk.slow, "slow-1").result() == "done a"
        assert await handle.get_update_handle("slow-1").result() == "done a"
        assert await handle.execute_update(Desk.slow, "b", id="slow-1") == "done a"
        with pytest.raises(RPCError) as missing:
            await handle.get_update_handle("never-sent").result()
        assert missing.value.status == RPCStatusCode.NOT_FOUND
        assert "never-sent" in str(missing.value)
        await handle.signal(Desk.close)
        assert await handle.result() == ["a"]
    events = (await handle.fetch_history()).events
    assert _count(events, "WorkflowExecutionUpdateAccepted") == 1
    assert _count(events, "WorkflowExecutionUpdateCompleted") == 1
    # After the run closed, the finished update's outcome is still there by id.
    assert await handle.get_update_handle("slow-1").result() == "done a"
    result = await Replayer(workflows=[Desk]).replay_workflow(await handle.fetch_history())
    assert result.replay_failure is None


async def test_rejections_and_bad_requests_leave_the_history_alone(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Desk], activities=[stamp]):
        handle = await _start(client, task_queue)
        assert await handle.execute_update(Desk.checked, 4) == 8
        before = len((await handle.fetch_history()).events)
        rejected = await handle.start_update(
            Desk.checked, -1, wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await rejected.result()
        assert isinstance(failed.value.cause, ApplicationError)
        assert failed.value.cause.type == "Negative"
        nameless = await handle.start_update(
            "no_such_update", wait_for_stage=WorkflowUpdateStage.ACCEPTED
        )  # returns, as temporalio's: its result says what went wrong
        with pytest.raises(WorkflowUpdateFailedError) as unknown:
            await nameless.result()
        assert "no update handler 'no_such_update'" in str(unknown.value.cause)
        assert "checked" in str(unknown.value.cause)  # the handlers it has
        with pytest.raises(InvalidArgumentError, match="ADMITTED"):
            await handle.start_update(Desk.checked, 1, wait_for_stage=WorkflowUpdateStage.ADMITTED)
        events = (await handle.fetch_history()).events
        # The rejected and unknown updates' tasks wrote only task events.
        assert not any(e.event_type.startswith("WorkflowExecutionUpdate") for e in events[before:])
        await handle.signal(Desk.close)
        await handle.result()
        with pytest.raises(RPCError) as closed:
            await handle.execute_update(Desk.checked, 1)
        assert closed.value.status == RPCStatusCode.NOT_FOUND
        assert "COMPLETED" in str(closed.value)


async def test_current_update_info(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Desk], activities=[stamp]):
        handle = await _start(client, task_queue)
        assert await handle.execute_update(Desk.who, id="ask-1") == ["who", "ask-1", "ask-1"]
        assert await handle.query(Desk.outside_update) is True
        await handle.terminate()


async def test_no_worker_and_an_rpc_timeout(client: Client, task_queue: str) -> None:
    handle = await _start(client, task_queue)  # nobody polls this queue
    with pytest.raises(WorkflowUpdateRPCTimeoutOrCancelledError, match="ACCEPTED"):
        await handle.start_update(
            Desk.checked,
            1,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            id="late",
            rpc_timeout=timedelta(milliseconds=200),
        )
    # The update goes on: a worker that comes later takes it.
    async with Worker(client, task_queue=task_queue, workflows=[Desk], activities=[stamp]):
        assert await handle.get_update_handle("late").result() == 2
        await handle.terminate()


@workflow.defn
class Quitter:
    """Returns while its update handlers still wait: they are abandoned."""

    def __init__(self) -> None:
        self.asked = 0

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.asked == 2)
        return "bye"

    @workflow.update
    async def wait_forever(self) -> None:
        self.asked += 1
        await workflow.wait_condition(lambda: False)

    @workflow.update(unfinished_policy=HandlerUnfinishedPolicy.ABANDON)
    async def wait_quietly(self) -> None:
        self.asked += 1
        await workflow.wait_condition(lambda: False)


async def test_handlers_running_when_the_run_closes(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Quitter]):
        for policies, expected in (
            (("wait_forever", "wait_quietly"), 1),
            (("wait_quietly", "wait_quietly"), 0),
        ):
            handle = await client.start_workflow(
                Quitter.run, id="quit-" + uuid.uuid4().hex, task_queue=task_queue
            )
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                first = await handle.start_update(
                    policies[0], wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="u1"
                )
                second = await handle.start_update(
                    policies[1], wait_for_stage=WorkflowUpdateStage.ACCEPTED, id="u2"
                )
                assert await handle.result() == "bye"
            for update in (first, second):
                with pytest.raises(RPCError, match="already completed") as abandoned:
                    await asyncio.wait_for(update.result(), 10)
                assert abandoned.value.status == RPCStatusCode.NOT_FOUND
            unfinished = [
                w for w in caught if issubclass(w.category, UnfinishedUpdateHandlersWarning)
            ]
            assert len(unfinished) == expected, [str(w.message) for w in caught]
            if expected:
                message = str(unfinished[0].message)
                assert '"name": "wait_forever", "id": "u1"' in message
                assert "wait_quietly" not in message  # its policy is ABANDON
                assert "all_handlers_finished" in message


@workflow.defn
class Counter:
    def __init__(self) -> None:
        self.total = 0
        self.done = False

    @workflow.run
    async def run(self, start: int) -> int:
        self.total = start
        first = await workflow.execute_activity(
            stamp, str(start), start_to_close_timeout=timedelta(seconds=10)
        )
        assert first == f"stamped {start}"
        await workflow.wait_condition(lambda: self.done)
        return self.total

    @workflow.update
    def add(self, n: int) -> int:
        self.total += n
        return self.total

    @workflow.signal
    def finish(self) -> None:
        self.done = True


async def test_update_with_start(client: Client, task_queue: str) -> None:
    workflow_id = "counter-" + uuid.uuid4().hex
    async with Worker(client, task_queue=task_queue, workflows=[Counter], activities=[stamp]):
        op = WithStartWorkflowOperation(
            Counter.run,
            10,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        # The update runs in the first task, before the run method's first step: it sees
        # the object as __init__ left it.
        assert (
            await client.execute_update_with_start_workflow(
                Counter.add, 5, start_workflow_operation=op
            )
            == 5
        )
        handle = await op.workflow_handle()
        assert handle.id == workflow_id
        with pytest.raises(RuntimeError, match="once"):
            await client.execute_update_with_start_workflow(
                Counter.add, 1, start_workflow_operation=op
            )
        # FAIL with the run still open: neither starts nor updates; the operation says so.
        failing = WithStartWorkflowOperation(
            Counter.run,
            0,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        )
        with pytest.raises(WorkflowAlreadyStartedError):
            await client.execute_update_with_start_workflow(
                Counter.add, 100, start_workflow_operation=failing
            )
        with pytest.raises(WorkflowAlreadyStartedError):
            await failing.workflow_handle()
        # USE_EXISTING: the update goes to the running run.
        existing = WithStartWorkflowOperation(
            Counter.run,
            0,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        update = await client.start_update_with_start_workflow(
            Counter.add,
            7,
            start_workflow_operation=existing,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
        # The run method set 10 after the first update's 5 (which ran first), then 7.
        assert await update.result() == 17
        assert (await existing.workflow_handle()).result_run_id == handle.result_run_id
        await handle.signal(Counter.finish)
        assert await handle.result() == 17
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert types[:7] == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
        "WorkflowExecutionUpdateAccepted",
        "WorkflowExecutionUpdateCompleted",
        "ActivityTaskScheduled",
    ]
    with pytest.raises(InvalidArgumentError, match="id_conflict_policy"):
        WithStartWorkflowOperation(
            Counter.run,
            0,
            id=workflow_id,
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.UNSPECIFIED,
        )


async def test_an_update_sent_while_the_closing_task_runs_is_not_lost(
    client: Client, task_queue: str
) -> None:
    from engine._model import commands as cmd

    svc = client.service
    handle = await client.start_workflow(
        Desk.run, id="late-" + uuid.uuid4().hex, task_queue=task_queue
    )
    # A worker (played here by hand) takes the first task; meanwhile an update arrives.
    (task,) = await svc.poll_workflow_tasks(client.namespace, task_queue, "hand", {}, 1)
    payloads = client.data_converter.to_payloads_json([3])
    await svc.request_update(client.namespace, handle.id, None, "checked", payloads, "u-late", "me")
    # The task tries to close the run: refused, as on Temporal, so the run sees the update.
    done = await svc.complete_workflow_task(task, [cmd.CompleteWorkflowExecution([])], "hand")
    assert not done.accepted
    events = (await handle.fetch_history()).events
    assert [e.event_type for e in events[-2:]] == ["WorkflowTaskFailed", "WorkflowTaskScheduled"]
    assert events[-2].attributes["cause"] == "WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE"
    async with Worker(client, task_queue=task_queue, workflows=[Desk], activities=[stamp]):
        assert await handle.get_update_handle("u-late").result() == 6
        await handle.signal(Desk.close)
        assert await asyncio.wait_for(handle.result(), 30) == []
