"""Bad history input gets a clear error naming what is wrong (never a deep stack trace)."""

from __future__ import annotations

import json

import pytest

from engine import WorkflowHistory
from engine.exceptions import InvalidArgumentError
from engine.worker import Replayer

from ..conftest import TEMPORAL_DATA
from ..integration.test_basics import HelloWF, TimerWF

HELLO = (TEMPORAL_DATA / "temporal_history_hello_activity.json").read_text()


def test_truncated_json_names_the_position() -> None:
    with pytest.raises(InvalidArgumentError, match=r"line \d+ column \d+.*truncated"):
        WorkflowHistory.from_json("w", HELLO[: len(HELLO) // 2])


def test_not_a_history_object() -> None:
    with pytest.raises(InvalidArgumentError, match="'events' list"):
        WorkflowHistory.from_json("w", json.dumps({"nope": []}))


def test_bad_event_field_names_index_and_field() -> None:
    data = json.loads(HELLO)
    data["events"][3]["eventId"] = "four"
    with pytest.raises(InvalidArgumentError, match=r"index 3.*eventId"):
        WorkflowHistory.from_json("w", json.dumps(data))


async def test_history_of_another_workflow_type() -> None:
    history = WorkflowHistory.from_json("w", HELLO)
    with pytest.raises(InvalidArgumentError, match=r"workflow type 'HelloWF'.*TimerWF"):
        await Replayer(workflows=[TimerWF]).replay_workflow(history)


async def test_gap_in_event_ids() -> None:
    data = json.loads(HELLO)
    del data["events"][5]
    history = WorkflowHistory.from_json("w", json.dumps(data))
    with pytest.raises(InvalidArgumentError, match=r"gap.*event 6 is missing"):
        await Replayer(workflows=[HelloWF]).replay_workflow(history)
