"""``WorkflowHistory`` JSON fidelity: what we write has the shape of Temporal's JSON, and
Temporal's older spellings are read into it.

The field-by-field comparison with the Temporal samples of ``tests/data/temporal`` uses the
golden histories recorded from our engine (``tests/replay/histories``). Fields Temporal
writes that our engine does not record are listed in ``NOT_RECORDED`` with the reason;
the list is the register of known gaps (a new gap fails the test).
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine import WorkflowHistory
from engine._model.events import HistoryEvent, short_name

from ..conftest import TEMPORAL_DATA

GOLDEN = Path(__file__).resolve().parents[1] / "replay" / "histories"
SAMPLES = sorted(
    p for p in TEMPORAL_DATA.glob("temporal_history_*.json") if "seq1000" not in p.name
)

#: Top-level fields of Temporal's events that our engine does not record.
NOT_RECORDED_TOP = {"taskId"}  # the server's per-shard task sequence number
#: Top-level fields we write that the samples do not have: summaries given by the program
#: (no sample run had one; Temporal's dev server writes them so:
#: tests/replay/histories/temporal/user_metadata.json).
WRITTEN_EXTRA_TOP = {"userMetadata"}
#: Attribute fields of Temporal's events (in the samples) that our engine does not record.
NOT_RECORDED: dict[str, set[str]] = {
    # Worker versioning and task priorities: not implemented.
    "WorkflowExecutionStarted": {"priority"},
    "ActivityTaskScheduled": {"priority", "useWorkflowBuildId"},
    "WorkflowTaskStarted": {"workerVersion"},
    "ActivityTaskStarted": {"workerVersion"},
    "WorkflowTaskCompleted": {"workerVersion"},
}
#: Attribute fields we write that the samples do not have (valid Temporal fields).
WRITTEN_EXTRA: dict[str, set[str]] = {
    # An empty header message: Temporal's Python client sends none. The others: runs of a
    # cron schedule and runs started with a memo, which no sample run was (Temporal's dev
    # server writes them so: tests/replay/histories/temporal/cron_schedule.json and
    # upsert_memo.json); search attributes set at start (search_attributes.json).
    "WorkflowExecutionStarted": {
        "header",
        "cronSchedule",
        "initiator",
        "lastCompletionResult",
        "memo",
        "searchAttributes",
    },
    # A cron run's close names the next run.
    "WorkflowExecutionCompleted": {"newExecutionRunId"},
    "WorkflowExecutionSignaled": {"header"},
}


def _fields(paths: list[Path]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Top-level and attribute field names per event type."""
    top: dict[str, set[str]] = {}
    attrs: dict[str, set[str]] = {}
    for path in paths:
        for raw in json.loads(path.read_text())["events"]:
            kind = short_name(raw["eventType"])
            key = next(k for k in raw if k.endswith("EventAttributes"))
            top.setdefault(kind, set()).update(k for k in raw if k != key)
            attrs.setdefault(kind, set()).update(raw[key])
    return top, attrs


def test_our_events_have_the_fields_temporal_writes() -> None:
    goldens = sorted(GOLDEN.glob("*.json"))
    assert goldens, "no golden histories: python -m tests.replay.record_golden"
    our_top, ours = _fields(goldens)
    their_top, theirs = _fields(SAMPLES)
    assert set(theirs) <= set(ours), "a sample event type has no golden history"
    for kind, fields in theirs.items():
        missing = fields - ours[kind] - NOT_RECORDED.get(kind, set())
        extra = ours[kind] - fields - WRITTEN_EXTRA.get(kind, set())
        assert not missing, f"{kind}: Temporal writes {sorted(missing)}, we do not"
        assert not extra, f"{kind}: we write {sorted(extra)}, Temporal does not"
        assert their_top[kind] - our_top[kind] <= NOT_RECORDED_TOP, kind
        assert our_top[kind] - WRITTEN_EXTRA_TOP <= their_top[kind], kind


def _sample(name: str) -> dict[str, Any]:
    return json.loads((TEMPORAL_DATA / name).read_text())


