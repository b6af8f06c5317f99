"""Data conversion: Python values to payloads and back, exceptions to Temporal Failure JSON and back."""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections.abc
import copy
import dataclasses
import enum
import json
import traceback
import types
import typing
import uuid
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, ClassVar, TypeVar

from ._json import compact_dumps
from ._payload_size import (
    MAX_PAYLOAD_BYTES,
    MAX_TRANSACTION_BYTES,
    check_payloads_size,
)
from .common import RawValue, duration_from_json, duration_to_json
from .exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    InvalidArgumentError,
    RetryState,
    ServerError,
    TerminatedError,
    TimeoutError,
    TimeoutType,
)

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "MAX_TRANSACTION_BYTES",
    "DataConverter",
    "FailureConverter",
    "Payload",
    "PayloadCodec",
    "PayloadConverter",
    "check_payloads_size",
    "payloads_from_json",
    "payloads_to_json",
]


_ENCODING_NULL = "binary/null"
_ENCODING_BINARY = "binary/plain"
_ENCODING_JSON = "json/plain"


# --------------------------------------------------------------------------
# payloads
# --------------------------------------------------------------------------
def _b64encode(raw: bytes) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


_SHORT_DECODED: dict[str, bytes] = {}  # metadata values ("json/plain", ...) repeat endlessly


def _b64decode(value: Any, where: str) -> bytes:
    if isinstance(value, str):
        if len(value) <= 32:
            known = _SHORT_DECODED.get(value)
            if known is not None:
                return known
        try:
            raw = binascii.a2b_base64(value, strict_mode=True)  # the common, canonical case
        except (binascii.Error, ValueError):
            pass
        else:
            if len(value) <= 32 and len(_SHORT_DECODED) < 1024:
                _SHORT_DECODED[value] = raw
            return raw
    if not isinstance(value, str):
        raise ValueError(
            f"payload field {where!r} must be a base64 string, got {type(value).__name__}"
        )
    # protobuf's JSON parsers accept the URL-safe alphabet and missing padding; so do we.
    text = value.strip().replace("-", "+").replace("_", "/")
    text += "=" * (-len(text) % 4)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"payload field {where!r} is not valid base64: {value[:40]!r}") from err


@dataclass
class Payload:
    """One encoded value: metadata (``encoding`` above all) and the encoded bytes."""

    metadata: dict[str, bytes]
    """Metadata entries; ``"encoding"`` names how ``data`` was written (``b"json/plain"``)."""

    data: bytes = b""
    """The encoded value."""

    @property
    def encoding(self) -> str:
        """The ``encoding`` metadata entry as text, or ``""`` if missing."""
        return self.metadata.get("encoding", b"").decode("utf-8", "replace")

    @property
    def size(self) -> int:
        """Bytes this payload occupies: its data plus its metadata keys and values."""
        return len(self.data) + sum(len(k.encode()) + len(v) for k, v in self.metadata.items())

    def to_json(self) -> dict[str, Any]:
        """Return Temporal's JSON form: base64 metadata values and data (omitted when empty)."""
        out: dict[str, Any] = {"metadata": {k: _b64encode(v) for k, v in self.metadata.items()}}
        if self.data:
            out["data"] = _b64encode(self.data)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Payload:
        """Read Temporal's JSON form; raises :class:`ValueError` naming a bad field."""
        if not isinstance(d, Mapping):
            raise ValueError(f"a payload must be a JSON object, got {type(d).__name__}")
        raw_meta = d.get("metadata") or {}
        if not isinstance(raw_meta, Mapping):
            raise ValueError(
                f"payload field 'metadata' must be an object, got {type(raw_meta).__name__}"
            )
        metadata = {str(k): _b64decode(v, f"metadata.{k}") for k, v in raw_meta.items()}
        raw_data = d.get("data")
        data = b"" if raw_data is None else _b64decode(raw_data, "data")
        return cls(metadata=metadata, data=data)


