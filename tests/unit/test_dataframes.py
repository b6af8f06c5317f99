"""engine.dataframes: histories, listings and attempts as pandas DataFrames.

Most tests use Temporal's own histories (tests/data/temporal) and synthetic ones; the last one
runs a workflow on an SQLite file in tmp_path to read a live listing and attempts.
"""

from __future__ import annotations

import base64
import json
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from engine import (
    ApplicationError,
    Client,
    HistoryEvent,
    RetryPolicy,
    Worker,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHistory,
    activity,
    workflow,
)
from engine.dataframes import (
    EVENT_CATEGORIES,
    HISTORY_COLUMNS,
    attempts_to_dataframe,
    event_category,
    executions_to_dataframe,
    failure_text,
    history_to_dataframe,
    list_workflows_dataframe,
    payload_preview,
    to_csv,
    to_parquet,
)
from tests.conftest import TEMPORAL_DATA

SAMPLES = sorted(p.name for p in TEMPORAL_DATA.glob("temporal_history_*.json"))

HISTORY_DTYPES = {
    "event_id": "int64",
    "time": "datetime64[ns, UTC]",
    "type": "string",
    "category": "category",
    "subject": "string",
    "activity_type": "string",
    "attempt": "Int64",
    "scheduled_event_id": "Int64",
    "duration_s": "float64",
    "payload_preview": "string",
    "failure": "string",
    "attributes": "object",
}

JSON_PLAIN = base64.b64encode(b"json/plain").decode()


def _load(name: str) -> WorkflowHistory:
    return WorkflowHistory.from_json(name, (TEMPORAL_DATA / name).read_text())


def _dtypes(df: pd.DataFrame) -> dict[str, str]:
    return {name: str(dtype) for name, dtype in df.dtypes.items()}


def _row(df: pd.DataFrame, event_type: str, nth: int = 0) -> Any:
    return df[df["type"] == event_type].iloc[nth]


def _payload(value: Any, encoding: str = "json/plain") -> dict[str, Any]:
    out: dict[str, Any] = {"metadata": {"encoding": base64.b64encode(encoding.encode()).decode()}}
    if value is not None:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        out["data"] = base64.b64encode(raw).decode()
    return out


# -- Temporal's histories -------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_has_stable_columns_and_dtypes(name: str) -> None:
    history = _load(name)
    df = history_to_dataframe(history)
    assert tuple(df.columns) == HISTORY_COLUMNS
    assert _dtypes(df) == HISTORY_DTYPES
    assert list(df["category"].cat.categories) == list(EVENT_CATEGORIES)
    assert len(df) == len(history)
    assert df["event_id"].tolist() == [e.event_id for e in history]
    assert df["type"].tolist() == [e.event_type for e in history]
    assert df["attributes"].iloc[0] is history.events[0].attributes  # the raw dict
    # Times are Temporal's eventTime, to the nanosecond.
    raw = json.loads((TEMPORAL_DATA / name).read_text())["events"]
    assert df["time"].iloc[-1] == pd.Timestamp(raw[-1]["eventTime"])
    # Every activity event knows its activity; every completion has a duration.
    activities = df[df["category"] == "activity"]
    assert activities["activity_type"].notna().all()
    assert activities["subject"].notna().all()
    closes = df[df["type"].isin(["ActivityTaskCompleted", "WorkflowTaskCompleted", "TimerFired"])]
    assert (closes["duration_s"] > 0).all()
    assert df.loc[df["type"] == "WorkflowExecutionStarted", "duration_s"].isna().all()


