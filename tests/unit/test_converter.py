"""Unit tests for engine.converter: payloads, the JSON converter, failures, codecs and size limits."""

from __future__ import annotations

import base64
import json
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import Enum, IntEnum
from pathlib import Path
from typing import Any, Optional

import pytest

import engine.common
import engine.converter
from engine.converter import (
    MAX_PAYLOAD_BYTES,
    MAX_TRANSACTION_BYTES,
    DataConverter,
    FailureConverter,
    Payload,
    PayloadCodec,
    PayloadConverter,
    check_payloads_size,
    payloads_from_json,
    payloads_to_json,
)
from engine.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    PayloadSizeError,
    RetryState,
    ServerError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
)

# Real Temporal histories, copied into the repository (tests/data/temporal/README.md).
DATA = Path(__file__).resolve().parents[1] / "data" / "temporal"
CONVERTER = DataConverter.default


def _events(name: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads((DATA / name).read_text())["events"]
    return events


def _event(name: str, event_id: int) -> dict[str, Any]:
    return next(e for e in _events(name) if int(e["eventId"]) == event_id)


def _strip_stack(failure: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in failure.items() if k != "stackTrace"}
    if "cause" in out:
        out["cause"] = _strip_stack(out["cause"])
    return out


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


@dataclass
class Item:
    sku: str
    quantity: int = 1
    color: Color = Color.RED


@dataclass
class Order:
    order_id: str
    items: list[Item]
    by_sku: dict[str, Item] = field(default_factory=dict)
    gift: Item | None = None
    backup: Optional[Item] = None  # noqa: UP045 - Optional[...] must work too
    placed: datetime | None = None
    ref: uuid.UUID | None = None
    pair: tuple[int, str] = (0, "")
    levels: dict[Level, float] = field(default_factory=dict)


# --------------------------------------------------------------------------
# Payload JSON
# --------------------------------------------------------------------------
def test_payload_json_form() -> None:
    payload = PayloadConverter().to_payload("doomed")
    assert payload.to_json() == {
        "metadata": {"encoding": "anNvbi9wbGFpbg=="},
        "data": "ImRvb21lZCI=",
    }
    assert payload.encoding == "json/plain"
    assert payload.size == len(b'"doomed"') + len("encoding") + len(b"json/plain")
    assert Payload.from_json(payload.to_json()) == payload


def test_null_payload_has_no_data() -> None:
    payload = PayloadConverter().to_payload(None)
    assert payload.to_json() == {
        "metadata": {"encoding": base64.b64encode(b"binary/null").decode()}
    }
    assert Payload.from_json(payload.to_json()) == payload


@pytest.mark.parametrize(
    ("bad", "field_name"),
    [
        ({"metadata": {"encoding": "!!!"}}, "metadata.encoding"),
        ({"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": 12}, "data"),
        ({"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": "not base64!"}, "data"),
        ({"metadata": ["x"]}, "metadata"),
    ],
)
def test_payload_from_json_names_bad_field(bad: dict[str, Any], field_name: str) -> None:
    with pytest.raises(ValueError, match=f"'{field_name}'"):
        Payload.from_json(bad)


def test_payloads_json_helpers() -> None:
    payloads = PayloadConverter().to_payloads([1, "two"])
    data = payloads_to_json(payloads)
    assert list(data) == ["payloads"]
    assert payloads_from_json(data) == payloads
    assert payloads_from_json(None) == []
    assert payloads_from_json({}) == []
    with pytest.raises(ValueError, match=r"payloads\[1\]"):
        payloads_from_json({"payloads": [payloads[0].to_json(), {"metadata": 3}]})


# --------------------------------------------------------------------------
# PayloadConverter
# --------------------------------------------------------------------------
def test_json_is_compact_and_sorted_like_temporalio() -> None:
    payload = PayloadConverter().to_payload({"detail": "some detail", "code": 42})
    assert payload.data == b'{"code":42,"detail":"some detail"}'
    # Byte for byte what Temporal's Python SDK wrote in the sample history.
    sample = _event("temporal_history_activity_failed_workflow_failed.json", 7)
    details = sample["activityTaskFailedEventAttributes"]["failure"]["applicationFailureInfo"][
        "details"
    ]
    assert payloads_to_json([payload]) == details


@pytest.mark.parametrize(
    ("value", "encoding", "data"),
    [
        (None, "binary/null", b""),
        (b"\x00\xff", "binary/plain", b"\x00\xff"),
        (bytearray(b"ab"), "binary/plain", b"ab"),
        (0.5, "json/plain", b"0.5"),
        ([1, "a", None], "json/plain", b'[1,"a",null]'),
        (Color.BLUE, "json/plain", b'"blue"'),
        (Level.HIGH, "json/plain", b"2"),
        ({3, 1, 2}, "json/plain", b"[1,2,3]"),
        (uuid.UUID(int=1), "json/plain", b'"00000000-0000-0000-0000-000000000001"'),
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "json/plain", b'"2026-01-02T03:04:05+00:00"'),
        ("é", "json/plain", b'"\\u00e9"'),
    ],
)
def test_to_payload_encodings(value: Any, encoding: str, data: bytes) -> None:
    payload = PayloadConverter().to_payload(value)
    assert payload.encoding == encoding
    assert payload.data == data