def payloads_to_json(payloads: Sequence[Payload]) -> dict[str, Any]:
    """Return Temporal's ``Payloads`` JSON form: ``{"payloads": [...]}``."""
    return {"payloads": [p.to_json() for p in payloads]}


def payloads_from_json(d: Mapping[str, Any] | None) -> list[Payload]:
    """Read a ``Payloads`` JSON object; ``None`` or a missing list gives ``[]``."""
    if d is None:
        return []
    if not isinstance(d, Mapping):
        raise ValueError(f"payloads must be a JSON object, got {type(d).__name__}")
    items = d.get("payloads") or []
    if not isinstance(items, list):
        raise ValueError(f"field 'payloads' must be a list, got {type(items).__name__}")
    out = []
    for index, item in enumerate(items):
        try:
            out.append(Payload.from_json(item))
        except ValueError as err:
            raise ValueError(f"payloads[{index}]: {err}") from err
    return out


# --------------------------------------------------------------------------
# payload converter
# --------------------------------------------------------------------------
def _json_default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, set | frozenset):
        # Sorted where possible: set order varies between processes, and replays compare bytes.
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    raise TypeError(
        f"cannot convert a value of type {type(value).__qualname__} to JSON: use JSON types, "
        "dataclasses, enums, datetimes, UUIDs, sets or bytes (top level only)"
    )


# Built once: json.dumps with options would build an encoder for every payload.
_payload_json = compact_dumps(sort_keys=True, default=_json_default)


_hint_cache: weakref.WeakKeyDictionary[type, dict[str, Any]] = weakref.WeakKeyDictionary()


def _field_hints(cls: type) -> dict[str, Any]:
    hints = _hint_cache.get(cls)
    if hints is None:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:
            # Names not resolvable (a class local to a function): use what is not a string.
            hints = {f.name: f.type for f in dataclasses.fields(cls) if not isinstance(f.type, str)}
        _hint_cache[cls] = hints
    return hints


_SEQUENCE_ORIGINS = {
    list,
    collections.abc.Sequence,
    collections.abc.MutableSequence,
    collections.abc.Iterable,
    collections.abc.Collection,
}
_SET_ORIGINS = {set, collections.abc.Set, collections.abc.MutableSet}
_MAPPING_ORIGINS = {dict, collections.abc.Mapping, collections.abc.MutableMapping}


def _to_dataclass(value: Any, cls: type) -> Any:
    if not isinstance(value, dict):
        raise TypeError(f"cannot build {cls.__qualname__} from a JSON {type(value).__name__}")
    hints = _field_hints(cls)
    kwargs = {
        f.name: _from_json_value(value[f.name], hints.get(f.name))
        for f in dataclasses.fields(cls)
        if f.init and f.name in value
    }
    try:
        return cls(**kwargs)
    except TypeError as err:
        raise TypeError(
            f"cannot build {cls.__qualname__} from keys {sorted(value)}: {err}"
        ) from err


def _convert_key(key: Any, hint: Any) -> Any:
    # JSON object keys are always strings; turn them back into what the hint asks for.
    if isinstance(key, str) and isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            try:
                return hint(key)
            except ValueError:
                return hint(int(key))
        if hint is int or hint is float:
            return hint(key)
    return _from_json_value(key, hint)


def _from_union(value: Any, args: tuple[Any, ...]) -> Any:
    if value is None and type(None) in args:
        return None
    candidates = [a for a in args if a is not type(None)]
    if len(candidates) == 1:
        return _from_json_value(value, candidates[0])
    # A value already of a plain member type wins (str | Dc given a string).
    for candidate in candidates:
        if candidate in (str, int, float, bool) and type(value) is candidate:
            return value
    for candidate in candidates:
        try:
            return _from_json_value(value, candidate)
        except (TypeError, ValueError, KeyError):
            continue
    return value


