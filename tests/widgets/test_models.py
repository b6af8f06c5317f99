"""The pure view models behind the widgets, on recorded histories (no browser, no kernel)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine import HistoryEvent, WorkflowHistory
from widgets.models import (
    CATEGORY_COLOURS,
    STATUS_COLOURS,
    HistoryModel,
    event_detail,
    event_row,
    is_failure,
    timeline,
)

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
