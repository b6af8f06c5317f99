"""The pure view models behind the widgets, on recorded histories (no browser, no kernel)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine import HistoryEvent, WorkflowExecution, WorkflowExecutionStatus, WorkflowHistory
from widgets.execution_list import execution_row
from widgets.models import (
    CATEGORY_COLOURS,
    STATUS_COLOURS,
    HistoryModel,
    axis_ticks,
    event_detail,
    event_row,
    is_failure,
    min_bar_seconds,
    offset_text,
    short_id,
    tick_label,
)
from widgets.timeline_model import timeline

from ..conftest import TEMPORAL_DATA

GOLDEN = Path(__file__).resolve().parents[1] / "replay" / "histories"


def _load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_full_rows_colour_by_category_and_highlight_failures() -> None:
    history = _load(TEMPORAL_DATA / "temporal_history_activity_failed_workflow_failed.json")
    model = HistoryModel(history.events)
    rows = model.rows("full", 0, 100)
    assert [r["event_id"] for r in rows] == [e.event_id for e in history.events]
    by_type = {r["event_type"]: r for r in rows}
    assert by_type["ActivityTaskScheduled"]["colour"] == CATEGORY_COLOURS["activity"]
    assert by_type["WorkflowTaskStarted"]["category"] == "workflow_task"
    assert by_type["ActivityTaskFailed"]["failed"] and by_type["WorkflowExecutionFailed"]["failed"]
    assert not by_type["ActivityTaskScheduled"]["failed"]
    assert "permanent failure" in by_type["ActivityTaskFailed"]["summary"]
    assert rows[0]["offset"] == 0.0 and rows[-1]["offset"] >= rows[1]["offset"]
    assert model.closed


def test_payloads_are_previewed_and_decoded_in_the_detail() -> None:
    history = _load(TEMPORAL_DATA / "temporal_history_hello_activity.json")
    completed = next(e for e in history.events if e.event_type == "ActivityTaskCompleted")
    row = event_row(completed, history.events[0].event_time)
    assert "Hello" in row.summary
    detail = json.loads(event_detail(completed))
    assert "Hello" in detail["result"]["payloads (decoded)"]
    assert "data" not in json.dumps(detail["result"])  # base64 replaced by the decoded text


def test_compact_rows_one_per_activity_timer_signal() -> None:
    history = _load(TEMPORAL_DATA / "temporal_history_activity_retry_then_success.json")
    model = HistoryModel(history.events)
    rows = model.rows("compact", 0, 100)
    assert [r["kind"] for r in rows] == ["workflow", "activity"]
    activity = rows[1]
    assert activity["status"] == "completed" and activity["attempts"] == 3
    assert activity["end"] is not None and activity["end"] >= activity["start"]
    assert len(activity["event_ids"]) == 3  # scheduled, started, completed

    signals = HistoryModel(_load(TEMPORAL_DATA / "temporal_history_signal.json").events)
    kinds = [r.kind for r in signals.compact()]
    assert kinds.count("signal") >= 1 and kinds[0] == "workflow"

    timer = HistoryModel(_load(TEMPORAL_DATA / "temporal_history_timer.json").events)
    (row,) = [r for r in timer.compact() if r.kind == "timer"]
    assert row.status == "fired" and row.end is not None


def test_compact_rows_for_children_failures_and_continue_as_new() -> None:
    child = HistoryModel(_load(GOLDEN / "child_workflow.json").events)
    assert any(r.kind == "child" and r.status == "completed" for r in child.compact())
    caught = HistoryModel(_load(GOLDEN / "caught_activity_failure.json").events)
    (failed,) = [r for r in caught.compact() if r.kind == "activity" and r.failed]
    assert failed.status == "failed"
    can = HistoryModel(_load(GOLDEN / "continue_as_new.json").events)
    assert can.compact()[0].status == "continued_as_new" and can.closed


def test_model_grows_one_event_at_a_time_like_the_whole() -> None:
    events = _load(TEMPORAL_DATA / "temporal_history_seq3_activities.json").events
    grown = HistoryModel()
    for event in events:
        assert grown.extend([event]) == 1
        assert not grown.closed or event is events[-1]
    assert grown.extend(events[:3]) == 0  # already seen: ignored
    whole = HistoryModel(events)
    assert grown.rows("compact", 0, 99) == whole.rows("compact", 0, 99)
    assert grown.count("full") == len(events) and grown.index_of(events[-1].event_id, "full") == (
        len(events) - 1
    )


def _synthetic(n_activities: int) -> list[HistoryEvent]:
    """A long history: started, then scheduled/started/completed per activity."""
    t = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    events = [HistoryEvent(1, t, "WorkflowExecutionStarted", {"workflowType": {"name": "Big"}})]
    for i in range(n_activities):
        base = len(events)
        events += [
            HistoryEvent(
                base + 1,
                t + i,
                "ActivityTaskScheduled",
                {"activityId": str(i), "activityType": {"name": "step"}},
            ),
            HistoryEvent(
                base + 2,
                t + i + 0.1,
                "ActivityTaskStarted",
                {"scheduledEventId": base + 1, "attempt": 1},
            ),
            HistoryEvent(
                base + 3, t + i + 0.2, "ActivityTaskCompleted", {"scheduledEventId": base + 1}
            ),
        ]
    return events


def test_windows_of_a_large_history() -> None:
    events = _synthetic(17_000)  # 51,001 events
    model = HistoryModel(events)
    assert model.count("full") == 51_001 and model.count("compact") == 17_001
    window = model.rows("full", 40_000, 40_100)
    assert [r["event_id"] for r in window] == list(range(40_001, 40_101))
    assert model.rows("compact", 17_000, 17_100)[0]["label"] == "step"
    assert model.index_of(40_001, "full") == 40_000
    assert model.index_of(5, "compact") == 2  # event 5 is activity 2's scheduled event


def test_timeline_lanes_attempts_backoff_and_now() -> None:
    events = _synthetic(1)
    t0 = events[0].event_time
    attempts = [
        {
            "scheduled_event_id": 2,
            "attempt": 1,
            "started_time": t0 + 0.1,
            "ended_time": t0 + 0.2,
            "outcome": "failed",
            "failure": {"message": "boom", "applicationFailureInfo": {"type": "E"}},
        },
        {
            "scheduled_event_id": 2,
            "attempt": 2,
            "started_time": t0 + 1.2,
            "ended_time": None,
            "outcome": "running",
            "failure": None,
        },
    ]
    open_events = events[:3]  # scheduled, started: the activity is still running
    data = timeline(open_events, attempts, now=t0 + 2.0)
    lane = next(lane for lane in data.lanes if lane.key == "activity:2")
    assert [(b.kind, b.status) for b in lane.bars] == [
        ("attempt", "failed"),
        ("backoff", "waiting"),
        ("attempt", "running"),
    ]
    assert lane.bars[0].detail == "boom (E)"
    assert lane.bars[1].start == pytest.approx(0.2) and lane.bars[1].end == pytest.approx(1.2)
    assert lane.bars[2].end is None and data.now == pytest.approx(2.0) and data.end >= 2.0
    assert data.lanes[0].label == "workflow tasks"
    as_json = data.to_json()
    assert as_json["lanes"][1]["bars"][0]["colour"] == STATUS_COLOURS["failed"]

    done = HistoryEvent(len(events) + 1, t0 + 3, "WorkflowExecutionCompleted", {})
    assert timeline([*events, done], attempts, now=t0 + 9).now is None  # closed: no "now"


def test_timeline_of_a_recorded_history_without_attempts() -> None:
    history = _load(TEMPORAL_DATA / "temporal_history_activity_retry_then_success.json")
    data = timeline(history.events)
    lane = next(lane for lane in data.lanes if lane.category == "activity")
    (bar,) = lane.bars  # the history keeps the last attempt only
    assert bar.label == "attempt 3" and bar.status == "completed"
    timer = timeline(_load(TEMPORAL_DATA / "temporal_history_timer.json").events)
    timer_lane = next(lane for lane in timer.lanes if lane.category == "timer")
    assert timer_lane.ticks[0].kind == "due" and timer_lane.bars[0].status == "fired"
    assert timer.now is None
    many = timeline(_synthetic(300), max_lanes=50)
    assert len(many.lanes) == 50 and many.hidden_lanes == 251


def test_failure_types_and_details() -> None:
    assert is_failure("ActivityTaskTimedOut") and is_failure("WorkflowTaskFailed")
    assert not is_failure("ActivityTaskCompleted")
    big = HistoryEvent(1, 0.0, "MarkerRecorded", {"details": {"x": "y" * 50_000}})
    assert len(event_detail(big)) <= 20_000


def test_failed_updates_and_histories_with_gaps() -> None:
    t = 1_000.0
    accepted = {"acceptedRequest": {"input": {"name": "rename"}}}
    failure = {"outcome": {"failure": {"message": "rejected by the handler"}}}
    events = [
        HistoryEvent(1, t, "WorkflowExecutionStarted", {"workflowType": {"name": "W"}}),
        HistoryEvent(5, t + 1, "WorkflowExecutionUpdateAccepted", accepted),
        HistoryEvent(
            6, t + 2, "WorkflowExecutionUpdateCompleted", {"acceptedEventId": "5", **failure}
        ),
    ]
    model = HistoryModel(events)
    update = next(r for r in model.compact() if r.kind == "update")
    assert update.label == "rename" and update.status == "failed" and update.failed
    assert "rejected by the handler" in update.summary
    assert model.index_of(5, "full") == 1 and model.index_of(6, "full") == 2
    assert model.index_of(4, "full") == -1 and model.index_of(99, "full") == -1
    assert model.detail("compact", 1).startswith("#5 WorkflowExecutionUpdateAccepted")
    assert model.detail("full", 7) == "" and model.detail("compact", -1) == ""


def test_open_activities_and_failures_are_counted_as_events_arrive() -> None:
    events = _synthetic(2)  # started, then scheduled/started/completed twice
    model = HistoryModel(events[:3])  # the first activity scheduled and started
    assert model.activities_open() and model.failures == 0
    model.extend(events[3:5])  # it completes; the second is scheduled
    assert model.activities_open()
    model.extend(events[5:])
    assert not model.activities_open()
    failed = HistoryModel(
        _load(TEMPORAL_DATA / "temporal_history_activity_failed_workflow_failed.json").events
    )
    assert failed.failures == sum(is_failure(e.event_type) for e in failed.events) >= 2


# -- polish: ticks, run ids, stack traces ---------------------------------------------------


@pytest.mark.parametrize(
    ("end", "labels"),
    [
        (0.9, ["0", "200 ms", "400 ms", "600 ms", "800 ms"]),
        (4.2, ["0", "1 s", "2 s", "3 s", "4 s"]),
        (17.0, ["0", "5 s", "10 s", "15 s"]),
        (45.0, ["0", "10 s", "20 s", "30 s", "40 s"]),
        (130.0, ["0", "20 s", "40 s", "1 min", "1 min 20 s", "1 min 40 s", "2 min"]),
        (1000.0, ["0", "5 min", "10 min", "15 min"]),
        (3700.0, ["0", "10 min", "20 min", "30 min", "40 min", "50 min", "1 h"]),
        (90_000.0, ["0", "6 h", "12 h", "18 h", "1 d"]),
        (3_000_000.0, ["0", "5 d", "10 d", "15 d", "20 d", "25 d", "30 d"]),
    ],
)
def test_axis_ticks_are_round_values(end: float, labels: list[str]) -> None:
    ticks = axis_ticks(end)
    assert [label for _, label in ticks] == labels
    steps = {round(b - a, 6) for (a, _), (b, _) in itertools.pairwise(ticks)}
    assert len(steps) == 1  # evenly spaced
    (step,) = steps
    # A round step: 1, 2 or 5 times a power of ten (in ms or s), or a round number of
    # seconds, minutes, hours or days.
    assert step in {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5} or step in {
        m * u for u in (1, 60, 3600, 86400) for m in (1, 2, 3, 5, 6, 10, 12, 15, 20, 30)
    }
    assert ticks[0] == (0.0, "0") and ticks[-1][0] <= end < ticks[-1][0] + step
    assert len(ticks) <= 9


def test_axis_ticks_for_tiny_and_odd_spans() -> None:
    assert axis_ticks(0.0) == [(0.0, "0"), (0.001, "1 ms")]  # never a zero step
    assert [label for _, label in axis_ticks(1.3)][-2:] == ["1 s", "1.2 s"]
    assert len(axis_ticks(7.3, max_ticks=4)) <= 5
    assert tick_label(5400, 1800) == "1 h 30 min" and tick_label(0.25, 0.05) == "250 ms"


def test_a_bar_is_never_narrower_than_a_few_pixels() -> None:
    # A 1 ms activity on a 60 s axis drawn 900 px wide: 4 px, not 0.015 px.
    assert min_bar_seconds(60.0, 900) == pytest.approx(60.0 * 4 / 900)
    assert min_bar_seconds(60.0, 900, min_pixels=2) == pytest.approx(60.0 * 2 / 900)
    assert min_bar_seconds(0.0, 0) > 0


def test_run_ids_are_shortened_to_their_end() -> None:
    # Two UUIDv7 run ids started in the same millisecond: the same first 13 characters.
    first = "01a22bc8-901e-77f5-acf7-ef8b0afabe1d"
    second = "01a22bc8-901e-7a31-b2c0-55e3f9a1c2d0"
    assert short_id(first) == "…0afabe1d" and short_id(second) == "…f9a1c2d0"
    assert short_id(first) != short_id(second)
    assert short_id("run-7") == "run-7"  # short ids whole
    row = execution_row(
        WorkflowExecution(
            id="o-1",
            run_id=second,
            workflow_type="Order",
            task_queue="q",
            status=WorkflowExecutionStatus.RUNNING,
            start_time=datetime(2026, 1, 1, tzinfo=UTC),
            close_time=None,
            history_length=3,
            namespace="default",
        )
    )
    assert row["run_id"] == second and row["run_id_short"] == "…f9a1c2d0"


def test_a_failure_stack_trace_is_shown_as_lines() -> None:
    history = _load(TEMPORAL_DATA / "temporal_history_activity_failed_workflow_failed.json")
    failed = next(e for e in history.events if e.event_type == "ActivityTaskFailed")
    detail = event_detail(failed)
    body, _, trace = detail.partition("\n\nfailure.stackTrace:\n")
    assert trace, detail
    assert '"stackTrace": "(' in body and "lines, below)" in body
    assert "\\n" not in trace  # real newlines, not JSON's escapes
    lines = trace.splitlines()
    assert lines[0].startswith('  File "') and "in always_fails" in trace
    assert any(line.strip().startswith("raise ApplicationError(") for line in lines)
    json.loads(body)  # the rest is still JSON
    # A cause's trace is named by where it is.
    closed = next(e for e in history.events if e.event_type == "WorkflowExecutionFailed")
    assert "\n\nfailure.cause.stackTrace:\n  File " in event_detail(closed)
    # The compact row's detail (what a click in the HistoryView shows) has it too.
    model = HistoryModel(history.events)
    index = next(i for i, r in enumerate(model.compact()) if r.kind == "activity")
    assert "failure.stackTrace:\n  File " in model.detail("compact", index)


def test_offsets_as_the_tables_write_them() -> None:
    assert offset_text(0.012) == "+12 ms" and offset_text(2.5) == "+2.50 s"
    assert offset_text(75) == "+75.0 s" and offset_text(600, sign="") == "10.0 min"
    assert offset_text(None) == ""
