"""Temporal's Failure, read: the enums failures carry (re-exported by
:mod:`engine.exceptions`) and :class:`Failure`, a read-only view over Failure JSON with the
field names of Temporal's protobuf message (``err.failure.application_failure_info.type``).
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from enum import IntEnum
from typing import Any, ClassVar, Generic, TypeVar, overload


class TimeoutType(IntEnum):
    """Which timeout fired (values as in Temporal's ``TimeoutType`` enum)."""

    START_TO_CLOSE = 1
    """An attempt ran longer than its start-to-close timeout."""
    SCHEDULE_TO_START = 2
    """A task waited in its queue longer than its schedule-to-start timeout."""
    SCHEDULE_TO_CLOSE = 3
    """All attempts together took longer than the schedule-to-close timeout."""
    HEARTBEAT = 4
    """An activity did not heartbeat within its heartbeat timeout."""


class RetryState(IntEnum):
    """Where the retries of an activity or child workflow stood when it failed."""

    UNSPECIFIED = 0
    """Not reported."""
    IN_PROGRESS = 1
    """More attempts will follow."""
    NON_RETRYABLE_FAILURE = 2
    """The failure was non-retryable (by its flag or by the policy's type list)."""
    TIMEOUT = 3
    """A timeout ended the retries."""
    MAXIMUM_ATTEMPTS_REACHED = 4
    """The policy's ``maximum_attempts`` were used up."""
    RETRY_POLICY_NOT_SET = 5
    """There was no retry policy (the default for workflows)."""
    INTERNAL_SERVER_ERROR = 6
    """The service failed while deciding."""
    CANCEL_REQUESTED = 7
    """Cancellation was requested."""


class ApplicationErrorCategory(IntEnum):
    """Severity category of an :class:`ApplicationError` (values as in Temporal's enum).

    Temporal workers log ``BENIGN`` failures at DEBUG level and leave them out of metrics.
    """

    UNSPECIFIED = 0
    """No category (the default)."""
    BENIGN = 1
    """An expected failure: logged at DEBUG level and not recorded in metrics."""


class QueryRejectCondition(IntEnum):
    """When a query is rejected instead of answered (values as in Temporal's enum).

    A rejected query raises :class:`WorkflowQueryRejectedError`.
    """

    NONE = 1
    """Never reject: answer the query whatever state the run is in."""
    NOT_OPEN = 2
    """Reject the query if the run is closed."""
    NOT_COMPLETED_CLEANLY = 3
    """Reject the query if the run closed other than by completing (failed, cancelled,
    terminated, timed out, ...)."""


# --------------------------------------------------------------------------
# Failure: read-only protobuf-style views over Failure JSON
# --------------------------------------------------------------------------
_T = TypeVar("_T")
_V = TypeVar("_V", bound="_ProtoView")


class _Field(Generic[_T]):
    """A read-only protobuf field of a view: the JSON key ``json_name``, decoded by ``read``
    (which is given ``None`` for a missing key and returns protobuf's default for it)."""

    __slots__ = ("json_name", "message", "name", "read")

    def __init__(self, json_name: str, read: Callable[[Any], _T], *, message: bool = False) -> None:
        self.json_name = json_name
        self.read = read
        self.message = message  # a sub-message: has presence (``HasField``)
        self.name = json_name

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Field[_T]: ...

    @overload
    def __get__(self, obj: _ProtoView, owner: type | None = None) -> _T: ...

    def __get__(self, obj: _ProtoView | None, owner: type | None = None) -> _Field[_T] | _T:
        if obj is None:
            return self
        try:
            return self.read(obj._json.get(self.json_name))
        except ValueError as err:
            raise ValueError(f"{type(obj).__name__}.{self.name}: {err}") from None

    def __set__(self, obj: _ProtoView, value: Any) -> None:
        raise AttributeError(
            f"{type(obj).__name__}.{self.name} is read-only: a failure view shows the JSON it "
            "was decoded from (build a new error to change it)"
        )


class _ProtoView(Mapping[str, Any]):
    """Base of the views: protobuf field names as attributes, JSON names as keys.

    Attribute access (``view.stack_trace``) decodes a field as protobuf's Python classes
    do, a missing field giving its default (``""``, ``0``, ``False``, an empty view).
    Item access (``view["stackTrace"]``, ``.get``, ``in``, iteration) is the raw JSON.
    Like a protobuf message, a view is always true, even when empty.
    """

    __slots__ = ("_json",)

    _fields: ClassVar[dict[str, _Field[Any]]] = {}
    _oneofs: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = {name: f for name, f in vars(cls).items() if isinstance(f, _Field)}
        cls._fields = {**cls._fields, **own}

    def __init__(self, json: Mapping[str, Any] | None = None) -> None:
        """View the JSON object ``json`` (not copied); ``None`` views an empty message."""
        if json is not None and not isinstance(json, Mapping):
            raise TypeError(
                f"a {type(self).__name__} views a JSON object, got {type(json).__name__}"
            )
        self._json: Mapping[str, Any] = {} if json is None else json

    def __getitem__(self, key: str) -> Any:
        return self._json[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._json)

    def __len__(self) -> int:
        return len(self._json)

    def __bool__(self) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _ProtoView):
            return type(other) is type(self) and dict(self._json) == dict(other._json)
        if isinstance(other, Mapping):
            return dict(self._json) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable JSON underneath, as a message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict(self._json)!r})"

    def to_json(self) -> dict[str, Any]:
        """A deep copy of the JSON this view shows (Temporal's JSON form of the message)."""
        return copy.deepcopy(dict(self._json))

    def HasField(self, field_name: str) -> bool:
        """Whether a sub-message field (or a oneof) is set, as protobuf's ``HasField``."""
        if field_name in self._oneofs:
            return self.WhichOneof(field_name) is not None
        found = self._fields.get(field_name)
        if found is None:
            raise ValueError(f'Protocol message {type(self).__name__} has no "{field_name}" field.')
        if not found.message:
            raise ValueError(f"Field {type(self).__name__}.{field_name} does not have presence.")
        return self._json.get(found.json_name) is not None

    def WhichOneof(self, oneof_group: str) -> str | None:
        """The name of the field of ``oneof_group`` that is set, or ``None``."""
        members = self._oneofs.get(oneof_group)
        if members is None:
            raise ValueError(
                f'Protocol message {type(self).__name__} has no "{oneof_group}" field.'
            )
        for name in members:
            if self._json.get(self._fields[name].json_name) is not None:
                return name
        return None


