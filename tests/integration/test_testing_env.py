"""engine.testing.WorkflowEnvironment as Temporal users test with it: time-skipping sleeps
that step from timer to timer, result waits that do not skip when told, an environment
over an existing client, and mock activities registered under a real one's name.

Every test about time reads the environment's clock (``env.get_current_time()``) and the
workflows' own ``workflow.now()``, never the wall clock's speed. Both backends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from engine import Client, Worker, WorkflowExecutionStatus, WorkflowHandle, activity, workflow
from engine.testing import WorkflowEnvironment

DAY = timedelta(days=1)
#: How far a workflow's timers may drift from their nominal times: each workflow task takes
#: some real time, and the clock runs in real time while one is running.
DRIFT = timedelta(minutes=10)


@pytest.fixture
async def env(db_url: str) -> AsyncIterator[WorkflowEnvironment]:
    """``async with await WorkflowEnvironment.start_time_skipping() as env``, on each backend."""
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        yield env


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@workflow.defn
class Ticker:
    """Wakes every ``every`` seconds, forever, noting the time of its start and each wake."""

    def __init__(self) -> None:
        self.times: list[float] = []

    @workflow.run
    async def run(self, every: float) -> None:
        self.times.append(workflow.time())
        while True:
            await workflow.sleep(every)
            self.times.append(workflow.time())

    @workflow.query
    def seen(self) -> list[float]:
        return self.times


async def _times(handle: WorkflowHandle, count: int) -> list[float]:
    """The ticker's times once it has noted ``count`` (its start, then each wake)."""
    times: list[float] = []
    for _ in range(500):
        times = await handle.query(Ticker.seen)
        if len(times) >= count:
            return times
        await asyncio.sleep(0.01)
    raise AssertionError(f"the ticker noted {times}, not {count} times")


async def test_sleep_fires_each_timer_in_turn(env: WorkflowEnvironment, task_queue: str) -> None:
    """A 30-day ticker in a sleep past 90 days runs four times: at its start and at day
    30, 60 and 90, each at its own time (a sleep jumping straight to its end woke it
    once, at the end)."""
    client = env.client
    async with Worker(client, task_queue=task_queue, workflows=[Ticker]):
        handle = await client.start_workflow(
            Ticker.run, (30 * DAY).total_seconds(), id=_id("tick"), task_queue=task_queue
        )
        started = (await _times(handle, 1))[0]
        before = await env.get_current_time()

        await env.sleep(45 * DAY)
        times = await handle.query(Ticker.seen)
        assert len(times) == 2  # its start, and day 30
        assert before + 45 * DAY <= await env.get_current_time() < before + 45 * DAY + DRIFT

        await env.sleep(timedelta(days=50))  # to day 95
        times = await handle.query(Ticker.seen)
        assert await env.get_current_time() >= before + 95 * DAY
    assert len(times) == 4, [timedelta(seconds=t - started) for t in times]
    for n, wake in enumerate(times[1:], start=1):
        since_start = timedelta(seconds=wake - started)
        assert n * 30 * DAY <= since_start < n * 30 * DAY + DRIFT, (n, since_start)


@workflow.defn
class SignalThenSleep:
    """Waits for a signal (no timer meanwhile), then sleeps a day; returns its times."""

    def __init__(self) -> None:
        self.go = False

    @workflow.run
    async def run(self) -> list[float]:
        started = workflow.time()
        await workflow.wait_condition(lambda: self.go)
        signalled = workflow.time()
        await workflow.sleep(DAY)
        return [started, signalled, workflow.time()]

    @workflow.signal
    def proceed(self) -> None:
        self.go = True


async def test_sleep_with_no_timer_moves_time_by_its_duration(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    """Nothing to wait for and no timer: the sleep's end is the one stop."""
    client = env.client
    async with Worker(client, task_queue=task_queue, workflows=[SignalThenSleep]):
        handle = await client.start_workflow(
            SignalThenSleep.run, id=_id("sig"), task_queue=task_queue
        )
        before = await env.get_current_time()
        await env.sleep(timedelta(hours=5))
        after = await env.get_current_time()
        assert before + timedelta(hours=5) <= after < before + timedelta(hours=5) + DRIFT
        await env.sleep(0)  # a zero sleep returns at once
        await handle.signal(SignalThenSleep.proceed)
        started, signalled, woke = await handle.result()
    assert timedelta(hours=5) <= timedelta(seconds=signalled - started) < timedelta(hours=5) + DRIFT
    assert DAY <= timedelta(seconds=woke - signalled) < DAY + DRIFT


@activity.defn
async def held(gate: str) -> str:
    """Runs until the test opens its gate."""
    await _GATES[gate].wait()
    return "released"


_GATES: dict[str, asyncio.Event] = {}
_ENTERED: dict[str, asyncio.Event] = {}


@activity.defn
async def entered_then_held(gate: str) -> str:
    _ENTERED[gate].set()
    return await held(gate)


@workflow.defn
class ActivityThenSleep:
    @workflow.run
    async def run(self, gate: str) -> list[float]:
        before = workflow.time()
        result = await workflow.execute_activity(
            entered_then_held, gate, start_to_close_timeout=timedelta(hours=1)
        )
        assert result == "released"
        after_activity = workflow.time()
        await workflow.sleep(DAY)
        return [before, after_activity, workflow.time()]


async def test_sleep_does_not_jump_while_an_activity_runs(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    """A running activity holds time back (its 1-hour timeout is not skipped to); once it
    is done, the same sleep goes on to the workflow's next timer."""
    gate = uuid.uuid4().hex
    _GATES[gate], _ENTERED[gate] = asyncio.Event(), asyncio.Event()
    client = env.client
    try:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ActivityThenSleep],
            activities=[entered_then_held],
        ):
            handle = await client.start_workflow(
                ActivityThenSleep.run, gate, id=_id("act"), task_queue=task_queue
            )
            await asyncio.wait_for(_ENTERED[gate].wait(), 30)
            before = await env.get_current_time()
            sleeping = asyncio.ensure_future(env.sleep(2 * DAY))
            await asyncio.sleep(0.3)  # the sleep is under way while the activity runs
            assert not sleeping.done()
            assert await env.get_current_time() - before < timedelta(minutes=30)
            _GATES[gate].set()
            await asyncio.wait_for(sleeping, 30)
            assert await env.get_current_time() >= before + 2 * DAY
            desc = await handle.describe()
            assert desc.status == WorkflowExecutionStatus.COMPLETED  # its 1-day timer fired
            started, after_activity, woke = await handle.result()
    finally:
        del _GATES[gate], _ENTERED[gate]
    assert timedelta(seconds=after_activity - started) < timedelta(minutes=30)
    assert DAY <= timedelta(seconds=woke - after_activity) < DAY + DRIFT


