"""Local activities (both backends): run inside the workflow task, recorded as Temporal's
``core_local_activity`` markers, retried with the policy (a long backoff becomes a timer),
timeouts, bad input, and non-determinism when the code swaps one for a regular activity."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from engine import ApplicationError, Client, RetryPolicy, Worker, activity, workflow
from engine.exceptions import InvalidArgumentError, NondeterminismError, TimeoutError
from engine.worker import Replayer

CALLS: list[tuple[str, int, bool]] = []


@activity.defn
async def shout(text: str) -> str:
    info = activity.info()
    CALLS.append((text, info.attempt, info.is_local))
    if text.startswith("fail") and info.attempt < 3:
        raise ApplicationError(f"attempt {info.attempt}", type="Flaky")
    return text.upper()


@activity.defn
def sleepy(seconds: float) -> str:  # a plain function: runs in a thread
    import time

    time.sleep(seconds)
    return "woke"


@workflow.defn
class Locals:
    @workflow.run
    async def run(self, texts: list[str]) -> list[str]:
        out = []
        for text in texts:
            out.append(
                await workflow.execute_local_activity(
                    shout,
                    text,
                    start_to_close_timeout=timedelta(seconds=5),
                    retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=5)),
                )
            )
        return out


@workflow.defn
class SlowRetry:
    """A backoff (2 s) longer than the local retry threshold (1 s) becomes a timer."""

    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_local_activity(
            shout,
            "fail-slowly",
            start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(seconds=2), backoff_coefficient=1.0
            ),
            local_retry_threshold=timedelta(seconds=1),
        )


@workflow.defn
class TooSlow:
    @workflow.run
    async def run(self) -> str:
        try:
            return await workflow.execute_local_activity(
                sleepy,
                0.5,
                start_to_close_timeout=timedelta(milliseconds=100),
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except TimeoutError as err:
            return f"timed out: {err.type.name if err.type else None}"


@workflow.defn
class NoTimeout:
    @workflow.run
    async def run(self) -> str:
        try:
            await workflow.execute_local_activity(shout, "x")
        except InvalidArgumentError as err:
            return str(err)
        return "accepted"


@workflow.defn(name="Locals")
class LocalsAsRegular:
    """``Locals`` changed to run its steps as regular activities."""

    @workflow.run
    async def run(self, texts: list[str]) -> list[str]:
        return [
            await workflow.execute_activity(shout, t, start_to_close_timeout=timedelta(seconds=5))
            for t in texts
        ]


def _types(history: object) -> list[str]:
    return [e.event_type for e in history.events]  # type: ignore[attr-defined]


async def test_local_activities_run_inside_the_task(client: Client, task_queue: str) -> None:
    CALLS.clear()
    async with Worker(client, task_queue=task_queue, workflows=[Locals], activities=[shout]):
        handle = await client.start_workflow(
            Locals.run, ["a", "fail-b"], id="locals-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 30) == ["A", "FAIL-B"]
    assert CALLS == [("a", 1, True), ("fail-b", 1, True), ("fail-b", 2, True), ("fail-b", 3, True)]
    history = await handle.fetch_history()
    types = _types(history)
    # One workflow task: both activities and all retries ran inside it.
    assert types.count("WorkflowTaskCompleted") == 1
    assert "ActivityTaskScheduled" not in types
    markers = [e for e in history.events if e.event_type == "MarkerRecorded"]
    assert [m.attributes["markerName"] for m in markers] == ["core_local_activity"] * 2
    replayed = await Replayer(workflows=[Locals]).replay_workflow(history)
    assert replayed.replay_failure is None
    # The same history against code that runs the steps as regular activities.
    changed = await Replayer(workflows=[LocalsAsRegular]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert isinstance(changed.replay_failure, NondeterminismError)


async def test_a_long_backoff_becomes_a_timer(env: object, task_queue: str) -> None:
    client = env.client  # type: ignore[attr-defined]
    CALLS.clear()
    async with Worker(client, task_queue=task_queue, workflows=[SlowRetry], activities=[shout]):
        handle = await client.start_workflow(
            SlowRetry.run, id="slow-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 30) == "FAIL-SLOWLY"
    assert [c[1] for c in CALLS] == [1, 2, 3]
    types = _types(await handle.fetch_history())
    assert types.count("TimerStarted") == 2 and types.count("TimerFired") == 2
    assert types.count("MarkerRecorded") == 3  # two backoffs and the result


async def test_timeouts_and_bad_input(client: Client, task_queue: str) -> None:
    async with Worker(
        client, task_queue=task_queue, workflows=[TooSlow, NoTimeout], activities=[sleepy, shout]
    ):
        slow = await client.execute_workflow(
            TooSlow.run, id="tooslow-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert slow == "timed out: START_TO_CLOSE"
        refused = await client.execute_workflow(
            NoTimeout.run, id="notimeout-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert "start_to_close_timeout or schedule_to_close_timeout" in refused


async def test_an_unregistered_local_activity_fails(client: Client, task_queue: str) -> None:
    @workflow.defn(name="Orphan")
    class Orphan:
        @workflow.run
        async def run(self) -> str:
            try:
                await workflow.execute_local_activity(
                    "no_such_activity", start_to_close_timeout=timedelta(seconds=1)
                )
            except ApplicationError as err:
                return f"{err.type}: {err.message}"
            return "ran"

    async with Worker(client, task_queue=task_queue, workflows=[Orphan], activities=[shout]):
        said = await client.execute_workflow(
            Orphan.run, id="orphan-" + uuid.uuid4().hex, task_queue=task_queue
        )
    assert said.startswith("NotFoundError: local activity type 'no_such_activity'")
    assert "shout" in said


@workflow.defn
class Raced:
    """A local activity raced against a timer that it beats: the timer is started and
    cancelled in one task, so neither is recorded (as Temporal's core SDK drops them)."""

    @workflow.run
    async def run(self) -> str:
        return await asyncio.wait_for(
            workflow.execute_local_activity(
                shout, "quick", start_to_close_timeout=timedelta(seconds=5)
            ),
            timeout=60,
        )


async def test_a_timer_taken_back_within_the_task_is_not_recorded(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Raced], activities=[shout]):
        handle = await client.start_workflow(
            Raced.run, id="raced-" + uuid.uuid4().hex, task_queue=task_queue
        )
        assert await asyncio.wait_for(handle.result(), 30) == "QUICK"
    history = await handle.fetch_history()
    assert "TimerStarted" not in _types(history) and "TimerCanceled" not in _types(history)
    replayed = await Replayer(workflows=[Raced]).replay_workflow(history)
    assert replayed.replay_failure is None


