"""Worker behaviour: sticky cache and replay, deadlock detection, replay-safe helpers."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from datetime import timedelta

import pytest

from engine import Client, RetryPolicy, Worker, activity, workflow
from engine.testing import WorkflowEnvironment

from .test_basics import _wait_for_event


@activity.defn
async def echo(value: str) -> str:
    return value


@workflow.defn
class Steps:
    """Five steps; records what replay-safe helpers return at each."""

    @workflow.run
    async def run(self, n: int) -> list[str]:
        seen = []
        for i in range(n):
            rnd = workflow.random().randint(0, 10**9)
            uid = str(workflow.uuid4())
            now = workflow.now().isoformat()
            value = await workflow.execute_activity(
                echo, f"{i}:{rnd}:{uid}:{now}", start_to_close_timeout=timedelta(seconds=10)
            )
            seen.append(value)
            workflow.logger.info("step %d done", i)
        return seen


async def test_evicted_runs_replay_to_the_same_state(client: Client, task_queue: str) -> None:
    """With a cache of one entry, two interleaved runs replay from event 1 each task."""
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Steps],
        activities=[echo],
        max_cached_workflows=1,
    ) as worker:
        handles = [
            await client.start_workflow(
                Steps.run, 5, id=f"s{i}-" + uuid.uuid4().hex, task_queue=task_queue
            )
            for i in range(2)
        ]
        results = await asyncio.gather(*(h.result() for h in handles))
    metrics = worker.metrics.snapshot()
    assert metrics["temporal_sticky_cache_miss"] > 2
    assert metrics["temporal_sticky_cache_total_forced_eviction"] >= 1
    for result in results:
        assert len(result) == 5
        # Each value was produced once and replayed identically later (the activity input
        # was decided by code that ran many times).
        assert len(set(result)) == 5


async def test_logger_is_quiet_during_replay(
    client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engine.workflow")
    async with Worker(
        client, task_queue=task_queue, workflows=[Steps], activities=[echo], max_cached_workflows=1
    ):
        # A second run interleaves so that the first is evicted and replayed each task.
        h1 = await client.start_workflow(
            Steps.run, 3, id="l1-" + uuid.uuid4().hex, task_queue=task_queue
        )
        h2 = await client.start_workflow(
            Steps.run, 3, id="l2-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await asyncio.gather(h1.result(), h2.result())
    for handle in (h1, h2):
        lines = [r.getMessage() for r in caplog.records if handle.id in r.getMessage()]
        assert sorted(line.split(" (")[0] for line in lines) == [
            "step 0 done",
            "step 1 done",
            "step 2 done",
        ], lines


@workflow.defn
class Blocks:
    @workflow.run
    async def run(self) -> str:
        time.sleep(1.5)  # blocking call in workflow code
        return "done"


@workflow.defn
class Spins:
    """A busy loop that does not yield for two seconds (no blocking call)."""

    @workflow.run
    async def run(self) -> int:
        n, end = 0, time.perf_counter() + 2.0
        while time.perf_counter() < end:
            n += 1  # spins
        return n


@workflow.defn
class Quick:
    @workflow.run
    async def run(self, value: str) -> str:
        return await workflow.execute_activity(
            echo, value, start_to_close_timeout=timedelta(seconds=10)
        )


async def test_blocking_workflow_code_is_reported_as_a_deadlock(
    client: Client, task_queue: str
) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Blocks],
        deadlock_timeout=timedelta(milliseconds=300),
    ):
        handle = await client.start_workflow(
            Blocks.run, id="dl-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskFailed")
    history = (await handle.fetch_history()).events
    failed = next(e for e in history if e.event_type == "WorkflowTaskFailed")
    message = failed.attributes["failure"]["message"]
    assert "deadlock" in message and "did not yield within 0.3s" in message
    # Where the code was blocked: this file, the line of the sleep.
    assert "test_worker.py:" in message and "in run: time.sleep(1.5)" in message
    stack = failed.attributes["failure"]["stackTrace"]
    assert "time.sleep(1.5)" in stack
    assert "test_worker.py" in stack.splitlines()[0]  # from the workflow's code inwards
    assert (await handle.describe()).status.name == "RUNNING"


async def test_a_busy_loop_in_workflow_code_is_reported_and_the_worker_goes_on(
    client: Client, task_queue: str
) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[Spins, Quick],
        activities=[echo],
        deadlock_timeout=timedelta(milliseconds=300),
    ) as worker:
        handle = await client.start_workflow(
            Spins.run, id="spin-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskFailed")
        # The same worker (same event loop) still runs other workflows.
        other = await client.execute_workflow(
            Quick.run, "still here", id="quick-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert other == "still here"
        assert worker.metrics.workflow_task_failed["WorkflowError"] >= 1
    history = (await handle.fetch_history()).events
    failed = next(e for e in history if e.event_type == "WorkflowTaskFailed")
    message = failed.attributes["failure"]["message"]
    assert "deadlock" in message and "did not yield within 0.3s" in message
    assert "in run: n += 1" in message or "in run: while time.perf_counter() < end:" in message
    assert (await handle.describe()).status.name == "RUNNING"


@workflow.defn
class Dawdles:
    """Blocks a little, under the deadlock timeout: allowed, but reported once."""

    @workflow.run
    async def run(self) -> str:
        time.sleep(0.6)  # blocking call in workflow code, shorter than the deadlock timeout
        await workflow.sleep(0.01)
        time.sleep(0.6)
        return "done"


async def test_a_slow_activation_is_reported_once_per_workflow_type(
    client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="engine.worker")
    async with Worker(client, task_queue=task_queue, workflows=[Dawdles]):
        handle = await client.start_workflow(
            Dawdles.run, id="slow-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == "done"
    slow = [r.getMessage() for r in caplog.records if "in one activation" in r.getMessage()]
    assert len(slow) == 1, slow  # two slow activations, one report
    assert slow[0].startswith("workflow code of Dawdles took ")
    assert "time.sleep" in slow[0]
    assert (await handle.describe()).run_id in slow[0]


@workflow.defn
class Counter:
    @workflow.run
    async def run(self, count: int, limit: int) -> int:
        await workflow.sleep(1)
        if count < limit:
            workflow.continue_as_new(args=[count + 1, limit])
        return count


async def test_continue_as_new_chains_runs(env: WorkflowEnvironment, task_queue: str) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[Counter]):
        handle = await env.client.start_workflow(
            Counter.run, args=[0, 3], id="can-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await handle.result() == 3
    runs = [r async for r in env.client.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(runs) == 4
    assert len({r.run_id for r in runs}) == 4
    first = env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    events = (await first.fetch_history()).events
    assert events[-1].event_type == "WorkflowExecutionContinuedAsNew"
    last = await env.client.get_workflow_handle(handle.id).describe()
    assert last.first_execution_run_id == handle.result_run_id


@workflow.defn(name="Patchy")
class PatchyOld:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(1)
        return "old"


@workflow.defn(name="Patchy")
class PatchyNew:
    @workflow.run
    async def run(self) -> str:
        if workflow.patched("extra-step"):
            await workflow.execute_activity(
                echo, "new", start_to_close_timeout=timedelta(seconds=5)
            )
        await workflow.sleep(1)
        return "new" if workflow.patched("extra-step") else "old-path"


async def test_patched_keeps_old_runs_on_the_old_path(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[PatchyOld], activities=[echo]):
        old_run = await client.start_workflow(
            "Patchy", id="p-old-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(old_run, "TimerStarted")
    async with Worker(client, task_queue=task_queue, workflows=[PatchyNew], activities=[echo]):
        new_run = await client.start_workflow(
            "Patchy", id="p-new-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(old_run.result(), 30) == "old-path"
        assert await asyncio.wait_for(new_run.result(), 30) == "new"
    new_types = [e.event_type for e in (await new_run.fetch_history()).events]
    assert "MarkerRecorded" in new_types and "ActivityTaskScheduled" in new_types
    old_types = [e.event_type for e in (await old_run.fetch_history()).events]
    assert "MarkerRecorded" not in old_types and "WorkflowTaskFailed" not in old_types


@activity.defn
async def chatty(n: int) -> int:
    for i in range(n):
        activity.heartbeat(i)
        await asyncio.sleep(0.01)
    return n


async def test_heartbeats_are_throttled(client: Client, task_queue: str) -> None:
    @workflow.defn(name="Chatty")
    class Chatty:
        @workflow.run
        async def run(self) -> int:
            return await workflow.execute_activity(
                chatty,
                50,
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=timedelta(seconds=1),
            )

    calls = 0
    original = client.service.heartbeat_activity

    async def counting(task, details):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        return await original(task, details)

    client.service.heartbeat_activity = counting  # type: ignore[method-assign]
    async with Worker(client, task_queue=task_queue, workflows=[Chatty], activities=[chatty]):
        assert (
            await client.execute_workflow(
                Chatty.run, id="hb-" + uuid.uuid4().hex, task_queue=task_queue
            )
            == 50
        )
    # 50 heartbeats over ~0.5 s with a 0.8 s throttle: one or two writes, not 50.
    assert 1 <= calls <= 3


@activity.defn
async def long_running(key: str) -> str:
    info = activity.info()
    if info.attempt == 1:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            SHUTDOWN_SEEN[key] = True
            raise
    return f"attempt {info.attempt}"


SHUTDOWN_SEEN: dict[str, bool] = {}


@workflow.defn
class LongRunning:
    @workflow.run
    async def run(self, key: str) -> str:
        return await workflow.execute_activity(
            long_running,
            key,
            start_to_close_timeout=timedelta(minutes=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
        )


async def test_graceful_shutdown_hands_running_activities_back(
    client: Client, task_queue: str
) -> None:
    key = uuid.uuid4().hex
    first = Worker(
        client, task_queue=task_queue, workflows=[LongRunning], activities=[long_running]
    )
    first.start()
    handle = await client.start_workflow(
        LongRunning.run, key, id="gs-" + key, task_queue=task_queue
    )
    await _wait_for_attempt(handle)
    await first.shutdown()
    assert SHUTDOWN_SEEN.get(key) is True  # the attempt was cancelled, not abandoned
    attempts = await handle.fetch_attempts()
    assert attempts[0]["outcome"] == "failed"
    assert attempts[0]["failure"]["applicationFailureInfo"]["type"] == "WorkerShutdown"
    # The next attempt need not wait for the 10-minute start-to-close timeout.
    async with Worker(
        client, task_queue=task_queue, workflows=[LongRunning], activities=[long_running]
    ):
        assert await asyncio.wait_for(handle.result(), 20) == "attempt 2"


async def _wait_for_attempt(handle) -> None:
    for _ in range(500):
        if await handle.fetch_attempts():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("no attempt started")


@workflow.defn
class Huge:
    @workflow.run
    async def run(self, markers: int) -> str:
        for i in range(markers):
            workflow.patched(f"p{i}")  # one MarkerRecorded event each
        await workflow.sleep(3600)
        return "unreachable"


async def test_history_over_the_event_limit_terminates_the_run(
    client: Client, task_queue: str
) -> None:
    from engine import WorkflowExecutionStatus

    async with Worker(client, task_queue=task_queue, workflows=[Huge]):
        handle = await client.start_workflow(
            Huge.run, 51_300, id="huge-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with pytest.raises(Exception) as info:
            await asyncio.wait_for(handle.result(), 60)
    assert "51200" in str(info.value.cause)  # type: ignore[attr-defined]
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.TERMINATED
    assert desc.history_length > 51_200


@workflow.defn
class FlakyWorkflow:
    @workflow.run
    async def run(self) -> str:
        attempt = workflow.info().attempt
        if attempt < 3:
            from engine import ApplicationError

            raise ApplicationError(f"run attempt {attempt} fails")
        return f"succeeded on attempt {attempt}"


async def test_workflow_retry_policy_starts_new_runs(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[FlakyWorkflow]):
        handle = await env.client.start_workflow(
            FlakyWorkflow.run,
            id="wr-" + uuid.uuid4().hex,
            task_queue=task_queue,
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=5), maximum_attempts=5),
        )
        assert await handle.result() == "succeeded on attempt 3"
    runs = [r async for r in env.client.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(runs) == 3
    first = env.client.get_workflow_handle(handle.id, run_id=handle.result_run_id)
    failed = (await first.fetch_history()).events[-1]
    assert failed.event_type == "WorkflowExecutionFailed"
    assert failed.attributes["retryState"] == "RETRY_STATE_IN_PROGRESS"
    assert failed.attributes["newExecutionRunId"]
    last = (await env.client.get_workflow_handle(handle.id).fetch_history()).events[0].attributes
    assert last["attempt"] == 3 and last["initiator"] == "CONTINUE_AS_NEW_INITIATOR_RETRY"


async def test_workflows_have_no_retry_policy_by_default(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[FlakyWorkflow]):
        handle = await client.start_workflow(
            FlakyWorkflow.run, id="nr-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with pytest.raises(Exception, match="failed"):
            await handle.result()
    failed = (await handle.fetch_history()).events[-1]
    assert failed.attributes["retryState"] == "RETRY_STATE_RETRY_POLICY_NOT_SET"


@workflow.defn
class Forever:
    @workflow.run
    async def run(self, n: int) -> None:
        await workflow.sleep(timedelta(hours=1))
        workflow.continue_as_new(n + 1)


async def test_execution_timeout_spans_continue_as_new(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    from engine import WorkflowExecutionStatus, WorkflowFailureError

    async with Worker(env.client, task_queue=task_queue, workflows=[Forever]):
        handle = await env.client.start_workflow(
            Forever.run,
            0,
            id="ex-" + uuid.uuid4().hex,
            task_queue=task_queue,
            execution_timeout=timedelta(hours=2, minutes=30),
        )
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(handle.result(), 30)
    runs = [r async for r in env.client.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(runs) == 3  # two full hours, then the third run times out
    assert runs[0].status == WorkflowExecutionStatus.TIMED_OUT


async def test_a_started_task_that_is_never_completed_times_out(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    """A worker that took a task and died: after the 10 s task timeout it is retried."""
    client = env.client
    handle = await client.start_workflow(
        Steps.run, 1, id="wto-" + uuid.uuid4().hex, task_queue=task_queue
    )
    # Claim the task as a worker would, then never answer.
    claimed = await client.service.poll_workflow_tasks("default", task_queue, "lost-worker", {}, 1)
    assert len(claimed) == 1
    # Past the task's start-to-close deadline. env.sleep would wait in real time here, as
    # Temporal's test server does while a task is started: move the clock instead.
    env.client.clock.advance(11)  # type: ignore[attr-defined]
    for _ in range(200):
        types = [e.event_type for e in (await handle.fetch_history()).events]
        if "WorkflowTaskTimedOut" in types:
            break
        await asyncio.sleep(0.02)
    assert "WorkflowTaskTimedOut" in types
    async with Worker(client, task_queue=task_queue, workflows=[Steps], activities=[echo]):
        assert len(await asyncio.wait_for(handle.result(), 30)) == 1


async def test_a_dead_poll_loop_is_the_worker_s_fatal_error(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine._worker.workflows import WorkflowRunner

    async def dies(self: WorkflowRunner) -> None:
        raise RuntimeError("the poll loop broke")

    monkeypatch.setattr(WorkflowRunner, "run", dies)
    seen: list[BaseException] = []

    async def on_fatal_error(err: BaseException) -> None:
        seen.append(err)

    @workflow.defn(name="NeverPolled")
    class NeverPolled:
        @workflow.run
        async def run(self) -> None:
            return None

    worker = Worker(
        client, task_queue=task_queue, workflows=[NeverPolled], on_fatal_error=on_fatal_error
    )
    with pytest.raises(RuntimeError, match="the poll loop broke"):
        await asyncio.wait_for(worker.run(), 10)
    assert [str(e) for e in seen] == ["the poll loop broke"]
    assert not worker.is_running
    # In a context manager: the handler runs, and leaving the block raises the error.
    seen.clear()
    with pytest.raises(RuntimeError, match="the poll loop broke"):
        async with Worker(
            client, task_queue=task_queue, workflows=[NeverPolled], on_fatal_error=on_fatal_error
        ):
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
    assert [str(e) for e in seen] == ["the poll loop broke"]
