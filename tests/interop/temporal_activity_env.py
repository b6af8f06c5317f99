"""Checks of activity code under ``ActivityEnvironment``, written for ``temporalio``.

This module imports ``temporalio`` only; ``test_activity_environment.py`` runs every
``check_*`` function here twice in child processes, once as written and once with
``temporalio`` swapped for ``engine`` in the import lines, and expects both to pass.
(Cancellation of a plain-function activity is checked at a heartbeat, where both SDKs raise;
``temporalio`` would also raise inside any Python code of the thread.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time

from temporalio import activity
from temporalio.exceptions import CancelledError
from temporalio.testing import ActivityEnvironment


@activity.defn
async def count_up(n: int) -> int:
    for i in range(n):
        activity.heartbeat(i, f"step {i}")
    return activity.info().attempt


@activity.defn
async def until_cancelled() -> str:
    try:
        while True:
            activity.heartbeat("alive")
            await asyncio.sleep(0.01)
    except asyncio.CancelledError:
        details = activity.cancellation_details()
        assert activity.is_cancelled() and details is not None and details.cancel_requested
        raise


@activity.defn
def sync_until_cancelled() -> str:
    while True:
        activity.heartbeat()
        time.sleep(0.01)


@activity.defn
async def until_shutdown() -> bool:
    await activity.wait_for_worker_shutdown()
    return activity.is_worker_shutdown()


@activity.defn
def sync_until_shutdown() -> bool:
    activity.wait_for_worker_shutdown_sync(5.0)
    return activity.is_worker_shutdown()


@activity.defn
async def logs() -> str:
    activity.logger.info("hello from %s", activity.info().activity_type)
    return "logged"


@activity.defn
async def uses_client() -> object:
    return activity.client()


@activity.defn
def sync_uses_client() -> str:
    try:
        activity.client()
    except RuntimeError:
        return "no client"
    return "client"


async def check_heartbeats_and_info() -> None:
    env = ActivityEnvironment()
    seen: list[tuple[object, ...]] = []
    env.on_heartbeat = lambda *details: seen.append(details)
    env.info = dataclasses.replace(env.default_info(), attempt=3, activity_type="count_up")
    assert await env.run(count_up, 3) == 3
    assert seen == [(0, "step 0"), (1, "step 1"), (2, "step 2")]


async def check_default_info() -> None:
    info = ActivityEnvironment.default_info()
    assert (info.activity_id, info.activity_type, info.attempt) == ("test", "unknown", 1)
    assert (info.workflow_id, info.workflow_run_id, info.task_queue) == ("test", "test-run", "test")
    assert info.task_token == b"test" and info.namespace == "default" and not info.is_local


async def check_async_cancel() -> None:
    env = ActivityEnvironment()
    asyncio.get_running_loop().call_later(0.05, env.cancel)
    try:
        await env.run(until_cancelled)
    except asyncio.CancelledError:
        return
    raise AssertionError("the activity was not cancelled")


async def check_sync_cancel_at_a_heartbeat() -> None:
    env = ActivityEnvironment()
    threading.Timer(0.05, env.cancel).start()
    try:
        await asyncio.to_thread(env.run, sync_until_cancelled)
    except CancelledError:
        return
    raise AssertionError("the activity was not cancelled")


async def check_cancelled_before_it_runs() -> None:
    env = ActivityEnvironment()
    env.cancel()
    try:
        await env.run(until_cancelled)
    except asyncio.CancelledError:
        return
    raise AssertionError("the activity was not cancelled")


async def check_worker_shutdown() -> None:
    env = ActivityEnvironment()
    asyncio.get_running_loop().call_later(0.05, env.worker_shutdown)
    assert await env.run(until_shutdown) is True
    threading.Timer(0.05, env.worker_shutdown).start()  # a second call changes nothing
    sync_env = ActivityEnvironment()
    threading.Timer(0.05, sync_env.worker_shutdown).start()
    assert await asyncio.to_thread(sync_env.run, sync_until_shutdown) is True


async def check_logger_adds_the_info() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    activity.logger.base_logger.addHandler(handler)
    activity.logger.base_logger.setLevel(logging.INFO)
    try:
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.default_info(), activity_type="logs")
        assert await env.run(logs) == "logged"
    finally:
        activity.logger.base_logger.removeHandler(handler)
    (record,) = records
    assert record.getMessage().startswith("hello from logs ({")
    assert record.temporal_activity["activity_type"] == "logs"  # type: ignore[attr-defined]
    assert record.temporal_activity["workflow_run_id"] == "test-run"  # type: ignore[attr-defined]


async def check_client_only_in_async_code() -> None:
    sentinel = object()
    env = ActivityEnvironment(client=sentinel)  # type: ignore[arg-type]
    assert await env.run(uses_client) is sentinel
    assert env.run(sync_uses_client) == "no client"


async def check_outside_an_activity() -> None:
    assert not activity.in_activity()
    try:
        activity.info()
    except RuntimeError:
        return
    raise AssertionError("activity.info() outside an activity did not raise")
