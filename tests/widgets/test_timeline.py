"""Timeline: lanes of attempts, backoffs and timers that grow while the run progresses."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from matplotlib.figure import Figure

from engine import ApplicationError, Client, RetryPolicy, Worker, activity, workflow
from widgets import Timeline
from widgets.models import STATUS_COLOURS

from ..interop.engine_code import SignalWF, TimerWF
from .conftest import eventually, widget_threads

# The test opens one gate per attempt: attempt n waits until gates[n] is set.
gates: dict[int, asyncio.Event] = {}


@activity.defn
async def gated(name: str) -> str:
    attempt = activity.info().attempt
    await gates[attempt].wait()
    if attempt < 3:
        raise ApplicationError(f"attempt {attempt} failed", type="Flaky")
    return f"done {name}"


@workflow.defn
class GatedRetryWF:
    @workflow.run
    async def run(self, name: str) -> str:
        first = await workflow.execute_activity(
            gated,
            name,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
        )
        await workflow.sleep(0.05)
        return first


def _activity_lane(view: Timeline) -> dict[str, Any] | None:
    return next((lane for lane in view.data["lanes"] if lane["key"].startswith("activity:")), None)


def _attempts(view: Timeline) -> list[tuple[str, str]]:
    lane = _activity_lane(view)
    if lane is None:
        return []
    return [(b["label"], b["status"]) for b in lane["bars"] if b["kind"] == "attempt"]


async def test_timeline_gains_each_attempt_as_it_happens(client: Client, task_queue: str) -> None:
    gates.clear()
    gates.update({n: asyncio.Event() for n in (1, 2, 3)})
    seen: list[list[tuple[str, str]]] = []
    async with Worker(client, task_queue=task_queue, workflows=[GatedRetryWF], activities=[gated]):
        handle = await client.start_workflow(
            GatedRetryWF.run, "x", id="tl-" + uuid.uuid4().hex, task_queue=task_queue
        )
        view = Timeline(handle, refresh_interval=0.02)
        view.observe(lambda _change: seen.append(_attempts(view)), names=["data"])
        assert view.live and view.refreshing
        assert widget_threads(), "a live timeline refreshes on the widgets thread"

        await eventually(lambda: _attempts(view) == [("attempt 1", "running")], "attempt 1")
        gates[1].set()
        await eventually(
            lambda: _attempts(view) == [("attempt 1", "failed"), ("attempt 2", "running")],
            "attempt 1 failed, attempt 2 running",
        )
        lane = _activity_lane(view)
        assert lane is not None
        failed = lane["bars"][0]
        assert (
            "attempt 1 failed" in failed["detail"] and failed["colour"] == STATUS_COLOURS["failed"]
        )
        assert [b["kind"] for b in lane["bars"]] == ["attempt", "backoff", "attempt"]
        backoff = lane["bars"][1]
        assert backoff["start"] == failed["end"] and backoff["end"] > backoff["start"]
        assert view.data["now"] is not None  # the "now" line while the run is open

        gates[2].set()
        await eventually(lambda: ("attempt 3", "running") in _attempts(view), "attempt 3")
        gates[3].set()
        await handle.result()
        await eventually(lambda: not view.live, "the run's close")

    assert _attempts(view) == [
        ("attempt 1", "failed"),
        ("attempt 2", "failed"),
        ("attempt 3", "completed"),
    ]
    # Each attempt appeared while the run went on, not only at the end.
    first_seen = [next(i for i, s in enumerate(seen) if len(s) >= n) for n in (1, 2, 3)]
    assert first_seen == sorted(set(first_seen))
    assert view.data["now"] is None
    timer_lane = next(lane for lane in view.data["lanes"] if lane["key"].startswith("timer:"))
    assert timer_lane["bars"][0]["status"] == "fired"
    assert [t["kind"] for t in timer_lane["ticks"]] == ["due"]
    # The run closed: the refresh ended by itself and took the thread with it.
    await eventually(lambda: not view.refreshing and not widget_threads(), "refresh end")
    fig = view.figure()
    assert isinstance(fig, Figure)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-1] == "workflow tasks" and "gated" in labels
    view.close()


async def test_closing_stops_the_refresh(client: Client, task_queue: str) -> None:
    async with Worker(client, task_queue=task_queue, workflows=[SignalWF, TimerWF]):
        handle = await client.start_workflow(
            SignalWF.run, 1, id="tlc-" + uuid.uuid4().hex, task_queue=task_queue
        )
        first = Timeline(handle, refresh_interval=0.02)
        second = Timeline(handle, refresh_interval=0.02)
        assert first.refreshing and second.refreshing and len(widget_threads()) == 1
        first.close()
        assert not first.refreshing and second.refreshing and len(widget_threads()) == 1
        second.close()
        assert not second.refreshing and widget_threads() == []
        # A signal after closing changes nothing in the closed widget.
        before = dict(first.data)
        await handle.signal(SignalWF.add_message, "late")
        await handle.result()
        assert first.data == before
