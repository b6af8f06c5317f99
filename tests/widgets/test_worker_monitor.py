"""WorkerMonitor: rows from metric snapshots, and a live view of a running worker."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from engine import Client, Worker, activity, workflow
from widgets import WorkerMonitor, _live
from widgets.worker_monitor import monitor_rows

from .conftest import eventually, widget_threads

# -- the pure model ---------------------------------------------------------------------


def _snapshot(**changes: Any) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "temporal_worker_task_slots_available": {"WorkflowWorker": 100, "ActivityWorker": 8},
        "temporal_sticky_cache_size": 3,
        "temporal_sticky_cache_hit": 30,
        "temporal_sticky_cache_miss": 10,
        "temporal_sticky_cache_total_forced_eviction": 0,
        "temporal_workflow_task_execution_failed": {},
        "temporal_activity_schedule_to_start_latency": {
            "count": 0,
            "median_ms": None,
            "max_ms": None,
        },
        "workflow_tasks_completed": 50,
        "activities_completed": 20,
        "activities_failed": 0,
        "workflow_polls": 100,
        "activity_polls": 40,
    }
    snap.update(changes)
    return snap


def _by_key(rows: list[Any]) -> dict[str, Any]:
    return {r.key: r for r in rows}


def test_slots_in_use_come_from_the_totals() -> None:
    totals = {"WorkflowWorker": 100, "ActivityWorker": 10}
    rows = _by_key(monitor_rows(_snapshot(), slots_total=totals))
    assert rows["slots.activity"].value == 2 and rows["slots.activity"].text == "2 / 10 in use"
    assert rows["slots.activity"].detail == "8 available"
    assert rows["slots.activity"].fraction == pytest.approx(0.2)
    assert rows["slots.workflow"].value == 0 and rows["slots.workflow"].level == ""
    full = _snapshot(
        temporal_worker_task_slots_available={"WorkflowWorker": 0, "ActivityWorker": 0}
    )
    busy = _by_key(monitor_rows(full, slots_total=totals))
    assert busy["slots.activity"].level == "busy" and busy["slots.activity"].fraction == 1.0

    # Without the totals only availability is known; a runner without slots is left out.
    bare = _by_key(monitor_rows(_snapshot()))
    assert bare["slots.activity"].text == "8 available" and bare["slots.activity"].value is None
    no_activities = _by_key(monitor_rows(_snapshot(), slots_total={"WorkflowWorker": 100}))
    assert no_activities["slots.activity"].value is None


def test_rates_need_a_previous_snapshot() -> None:
    first = _by_key(monitor_rows(_snapshot()))
    assert first["polls.workflow"].value == 100 and first["polls.workflow"].rate is None
    assert first["polls.workflow"].detail == ""
    later = _snapshot(workflow_polls=110, activity_polls=40, workflow_tasks_completed=56)
    rows = _by_key(monitor_rows(later, _snapshot(), 2.0))
    assert rows["polls.workflow"].rate == pytest.approx(5.0)
    assert rows["polls.workflow"].detail == "5.0 / s"
    assert rows["polls.activity"].rate == 0.0
    assert rows["tasks.workflow_tasks_completed"].rate == pytest.approx(3.0)
    # A zero interval gives no rate rather than a division by zero.
    assert _by_key(monitor_rows(later, _snapshot(), 0.0))["polls.workflow"].rate is None


def test_cache_failures_and_latency() -> None:
    snap = _snapshot(
        temporal_sticky_cache_total_forced_eviction=2,
        temporal_workflow_task_execution_failed={"NondeterminismError": 1, "WorkflowError": 4},
        temporal_activity_schedule_to_start_latency={
            "count": 7,
            "median_ms": 12.4,
            "max_ms": 15000,
        },
        activities_failed=3,
    )
    rows = monitor_rows(snap)
    keyed = _by_key(rows)
    assert keyed["cache.size"].value == 3
    assert keyed["cache.hit"].detail == "75% of lookups"
    assert keyed["cache.forced_eviction"].level == "bad"
    failures = [(r.label, r.value) for r in rows if r.group == "failures"]
    assert failures == [("WorkflowError", 4), ("NondeterminismError", 1)]  # most first
    assert keyed["failures.WorkflowError"].level == "bad"
    assert keyed["tasks.activities_failed"].level == "bad"
    assert keyed["latency.median"].text == "12 ms"
    assert keyed["latency.median"].detail == "of the last 7 attempts"
    assert keyed["latency.max"].text == "15.0 s"

    quiet = _by_key(monitor_rows(_snapshot()))
    assert quiet["failures"].value == 0 and quiet["latency.median"].text == "no samples"
    assert quiet["cache.forced_eviction"].level == ""
    assert all(isinstance(r.to_json(), dict) for r in rows)


# -- a running worker -------------------------------------------------------------------

gate: dict[str, asyncio.Event] = {}


@activity.defn(name="MonitorGated")
async def gated(name: str) -> str:
    await gate["open"].wait()
    return f"done {name}"


@workflow.defn(name="MonitorGatedWF")
class GatedWF:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            gated, name, start_to_close_timeout=timedelta(seconds=30)
        )


BROKEN = {"on": True}


@workflow.defn(name="MonitorFragile")
class Fragile:
    @workflow.run
    async def run(self) -> str:
        if BROKEN["on"]:
            raise ValueError("a bug in workflow code")
        return "fixed"


def _assert_stopped(monitor: WorkerMonitor) -> None:
    assert not monitor.refreshing and not monitor.live
    assert _live.subscriptions() == 0
    assert _live.live_thread() is None and widget_threads() == []


def _value(monitor: WorkerMonitor, key: str) -> Any:
    row = monitor.row(key)
    return None if row is None else row["value"]


async def test_slots_in_use_while_an_activity_runs(client: Client, task_queue: str) -> None:
    gate["open"] = asyncio.Event()
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[GatedWF],
        activities=[gated],
        max_concurrent_activities=4,
    ) as worker:
        monitor = WorkerMonitor(worker, refresh_interval=0.02)
        try:
            assert monitor.title.endswith(task_queue) and monitor.running
            assert monitor.activity_types == ["MonitorGated"]
            assert _value(monitor, "slots.activity") == 0
            handle = await client.start_workflow(
                GatedWF.run, "x", id="gated-" + uuid.uuid4().hex, task_queue=task_queue
            )
            await eventually(
                lambda: _value(monitor, "slots.activity") == 1, "one activity slot in use"
            )
            assert monitor.row("slots.activity")["text"] == "1 / 4 in use"
            assert monitor.row("slots.activity")["detail"] == "3 available"
            gate["open"].set()
            assert await asyncio.wait_for(handle.result(), 30) == "done x"
            await eventually(
                lambda: (
                    _value(monitor, "slots.activity") == 0
                    and _value(monitor, "tasks.activities_completed") == 1
                ),
                "the slot given back",
            )
            latency = monitor.row("latency.median")
            assert latency["value"] is not None and latency["detail"] == "of the last 1 attempt"
            # Rates appear once two snapshots were taken.
            await eventually(
                lambda: monitor.row("polls.workflow")["rate"] is not None, "a poll rate"
            )
        finally:
            monitor.close()
        _assert_stopped(monitor)
    # Closed: the rows no longer follow the worker.
    assert monitor.running


async def test_failure_reasons_are_counted(client: Client, task_queue: str) -> None:
    BROKEN["on"] = True
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]) as worker:
        monitor = WorkerMonitor(worker, refresh_interval=0.02)
        try:
            assert monitor.row("failures")["value"] == 0
            assert monitor.row("slots.activity") is None  # no activities on this worker
            handle = await client.start_workflow(
                Fragile.run, id="frag-" + uuid.uuid4().hex, task_queue=task_queue
            )
            await eventually(
                lambda: (_value(monitor, "failures.WorkflowError") or 0) >= 1,
                "the failed workflow task counted by reason",
            )
            assert monitor.row("failures") is None
            assert monitor.row("failures.WorkflowError")["level"] == "bad"
            BROKEN["on"] = False
            worker.register_workflow(Fragile)
            assert await asyncio.wait_for(handle.result(), 30) == "fixed"
        finally:
            monitor.close()
        _assert_stopped(monitor)


# -- failures and idleness of the live refresh ------------------------------------------


class _Snapshots:
    """Wraps ``worker.metrics.snapshot``: counts the reads, records the time of each one
    that failed, and raises while ``broken``."""

    def __init__(self, worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        self.failed: list[float] = []
        self.broken = False
        real = worker.metrics.snapshot

        def snapshot() -> dict[str, Any]:
            self.reads += 1
            if self.broken:
                self.failed.append(time.monotonic())
                raise OSError("the metrics are gone")
            return real()

        monkeypatch.setattr(worker.metrics, "snapshot", snapshot)


async def test_failing_reads_show_back_off_and_stop_the_refresh(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    interval = 0.05
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]) as worker:
        snapshots = _Snapshots(worker, monkeypatch)
        monitor = WorkerMonitor(worker, refresh_interval=interval)
        try:
            assert monitor.error == "" and monitor.live and monitor.rows

            # A read fails: it shows and is tried again; a read that works clears it.
            snapshots.broken = True
            await eventually(lambda: "retrying" in monitor.error, "the failure shown")
            assert re.fullmatch(
                r"live refresh failed: could not read the worker's metrics: "
                r"the metrics are gone \(retrying, [1-4] of 5\)",
                monitor.error,
            )
            assert monitor.refreshing and monitor.live and monitor.rows  # the last ones stay
            snapshots.broken = False
            await eventually(lambda: monitor.error == "", "the error cleared")
            assert monitor.refreshing and monitor.live

            # Five failures in a row, each after a longer pause: the refresh stops.
            first = len(snapshots.failed)
            snapshots.broken = True
            await eventually(lambda: not monitor.refreshing, "the refresh stopped")
            assert monitor.error == (
                "live refresh stopped: could not read the worker's metrics: the metrics are gone"
            )
            assert not monitor.live
            await eventually(
                lambda: _live.live_thread() is None and widget_threads() == [],
                "the widgets thread gone",
            )
            failed = snapshots.failed[first:]
            assert len(failed) == 5, failed
            gaps = [b - a for a, b in itertools.pairwise(failed)]
            for n, gap in enumerate(gaps, start=1):  # interval * 2**failures
                assert gap >= 0.9 * interval * 2**n, gaps
            reads = snapshots.reads
            with pytest.raises(OSError, match="the metrics are gone"):
                monitor.update()  # asked for directly, the error is raised
            assert snapshots.reads == reads + 1  # and nothing read in the background
        finally:
            monitor.close()
        _assert_stopped(monitor)


async def test_a_snapshot_taken_while_a_counter_grows_is_taken_again(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]) as worker:
        monitor = WorkerMonitor(worker, refresh_interval=60)
        try:
            real = worker.metrics.snapshot
            calls = []

            def snapshot() -> dict[str, Any]:
                calls.append(1)
                if len(calls) == 1:
                    raise RuntimeError("dictionary changed size during iteration")
                return real()

            monkeypatch.setattr(worker.metrics, "snapshot", snapshot)
            monitor.update()
            assert len(calls) == 2 and monitor.error == ""
        finally:
            monitor.close()
        _assert_stopped(monitor)


async def test_nothing_is_read_while_no_view_is_open(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_live, "IDLE_AFTER", 0.0)
    opened, closed = {"type": "view", "open": True}, {"type": "view", "open": False}
    async with Worker(client, task_queue=task_queue, workflows=[Fragile]) as worker:
        snapshots = _Snapshots(worker, monkeypatch)
        monitor = WorkerMonitor(worker, refresh_interval=0.01)
        try:
            # Never rendered: read at every tick.
            n = snapshots.reads
            await eventually(lambda: snapshots.reads >= n + 3, "reads before any view")
            monitor._handle_custom_msg(opened, [])
            n = snapshots.reads
            await eventually(lambda: snapshots.reads >= n + 3, "reads while a view is open")

            # The view goes: the refresh keeps ticking but reads nothing.
            idle_at: list[int] = []  # the number of reads at each idle tick
            idle = monitor._views.idle

            def watched() -> bool:
                out = idle()
                if out:
                    idle_at.append(snapshots.reads)
                return out

            monkeypatch.setattr(monitor._views, "idle", watched)
            monitor._handle_custom_msg(closed, [])
            await eventually(lambda: len(idle_at) >= 20, "twenty idle ticks")
            assert len(set(idle_at)) == 1 and snapshots.reads == idle_at[0]
            assert monitor.refreshing and monitor.live

            # A view opens again: reads resume.
            monitor._handle_custom_msg(opened, [])
            n = snapshots.reads
            await eventually(lambda: snapshots.reads >= n + 3, "reads resumed")
        finally:
            monitor.close()
        _assert_stopped(monitor)
