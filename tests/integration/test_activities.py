"""Activity retries, timeouts, heartbeats and cancellation, on both backends."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta

import pytest

from engine import (
    ActivityError,
    ApplicationError,
    Client,
    RetryPolicy,
    Worker,
    WorkflowFailureError,
    activity,
    workflow,
)
from engine._store.tx import Q, StoreTx
from engine.exceptions import CancelledError, TimeoutError, TimeoutType
from engine.testing import WorkflowEnvironment

from .test_basics import _wait_for_event


@activity.defn
async def flaky(name: str) -> str:
    attempt = activity.info().attempt
    if attempt < 3:
        raise ApplicationError(f"flaky failure on attempt {attempt}", type="FlakyError")
    return f"ok after {attempt} attempts: {name}"


@activity.defn
async def invalid_card(name: str) -> str:
    raise ApplicationError("card number is invalid", type="InvalidCard")


@activity.defn
async def always_fails(name: str) -> str:
    raise RuntimeError(f"failure for {name}")


@workflow.defn
class RunActivity:
    """Runs the named activity with options given as plain values."""

    @workflow.run
    async def run(self, name: str, options: dict) -> str:
        policy = RetryPolicy(
            initial_interval=timedelta(seconds=options.get("initial", 1.0)),
            maximum_attempts=options.get("max_attempts", 0),
            non_retryable_error_types=options.get("non_retryable"),
        )
        return await workflow.execute_activity(
            name,
            "arg",
            start_to_close_timeout=timedelta(seconds=options.get("start_to_close", 30)),
            schedule_to_close_timeout=timedelta(seconds=options["schedule_to_close"])
            if "schedule_to_close" in options
            else None,
            heartbeat_timeout=timedelta(seconds=options["heartbeat"])
            if "heartbeat" in options
            else None,
            retry_policy=policy,
        )


async def _run(
    env: WorkflowEnvironment, task_queue: str, activities: list, name: str, options: dict
):
    async with Worker(
        env.client, task_queue=task_queue, workflows=[RunActivity], activities=activities
    ):
        handle = await env.client.start_workflow(
            RunActivity.run, args=[name, options], id="a-" + uuid.uuid4().hex, task_queue=task_queue
        )
        try:
            return handle, await handle.result(), None
        except WorkflowFailureError as err:
            return handle, None, err


async def _start(client: Client, task_queue: str, name: str, options: dict, prefix: str):
    """Start RunActivity for activity ``name``; return its handle and run id."""
    handle = await client.start_workflow(
        RunActivity.run,
        args=[name, options],
        id=f"{prefix}-{uuid.uuid4().hex}",
        task_queue=task_queue,
    )
    return handle, (await handle.describe()).run_id


async def test_fail_twice_then_succeed_records_attempt_3(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    handle, result, err = await _run(env, task_queue, [flaky], "flaky", {})
    assert err is None and result == "ok after 3 attempts: arg"
    history = (await handle.fetch_history()).events
    started = [e for e in history if e.event_type == "ActivityTaskStarted"]
    assert len(started) == 1, "retries are not written to history"
    assert started[0].attributes["attempt"] == 3
    assert started[0].attributes["lastFailure"]["message"] == "flaky failure on attempt 2"
    attempts = await handle.fetch_attempts()
    assert [a["attempt"] for a in attempts] == [1, 2, 3]
    assert [a["outcome"] for a in attempts] == ["failed", "failed", "completed"]
    # Gaps follow the default policy: 1 s, then 2 s (virtual time, skipped).
    gap1 = (attempts[1]["started_time"] - attempts[0]["ended_time"]).total_seconds()
    gap2 = (attempts[2]["started_time"] - attempts[1]["ended_time"]).total_seconds()
    assert 1.0 <= gap1 < 1.5
    assert 2.0 <= gap2 < 2.5


async def test_non_retryable_type_fails_after_one_attempt(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    handle, _, err = await _run(
        env, task_queue, [invalid_card], "invalid_card", {"non_retryable": ["InvalidCard"]}
    )
    assert err is not None
    cause = err.cause
    assert isinstance(cause, ActivityError)
    assert isinstance(cause.cause, ApplicationError) and cause.cause.type == "InvalidCard"
    assert len(await handle.fetch_attempts()) == 1
    failed = next(
        e for e in (await handle.fetch_history()).events if e.event_type == "ActivityTaskFailed"
    )
    assert failed.attributes["retryState"] == "RETRY_STATE_NON_RETRYABLE_FAILURE"


async def test_maximum_attempts(env: WorkflowEnvironment, task_queue: str) -> None:
    handle, _, err = await _run(
        env, task_queue, [always_fails], "always_fails", {"max_attempts": 3}
    )
    assert err is not None
    assert len(await handle.fetch_attempts()) == 3
    failed = next(
        e for e in (await handle.fetch_history()).events if e.event_type == "ActivityTaskFailed"
    )
    assert failed.attributes["retryState"] == "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED"
    # A plain exception in an activity is an ApplicationError named after its class.
    assert failed.attributes["failure"]["applicationFailureInfo"]["type"] == "RuntimeError"


async def test_schedule_to_close_truncates_retries(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    # Retries at 1, 2, 4, 8 s ... but the whole activity may take at most 5 s.
    handle, _, err = await _run(
        env, task_queue, [always_fails], "always_fails", {"schedule_to_close": 5}
    )
    assert err is not None
    attempts = await handle.fetch_attempts()
    assert len(attempts) == 3  # at 0 s, 1 s, 3 s; the next (7 s) would pass the 5 s bound
    failed = next(
        e for e in (await handle.fetch_history()).events if e.event_type == "ActivityTaskFailed"
    )
    assert failed.attributes["retryState"] == "RETRY_STATE_TIMEOUT"


@activity.defn
async def hangs_first(name: str) -> str:
    if activity.info().attempt == 1:
        await asyncio.sleep(3600)  # a hung attempt
    return f"attempt {activity.info().attempt}"


async def test_hung_attempt_is_retried_after_start_to_close(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    handle, result, err = await _run(
        env, task_queue, [hangs_first], "hangs_first", {"start_to_close": 1, "initial": 0.1}
    )
    assert err is None and result == "attempt 2"
    attempts = await handle.fetch_attempts()
    assert attempts[0]["outcome"] == "timed_out"
    assert (
        attempts[0]["failure"]["timeoutFailureInfo"]["timeoutType"] == "TIMEOUT_TYPE_START_TO_CLOSE"
    )
    started = next(
        e for e in (await handle.fetch_history()).events if e.event_type == "ActivityTaskStarted"
    )
    assert started.attributes["attempt"] == 2


async def test_a_started_attempt_keeps_its_deadline_on_its_row_not_in_a_timer(
    client: Client, task_queue: str
) -> None:
    """Start-to-close is the attempt's ``timeout_at``: no timer row to write and delete."""
    release = threading.Event()

    @activity.defn(name="waits_for_release")
    def waits(name: str) -> str:
        release.wait(30)
        return "released"

    async with Worker(client, task_queue=task_queue, workflows=[RunActivity], activities=[waits]):
        handle, run_id = await _start(
            client, task_queue, "waits_for_release", {"start_to_close": 30}, "stc"
        )

        def look(tx: StoreTx) -> tuple[list, list]:
            acts = tx._q(
                Q(
                    "SELECT state, started_time, timeout_at FROM dn_activity_tasks WHERE run_id = :r"
                ),
                {"r": run_id},
            ).fetchall()
            timers = tx._q(
                Q("SELECT kind FROM dn_timers WHERE run_id = :r"), {"r": run_id}
            ).fetchall()
            return [tuple(a) for a in acts], [t[0] for t in timers]

        for _ in range(500):
            acts, timers = await client.store.transaction(look)
            if acts and acts[0][0] == 2:
                break
            await asyncio.sleep(0.01)
        assert len(acts) == 1 and acts[0][0] == 2, acts
        _, started, deadline = acts[0]
        assert deadline == pytest.approx(started + 30)
        assert timers == []
        release.set()
        assert await handle.result() == "released"


