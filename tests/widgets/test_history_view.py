"""HistoryView: a live table over a run's history, sent to the browser a window at a time."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from engine import Client, Worker, WorkflowHistory
from widgets import HistoryView

from ..conftest import TEMPORAL_DATA
from ..interop.engine_code import RetryWF, SignalWF, flaky
from .conftest import eventually, widget_threads
from .test_models import _synthetic


async def test_rows_grow_while_the_run_progresses(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 2, id="hv-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = HistoryView(handle, refresh_interval=0.02)
        assert view.live and view.refreshing and view.status == "running"
        assert handle.id in view.title and "SignalWF" in view.title
        await handle.signal(SignalWF.add_message, "one")
        await eventually(
            lambda: [r["kind"] for r in view.rows] == ["workflow", "signal"], "the first signal"
        )
        view.mode = "full"  # as the front end's toggle does
        assert view.total == view.event_count == len(view.rows)
        assert view.rows[0]["event_type"] == "WorkflowExecutionStarted"
        await handle.signal(SignalWF.add_message, "two")
        await handle.result()
        await eventually(lambda: not view.live, "the close")
    assert view.rows[-1]["event_type"] == "WorkflowExecutionCompleted"
    assert view.total == len((await handle.fetch_history()).events)
    view.mode = "compact"
    assert view.status == "completed" and view.window_start == 0
    assert [r["label"] for r in view.rows] == ["SignalWF", "add_message", "add_message"]
    await eventually(lambda: not view.refreshing and not widget_threads(), "refresh end")
    view.close()


async def test_failures_are_counted_and_marked(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[RetryWF], activities=[flaky]):
        handle = await client.start_workflow(
            RetryWF.run, "x", id="hvf-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await handle.result()
    view = HistoryView(handle)
    assert not view.live and not view.refreshing and widget_threads() == []
    index, activity = next((i, r) for i, r in enumerate(view.rows) if r["kind"] == "activity")
    # The history keeps the last attempt (3, which succeeded) with the last failure.
    assert activity["attempts"] == 3 and activity["status"] == "completed"
    assert "detail" not in activity and view.detail == ""  # sent for the selected row only
    view.selected = index  # as the front end does on a click
    assert "flaky failure on attempt 2" in view.detail and "ActivityTaskScheduled" in view.detail
    view.mode = "full"
    assert view.selected == -1 and view.detail == ""
    view.close()


def test_a_recorded_history_needs_no_database() -> None:
    path = TEMPORAL_DATA / "temporal_history_activity_failed_workflow_failed.json"
    view = HistoryView(WorkflowHistory.from_json("failed", Path(path).read_text()), mode="full")
    assert not view.live and view.status == "failed" and view.failure_count >= 2
    failed = [r["event_type"] for r in view.rows if r["failed"]]
    assert "WorkflowExecutionFailed" in failed and "ActivityTaskFailed" in failed
    view.show_event(5)
    assert view.rows[view.selected - view.window_start]["event_id"] == 5
    view.close()


def test_a_large_history_sends_one_window_at_a_time() -> None:
    history = WorkflowHistory("big", _synthetic(17_000))
    view = HistoryView(history, mode="full", window_size=100)
    assert view.total == 51_001 and len(view.rows) == 100
    view.window_start = 45_000  # the front end scrolled
    assert [r["event_id"] for r in view.rows][:2] == [45_001, 45_002] and len(view.rows) == 100
    assert view.rows_start == 45_000  # where these rows go, sent with them
    view.selected = 50_000  # selected with the keyboard, outside the window
    assert '"attempt": 1' in view.detail or "scheduledEventId" in view.detail
    view.window_start = 51_000
    assert [r["event_id"] for r in view.rows] == [51_001]
    view.mode = "compact"
    assert view.total == 17_001 and view.window_start == 0 and len(view.rows) == 100
    view.close()


def test_bad_arguments_say_what_to_pass() -> None:
    with pytest.raises(TypeError, match="WorkflowHandle"):
        HistoryView("order-1")  # type: ignore[arg-type]
    history = WorkflowHistory("x", _synthetic(1))
    with pytest.raises(ValueError, match="mode"):
        HistoryView(history, mode="wide")
    with pytest.raises(ValueError, match="refresh_interval"):
        HistoryView(history, refresh_interval=0)
    view = HistoryView(history)
    view.mode = "sideways"  # an unknown mode from the front end is refused
    assert view.mode == "compact"
    view.close()


async def test_a_failing_refresh_says_so_and_stops(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 1, id="hve-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = HistoryView(handle, refresh_interval=0.01)
        reads = 0

        async def broken(*args: object, **kwargs: object) -> None:
            nonlocal reads
            reads += 1
            raise ConnectionError("database unreachable")

        monkeypatch.setattr(view._source, "poll", broken)
        await eventually(lambda: "retrying" in view.error, "the first failure shown")
        assert view.live and "database unreachable" in view.error
        await eventually(lambda: not view.refreshing, "the refresh to give up", timeout=30)
        assert reads == 5 and not view.live and view.error.startswith("live refresh stopped")
        await handle.terminate()
    view.close()


async def test_the_refresh_pauses_while_no_view_is_open(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 1, id="hvi-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = HistoryView(handle, refresh_interval=0.01)
        view._views.idle_after = 0.0
        reads = 0
        poll = view._source.poll

        async def counted(*args: object, **kwargs: object) -> object:
            nonlocal reads
            reads += 1
            return await poll(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(view._source, "poll", counted)
        await eventually(lambda: reads > 2, "reads before any view rendered")
        # The front end renders a view, then its output is cleared.
        view._on_message(view, {"type": "view", "open": True}, [])
        view._on_message(view, {"type": "view", "open": False}, [])
        await asyncio.sleep(0.05)
        paused = reads
        await asyncio.sleep(0.2)
        assert reads <= paused + 1, "the refresh kept reading with no view open"
        assert view.refreshing  # paused, not stopped
        await handle.signal(SignalWF.add_message, "while nobody looks")
        view._on_message(view, {"type": "view", "open": True}, [])  # the notebook reopens
        await eventually(lambda: not view.live, "the close, seen after the view reopened")
        assert reads > paused
    view.close()