def test_hello_activity_rows() -> None:
    history = _load("temporal_history_hello_activity.json")
    df = history_to_dataframe(history)
    by_id = {e.event_id: e for e in history}
    scheduled = _row(df, "ActivityTaskScheduled")
    assert (scheduled.subject, scheduled.activity_type) == ("1", "say_hello")
    assert scheduled.payload_preview == '"Temporal"'
    assert scheduled.scheduled_event_id == 5 and pd.isna(scheduled.attempt)
    completed = _row(df, "ActivityTaskCompleted")
    assert completed.category == "activity" and completed.activity_type == "say_hello"
    assert completed.scheduled_event_id == 5 and completed.attempt == 1
    assert completed.payload_preview == '"Hello, Temporal!"'
    assert completed.duration_s == pytest.approx(by_id[7].event_time - by_id[5].event_time)
    wft = _row(df, "WorkflowTaskCompleted")
    assert wft.category == "workflow_task" and wft.scheduled_event_id == 2
    assert wft.duration_s == pytest.approx(by_id[4].event_time - by_id[2].event_time)
    done = _row(df, "WorkflowExecutionCompleted")
    assert done.category == "workflow" and done.payload_preview == '"Hello, Temporal!"'
    assert done.duration_s == pytest.approx(by_id[11].event_time - by_id[1].event_time)
    assert df["failure"].isna().all()
    assert df.groupby("scheduled_event_id").size()[5] == 3  # scheduled, started, completed


def test_timer_signal_and_retry_samples() -> None:
    timer = history_to_dataframe(_load("temporal_history_timer.json"))
    started, fired = _row(timer, "TimerStarted"), _row(timer, "TimerFired")
    assert started.category == fired.category == "timer"
    assert started.subject == fired.subject == "1"
    assert fired.scheduled_event_id == started.event_id
    assert 0.5 <= fired.duration_s < 5

    signal = history_to_dataframe(_load("temporal_history_signal.json"))
    signals = signal[signal["category"] == "signal"]
    assert signals["subject"].tolist() == ["add_message", "add_message"]
    assert signals["payload_preview"].tolist() == ['"first"', '"second"']
    assert _row(signal, "WorkflowExecutionCompleted").payload_preview == '["first","second"]'

    retry = history_to_dataframe(_load("temporal_history_activity_retry_then_success.json"))
    assert _row(retry, "ActivityTaskStarted").attempt == 3
    assert _row(retry, "ActivityTaskCompleted").attempt == 3
    assert _row(retry, "ActivityTaskCompleted").activity_type == "flaky"


def test_failures_with_their_causes() -> None:
    failed = history_to_dataframe(_load("temporal_history_activity_failed_workflow_failed.json"))
    assert _row(failed, "ActivityTaskFailed").failure == (
        "permanent failure for doomed (PermanentError)"
    )
    assert _row(failed, "WorkflowExecutionFailed").failure == (
        "Activity task failed; cause: permanent failure for doomed (PermanentError)"
    )
    assert failed["failure"].notna().sum() == 2
    caught = history_to_dataframe(_load("temporal_history_activity_failed_caught.json"))
    assert _row(caught, "WorkflowExecutionCompleted").payload_preview.startswith('"caught: ')


def test_seq1000_activity_ids_and_types() -> None:
    df = history_to_dataframe(_load("temporal_history_seq1000.json"))
    completed = df[df["type"] == "ActivityTaskCompleted"]
    assert len(completed) == 1000
    assert completed["subject"].nunique() == 1000
    assert set(completed["activity_type"]) == {"noop"}
    assert completed["duration_s"].notna().all()


def test_empty_history_keeps_the_dtypes() -> None:
    df = history_to_dataframe(WorkflowHistory("empty"))
    assert len(df) == 0
    assert _dtypes(df) == HISTORY_DTYPES


# -- categories, payloads, failures ---------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "category"),
    [
        ("WorkflowExecutionStarted", "workflow"),
        ("WorkflowExecutionCancelRequested", "workflow"),
        ("WorkflowExecutionContinuedAsNew", "workflow"),
        ("UpsertWorkflowSearchAttributes", "workflow"),
        ("WorkflowTaskFailed", "workflow_task"),
        ("ActivityTaskCancelRequested", "activity"),
        ("TimerCanceled", "timer"),
        ("WorkflowExecutionSignaled", "signal"),
        ("SignalExternalWorkflowExecutionInitiated", "signal"),
        ("WorkflowExecutionUpdateAccepted", "update"),
        ("StartChildWorkflowExecutionInitiated", "child"),
        ("ChildWorkflowExecutionCompleted", "child"),
        ("MarkerRecorded", "marker"),
        ("RequestCancelExternalWorkflowExecutionInitiated", "other"),
        ("NexusOperationScheduled", "other"),
    ],
)
def test_event_category(event_type: str, category: str) -> None:
    assert event_category(event_type) == category