def test_round_trip_simple_values() -> None:
    converter = PayloadConverter()
    for value in (None, b"raw", "text", 0, 1.25, True, [1, [2]], {"a": {"b": None}}):
        assert converter.from_payload(converter.to_payload(value)) == value


def test_round_trip_nested_dataclasses() -> None:
    order = Order(
        order_id="o-1",
        items=[Item("a", 2), Item("b", color=Color.BLUE)],
        by_sku={"a": Item("a", 2)},
        gift=Item("g"),
        backup=None,
        placed=datetime(2026, 11, 30, 9, 28, 10, 339381, tzinfo=UTC),
        ref=uuid.UUID(int=7),
        pair=(3, "x"),
        levels={Level.HIGH: 1.0},
    )
    converter = PayloadConverter()
    payload = converter.to_payload(order)
    assert json.loads(payload.data)["items"][1] == {"color": "blue", "quantity": 1, "sku": "b"}
    assert converter.from_payload(payload, Order) == order
    # Without a hint the JSON structure comes back.
    assert converter.from_payload(payload)["gift"] == {"color": "red", "quantity": 1, "sku": "g"}


def test_type_hints_for_containers_and_optionals() -> None:
    converter = PayloadConverter()
    items = [Item("a"), Item("b", 3)]
    assert converter.from_payload(converter.to_payload(items), list[Item]) == items
    assert converter.from_payload(converter.to_payload(items), Sequence[Item]) == items
    assert converter.from_payload(converter.to_payload({"k": Item("a")}), dict[str, Item]) == {
        "k": Item("a")
    }
    assert converter.from_payload(converter.to_payload(None), Optional[Item]) is None  # noqa: UP045
    assert converter.from_payload(converter.to_payload(Item("z")), Item | None) == Item("z")
    assert converter.from_payload(converter.to_payload("s"), str | Item) == "s"
    assert converter.from_payload(converter.to_payload((1, 2)), tuple[int, ...]) == (1, 2)
    assert converter.from_payload(converter.to_payload([1, 2]), tuple) == (1, 2)
    assert converter.from_payload(converter.to_payload({1, 2}), set[int]) == {1, 2}
    assert converter.from_payload(converter.to_payload(3), float) == 3.0
    assert converter.from_payload(converter.to_payload({"1": "x"}), dict[int, str]) == {1: "x"}
    assert converter.from_payload(converter.to_payload(Color.RED), Color) is Color.RED
    assert converter.from_payload(converter.to_payload(uuid.UUID(int=3)), uuid.UUID) == uuid.UUID(
        int=3
    )
    assert converter.from_payload(converter.to_payload(b"x"), bytes) == b"x"
    assert converter.from_payload(converter.to_payload(5), Any) == 5


def test_dataclass_ignores_unknown_keys_and_reports_missing_ones() -> None:
    converter = PayloadConverter()
    payload = converter.to_payload({"sku": "a", "quantity": 2, "added_later": True})
    assert converter.from_payload(payload, Item) == Item("a", 2)
    with pytest.raises(TypeError, match="Item"):
        converter.from_payload(converter.to_payload({"quantity": 2}), Item)


def test_unserialisable_value_names_its_type() -> None:
    class Opaque:
        pass

    with pytest.raises(TypeError, match="Opaque"):
        PayloadConverter().to_payload({"x": Opaque()})


def test_unknown_encoding_names_it() -> None:
    payload = Payload(metadata={"encoding": b"binary/encrypted"}, data=b"zz")
    with pytest.raises(ValueError, match="binary/encrypted"):
        PayloadConverter().from_payload(payload)