def _pascal(prefix: str, value: str) -> str:
    """``RETRY_STATE_NON_RETRYABLE_FAILURE`` -> ``NonRetryableFailure`` (older exports)."""
    words = value.removeprefix(prefix + "_").split("_")
    return "".join(w.capitalize() for w in words)


def _old_spelling(data: dict[str, Any]) -> dict[str, Any]:
    """The history as older Temporal tools exported it: PascalCase enums, int ids."""
    old = copy.deepcopy(data)

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            if key == "eventType":
                node[key] = short_name(value)
            elif key == "retryState":
                node[key] = _pascal("RETRY_STATE", value)
            elif key == "kind":
                node[key] = _pascal("TASK_QUEUE_KIND", value)
            elif key == "timeoutType":
                node[key] = _pascal("TIMEOUT_TYPE", value)
            elif key in ("eventId", "taskId"):
                node[key] = int(value)
            else:
                walk(value)

    walk(old)
    return old


@pytest.mark.parametrize(
    "name",
    [
        "temporal_history_activity_failed_workflow_failed.json",
        "temporal_history_activity_retry_then_success.json",
    ],
)
def test_older_spellings_are_read_as_temporal_writes_them_now(name: str) -> None:
    data = _sample(name)
    old = _old_spelling(data)
    assert old != data
    untouched = copy.deepcopy(old)
    history = WorkflowHistory.from_json("wf", old)
    assert old == untouched, "from_json must not change the caller's dict"
    assert json.loads(history.to_json()) == data
    assert history.events == WorkflowHistory.from_json("wf", data).events


def test_int64_top_level_fields_are_written_as_strings() -> None:
    event = HistoryEvent(1, 1.5, "TimerFired", {"timerId": "1"}, {"taskId": 42, "version": 0})
    out = json.loads(WorkflowHistory("wf", [event]).to_json())["events"][0]
    assert out["taskId"] == "42" and out["version"] == "0"
    assert out["eventTime"] == "1970-01-01T00:00:01.500Z"


def test_an_event_without_time_is_written_without_time() -> None:
    raw = {"events": [{"eventId": "1", "eventType": "EVENT_TYPE_TIMER_FIRED"}]}
    out = json.loads(WorkflowHistory.from_json("wf", raw).to_json())
    assert out == {"events": [{**raw["events"][0], "timerFiredEventAttributes": {}}]}


def _patch_marker(key: str) -> HistoryEvent:
    data = base64.b64encode(b'{"deprecated":false,"id":"my-change"}').decode()
    payload = {"metadata": {"encoding": base64.b64encode(b"json/plain").decode()}, "data": data}
    attrs = {
        "markerName": "core_patch",
        "details": {key: {"payloads": [payload]}},
        "workflowTaskCompletedEventId": "4",
    }
    return HistoryEvent(5, 1.0, "MarkerRecorded", attrs)


def test_patch_markers_are_written_under_temporals_key() -> None:
    """Temporal's SDK core reads a patch marker's details from ``patch-data`` only: the
    engine records them under that key (checked end to end by the temporalio replays of
    the patched case) and the writer passes them through unchanged."""
    event = _patch_marker("patch-data")
    out = json.loads(WorkflowHistory("wf", [event]).to_json())["events"][0]
    assert out["markerRecordedEventAttributes"] == event.attributes


def test_empty_repeated_fields_are_not_written() -> None:
    """Protobuf's JSON omits an empty repeated field: a run started without arguments has
    ``"input": {}``, not ``"input": {"payloads": []}``."""
    attrs = {"workflowType": {"name": "NoArgs"}, "input": {"payloads": []}, "attempt": 1}
    event = HistoryEvent(1, 1.0, "WorkflowExecutionStarted", attrs)
    out = json.loads(WorkflowHistory("wf", [event]).to_json())["events"][0]
    assert out["workflowExecutionStartedEventAttributes"] == {
        "workflowType": {"name": "NoArgs"},
        "input": {},
        "attempt": 1,
    }
    assert attrs["input"] == {"payloads": []}  # the event itself is unchanged