def _read_str(value: Any) -> str:
    return "" if value is None else str(value)


def _read_bool(value: Any) -> bool:
    return value is True or value == "true"


def _read_int(value: Any) -> int:
    # int64 fields are strings in proto JSON; parsers accept numbers too.
    if value is None or value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"expected an integer, got {value!r}") from None


def _read_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if not isinstance(value, str):
        raise ValueError(f"expected a base64 string, got {type(value).__name__}")
    # protobuf's JSON parser accepts the URL-safe alphabet and missing padding too.
    text = value.strip().replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except binascii.Error:
        raise ValueError(f"not valid base64: {value[:40]!r}") from None


def _string(json_name: str) -> _Field[str]:
    return _Field(json_name, _read_str)


def _boolean(json_name: str) -> _Field[bool]:
    return _Field(json_name, _read_bool)


def _int64(json_name: str) -> _Field[int]:
    return _Field(json_name, _read_int)


def _bytes(json_name: str) -> _Field[bytes]:
    return _Field(json_name, _read_bytes)


def _enum(json_name: str, cls: type[IntEnum], prefix: str) -> _Field[int]:
    """An enum field: proto JSON writes the value's name (``"TIMEOUT_TYPE_HEARTBEAT"``),
    parsers accept its number. Reads as ``cls``'s member where there is one (an ``int``
    either way, as protobuf's enum fields are); unset or unknown names read as ``0``."""

    def read(value: Any) -> int:
        number = 0
        if isinstance(value, str):
            member = cls.__members__.get(value.removeprefix(prefix))
            if member is None:
                return 0
            number = member.value
        elif isinstance(value, int) and not isinstance(value, bool):
            number = value
        try:
            return cls(number)
        except ValueError:
            return number

    return _Field(json_name, read)


def _message(json_name: str, cls: Callable[[], type[_V]]) -> _Field[_V]:
    # ``cls`` is called on access, so that a message can hold its own type (Failure.cause).
    return _Field(
        json_name, lambda value: cls()(value if isinstance(value, Mapping) else None), message=True
    )


