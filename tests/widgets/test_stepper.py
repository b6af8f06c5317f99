"""ReplayStepper: a replay stepped through in a widget, down to the diverging event."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
import sys
import types
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from engine import HistoryEvent, NondeterminismError, Worker, WorkflowHistory, activity, workflow
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer
from widgets._static import CSS
from widgets.stepper import ReplayStepper
from widgets.stepper_model import (
    banner_text,
    history_html,
    history_window,
    parse_breakpoints,
    source_html,
    source_listing,
    source_name,
)

TIMEOUT = timedelta(seconds=10)


@activity.defn
async def step(name: str) -> str:
    return f"did {name}"


# The seed's worked case: a timer then an activity, redeployed with the two swapped.
@workflow.defn(name="Swap")
class TimerFirst:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(1)
        return await workflow.execute_activity(step, "charge", start_to_close_timeout=TIMEOUT)


@workflow.defn(name="Swap")
class ActivityFirst:
    @workflow.run
    async def run(self) -> str:
        result = await workflow.execute_activity(step, "charge", start_to_close_timeout=TIMEOUT)
        await workflow.sleep(1)
        return result


@workflow.defn(name="Order")
class Order:
    def __init__(self) -> None:
        self.status = "received"

    @workflow.run
    async def run(self, order_id: str) -> str:
        note = "<script>alert('owned')</script>"  # must reach the page escaped
        reservation = await workflow.execute_activity(
            step, "reserve", start_to_close_timeout=TIMEOUT
        )
        self.status = "packing"
        await workflow.sleep(timedelta(hours=1))
        shipment = await workflow.execute_activity(step, "ship", start_to_close_timeout=TIMEOUT)
        self.status = "shipped"
        return f"{order_id}: {reservation}; {shipment}; {len(note)}"


def _line_of(cls: type, needle: str) -> int:
    """The file line number of the first line of ``cls.run`` that contains ``needle``."""
    lines, first = inspect.getsourcelines(cls.run)
    return next(first + i for i, text in enumerate(lines) if needle in text)


async def _record(tmp: Path) -> dict[str, WorkflowHistory]:
    env = await WorkflowEnvironment.start_time_skipping(database_url=f"sqlite:///{tmp / 's.db'}")
    try:
        async with Worker(
            env.client, task_queue="stepper", workflows=[TimerFirst, Order], activities=[step]
        ):
            swap = await env.client.start_workflow(
                "Swap", id="swap-" + uuid.uuid4().hex, task_queue="stepper"
            )
            order = await env.client.start_workflow(
                Order.run, "o-1", id="order-" + uuid.uuid4().hex, task_queue="stepper"
            )
            assert await swap.result() == "did charge"
            await order.result()
        return {"swap": await swap.fetch_history(), "order": await order.fetch_history()}
    finally:
        await env.shutdown()


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, WorkflowHistory]]:
    yield asyncio.run(_record(tmp_path_factory.mktemp("stepper")))


def _current_row(stepper: ReplayStepper) -> int | None:
    found = re.search(
        r'<tr class="dn-current[^"]*"[^>]*data-event-id="(\d+)"', stepper.history_view.value
    )
    return int(found.group(1)) if found else None


def _current_line(stepper: ReplayStepper) -> int | None:
    found = re.search(
        r'dn-src-current"[^>]*><span class="dn-src-no">▶\s*(\d+)</span>', stepper.source_view.value
    )
    return int(found.group(1)) if found else None


def _first(history: WorkflowHistory, event_type: str) -> HistoryEvent:
    return next(e for e in history.events if e.event_type == event_type)


# -- the seed's swap -----------------------------------------------------------------------


def test_swap_stops_at_the_diverging_event_with_banner_source_and_commands(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["swap"]
    stepper = ReplayStepper(history, [ActivityFirst], breakpoints="TimerFired")
    assert stepper.banner.value == "" and stepper.banner.layout.display == "none"
    stepper.breakpoint_button.click()

    snap = stepper.snapshot
    timer_started = _first(history, "TimerStarted")
    assert timer_started.event_id == 5  # the seed's event 5
    assert snap.position == 5 and snap.event is timer_started
    assert isinstance(snap.diverged, NondeterminismError) and not snap.breakpoint_hit
    # The banner: shown, an alert, naming the event, both commands and the line.
    assert stepper.banner.layout.display is None
    banner = stepper.banner.value
    assert 'role="alert"' in banner and "Non-determinism at event 5" in banner
    assert "history recorded:</b> <code>StartTimer(timer id 1, 1s)</code>" in banner
    assert "code produced:</b> <code>ScheduleActivityTask(step, activity id 1)</code>" in banner
    line = _line_of(ActivityFirst, "execute_activity")
    assert f"test_stepper.py:{line} in run(): result = await workflow.execute_activity(" in (
        banner_text(snap) or ""
    )
    # The source: the line that produced the activity, highlighted.
    assert _current_line(stepper) == line
    assert "dn-st-diverged" in stepper.source_view.value
    # The commands: the one the code produced, matched by no event.
    assert 'class="dn-st-unmatched"><code>ScheduleActivityTask(step, activity id 1)' in (
        stepper.state_view.value
    )
    # The history: event 5 current and marked as where it diverged; forward is blocked.
    assert _current_row(stepper) == 5
    assert 'class="dn-current dn-diverged"' in stepper.history_view.value
    assert "diverged" in stepper.header.value and "No breakpoint hit" in stepper.header.value
    assert stepper.step_button.disabled and stepper.run_button.disabled
    assert not stepper.back_button.disabled
    # Stepping back clears the banner; the same history with the original code has none.
    stepper.back_button.click()
    assert stepper.snapshot.position == 4 and stepper.banner.value == ""
    assert stepper.banner.layout.display == "none"
    original = ReplayStepper(history, [TimerFirst])
    assert original.run().completed and original.banner.value == ""
    assert banner_text(original.snapshot) is None
    stepper.close()
    original.close()


def test_divergence_from_the_slider_resets_it_to_where_replay_stopped(histories) -> None:  # type: ignore[no-untyped-def]
    stepper = ReplayStepper(histories["swap"], [ActivityFirst])
    stepper.slider.value = 12  # past the divergence: replay cannot get there
    assert stepper.snapshot.position == 5 and stepper.slider.value == 5
    assert "Non-determinism at event 5" in stepper.banner.value
    stepper.close()


# -- stepping ------------------------------------------------------------------------------


def test_stepping_moves_the_history_row_and_the_source_line(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order])
    assert _current_row(stepper) is None and _current_line(stepper) is None
    assert "no workflow code has run yet" in stepper.source_view.value
    rows, lines = [], []
    while not stepper.snapshot.at_end:
        snap = stepper.step_task()
        assert snap.diverged is None
        rows.append(_current_row(stepper))
        lines.append(_current_line(stepper))
        assert rows[-1] == snap.event.event_id
    assert rows == sorted(rows) and len(set(rows)) == len(rows)  # moved forward each time
    reserve = _line_of(Order, "reservation = await")
    sleep = _line_of(Order, "workflow.sleep")
    ship = _line_of(Order, '"ship"')
    # One stop per workflow task: waiting on the reservation, the timer, the shipment;
    # then the code has returned.
    assert lines[:3] == [reserve, sleep, ship] and set(lines[3:]) == {None}
    assert "the run is complete" in stepper.source_view.value
    assert "completed" in stepper.header.value
    # The listing is the whole workflow method, not only a few lines around the current one.
    assert stepper.snapshot.completed
    listing = source_listing(stepper.session.goto(5))
    assert listing[0][1].strip() == "@workflow.run" and "return f" in listing[-1][1]
    stepper.close()


def test_locals_attributes_and_pending_work_are_shown(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order], breakpoints=["TimerStarted"])
    snap = stepper.run_to_breakpoint()
    state = stepper.state_view.value
    assert snap.event.event_type == "TimerStarted"
    assert "<th>reservation</th><td><code>&#x27;did reserve&#x27;</code>" in state
    assert "<th>status</th><td><code>&#x27;packing&#x27;</code>" in state
    assert "<th>timer 1</th><td><code>fires at " in state
    assert "<code>ScheduleActivityTask(step, activity id 1) -&gt; event 5 " in state
    assert f"<code>StartTimer(timer id 1, 3600s) -&gt; event {snap.event.event_id} " in state
    # One event earlier the code has asked for the timer but no event has matched it yet:
    # the next command, not a divergence.
    stepper.step_back()
    state = stepper.state_view.value
    assert '<li class="dn-st-next"><code>StartTimer(timer id 1, 3600s)</code>' in state
    assert "dn-st-unmatched" not in state
    stepper.close()


def test_step_back_restores_the_earlier_state(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order])
    at = _first(history, "TimerStarted").event_id
    stepper.goto(at)
    before = (stepper.source_view.value, stepper.state_view.value, stepper.history_view.value)
    stepper.step_task()
    after = (stepper.source_view.value, stepper.state_view.value, stepper.history_view.value)
    assert after != before and stepper.snapshot.position > at
    stepper.goto(at + 1)
    snap = stepper.step_back()
    assert snap.position == at and stepper.slider.value == at
    assert (stepper.source_view.value, stepper.state_view.value, stepper.history_view.value) == (
        before
    )
    stepper.restart_button.click()
    assert stepper.snapshot.position == 0 and stepper.restart_button.disabled
    stepper.close()


def test_the_slider_goes_to_a_position(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order])
    assert stepper.slider.min == 0 and stepper.slider.max == len(history.events)
    assert stepper.slider_label.value == f"start · 0/{len(history.events)}"
    stepper.slider.value = 10  # what dragging the slider does
    event = history.events[9]
    assert stepper.snapshot.position == 10 and _current_row(stepper) == event.event_id
    assert stepper.slider_label.value == (
        f"event {event.event_id} · {event.event_type} · 10/{len(history.events)}"
    )
    stepper.slider.value = 3  # backwards too
    assert stepper.snapshot.position == 3 and _current_row(stepper) == 3
    stepper.goto(7)  # and the other way round: the method moves the slider
    assert stepper.slider.value == 7 and "event 7 " in stepper.slider_label.value
    stepper.close()


def test_run_to_a_breakpoint_by_event_type_and_by_event_id(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    fired = _first(history, "TimerFired").event_id
    second_schedule = [e for e in history.events if e.event_type == "ActivityTaskScheduled"][1]
    stepper = ReplayStepper(history, [Order])
    stepper.breakpoint_input.value = "TimerFired"
    snap = stepper.run_to_breakpoint()
    assert snap.breakpoint_hit and snap.event.event_id == fired
    assert f"Stopped at breakpoint: event {fired} TimerFired." in stepper.header.value
    stepper.restart()
    stepper.breakpoint_input.value = f"#{second_schedule.event_id}"
    snap = stepper.run_to_breakpoint()
    assert snap.breakpoint_hit and snap.event is second_schedule
    # Both at once: stop at each in turn, then run off the end.
    stepper.restart()
    stepper.breakpoint_input.value = f"{second_schedule.event_id}, TimerFired"
    assert stepper.breakpoints.event_ids == {second_schedule.event_id}
    assert history_marks(stepper) >= 1
    assert stepper.run_to_breakpoint().event.event_id == fired
    assert stepper.run_to_breakpoint().event is second_schedule
    snap = stepper.run_to_breakpoint()
    assert snap.at_end and not snap.breakpoint_hit
    assert "No breakpoint hit before the end" in stepper.header.value
    stepper.close()


def history_marks(stepper: ReplayStepper) -> int:
    return stepper.history_view.value.count('class="dn-bp"')


def test_bad_breakpoints_are_reported_and_none_means_to_the_end(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order], breakpoints="TimerFird, 9999, a-b")
    note = stepper.header.value
    assert "TimerFird (no event of this type in the history)" in note
    assert "9999 (no such event id)" in note and "a-b (not an event id or type)" in note
    stepper.breakpoint_input.value = ""
    assert "Ignored" not in stepper.header.value
    assert stepper.run_to_breakpoint().at_end
    assert "No breakpoints set: ran to the end." in stepper.header.value
    stepper.close()


def test_clicking_the_buttons_drives_the_session(histories) -> None:  # type: ignore[no-untyped-def]
    history = histories["order"]
    stepper = ReplayStepper(history, [Order])
    assert stepper.back_button.disabled and not stepper.step_button.disabled
    stepper.step_button.click()
    assert stepper.snapshot.position == 1 and stepper.session.position == 1
    assert not stepper.back_button.disabled and _current_row(stepper) == 1
    stepper.task_button.click()
    started = _first(history, "WorkflowTaskStarted").event_id
    assert stepper.snapshot.position == started and _current_line(stepper) is not None
    stepper.back_button.click()
    assert stepper.snapshot.position == started - 1
    stepper.run_button.click()
    assert stepper.snapshot.at_end and stepper.snapshot.completed
    assert stepper.step_button.disabled and stepper.task_button.disabled
    assert stepper.slider.value == len(history.events)
    stepper.close()


# -- escaping and large histories -------------------------------------------------------------


def test_user_text_is_escaped(histories) -> None:  # type: ignore[no-untyped-def]
    stepper = ReplayStepper(histories["order"], [Order])
    stepper.step_task()
    assert "note" in stepper.snapshot.locals and "<script>" in stepper.snapshot.locals["note"]
    for child in (stepper.state_view, stepper.source_view, stepper.history_view):
        assert "<script" not in child.value.lower()
    assert "<th>note</th><td><code>&quot;&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in (
        stepper.state_view.value
    )
    assert "&lt;script&gt;" in stepper.source_view.value  # the source line itself
    stepper.close()


def _big_history(n: int) -> list[HistoryEvent]:
    events = [HistoryEvent(1, 0.0, "WorkflowExecutionStarted", {"workflowType": {"name": "Big"}})]
    for i in range(2, n + 1):
        events.append(HistoryEvent(i, float(i), "MarkerRecorded", {"markerName": f"<m{i}>"}))
    return events


def test_only_a_window_of_a_large_history_is_rendered() -> None:
    events = _big_history(50_000)
    assert history_window(events, 0, 21) == (0, 21)
    assert history_window(events, 25_000, 21) == (24_989, 25_010)  # centred on index 24,999
    assert history_window(events, 50_000, 21) == (49_979, 50_000)
    assert history_window(5, 3, 21) == (0, 5)
    page = history_html(events, 25_000, size=21)
    assert page.count("<tr ") == 21 + 1  # the rows and the column heads
    assert 'class="dn-current" aria-current="step" data-event-id="25000"' in page
    assert "events 24990 to 25010 of 50000" in page
    assert "&lt;m25000&gt;" in page and "<m25000>" not in page


def test_breakpoint_parsing() -> None:
    bps, bad = parse_breakpoints("5, TimerFired; #12  ActivityTaskScheduled,, x-y")
    assert bps.event_ids == {5, 12} and bps.event_types == {"TimerFired", "ActivityTaskScheduled"}
    assert bad == ["x-y"] and bps.describe() == "5, 12, ActivityTaskScheduled, TimerFired"
    assert parse_breakpoints([7, "TimerFired"])[0].event_ids == {7}
    assert not parse_breakpoints(" ")[0]


def test_source_listing_without_a_readable_file(histories) -> None:  # type: ignore[no-untyped-def]
    snap = Replayer(workflows=[Order]).debug(histories["order"]).step_task()
    # A file linecache cannot read: the snapshot's own context lines, still highlighted.
    assert source_listing(snap, lines=[]) == snap.source.context
    html = source_html(snap, listing=source_listing(snap, lines=[]))
    assert f"▶{snap.source.line:>4}</span>" in html


def test_a_handle_or_a_history_and_nothing_else(tmp_path: Path, histories) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match="WorkflowHistory"):
        ReplayStepper("order-1", [Order])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window_size"):
        ReplayStepper(histories["order"], [Order], window_size=500)


async def test_a_workflow_handle_is_fetched_once(tmp_path: Path) -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        database_url=f"sqlite:///{tmp_path / 'h.db'}"
    )
    try:
        async with Worker(env.client, task_queue="h", workflows=[Order], activities=[step]):
            handle = await env.client.start_workflow(
                Order.run, "o-2", id="order-" + uuid.uuid4().hex, task_queue="h"
            )
            await handle.result()
        stepper = ReplayStepper(handle, [Order])
        assert stepper.history.events == (await handle.fetch_history()).events
        assert stepper.run().completed and handle.id in stepper.header.value
        stepper.close()
    finally:
        await env.shutdown()


# -- polish: cell names, locals, the source panel ------------------------------------------


class _Shell:
    """Enough of an IPython shell: its compiler's map of cell file names to counts."""

    def __init__(self, mapping: dict[str, int]) -> None:
        self.compile = type("Compiler", (), {"_filename_map": mapping})()


