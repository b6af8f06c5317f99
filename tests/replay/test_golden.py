"""Golden histories recorded from our engine replay against the current code, and
replays against deliberately changed code fail naming the event where they diverge.

The histories are in ``histories/`` (one per feature), recorded by ``record_golden.py``
from the cases of ``tests/interop/cases.py`` (code in ``tests/interop/engine_code.py``).
A golden history that stops replaying against unchanged code means the engine broke
compatibility with runs recorded by an earlier version: fix the engine, do not re-record.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path

import pytest

from engine import NondeterminismError, WorkflowHistory, workflow
from engine.worker import Replayer
from tests.interop import engine_code as code
from tests.interop.cases import CASES

HISTORIES = Path(__file__).resolve().parent / "histories"
GOLDENS = sorted(p.stem for p in HISTORIES.glob("*.json"))
TIMEOUT = timedelta(seconds=30)


def _load(feature: str) -> WorkflowHistory:
    text = (HISTORIES / f"{feature}.json").read_text()
    data = json.loads(text)
    workflow_id = data["events"][0]["workflowExecutionStartedEventAttributes"]["workflowId"]
    return WorkflowHistory.from_json(workflow_id, text)


def _event_id(history: WorkflowHistory, event_type: str, nth: int = 1) -> int:
    """The id of the ``nth`` event of ``event_type`` in ``history``."""
    ids = [e.event_id for e in history.events if e.event_type == event_type]
    assert len(ids) >= nth, f"the golden history has fewer than {nth} {event_type} events"
    return ids[nth - 1]


def test_every_case_has_a_golden_history() -> None:
    assert sorted(c.feature for c in CASES) == GOLDENS, (
        "record the missing ones with: python -m tests.replay.record_golden FEATURE"
    )


@pytest.mark.parametrize("feature", GOLDENS)
async def test_golden_history_replays(feature: str) -> None:
    result = await Replayer(workflows=code.ALL_WORKFLOWS).replay_workflow(_load(feature))
    assert result.replay_failure is None


@pytest.mark.parametrize("feature", GOLDENS)
def test_golden_history_round_trips_through_our_json(feature: str) -> None:
    text = (HISTORIES / f"{feature}.json").read_text()
    assert json.loads(_load(feature).to_json()) == json.loads(text)


# -- deliberately changed code ----------------------------------------------------------


@workflow.defn(name="TimerWF")
class TimerSwappedForActivity:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.execute_activity(code.say_hello, "x", start_to_close_timeout=TIMEOUT)
        return "timer done"


@workflow.defn(name="HelloWF")
class ActivitySwappedForTimer:
    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(1)
        return f"Hello, {name}!"


@workflow.defn(name="SeqActivitiesWF")
class LastActivityRemoved:
    @workflow.run
    async def run(self, n: int) -> int:
        total = 0
        for i in range(n - 1):
            total += await workflow.execute_activity(code.noop, i, start_to_close_timeout=TIMEOUT)
        return total


@workflow.defn(name="HelloWF")
class TimerAdded:
    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            code.say_hello, name, start_to_close_timeout=TIMEOUT
        )
        await workflow.sleep(1)
        return greeting


@workflow.defn(name="CancelCleanupWF")
class OtherCleanupActivity:
    @workflow.run
    async def run(self, resource: str) -> str:
        try:
            await workflow.sleep(timedelta(days=30))
        except asyncio.CancelledError:
            await workflow.execute_activity(
                code.say_hello, resource, start_to_close_timeout=TIMEOUT
            )
            raise
        return "held for 30 days"


@workflow.defn(name="PatchedWF")
class PatchedBranchRemoved:
    """The code from before the patch: no ``patched`` call, no activity."""

    @workflow.run
    async def run(self, name: str) -> str:
        await workflow.sleep(1)
        return f"Hi, {name}."


@workflow.defn(name="PatchedWF")
class PatchDeprecated:
    """The next step of a patch's life: only the new branch, the patch deprecated."""

    @workflow.run
    async def run(self, name: str) -> str:
        workflow.deprecate_patch("greet-with-activity")
        greeting = await workflow.execute_activity(
            code.say_hello, name, start_to_close_timeout=TIMEOUT
        )
        await workflow.sleep(1)
        return greeting


@workflow.defn(name="ParentWF")
class ActivityInsteadOfChild:
    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(
            code.say_hello, name, start_to_close_timeout=TIMEOUT
        )
        return f"child said: {greeting}"


# (golden feature, changed workflow, (event type, nth) where replay must diverge,
#  words in what the history recorded, words in what the code produced)
KNOWN_BAD = [
    pytest.param(
        "timer",
        TimerSwappedForActivity,
        ("TimerStarted", 1),
        "StartTimer",
        "ScheduleActivityTask(say_hello",
        id="timer-swapped-for-activity",
    ),
    pytest.param(
        "one_activity",
        ActivitySwappedForTimer,
        ("ActivityTaskScheduled", 1),
        "ScheduleActivityTask(say_hello",
        "StartTimer",
        id="activity-swapped-for-timer",
    ),
    pytest.param(
        "sequential_activities",
        LastActivityRemoved,
        ("ActivityTaskScheduled", 3),
        "ScheduleActivityTask(noop, activity id 3)",
        "CompleteWorkflowExecution",
        id="step-removed",
    ),
    pytest.param(
        "one_activity",
        TimerAdded,
        ("WorkflowExecutionCompleted", 1),
        "CompleteWorkflowExecution",
        "StartTimer",
        id="step-added",
    ),
    pytest.param(
        "cancelled_with_cleanup",
        OtherCleanupActivity,
        ("ActivityTaskScheduled", 1),
        "ScheduleActivityTask(release",
        "ScheduleActivityTask(say_hello",
        id="other-activity-type",
    ),
    pytest.param(
        "patched",
        PatchedBranchRemoved,
        ("ActivityTaskScheduled", 1),
        "ScheduleActivityTask(say_hello",
        "StartTimer",
        id="patched-branch-removed",
    ),
    pytest.param(
        "child_workflow",
        ActivityInsteadOfChild,
        ("StartChildWorkflowExecutionInitiated", 1),
        "StartChildWorkflowExecution",
        "ScheduleActivityTask(say_hello",
        id="activity-instead-of-child",
    ),
]


@pytest.mark.parametrize(("feature", "changed", "where", "recorded", "produced"), KNOWN_BAD)
async def test_changed_code_is_a_nondeterminism_error_naming_the_event(
    feature: str, changed: type, where: tuple[str, int], recorded: str, produced: str
) -> None:
    history = _load(feature)
    with pytest.raises(NondeterminismError) as info:
        await Replayer(workflows=[changed]).replay_workflow(history)
    err = info.value
    assert err.event_id == _event_id(history, *where), str(err)
    assert recorded in (err.recorded or ""), str(err)
    assert produced in (err.produced or ""), str(err)
    assert f"event {err.event_id}" in str(err)


async def test_deprecated_patch_replays_the_patched_history() -> None:
    result = await Replayer(workflows=[PatchDeprecated]).replay_workflow(_load("patched"))
    assert result.replay_failure is None
