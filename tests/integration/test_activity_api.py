"""What activity code can ask while it runs (``engine.activity``, as ``temporalio.activity``)
and finishing an activity from outside its worker (``client.get_async_activity_handle``),
on both backends."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from engine import (
    ActivityError,
    ApplicationError,
    Client,
    RetryPolicy,
    Worker,
    activity,
    workflow,
)
from engine.client import AsyncActivityCancelledError
from engine.common import Priority
from engine.exceptions import ActivityNotFoundError, InvalidArgumentError

from .test_basics import _wait_for_event

ROOT = Path(__file__).resolve().parents[2]
SEEN: dict[str, Any] = {}
POLICY = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=4)


# -- activities -------------------------------------------------------------------------


@activity.defn
async def logs_and_reports(key: str) -> str:
    activity.logger.info("charging card %s", key)
    info = activity.info()
    SEEN[key] = {
        "info": info,
        "client": activity.client(),
        "payload_converter": activity.payload_converter(),
        "worker_shutdown": activity.is_worker_shutdown(),
    }
    return "charged"


@activity.defn
def sync_reports(key: str) -> str:
    activity.logger.info("in a thread")
    try:
        activity.client()
    except RuntimeError as err:
        SEEN[key] = str(err)
    return "ok"


@activity.defn
async def completes_later(key: str) -> str:
    SEEN[key] = activity.info().task_token
    activity.raise_complete_async()


@activity.defn
async def waits_for_cancel(key: str) -> str:
    try:
        while True:
            activity.heartbeat()
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        SEEN[key] = (activity.is_cancelled(), activity.cancellation_details())
        raise


@activity.defn
def shielded(key: str) -> str:
    with activity.shield_thread_cancel_exception():
        # Cancellation arrives in a heartbeat's reply; inside the shield a heartbeat after
        # it does not raise.
        while not activity.is_cancelled():
            activity.heartbeat()
            activity.wait_for_cancelled_sync(timedelta(milliseconds=50))
        activity.heartbeat()
        SEEN[key] = ("past the heartbeat", activity.cancellation_details())
    return "never returned"


@activity.defn
async def waits_for_shutdown(key: str) -> str:
    SEEN[key] = "waiting"
    await activity.wait_for_worker_shutdown()
    return f"saw shutdown: {activity.is_worker_shutdown()}"


@workflow.defn
class OneActivity:
    @workflow.run
    async def run(self, name: str, key: str, heartbeat_seconds: float = 0.0) -> str:
        return await workflow.execute_activity(
            name,
            key,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=heartbeat_seconds) if heartbeat_seconds else None,
            retry_policy=POLICY,
        )


@workflow.defn
class CancelsItsActivity:
    @workflow.run
    async def run(self, name: str, key: str, heartbeat_seconds: float = 1.0) -> str:
        # Heartbeats are sent at most every 80 % of the heartbeat timeout, and a cancel
        # request reaches the activity in a heartbeat's reply.
        handle = workflow.start_activity(
            name,
            key,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=heartbeat_seconds),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        await workflow.sleep(0.3)
        handle.cancel()
        try:
            return str(await handle)
        except ActivityError as err:
            return f"cancelled: {type(err.cause).__name__}"


async def _until(predicate: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


# -- info, logger, client, payload converter --------------------------------------------


async def test_an_activity_logs_with_its_info_and_completes(
    client: Client, task_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = uuid.uuid4().hex
    caplog.set_level(logging.INFO, logger="engine.activity")
    async with Worker(
        client, task_queue=task_queue, workflows=[OneActivity], activities=[logs_and_reports]
    ):
        result = await client.execute_workflow(
            OneActivity.run,
            args=["logs_and_reports", key],
            id="log-" + key,
            task_queue=task_queue,
        )
    assert result == "charged"
    (record,) = [r for r in caplog.records if r.name == "engine.activity"]
    assert record.getMessage().startswith(f"charging card {key} (")
    details = record.temporal_activity  # type: ignore[attr-defined]
    assert details["workflow_id"] == "log-" + key
    assert details["activity_type"] == "logs_and_reports"
    assert details["attempt"] == 1 and details["namespace"] == client.namespace
    assert "'activity_type': 'logs_and_reports'" in record.getMessage()


async def test_info_has_temporals_fields(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client, task_queue=task_queue, workflows=[OneActivity], activities=[logs_and_reports]
    ):
        await client.execute_workflow(
            OneActivity.run, args=["logs_and_reports", key], id="i-" + key, task_queue=task_queue
        )
    seen = SEEN.pop(key)
    info: activity.Info = seen["info"]
    import temporalio.activity

    ours = [f.name for f in dataclasses.fields(info)]
    assert ours == [f.name for f in dataclasses.fields(temporalio.activity.Info)]
    assert info.namespace == info.workflow_namespace == client.namespace
    assert info.in_workflow and not info.is_local
    # As the service stored it: Temporal's server fills in the maximum interval too.
    assert info.retry_policy == dataclasses.replace(
        POLICY, maximum_interval=100 * POLICY.initial_interval
    )
    assert info.priority == Priority.default
    assert isinstance(info.task_token, bytes) and info.task_token
    assert info.start_to_close_timeout == timedelta(seconds=30)
    assert info.activity_run_id is None
    assert seen["client"] is client
    assert seen["payload_converter"] is client.data_converter.payload_converter
    assert seen["worker_shutdown"] is False


async def test_a_plain_function_activity_has_no_client(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client, task_queue=task_queue, workflows=[OneActivity], activities=[sync_reports]
    ):
        await client.execute_workflow(
            OneActivity.run, args=["sync_reports", key], id="s-" + key, task_queue=task_queue
        )
    assert "async def activities" in SEEN.pop(key)


def test_outside_an_activity_the_functions_say_so() -> None:
    with pytest.raises(RuntimeError, match="not in an activity"):
        activity.info()
    with pytest.raises(RuntimeError, match="not in an activity"):
        activity.cancellation_details()
    assert not activity.in_activity()


# -- cancellation and shutdown ----------------------------------------------------------


async def test_an_async_activity_sees_why_it_was_cancelled(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[CancelsItsActivity],
        activities=[waits_for_cancel],
    ):
        result = await client.execute_workflow(
            CancelsItsActivity.run,
            args=["waits_for_cancel", key],
            id="c-" + key,
            task_queue=task_queue,
        )
    assert result == "cancelled: CancelledError"
    cancelled, details = SEEN.pop(key)
    assert cancelled is True
    assert details == activity.ActivityCancellationDetails(cancel_requested=True)


async def test_a_shield_holds_a_threads_cancellation_until_its_block_ends(
    client: Client, task_queue: str
) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client, task_queue=task_queue, workflows=[CancelsItsActivity], activities=[shielded]
    ):
        handle = await client.start_workflow(
            CancelsItsActivity.run, args=["shielded", key], id="sh-" + key, task_queue=task_queue
        )
        result = await asyncio.wait_for(handle.result(), 30)
    assert SEEN.pop(key) == (
        "past the heartbeat",
        activity.ActivityCancellationDetails(cancel_requested=True),
    )
    assert result == "cancelled: CancelledError"


async def test_an_activity_is_told_the_worker_is_shutting_down(
    client: Client, task_queue: str
) -> None:
    key = uuid.uuid4().hex
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[OneActivity],
        activities=[waits_for_shutdown],
        graceful_shutdown_timeout=timedelta(seconds=10),
    )
    worker.start()
    handle = await client.start_workflow(
        OneActivity.run, args=["waits_for_shutdown", key], id="sd-" + key, task_queue=task_queue
    )
    await _until(lambda: SEEN.get(key) == "waiting", "the activity to start")
    await worker.shutdown()
    SEEN.pop(key)
    events = (await handle.fetch_history()).events
    (completed,) = [e for e in events if e.event_type == "ActivityTaskCompleted"]
    payload = completed.attributes["result"]["payloads"][0]
    assert client.data_converter.from_payloads_json([payload]) == ["saw shutdown: True"]
    await client.get_workflow_handle(handle.id).terminate("test over")


# -- async completion -------------------------------------------------------------------


async def test_an_async_activity_is_completed_from_another_process_by_task_token(
    client: Client, db_url: str, task_queue: str
) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client, task_queue=task_queue, workflows=[OneActivity], activities=[completes_later]
    ):
        handle = await client.start_workflow(
            OneActivity.run, args=["completes_later", key], id="ac-" + key, task_queue=task_queue
        )
        await _until(lambda: key in SEEN, "the activity to start")
        token: bytes = SEEN.pop(key)
        script = (
            "import asyncio, sys\n"
            "from engine import Client\n"
            "async def main():\n"
            "    client = await Client.connect(sys.argv[1])\n"
            "    handle = client.get_async_activity_handle(task_token=bytes.fromhex(sys.argv[2]))\n"
            "    await handle.heartbeat('almost')\n"
            "    await handle.complete('done elsewhere')\n"
            "    await client.close()\n"
            "asyncio.run(main())\n"
        )
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", script, db_url, token.hex()],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert await asyncio.wait_for(handle.result(), 30) == "done elsewhere"
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert types.count("ActivityTaskStarted") == 1 and "ActivityTaskCompleted" in types


async def test_async_handles_by_ids_fail_then_complete_and_heartbeat_after_cancel(
    client: Client, task_queue: str
) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[OneActivity, CancelsItsActivity],
        activities=[completes_later],
    ):
        handle = await client.start_workflow(
            OneActivity.run, args=["completes_later", key], id="ids-" + key, task_queue=task_queue
        )
        await _until(lambda: key in SEEN, "attempt 1")
        first = SEEN.pop(key)
        by_ids = client.get_async_activity_handle(workflow_id=handle.id, activity_id="1")
        await by_ids.fail(ApplicationError("try again"), last_heartbeat_details=["halfway"])
        await _until(lambda: key in SEEN, "attempt 2")
        assert SEEN.pop(key) != first  # a new attempt, a new token
        # The first attempt's token names an attempt that is over.
        with pytest.raises(ActivityNotFoundError, match="attempt 1 is over"):
            await client.get_async_activity_handle(task_token=first).complete("late")
        await by_ids.complete({"total": 3})
        assert await asyncio.wait_for(handle.result(), 30) == {"total": 3}
        # Named by workflow id only, the request is for the latest run: it has closed.
        with pytest.raises(ActivityNotFoundError, match="the run has closed"):
            await by_ids.complete("again")

        cancelled = await client.start_workflow(
            CancelsItsActivity.run,
            args=["completes_later", key, 30.0],
            id="cx-" + key,
            task_queue=task_queue,
        )
        await _wait_for_event(cancelled, "ActivityTaskCancelRequested")
        SEEN.pop(key)
        outside = client.get_async_activity_handle(workflow_id=cancelled.id, activity_id="1")
        with pytest.raises(AsyncActivityCancelledError) as raised:
            await outside.heartbeat("still here")
        assert raised.value.details == activity.ActivityCancellationDetails(cancel_requested=True)
        await outside.report_cancellation("gave up")
        assert await asyncio.wait_for(cancelled.result(), 30) == "cancelled: CancelledError"
    events = (await handle.fetch_history()).events
    failed = [e for e in events if e.event_type == "ActivityTaskFailed"]
    assert failed == []  # a retried failure records no event, as in Temporal
    assert [e.attributes["attempt"] for e in events if e.event_type == "ActivityTaskStarted"] == [2]


async def test_bad_handles_are_refused_and_write_nothing(client: Client, task_queue: str) -> None:
    key = uuid.uuid4().hex
    async with Worker(
        client, task_queue=task_queue, workflows=[OneActivity], activities=[completes_later]
    ):
        handle = await client.start_workflow(
            OneActivity.run, args=["completes_later", key], id="bad-" + key, task_queue=task_queue
        )
        await _until(lambda: key in SEEN, "the activity to start")
        token: bytes = SEEN.pop(key)
        before = (await handle.fetch_history()).events
        with pytest.raises(InvalidArgumentError, match="not issued by this engine"):
            client.get_async_activity_handle(task_token=b"CiQ2YjUx-some-temporal-token")
        with pytest.raises(InvalidArgumentError, match="damaged"):
            client.get_async_activity_handle(task_token=token[:-5])
        with pytest.raises(InvalidArgumentError, match="must be bytes"):
            client.get_async_activity_handle(task_token=token.decode())  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="not both"):
            client.get_async_activity_handle(task_token=token, workflow_id=handle.id)
        with pytest.raises(InvalidArgumentError, match="activity_id="):
            client.get_async_activity_handle(workflow_id=handle.id)
        with pytest.raises(ActivityNotFoundError, match="ended"):
            await client.get_async_activity_handle(
                workflow_id=handle.id, activity_id="99"
            ).complete(1)
        with pytest.raises(ActivityNotFoundError, match="no open run"):
            await client.get_async_activity_handle(
                workflow_id="nobody-" + key, activity_id="1"
            ).heartbeat()
        with pytest.raises(InvalidArgumentError, match="exception"):
            await client.get_async_activity_handle(task_token=token).fail("no")  # type: ignore[arg-type]
        assert (await handle.fetch_history()).events == before
        await client.get_async_activity_handle(task_token=token).complete("finally")
        assert await asyncio.wait_for(handle.result(), 30) == "finally"


def test_a_task_token_round_trips() -> None:
    from engine._service.types import ActivityRef

    ref = ActivityRef("default", "wf", "run-1", "7", scheduled_event_id=5, attempt=2)
    assert ActivityRef.from_token(ref.to_token()) == ref
    body = json.loads(ref.to_token().split(b":", 1)[1])
    assert body["attempt"] == 2
