"""An instance dropped while its workflow code still waits (a query's replay, a replay of
an open run) has its code brought to an end there and then, as Temporal's Python SDK
tears down an evicted workflow: its ``finally`` blocks run once, on the thread that ran
the instance, as replay; nothing is left for the garbage collector to close later, on
whatever thread it runs (``engine/_replay/teardown.py``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest

from engine import Client, Worker, activity, workflow
from engine._replay.instance import WorkflowInstance
from engine.worker import Replayer

from .test_attempt_garbage import left_in_cycles
from .test_basics import _wait_for_event


async def _until(condition: Callable[[], object], tries: int = 300) -> None:
    """Poll ``condition`` 10 ms apart until it holds or ``tries`` polls have passed (the
    caller's assertion then says what was missing)."""
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.01)


#: What the workflow's ``finally`` saw each time it ran: (instance id, thread, replaying).
ENDINGS: list[tuple[int, str, bool]] = []


@workflow.defn
class Waits:
    def __init__(self) -> None:
        self.done = False

    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.wait_condition(lambda: self.done)
        finally:
            ENDINGS.append(
                (id(self), threading.current_thread().name, workflow.unsafe.is_replaying())
            )
        return "done"

    @workflow.signal
    def finish(self) -> None:
        self.done = True

    @workflow.query
    def is_done(self) -> bool:
        return self.done


@workflow.defn
class WaitsAgainWhenCancelled:
    @workflow.run
    async def run(self) -> None:
        try:
            await workflow.wait_condition(lambda: False)
        finally:
            try:
                await workflow.sleep(3600)  # asks for a timer while being torn down
            finally:
                ENDINGS.append((id(self), threading.current_thread().name, True))

    @workflow.query
    def ping(self) -> str:
        return "pong"


