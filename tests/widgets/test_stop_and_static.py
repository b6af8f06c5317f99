"""stop() keeps a widget on screen; every widget's display data has a static fallback."""

from __future__ import annotations

import asyncio
import base64
import io
import uuid
from datetime import timedelta
from typing import Any

import pytest
from matplotlib.image import imread

from engine import Client, HistoryEvent, Worker, WorkflowHistory, activity, workflow
from widgets import (
    ExecutionList,
    HistoryView,
    ReplayStepper,
    Timeline,
    WorkerMonitor,
    _live,
    _snapshot,
)
from widgets.models import min_bar_seconds
from widgets.timeline_model import timeline

from ..interop.engine_code import SignalWF
from .conftest import eventually, widget_threads
from .test_models import _synthetic
from .test_stepper import ActivityFirst, Order, histories  # noqa: F401 (a fixture)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EVIL = "<img src=x onerror=alert(1)>"
EVIL_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def _bundle(widget: Any) -> dict[str, Any]:
    data, metadata = widget._repr_mimebundle_()
    assert isinstance(metadata, dict)
    assert data[WIDGET_VIEW]["model_id"] == widget.model_id  # the live view stays first
    return data


def _png(data: dict[str, Any]) -> Any:
    raw = base64.b64decode(data["image/png"])
    assert raw.startswith(b"\x89PNG\r\n\x1a\n")
    return imread(io.BytesIO(raw), format="png")


def _assert_no_thread() -> None:
    assert _live.subscriptions() == 0 and _live.live_thread() is None
    assert widget_threads() == []


# -- stop() ------------------------------------------------------------------------------


async def test_stop_ends_the_refresh_and_keeps_the_run_views(
    client: Client, task_queue: str
) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 2, id="st-" + uuid.uuid4().hex, task_queue=task_queue
        )
        history = HistoryView(handle, refresh_interval=0.02)
        lanes = Timeline(handle, refresh_interval=0.02)
        await handle.signal(SignalWF.add_message, "one")
        await eventually(lambda: len(history.rows) == 2, "the signal's row")
        assert history.refreshing and lanes.refreshing and widget_threads()

        history.stop()
        assert not history.refreshing and not history.live and lanes.refreshing
        lanes.stop()
        assert not lanes.refreshing and not lanes.live
        _assert_no_thread()  # no thread once the last live widget stopped
        rows, data = list(history.rows), dict(lanes.data)

        await handle.signal(SignalWF.add_message, "two")
        await handle.result()
        await asyncio.sleep(0.1)
        # Stopped: nothing follows the run, and the models are still open with their state.
        assert history.rows == rows and lanes.data == data
        for view in (history, lanes):
            assert view.comm is not None and view._model_id
            assert WIDGET_VIEW in _bundle(view)
        history.stop()  # twice is fine
        history.close()
        lanes.close()
    assert history.comm is None and lanes.comm is None  # close() still closes


@activity.defn(name="StopGated")
async def stop_gated(name: str) -> str:
    await gates[name].wait()
    return f"did {name}"


gates: dict[str, asyncio.Event] = {}


@workflow.defn(name="StopSteps")
class StepsWF:
    @workflow.run
    async def run(self) -> list[str]:
        done = []
        for name in ("reserve", "charge", "ship"):
            done.append(
                await workflow.execute_activity(
                    stop_gated, name, start_to_close_timeout=timedelta(seconds=30)
                )
            )
        await workflow.sleep(0.02)
        return done


async def test_stop_on_the_worker_monitor_and_the_execution_list(
    client: Client, task_queue: str
) -> None:
    gates.clear()
    gates.update({n: asyncio.Event() for n in ("reserve", "charge", "ship")})
    async with Worker(
        client, task_queue=task_queue, workflows=[StepsWF], activities=[stop_gated]
    ) as worker:
        handle = await client.start_workflow(
            StepsWF.run, id="sm-" + uuid.uuid4().hex, task_queue=task_queue
        )
        monitor = WorkerMonitor(worker, refresh_interval=0.02)
        runs = ExecutionList(client, f"TaskQueue = '{task_queue}'", refresh_interval=0.02)
        shown = runs.open_run(handle.id)
        assert shown is not None and shown.refreshing
        assert monitor.refreshing and runs.refreshing

        monitor.stop()
        runs.stop()
        assert not monitor.refreshing and not monitor.live
        assert not runs.refreshing and not runs.table.live and not shown.refreshing
        _assert_no_thread()
        figures, listed = list(monitor.rows), list(runs.rows)
        for gate in gates.values():
            gate.set()
        await handle.result()
        await asyncio.sleep(0.1)
        assert monitor.rows == figures and runs.rows == listed
        assert runs.rows[0]["status"] == "running"  # as it was when stopped
        for widget in (monitor, runs, runs.table, shown):
            assert widget.comm is not None
        # Still answers: a run opened now shows its history, without following it.
        again = runs.open_run(handle.id)
        assert again is not None and not again.refreshing and again.status == "completed"
        _assert_no_thread()
        monitor.close()
        runs.close()
    assert monitor.comm is None and runs.comm is None and runs.table.comm is None


