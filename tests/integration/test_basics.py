"""A workflow with one activity, timers, signals, cancel and terminate, on both backends."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

import pytest

from engine import (
    ApplicationError,
    CancelledError,
    Client,
    TerminatedError,
    Worker,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    workflow,
)
from engine.testing import WorkflowEnvironment

from ..conftest import TEMPORAL_DATA
from ..interop.engine_code import HelloWF, SignalWF, TimerWF, say_hello

TIMEOUT = timedelta(seconds=30)


@workflow.defn
class CleanupWF:
    """Waits a long time; on cancellation runs a cleanup activity, then re-raises."""

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.sleep(timedelta(days=30))
        except asyncio.CancelledError:
            await workflow.execute_activity(say_hello, "cleanup", start_to_close_timeout=TIMEOUT)
            raise
        return "slept"


def _types(events: list) -> list[str]:
    return [e.event_type for e in events]


def _sample(name: str) -> list[dict]:
    return json.loads((TEMPORAL_DATA / name).read_text())["events"]


def _sample_types(name: str) -> list[str]:
    from engine._model.events import short_name

    return [short_name(e["eventType"]) for e in _sample(name)]


async def test_one_activity_matches_temporal_history(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[HelloWF], activities=[say_hello]):
        handle = await client.start_workflow(
            HelloWF.run, "Temporal", id="hello-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == "Hello, Temporal!"
    history = await handle.fetch_history()
    assert _types(history.events) == _sample_types("temporal_history_hello_activity.json")
    # Attribute names of the activity events are Temporal's.
    ours = {e.event_type: e.attributes for e in history.events}
    theirs = {}
    from engine._model.events import attributes_key, short_name

    for raw in _sample("temporal_history_hello_activity.json"):
        kind = short_name(raw["eventType"])
        theirs[kind] = raw[attributes_key(kind)]
    for kind in ("ActivityTaskScheduled", "ActivityTaskStarted", "ActivityTaskCompleted"):
        missing = (
            set(theirs[kind])
            - set(ours[kind])
            - {"useWorkflowBuildId", "priority", "workerVersion"}
        )
        assert not missing, (kind, missing)
    # Same payload bytes as Temporal for the same input and result.
    assert ours["WorkflowExecutionStarted"]["input"] == theirs["WorkflowExecutionStarted"]["input"]
    assert ours["ActivityTaskCompleted"]["result"] == theirs["ActivityTaskCompleted"]["result"]
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    assert desc.history_length == len(history.events)


async def test_thirty_day_timer_takes_no_real_time(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    client = env.client
    before = await env.get_current_time()
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with Worker(client, task_queue=task_queue, workflows=[TimerWF]):
        result = await client.execute_workflow(
            TimerWF.run, 30 * 24 * 3600.0, id="timer-" + uuid.uuid4().hex, task_queue=task_queue
        )
    assert result == "timer done"
    assert loop.time() - started < 20  # virtual: far less than 30 days
    after = await env.get_current_time()
    assert after - before >= timedelta(days=30)


async def test_timer_history_matches_temporal(env: WorkflowEnvironment, task_queue: str) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[TimerWF]):
        handle = await env.client.start_workflow(
            TimerWF.run, 0.5, id="t-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == "timer done"
    history = await handle.fetch_history()
    assert _types(history.events) == _sample_types("temporal_history_timer.json")
    started = next(e for e in history.events if e.event_type == "TimerStarted")
    fired = next(e for e in history.events if e.event_type == "TimerFired")
    assert started.attributes["startToFireTimeout"] == "0.500s"
    assert fired.event_time - started.event_time >= 0.5


async def test_signals_are_delivered_in_order(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 2, id="sig-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(SignalWF.add_message, "first")
        await handle.signal("add_message", "second")
        assert await handle.result() == ["first", "second"]
    types = _types((await handle.fetch_history()).events)
    assert types.count("WorkflowExecutionSignaled") == 2
    assert types[-1] == "WorkflowExecutionCompleted"


async def test_cancel_is_delivered_into_workflow_code(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    client = env.client
    async with Worker(client, task_queue=task_queue, workflows=[CleanupWF], activities=[say_hello]):
        handle = await client.start_workflow(
            CleanupWF.run, id="c-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "TimerStarted")
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert isinstance(info.value.cause, CancelledError)
    types = _types((await handle.fetch_history()).events)
    # The cleanup activity ran before the run was marked cancelled.
    assert "WorkflowExecutionCancelRequested" in types
    assert "TimerCanceled" in types
    assert "ActivityTaskCompleted" in types
    assert types[-1] == "WorkflowExecutionCanceled"


async def test_terminate_stops_without_running_code(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    client = env.client
    async with Worker(client, task_queue=task_queue, workflows=[CleanupWF], activities=[say_hello]):
        handle = await client.start_workflow(
            CleanupWF.run, id="term-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "TimerStarted")
        await handle.terminate(reason="operator said so")
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert isinstance(info.value.cause, TerminatedError)
    assert "operator said so" in str(info.value.cause)
    types = _types((await handle.fetch_history()).events)
    assert "ActivityTaskScheduled" not in types  # no cleanup: code did not run
    assert types[-1] == "WorkflowExecutionTerminated"
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_application_error_in_workflow_fails_the_run(client: Client, task_queue: str) -> None:
    @workflow.defn(name="FailingWF")
    class FailingWF:
        @workflow.run
        async def run(self) -> None:
            raise ApplicationError("bad order", {"order": 7}, type="BadOrder", non_retryable=True)

    async with Worker(client, task_queue=task_queue, workflows=[FailingWF]):
        handle = await client.start_workflow(
            FailingWF.run, id="f-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "BadOrder" and cause.details == ({"order": 7},)
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED


async def _wait_for_event(handle, event_type: str, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        history = await handle.fetch_history()
        if any(e.event_type == event_type for e in history.events):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {event_type} event within {timeout}s")


async def test_list_filter_by_type_and_status(client: Client, task_queue: str) -> None:
    async with Worker(
        client, task_queue=task_queue, workflows=[HelloWF, SignalWF], activities=[say_hello]
    ):
        done = await client.start_workflow(
            HelloWF.run, "x", id="lf-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await done.result()
        waiting = await client.start_workflow(
            SignalWF.run, 1, id="lf-" + uuid.uuid4().hex, task_queue=task_queue
        )
        running = [
            r.id
            async for r in client.list_workflows(
                f"WorkflowType = 'SignalWF' AND ExecutionStatus = 'Running' AND TaskQueue = '{task_queue}'"
            )
        ]
        assert running == [waiting.id]
        completed = [r.id async for r in client.list_workflows("ExecutionStatus = 'Completed'")]
        assert done.id in completed and waiting.id not in completed
        await waiting.terminate()


async def test_a_process_without_workers_can_host_the_timers(
    client: Client, task_queue: str
) -> None:
    """A worker that does not host the service (run_service=False) relies on another host."""
    worker = Worker(client, task_queue=task_queue, workflows=[TimerWF], run_service=False)
    async with client.hosting_service(), worker:
        result = await client.execute_workflow(
            TimerWF.run, 0.2, id="hs-" + uuid.uuid4().hex, task_queue=task_queue
        )
    assert result == "timer done"


@workflow.defn
class EchoWF:
    @workflow.run
    async def run(self, size: int) -> str:
        return "r" * size


async def test_results_small_and_large_reach_the_caller(client: Client, task_queue: str) -> None:
    """Small outcomes travel with the close wake-up; large ones are read from the history."""
    async with Worker(client, task_queue=task_queue, workflows=[EchoWF]):
        for size in (10, 200_000):
            handle = await client.start_workflow(
                EchoWF.run, size, id=f"echo-{size}-" + uuid.uuid4().hex, task_queue=task_queue
            )
            assert await handle.result() == "r" * size
            # A second waiter after the close reads it from the history.
            again = client.get_workflow_handle(handle.id)
            assert await again.result() == "r" * size


async def test_a_started_runs_result_needs_no_read_of_the_run(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handle from start_workflow waits for the close wake-up of its own run, without
    reading the run first; the close brings the outcome, also to a result asked for after
    the close. Without the outcome at hand (dropped here), it reads the history."""
    service = client.service
    reads: list[str | None] = []
    real = service.run_and_close_event

    async def counted(namespace: str, workflow_id: str, run_id: str | None) -> Any:
        reads.append(run_id)
        return await real(namespace, workflow_id, run_id)

    monkeypatch.setattr(service, "run_and_close_event", counted)
    async with Worker(client, task_queue=task_queue, workflows=[EchoWF]):
        awaited = await client.start_workflow(
            EchoWF.run, 3, id="await-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await awaited.result() == "rrr"
        later = await client.start_workflow(
            EchoWF.run, 4, id="later-" + uuid.uuid4().hex, task_queue=task_queue
        )
        # Closed before its handle asks: another handle reads the run to see it close.
        assert await client.get_workflow_handle(later.id).result() == "rrrr"
        assert len(reads) == 1
        assert await later.result() == "rrrr"
        assert len(reads) == 1  # neither started handle read the run
        dropped = await client.start_workflow(
            EchoWF.run, 5, id="dropped-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await client.get_workflow_handle(dropped.id).result() == "rrrrr"
        client.store.notifier._messages.clear()  # as if evicted by a thousand later closes
        assert await dropped.result() == "rrrrr"
        assert reads[-1] == dropped.result_run_id and len(reads) == 3
    # With no worker of this process on its queue (another process may close it), the
    # result reads the run first, as a handle from get_workflow_handle does.
    remote = await client.start_workflow(
        EchoWF.run, 2, id="remote-" + uuid.uuid4().hex, task_queue=task_queue
    )
    waiting = asyncio.ensure_future(remote.result())
    for _ in range(2000):
        if len(reads) == 4:
            break
        await asyncio.sleep(0.005)
    assert reads[-1] == remote.result_run_id
    async with Worker(client, task_queue=task_queue, workflows=[EchoWF]):
        assert await asyncio.wait_for(waiting, 60) == "rr"


@workflow.defn
class LeavesWorkBehind:
    """Returns (or is terminated) with an activity and a timer still pending."""

    @workflow.run
    async def run(self, finish: bool) -> str:
        workflow.start_activity(
            "runs_nowhere",
            task_queue="nobody-polls-" + workflow.info().workflow_id,
            schedule_to_close_timeout=timedelta(hours=1),
        )
        sleeper = asyncio.ensure_future(workflow.sleep(3600))
        if finish:
            return "left early"
        await sleeper
        return "slept"


@pytest.mark.parametrize("finish", [True, False], ids=["completes", "terminated"])
async def test_a_closed_run_leaves_no_pending_work_behind(
    client: Client, task_queue: str, finish: bool
) -> None:
    from engine._store.tx import Q, StoreTx

    async with Worker(client, task_queue=task_queue, workflows=[LeavesWorkBehind]):
        handle = await client.start_workflow(
            LeavesWorkBehind.run, finish, id="left-" + uuid.uuid4().hex, task_queue=task_queue
        )
        run_id = (await handle.describe()).run_id

        def pending(tx: StoreTx) -> tuple[int, int]:
            acts = tx._q(
                Q("SELECT COUNT(*) FROM dn_activity_tasks WHERE run_id = :r"), {"r": run_id}
            )
            n_acts = int(acts.fetchone()[0])
            timers = tx._q(Q("SELECT COUNT(*) FROM dn_timers WHERE run_id = :r"), {"r": run_id})
            return n_acts, int(timers.fetchone()[0])

        if finish:
            assert await handle.result() == "left early"
        else:
            await _wait_for_event(handle, "TimerStarted")
            # The timer, and the activity's schedule-to-close and schedule-to-start.
            assert await client.store.transaction(pending) == (1, 3)
            await handle.terminate("enough")
    assert await client.store.transaction(pending) == (0, 0)