def test_payload_preview() -> None:
    assert payload_preview({"input": {"payloads": [_payload("Ada")]}}) == '"Ada"'
    assert payload_preview({"result": {"payloads": [_payload(1), _payload([1, 2])]}}) == "1, [1, 2]"
    assert payload_preview({"result": {"payloads": [_payload(None, "binary/null")]}}) == "None"
    assert payload_preview({"input": {"payloads": [_payload(b"\x00\x01", "binary/plain")]}}) == (
        "<2 bytes>"
    )
    assert payload_preview({"input": {"payloads": [_payload(b"xyz", "binary/encrypted")]}}) == (
        "<binary/encrypted, 3 bytes>"
    )
    assert payload_preview({"input": {"payloads": [{"metadata": {}, "data": "!!"}]}}) == (
        "<undecodable payload>"
    )
    long = payload_preview({"input": {"payloads": [_payload("x" * 500)]}})
    assert long is not None and len(long) == 80 and long.endswith("…")
    assert payload_preview({"details": {"version": {"payloads": [_payload("v2")]}}}) == (
        'version="v2"'
    )
    assert payload_preview({"outcome": {"success": {"payloads": [_payload(7)]}}}) == "7"
    assert payload_preview({"scheduledEventId": "5"}) is None


def test_failure_text() -> None:
    failure = {
        "message": "outer",
        "cause": {
            "message": "inner",
            "timeoutFailureInfo": {"timeoutType": "TIMEOUT_TYPE_START_TO_CLOSE"},
        },
    }
    assert failure_text(failure) == "outer; cause: inner (TIMEOUT_TYPE_START_TO_CLOSE)"
    assert failure_text(None) is None
    assert failure_text({"message": ""}) == "(no message)"


def test_other_event_shapes() -> None:
    events = [
        HistoryEvent(1, 100.0, "WorkflowExecutionStarted", {"attempt": 2}),
        HistoryEvent(2, 101.0, "StartChildWorkflowExecutionInitiated", {"workflowId": "kid"}),
        HistoryEvent(
            3,
            103.5,
            "ChildWorkflowExecutionCompleted",
            {
                "initiatedEventId": "2",
                "workflowExecution": {"workflowId": "kid", "runId": "r"},
                "result": {"payloads": [_payload("ok")]},
            },
        ),
        HistoryEvent(4, 104.0, "MarkerRecorded", {"markerName": "patch"}),
        HistoryEvent(5, 105.0, "WorkflowExecutionTerminated", {"reason": "ops said so"}),
    ]
    df = history_to_dataframe(WorkflowHistory("w", events))
    assert df["category"].tolist() == ["workflow", "child", "child", "marker", "workflow"]
    assert df["subject"].tolist()[1:4] == ["kid", "kid", "patch"]
    assert df["attempt"].iloc[0] == 2
    child_done = df.iloc[2]
    assert child_done.scheduled_event_id == 2 and child_done.duration_s == pytest.approx(2.5)
    assert child_done.payload_preview == '"ok"'
    assert df["failure"].iloc[4] == "terminated: ops said so"
    assert df["duration_s"].iloc[4] == pytest.approx(5.0)
    assert df["time"].iloc[1] == pd.Timestamp(101, unit="s", tz="UTC")


# -- 50,000 events --------------------------------------------------------------------------


def _synthetic(triples: int) -> WorkflowHistory:
    """WorkflowExecutionStarted, then ``triples`` activities (scheduled, started, completed)."""
    start = 1_780_000_000.0
    events = [HistoryEvent(1, start, "WorkflowExecutionStarted", {"attempt": 1})]
    for i in range(triples):
        sid = 2 + 3 * i
        t = start + i * 0.01
        data = base64.b64encode(str(i).encode()).decode()
        payloads = {"payloads": [{"metadata": {"encoding": JSON_PLAIN}, "data": data}]}
        events.append(
            HistoryEvent(
                sid,
                t,
                "ActivityTaskScheduled",
                {"activityId": str(i), "activityType": {"name": f"act{i % 3}"}, "input": payloads},
            )
        )
        events.append(
            HistoryEvent(
                sid + 1,
                t + 0.002,
                "ActivityTaskStarted",
                {"scheduledEventId": str(sid), "attempt": 1 + i % 2},
            )
        )
        events.append(
            HistoryEvent(
                sid + 2,
                t + 0.005,
                "ActivityTaskCompleted",
                {"scheduledEventId": str(sid), "startedEventId": str(sid + 1), "result": payloads},
            )
        )
    return WorkflowHistory("big", events)