def test_sample_payloads_decode() -> None:
    expected = {
        "temporal_history_hello_activity.json": [
            "Temporal",
            "Temporal",
            "Hello, Temporal!",
            "Hello, Temporal!",
        ],
        "temporal_history_timer.json": [0.5, "timer done"],
        "temporal_history_signal.json": [2, "first", "second", ["first", "second"]],
    }
    for name, values in expected.items():
        decoded = []
        for event in _events(name):
            for attributes in (v for k, v in event.items() if k.endswith("EventAttributes")):
                for key in ("input", "result"):
                    if key in attributes:
                        decoded.extend(CONVERTER.from_payloads(payloads_from_json(attributes[key])))
        assert decoded == values, name
    seq = _events("temporal_history_seq1000.json")
    last = seq[-1]["workflowExecutionCompletedEventAttributes"]["result"]
    assert CONVERTER.from_payloads(payloads_from_json(last), [int]) == [499500]


def test_sample_payload_json_reencodes_identically() -> None:
    for path in sorted(DATA.glob("temporal_history_*.json")):
        if "seq1000" in path.name:
            continue
        text = path.read_text()
        for event in json.loads(text)["events"]:
            for attributes in (v for k, v in event.items() if k.endswith("EventAttributes")):
                for key in ("input", "result"):
                    if key in attributes:
                        values = CONVERTER.from_payloads(payloads_from_json(attributes[key]))
                        assert payloads_to_json(CONVERTER.to_payloads(values)) == attributes[key]


# --------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------
def test_sample_failure_decodes_to_activity_error_with_application_cause() -> None:
    event = _event("temporal_history_activity_failed_workflow_failed.json", 11)
    failure = event["workflowExecutionFailedEventAttributes"]["failure"]
    err = CONVERTER.from_failure(failure)
    assert isinstance(err, ActivityError)
    assert err.message == "Activity task failed"
    assert (err.scheduled_event_id, err.started_event_id) == (5, 6)
    assert (err.identity, err.activity_type, err.activity_id) == ("23905@vm", "always_fails", "1")
    assert err.retry_state is RetryState.NON_RETRYABLE_FAILURE
    # .failure views the JSON with temporalio's (protobuf) field names; items are the JSON.
    assert err.failure == failure and err.failure is not None
    assert err.failure["activityFailureInfo"] is failure["activityFailureInfo"]
    assert err.failure.message == "Activity task failed"
    assert err.failure.WhichOneof("failure_info") == "activity_failure_info"
    assert err.failure.activity_failure_info.activity_type.name == "always_fails"
    assert err.failure.activity_failure_info.scheduled_event_id == 5
    assert err.failure.cause.application_failure_info.type == "PermanentError"
    assert err.failure.cause.application_failure_info.non_retryable is True
    cause = err.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "PermanentError"
    assert cause.non_retryable is True
    assert cause.details == ({"code": 42, "detail": "some detail"},)
    assert cause.message == "permanent failure for doomed"
    # What the sample workflow returned as f"{e.cause}" in the "caught" history.
    caught = _event("temporal_history_activity_failed_caught.json", 11)
    result = caught["workflowExecutionCompletedEventAttributes"]["result"]
    assert CONVERTER.from_payloads(payloads_from_json(result)) == [
        f"caught: {type(err).__name__}: {cause}"
    ]
    # Raised on unchanged, a decoded failure is written back exactly.
    assert CONVERTER.to_failure(err) == failure


def test_activity_task_failed_sample_decodes() -> None:
    event = _event("temporal_history_activity_failed_workflow_failed.json", 7)
    err = CONVERTER.from_failure(event["activityTaskFailedEventAttributes"]["failure"])
    assert isinstance(err, ApplicationError)
    assert str(err) == "PermanentError: permanent failure for doomed"
    assert err.failure is not None and "always_fails" in err.failure["stackTrace"]
    assert err.failure.stack_trace == err.failure["stackTrace"]