def test_code_from_a_cell_is_named_by_the_cell(histories, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    cell = "/tmp/ipykernel_123/3717557294.py"
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: _Shell({cell: 12})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert source_name(cell) == "In [12]"
    assert source_name("/srv/app/orders.py") == "orders.py"
    assert source_name("<ipython-input-7-0123456789ab>") == "In [7]"  # a terminal's cells
    snap = Replayer(workflows=[Order]).debug(histories["order"]).step_task()
    in_cell = dataclasses.replace(snap, source=dataclasses.replace(snap.source, filename=cell))
    html = source_html(in_cell, listing=source_listing(snap))
    assert '<div class="dn-st-h">In [12]:' in html and "3717557294.py:" not in html
    assert f'title="{cell}"' in html  # the real file stays in the tooltip
    # Not in IPython (or IPython not loaded): the file's name.
    monkeypatch.delitem(sys.modules, "IPython")
    assert source_name(cell) == "3717557294.py"
    fake.get_ipython = lambda: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert source_name(cell) == "3717557294.py"


def test_string_locals_are_quoted_once(histories) -> None:  # type: ignore[no-untyped-def]
    stepper = ReplayStepper(histories["order"], [Order])
    stepper.step_task()
    assert stepper.snapshot.locals["order_id"] == "'o-1'"
    state = stepper.state_view.value
    assert "<th>order_id</th><td><code>&#x27;o-1&#x27;</code>" in state
    assert "&quot;&#x27;o-1" not in state and "&#x27;&#x27;" not in state
    assert "order_id='o-1'" in stepper._static_text()
    stepper.close()


def test_the_source_panel_shows_the_whole_function_and_wraps_long_lines(histories) -> None:  # type: ignore[no-untyped-def]
    snap = Replayer(workflows=[Order]).debug(histories["order"]).step_task()
    lines, first = inspect.getsourcelines(Order.run)
    listing = source_listing(snap)
    numbers = [n for n, _ in listing]
    assert numbers[0] == first and listing[0][1].strip() == "@workflow.run"
    assert numbers[-1] == first + len(lines) - 1  # the function's last line
    # A function of 120 lines is shown whole too.
    long = ["@workflow.run\n", "async def run(self):\n"] + [f"    x{i} = {i}\n" for i in range(120)]
    where = dataclasses.replace(snap.source, line=60, function="run")
    assert len(source_listing(dataclasses.replace(snap, source=where), lines=long)) == 122
    css = CSS.read_text()
    rule = css[css.index(".dn-stepper .dn-src-line {") :].split("}")[0]
    assert "white-space: pre-wrap" in rule and "overflow-wrap: anywhere" in rule
    stepper = ReplayStepper(histories["order"], [Order])
    assert "dn-st-panel" in stepper.source_view._dom_classes
    stepper.close()
