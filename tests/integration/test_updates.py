"""Updates: validator before history, result to the caller, replay (both backends)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from engine import ApplicationError, Client, Worker, activity, workflow
from engine._store.tx import Q, StoreTx
from engine.exceptions import WorkflowUpdateFailedError
from engine.worker import Replayer


@activity.defn
async def reserve(item: str) -> str:
    return f"reserved {item}"


@workflow.defn
class Cart:
    def __init__(self) -> None:
        self.items: list[str] = []
        self.closed = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.closed)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self.items

    @workflow.update
    async def add(self, item: str) -> str:
        # An update handler may wait on activities: it spans several workflow tasks.
        receipt = await workflow.execute_activity(
            reserve, item, start_to_close_timeout=timedelta(seconds=10)
        )
        self.items.append(item)
        return receipt

    @add.validator
    def check_add(self, item: str) -> None:
        if not item:
            raise ApplicationError("an item needs a name", type="EmptyItem")

    @workflow.update
    def size(self) -> int:
        return len(self.items)

    @workflow.update
    def explode(self) -> None:
        raise ApplicationError("this update always fails", type="Boom")

    @workflow.signal
    def close(self) -> None:
        self.closed = True


async def test_updates_validate_run_and_replay(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Cart], activities=[reserve]):
        handle = await client.start_workflow(
            Cart.run, id="cart-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.execute_update(Cart.add, "apple") == "reserved apple"
        assert await handle.execute_update("add", "pear") == "reserved pear"
        assert await handle.execute_update(Cart.size) == 2
        before = len((await handle.fetch_history()).events)
        with pytest.raises(WorkflowUpdateFailedError, match="needs a name") as info:
            await handle.execute_update(Cart.add, "")
        assert type(info.value.cause).__name__ == "ApplicationError"
        history = (await handle.fetch_history()).events
        assert not any(
            e.event_type == "WorkflowExecutionUpdateAccepted"
            and e.attributes["acceptedRequest"]["input"]["name"] == "add"
            for e in history[before:]
        ), "a rejected update leaves no accepted event"
        with pytest.raises(WorkflowUpdateFailedError, match="always fails"):
            await handle.execute_update(Cart.explode)
        await handle.signal(Cart.close)
        assert await asyncio.wait_for(handle.result(), 30) == ["apple", "pear"]
    events = (await handle.fetch_history()).events
    types = [e.event_type for e in events]
    assert types.count("WorkflowExecutionUpdateAccepted") == 4  # add, add, size, explode
    assert types.count("WorkflowExecutionUpdateCompleted") == 4
    completed = [e for e in events if e.event_type == "WorkflowExecutionUpdateCompleted"]
    assert "failure" in completed[-1].attributes["outcome"]
    # The recorded history replays against the same code.
    result = await Replayer(workflows=[Cart]).replay_workflow(await handle.fetch_history())
    assert result.replay_failure is None


async def test_unknown_update_is_rejected(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Cart], activities=[reserve]):
        handle = await client.start_workflow(
            Cart.run, id="cart-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with pytest.raises(WorkflowUpdateFailedError, match="no update handler 'nope'"):
            await handle.execute_update("nope")
        await handle.terminate()


async def test_an_update_waiting_across_the_schema_upgrade_is_delivered(
    client: Client, task_queue: str
) -> None:
    """Runs from before schema 7 have no update flag (NULL): their tasks keep looking."""
    handle = await client.start_workflow(
        Cart.run, id="upgrade-" + uuid.uuid4().hex, task_queue=task_queue
    )
    asking = asyncio.create_task(
        handle.execute_update(Cart.size, rpc_timeout=timedelta(seconds=20))
    )

    def flag(tx: StoreTx) -> object:
        row = tx._q(
            Q("SELECT has_updates FROM dn_executions WHERE workflow_id = :w"), {"w": handle.id}
        )
        return row.fetchone()[0]

    for _ in range(500):  # the update is recorded as asked for (no worker yet)
        if await client.store.transaction(flag) == 1:
            break
        await asyncio.sleep(0.01)

    def forget(tx: StoreTx) -> None:  # as migration 7 leaves an older run
        sql = Q("UPDATE dn_executions SET has_updates = NULL WHERE workflow_id = :w")
        tx._q(sql, {"w": handle.id})

    await client.store.transaction(forget)
    async with Worker(client, task_queue=task_queue, workflows=[Cart], activities=[reserve]):
        assert await asyncio.wait_for(asking, 20) == 0
        await handle.signal(Cart.close)
        assert await handle.result() == []
