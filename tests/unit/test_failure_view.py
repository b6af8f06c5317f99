"""Failure views read as temporalio reads Failures: every stored and built failure, field by
field, against temporalio's protobuf message (moved from test_converter.py)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from engine.converter import (
    DataConverter,
)
from engine.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    RetryState,
    ServerError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
)
from tests.unit.test_converter import _raise_and_catch

# Real Temporal histories, copied into the repository (tests/data/temporal/README.md).
DATA = Path(__file__).resolve().parents[1] / "data" / "temporal"
CONVERTER = DataConverter.default


def _failures_in(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, list):
        return [f for item in node for f in _failures_in(item)]
    if not isinstance(node, dict):
        return []
    found = []
    for key, value in node.items():
        if key == "failure" and isinstance(value, dict):
            found.append(value)
        else:
            found += _failures_in(value)
    return found


def _built_failures() -> list[dict[str, Any]]:
    """Failures of every kind this converter writes, with every field it writes set."""
    app = _raise_and_catch(
        ApplicationError(
            "card declined",
            {"card": "x"},
            b"\x00\xff",
            type="InvalidCard",
            non_retryable=True,
            next_retry_delay=timedelta(seconds=2, microseconds=5),
            category=ApplicationErrorCategory.BENIGN,
        )
    )
    activity = ActivityError(
        "Activity task failed",
        scheduled_event_id=12,
        started_event_id=13,
        identity="worker-1",
        activity_type="charge",
        activity_id="3",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    activity.__cause__ = app
    child = ChildWorkflowError(
        "Child Workflow execution failed",
        namespace="default",
        workflow_id="child-1",
        run_id="run-1",
        workflow_type="Child",
        initiated_event_id=5,
        started_event_id=6,
        retry_state=RetryState.RETRY_POLICY_NOT_SET,
    )
    child.__cause__ = TimeoutError(
        "heartbeat", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[{"offset": 1}]
    )
    errors: list[BaseException] = [
        activity,
        child,
        CancelledError("stop", "why"),
        TerminatedError("by admin"),
        ServerError("db", non_retryable=True),
        _raise_and_catch(KeyError("k")),
    ]
    return [CONVERTER.to_failure(e) for e in errors]


_HANDWRITTEN_FAILURES: list[dict[str, Any]] = [
    # What other SDKs and older servers write: numbers for int64 and enums, other fields.
    {
        "message": "from Go",
        "source": "GoSDK",
        "activityFailureInfo": {"scheduledEventId": 7, "retryState": 3, "activityType": {}},
        "cause": {"message": "reset", "resetWorkflowFailureInfo": {}},
    },
    {"message": "bye", "terminatedFailureInfo": {"identity": "admin@host"}},
    {"canceledFailureInfo": {"identity": "ui", "details": {"payloads": []}}},
    {"applicationFailureInfo": {"nextRetryDelay": "-1.500s", "category": 1}},
    {"timeoutFailureInfo": {"timeoutType": 2}},
    {
        "message": "Encoded failure",
        "encodedAttributes": {
            "metadata": {"encoding": "anNvbi9wbGFpbg"},  # URL-safe, unpadded: json/plain
            "data": "eyJtZXNzYWdlIjoiaGkifQ==",
        },
    },
    {
        "nexusOperationExecutionFailureInfo": {
            "scheduledEventId": "9",
            "endpoint": "e",
            "service": "s",
            "operation": "o",
            "operationToken": "t",
        }
    },
    {
        "nexusHandlerFailureInfo": {
            "type": "INTERNAL",
            "retryBehavior": "NEXUS_HANDLER_ERROR_RETRY_BEHAVIOR_NON_RETRYABLE",
        }
    },
    {},
]


def _assert_reads_as_protobuf(view: Any, message: Any, where: str, unset: int = 0) -> None:
    """Every field of the protobuf ``message`` reads the same through ``view``.

    Unset sub-messages are compared one level down (both read as empty messages; an unset
    ``cause`` has an unset ``cause`` of its own, and so on without end)."""
    for fd in message.DESCRIPTOR.fields:
        if fd.name == "external_payloads":
            continue  # payloads stored elsewhere: not something this engine writes or reads
        path = f"{where}.{fd.name}"
        got, want = getattr(view, fd.name), getattr(message, fd.name)
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            assert got == dict(want), path
        elif fd.is_repeated:
            assert len(got) == len(want), path
            for index, (g, w) in enumerate(zip(got, want, strict=True)):
                _assert_reads_as_protobuf(g, w, f"{path}[{index}]")
        elif fd.message_type is not None:
            is_set = message.HasField(fd.name)
            assert view.HasField(fd.name) == is_set, path
            if fd.message_type.full_name == "google.protobuf.Duration":
                assert (got.seconds, got.nanos) == (want.seconds, want.nanos), path
                assert got.ToTimedelta() == want.ToTimedelta(), path
            elif is_set or unset == 0:
                _assert_reads_as_protobuf(got, want, path, unset if is_set else unset + 1)
        else:
            assert got == want, f"{path}: {got!r} != {want!r}"
            assert isinstance(got, type(want)), f"{path}: {type(got)} is not {type(want)}"
    for oneof in message.DESCRIPTOR.oneofs:
        assert view.WhichOneof(oneof.name) == message.WhichOneof(oneof.name), where


def test_failure_views_read_as_temporalio_protobuf_failures() -> None:
    from google.protobuf import json_format
    from temporalio.api.failure.v1 import Failure as ProtoFailure

    replay = Path(__file__).resolve().parents[1] / "replay" / "histories"
    samples = [
        failure
        for path in [*sorted(DATA.glob("*.json")), *sorted(replay.rglob("*.json"))]
        for failure in _failures_in(json.loads(path.read_text()))
    ]
    assert len(samples) >= 9
    failures = samples + _built_failures() + _HANDWRITTEN_FAILURES
    for index, failure in enumerate(failures):
        proto = json_format.ParseDict(failure, ProtoFailure())
        views = [FailureError("x", failure=failure).failure]
        if "encodedAttributes" not in failure:  # else decoding restores the message
            views.append(CONVERTER.from_failure(failure).failure)
        for view in views:
            assert view is not None
            _assert_reads_as_protobuf(view, proto, f"failures[{index}]")


def test_encoded_attributes_restore_message_and_stack_trace_as_temporalio() -> None:
    attributes = CONVERTER.to_payload({"message": "card declined", "stack_trace": "at line 3"})
    failure = {
        "message": "Encoded failure",
        "encodedAttributes": attributes.to_json(),
        "applicationFailureInfo": {"type": "InvalidCard"},
    }
    err = CONVERTER.from_failure(failure)
    assert isinstance(err, ApplicationError) and err.message == "card declined"
    assert err.failure is not None
    assert (err.failure.message, err.failure.stack_trace) == ("card declined", "at line 3")
    assert failure["message"] == "Encoded failure"  # the caller's JSON is left alone
    # A payload that does not decode is ignored, as temporalio ignores it.
    unreadable = {**failure, "encodedAttributes": {"metadata": {"encoding": "eC91bmtub3du"}}}
    err = CONVERTER.from_failure(unreadable)
    assert err.message == "Encoded failure"
