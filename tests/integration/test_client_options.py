"""The client options built for ``temporalio``'s keyword parameters (see
``tests/interop/test_api_signatures.py``), on both backends: ``rpc_timeout`` (an
``RPCError`` ``DEADLINE_EXCEEDED`` when the call does not finish in time), ``rpc_metadata``
(accepted), ``event_filter_type``, ``first_execution_run_id`` and the client's
``default_workflow_query_reject_condition``, the test environments' client options, and
update-with-start of a cron workflow.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from engine import Client, Worker, workflow
from engine.client import WithStartWorkflowOperation, WorkflowHistoryEventFilterType
from engine.common import QueryRejectCondition, WorkflowExecutionStatus, WorkflowIDConflictPolicy
from engine.exceptions import (
    InvalidArgumentError,
    WorkflowNotFoundError,
    WorkflowQueryRejectedError,
)
from engine.service import RPCError, RPCStatusCode

_SHORT = timedelta(milliseconds=200)
_META = {"authorization": "ignored"}


@workflow.defn
class Waiter:
    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self, value: str) -> str:
        await workflow.wait_condition(lambda: self.go)
        return value

    @workflow.signal
    def release(self) -> None:
        self.go = True

    @workflow.query
    def released(self) -> bool:
        return self.go


@workflow.defn
class Continuer:
    @workflow.run
    async def run(self, left: int) -> str:
        if left:
            workflow.continue_as_new(left - 1)
        while True:  # a cancel request is noted, not obeyed: only a terminate ends it
            try:
                await workflow.wait_condition(lambda: False)
            except asyncio.CancelledError:
                self.cancels = getattr(self, "cancels", 0) + 1


def _deadline(err: pytest.ExceptionInfo[RPCError]) -> None:
    assert err.value.status == RPCStatusCode.DEADLINE_EXCEEDED
    assert "rpc_timeout" in err.value.message


async def test_rpc_timeout_on_a_result_that_does_not_come(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waiter]):
        handle = await client.start_workflow(Waiter.run, "done", id="w", task_queue=task_queue)
        with pytest.raises(RPCError) as err:
            await handle.result(rpc_timeout=_SHORT, rpc_metadata=_META)
        _deadline(err)
        # The run went on: the other calls take the options and work.
        description = await handle.describe(rpc_timeout=timedelta(seconds=10), rpc_metadata=_META)
        assert description.status == WorkflowExecutionStatus.RUNNING
        assert not await handle.query(Waiter.released, rpc_timeout=timedelta(seconds=10))
        await handle.signal(Waiter.release, rpc_timeout=timedelta(seconds=10), rpc_metadata=_META)
        assert await handle.result(rpc_timeout=timedelta(seconds=10)) == "done"
        history = await handle.fetch_history(rpc_timeout=timedelta(seconds=10), skip_archival=True)
        assert history.events[-1].event_type == "WorkflowExecutionCompleted"
        listed = [e.id async for e in client.list_workflows(rpc_timeout=timedelta(seconds=10))]
        assert listed == ["w"]


async def test_rpc_timeout_of_zero_bounds_every_call(client: Client, task_queue: str) -> None:
    # Each call may still take effect (as a gRPC call past its deadline may), so the run
    # is one that neither the signal nor the cancel ends: only the terminate does.
    async with Worker(client, task_queue=task_queue, workflows=[Continuer]):
        handle = await client.start_workflow(Continuer.run, 0, id="w0", task_queue=task_queue)
        calls = [
            handle.describe(rpc_timeout=timedelta(0)),
            handle.signal("anything", rpc_timeout=timedelta(0)),
            handle.cancel(rpc_timeout=timedelta(0)),
            client.list_workflows(rpc_timeout=timedelta(0)).fetch_next_page(),
            client.get_async_activity_handle(workflow_id="w0", activity_id="1").heartbeat(
                rpc_timeout=timedelta(0)
            ),
        ]
        for call in calls:
            with pytest.raises(RPCError) as err:
                await call
            _deadline(err)
        await handle.terminate(rpc_timeout=timedelta(seconds=10), rpc_metadata=_META)


async def test_fetching_only_the_close_event(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waiter]):
        handle = await client.start_workflow(Waiter.run, "v", id="close", task_queue=task_queue)
        close = WorkflowHistoryEventFilterType.CLOSE_EVENT
        # Open, not waiting: no closing event yet.
        assert [e async for e in handle.fetch_history_events(event_filter_type=close)] == []
        # Waiting with a deadline that passes first.
        with pytest.raises(RPCError) as err:
            async for _ in handle.fetch_history_events(
                event_filter_type=close, wait_new_event=True, rpc_timeout=_SHORT
            ):
                pass
        _deadline(err)

        async def waited() -> list[str]:
            events = handle.fetch_history_events(
                event_filter_type=close,
                wait_new_event=True,
                poll_interval=timedelta(milliseconds=50),
            )
            return [e.event_type async for e in events]

        waiting = asyncio.ensure_future(waited())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await handle.signal(Waiter.release)
        assert await asyncio.wait_for(waiting, 20) == ["WorkflowExecutionCompleted"]
        history = await handle.fetch_history(event_filter_type=close)
        assert [e.event_type for e in history.events] == ["WorkflowExecutionCompleted"]
        every = await handle.fetch_history(
            event_filter_type=WorkflowHistoryEventFilterType.ALL_EVENT
        )
        assert every.events[-1].event_id == history.events[0].event_id
        assert every.events[0].event_type == "WorkflowExecutionStarted"


async def test_waiting_for_new_events_has_a_deadline(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waiter]):
        handle = await client.start_workflow(Waiter.run, "v", id="events", task_queue=task_queue)
        seen: list[str] = []
        with pytest.raises(RPCError) as err:
            async for event in handle.fetch_history_events(wait_new_event=True, rpc_timeout=_SHORT):
                seen.append(event.event_type)
        _deadline(err)
        assert seen[0] == "WorkflowExecutionStarted"  # the events recorded came first
        await handle.terminate()


async def test_first_execution_run_id_names_the_run_chain(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waiter, Continuer]):
        old = await client.start_workflow(Waiter.run, "a", id="chain", task_queue=task_queue)
        assert old.first_execution_run_id == old.result_run_id
        await old.terminate()
        new = await client.start_workflow(Waiter.run, "b", id="chain", task_queue=task_queue)
        stale = client.get_workflow_handle("chain", first_execution_run_id=old.result_run_id)
        with pytest.raises(WorkflowNotFoundError) as err:
            await stale.cancel()
        assert err.value.status == RPCStatusCode.NOT_FOUND
        with pytest.raises(WorkflowNotFoundError):
            await stale.terminate(reason="not this chain")
        assert (await new.describe()).status == WorkflowExecutionStatus.RUNNING
        current = client.get_workflow_handle_for(
            Waiter.run, "chain", first_execution_run_id=new.result_run_id
        )
        await current.terminate(reason="this chain")
        assert (await new.describe()).status == WorkflowExecutionStatus.TERMINATED

        # A chain continued as new: its first run names it, and so does any run of it.
        first = await client.start_workflow(Continuer.run, 2, id="cont", task_queue=task_queue)
        for _ in range(400):  # until the third run waits (its first workflow task done)
            runs = [e async for e in client.list_workflows("WorkflowId = 'cont'")]
            latest = await client.get_workflow_handle("cont").describe()
            if len(runs) == 3 and latest.history_length >= 4:
                break
            await asyncio.sleep(0.05)
        assert latest.run_id != first.result_run_id
        assert latest.first_execution_run_id == first.result_run_id
        await client.get_workflow_handle(
            "cont", first_execution_run_id=first.result_run_id
        ).cancel()
        await client.get_workflow_handle("cont", first_execution_run_id=latest.run_id).terminate()
        final = await client.get_workflow_handle("cont").describe()
        assert final.status == WorkflowExecutionStatus.TERMINATED


async def test_default_query_reject_condition(db_url: str, task_queue: str) -> None:
    async with (
        await Client.connect(db_url) as plain,
        await Client.connect(
            db_url,
            default_workflow_query_reject_condition=QueryRejectCondition.NOT_OPEN,
            rpc_metadata=_META,
        ) as strict,
    ):
        assert strict.default_workflow_query_reject_condition == QueryRejectCondition.NOT_OPEN
        async with Worker(plain, task_queue=task_queue, workflows=[Waiter]):
            handle = await plain.start_workflow(Waiter.run, "q", id="q", task_queue=task_queue)
            strict_handle = strict.get_workflow_handle("q")
            assert await strict_handle.query(Waiter.released) is False  # open: answered
            await handle.signal(Waiter.release)
            assert await handle.result() == "q"
            with pytest.raises(WorkflowQueryRejectedError) as err:
                await strict_handle.query(Waiter.released)
            assert err.value.status == WorkflowExecutionStatus.COMPLETED
            # A condition given to the call wins; the plain client's default is None.
            none = QueryRejectCondition.NONE
            assert await strict_handle.query(Waiter.released, reject_condition=none) is True
            assert await handle.query(Waiter.released) is True


async def test_a_start_is_bounded_by_its_rpc_timeout(client: Client, task_queue: str) -> None:
    with pytest.raises(RPCError) as err:
        await client.start_workflow(
            Waiter.run, "x", id="bounded", task_queue=task_queue, rpc_timeout=timedelta(0)
        )
    _deadline(err)
    handle = await client.start_workflow(
        Waiter.run,
        "y",
        id="unbounded",
        task_queue=task_queue,
        rpc_timeout=timedelta(seconds=30),
        rpc_metadata=_META,
    )
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await handle.terminate()


async def test_an_environment_s_client_options(db_url: str) -> None:
    from engine.testing import WorkflowEnvironment

    env = await WorkflowEnvironment.start_local(
        database_url=db_url,
        namespace="elsewhere",
        identity="tester@here",
        default_workflow_query_reject_condition=QueryRejectCondition.NOT_OPEN,
        rpc_metadata=_META,
    )
    try:
        client = env.client
        assert (client.namespace, client.identity) == ("elsewhere", "tester@here")
        assert client.default_workflow_query_reject_condition == QueryRejectCondition.NOT_OPEN
        async with Worker(client, task_queue="env-q", workflows=[Waiter]):
            handle = await client.start_workflow(Waiter.run, "e", id="env", task_queue="env-q")
            await handle.signal(Waiter.release)
            assert await handle.result() == "e"
        assert (await handle.describe()).namespace == "elsewhere"
        started = (await handle.fetch_history()).events[0].attributes
        assert started["identity"] == "tester@here"
    finally:
        await env.shutdown()
    skipping = await WorkflowEnvironment.start_time_skipping(identity="skipper")
    try:
        assert skipping.client.identity == "skipper"
    finally:
        await skipping.shutdown()


async def test_update_with_start_of_a_cron_workflow(client: Client, task_queue: str) -> None:
    start = WithStartWorkflowOperation(
        Waiter.run,
        "c",
        id="cron-with-start",
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
        cron_schedule="@every 1h",
    )
    waiting = asyncio.ensure_future(
        client.execute_update_with_start_workflow("anything", start_workflow_operation=start)
    )
    handle = await start.workflow_handle()
    started = (await handle.fetch_history()).events[0].attributes
    assert started["cronSchedule"] == "@every 1h"
    assert started["firstWorkflowTaskBackoff"] != "0s"  # waits for the schedule's time
    waiting.cancel()
    await handle.terminate()
    with pytest.raises(InvalidArgumentError, match="cron_schedule"):
        WithStartWorkflowOperation(
            Waiter.run,
            id="bad",
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            cron_schedule="whenever",
        )
