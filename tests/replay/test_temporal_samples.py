"""Every Temporal history in tests/data/temporal loads, round-trips, and replays against our code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine import NondeterminismError, WorkflowHistory
from engine.worker import Replayer

from ..conftest import TEMPORAL_DATA
from ..integration.test_basics import HelloWF, TimerWF
from ..integration.test_temporal_shapes import (
    CaughtFailureWF,
    FailedActivityWF,
    RetryWF,
    SeqActivitiesWF,
    SignalWF,
)

ALL = [HelloWF, TimerWF, SignalWF, SeqActivitiesWF, RetryWF, FailedActivityWF, CaughtFailureWF]
SAMPLES = sorted(p.name for p in TEMPORAL_DATA.glob("temporal_history_*.json"))


def _load(name: str) -> WorkflowHistory:
    text = (TEMPORAL_DATA / name).read_text()
    return WorkflowHistory.from_json("sample-" + name, text)


@pytest.mark.parametrize("name", SAMPLES)
async def test_sample_replays(name: str) -> None:
    history = _load(name)
    result = await Replayer(workflows=ALL).replay_workflow(history)
    assert result.replay_failure is None


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_round_trips_to_equivalent_json(name: str) -> None:
    original = json.loads((TEMPORAL_DATA / name).read_text())
    again = json.loads(_load(name).to_json())
    assert again == original


async def test_replay_against_swapped_code_names_the_event() -> None:
    from engine import workflow

    @workflow.defn(name="TimerWF")
    class ActivityInsteadOfTimer:
        @workflow.run
        async def run(self, seconds: float) -> str:
            from datetime import timedelta

            from ..integration.test_basics import say_hello

            await workflow.execute_activity(
                say_hello, "x", start_to_close_timeout=timedelta(seconds=5)
            )
            return "timer done"

    history = _load("temporal_history_timer.json")
    with pytest.raises(NondeterminismError) as info:
        await Replayer(workflows=[ActivityInsteadOfTimer]).replay_workflow(history)
    err = info.value
    assert err.event_id == 5
    assert "StartTimer" in str(err) and "ScheduleActivityTask(say_hello" in str(err)


async def test_replay_many_collects_failures() -> None:
    histories = [_load(n) for n in SAMPLES]
    results = await Replayer(workflows=[HelloWF]).replay_workflows(
        histories, raise_on_replay_failure=False
    )
    # Only the hello history has its workflow type registered.
    assert len(results.results) == len(SAMPLES)
    assert len(results.replay_failures) == len(SAMPLES) - 1


def test_history_of_unknown_type_is_a_clear_error() -> None:
    import asyncio

    from engine.exceptions import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="workflow type 'TimerWF'"):
        asyncio.run(
            Replayer(workflows=[HelloWF]).replay_workflow(_load("temporal_history_timer.json"))
        )


def test_unused() -> None:
    assert Path(__file__).exists()
