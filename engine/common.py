"""Shared value types: retry policy, id/status enums, proto-JSON durations and timestamps."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import IntEnum
from typing import Any, ClassVar

from ._search_attribute_types import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributePair,
    SearchAttributes,
    SearchAttributeUpdate,
    SearchAttributeValue,
    SearchAttributeValues,
    SearchAttributeValueType,
    TypedSearchAttributes,
)
from .exceptions import QueryRejectCondition

__all__ = [
    "ActivityCancellationType",
    "Priority",
    "QueryRejectCondition",
    "RawValue",
    "RetryPolicy",
    "SearchAttributeIndexedValueType",
    "SearchAttributeKey",
    "SearchAttributePair",
    "SearchAttributeUpdate",
    "SearchAttributeValue",
    "SearchAttributeValueType",
    "SearchAttributeValues",
    "SearchAttributes",
    "TypedSearchAttributes",
    "WorkflowExecutionStatus",
    "WorkflowIDConflictPolicy",
    "WorkflowIDReusePolicy",
    "duration_from_json",
    "duration_to_json",
    "timestamp_from_json",
    "timestamp_to_json",
    "to_timedelta",
]

_NANOS_PER_SECOND = 1_000_000_000
_MAX_TIMEDELTA_SECONDS = timedelta.max.total_seconds()


# --------------------------------------------------------------------------
# durations and timestamps
# --------------------------------------------------------------------------
def to_timedelta(x: timedelta | float | int | None) -> timedelta | None:
    """Return ``x`` as a :class:`~datetime.timedelta`; numbers are seconds, ``None`` stays ``None``."""
    if x is None or isinstance(x, timedelta):
        return x
    # bool is an int subclass, but True seconds is surely a mistake.
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise TypeError(
            f"expected a timedelta or a number of seconds, got {type(x).__name__}: {x!r}"
        )
    if not math.isfinite(x):
        raise ValueError(f"a duration must be a finite number of seconds, got {x!r}")
    return timedelta(seconds=x)


def _to_nanos(value: timedelta | float | int) -> int:
    if isinstance(value, timedelta):
        # Exact integer arithmetic: total_seconds() would lose microseconds on long spans.
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        return micros * 1000
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"expected a timedelta or a number of seconds, got {type(value).__name__}: {value!r}"
        )
    if not math.isfinite(value):
        raise ValueError(f"a duration must be a finite number of seconds, got {value!r}")
    return round(value * _NANOS_PER_SECOND)


def _fraction_digits(nanos: int) -> str:
    # protobuf's JSON mapping writes 0, 3, 6 or 9 fractional digits, whichever is exact.
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1000 == 0:
        return f".{nanos // 1000:06d}"
    return f".{nanos:09d}"


def duration_to_json(value: timedelta | float | None) -> str:
    """Format a duration as protobuf JSON does: ``"10s"``, ``"0.500s"``, ``"0.000001s"``.

    ``None`` (no duration) is written as ``"0s"``, which is what Temporal records for an
    unset timeout. Numbers are seconds.
    """
    if value is None:
        return "0s"
    # The same few timeouts are written for every activity and task: remember them.
    kind = type(value)
    if isinstance(value, float | int) and (kind is float or kind is int):
        key = (kind, value)  # 10 and 10.0 may format apart (a float's rounding)
        text = _DURATION_TEXT.get(key)
        if text is None:
            text = _duration_text(value)
            if len(_DURATION_TEXT) < 4096:
                _DURATION_TEXT[key] = text
        return text
    return _duration_text(value)


_DURATION_TEXT: dict[tuple[type, float], str] = {}


def _duration_text(value: timedelta | float) -> str:
    nanos = _to_nanos(value)
    sign = "-" if nanos < 0 else ""
    seconds, frac = divmod(abs(nanos), _NANOS_PER_SECOND)
    return f"{sign}{seconds}{_fraction_digits(frac)}s"


_DURATION_RE = re.compile(r"(-)?(\d+)(?:\.(\d{1,9}))?s")


def duration_from_json(s: str) -> timedelta:
    """Parse a protobuf JSON duration such as ``"1.5s"``, ``"10s"`` or ``"0.000001s"``.

    Nanoseconds beyond microsecond precision are rounded (``timedelta`` holds microseconds).
    Raises :class:`ValueError` naming the bad value.
    """
    match = _DURATION_RE.fullmatch(s) if isinstance(s, str) else None
    if match is None:
        raise ValueError(
            f"invalid duration {s!r}: expected seconds with up to 9 fractional digits "
            'and an "s" suffix, such as "10s" or "0.500s"'
        )
    sign, whole, frac = match.groups()
    nanos = int(whole) * _NANOS_PER_SECOND + int((frac or "").ljust(9, "0"))
    if sign:
        nanos = -nanos
    # Round half to even at the microsecond, in integers so long spans stay exact.
    micros, rest = divmod(nanos, 1000)
    if rest > 500 or (rest == 500 and micros % 2):
        micros += 1
    return timedelta(microseconds=micros)


def timestamp_to_json(epoch_seconds: float) -> str:
    """Format seconds since the Unix epoch as an RFC 3339 UTC timestamp ending in ``"Z"``.

    Example: ``"2026-11-30T09:28:10.339381Z"``. Precision is the microsecond; the fraction
    has 0, 3 or 6 digits, as protobuf's JSON mapping writes it.
    """
    micros = round(epoch_seconds * 1_000_000)
    seconds, frac_micros = divmod(micros, 1_000_000)
    moment = datetime.fromtimestamp(seconds, tz=UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}{_fraction_digits(frac_micros * 1000)}Z"


_TIMESTAMP_RE = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-]\d{2}:\d{2}))"
)


def timestamp_from_json(s: str) -> float:
    """Parse an RFC 3339 timestamp (``"...Z"`` or with an offset) into seconds since the epoch.

    Accepts no fraction or up to 9 fractional digits, such as Temporal's
    ``"2026-11-30T09:28:10.339381087Z"``. Raises :class:`ValueError` naming the bad value.
    """
    match = _TIMESTAMP_RE.fullmatch(s) if isinstance(s, str) else None
    if match is None:
        raise ValueError(
            f"invalid timestamp {s!r}: expected RFC 3339 such as '2026-11-30T09:28:10.339381Z'"
        )
    day, clock, frac, _zulu, offset = match.groups()
    try:
        whole = datetime.fromisoformat(f"{day}T{clock}{offset or '+00:00'}")
    except ValueError as err:
        raise ValueError(f"invalid timestamp {s!r}: {err}") from err
    # Integer seconds plus the fraction as written keeps nanosecond digits out of float noise.
    return int(whole.timestamp()) + int((frac or "0").ljust(9, "0")) / _NANOS_PER_SECOND


# --------------------------------------------------------------------------
# priority
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Priority:
    """Task priority as ``temporalio.common.Priority`` has it: ``priority_key`` (1 is the
    highest; Temporal's default is 3), ``fairness_key`` and ``fairness_weight``. Accepted
    and reported (``activity.info().priority``); this engine's queues do not reorder by it."""

    priority_key: int | None = None
    fairness_key: str | None = None
    fairness_weight: float | None = None

    default: ClassVar[Priority]


Priority.default = Priority()


# --------------------------------------------------------------------------
# raw values
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class RawValue:
    """A value left encoded: the payload as it came (``temporalio.common.RawValue``).

    Dynamic workflows, activities and message handlers get their arguments as raw values;
    decode one with ``workflow.payload_converter().from_payload(raw.payload, SomeType)``
    (``activity.payload_converter()`` in an activity). Returned or passed as an argument,
    a raw value is written as its payload, unchanged. ``payload`` is an
    :class:`engine.converter.Payload` (typed loosely here: this module sits below the
    converter)."""

    payload: Any


# --------------------------------------------------------------------------
# retry policy
# --------------------------------------------------------------------------
@dataclass
class RetryPolicy:
    """How an activity (or a workflow, when given one) is retried after a failure.

    Defaults are Temporal's: first retry after 1 s, each later delay doubled, delays capped
    at 100 x ``initial_interval``, unlimited attempts.
    """

    initial_interval: timedelta = timedelta(seconds=1)
    """Delay before the first retry."""

    backoff_coefficient: float = 2.0
    """Factor by which each delay grows over the previous one."""

    maximum_interval: timedelta | None = None
    """Longest delay between attempts; ``None`` means 100 x ``initial_interval``."""

    maximum_attempts: int = 0
    """Most attempts in all, the first included: 0 is unlimited, 1 means no retry."""

    non_retryable_error_types: Sequence[str] | None = None
    """Application error types (``ApplicationError.type`` or exception class names) that are
    never retried."""

    @property
    def effective_maximum_interval(self) -> timedelta:
        """The delay cap in force: ``maximum_interval``, or 100 x ``initial_interval``."""
        if self.maximum_interval is not None:
            return self.maximum_interval
        return self.initial_interval * 100

    def validate(self) -> None:
        """Raise :class:`ValueError` naming the first field whose value is not allowed."""
        if self.initial_interval <= timedelta(0):
            raise ValueError(
                f"RetryPolicy.initial_interval must be greater than zero, got {self.initial_interval!r}"
            )
        if not self.backoff_coefficient >= 1.0:
            raise ValueError(
                "RetryPolicy.backoff_coefficient must be at least 1.0, "
                f"got {self.backoff_coefficient!r}"
            )
        if self.maximum_interval is not None and self.maximum_interval < self.initial_interval:
            raise ValueError(
                "RetryPolicy.maximum_interval must be at least initial_interval "
                f"({self.initial_interval!r}), got {self.maximum_interval!r}"
            )
        if self.maximum_attempts < 0:
            raise ValueError(
                "RetryPolicy.maximum_attempts must be 0 (unlimited) or more, "
                f"got {self.maximum_attempts!r}"
            )

    def to_json(self) -> dict[str, Any]:
        """Return the policy in Temporal's JSON form, as recorded in a history's ``retryPolicy``.

        ``maximumInterval`` is always written with its effective value (as the Temporal
        server fills it in); ``maximumAttempts`` is omitted when 0, and
        ``nonRetryableErrorTypes`` when empty.
        """
        out: dict[str, Any] = {
            "initialInterval": duration_to_json(self.initial_interval),
            "backoffCoefficient": float(self.backoff_coefficient),
            "maximumInterval": duration_to_json(self.effective_maximum_interval),
        }
        if self.maximum_attempts:
            out["maximumAttempts"] = self.maximum_attempts
        if self.non_retryable_error_types:
            out["nonRetryableErrorTypes"] = list(self.non_retryable_error_types)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RetryPolicy:
        """Build a policy from Temporal's JSON form; missing keys take their defaults."""
        if not isinstance(d, Mapping):
            raise ValueError(f"retryPolicy must be a JSON object, got {type(d).__name__}")
        policy = cls()
        if d.get("initialInterval") is not None:
            policy.initial_interval = duration_from_json(d["initialInterval"])
        if d.get("backoffCoefficient") is not None:
            policy.backoff_coefficient = float(d["backoffCoefficient"])
        if d.get("maximumInterval") is not None:
            policy.maximum_interval = duration_from_json(d["maximumInterval"])
        if d.get("maximumAttempts") is not None:
            policy.maximum_attempts = int(d["maximumAttempts"])
        types = d.get("nonRetryableErrorTypes")
        if types:
            policy.non_retryable_error_types = [str(t) for t in types]
        return policy

    def delay_for_attempt(self, attempt: int) -> timedelta:
        """Return the backoff after failed attempt ``attempt`` (1-based).

        Attempt 1 waits ``initial_interval``, attempt 2 ``initial_interval x
        backoff_coefficient``, and so on, never more than the effective maximum interval.
        """
        if attempt < 1:
            raise ValueError(f"attempt must be 1 or more, got {attempt!r}")
        cap = self.effective_maximum_interval
        try:
            seconds = self.initial_interval.total_seconds() * self.backoff_coefficient ** (
                attempt - 1
            )
        except OverflowError:
            return cap
        if not seconds < min(cap.total_seconds(), _MAX_TIMEDELTA_SECONDS):
            return cap
        return min(timedelta(seconds=seconds), cap)

    def is_retryable(self, error_type: str | None) -> bool:
        """Whether a failure of type ``error_type`` may be retried under this policy.

        Only the type list is consulted; attempts and an error's own ``non_retryable`` flag
        are the caller's to check.
        """
        if error_type is None or not self.non_retryable_error_types:
            return True
        return error_type not in self.non_retryable_error_types


# --------------------------------------------------------------------------
# enums (names and values as in temporalio)
# --------------------------------------------------------------------------
class WorkflowIDReusePolicy(IntEnum):
    """Whether a workflow id may be used again once its previous run has closed."""

    ALLOW_DUPLICATE = 1
    """Any closed run's id may be reused (the default)."""
    ALLOW_DUPLICATE_FAILED_ONLY = 2
    """Reuse only if the last run failed, was cancelled, terminated or timed out."""
    REJECT_DUPLICATE = 3
    """Never reuse the id while the closed run is retained."""
    TERMINATE_IF_RUNNING = 4
    """Terminate a running run with this id and start anew (prefer the conflict policy)."""


class WorkflowIDConflictPolicy(IntEnum):
    """What starting a workflow does when a run with the same id is still open."""

    UNSPECIFIED = 0
    """Not set: behaves as ``FAIL``."""
    FAIL = 1
    """Refuse the start with ``WorkflowAlreadyStartedError``."""
    USE_EXISTING = 2
    """Return a handle to the running run instead of starting a new one."""
    TERMINATE_EXISTING = 3
    """Terminate the running run, then start a new one."""


class WorkflowExecutionStatus(IntEnum):
    """Status of a workflow run."""

    RUNNING = 1
    """Open."""
    COMPLETED = 2
    """Returned a result."""
    FAILED = 3
    """Raised a failure."""
    CANCELED = 4
    """Cancelled on request."""
    TERMINATED = 5
    """Stopped by terminate, without running any more workflow code."""
    CONTINUED_AS_NEW = 6
    """Closed, handing over to a new run with the same id."""
    TIMED_OUT = 7
    """Exceeded its execution or run timeout."""


class ActivityCancellationType(IntEnum):
    """How a workflow waits when it cancels an activity."""

    TRY_CANCEL = 0
    """Request cancellation and resolve at once as cancelled (the default)."""
    WAIT_CANCELLATION_COMPLETED = 1
    """Request cancellation and wait until the activity acknowledges it."""
    ABANDON = 2
    """Do not request cancellation; resolve at once as cancelled."""


class ParentClosePolicy(IntEnum):
    """What happens to a child workflow when its parent closes (temporalio's values)."""

    UNSPECIFIED = 0
    TERMINATE = 1
    ABANDON = 2
    REQUEST_CANCEL = 3


class ChildWorkflowCancellationType(IntEnum):
    """How cancelling a child from its parent waits (temporalio's values)."""

    ABANDON = 0
    TRY_CANCEL = 1
    WAIT_CANCELLATION_COMPLETED = 2
    WAIT_CANCELLATION_REQUESTED = 3


_BINARY_NULL = "YmluYXJ5L251bGw="  # base64 of binary/null
_JSON_PLAIN = "anNvbi9wbGFpbg=="  # base64 of json/plain
_EMPTY_LIST = "W10="  # base64 of []


def removes_memo_field(payload: Mapping[str, Any]) -> bool:
    """Whether an upserted memo field's payload (Temporal's JSON) removes the field, as
    Temporal's server reads it: a ``binary/null`` payload (None) or a ``json/plain``
    empty list."""
    encoding = (payload.get("metadata") or {}).get("encoding")
    data = payload.get("data") or ""
    return (encoding == _BINARY_NULL and not data) or (
        encoding == _JSON_PLAIN and data == _EMPTY_LIST
    )