async def test_an_attempt_waiting_to_retry_has_no_deadline(client: Client, task_queue: str) -> None:
    """Only a started attempt has a start-to-close deadline on its row."""
    async with Worker(client, task_queue=task_queue, workflows=[RunActivity], activities=[flaky]):
        handle, run_id = await _start(
            client, task_queue, "flaky", {"start_to_close": 30, "initial": 0.5}, "backoff"
        )

        def row(tx: StoreTx) -> tuple | None:
            found = tx._q(
                Q("SELECT state, attempt, timeout_at FROM dn_activity_tasks WHERE run_id = :r"),
                {"r": run_id},
            ).fetchone()
            return None if found is None else tuple(found)

        seen = set()
        for _ in range(1000):
            found = await client.store.transaction(row)
            if found is not None:
                seen.add(found[0])
                state, _, deadline = found
                assert (deadline is not None) == (state == 2), found
            if found is None and seen:
                break
            await asyncio.sleep(0.005)
        assert 3 in seen  # it was seen waiting to retry (backoff)
        assert await handle.result() == "ok after 3 attempts: arg"


async def test_an_attempt_started_before_schema_8_still_times_out(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    """Attempts from before migration 8 have no ``timeout_at``: their timer row fires."""
    client = env.client
    async with Worker(
        client, task_queue=task_queue, workflows=[RunActivity], activities=[hangs_first]
    ):
        handle, run_id = await _start(
            client, task_queue, "hangs_first", {"start_to_close": 1, "initial": 0.1}, "legacy"
        )

        def as_before_migration_8(tx: StoreTx) -> bool:
            row = tx._q(
                Q(
                    "SELECT scheduled_event_id, attempt, timeout_at FROM dn_activity_tasks "
                    "WHERE run_id = :r AND state = 2"
                ),
                {"r": run_id},
            ).fetchone()
            if row is None or row[2] is None:
                return False
            tx._q(
                Q("UPDATE dn_activity_tasks SET timeout_at = NULL WHERE run_id = :r"),
                {"r": run_id},
            )
            tx.insert_timer(run_id, "act_start_to_close", row[0], row[1], row[2], None)
            return True

        for _ in range(500):
            if await client.store.transaction(as_before_migration_8):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the first attempt never started")
        assert await handle.result() == "attempt 2"
    attempts = await handle.fetch_attempts()
    assert [a["outcome"] for a in attempts] == ["timed_out", "completed"]
    assert (
        attempts[0]["failure"]["timeoutFailureInfo"]["timeoutType"] == "TIMEOUT_TYPE_START_TO_CLOSE"
    )


@activity.defn
async def heartbeats_then_wedges(name: str) -> str:
    info = activity.info()
    if info.attempt == 1:
        activity.heartbeat("step-1")
        await asyncio.sleep(3600)  # wedged: no more heartbeats
    return f"resumed from {info.heartbeat_details[0]}"


async def test_heartbeat_timeout_catches_wedged_attempt_and_details_carry_over(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    handle, result, err = await _run(
        env,
        task_queue,
        [heartbeats_then_wedges],
        "heartbeats_then_wedges",
        {"start_to_close": 60, "heartbeat": 1, "initial": 0.1},
    )
    assert err is None
    assert result == "resumed from step-1"
    attempts = await handle.fetch_attempts()
    assert attempts[0]["failure"]["timeoutFailureInfo"]["timeoutType"] == "TIMEOUT_TYPE_HEARTBEAT"


CANCEL_SEEN: dict[str, bool] = {}


@activity.defn
async def heartbeating_worker(key: str) -> str:
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        CANCEL_SEEN[key] = True
        raise


@activity.defn
async def silent_worker(key: str) -> str:
    # Never heartbeats: it cannot learn that it was cancelled.
    for _ in range(30):
        await asyncio.sleep(0.05)
    CANCEL_SEEN[key] = False
    return "finished unaware"


@workflow.defn
class CancelActivity:
    @workflow.run
    async def run(self, name: str, key: str) -> str:
        handle = workflow.start_activity(
            name,
            key,
            start_to_close_timeout=timedelta(seconds=30),
            # The silent one has no heartbeat timeout: it would be timed out, not cancelled.
            heartbeat_timeout=timedelta(seconds=1) if name == "heartbeating_worker" else None,
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        await workflow.sleep(0.3)
        handle.cancel()
        try:
            return str(await handle)
        except ActivityError as err:
            return f"cancelled: {type(err.cause).__name__}"


@pytest.mark.parametrize("name", ["heartbeating_worker", "silent_worker"])
async def test_cancel_reaches_only_heartbeating_activities(
    client, task_queue: str, name: str
) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[CancelActivity],
        activities=[heartbeating_worker, silent_worker],
    ):
        result = await client.execute_workflow(
            CancelActivity.run, args=[name, key], id="cx-" + key, task_queue=task_queue
        )
    if name == "heartbeating_worker":
        assert CANCEL_SEEN[key] is True
        assert result == "cancelled: CancelledError"
    else:
        assert CANCEL_SEEN[key] is False
        assert result == "finished unaware"


async def test_schedule_to_start_times_out_without_retry(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    @workflow.defn(name="NoActivityWorker")
    class NoActivityWorker:
        @workflow.run
        async def run(self) -> str:
            try:
                await workflow.execute_activity(
                    "nobody_polls",
                    task_queue="queue-without-workers",
                    start_to_close_timeout=timedelta(seconds=5),
                    schedule_to_start_timeout=timedelta(seconds=10),
                )
            except ActivityError as err:
                assert isinstance(err.cause, TimeoutError)
                return f"timeout {err.cause.type.name if err.cause.type else None}"
            return "ran"

    async with Worker(env.client, task_queue=task_queue, workflows=[NoActivityWorker]):
        result = await env.client.execute_workflow(
            NoActivityWorker.run, id="s2s-" + uuid.uuid4().hex, task_queue=task_queue
        )
    assert result == f"timeout {TimeoutType.SCHEDULE_TO_START.name}"


async def test_sync_activity_runs_in_thread_pool(client, task_queue: str) -> None:
    @activity.defn(name="blocking_add")
    def blocking_add(a: int, b: int) -> int:
        assert threading.current_thread() is not threading.main_thread()
        return a + b

    @workflow.defn(name="AddWF")
    class AddWF:
        @workflow.run
        async def run(self) -> int:
            return await workflow.execute_activity(
                blocking_add, args=[2, 3], start_to_close_timeout=timedelta(seconds=5)
            )

    async with Worker(client, task_queue=task_queue, workflows=[AddWF], activities=[blocking_add]):
        assert (
            await client.execute_workflow(
                AddWF.run, id="add-" + uuid.uuid4().hex, task_queue=task_queue
            )
            == 5
        )


async def test_cancelled_error_type_is_exported() -> None:
    assert issubclass(CancelledError, Exception)
    assert _wait_for_event is not None