def _from_json_value(value: Any, hint: Any) -> Any:
    """Rebuild the value ``hint`` describes from decoded JSON ``value``."""
    if hint is None or hint is Any or hint is object or isinstance(hint, str | TypeVar):
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _from_json_value(value, args[0])
    if origin is typing.Union or origin is types.UnionType:
        return _from_union(value, args)
    if origin is typing.Literal:
        return value
    if origin is not None:
        if dataclasses.is_dataclass(origin) and isinstance(origin, type):
            return _to_dataclass(value, origin)  # a generic dataclass such as Box[int]
        return _from_generic(value, origin, args)
    if not isinstance(hint, type) or value is None:
        return value
    if dataclasses.is_dataclass(hint):
        return _to_dataclass(value, hint)
    if issubclass(hint, enum.Enum):
        return hint(value)
    if isinstance(value, str):
        if issubclass(hint, datetime):
            return hint.fromisoformat(value)
        if issubclass(hint, date):
            return hint.fromisoformat(value)
        if issubclass(hint, time):
            return hint.fromisoformat(value)
        if issubclass(hint, uuid.UUID):
            return hint(value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, list) and hint in (tuple, set, frozenset):
        return hint(value)
    return value


def _from_generic(value: Any, origin: Any, args: tuple[Any, ...]) -> Any:
    if isinstance(value, list):
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_from_json_value(v, args[0]) for v in value)
            if args and len(args) == len(value):
                return tuple(_from_json_value(v, a) for v, a in zip(value, args, strict=True))
            return tuple(value)
        item = args[0] if args else None
        if origin in _SEQUENCE_ORIGINS:
            return [_from_json_value(v, item) for v in value]
        if origin in _SET_ORIGINS:
            return {_from_json_value(v, item) for v in value}
        if origin is frozenset:
            return frozenset(_from_json_value(v, item) for v in value)
    if isinstance(value, dict) and origin in _MAPPING_ORIGINS:
        key_hint, value_hint = args if len(args) == 2 else (None, None)
        return {
            _convert_key(k, key_hint): _from_json_value(v, value_hint) for k, v in value.items()
        }
    return value


class PayloadConverter:
    """The default converter between Python values and payloads.

    Writing, the first that applies wins: ``None`` as ``binary/null``, ``bytes`` as
    ``binary/plain``, anything else as compact, key-sorted ``json/plain`` (dataclasses as
    objects, enums by value, datetimes as ISO 8601, UUIDs as strings, sets as lists).
    Reading with a type hint rebuilds dataclasses (also nested, in lists, dicts and
    optionals), enums, datetimes, UUIDs and tuples.
    """

    def to_payload(self, value: Any) -> Payload:
        """Encode one value; raises :class:`TypeError` naming a type JSON cannot hold."""
        if isinstance(value, RawValue):  # already encoded: written as it is
            raw: Payload = value.payload
            return raw
        if value is None:
            return Payload(metadata={"encoding": _ENCODING_NULL.encode()})
        if isinstance(value, bytes | bytearray):
            return Payload(metadata={"encoding": _ENCODING_BINARY.encode()}, data=bytes(value))
        data = _payload_json(value)
        return Payload(metadata={"encoding": _ENCODING_JSON.encode()}, data=data.encode())

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        """Encode each value."""
        return [self.to_payload(v) for v in values]

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        """Decode one payload, rebuilding the type ``type_hint`` names when given.

        Raises :class:`ValueError` for an unknown encoding or malformed data. The hint
        :class:`~engine.common.RawValue` keeps the payload encoded, wrapped in one.
        """
        if type_hint is RawValue:
            return RawValue(payload)
        encoding = payload.encoding
        if encoding == _ENCODING_NULL:
            return None
        if encoding == _ENCODING_BINARY:
            return payload.data
        if encoding == _ENCODING_JSON:
            try:
                value = json.loads(payload.data)
            except (ValueError, RecursionError) as err:  # RecursionError: deep nesting
                raise ValueError(
                    f"payload with encoding json/plain holds invalid JSON: {err}"
                ) from err
            return _from_json_value(value, type_hint)
        raise ValueError(
            f"unknown payload encoding {encoding!r}: this converter reads binary/null, "
            "binary/plain and json/plain (is a payload codec missing from the data converter?)"
        )

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: Sequence[Any] | None = None
    ) -> list[Any]:
        """Decode each payload; ``type_hints[i]`` (if there is one) applies to payload ``i``."""
        hints = list(type_hints or [])
        return [
            self.from_payload(p, hints[i] if i < len(hints) else None)
            for i, p in enumerate(payloads)
        ]