def test_fifty_thousand_events() -> None:
    history = _synthetic(16_667)  # 50,002 events
    started = time.perf_counter()
    df = history_to_dataframe(history)
    elapsed = time.perf_counter() - started
    print(f"\nbench: history_to_dataframe {len(df):,} events in {elapsed:.3f}s")
    assert len(df) == 50_002
    assert _dtypes(df) == HISTORY_DTYPES
    completed = df[df["type"] == "ActivityTaskCompleted"]
    assert len(completed) == 16_667
    assert completed["duration_s"].to_numpy() == pytest.approx(0.005, abs=1e-5)
    assert completed["activity_type"].value_counts().to_dict() == {
        "act0": 5556,
        "act1": 5556,
        "act2": 5555,
    }
    assert completed["attempt"].value_counts().to_dict() == {1: 8334, 2: 8333}
    assert (completed["subject"] == completed["payload_preview"]).all()
    last = completed.iloc[-1]
    assert last.scheduled_event_id == last.event_id - 2 and last.subject == "16666"


def test_missing_pandas_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    with pytest.raises(ImportError, match=r"pip install 'durable-notebook\[data\]'"):
        history_to_dataframe(WorkflowHistory("w"))


# -- listings and attempts ------------------------------------------------------------------


def test_executions_to_dataframe() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [
        WorkflowExecution(
            "a", "r1", "Order", "q", WorkflowExecutionStatus.COMPLETED, t0,
            t0 + timedelta(seconds=2.5), 11, "default",
        ),
        WorkflowExecution(
            "b", "r2", "Order", "q", WorkflowExecutionStatus.RUNNING, t0, None, 5, "default"
        ),
    ]  # fmt: skip
    df = executions_to_dataframe(runs)
    assert list(df.columns) == [
        "id",
        "run_id",
        "workflow_type",
        "task_queue",
        "status",
        "start_time",
        "close_time",
        "duration_s",
        "history_length",
    ]
    assert _dtypes(df) == {
        "id": "string",
        "run_id": "string",
        "workflow_type": "string",
        "task_queue": "string",
        "status": "category",
        "start_time": "datetime64[ns, UTC]",
        "close_time": "datetime64[ns, UTC]",
        "duration_s": "float64",
        "history_length": "int64",
    }
    assert df["status"].tolist() == ["COMPLETED", "RUNNING"]
    assert "TIMED_OUT" in df["status"].cat.categories
    assert df["duration_s"].iloc[0] == pytest.approx(2.5) and pd.isna(df["duration_s"].iloc[1])
    assert pd.isna(df["close_time"].iloc[1])
    assert df["start_time"].iloc[0] == pd.Timestamp(t0)
    assert _dtypes(executions_to_dataframe([])) == _dtypes(df)