async def test_a_retry_after_a_timer_is_a_new_request(env: object, task_queue: str) -> None:
    from engine._replay.local_activities import marker_data

    client = env.client  # type: ignore[attr-defined]
    async with Worker(client, task_queue=task_queue, workflows=[SlowRetry], activities=[shout]):
        handle = await client.start_workflow(
            SlowRetry.run, id="slow2-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await asyncio.wait_for(handle.result(), 30)
    history = await handle.fetch_history()
    data = [marker_data(e.attributes) for e in history.events if e.event_type == "MarkerRecorded"]
    # As temporalio: each attempt after a timer has the next seq and activity id.
    assert [(d["seq"], d["activity_id"], d["attempt"]) for d in data] == [
        (1, "1", 1),
        (2, "2", 2),
        (3, "3", 3),
    ]
    assert (await Replayer(workflows=[SlowRetry]).replay_workflow(history)).replay_failure is None


_long_local_cancelled: list[str] = []


@activity.defn
async def long_local(seconds: float) -> str:
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _long_local_cancelled.append("cancelled")
        raise
    return "finished"


@workflow.defn
class GivesUpOnALocal:
    @workflow.run
    async def run(self) -> str:
        handle = workflow.start_local_activity(
            long_local, 30.0, start_to_close_timeout=timedelta(seconds=60)
        )
        done, _ = await workflow.wait([handle], timeout=1)
        if done:
            return "finished in time"
        handle.cancel()
        try:
            await handle
        except Exception as err:
            return f"{type(err).__name__}({type(err.__cause__).__name__})"
        return "not cancelled"


async def test_a_running_local_activity_cancelled_after_a_heartbeat(
    client: Client, task_queue: str
) -> None:
    # The local activity outlasts the 2 s workflow task: the worker heartbeats the task,
    # the 1 s timer fires meanwhile and reaches the code in the next task, which cancels
    # the activity: the attempt running in the worker is cancelled, and the run goes on.
    _long_local_cancelled.clear()
    async with Worker(
        client, task_queue=task_queue, workflows=[GivesUpOnALocal], activities=[long_local]
    ):
        handle = await client.start_workflow(
            GivesUpOnALocal.run,
            id=f"gives-up-{uuid.uuid4().hex}",
            task_queue=task_queue,
            task_timeout=timedelta(seconds=2),
        )
        assert await asyncio.wait_for(handle.result(), 20) == "ActivityError(CancelledError)"
    assert _long_local_cancelled == ["cancelled"]
    history = await handle.fetch_history()
    types = _types(history)
    assert types.count("WorkflowTaskCompleted") >= 3  # heartbeats, then the last task
    assert "WorkflowTaskTimedOut" not in types
    (marker,) = [e for e in history.events if e.event_type == "MarkerRecorded"]
    assert marker.attributes["failure"] == {
        "message": "Activity cancelled",
        "canceledFailureInfo": {},
    }
    result = await Replayer(workflows=[GivesUpOnALocal]).replay_workflow(history)
    assert result.replay_failure is None


@workflow.defn
class BadSignalDuringALongLocal:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_local_activity(
            long_local, 3.0, start_to_close_timeout=timedelta(seconds=60)
        )

    @workflow.signal
    def poke(self) -> None:
        raise RuntimeError("this handler is broken")


async def test_a_failure_after_a_heartbeat_fails_the_task_the_run_is_on(
    client: Client, task_queue: str
) -> None:
    # The signal reaches the code in the task the heartbeat started; its handler fails
    # that task (WorkflowTaskFailed at once), not the finished one before it (which would
    # leave the current task to time out).
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[BadSignalDuringALongLocal],
        activities=[long_local],
    ):
        handle = await client.start_workflow(
            BadSignalDuringALongLocal.run,
            id=f"bad-signal-{uuid.uuid4().hex}",
            task_queue=task_queue,
            task_timeout=timedelta(seconds=2),
        )
        await asyncio.sleep(0.3)
        await handle.signal(BadSignalDuringALongLocal.poke)
        for _ in range(200):
            types = _types(await handle.fetch_history())
            if "WorkflowTaskFailed" in types or "WorkflowTaskTimedOut" in types:
                break
            await asyncio.sleep(0.05)
        await handle.terminate()
    assert "WorkflowTaskFailed" in types and "WorkflowTaskTimedOut" not in types, types
    # The failed task is the one the heartbeat started: one completion came before it.
    assert types.index("WorkflowTaskCompleted") < types.index("WorkflowTaskFailed")