class PayloadCodec(ABC):
    """Transforms encoded payloads as a whole (compression, encryption) before they are stored."""

    @abstractmethod
    def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Return the payloads as they should be stored."""

    @abstractmethod
    def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Undo :meth:`encode`."""


# --------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------
_INFO_KEYS = (
    "applicationFailureInfo",
    "timeoutFailureInfo",
    "canceledFailureInfo",
    "terminatedFailureInfo",
    "serverFailureInfo",
    "activityFailureInfo",
    "childWorkflowExecutionFailureInfo",
)

_E = TypeVar("_E", bound=enum.IntEnum)


def _enum_to_json(member: enum.IntEnum | None, prefix: str) -> str | None:
    if member is None or member.value == 0:
        return None
    return f"{prefix}{member.name}"


def _enum_from_json(cls: type[_E], prefix: str, value: Any) -> _E | None:
    # Proto JSON writes enum names; parsers also accept numbers. Unknown or unset: None.
    try:
        member = cls[value.removeprefix(prefix)] if isinstance(value, str) else cls(int(value))
    except (KeyError, ValueError, TypeError):
        return None
    return member if member.value != 0 else None


def _int_from_json(value: Any) -> int:
    # int64 fields are strings in proto JSON.
    return int(value) if value not in (None, "") else 0


def _name_of(obj: Any) -> str:
    return str(obj.get("name", "")) if isinstance(obj, Mapping) else ""


def _drop_empty(d: dict[str, Any]) -> dict[str, Any]:
    # Proto JSON leaves out fields holding their default value.
    return {k: v for k, v in d.items() if v not in (None, "", 0, False, {}, [])}


