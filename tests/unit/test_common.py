"""Unit tests for engine.common: proto-JSON durations and timestamps, RetryPolicy, enums."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.common import (
    ActivityCancellationType,
    RetryPolicy,
    WorkflowExecutionStatus,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
    duration_from_json,
    duration_to_json,
    timestamp_from_json,
    timestamp_to_json,
    to_timedelta,
)

# Real Temporal histories, copied into the repository (tests/data/temporal/README.md).
DATA = Path(__file__).resolve().parents[1] / "data" / "temporal"


def _walk(node: Any, key: str) -> list[Any]:
    found = []
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                found.append(v)
            found.extend(_walk(v, key))
    elif isinstance(node, list):
        for item in node:
            found.extend(_walk(item, key))
    return found


def _sample_values(key: str) -> list[Any]:
    values = []
    for path in sorted(DATA.glob("temporal_history_*.json")):
        values.extend(_walk(json.loads(path.read_text()), key))
    return values


# --------------------------------------------------------------------------
# durations
# --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(seconds=10), "10s"),
        (0.5, "0.500s"),
        (timedelta(milliseconds=100), "0.100s"),
        (100, "100s"),
        (0, "0s"),
        (None, "0s"),
        (timedelta(microseconds=1), "0.000001s"),
        (timedelta(seconds=1, microseconds=500), "1.000500s"),
        (1.5e-9 * 2, "0.000000003s"),
        (timedelta(days=30), "2592000s"),
        (-1.5, "-1.500s"),
    ],
)
def test_duration_to_json(value: Any, text: str) -> None:
    assert duration_to_json(value) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1.5s", timedelta(seconds=1.5)),
        ("10s", timedelta(seconds=10)),
        ("0.000001s", timedelta(microseconds=1)),
        ("0.500s", timedelta(milliseconds=500)),
        ("0s", timedelta(0)),
        ("0.000000400s", timedelta(0)),
        ("0.000000600s", timedelta(microseconds=1)),
        ("-2s", timedelta(seconds=-2)),
    ],
)
def test_duration_from_json(text: str, value: timedelta) -> None:
    assert duration_from_json(text) == value


@pytest.mark.parametrize("text", ["0.500s", "10s", "0.100s", "100s", "0s", "1.000001s", "86400s"])
def test_duration_round_trip(text: str) -> None:
    assert duration_to_json(duration_from_json(text)) == text


@pytest.mark.parametrize("bad", ["10", "1.5 s", "s", "1.1234567891s", "1m", "", "abc"])
def test_duration_from_json_rejects_and_names_value(bad: str) -> None:
    with pytest.raises(ValueError, match=repr(bad).replace(".", r"\.")):
        duration_from_json(bad)


def test_sample_durations_round_trip() -> None:
    keys = ["workflowTaskTimeout", "startToCloseTimeout", "startToFireTimeout", "heartbeatTimeout"]
    texts = [v for key in keys for v in _sample_values(key)]
    assert "0.500s" in texts
    for text in texts:
        assert duration_to_json(duration_from_json(text)) == text


def test_to_timedelta() -> None:
    assert to_timedelta(None) is None
    assert to_timedelta(1.5) == timedelta(seconds=1.5)
    assert to_timedelta(3) == timedelta(seconds=3)
    assert to_timedelta(timedelta(days=1)) == timedelta(days=1)
    with pytest.raises(TypeError, match="str"):
        to_timedelta("5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_timedelta(True)


# --------------------------------------------------------------------------
# timestamps
# --------------------------------------------------------------------------
def test_timestamp_with_nine_fractional_digits() -> None:
    seconds = timestamp_from_json("2026-11-30T09:28:10.339381087Z")
    expected = datetime(2026, 11, 30, 9, 28, 10, tzinfo=UTC).timestamp()
    assert seconds == pytest.approx(expected + 0.339381087, abs=1e-6)
    assert timestamp_to_json(seconds) == "2026-11-30T09:28:10.339381Z"


def test_timestamp_without_fraction_and_with_offset() -> None:
    expected = datetime(2026, 11, 30, 9, 28, 10, tzinfo=UTC).timestamp()
    assert timestamp_from_json("2026-11-30T09:28:10Z") == expected
    assert timestamp_from_json("2026-11-30T10:28:10+01:00") == expected
    assert timestamp_to_json(expected) == "2026-11-30T09:28:10Z"
    assert timestamp_to_json(expected + 0.5) == "2026-11-30T09:28:10.500Z"


def test_timestamp_round_trip_microseconds() -> None:
    text = "2026-11-30T09:28:10.339381Z"
    assert timestamp_to_json(timestamp_from_json(text)) == text


def test_sample_event_times_parse() -> None:
    times = [timestamp_from_json(t) for t in _sample_values("eventTime")]
    assert times and all(t > 1.7e9 for t in times)


@pytest.mark.parametrize("bad", ["2026-11-30 09:28:10", "2026-11-30T09:28:10", "yesterday", ""])
def test_timestamp_rejects_and_names_value(bad: str) -> None:
    with pytest.raises(ValueError, match="invalid timestamp"):
        timestamp_from_json(bad)


# --------------------------------------------------------------------------
# retry policy
# --------------------------------------------------------------------------
def test_retry_policy_defaults_match_temporal() -> None:
    policy = RetryPolicy()
    assert policy.initial_interval == timedelta(seconds=1)
    assert policy.backoff_coefficient == 2.0
    assert policy.maximum_interval is None
    assert policy.maximum_attempts == 0
    assert policy.non_retryable_error_types is None
    assert policy.effective_maximum_interval == timedelta(seconds=100)


def test_retry_policy_delays_double_up_to_cap() -> None:
    policy = RetryPolicy()
    delays = [policy.delay_for_attempt(n).total_seconds() for n in range(1, 10)]
    assert delays == [1, 2, 4, 8, 16, 32, 64, 100, 100]
    assert policy.delay_for_attempt(10_000) == timedelta(seconds=100)
    with pytest.raises(ValueError, match="attempt"):
        policy.delay_for_attempt(0)


def test_retry_policy_delay_with_explicit_maximum() -> None:
    policy = RetryPolicy(
        initial_interval=timedelta(milliseconds=100),
        backoff_coefficient=3.0,
        maximum_interval=timedelta(seconds=1),
    )
    delays = [policy.delay_for_attempt(n) for n in range(1, 5)]
    assert delays == [
        timedelta(milliseconds=100),
        timedelta(milliseconds=300),
        timedelta(milliseconds=900),
        timedelta(seconds=1),
    ]


def test_retry_policy_to_json_matches_samples() -> None:
    samples = _sample_values("retryPolicy")
    assert {
        "initialInterval": "1s",
        "backoffCoefficient": 2.0,
        "maximumInterval": "100s",
    } in samples
    assert RetryPolicy().to_json() == {
        "initialInterval": "1s",
        "backoffCoefficient": 2.0,
        "maximumInterval": "100s",
    }
    assert RetryPolicy(maximum_attempts=3).to_json() == {
        "initialInterval": "1s",
        "backoffCoefficient": 2.0,
        "maximumInterval": "100s",
        "maximumAttempts": 3,
    }
    # The server fills in 100 x initial interval as the maximum.
    fast = RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5)
    assert fast.to_json() == {
        "initialInterval": "0.100s",
        "backoffCoefficient": 2.0,
        "maximumInterval": "10s",
        "maximumAttempts": 5,
    }
    for sample in samples:
        assert RetryPolicy.from_json(sample).to_json() == sample
    assert fast.to_json() in samples
    assert RetryPolicy(maximum_attempts=3).to_json() in samples


def test_retry_policy_json_round_trip_and_missing_keys() -> None:
    policy = RetryPolicy(
        initial_interval=timedelta(seconds=2),
        backoff_coefficient=1.5,
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=4,
        non_retryable_error_types=["InvalidCard"],
    )
    data = policy.to_json()
    assert data["nonRetryableErrorTypes"] == ["InvalidCard"]
    assert RetryPolicy.from_json(data) == policy
    assert RetryPolicy.from_json({}) == RetryPolicy()
    assert "nonRetryableErrorTypes" not in RetryPolicy(non_retryable_error_types=[]).to_json()


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        (RetryPolicy(initial_interval=timedelta(0)), "initial_interval"),
        (RetryPolicy(backoff_coefficient=0.5), "backoff_coefficient"),
        (RetryPolicy(maximum_interval=timedelta(milliseconds=10)), "maximum_interval"),
        (RetryPolicy(maximum_attempts=-1), "maximum_attempts"),
    ],
)
def test_retry_policy_validate_names_field(policy: RetryPolicy, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        policy.validate()


def test_retry_policy_validate_accepts_defaults() -> None:
    RetryPolicy().validate()
    RetryPolicy(maximum_attempts=1, maximum_interval=timedelta(seconds=1)).validate()


def test_retry_policy_is_retryable() -> None:
    policy = RetryPolicy(non_retryable_error_types=["InvalidCard", "ValueError"])
    assert not policy.is_retryable("InvalidCard")
    assert not policy.is_retryable("ValueError")
    assert policy.is_retryable("Timeout")
    assert policy.is_retryable(None)
    assert RetryPolicy().is_retryable("Anything")


# --------------------------------------------------------------------------
# enums
# --------------------------------------------------------------------------
def test_enum_values_match_temporalio() -> None:
    assert [(m.name, m.value) for m in WorkflowIDReusePolicy] == [
        ("ALLOW_DUPLICATE", 1),
        ("ALLOW_DUPLICATE_FAILED_ONLY", 2),
        ("REJECT_DUPLICATE", 3),
        ("TERMINATE_IF_RUNNING", 4),
    ]
    assert [(m.name, m.value) for m in WorkflowIDConflictPolicy] == [
        ("UNSPECIFIED", 0),
        ("FAIL", 1),
        ("USE_EXISTING", 2),
        ("TERMINATE_EXISTING", 3),
    ]
    assert [(m.name, m.value) for m in WorkflowExecutionStatus] == [
        ("RUNNING", 1),
        ("COMPLETED", 2),
        ("FAILED", 3),
        ("CANCELED", 4),
        ("TERMINATED", 5),
        ("CONTINUED_AS_NEW", 6),
        ("TIMED_OUT", 7),
    ]
    assert [(m.name, m.value) for m in ActivityCancellationType] == [
        ("TRY_CANCEL", 0),
        ("WAIT_CANCELLATION_COMPLETED", 1),
        ("ABANDON", 2),
    ]


def test_duration_texts_are_remembered_per_type() -> None:
    from engine.common import duration_to_json

    big = 4_612_342_319  # large enough for the float to round differently from the int
    assert duration_to_json(float(big)) == duration_to_json(float(big))
    assert duration_to_json(big) == f"{big}s"
    assert duration_to_json(-0.0) == duration_to_json(0) == "0s"
    assert duration_to_json(1.5) == "1.500s" and duration_to_json(10) == "10s"
