"""Search attribute values as payloads, as ``temporalio.converter`` writes and reads them.

A value is written by the default payload converter (never the client's codec: the
server must read it), with a ``type`` metadata entry naming its type (``Keyword``,
``Int``...); datetimes as ISO 8601 text with their zone. The deprecated dict form
(``{"CustomerId": ["c1"]}``) writes each list as one JSON payload without a type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .common import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributePair,
    SearchAttributes,
    SearchAttributeUpdate,
    TypedSearchAttributes,
)
from .converter import DataConverter, Payload
from .exceptions import InvalidArgumentError

JsonDict = dict[str, Any]


def _converter() -> Any:
    return DataConverter.default.payload_converter


def encode_value(key: SearchAttributeKey[Any], value: Any) -> JsonDict:
    """One typed value (None: an unset) as payload JSON."""
    if value is None:
        return _converter().to_payload(None).to_json()  # type: ignore[no-any-return]
    if not isinstance(value, key.origin_value_type) or (
        isinstance(value, bool) and key.indexed_value_type != SearchAttributeIndexedValueType.BOOL
    ):
        raise InvalidArgumentError(
            f"search attribute {key.name!r} is {key._metadata_type}: "
            f"{type(value).__name__} {value!r} does not fit it"
        )
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidArgumentError(
                f"search attribute {key.name!r}: a datetime needs its time zone "
                "(datetime.now(timezone.utc), not datetime.now())"
            )
        value = value.isoformat()
    if key.indexed_value_type == SearchAttributeIndexedValueType.KEYWORD_LIST:
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise InvalidArgumentError(
                f"search attribute {key.name!r} is a KeywordList: give a list of strings"
            )
        value = list(value)
    payload: Payload = _converter().to_payload(value)
    payload.metadata["type"] = key._metadata_type.encode()
    return payload.to_json()


def encode_values(values: Any, name: str) -> JsonDict:
    """The deprecated dict form's list of values as one untyped payload."""
    if not isinstance(values, list):
        raise InvalidArgumentError(
            f"search attribute {name!r}: the dict form takes a list of values, not "
            f"{type(values).__name__} (or use TypedSearchAttributes)"
        )
    plain = []
    for v in values:
        if isinstance(v, datetime):
            if v.tzinfo is None:
                raise InvalidArgumentError(
                    f"search attribute {name!r}: a datetime needs its time zone"
                )
            v = v.isoformat()
        elif not isinstance(v, str | int | float | bool):
            raise InvalidArgumentError(
                f"search attribute {name!r}: a value of type {type(v).__name__} is not one of "
                "str, int, float, bool or datetime"
            )
        plain.append(v)
    return _converter().to_payload(plain).to_json()  # type: ignore[no-any-return]


def encode(attributes: TypedSearchAttributes | SearchAttributes | None) -> dict[str, JsonDict]:
    """Start or child options' ``search_attributes`` as ``indexedFields`` JSON."""
    if attributes is None:
        return {}
    if isinstance(attributes, TypedSearchAttributes):
        return {pair.key.name: encode_value(pair.key, pair.value) for pair in attributes}
    if not isinstance(attributes, Mapping):
        raise InvalidArgumentError(
            "search_attributes takes TypedSearchAttributes([...]) (or the older dict of "
            f"lists), not {type(attributes).__name__}"
        )
    return {str(k): encode_values(v, str(k)) for k, v in attributes.items()}


def encode_updates(
    updates: Sequence[SearchAttributeUpdate[Any]] | SearchAttributes,
) -> dict[str, JsonDict]:
    """``workflow.upsert_search_attributes``'s argument as ``indexedFields`` JSON."""
    if isinstance(updates, Mapping):
        return encode(updates)
    fields: dict[str, JsonDict] = {}
    for update in updates:
        if not isinstance(update, SearchAttributeUpdate):
            raise InvalidArgumentError(
                "upsert_search_attributes takes key.value_set(v) / key.value_unset() updates "
                f"(or the older dict of lists), not {type(update).__name__}"
            )
        fields[update.key.name] = encode_value(update.key, update.value)
    return fields


def _value(payload: Mapping[str, Any]) -> Any:
    return _converter().from_payload(Payload.from_json(payload))


def is_unset(payload: Mapping[str, Any]) -> bool:
    """Whether a payload is the null an unset writes."""
    return Payload.from_json(payload).encoding == "binary/null"


def decode(fields: Mapping[str, Any]) -> dict[str, list[Any]]:
    """``indexedFields`` JSON as the deprecated dict form: a list per name."""
    out: dict[str, list[Any]] = {}
    for name, payload in fields.items():
        if is_unset(payload):
            out[name] = []
            continue
        value = _value(payload)
        values = value if isinstance(value, list) else [value]
        if Payload.from_json(payload).metadata.get("type") == b"Datetime":
            values = [datetime.fromisoformat(v) if isinstance(v, str) else v for v in values]
        out[name] = values
    return out


def decode_typed(fields: Mapping[str, Any]) -> TypedSearchAttributes:
    """``indexedFields`` JSON as typed pairs (values without a known type are left out,
    as ``temporalio`` leaves them)."""
    pairs: list[SearchAttributePair[Any]] = []
    for name, payload in fields.items():
        metadata_type = Payload.from_json(payload).metadata.get("type")
        if not metadata_type or is_unset(payload):
            continue
        key = SearchAttributeKey._from_metadata_type(name, metadata_type.decode())
        if key is None:
            continue
        value = _value(payload)
        kind = key.indexed_value_type
        if kind != SearchAttributeIndexedValueType.KEYWORD_LIST and isinstance(value, list):
            if len(value) != 1:
                continue
            value = value[0]
        if kind == SearchAttributeIndexedValueType.DATETIME and isinstance(value, str):
            value = datetime.fromisoformat(value)
        elif kind == SearchAttributeIndexedValueType.DOUBLE and type(value) is int:
            value = float(value)
        if isinstance(value, key.origin_value_type):
            pairs.append(SearchAttributePair(key, value))
    return TypedSearchAttributes(pairs)
