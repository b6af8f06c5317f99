"""Bad history input gets a clear error naming what is wrong (never a deep stack trace)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import WorkflowHistory
from engine.exceptions import HistoryFormatError, InvalidArgumentError
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


# ---------------------------------------------------------------------------------------
# malformed fields: a HistoryFormatError naming the event index, its id and the JSON path
# ---------------------------------------------------------------------------------------


def _hello() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(HELLO)
    return data


def _scheduled(data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    for index, event in enumerate(data["events"]):
        if event["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED":
            return index, event["activityTaskScheduledEventAttributes"]
    raise AssertionError("the sample has no ActivityTaskScheduled event")


def test_history_format_error_is_an_invalid_argument_error() -> None:
    assert issubclass(HistoryFormatError, InvalidArgumentError)


def test_huge_event_id_as_raw_json_number() -> None:
    text = HELLO.replace('"eventId": "1"', '"eventId": 1e400', 1)
    assert text != HELLO
    with pytest.raises(HistoryFormatError, match=r"index 0.*events\[0\]\.eventId.*got inf"):
        WorkflowHistory.from_json("w", text)


@pytest.mark.parametrize("value", [0, -1, 2**63, "9223372036854775808", True, 1.5, None, "x"])
def test_event_id_out_of_range_or_wrongly_typed(value: Any) -> None:
    data = _hello()
    data["events"][2]["eventId"] = value
    with pytest.raises(HistoryFormatError, match=r"index 2.*events\[2\]\.eventId: expected"):
        WorkflowHistory.from_json("w", data)


@pytest.mark.parametrize("value", ["EVENT_TYPE_", "EVENT_TYPE__", "", 7, None, "event_type_x"])
def test_malformed_event_type(value: Any) -> None:
    data = _hello()
    data["events"][1]["eventType"] = value
    with pytest.raises(HistoryFormatError, match=r"index 1 \(event id 2\).*events\[1\]\.eventType"):
        WorkflowHistory.from_json("w", data)


def test_unknown_but_well_formed_event_type_is_kept() -> None:
    data = _hello()
    data["events"].append(
        {"eventId": str(len(data["events"]) + 1), "eventType": "EVENT_TYPE_SOMETHING_NEW"}
    )
    history = WorkflowHistory.from_json("w", data)
    assert history.events[-1].event_type == "SomethingNew"


def test_failure_chain_1000_deep() -> None:
    data = _hello()
    failure: dict[str, Any] = {"message": "bottom"}
    for depth in range(1000):
        failure = {"message": f"level {depth}", "cause": failure}
    index, _ = _scheduled(data)
    data["events"][index + 2] = {
        "eventId": data["events"][index + 2]["eventId"],
        "eventType": "EVENT_TYPE_ACTIVITY_TASK_FAILED",
        "activityTaskFailedEventAttributes": {"failure": failure, "scheduledEventId": "5"},
    }
    with pytest.raises(HistoryFormatError, match=r"failure chain deeper than 100") as info:
        WorkflowHistory.from_json("w", data)
    assert f"events[{index + 2}].activityTaskFailedEventAttributes.failure.cause" in str(info.value)
    nested = '{"message": "bottom"}'
    for _ in range(1000):
        nested = '{"message": "m", "cause": ' + nested + "}"
    data["events"][index + 2]["activityTaskFailedEventAttributes"]["failure"] = "FAILURE"
    text = json.dumps(data).replace('"FAILURE"', nested)
    with pytest.raises(HistoryFormatError):  # too deep for json.loads, or for the chain limit
        WorkflowHistory.from_json("w", text)


def test_deep_json_nesting_in_text() -> None:
    text = '{"events": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    with pytest.raises(HistoryFormatError):
        WorkflowHistory.from_json("w", text)


def test_a_failure_chain_at_the_limit_decodes_without_recursion() -> None:
    from engine.converter import DataConverter

    failure: dict[str, Any] = {"message": "bottom"}
    for depth in range(5000):
        failure = {"message": f"level {depth}", "cause": failure}
    err = DataConverter.default.from_failure(failure)
    depth = 0
    cause: BaseException | None = err
    while cause is not None:
        depth += 1
        cause = cause.__cause__
    assert depth == 5001


def test_wrongly_typed_nested_field() -> None:
    data = _hello()
    index, attrs = _scheduled(data)
    attrs["activityType"] = "x"
    with pytest.raises(HistoryFormatError) as info:
        WorkflowHistory.from_json("w", data)
    event_id = data["events"][index]["eventId"]
    assert str(info.value) == (
        f"history event at index {index} (event id {event_id}): "
        f"events[{index}].activityTaskScheduledEventAttributes.activityType: "
        "expected an object, got 'x'"
    )


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("activityType", {"name": 3}, r"activityType\.name: expected a string, got 3"),
        ("input", {"payloads": {}}, r"input\.payloads: expected a list of payloads"),
        ("input", {"payloads": [3]}, r"input\.payloads\[0\]: expected a payload object"),
        ("input", {"payloads": [{"data": 3}]}, r"payloads\[0\]\.data: expected a base64"),
        ("startToCloseTimeout", "ten", r"startToCloseTimeout: expected a duration"),
        ("taskQueue", [], r"taskQueue: expected an object, got a list of 0 item"),
        ("activityId", "\ud800", r"activityId: expected valid Unicode"),
        ("activityId", "x" * 5000, r"activityId: expected .*'xxxx\.\.\.'$"),
    ],
)
def test_nested_field_errors_name_the_path(field: str, value: Any, expected: str) -> None:
    data = _hello()
    index, attrs = _scheduled(data)
    attrs[field] = value
    if field == "activityId" and len(value) > 1:
        attrs[field] = 5  # a long value is quoted short: shown with a wrongly typed one
        data["events"][index]["activityTaskScheduledEventAttributes"]["activityId"] = ["x"]
        data["events"][index]["eventTime"] = "x" * 5000
        with pytest.raises(HistoryFormatError) as info:
            WorkflowHistory.from_json("w", data)
        assert len(str(info.value)) < 400
        return
    with pytest.raises(HistoryFormatError, match=rf"events\[{index}\]\..*{expected}"):
        WorkflowHistory.from_json("w", data)


async def test_validated_history_still_replays() -> None:
    history = WorkflowHistory.from_json("w", HELLO)
    await Replayer(workflows=[HelloWF]).replay_workflow(history)