@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> float:
        started = workflow.time()
        await workflow.sleep(seconds)
        return workflow.time() - started


async def test_auto_time_skipping_disabled(env: WorkflowEnvironment, task_queue: str) -> None:
    """A result awaited inside the block waits in real time; one awaited outside skips,
    and so does ``env.sleep`` inside it."""
    client = env.client
    async with Worker(client, task_queue=task_queue, workflows=[Nap]):
        handle = await client.start_workflow(
            Nap.run, DAY.total_seconds(), id=_id("nap"), task_queue=task_queue
        )
        before = await env.get_current_time()
        with env.auto_time_skipping_disabled():
            waiting = asyncio.ensure_future(handle.result())
            await asyncio.sleep(0.3)
            assert not waiting.done()
            assert await env.get_current_time() - before < timedelta(minutes=30)
            assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
            with env.auto_time_skipping_disabled():  # nested: the outer block still holds
                pass
            await asyncio.sleep(0.1)
            assert await env.get_current_time() - before < timedelta(minutes=30)
        # Outside the block a new wait skips (and the one begun inside gets the result).
        assert await asyncio.wait_for(handle.result(), 30) >= DAY.total_seconds()
        assert await asyncio.wait_for(waiting, 30) >= DAY.total_seconds()

        second = await client.start_workflow(
            Nap.run, DAY.total_seconds(), id=_id("nap"), task_queue=task_queue
        )
        with env.auto_time_skipping_disabled():
            await env.sleep(2 * DAY)  # sleeping still skips
            assert (await second.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_environment_properties(db_url: str) -> None:
    async with await WorkflowEnvironment.start_time_skipping(database_url=db_url) as env:
        assert env.supports_time_skipping
        assert env.supports_time_skipping_v1
        assert not env.supports_time_skipping_v2
        assert isinstance(env.client, Client)
        now = await env.get_current_time()
        assert now.tzinfo is not None
        await env.sleep(timedelta(days=3))
        later = await env.get_current_time(None)
        assert later - now >= timedelta(days=3)
    async with await WorkflowEnvironment.start_local() as local:
        assert not local.supports_time_skipping
        assert not local.supports_time_skipping_v1
        with local.auto_time_skipping_disabled():
            pass
        before = datetime.now(UTC)
        now = await local.get_current_time()
        assert before - timedelta(seconds=1) <= now <= datetime.now(UTC) + timedelta(seconds=1)


async def test_from_client_uses_the_client_as_it_is(client: Client, task_queue: str) -> None:
    """Real time, and shutting the environment down leaves the caller's client open."""
    env = WorkflowEnvironment.from_client(client)
    assert env.client is client
    assert not env.supports_time_skipping
    before = datetime.now(UTC)
    now = await env.get_current_time()
    assert before <= now <= datetime.now(UTC)
    await env.sleep(0.01)
    with env.auto_time_skipping_disabled():
        async with env, Worker(env.client, task_queue=task_queue, workflows=[Nap]):
            took = await env.client.execute_workflow(
                Nap.run, 0.05, id=_id("fc"), task_queue=task_queue
            )
    assert took >= 0.05
    # The environment is shut down (by ``async with``); the client still works.
    await env.shutdown()
    handle = await client.start_workflow(Nap.run, 0.01, id=_id("fc"), task_queue=task_queue)
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    async with Worker(client, task_queue=task_queue, workflows=[Nap]):
        assert await handle.result() >= 0.01


# -- mocking an activity -------------------------------------------------------------------


@activity.defn
async def charge(amount: int) -> str:
    raise RuntimeError("the real payment service must not be called in tests")


@activity.defn(name="charge")
async def mock_charge(amount: int) -> str:
    return f"mock charged {amount}"


@workflow.defn
class Checkout:
    @workflow.run
    async def run(self, amount: int) -> str:
        return await workflow.execute_activity(
            charge, amount, start_to_close_timeout=timedelta(seconds=30)
        )


async def test_a_mock_activity_replaces_the_real_one_by_name(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(
        env.client, task_queue=task_queue, workflows=[Checkout], activities=[mock_charge]
    ):
        result = await env.client.execute_workflow(
            Checkout.run, 42, id=_id("checkout"), task_queue=task_queue
        )
    assert result == "mock charged 42"
