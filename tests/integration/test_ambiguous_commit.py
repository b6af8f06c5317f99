"""A request whose COMMIT went through but whose answer never came back.

The store runs a transaction again when its connection is lost (``engine/_store/outage.py``).
If the loss came after the server committed, the second try meets its own first one: each
request must recognise that and change nothing (Temporal: the request id of a start, a
signal, an async activity outcome; cancelling is idempotent anyway), and answer as the
first try would have. The answer is lost here by making the driver's commit raise, right
after the real commit, the error psycopg raises when the server hangs up. PostgreSQL only:
SQLite runs in process, so its commits are never in doubt.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from engine import Client, Worker, activity, workflow
from engine.common import WorkflowExecutionStatus


class AnswerLost:
    """The next ``armed`` commits of the client's store succeed, then report a dropped
    connection, as when the server's reply to COMMIT is lost on the way."""

    def __init__(self, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = 0
        self.fired = 0
        dialect = client.store.engine.dialect
        real = dialect.do_commit

        def do_commit(dbapi_connection: Any) -> None:
            real(dbapi_connection)
            if self.armed:
                self.armed -= 1
                self.fired += 1
                raise psycopg.OperationalError("server closed the connection unexpectedly")

        monkeypatch.setattr(dialect, "do_commit", do_commit)

    def once(self) -> AnswerLost:
        self.armed, self.fired = 1, 0
        return self


@workflow.defn
class Waiter:
    def __init__(self) -> None:
        self.said: list[str] = []

    @workflow.run
    async def run(self) -> list[str]:
        try:
            await workflow.wait_condition(lambda: "done" in self.said)
        except asyncio.CancelledError:
            self.said.append("cancelled")
            await workflow.wait_condition(lambda: "done" in self.said)
        return self.said

    @workflow.signal
    def say(self, word: str) -> None:
        self.said.append(word)


@activity.defn
async def finished_elsewhere() -> str:
    activity.raise_complete_async()


@workflow.defn
class AsyncActivity:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            finished_elsewhere, start_to_close_timeout=timedelta(seconds=60)
        )


@pytest.fixture
async def client(pg_url: str) -> AsyncIterator[Client]:
    client = await Client.connect(pg_url)
    try:
        yield client
    finally:
        await client.close()


async def _types(handle: Any) -> list[str]:
    return [e.event_type for e in (await handle.fetch_history()).events]


async def _wait_for(handle: Any, event_type: str) -> None:
    for _ in range(1000):
        if event_type in await _types(handle):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {event_type}")


async def test_a_start_is_not_started_twice(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = AnswerLost(client, monkeypatch).once()
    handle = await client.start_workflow(Waiter.run, id="w", task_queue=uuid.uuid4().hex)
    assert lost.fired == 1
    runs = [e async for e in client.list_workflows()]
    assert [r.run_id for r in runs] == [handle.first_execution_run_id]


async def test_a_signal_is_recorded_once(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    queue = uuid.uuid4().hex
    async with Worker(client, task_queue=queue, workflows=[Waiter]):
        handle = await client.start_workflow(Waiter.run, id="w", task_queue=queue)
        await _wait_for(handle, "WorkflowTaskCompleted")
        lost = AnswerLost(client, monkeypatch).once()
        await handle.signal(Waiter.say, "hello")
        assert lost.fired == 1
        await handle.signal(Waiter.say, "done")
        assert await handle.result() == ["hello", "done"]
    assert (await _types(handle)).count("WorkflowExecutionSignaled") == 2


async def test_a_signal_with_start_into_a_running_run_signals_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = uuid.uuid4().hex
    async with Worker(client, task_queue=queue, workflows=[Waiter]):
        first = await client.start_workflow(Waiter.run, id="w", task_queue=queue)
        await _wait_for(first, "WorkflowTaskCompleted")
        lost = AnswerLost(client, monkeypatch).once()
        again = await client.start_workflow(
            Waiter.run, id="w", task_queue=queue, start_signal="say", start_signal_args=["hi"]
        )
        assert lost.fired == 1
        assert again.first_execution_run_id == first.first_execution_run_id
        await first.signal(Waiter.say, "done")
        assert await first.result() == ["hi", "done"]


async def test_a_terminate_that_closed_the_run_succeeds(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = await client.start_workflow(Waiter.run, id="w", task_queue=uuid.uuid4().hex)
    lost = AnswerLost(client, monkeypatch).once()
    await handle.terminate(reason="enough")  # the second try finds the run closed by the first
    assert lost.fired == 1
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED
    assert (await _types(handle)).count("WorkflowExecutionTerminated") == 1


async def test_a_cancel_request_is_recorded_once(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = uuid.uuid4().hex
    async with Worker(client, task_queue=queue, workflows=[Waiter]):
        handle = await client.start_workflow(Waiter.run, id="w", task_queue=queue)
        await _wait_for(handle, "WorkflowTaskCompleted")
        lost = AnswerLost(client, monkeypatch).once()
        await handle.cancel()
        assert lost.fired == 1
        await _wait_for(handle, "WorkflowExecutionCancelRequested")
        for _ in range(1000):  # the workflow has seen the request (before the next signal)
            types = await _types(handle)
            seen = types[types.index("WorkflowExecutionCancelRequested") :]
            if "WorkflowTaskCompleted" in seen:
                break
            await asyncio.sleep(0.01)
        await handle.signal(Waiter.say, "done")
        assert await handle.result() == ["cancelled", "done"]
    assert (await _types(handle)).count("WorkflowExecutionCancelRequested") == 1


async def test_an_async_completion_is_not_refused_by_its_own_first_try(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = uuid.uuid4().hex
    async with Worker(
        client, task_queue=queue, workflows=[AsyncActivity], activities=[finished_elsewhere]
    ):
        handle = await client.start_workflow(AsyncActivity.run, id="a", task_queue=queue)
        for _ in range(1000):  # the attempt has started (its event is written at its end)
            if any(a["outcome"] == "running" for a in await handle.fetch_attempts()):
                break
            await asyncio.sleep(0.01)
        lost = AnswerLost(client, monkeypatch).once()
        await client.get_async_activity_handle(
            workflow_id="a", run_id=handle.first_execution_run_id, activity_id="1"
        ).complete("from outside")
        assert lost.fired == 1
        assert await handle.result() == "from outside"
    assert (await _types(handle)).count("ActivityTaskCompleted") == 1