class FailureConverter:
    """Converts exceptions to Temporal's Failure JSON and back.

    An exception that is not a :class:`FailureError` becomes an application failure whose
    type is the exception's class name (``"ValueError"``), retryable: that is how Temporal
    reports an ordinary exception raised by an activity.
    """

    def to_failure(self, exc: BaseException, payload_converter: PayloadConverter) -> dict[str, Any]:
        """Return the Failure JSON for ``exc``, with its cause chain under ``"cause"``.

        An error decoded from a failure (``exc.failure`` set) is written back unchanged.
        An :class:`ApplicationError`'s category is written as Temporal writes it
        (``"category": "APPLICATION_ERROR_CATEGORY_BENIGN"``, left out when unspecified).
        """
        return self._to_failure(exc, payload_converter, set())

    def _to_failure(
        self, exc: BaseException, pc: PayloadConverter, seen: set[int]
    ) -> dict[str, Any]:
        seen.add(id(exc))
        if isinstance(exc, FailureError) and exc.failure is not None:
            return exc.failure.to_json()
        message = exc.message if isinstance(exc, FailureError) else str(exc)
        if isinstance(exc, asyncio.CancelledError) and not message:
            message = "Cancelled"
        out: dict[str, Any] = {"message": message}
        if exc.__traceback__ is not None:
            out["stackTrace"] = "\n".join(traceback.format_tb(exc.__traceback__))
        # Like Python's own traceback printing: the explicit cause, else the implicit context.
        cause = exc.__cause__
        if cause is None and not exc.__suppress_context__:
            cause = exc.__context__
        if cause is not None and id(cause) not in seen:
            out["cause"] = self._to_failure(cause, pc, seen)
        key, info = self._info_for(exc, pc)
        if key is not None:
            out[key] = info
        return out

    def _info_for(
        self, exc: BaseException, pc: PayloadConverter
    ) -> tuple[str | None, dict[str, Any]]:
        def details(values: Sequence[Any]) -> dict[str, Any] | None:
            return payloads_to_json(pc.to_payloads(values)) if values else None

        if isinstance(exc, ApplicationError):
            return "applicationFailureInfo", _drop_empty(
                {
                    "type": exc.type,
                    "nonRetryable": exc.non_retryable,
                    "details": details(exc.details),
                    "nextRetryDelay": None
                    if exc.next_retry_delay is None
                    else duration_to_json(exc.next_retry_delay),
                    "category": _enum_to_json(exc.category, "APPLICATION_ERROR_CATEGORY_"),
                }
            )
        if isinstance(exc, TimeoutError):
            return "timeoutFailureInfo", _drop_empty(
                {
                    "timeoutType": _enum_to_json(exc.type, "TIMEOUT_TYPE_"),
                    "lastHeartbeatDetails": details(exc.last_heartbeat_details),
                }
            )
        if isinstance(exc, CancelledError):
            return "canceledFailureInfo", _drop_empty({"details": details(exc.details)})
        if isinstance(exc, asyncio.CancelledError):
            return "canceledFailureInfo", {}
        if isinstance(exc, TerminatedError):
            return "terminatedFailureInfo", {}
        if isinstance(exc, ServerError):
            return "serverFailureInfo", _drop_empty({"nonRetryable": exc.non_retryable})
        if isinstance(exc, ActivityError):
            return "activityFailureInfo", _drop_empty(
                {
                    "scheduledEventId": str(exc.scheduled_event_id or ""),
                    "startedEventId": str(exc.started_event_id or ""),
                    "identity": exc.identity,
                    "activityType": {"name": exc.activity_type} if exc.activity_type else None,
                    "activityId": exc.activity_id,
                    "retryState": _enum_to_json(exc.retry_state, "RETRY_STATE_"),
                }
            )
        if isinstance(exc, ChildWorkflowError):
            return "childWorkflowExecutionFailureInfo", _drop_empty(
                {
                    "namespace": exc.namespace,
                    "workflowExecution": _drop_empty(
                        {"workflowId": exc.workflow_id, "runId": exc.run_id}
                    ),
                    "workflowType": {"name": exc.workflow_type} if exc.workflow_type else None,
                    "initiatedEventId": str(exc.initiated_event_id or ""),
                    "startedEventId": str(exc.started_event_id or ""),
                    "retryState": _enum_to_json(exc.retry_state, "RETRY_STATE_"),
                }
            )
        if isinstance(exc, FailureError):
            # Other failure errors carry only their message, as in Temporal.
            return None, {}
        return "applicationFailureInfo", {"type": type(exc).__name__}

    def from_failure(
        self, d: Mapping[str, Any], payload_converter: PayloadConverter
    ) -> FailureError:
        """Rebuild the exception ``d`` describes, its causes chained on ``__cause__``.

        The error keeps ``d`` on ``.failure`` (a read-only :class:`~engine.exceptions.Failure`
        view of it). When ``encodedAttributes`` hold the message and stack trace (moved there
        so that a codec encrypts them), they are restored, in a copy of ``d``, as temporalio
        does. A failure of a kind this engine does not know becomes a plain
        :class:`FailureError`.
        """
        chain: list[FailureError] = []  # a loop, not recursion: a cause chain may be deep
        node: Any = d
        while node or not chain:
            if not isinstance(node, Mapping):
                raise ValueError(f"a failure must be a JSON object, got {type(node).__name__}")
            if node.get("encodedAttributes"):
                node = self._decode_attributes(node, payload_converter)
            chain.append(self._error_for(node, payload_converter))
            chain[-1]._set_failure(node if isinstance(node, dict) else dict(node))
            if len(chain) > 1:
                chain[-2].__cause__ = chain[-1]
            node = node.get("cause")
        return chain[0]

    @staticmethod
    def _decode_attributes(d: Mapping[str, Any], pc: PayloadConverter) -> Mapping[str, Any]:
        # Like temporalio, an attribute payload that does not decode is ignored.
        try:
            attrs = pc.from_payload(Payload.from_json(d["encodedAttributes"]))
        except Exception:
            return d
        if not isinstance(attrs, Mapping):
            return d
        restored = dict(d)
        for key, json_key in (("message", "message"), ("stack_trace", "stackTrace")):
            if isinstance(attrs.get(key), str):
                restored[json_key] = attrs[key]
        return restored

    def _error_for(self, d: Mapping[str, Any], pc: PayloadConverter) -> FailureError:
        message = str(d.get("message") or "")

        def details(value: Any) -> list[Any]:
            return pc.from_payloads(payloads_from_json(value))

        if (info := d.get("applicationFailureInfo")) is not None:
            delay = info.get("nextRetryDelay")
            return ApplicationError(
                message or "Application error",
                *details(info.get("details")),
                type=info.get("type") or None,
                non_retryable=bool(info.get("nonRetryable", False)),
                next_retry_delay=duration_from_json(delay) if delay else None,
                category=_enum_from_json(
                    ApplicationErrorCategory, "APPLICATION_ERROR_CATEGORY_", info.get("category")
                )
                or ApplicationErrorCategory.UNSPECIFIED,
            )
        if (info := d.get("timeoutFailureInfo")) is not None:
            return TimeoutError(
                message or "Timeout",
                type=_enum_from_json(TimeoutType, "TIMEOUT_TYPE_", info.get("timeoutType")),
                last_heartbeat_details=details(info.get("lastHeartbeatDetails")),
            )
        if (info := d.get("canceledFailureInfo")) is not None:
            return CancelledError(message or "Cancelled", *details(info.get("details")))
        if d.get("terminatedFailureInfo") is not None:
            return TerminatedError(message or "Terminated")
        if (info := d.get("serverFailureInfo")) is not None:
            return ServerError(
                message or "Server error", non_retryable=bool(info.get("nonRetryable", False))
            )
        if (info := d.get("activityFailureInfo")) is not None:
            return ActivityError(
                message or "Activity error",
                scheduled_event_id=_int_from_json(info.get("scheduledEventId")),
                started_event_id=_int_from_json(info.get("startedEventId")),
                identity=str(info.get("identity", "")),
                activity_type=_name_of(info.get("activityType")),
                activity_id=str(info.get("activityId", "")),
                retry_state=_enum_from_json(RetryState, "RETRY_STATE_", info.get("retryState")),
            )
        if (info := d.get("childWorkflowExecutionFailureInfo")) is not None:
            execution = info.get("workflowExecution") or {}
            return ChildWorkflowError(
                message or "Child workflow error",
                namespace=str(info.get("namespace", "")),
                workflow_id=str(execution.get("workflowId", "")),
                run_id=str(execution.get("runId", "")),
                workflow_type=_name_of(info.get("workflowType")),
                initiated_event_id=_int_from_json(info.get("initiatedEventId")),
                started_event_id=_int_from_json(info.get("startedEventId")),
                retry_state=_enum_from_json(RetryState, "RETRY_STATE_", info.get("retryState")),
            )
        return FailureError(message or "Failure error")


