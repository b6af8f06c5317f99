"""Our histories have the event sequence Temporal records for the same code.

The workflows are those of the peers' ``temporal_wf.py`` (which produced the samples
in ``tests/data/temporal/``), written with ``engine`` imports instead of ``temporalio``.
"""

from __future__ import annotations

import json
import uuid

import pytest

from engine import Worker, WorkflowFailureError
from engine._model.events import short_name
from engine.testing import WorkflowEnvironment

from ..conftest import TEMPORAL_DATA
from ..interop.engine_code import (
    CaughtFailureWF,
    FailedActivityWF,
    RetryWF,
    SeqActivitiesWF,
    SignalWF,
    always_fails,
    flaky,
    noop,
)
from .test_basics import _wait_for_event


# The same workflow code as the peers' temporal_wf.py, with engine imports: it lives in
# tests/interop/engine_code.py, which the temporalio interop tests also use.
def _sample(name: str) -> list[dict]:
    return json.loads((TEMPORAL_DATA / name).read_text())["events"]


def _attrs(raw: dict) -> dict:
    return next(v for k, v in raw.items() if k.endswith("EventAttributes"))


CASES = [
    ("temporal_history_seq3_activities.json", SeqActivitiesWF, 3),
    ("temporal_history_activity_retry_then_success.json", RetryWF, "retry-me"),
    ("temporal_history_activity_failed_workflow_failed.json", FailedActivityWF, "doomed"),
    ("temporal_history_activity_failed_caught.json", CaughtFailureWF, "doomed"),
]


@pytest.mark.parametrize(("sample", "wf", "arg"), CASES, ids=[c[0] for c in CASES])
async def test_history_shape_matches_temporal(
    env: WorkflowEnvironment, task_queue: str, sample: str, wf: type, arg: object
) -> None:
    async with Worker(
        env.client,
        task_queue=task_queue,
        workflows=[wf],
        activities=[noop, flaky, always_fails],
    ):
        handle = await env.client.start_workflow(
            wf, arg, id="shape-" + uuid.uuid4().hex, task_queue=task_queue
        )
        try:
            await handle.result()
        except WorkflowFailureError:
            pass
    ours = (await handle.fetch_history()).events
    theirs = _sample(sample)
    assert [e.event_type for e in ours] == [short_name(r["eventType"]) for r in theirs]
    for mine, raw in zip(ours, theirs, strict=True):
        kind = mine.event_type
        if kind in ("WorkflowExecutionCompleted", "ActivityTaskCompleted"):
            # Same payload bytes for the same results.
            assert mine.attributes["result"] == _attrs(raw)["result"], kind
        if kind in ("ActivityTaskFailed", "WorkflowExecutionFailed"):
            want = _attrs(raw)
            assert mine.attributes.get("retryState") == want.get("retryState"), kind
            got_failure, want_failure = mine.attributes["failure"], want["failure"]
            assert got_failure["message"] == want_failure["message"]
            assert set(got_failure) - {"stackTrace", "source"} == set(want_failure) - {
                "stackTrace",
                "source",
            }
        if kind == "ActivityTaskStarted":
            assert mine.attributes["attempt"] == _attrs(raw)["attempt"]
            assert ("lastFailure" in mine.attributes) == ("lastFailure" in _attrs(raw))


async def test_signal_history_shape_matches_temporal(
    env: WorkflowEnvironment, task_queue: str
) -> None:
    async with Worker(env.client, task_queue=task_queue, workflows=[SignalWF]):
        handle = await env.client.start_workflow(
            SignalWF.run, 2, id="sig-" + uuid.uuid4().hex, task_queue=task_queue
        )
        await _wait_for_event(handle, "WorkflowTaskCompleted")
        await handle.signal(SignalWF.add_message, "first")
        await _wait_until_count(handle, "WorkflowTaskCompleted", 2)
        await handle.signal(SignalWF.add_message, "second")
        assert await handle.result() == ["first", "second"]
    ours = [e.event_type for e in (await handle.fetch_history()).events]
    theirs = [short_name(r["eventType"]) for r in _sample("temporal_history_signal.json")]
    assert ours == theirs


async def _wait_until_count(handle, event_type: str, count: int) -> None:
    import asyncio

    for _ in range(1000):
        events = (await handle.fetch_history()).events
        if sum(e.event_type == event_type for e in events) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"fewer than {count} {event_type}")