def test_stop_on_the_stepper_keeps_it(histories) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    stepper = ReplayStepper(histories["order"], [Order])
    stepper.step_task()
    before = (stepper.snapshot.position, stepper.source_view.value)
    stepper.stop()
    assert stepper.comm is not None and stepper.source_view.comm is not None
    assert (stepper.snapshot.position, stepper.source_view.value) == before
    stepper.step()  # the buttons still work
    stepper.close()
    assert stepper.comm is None and stepper.source_view.comm is None


# -- the outputs get the final snapshot -----------------------------------------------------


async def test_a_displayed_view_gets_its_final_state_when_the_run_closes(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[dict[str, Any], str, bool]] = []
    monkeypatch.setattr(
        _snapshot, "publish", lambda data, md, did, update: sent.append((data, did, update))
    )
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await client.start_workflow(
            SignalWF.run, 1, id="fin-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = HistoryView(handle, refresh_interval=0.02)
        hidden = HistoryView(handle, refresh_interval=0.02)  # never displayed
        view._ipython_display_()  # what IPython's display() calls
        ((first, display_id, update),) = sent
        assert not update and WIDGET_VIEW in first and "running" in first["text/html"]
        await handle.signal(SignalWF.add_message, "done")
        await handle.result()
        await eventually(lambda: not view.refreshing and not hidden.refreshing, "the close")
    await eventually(lambda: len(sent) == 2, "the output updated")
    final, same_id, update = sent[1]
    assert update and same_id == display_id and display_id.endswith(view.model_id)
    assert "completed" in final["text/html"] and "add_message" in final["text/html"]
    # That update came from the refresh thread: a live front end applies it, but a notebook
    # executor (nbconvert, nbval) keeps only what is sent while a cell runs, so stop() on
    # the kernel's thread sends the final state once more...
    view.stop()
    assert len(sent) == 3 and sent[2][2] and sent[2][1] == display_id
    assert sent[2][0]["text/html"] == final["text/html"]
    view.stop()  # ... and then only when something changed (no redraw for nothing)
    assert len(sent) == 3
    view.title = "renamed"  # something it shows changed
    view.stop()  # stop() sends what changed
    assert len(sent) == 4 and sent[3][2] and sent[3][1] == display_id
    view.close()
    hidden.close()
    view.stop()  # closed: nothing to update
    assert len(sent) == 4


# -- static fallbacks ------------------------------------------------------------------


def test_run_views_have_static_html_png_and_text(histories) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    history = histories["order"]
    evil = WorkflowHistory(EVIL, history.events)
    view = HistoryView(evil)
    data = _bundle(view)
    html = data["text/html"]
    assert EVIL not in html and EVIL_ESCAPED in html
    assert "step" in html and "timer 1" in html and "completed" in html  # the compact rows
    assert data["text/plain"].startswith("<HistoryView ") and "step" in data["text/plain"]
    assert "object at 0x" not in data["text/plain"]

    lanes = Timeline(evil)
    data = _bundle(lanes)
    image = _png(data)
    assert image.shape[0] > 50 and image.shape[1] > 300
    assert data["text/plain"].startswith("<Timeline ") and "workflow tasks" in data["text/plain"]
    # Asked for some types only (IPython's include / exclude): only those are drawn.
    only, _ = lanes._repr_mimebundle_(include={"text/plain"})
    assert "image/png" not in only
    view.close()
    lanes.close()
    assert view._repr_mimebundle_ is None  # closed: ipywidgets' own meaning


def test_the_stepper_static_snapshot(histories) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    stepper = ReplayStepper(histories["swap"], [ActivityFirst], breakpoints="TimerFired")
    stepper.run_to_breakpoint()  # diverges at event 5
    data = _bundle(stepper)
    html, text = data["text/html"], data["text/plain"]
    assert "event 5 of" in html and "diverged" in html
    assert "Non-determinism at event 5" in html and 'role="alert"' in html
    assert "▶" in html and "result = await workflow.execute_activity(" in html  # the line
    assert "TimerStarted" in html and "WorkflowTaskCompleted" in html  # events around
    assert "<pre>" in html and "\n" in html.split("<pre>")[1].split("</pre>")[0]
    assert text.startswith("Replay of swap-") and "Non-determinism at event 5" in text
    assert "HTML(value=" not in text and "<style>" not in text
    assert repr(stepper).startswith("<ReplayStepper swap-")
    stepper.close()


def test_stepper_user_text_is_escaped_in_the_snapshot(histories) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    stepper = ReplayStepper(histories["order"], [Order])
    stepper.step_task()
    html = _bundle(stepper)["text/html"]
    assert "<script" not in html.lower() and "&lt;script&gt;" in html
    stepper.close()


async def test_list_and_monitor_static_html_escape_user_data(
    client: Client, task_queue: str
) -> None:
    evil_queue = task_queue + "<script>x</script>"
    handle = await client.start_workflow(SignalWF.run, 1, id=EVIL, task_queue=evil_queue)
    runs = ExecutionList(client, refresh_interval=60)
    data = _bundle(runs)
    html = data["text/html"]
    assert EVIL not in html and EVIL_ESCAPED in html and "&lt;script&gt;" in html
    assert "all 1" in html and "running 1" in html and "page 1" in html
    run_id = handle.result_run_id or runs.rows[0]["run_id"]
    assert f"…{run_id[-8:]}" in html and run_id[:13] not in html  # by its end
    assert data["text/plain"].startswith("<ExecutionList 1 runs (running 1)")
    runs.close()

    async with Worker(client, task_queue=evil_queue, workflows=[SignalWF]) as worker:
        monitor = WorkerMonitor(worker, refresh_interval=60)
        data = _bundle(monitor)
        html = data["text/html"]
        assert "<script>" not in html and "&lt;script&gt;" in html
        assert "Sticky cache" in html and "Cached runs" in html and "SignalWF" in html
        text = data["text/plain"]
        assert text.startswith("<WorkerMonitor task queue ") and "object at 0x" not in text
        assert "Sticky cache · Hits:" in text
        monitor.close()
        await handle.terminate()


def test_a_long_history_static_table_is_cut_in_the_middle() -> None:
    view = HistoryView(WorkflowHistory("big", _synthetic(1000)))
    html = view._static_html()
    assert html.count("<tr") == 200 + 1 + 1  # rows, the note, the head
    assert "… 801 rows not shown" in html
    view.close()


# -- Timeline.figure() reads the run again --------------------------------------------


async def test_figure_draws_the_final_history_not_the_last_refresh(
    client: Client, task_queue: str
) -> None:
    gates.clear()
    gates.update({n: asyncio.Event() for n in ("reserve", "charge", "ship")})
    async with Worker(client, task_queue=task_queue, workflows=[StepsWF], activities=[stop_gated]):
        handle = await client.start_workflow(
            StepsWF.run, id="fig-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = Timeline(handle, refresh_interval=60)  # one read now, the next in a minute
        await asyncio.sleep(0.1)
        for gate in gates.values():
            gate.set()
        await handle.result()
        stale = [lane["label"] for lane in view.data["lanes"]]
        final = await handle.fetch_history()
        attempts = await handle.fetch_attempts()
        expected = [lane.label for lane in timeline(final.events, attempts).lanes]
        assert len(stale) < len(expected)  # the widget has not seen the end yet

        fig = view.figure()
        drawn = [t.get_text() for t in fig.axes[0].get_yticklabels()]
        assert drawn == list(reversed(expected))  # every lane, bottom-up
        assert drawn.count("StopGated") == 3 and any(t.startswith("timer") for t in drawn)
        assert [lane["label"] for lane in view.data["lanes"]] == expected  # the widget too
        assert not view.live and view.now is None
        await eventually(lambda: not view.refreshing, "the refresh to end")
        view.close()


def test_a_millisecond_bar_is_drawn_a_few_pixels_wide() -> None:
    t = 1_767_225_600.0
    events = [  # one activity of 1 ms in a run of a minute
        HistoryEvent(1, t, "WorkflowExecutionStarted", {"workflowType": {"name": "Ms"}}),
        HistoryEvent(2, t, "ActivityTaskScheduled", {"activityType": {"name": "quick"}}),
        HistoryEvent(3, t + 0.001, "ActivityTaskStarted", {"scheduledEventId": 2, "attempt": 1}),
        HistoryEvent(4, t + 0.002, "ActivityTaskCompleted", {"scheduledEventId": 2}),
        HistoryEvent(5, t + 60, "WorkflowExecutionCompleted", {}),
    ]
    view = Timeline(WorkflowHistory("ms", events))
    fig = view._figure(width=10.0, inline=False)
    widths = [p.get_extents().width for c in fig.axes[0].collections for p in c.get_paths()]
    shortest = min_bar_seconds(60.0, 0.75 * 10.0 * fig.dpi)
    assert shortest * 0.75 * 10.0 * fig.dpi / 60.0 == pytest.approx(4.0)  # 4 pixels
    assert widths and min(widths) >= shortest * 0.99
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[:3] == ["0", "10 s", "20 s"] and labels[-1] == "1 min"
    assert view.ticks[:2] == [[0.0, "0"], [10.0, "10 s"]]  # the same ticks in the browser
    view.close()