@workflow.defn
class LocalThenRegular:
    @workflow.run
    async def run(self, text: str) -> list[str]:
        local = await workflow.execute_local_activity(
            shout, text, start_to_close_timeout=timedelta(seconds=10)
        )
        regular = await workflow.execute_activity(
            shout, text, start_to_close_timeout=timedelta(seconds=10)
        )
        return [local, regular]


async def test_a_worker_without_remote_activities_runs_only_local_ones(
    client: Client, task_queue: str
) -> None:
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[LocalThenRegular],
        activities=[shout],
        no_remote_activities=True,
    ):
        handle = await client.start_workflow(
            LocalThenRegular.run, "hi", id=f"lr-{uuid.uuid4().hex}", task_queue=task_queue
        )
        for _ in range(200):
            pending = (await handle.describe()).pending_activities
            if pending:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # time enough for a poller, had there been one
        (waiting,) = (await handle.describe()).pending_activities
        assert waiting["state"] == "SCHEDULED"  # the local one ran, the regular one waits
        async with Worker(client, task_queue=task_queue, activities=[shout]):
            result = await asyncio.wait_for(handle.result(), 20)
    assert result == ["HI", "HI"]


@workflow.defn
class MemoAcrossAHeartbeat:
    @workflow.run
    async def run(self) -> str:
        workflow.upsert_memo({"before": "set"})
        # Outlasts the 1 s workflow task: its completion is heartbeated (two changes of the
        # run's row in one transaction), and the next task changes the memo again.
        await workflow.execute_local_activity(
            sleepy, 1.5, start_to_close_timeout=timedelta(seconds=30)
        )
        workflow.upsert_memo({"after": "set"})
        return "done"


async def test_a_memo_upserted_before_a_heartbeat_outlives_the_next_upsert(
    client: Client, task_queue: str
) -> None:
    """The run's row as a heartbeated completion leaves it (changed twice in one
    transaction) is the one the next change builds on (SQLite's writer keeps it)."""
    async with Worker(
        client, task_queue=task_queue, workflows=[MemoAcrossAHeartbeat], activities=[sleepy]
    ):
        handle = await client.start_workflow(
            MemoAcrossAHeartbeat.run,
            id=f"memo-heartbeat-{uuid.uuid4().hex}",
            task_queue=task_queue,
            task_timeout=timedelta(seconds=1),
        )
        assert await asyncio.wait_for(handle.result(), 20) == "done"
    history = await handle.fetch_history()
    assert _types(history).count("WorkflowTaskCompleted") >= 2  # one task, heartbeated
    assert await (await handle.describe()).memo() == {"before": "set", "after": "set"}
