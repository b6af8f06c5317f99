"""Worker processes killed with SIGKILL: runs resume in a new process; nothing is lost."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from engine import Client

from .procs import WorkerProcess, assert_no_gaps, until
from .worker_proc import CrashActivityWF, CrashTimerWF, ShareWF

pytestmark = pytest.mark.crash


async def test_sigkill_during_activity_then_new_worker_finishes(
    client: Client, db_url: str, task_queue: str, tmp_path: Path
) -> None:
    wid = "crash-act-" + uuid.uuid4().hex
    first = WorkerProcess(db_url, task_queue, tmp_path)
    try:
        handle = await client.start_workflow(
            CrashActivityWF.run, "order", id=wid, task_queue=task_queue
        )

        async def attempt1_running() -> bool:
            return any(p.name.startswith(f"{wid}.attempt1") for p in tmp_path.iterdir())

        await until(attempt1_running)
        first.kill()  # in the middle of the activity
    finally:
        first.stop()
    second = WorkerProcess(db_url, task_queue, tmp_path)
    try:
        result = await asyncio.wait_for(handle.result(), 60)
    finally:
        second.stop()
    assert result == "order done by attempt 2"
    markers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(wid))
    assert len(markers) == 2  # the activity ran again, in the second process
    assert f"pid{first.proc.pid}" in markers[0] and f"pid{second.proc.pid}" in markers[1]
    events = (await handle.fetch_history()).events
    assert_no_gaps(events)
    types = [e.event_type for e in events]
    assert types == [
        "WorkflowExecutionStarted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
        "ActivityTaskScheduled",
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
        "WorkflowExecutionCompleted",
    ]
    attempts = await handle.fetch_attempts()
    assert [a["outcome"] for a in attempts] == ["timed_out", "completed"]


async def test_sigkill_while_waiting_on_timer_then_late_worker_completes(
    client: Client, db_url: str, task_queue: str, tmp_path: Path
) -> None:
    wid = "crash-timer-" + uuid.uuid4().hex
    first = WorkerProcess(db_url, task_queue, tmp_path)
    try:
        handle = await client.start_workflow(CrashTimerWF.run, 1.0, id=wid, task_queue=task_queue)

        async def timer_started() -> bool:
            events = (await handle.fetch_history()).events
            return any(e.event_type == "TimerStarted" for e in events)

        await until(timer_started)
        first.kill()
    finally:
        first.stop()
    await asyncio.sleep(2.0)  # the timer is due while no worker (and no timer host) runs
    second = WorkerProcess(db_url, task_queue, tmp_path)
    try:
        assert await asyncio.wait_for(handle.result(), 30) == "woke after 1.0s"
    finally:
        second.stop()
    events = (await handle.fetch_history()).events
    assert_no_gaps(events)
    started = next(e for e in events if e.event_type == "TimerStarted")
    fired = next(e for e in events if e.event_type == "TimerFired")
    assert fired.event_time - started.event_time >= 2.0


async def test_two_worker_processes_share_one_postgres_queue(
    pg_url: str, task_queue: str, tmp_path: Path
) -> None:
    client = await Client.connect(pg_url)
    db_url = pg_url
    workers = [WorkerProcess(db_url, task_queue, tmp_path) for _ in range(2)]
    try:
        handles = await asyncio.gather(
            *(
                client.start_workflow(
                    ShareWF.run, i, id=f"share-{i}-{uuid.uuid4().hex}", task_queue=task_queue
                )
                for i in range(200)
            )
        )
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    finally:
        for w in workers:
            w.stop()
    assert results == [i * 2 for i in range(200)]
    identities: set[str] = set()
    for handle in handles:
        events = (await handle.fetch_history()).events
        types = [e.event_type for e in events]
        assert types.count("WorkflowExecutionCompleted") == 1
        assert types.count("ActivityTaskCompleted") == 1
        identities |= {
            e.attributes["identity"] for e in events if e.event_type == "WorkflowTaskCompleted"
        }
    assert len(identities) == 2, "both worker processes took work"
    await client.close()