class Duration:
    """Read-only view of a ``google.protobuf.Duration`` (JSON ``"1.500s"``)."""

    __slots__ = ("_json",)

    _PATTERN: ClassVar[re.Pattern[str]] = re.compile(r"(-)?(\d+)(?:\.(\d{1,9}))?s")

    def __init__(self, json: str | None = None) -> None:
        """View the JSON duration ``json``; ``None`` is the zero duration."""
        self._json = json

    def _parts(self) -> tuple[int, int]:
        if self._json is None:
            return 0, 0
        match = self._PATTERN.fullmatch(self._json) if isinstance(self._json, str) else None
        if match is None:
            raise ValueError(f'invalid duration {self._json!r}: expected a form like "1.500s"')
        sign = -1 if match.group(1) else 1
        nanos = int((match.group(3) or "").ljust(9, "0"))
        return sign * int(match.group(2)), sign * nanos

    @property
    def seconds(self) -> int:
        """Whole seconds (negative for a negative duration)."""
        return self._parts()[0]

    @property
    def nanos(self) -> int:
        """Nanoseconds beyond ``seconds``, with the same sign."""
        return self._parts()[1]

    def ToTimedelta(self) -> timedelta:
        """The duration as a ``timedelta`` (nanoseconds truncated to microseconds)."""
        seconds, nanos = self._parts()
        return timedelta(seconds=seconds, microseconds=int(nanos / 1000))

    def ToJsonString(self) -> str:
        """The JSON form, such as ``"1.500s"`` (``"0s"`` when unset)."""
        return "0s" if self._json is None else str(self._json)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self._parts() == other._parts()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Duration({self._json!r})"


def _duration(json_name: str) -> _Field[Duration]:
    return _Field(json_name, Duration, message=True)


class Payload(_ProtoView):
    """Read-only view of a ``temporal.api.common.v1.Payload`` in its JSON form.

    ``metadata`` and ``data`` are the decoded bytes; being a mapping over the JSON, the view
    can be given to ``engine.converter.Payload.from_json`` or ``DataConverter.from_payloads_json``.
    """

    __slots__ = ()

    data = _bytes("data")
    """The encoded value."""

    @property
    def metadata(self) -> dict[str, bytes]:
        """Metadata entries (``"encoding"`` above all), values decoded from base64."""
        raw = self._json.get("metadata")
        if not isinstance(raw, Mapping):
            return {}
        try:
            return {str(k): _read_bytes(v) for k, v in raw.items()}
        except ValueError as err:
            raise ValueError(f"Payload.metadata: {err}") from None


class Payloads(_ProtoView):
    """Read-only view of a ``temporal.api.common.v1.Payloads``."""

    __slots__ = ()

    @property
    def payloads(self) -> list[Payload]:
        """The payloads, in order."""
        raw = self._json.get("payloads")
        if not isinstance(raw, list):
            return []
        return [Payload(item if isinstance(item, Mapping) else None) for item in raw]


def _payload(json_name: str) -> _Field[Payload]:
    return _message(json_name, lambda: Payload)


def _payloads(json_name: str) -> _Field[Payloads]:
    return _message(json_name, lambda: Payloads)


class ActivityType(_ProtoView):
    """Read-only view of a ``temporal.api.common.v1.ActivityType``."""

    __slots__ = ()
    name = _string("name")


class WorkflowType(_ProtoView):
    """Read-only view of a ``temporal.api.common.v1.WorkflowType``."""

    __slots__ = ()
    name = _string("name")


class WorkflowExecution(_ProtoView):
    """Read-only view of a ``temporal.api.common.v1.WorkflowExecution``."""

    __slots__ = ()
    workflow_id = _string("workflowId")
    run_id = _string("runId")


class ApplicationFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.ApplicationFailureInfo``."""

    __slots__ = ()
    type = _string("type")
    non_retryable = _boolean("nonRetryable")
    details = _payloads("details")
    next_retry_delay = _duration("nextRetryDelay")
    category = _enum("category", ApplicationErrorCategory, "APPLICATION_ERROR_CATEGORY_")


class TimeoutFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.TimeoutFailureInfo``."""

    __slots__ = ()
    timeout_type = _enum("timeoutType", TimeoutType, "TIMEOUT_TYPE_")
    last_heartbeat_details = _payloads("lastHeartbeatDetails")


class CanceledFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.CanceledFailureInfo``."""

    __slots__ = ()
    details = _payloads("details")
    identity = _string("identity")


class TerminatedFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.TerminatedFailureInfo``."""

    __slots__ = ()
    identity = _string("identity")


class ServerFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.ServerFailureInfo``."""

    __slots__ = ()
    non_retryable = _boolean("nonRetryable")


class ResetWorkflowFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.ResetWorkflowFailureInfo``."""

    __slots__ = ()
    last_heartbeat_details = _payloads("lastHeartbeatDetails")


class ActivityFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.ActivityFailureInfo``."""

    __slots__ = ()
    scheduled_event_id = _int64("scheduledEventId")
    started_event_id = _int64("startedEventId")
    identity = _string("identity")
    activity_type = _message("activityType", lambda: ActivityType)
    activity_id = _string("activityId")
    retry_state = _enum("retryState", RetryState, "RETRY_STATE_")


class ChildWorkflowExecutionFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.ChildWorkflowExecutionFailureInfo``."""

    __slots__ = ()
    namespace = _string("namespace")
    workflow_execution = _message("workflowExecution", lambda: WorkflowExecution)
    workflow_type = _message("workflowType", lambda: WorkflowType)
    initiated_event_id = _int64("initiatedEventId")
    started_event_id = _int64("startedEventId")
    retry_state = _enum("retryState", RetryState, "RETRY_STATE_")


class NexusOperationFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.NexusOperationFailureInfo``."""

    __slots__ = ()
    scheduled_event_id = _int64("scheduledEventId")
    endpoint = _string("endpoint")
    service = _string("service")
    operation = _string("operation")
    operation_id = _string("operationId")
    operation_token = _string("operationToken")


class _NexusHandlerErrorRetryBehavior(IntEnum):
    UNSPECIFIED = 0
    RETRYABLE = 1
    NON_RETRYABLE = 2


class NexusHandlerFailureInfo(_ProtoView):
    """Read-only view of a ``temporal.api.failure.v1.NexusHandlerFailureInfo``."""

    __slots__ = ()
    type = _string("type")
    retry_behavior = _enum(
        "retryBehavior", _NexusHandlerErrorRetryBehavior, "NEXUS_HANDLER_ERROR_RETRY_BEHAVIOR_"
    )


class Failure(_ProtoView):
    """Read-only view of Temporal's Failure JSON, with the fields of temporalio's
    ``temporalio.api.failure.v1.Failure``: what :attr:`FailureError.failure` is.

    ``failure.message``, ``failure.stack_trace``, ``failure.cause.message``,
    ``failure.application_failure_info.type``, ... read as the protobuf message's fields
    do: a missing field gives its default (``""``, ``0``, ``False``, an empty view), enums
    read as ints (members of :class:`TimeoutType`, :class:`RetryState`, ...), int64 ids
    as ints, payloads as :class:`Payloads` views. ``HasField`` and ``WhichOneof`` work as
    on a message. Item access gives the JSON itself (``failure["stackTrace"]``), and
    :meth:`to_json` a copy of it; the view compares equal to the JSON it shows.
    """

    __slots__ = ()
    message = _string("message")
    source = _string("source")
    stack_trace = _string("stackTrace")
    encoded_attributes = _payload("encodedAttributes")
    cause = _message("cause", lambda: Failure)
    application_failure_info = _message("applicationFailureInfo", lambda: ApplicationFailureInfo)
    timeout_failure_info = _message("timeoutFailureInfo", lambda: TimeoutFailureInfo)
    canceled_failure_info = _message("canceledFailureInfo", lambda: CanceledFailureInfo)
    terminated_failure_info = _message("terminatedFailureInfo", lambda: TerminatedFailureInfo)
    server_failure_info = _message("serverFailureInfo", lambda: ServerFailureInfo)
    reset_workflow_failure_info = _message(
        "resetWorkflowFailureInfo", lambda: ResetWorkflowFailureInfo
    )
    activity_failure_info = _message("activityFailureInfo", lambda: ActivityFailureInfo)
    child_workflow_execution_failure_info = _message(
        "childWorkflowExecutionFailureInfo", lambda: ChildWorkflowExecutionFailureInfo
    )
    nexus_operation_execution_failure_info = _message(
        "nexusOperationExecutionFailureInfo", lambda: NexusOperationFailureInfo
    )
    nexus_handler_failure_info = _message(
        "nexusHandlerFailureInfo", lambda: NexusHandlerFailureInfo
    )

    _oneofs: ClassVar[dict[str, tuple[str, ...]]] = {
        "failure_info": (
            "application_failure_info",
            "timeout_failure_info",
            "canceled_failure_info",
            "terminated_failure_info",
            "server_failure_info",
            "reset_workflow_failure_info",
            "activity_failure_info",
            "child_workflow_execution_failure_info",
            "nexus_operation_execution_failure_info",
            "nexus_handler_failure_info",
        )
    }


def _as_failure(failure: Any) -> Failure | None:
    """``failure`` as a :class:`Failure` view: given one, Failure JSON, or a protobuf
    ``temporalio.api.failure.v1.Failure`` (converted to its JSON)."""
    if failure is None or isinstance(failure, Failure):
        return failure
    if isinstance(failure, Mapping):
        return Failure(failure)
    descriptor = getattr(failure, "DESCRIPTOR", None)
    if getattr(descriptor, "full_name", None) == "temporal.api.failure.v1.Failure":
        from google.protobuf import json_format  # only there if temporalio is

        return Failure(json_format.MessageToDict(failure))
    raise TypeError(
        f"failure must be Failure JSON (a mapping) or a Failure, got {type(failure).__name__}"
    )


class RPCStatusCode(IntEnum):
    """The status of a refused request: gRPC's codes, as ``temporalio.service.RPCStatusCode``
    (this engine has no gRPC; the codes say the same things)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16
