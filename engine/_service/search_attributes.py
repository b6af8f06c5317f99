"""Custom search attributes: registered per namespace with a type, each given a typed
column of ``dn_visibility`` (Temporal's SQL visibility does the same: ten Keyword
columns, three of each other type, per namespace), and checked whenever a run sets one.

A run sets attributes at start (``search_attributes=``) and with
``workflow.upsert_search_attributes``; both are written to its visibility row in the
transaction that records the event. An attribute that is not registered, or a value that
does not fit its type, is refused with Temporal's message: the start fails, and an upsert
fails its workflow task (``WORKFLOW_TASK_FAILED_CAUSE_BAD_SEARCH_ATTRIBUTES``), which is
retried, so registering the attribute lets the run go on with nothing else changed.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .._json import loads as json_loads
from .._model import commands as cmd
from .._model.limits import check_id, check_text
from .._store.gateway import Store
from .._store.shared_time import now as tx_now
from .._store.tx import StoreTx
from ..common import SearchAttributeIndexedValueType as T
from ..exceptions import InvalidArgumentError
from .clock import Clock
from .namespaces import existing_namespace
from .operation import operation
from .state import RunState
from .visibility import SYSTEM, parse_datetime, text_column_value, type_name

JsonDict = dict[str, Any]

#: Columns of each type, in the order they are handed out (Temporal's SQL limits).
COLUMNS: dict[T, list[str]] = {
    T.KEYWORD: [f"keyword{i:02d}" for i in range(1, 11)],
    T.TEXT: [f"text{i:02d}" for i in range(1, 4)],
    T.INT: [f"int{i:02d}" for i in range(1, 4)],
    T.DOUBLE: [f"double{i:02d}" for i in range(1, 4)],
    T.BOOL: [f"bool{i:02d}" for i in range(1, 4)],
    T.DATETIME: [f"datetime{i:02d}" for i in range(1, 4)],
    T.KEYWORD_LIST: [f"keyword_list{i:02d}" for i in range(1, 4)],
}

#: System attributes a run sets itself (patches list their ids in it).
RUN_SETTABLE = {"TemporalChangeVersion": "change_version"}
#: System attributes the scheduler sets on the runs a schedule starts (only those runs).
SCHEDULER_SETTABLE = {
    "TemporalScheduledById": (T.KEYWORD, "scheduled_by_id"),
    "TemporalScheduledStartTime": (T.DATETIME, "scheduled_start_time"),
}


class BadSearchAttributesError(InvalidArgumentError):
    """A search attribute that is not registered, or a value that does not fit its type."""


def value_type_of(value: Any) -> T:
    """A type given as the enum, its number, or its name (``"Keyword"``, ``"KEYWORD"``,
    ``"INDEXED_VALUE_TYPE_KEYWORD"``)."""
    if isinstance(value, T):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return T(value)
        except ValueError:
            pass
    if isinstance(value, str):
        spelled = value.removeprefix("INDEXED_VALUE_TYPE_").replace("_", "").lower()
        for kind in T:
            if kind.name.replace("_", "").lower() == spelled:
                return kind
    raise InvalidArgumentError(
        f"unknown search attribute type {value!r}: one of " + ", ".join(type_name(k) for k in T)
    )


class SearchAttributeOps:
    """Registering, listing and removing custom search attributes (mixed into Service)."""

    store: Store
    clock: Clock

    # Two registrations at once may pick the same free column: the loser runs again.
    @operation(conflict_retries=2)
    def add_search_attributes(
        self, tx: StoreTx, namespace: str, attributes: Mapping[str, Any]
    ) -> list[str]:
        """Register each ``name: type``; returns the names newly added. A name already
        registered is left as it is, whatever type is asked (as Temporal's server does);
        a system attribute's name is refused, and so is an eleventh Keyword (three of the
        other types) in one namespace."""
        existing_namespace(tx, namespace)
        wanted = {
            check_id(n, "a search attribute name"): value_type_of(t) for n, t in attributes.items()
        }
        for name in wanted:
            if name in SYSTEM:
                raise InvalidArgumentError(f"Search attribute {name} is reserved by system.")
        existing = {r.name: r for r in tx.search_attributes(namespace)}
        taken = {r.column_name for r in existing.values()}
        added = []
        for name, kind in sorted(wanted.items()):
            if name in existing:
                continue
            free = [c for c in COLUMNS[kind] if c not in taken]
            if not free:
                raise InvalidArgumentError(
                    "Unable to create search attributes: cannot have more than "
                    f"{len(COLUMNS[kind])} search attribute of type {type_name(kind)}."
                )
            tx.add_search_attribute(namespace, name, int(kind), free[0], tx_now(self.clock))
            taken.add(free[0])
            added.append(name)
        return added

    @operation(read=True)
    def list_search_attributes(self, tx: StoreTx, namespace: str) -> dict[str, T]:
        """The custom attributes registered in ``namespace`` and their types."""
        existing_namespace(tx, namespace)
        return {r.name: T(r.value_type) for r in tx.search_attributes(namespace)}

    @operation
    def remove_search_attributes(self, tx: StoreTx, namespace: str, names: Iterable[str]) -> None:
        """Unregister custom attributes; their values are cleared from every run of the
        namespace that holds them (its column, and the attributes describe shows), so a
        column handed to another attribute later starts empty."""
        existing_namespace(tx, namespace)
        existing = {r.name: r for r in tx.search_attributes(namespace)}
        names = list(names)
        for name in names:
            if name not in existing:
                raise InvalidArgumentError(f"Search attribute {name} doesn't exist.")
        for name in names:
            tx.remove_search_attribute(namespace, name)
            tx.forget_search_attribute(namespace, name, existing[name].column_name)


def still_registered(tx: StoreTx, namespace: str, held: Mapping[str, Any]) -> JsonDict:
    """``held`` (a run's attributes JSON) without the names no longer registered: what a
    run carries to the next one (continue-as-new, retry, cron)."""
    known = registered(tx, namespace) if set(held) - set(RUN_SETTABLE) else {}
    kept = (*RUN_SETTABLE, *SCHEDULER_SETTABLE)  # the latter only a scheduled run holds
    return {n: p for n, p in held.items() if n in known or n in kept}


def registered(tx: StoreTx, namespace: str) -> dict[str, tuple[T, str]]:
    """``name -> (type, column)`` of the namespace's custom attributes."""
    return {r.name: (T(r.value_type), r.column_name) for r in tx.search_attributes(namespace)}


def visibility_changes(
    tx: StoreTx,
    namespace: str,
    fields: Mapping[str, Any],
    current: Mapping[str, Any] | None,
    *,
    scheduled: bool = False,
) -> tuple[dict[str, Any], JsonDict, JsonDict]:
    """The visibility columns ``fields`` (``indexedFields`` JSON: name -> payload; a null
    payload unsets) set, the run's attributes JSON after them (``current`` before), and
    ``fields`` as the history records them: each payload's ``type`` metadata set to the
    attribute's registered type, as Temporal's server sets it. Raises
    :class:`BadSearchAttributesError` with Temporal's message. ``scheduled``: the start
    of a run by a schedule, which may set :data:`SCHEDULER_SETTABLE` too."""
    known = registered(tx, namespace) if set(fields) - set(RUN_SETTABLE) else {}
    _check_sizes(fields)
    columns: dict[str, Any] = {}
    after = dict(current or {})
    recorded: JsonDict = {}
    for name, payload in fields.items():
        if name in RUN_SETTABLE:
            kind, column = T.KEYWORD_LIST, RUN_SETTABLE[name]
        elif scheduled and name in SCHEDULER_SETTABLE:
            kind, column = SCHEDULER_SETTABLE[name]
        elif name in SYSTEM:
            raise BadSearchAttributesError(
                f"Search attribute {name} is reserved by system: a run cannot set it"
            )
        elif name in known:
            kind, column = known[name]
        else:
            raise BadSearchAttributesError(
                f"Namespace {namespace} has no mapping defined for search attribute {name} "
                f"(register it first: durable operator search-attribute create --name {name} "
                "--type Keyword, or another type)"
            )
        value = _payload_value(payload, name)
        if value == []:  # the dict form's empty list unsets, as on Temporal
            value = _UNSET
        typed = {**payload, "metadata": {**payload["metadata"], "type": _TYPE_METADATA[kind]}}
        recorded[name] = typed
        if value is _UNSET:
            columns[column] = None
            after.pop(name, None)
            continue
        columns[column] = _column_value(name, kind, value)
        after[name] = typed
    return columns, after, recorded


#: A payload's ``type`` metadata (base64, as payload JSON holds metadata) per type.
_TYPE_METADATA = {k: base64.b64encode(type_name(k).encode()).decode() for k in T}


_UNSET: Any = object()

#: Temporal's defaults: ``limit.searchAttributeValueSizeLimit`` (each value) and
#: ``limit.searchAttributeTotalSizeLimit`` (all of a run's, in one request).
VALUE_SIZE_LIMIT = 2 * 1024
TOTAL_SIZE_LIMIT = 40 * 1024


def _check_sizes(fields: Mapping[str, Any]) -> None:
    total = 0
    for name, payload in fields.items():
        data = payload.get("data") if isinstance(payload, Mapping) else None
        # The bytes the base64 text stands for (exactly: a value at the limit passes).
        size = len(data) * 3 // 4 - data[-2:].count("=") if isinstance(data, str) else 0
        total += size + len(name)
        if size > VALUE_SIZE_LIMIT:
            raise BadSearchAttributesError(
                f"search attribute {name} value size {size} exceeds size limit {VALUE_SIZE_LIMIT}"
            )
    if total > TOTAL_SIZE_LIMIT:
        raise BadSearchAttributesError(
            f"total size of search attributes {total} exceeds size limit {TOTAL_SIZE_LIMIT}"
        )


def _payload_value(payload: Any, name: str) -> Any:
    def bad(why: str) -> BadSearchAttributesError:
        return BadSearchAttributesError(f"search attribute {name}: {why}")

    if not isinstance(payload, Mapping) or not isinstance(payload.get("metadata"), Mapping):
        raise bad("its value is not a payload")
    metadata = payload["metadata"]
    try:
        encoding = base64.b64decode(metadata.get("encoding") or "").decode()
        data = base64.b64decode(payload.get("data") or "")
    except (binascii.Error, UnicodeDecodeError, AttributeError, TypeError) as err:
        raise bad("its payload is not valid base64") from err
    if encoding == "binary/null":
        return _UNSET
    if encoding != "json/plain":
        raise bad(f"its payload's encoding is {encoding!r}: search attributes are json/plain")
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:
        raise bad("its payload is not JSON") from err


def _column_value(name: str, kind: T, value: Any) -> Any:
    def refuse() -> BadSearchAttributesError:
        shown = json.dumps(value, ensure_ascii=False)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        return BadSearchAttributesError(
            f"invalid value for search attribute {name} of type {type_name(kind)}: {shown}"
        )

    if kind == T.KEYWORD_LIST:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
            raise refuse()
        for v in items:
            check_text(v, f"a value of search attribute {name}")
        return json.dumps(items, ensure_ascii=False) if items else None
    if isinstance(value, list):  # the dict form: a list of one value
        if len(value) != 1:
            raise refuse()
        value = value[0]
    if kind in (T.KEYWORD, T.TEXT):
        if not isinstance(value, str):
            raise refuse()
        check_text(value, f"the value of search attribute {name}")
        return value if kind == T.KEYWORD else text_column_value(value)
    if kind == T.INT:
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) >= 2**63:
            raise refuse()
        return value
    if kind == T.DOUBLE:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse()
        if not math.isfinite(float(value)):
            raise refuse()
        return float(value)
    if kind == T.BOOL:
        if not isinstance(value, bool):
            raise refuse()
        return int(value)
    if kind == T.DATETIME:
        epoch = parse_datetime(value) if isinstance(value, str) else None
        if epoch is None:
            raise refuse()
        return epoch
    raise AssertionError(kind)


#: The commands that may set search attributes (a tuple: built once, not per command).
_SETS = (
    cmd.UpsertWorkflowSearchAttributes,
    cmd.StartChildWorkflowExecution,
    cmd.ContinueAsNewWorkflowExecution,
)


def bad_search_attributes(rs: RunState, commands: list[cmd.Command]) -> JsonDict | None:
    """The failure of a task whose upserts set an attribute that is not registered or a
    value that does not fit its type (None when all of them are fine)."""
    given = [c.search_attributes for c in commands if isinstance(c, _SETS) and c.search_attributes]
    if not given:
        return None
    try:
        for fields in given:
            visibility_changes(rs.tx, rs.namespace, fields, None)
    except BadSearchAttributesError as err:
        return {"message": f"BadSearchAttributes: {err}", "serverFailureInfo": {}}
    return None


def held_search_attributes(rs: RunState) -> JsonDict:
    """The search attributes ``rs`` holds now (its visibility row, with this change's)."""
    if "search_attributes" in rs.visibility:
        held = rs.visibility["search_attributes"]
    else:
        visible = rs.tx.get_visibility(rs.run_id)
        held = visible.search_attributes if visible is not None else None
    return dict(json_loads(held)) if held else {}