def _map_failure_payloads(
    failure: dict[str, Any], fn: Callable[[Sequence[Payload]], list[Payload]]
) -> None:
    # Apply a codec to every payload list inside a Failure, causes included, in place.
    node: dict[str, Any] | None = failure
    while node is not None:
        for key in _INFO_KEYS:
            info = node.get(key)
            if not isinstance(info, dict):
                continue
            for field_name in ("details", "lastHeartbeatDetails"):
                if info.get(field_name):
                    info[field_name] = payloads_to_json(fn(payloads_from_json(info[field_name])))
        if node.get("encodedAttributes"):
            encoded = fn([Payload.from_json(node["encodedAttributes"])])
            node["encodedAttributes"] = encoded[0].to_json()
        cause = node.get("cause")
        node = cause if isinstance(cause, dict) else None


# --------------------------------------------------------------------------
# data converter
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class DataConverter:
    """Everything that turns values and exceptions into stored data and back.

    ``DataConverter.default`` uses the default payload and failure converters and no codec.
    A codec, when set, is applied to every payload written, failure details included.
    """

    payload_converter: PayloadConverter = field(default_factory=PayloadConverter)
    """Converts values to payloads and back."""

    payload_codec: PayloadCodec | None = None
    """Optional transformation of encoded payloads (compression, encryption)."""

    failure_converter: FailureConverter = field(default_factory=FailureConverter)
    """Converts exceptions to Failure JSON and back."""

    default: ClassVar[DataConverter]
    """The shared default data converter."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        """Encode values to payloads, then apply the codec."""
        payloads = self.payload_converter.to_payloads(values)
        if self.payload_codec is not None:
            payloads = self.payload_codec.encode(payloads)
        return payloads

    def to_payload(self, value: Any) -> Payload:
        """Encode one value to a payload, then apply the codec."""
        return self.to_payloads([value])[0]

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: Sequence[Any] | None = None
    ) -> list[Any]:
        """Undo the codec, then decode payloads (``type_hints[i]`` applies to payload ``i``)."""
        decoded = list(payloads)
        if self.payload_codec is not None and decoded:
            decoded = self.payload_codec.decode(decoded)
        return self.payload_converter.from_payloads(decoded, type_hints)

    def from_payload(self, payload: Payload, type_hint: Any = None) -> Any:
        """Undo the codec, then decode one payload."""
        return self.from_payloads([payload], [type_hint])[0]

    def to_payloads_json(self, values: Sequence[Any]) -> list[dict[str, Any]]:
        """Encode values straight to Temporal's JSON payload objects."""
        return [p.to_json() for p in self.to_payloads(values)]

    def from_payloads_json(
        self, payloads: Sequence[Mapping[str, Any]] | None, type_hints: Sequence[Any] | None = None
    ) -> list[Any]:
        """Decode Temporal's JSON payload objects to values."""
        if not payloads:
            return []
        return self.from_payloads([Payload.from_json(p) for p in payloads], type_hints)

    def to_failure(self, exc: BaseException) -> dict[str, Any]:
        """Return the Failure JSON for ``exc`` (codec applied to its payloads)."""
        failure = self.failure_converter.to_failure(exc, self.payload_converter)
        if self.payload_codec is not None:
            _map_failure_payloads(failure, self.payload_codec.encode)
        return failure

    def from_failure(self, d: Mapping[str, Any]) -> FailureError:
        """Rebuild the exception a Failure JSON describes (codec undone first)."""
        if self.payload_codec is not None:
            decoded = copy.deepcopy(dict(d))
            _map_failure_payloads(decoded, self.payload_codec.decode)
            d = decoded
        return self.failure_converter.from_failure(d, self.payload_converter)


DataConverter.default = DataConverter()


def user_metadata_json(
    converter: DataConverter,
    summary: str | None,
    details: str | None = None,
    *,
    names: tuple[str, str] = ("summary", "details"),
) -> dict[str, Any] | None:
    """A summary and details as Temporal's ``UserMetadata`` JSON (``{"summary": payload,
    "details": payload}``, through ``converter`` and its codec), or None for neither.
    ``names`` are the options' names, for errors."""
    metadata: dict[str, Any] = {}
    for key, name, value in (("summary", names[0], summary), ("details", names[1], details)):
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string, not {type(value).__name__}")
        payload = converter.to_payload(value)
        check_payloads_size([payload], what=name)
        metadata[key] = payload.to_json()
    return metadata or None