async def test_a_query_ends_the_replayed_code_there_and_then(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waits]):
        handle = await client.start_workflow(
            Waits.run, id="waits-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        live = list(ENDINGS)
        ENDINGS.clear()
        with left_in_cycles() as garbage:
            assert await handle.query(Waits.is_done) is False
            # The query's replayed instance ended its code before the answer came back:
            # once, as replay, on the query's thread (not the event loop's, not later).
            ended = list(ENDINGS)
        left = [o for o in garbage if isinstance(o, WorkflowInstance)]
        assert live == []  # the live run still waits
        assert len(ended) == 1, ended
        _, thread, replaying = ended[0]
        assert replaying is True
        assert thread != threading.main_thread().name
        assert left == []
        ENDINGS.clear()
        await handle.signal(Waits.finish)
        assert await handle.result() == "done"
    # The live run's own finally ran once, not as replay.
    assert [replaying for _, _, replaying in ENDINGS] == [False]
    ENDINGS.clear()


async def test_code_that_waits_again_when_cancelled_is_cancelled_again(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[WaitsAgainWhenCancelled]):
        handle = await client.start_workflow(
            WaitsAgainWhenCancelled.run, id="again-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        ENDINGS.clear()
        assert await handle.query(WaitsAgainWhenCancelled.ping) == "pong"
        assert len(ENDINGS) == 1
        ENDINGS.clear()
        # The timer asked for during the teardown was never recorded.
        events = [e.event_type for e in (await handle.fetch_history()).events]
        assert "TimerStarted" not in events
        await handle.terminate()


@workflow.defn
class NeverEnds:
    @workflow.run
    async def run(self) -> None:
        while True:
            try:
                await workflow.wait_condition(lambda: False)
            except asyncio.CancelledError:
                pass  # refuses to end

    @workflow.query
    def ping(self) -> str:
        return "pong"


async def test_code_that_refuses_to_end_is_left_with_a_warning(
    client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[NeverEnds]):
        handle = await client.start_workflow(
            NeverEnds.run, id="never-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        with caplog.at_level(logging.WARNING, logger="engine.workflow"):
            assert await handle.query(NeverEnds.ping) == "pong"
        assert any(
            "still waits after being cancelled 10 times" in r.getMessage() for r in caplog.records
        ), [r.getMessage() for r in caplog.records]
        await handle.terminate()


async def test_a_replay_of_an_open_run_ends_its_code(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Waits]):
        handle = await client.start_workflow(
            Waits.run, id="replay-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        history = await handle.fetch_history()
        ENDINGS.clear()
        await Replayer(workflows=[Waits]).replay_workflow(history)
        assert [replaying for _, _, replaying in ENDINGS] == [True]
        ENDINGS.clear()
        await handle.terminate()
    ENDINGS.clear()


async def test_a_stopping_worker_ends_the_code_of_its_cached_runs(
    client: Client, task_queue: str
) -> None:
    ENDINGS.clear()
    async with Worker(client, task_queue=task_queue, workflows=[Waits]):
        handle = await client.start_workflow(
            Waits.run, id="stop-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        assert ENDINGS == []
    # On the worker's activation thread, as replay, before the worker's exit returned.
    assert [
        (thread.startswith("durable-workflow"), replaying) for _, thread, replaying in ENDINGS
    ] == [(True, True)]
    ENDINGS.clear()
    await handle.terminate()


async def test_a_run_evicted_from_a_full_cache_ends_its_code(
    client: Client, task_queue: str
) -> None:
    ENDINGS.clear()
    async with Worker(
        client, task_queue=task_queue, workflows=[Waits], max_cached_workflows=1
    ) as worker:
        first = await client.start_workflow(
            Waits.run, id="first-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(first, "WorkflowTaskCompleted")
        second = await client.start_workflow(
            Waits.run, id="second-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(second, "WorkflowTaskCompleted")
        await _until(lambda: ENDINGS)  # the teardown is queued for the activation thread
        assert worker.metrics.sticky_cache_forced_eviction == 1
        assert [replaying for _, _, replaying in ENDINGS] == [True]
        ENDINGS.clear()
        # The evicted run goes on: its next task replays it afresh.
        await first.signal(Waits.finish)
        assert await first.result() == "done"
        await _until(lambda: len(ENDINGS) == 2)
        # Its own ending (live), and the second run's, evicted in turn to make room.
        assert sorted(replaying for _, _, replaying in ENDINGS) == [False, True]
        ENDINGS.clear()
        await second.terminate()
    ENDINGS.clear()


#: What the code saw right after a blocking call that the deadlock detector gave up on.
AFTER_THE_BLOCK: list[bool] = []


@workflow.defn
class BlocksOnce:
    @workflow.run
    async def run(self) -> None:
        if not AFTER_THE_BLOCK:
            time.sleep(0.8)  # past the deadlock timeout: its thread is abandoned
            AFTER_THE_BLOCK.append(workflow.unsafe.is_replaying())
        await workflow.wait_condition(lambda: False)


async def test_a_deadlocked_instance_is_not_torn_down_under_its_running_code(
    client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    AFTER_THE_BLOCK.clear()
    with caplog.at_level(logging.WARNING, logger="engine.workflow"):
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[BlocksOnce],
            deadlock_timeout=timedelta(seconds=0.3),
        ):
            handle = await client.start_workflow(
                BlocksOnce.run, id="blocks-" + uuid.uuid4().hex, task_queue=task_queue
            )
            await _until(lambda: AFTER_THE_BLOCK)
            await handle.terminate()
    # The abandoned thread went on with a live activation, untouched by a teardown.
    assert AFTER_THE_BLOCK == [False]
    assert not any("still waits" in r.getMessage() for r in caplog.records)


@workflow.defn
class LeavesAHandler:
    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self.started)
        return "done"

    def __init__(self) -> None:
        self.started = False

    @workflow.signal(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def hold(self) -> None:
        self.started = True
        try:
            await workflow.wait_condition(lambda: False)
        finally:
            ENDINGS.append(
                (id(self), threading.current_thread().name, workflow.unsafe.is_replaying())
            )


async def test_a_completed_run_with_a_handler_still_waiting_is_torn_down(
    client: Client, task_queue: str
) -> None:
    ENDINGS.clear()
    async with Worker(client, task_queue=task_queue, workflows=[LeavesAHandler]) as worker:
        handle = await client.start_workflow(
            LeavesAHandler.run, id="leaves-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.signal(LeavesAHandler.hold)
        assert await handle.result() == "done"
        await _until(lambda: ENDINGS and worker.metrics.sticky_cache_size == 0)
        # The handler's code ended when the worker dropped the run: on its activation
        # thread, as replay, not later in the collector.
        assert [(t.startswith("durable-workflow"), r) for _, t, r in ENDINGS] == [(True, True)]
    ENDINGS.clear()


#: Opened by the test once another run has taken the cache's only place.
GATE: list[asyncio.Event] = []
LOCAL_STARTED: list[bool] = []


@activity.defn
async def wait_for_the_gate() -> str:
    LOCAL_STARTED.append(True)
    await GATE[0].wait()
    return "through"


@workflow.defn
class WaitsOnALocalActivity:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_local_activity(
            wait_for_the_gate, start_to_close_timeout=timedelta(seconds=30)
        )


@workflow.defn
class Quick:
    @workflow.run
    async def run(self) -> str:
        return "quick"


async def test_a_run_evicted_while_its_local_activity_runs_completes_its_task_whole(
    client: Client, task_queue: str
) -> None:
    """The completion of a task whose run left the cache meanwhile still carries what its
    instance had to say (here the SDK flags of the run's first completion)."""
    GATE[:] = [asyncio.Event()]
    LOCAL_STARTED.clear()
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[WaitsOnALocalActivity, Quick],
        activities=[wait_for_the_gate],
        max_cached_workflows=1,
    ) as worker:
        waiting = await client.start_workflow(
            WaitsOnALocalActivity.run, id="local-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _until(lambda: LOCAL_STARTED, tries=500)
        assert LOCAL_STARTED
        # Its first task runs the local activity; another run takes the cache's place.
        assert (
            await client.execute_workflow(
                Quick.run, id="quick-" + uuid.uuid4().hex, task_queue=task_queue
            )
            == "quick"
        )
        assert worker.metrics.sticky_cache_forced_eviction >= 1
        GATE[0].set()
        assert await waiting.result() == "through"
    events = (await waiting.fetch_history()).events
    completed = [e for e in events if e.event_type == "WorkflowTaskCompleted"]
    assert completed[0].attributes["sdkMetadata"] == {"coreUsedFlags": [1, 2, 3]}