def test_built_errors_encode_to_the_sample_shape() -> None:
    event = _event("temporal_history_activity_failed_workflow_failed.json", 11)
    expected = _strip_stack(event["workflowExecutionFailedEventAttributes"]["failure"])
    err = ActivityError(
        "Activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="23905@vm",
        activity_type="always_fails",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    err.__cause__ = ApplicationError(
        "permanent failure for doomed",
        {"detail": "some detail", "code": 42},
        type="PermanentError",
        non_retryable=True,
    )
    assert _strip_stack(CONVERTER.to_failure(err)) == expected


def _raise_and_catch(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_application_error_round_trip() -> None:
    err = _raise_and_catch(
        ApplicationError(
            "card declined",
            {"card": "x"},
            [1, 2],
            type="InvalidCard",
            non_retryable=True,
            next_retry_delay=timedelta(milliseconds=1500),
        )
    )
    failure = CONVERTER.to_failure(err)
    info = failure["applicationFailureInfo"]
    assert failure["message"] == "card declined"
    assert "_raise_and_catch" in failure["stackTrace"]
    assert info["type"] == "InvalidCard"
    assert info["nonRetryable"] is True
    assert info["nextRetryDelay"] == "1.500s"
    back = CONVERTER.from_failure(json.loads(json.dumps(failure)))
    assert isinstance(back, ApplicationError)
    assert (back.message, back.type, back.non_retryable) == ("card declined", "InvalidCard", True)
    assert back.details == ({"card": "x"}, [1, 2])
    assert back.next_retry_delay == timedelta(milliseconds=1500)


def test_defaults_are_omitted_like_proto_json() -> None:
    failure = CONVERTER.to_failure(ApplicationError("plain"))
    assert failure == {"message": "plain", "applicationFailureInfo": {}}
    back = CONVERTER.from_failure(failure)
    assert isinstance(back, ApplicationError)
    assert (back.type, back.non_retryable, back.details) == (None, False, ())


def test_plain_exception_becomes_retryable_application_failure() -> None:
    failure = CONVERTER.to_failure(_raise_and_catch(ValueError("bad value")))
    assert failure["message"] == "bad value"
    assert failure["applicationFailureInfo"] == {"type": "ValueError"}
    back = CONVERTER.from_failure(failure)
    assert isinstance(back, ApplicationError)
    assert back.type == "ValueError" and not back.non_retryable


def test_chained_activity_error_round_trip() -> None:
    app = ApplicationError("boom", type="Boom")
    act = ActivityError(
        "Activity task failed",
        scheduled_event_id=12,
        started_event_id=13,
        identity="worker-1",
        activity_type="charge",
        activity_id="3",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    act.__cause__ = app
    failure = CONVERTER.to_failure(act)
    assert failure["activityFailureInfo"] == {
        "scheduledEventId": "12",
        "startedEventId": "13",
        "identity": "worker-1",
        "activityType": {"name": "charge"},
        "activityId": "3",
        "retryState": "RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED",
    }
    assert failure["cause"]["applicationFailureInfo"] == {"type": "Boom"}
    back = CONVERTER.from_failure(failure)
    assert isinstance(back, ActivityError)
    assert (back.scheduled_event_id, back.started_event_id) == (12, 13)
    assert back.retry_state is RetryState.MAXIMUM_ATTEMPTS_REACHED
    assert isinstance(back.cause, ApplicationError) and back.cause.type == "Boom"


def test_implicit_context_becomes_cause() -> None:
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ApplicationError("wrapped") from None
    except ApplicationError as suppressed:
        assert "cause" not in CONVERTER.to_failure(suppressed)
    try:
        try:
            raise KeyError("k")
        except KeyError:
            raise ApplicationError("wrapped")  # noqa: B904 - testing the implicit context
    except ApplicationError as err:
        failure = CONVERTER.to_failure(err)
    assert failure["cause"]["applicationFailureInfo"] == {"type": "KeyError"}


def test_timeout_error_with_heartbeat_details_round_trip() -> None:
    err = TimeoutError(
        "activity Heartbeat timeout",
        type=TimeoutType.HEARTBEAT,
        last_heartbeat_details=[{"offset": 120}, "page-3"],
    )
    failure = CONVERTER.to_failure(err)
    assert failure["timeoutFailureInfo"]["timeoutType"] == "TIMEOUT_TYPE_HEARTBEAT"
    assert "lastHeartbeatDetails" in failure["timeoutFailureInfo"]
    back = CONVERTER.from_failure(failure)
    assert isinstance(back, TimeoutError)
    assert back.type is TimeoutType.HEARTBEAT
    assert back.last_heartbeat_details == ({"offset": 120}, "page-3")
    start_to_close = CONVERTER.to_failure(
        TimeoutError("t", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[])
    )
    assert start_to_close["timeoutFailureInfo"] == {"timeoutType": "TIMEOUT_TYPE_START_TO_CLOSE"}


def test_other_failure_kinds_round_trip() -> None:
    cancelled = CONVERTER.from_failure(CONVERTER.to_failure(CancelledError("stop", "why")))
    assert isinstance(cancelled, CancelledError) and cancelled.details == ("why",)
    terminated = CONVERTER.from_failure(CONVERTER.to_failure(TerminatedError("by admin")))
    assert isinstance(terminated, TerminatedError) and terminated.message == "by admin"
    server = CONVERTER.from_failure(CONVERTER.to_failure(ServerError("db", non_retryable=True)))
    assert isinstance(server, ServerError) and server.non_retryable
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
    child.__cause__ = CancelledError()
    failure = CONVERTER.to_failure(child)
    assert failure["childWorkflowExecutionFailureInfo"]["workflowExecution"] == {
        "workflowId": "child-1",
        "runId": "run-1",
    }
    back = CONVERTER.from_failure(failure)
    assert isinstance(back, ChildWorkflowError)
    assert (back.workflow_id, back.run_id, back.workflow_type) == ("child-1", "run-1", "Child")
    assert (back.initiated_event_id, back.started_event_id) == (5, 6)
    assert back.retry_state is RetryState.RETRY_POLICY_NOT_SET
    assert isinstance(back.cause, CancelledError)


def test_unknown_failure_kind_becomes_plain_failure_error() -> None:
    failure = {"message": "reset", "resetWorkflowFailureInfo": {}}
    err = FailureConverter().from_failure(failure, PayloadConverter())
    assert type(err) is FailureError
    assert err.message == "reset" and err.failure == failure


def test_unknown_failure_without_message_says_failure_error_as_temporalio() -> None:
    err = CONVERTER.from_failure({"resetWorkflowFailureInfo": {}})
    assert type(err) is FailureError and err.message == "Failure error"


def test_application_error_category_is_written_as_temporal_writes_it() -> None:
    benign = ApplicationError("expected", type="NotYet", category=ApplicationErrorCategory.BENIGN)
    failure = CONVERTER.to_failure(benign)
    assert failure == {
        "message": "expected",
        "applicationFailureInfo": {
            "type": "NotYet",
            "category": "APPLICATION_ERROR_CATEGORY_BENIGN",
        },
    }
    back = CONVERTER.from_failure(json.loads(json.dumps(failure)))
    assert isinstance(back, ApplicationError)
    assert back.category is ApplicationErrorCategory.BENIGN
    assert back.failure is not None
    assert back.failure.application_failure_info.category == ApplicationErrorCategory.BENIGN
    # Unspecified (the default) is left out, as proto JSON leaves out a zero enum.
    plain = CONVERTER.to_failure(ApplicationError("oops", type="T"))
    assert plain["applicationFailureInfo"] == {"type": "T"}
    unspecified = CONVERTER.from_failure(plain)
    assert isinstance(unspecified, ApplicationError)
    assert unspecified.category is ApplicationErrorCategory.UNSPECIFIED


@pytest.mark.parametrize(
    ("written", "category"),
    [
        ("APPLICATION_ERROR_CATEGORY_BENIGN", ApplicationErrorCategory.BENIGN),
        (1, ApplicationErrorCategory.BENIGN),  # parsers accept the number
        ("APPLICATION_ERROR_CATEGORY_UNSPECIFIED", ApplicationErrorCategory.UNSPECIFIED),
        ("APPLICATION_ERROR_CATEGORY_FROM_THE_FUTURE", ApplicationErrorCategory.UNSPECIFIED),
        (None, ApplicationErrorCategory.UNSPECIFIED),
    ],
)
def test_application_error_category_is_read(
    written: object, category: ApplicationErrorCategory
) -> None:
    info: dict[str, Any] = {"type": "T"}
    if written is not None:
        info["category"] = written
    err = CONVERTER.from_failure({"message": "m", "applicationFailureInfo": info})
    assert isinstance(err, ApplicationError)
    assert err.category is category


def test_application_failure_json_matches_temporalio_converter() -> None:
    import temporalio.converter
    import temporalio.exceptions
    from google.protobuf import json_format
    from temporalio.api.failure.v1 import Failure as ProtoFailure

    theirs = ProtoFailure()
    temporalio.converter.DefaultFailureConverter().to_failure(
        temporalio.exceptions.ApplicationError(
            "card declined",
            {"card": "x"},
            type="InvalidCard",
            non_retryable=True,
            next_retry_delay=timedelta(milliseconds=1500),
            category=temporalio.exceptions.ApplicationErrorCategory.BENIGN,
        ),
        temporalio.converter.PayloadConverter.default,
        theirs,
    )
    ours = CONVERTER.to_failure(
        ApplicationError(
            "card declined",
            {"card": "x"},
            type="InvalidCard",
            non_retryable=True,
            next_retry_delay=timedelta(milliseconds=1500),
            category=ApplicationErrorCategory.BENIGN,
        )
    )
    assert ours == json_format.MessageToDict(theirs)
    # And temporalio reads ours back to the same error.
    back = temporalio.converter.DefaultFailureConverter().from_failure(
        json_format.ParseDict(ours, ProtoFailure()), temporalio.converter.PayloadConverter.default
    )
    assert isinstance(back, temporalio.exceptions.ApplicationError)
    assert back.category == temporalio.exceptions.ApplicationErrorCategory.BENIGN
    assert (back.type, back.non_retryable, back.details) == ("InvalidCard", True, ({"card": "x"},))


# --------------------------------------------------------------------------
# codec
# --------------------------------------------------------------------------
class ZlibCodec(PayloadCodec):
    """Compresses each payload whole, as a test codec."""

    def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [
            Payload(
                metadata={"encoding": b"binary/zlib"},
                data=zlib.compress(json.dumps(p.to_json()).encode()),
            )
            for p in payloads
        ]

    def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [Payload.from_json(json.loads(zlib.decompress(p.data))) for p in payloads]


def test_codec_applies_to_payloads_and_failure_details() -> None:
    converter = DataConverter(payload_codec=ZlibCodec())
    payloads = converter.to_payloads([Item("secret-sku")])
    assert payloads[0].encoding == "binary/zlib"
    assert b"secret-sku" not in payloads[0].data
    assert converter.from_payloads(payloads, [Item]) == [Item("secret-sku")]
    assert converter.from_payload(converter.to_payload("x")) == "x"

    act = ActivityError(
        "Activity task failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="a",
        activity_id="1",
        retry_state=None,
    )
    act.__cause__ = ApplicationError("boom", {"card": "secret"}, type="T")
    failure = converter.to_failure(act)
    assert "secret" not in json.dumps(failure)
    back = converter.from_failure(failure)
    assert isinstance(back.cause, ApplicationError)
    assert back.cause.details == ({"card": "secret"},)
    # Re-raised, the decoded error is encoded again (not twice).
    assert converter.from_failure(converter.to_failure(back)).cause.details == (  # type: ignore[union-attr]
        {"card": "secret"},
    )


def test_default_converter() -> None:
    assert isinstance(DataConverter.default, DataConverter)
    assert DataConverter.default.payload_codec is None
    assert DataConverter.default.from_payloads(DataConverter.default.to_payloads([1, None])) == [
        1,
        None,
    ]


# --------------------------------------------------------------------------
# size limits
# --------------------------------------------------------------------------
def test_size_limits() -> None:
    assert MAX_PAYLOAD_BYTES == 2 * 1024 * 1024
    assert MAX_TRANSACTION_BYTES == 4 * 1024 * 1024
    small = CONVERTER.to_payloads(["x" * 1000])
    check_payloads_size(small, what="workflow input")
    big = CONVERTER.to_payloads(["x" * int(2.4 * 1024 * 1024)])
    with pytest.raises(PayloadSizeError) as info:
        check_payloads_size(big, what="workflow input")
    assert str(info.value) == (
        "workflow input is 2.4 MB; a single request may carry at most 2 MB. "
        "Store large data elsewhere and pass its key."
    )
    just_over = [Payload(metadata={}, data=b"x" * (MAX_PAYLOAD_BYTES + 1))]
    with pytest.raises(PayloadSizeError, match="2,097,153 bytes"):
        check_payloads_size(just_over, what="signal input")
    check_payloads_size(big, what="history transaction", limit=MAX_TRANSACTION_BYTES)


def test_modules_document_every_public_name() -> None:
    for module in (engine.common, engine.converter):
        assert module.__doc__ and "\n" not in module.__doc__.strip()
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj):
                assert obj.__doc__, f"{module.__name__}.{name}"