def test_attempts_to_dataframe() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    attempts = [
        {
            "scheduled_event_id": 5,
            "activity_id": "1",
            "activity_type": "charge",
            "attempt": 1,
            "identity": "1@host",
            "scheduled_time": t0,
            "started_time": t0 + timedelta(seconds=0.5),
            "ended_time": t0 + timedelta(seconds=2),
            "outcome": "failed",
            "failure": {"message": "boom", "applicationFailureInfo": {"type": "Oops"}},
        },
        {
            "scheduled_event_id": 5,
            "activity_id": "1",
            "activity_type": "charge",
            "attempt": 2,
            "identity": None,
            "scheduled_time": t0 + timedelta(seconds=3),
            "started_time": None,
            "ended_time": None,
            "outcome": "running",
            "failure": None,
        },
    ]
    df = attempts_to_dataframe(attempts)
    assert _dtypes(df) == {
        "scheduled_event_id": "Int64",
        "activity_id": "string",
        "activity_type": "string",
        "attempt": "Int64",
        "identity": "string",
        "scheduled_time": "datetime64[ns, UTC]",
        "started_time": "datetime64[ns, UTC]",
        "ended_time": "datetime64[ns, UTC]",
        "schedule_to_start_s": "float64",
        "duration_s": "float64",
        "outcome": "category",
        "failure": "string",
    }
    assert df["duration_s"].iloc[0] == pytest.approx(1.5)
    assert df["schedule_to_start_s"].iloc[0] == pytest.approx(0.5)
    assert pd.isna(df["duration_s"].iloc[1]) and pd.isna(df["started_time"].iloc[1])
    assert df["failure"].iloc[0] == "boom (Oops)" and pd.isna(df["failure"].iloc[1])
    assert df["outcome"].tolist() == ["failed", "running"]
    assert _dtypes(attempts_to_dataframe([])) == _dtypes(df)


# -- exports --------------------------------------------------------------------------------


def test_parquet_and_csv_round_trip(tmp_path: Path) -> None:
    history = _load("temporal_history_activity_failed_workflow_failed.json")
    df = history_to_dataframe(history)
    to_parquet(df, tmp_path / "h.parquet")
    back = pd.read_parquet(tmp_path / "h.parquet")
    assert list(back.columns) == list(HISTORY_COLUMNS)
    for name in ("event_id", "time", "category", "attempt", "scheduled_event_id", "duration_s"):
        assert str(back[name].dtype) == HISTORY_DTYPES[name], name
    assert back["failure"].tolist()[-1] == df["failure"].tolist()[-1]
    assert [json.loads(a) for a in back["attributes"]] == [e.attributes for e in history]
    assert df["attributes"].iloc[0] is history.events[0].attributes  # the input is untouched

    to_csv(df, tmp_path / "h.csv")
    text = pd.read_csv(tmp_path / "h.csv")
    assert len(text) == len(history)
    assert json.loads(text["attributes"].iloc[6])["failure"]["message"] == (
        "permanent failure for doomed"
    )
    assert text["payload_preview"].iloc[0] == '"doomed"'


# -- a live listing and live attempts (SQLite in tmp_path) ------------------------------------

_calls: dict[str, int] = {}


@activity.defn
async def flaky_once(key: str) -> str:
    _calls[key] = _calls.get(key, 0) + 1
    if _calls[key] == 1:
        raise ApplicationError("first attempt fails", type="Flaky")
    return "ok"


@workflow.defn
class FlakyOnceWF:
    @workflow.run
    async def run(self, key: str) -> str:
        return await workflow.execute_activity(
            flaky_once,
            key,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50)),
        )


async def test_live_listing_and_attempts(tmp_path: Path) -> None:
    client = await Client.connect(f"sqlite:///{tmp_path / 'df.db'}")
    try:
        tq = "df-" + uuid.uuid4().hex[:8]
        async with Worker(client, task_queue=tq, workflows=[FlakyOnceWF], activities=[flaky_once]):
            handle = await client.start_workflow(
                FlakyOnceWF.run, tq, id="flaky-" + tq, task_queue=tq
            )
            assert await handle.result() == "ok"
        runs = await list_workflows_dataframe(client)
        assert runs["id"].tolist() == [handle.id]
        assert runs["status"].tolist() == ["COMPLETED"] and runs["duration_s"].iloc[0] > 0
        attempts = attempts_to_dataframe(await handle.fetch_attempts())
        assert attempts["attempt"].tolist() == [1, 2]
        assert attempts["outcome"].tolist() == ["failed", "completed"]
        assert attempts["failure"].iloc[0] == "first attempt fails (Flaky)"
        assert (attempts["activity_type"] == "flaky_once").all()
        history = history_to_dataframe(await handle.fetch_history())
        completed = _row(history, "ActivityTaskCompleted")
        assert completed.attempt == 2 and completed.payload_preview == '"ok"'
        assert completed.duration_s >= 0.05  # includes the retry delay
    finally:
        await client.close()
