"""Finding runs: Temporal's List Filter (read by ``engine._model.list_filter``) checked
against each attribute's type and written as parameterised SQL over ``dn_visibility``.

Every value of a filter is a bound parameter: the SQL text is made only of column names
from the catalogue below and fixed operators, never of anything the filter says.

Semantics, as Temporal's visibility has them (checked against ``temporal server
start-dev``, whose visibility is SQL too):

- ``!=``, ``NOT IN``, ``NOT BETWEEN`` and ``NOT`` on a run without the attribute: SQL's
  three-valued logic, so such a run matches neither ``X = v`` nor ``X != v``; except for
  Text and KeywordList, whose matches are yes-or-no (a run without the attribute matches
  ``X != v``).
- Text ``=`` matches a run whose text holds any of the value's words (case-insensitive,
  whole words), as a full-text match does; KeywordList ``=`` matches a list holding the value.
- ExecutionStatus takes its names (``'Running'``, ``'ContinuedAsNew'``) or numbers;
  datetimes are RFC 3339 (``'2026-12-01T09:00:00Z'``) or nanoseconds since the epoch;
  ExecutionDuration is nanoseconds or a Go duration (``'1h30m'``, ``'250ms'``).
- Runs are listed open ones first, then closed ones by close time, newest first.
  ``ORDER BY`` takes the attributes that every run has (``StartTime``, ``CloseTime``,
  ``ExecutionTime``, ``WorkflowId``, ``WorkflowType``, ``RunId``, ``TaskQueue``,
  ``ExecutionStatus``), ascending or descending. (Temporal with Elasticsearch sorts on more;
  its SQL visibility refuses ``ORDER BY`` altogether.) ``GROUP BY`` in a count takes
  ``ExecutionStatus``, as Temporal's does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._model import list_filter as lf
from .._model.durations import go_duration
from .._model.limits import check_text, quote
from .._model.list_filter import ListFilterError
from ..common import SearchAttributeIndexedValueType as T
from ..common import WorkflowExecutionStatus

#: ExecutionStatus names as Temporal's queries spell them.
STATUS_NAMES = {
    "Running": WorkflowExecutionStatus.RUNNING,
    "Completed": WorkflowExecutionStatus.COMPLETED,
    "Failed": WorkflowExecutionStatus.FAILED,
    "Canceled": WorkflowExecutionStatus.CANCELED,
    "Terminated": WorkflowExecutionStatus.TERMINATED,
    "ContinuedAsNew": WorkflowExecutionStatus.CONTINUED_AS_NEW,
    "TimedOut": WorkflowExecutionStatus.TIMED_OUT,
}
STATUS_OF = {int(v): k for k, v in STATUS_NAMES.items()}

_TYPE_NAMES = {
    T.TEXT: "Text",
    T.KEYWORD: "Keyword",
    T.INT: "Int",
    T.DOUBLE: "Double",
    T.BOOL: "Bool",
    T.DATETIME: "Datetime",
    T.KEYWORD_LIST: "KeywordList",
}


#: The type names, in IndexedValueType order.
TYPE_NAMES = tuple(_TYPE_NAMES[t] for t in sorted(_TYPE_NAMES))


def type_name(value_type: int) -> str:
    """Temporal's name of a search attribute type (``Keyword``, ``KeywordList``...) for
    either enum of them (``engine.common.SearchAttributeIndexedValueType`` or
    ``engine.operator.IndexedValueType``) or its number."""
    return _TYPE_NAMES[T(int(value_type))]


@dataclass(frozen=True)
class Attribute:
    """A search attribute a filter may name: its type and its dn_visibility column
    (None: a Temporal attribute this engine never sets, so it is always absent)."""

    name: str
    value_type: T
    column: str | None
    custom: bool = False


#: Temporal's system search attributes this engine keeps (and their columns).
SYSTEM: dict[str, Attribute] = {
    a.name: a
    for a in (
        Attribute("WorkflowId", T.KEYWORD, "workflow_id"),
        Attribute("RunId", T.KEYWORD, "run_id"),
        Attribute("WorkflowType", T.KEYWORD, "workflow_type"),
        Attribute("ExecutionStatus", T.KEYWORD, "status"),
        Attribute("StartTime", T.DATETIME, "start_time"),
        Attribute("CloseTime", T.DATETIME, "close_time"),
        Attribute("ExecutionTime", T.DATETIME, "execution_time"),
        Attribute("ExecutionDuration", T.INT, "execution_duration"),
        Attribute("HistoryLength", T.INT, "history_length"),
        Attribute("HistorySizeBytes", T.INT, "history_size_bytes"),
        Attribute("TaskQueue", T.KEYWORD, "task_queue"),
        Attribute("ParentWorkflowId", T.KEYWORD, "parent_workflow_id"),
        Attribute("ParentRunId", T.KEYWORD, "parent_run_id"),
        Attribute("RootWorkflowId", T.KEYWORD, "root_workflow_id"),
        Attribute("RootRunId", T.KEYWORD, "root_run_id"),
        Attribute("TemporalChangeVersion", T.KEYWORD_LIST, "change_version"),
        Attribute("BuildIds", T.KEYWORD_LIST, "build_ids"),
        Attribute("TemporalScheduledById", T.KEYWORD, "scheduled_by_id"),
        Attribute("TemporalScheduledStartTime", T.DATETIME, "scheduled_start_time"),
        Attribute("TemporalSchedulePaused", T.BOOL, "schedule_paused"),
        # Temporal has these too; nothing here sets them (batches, worker deployments).
        Attribute("BatcherNamespace", T.KEYWORD, None),
        Attribute("BatcherUser", T.KEYWORD, None),
        Attribute("BinaryChecksums", T.KEYWORD_LIST, None),
        Attribute("StateTransitionCount", T.INT, None),
        Attribute("TemporalNamespaceDivision", T.KEYWORD, None),
        Attribute("TemporalPauseInfo", T.KEYWORD_LIST, None),
        Attribute("TemporalReportedProblems", T.KEYWORD_LIST, None),
        Attribute("TemporalWorkerDeployment", T.KEYWORD, None),
        Attribute("TemporalWorkerDeploymentVersion", T.KEYWORD, None),
        Attribute("TemporalWorkflowVersioningBehavior", T.KEYWORD, None),
        Attribute("TemporalUsedWorkerDeploymentVersions", T.KEYWORD_LIST, None),
        Attribute("TemporalExternalPayloadCount", T.INT, None),
        Attribute("TemporalExternalPayloadSizeBytes", T.INT, None),
    )
}

#: What ORDER BY takes: attributes every run has.
ORDERABLE = {
    "StartTime": "start_time",
    "CloseTime": "close_order",
    "ExecutionTime": "execution_time",
    "WorkflowId": "workflow_id",
    "WorkflowType": "workflow_type",
    "RunId": "run_id",
    "TaskQueue": "task_queue",
    "ExecutionStatus": "status",
}

#: The ORDER BY columns that hold text (the others hold numbers).
TEXT_ORDER_COLUMNS = {"workflow_id", "workflow_type", "task_queue", "run_id"}

#: The listing order when the filter gives none: open runs first, then by close time.
DEFAULT_ORDER: tuple[tuple[str, bool], ...] = (
    ("close_order", True),
    ("start_time", True),
    ("run_id", True),
)


@dataclass(frozen=True)
class Compiled:
    """A filter as SQL: ``where`` (over alias ``v``, None: every run) with its
    parameters, the ORDER BY columns (``(column, descending)``, ending with run_id), and
    the GROUP BY column for a count."""

    where: str | None
    params: dict[str, Any]
    order: tuple[tuple[str, bool], ...]
    group_by: str | None


def compile_filter(
    query: str | None,
    custom: Mapping[str, Attribute],
    *,
    postgres: bool,
    counting: bool = False,
    namespace: str = "default",
) -> Compiled:
    """``query`` as SQL over ``dn_visibility AS v``, with the namespace's registered
    ``custom`` attributes. Raises :class:`ListFilterError` (an InvalidArgumentError)."""
    parsed = lf.parse(query)
    writer = _Writer(custom, postgres, namespace)
    where = writer.expr(parsed.where) if parsed.where is not None else None
    if counting and parsed.order_by:
        raise ListFilterError("a count takes no ORDER BY", parsed.order_by[0].name.column)
    if not counting and parsed.group_by:
        raise ListFilterError(
            "GROUP BY is for counting (count_workflows), not listing",
            parsed.group_by[0].column,
        )
    group = None
    if parsed.group_by:
        if len(parsed.group_by) > 1 or parsed.group_by[0].text != "ExecutionStatus":
            bad = next((g for g in parsed.group_by if g.text != "ExecutionStatus"), None)
            at = bad or parsed.group_by[1]
            raise ListFilterError(
                f"GROUP BY takes ExecutionStatus only (as Temporal's count), not {at.text!r}",
                at.column,
            )
        group = "status"
    order = DEFAULT_ORDER
    if parsed.order_by:
        items = []
        for item in parsed.order_by:
            column = ORDERABLE.get(item.name.text)
            if column is None:
                writer.attribute(item.name)  # unknown names say so first
                raise ListFilterError(
                    f"cannot order by {item.name.text}: ORDER BY takes " + ", ".join(ORDERABLE),
                    item.name.column,
                )
            items.append((column, item.descending))
        if not any(c == "run_id" for c, _ in items):
            items.append(("run_id", items[-1][1]))
        order = tuple(items)
    return Compiled(where, writer.params, order, group)


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration (``1h30m``, ``250ms``, ``1.5s``) or ``HH:MM:SS``; None if
    it is neither."""
    text = text.strip()
    clock = re.fullmatch(r"(\d+):([0-5]?\d):([0-5]?\d(?:\.\d+)?)", text)
    if clock:
        return int(clock[1]) * 3600 + int(clock[2]) * 60 + float(clock[3])
    sign = -1.0 if text.startswith("-") else 1.0
    seconds = go_duration(text.lstrip("+-"))
    return None if seconds is None else sign * seconds


def parse_datetime(text: str) -> float | None:
    """Epoch seconds of an RFC 3339 time (a date, a time and a zone); None if it is not."""
    if not re.fullmatch(
        r"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d(:\d\d(\.\d+)?)?([Zz]|[+-]\d\d:?\d\d)", text
    ):
        return None
    try:
        return datetime.fromisoformat(text.replace("z", "Z")).timestamp()
    except ValueError:
        return None


def words(text: str) -> list[str]:
    """The words a Text value is matched by: runs of letters and digits, lower case."""
    return re.findall(r"\w+", text.lower())


def text_column_value(text: str) -> str:
    """What a Text attribute's column holds: its words, space separated, with a space at
    each end (so ``LIKE '% word %'`` finds whole words)."""
    return " " + " ".join(words(text)) + " "


class _Writer:
    def __init__(self, custom: Mapping[str, Attribute], postgres: bool, namespace: str) -> None:
        self.custom = custom
        self.postgres = postgres
        self.namespace = namespace
        self.params: dict[str, Any] = {}

    def param(self, value: Any) -> str:
        key = f"q{len(self.params)}"
        self.params[key] = value
        return f":{key}"

    def attribute(self, name: lf.Name) -> Attribute:
        found = SYSTEM.get(name.text) or self.custom.get(name.text)
        if found is None:
            raise ListFilterError(
                f"unknown search attribute {name.text!r}: names are case sensitive; a custom "
                f"one must be registered in namespace {self.namespace!r} first (durable "
                f"operator search-attribute create --name {name.text} --type Keyword)",
                name.column,
            )
        return found

    def expr(self, node: lf.Expr) -> str:
        if isinstance(node, lf.And):
            return "(" + " AND ".join(self.expr(i) for i in node.items) + ")"
        if isinstance(node, lf.Or):
            return "(" + " OR ".join(self.expr(i) for i in node.items) + ")"
        if isinstance(node, lf.Not):
            return f"(NOT {self.expr(node.item)})"
        attr = self.attribute(node.name)
        column = None if attr.column is None else f"v.{attr.column}"
        kind = attr.value_type
        if isinstance(node, lf.IsNull):
            if column is None:
                return "(1 = 1)" if not node.negated else "(1 = 0)"
            if kind == T.KEYWORD_LIST:
                absent = f"({column} IS NULL OR {column} = '[]')"
                return f"(NOT {absent})" if node.negated else absent
            return f"({column} IS {'NOT ' if node.negated else ''}NULL)"
        if isinstance(node, lf.Compare):
            self._check_op(attr, node.op, node.name)
            value = self.value(attr, node.value)
            if column is None:
                if kind in (T.TEXT, T.KEYWORD_LIST):  # yes-or-no matches
                    return "(1 = 0)" if node.op == "=" else "(1 = 1)"
                return _UNKNOWN
            if kind == T.TEXT:
                match = self._text_match(column, node.value, value)
                return match if node.op == "=" else f"(NOT {match})"
            if kind == T.KEYWORD_LIST:
                match = self._list_has(column, value)
                return match if node.op == "=" else f"(NOT {match})"
            if node.op in ("=", "!="):
                return f"({column} {node.op} {self.param(value)})"
            return f"({self._ranged(column, kind)} {node.op} {self.param(value)})"
        if isinstance(node, lf.Member):
            self._check_op(attr, "IN", node.name)
            values = [self.value(attr, v) for v in node.values]
            if column is None:
                if kind == T.KEYWORD_LIST:
                    return "(1 = 1)" if node.negated else "(1 = 0)"
                return _UNKNOWN
            if kind == T.KEYWORD_LIST:
                anyof = "(" + " OR ".join(self._list_has(column, v) for v in values) + ")"
                return f"(NOT {anyof})" if node.negated else anyof
            listed = ", ".join(self.param(v) for v in values)
            return f"({column} {'NOT ' if node.negated else ''}IN ({listed}))"
        if isinstance(node, lf.Between):
            self._check_op(attr, "BETWEEN", node.name)
            low, high = self.value(attr, node.low), self.value(attr, node.high)
            if column is None:
                return _UNKNOWN
            negated = "NOT " if node.negated else ""
            ranged = self._ranged(column, kind)
            return f"({ranged} {negated}BETWEEN {self.param(low)} AND {self.param(high)})"
        if isinstance(node, lf.StartsWith):
            self._check_op(attr, "STARTS_WITH", node.name)
            prefix = self.value(attr, node.prefix)
            if column is None:
                return _UNKNOWN
            cut = "left" if self.postgres else "substr"
            start = "" if self.postgres else "1, "
            length = self.param(len(prefix))
            return f"({cut}({column}, {start}{length}) = {self.param(prefix)})"
        raise AssertionError(f"unknown filter node {node!r}")

    def _ranged(self, column: str, kind: T) -> str:
        # Keywords are ordered by code point on both backends (PostgreSQL's collation of
        # the database could order them otherwise).
        if self.postgres and kind == T.KEYWORD:
            return f'{column} COLLATE "C"'
        return column

    def _check_op(self, attr: Attribute, op: str, name: lf.Name) -> None:
        kind = attr.value_type
        allowed = {
            T.TEXT: {"=", "!="},
            T.KEYWORD_LIST: {"=", "!=", "IN"},
            T.BOOL: {"=", "!=", "IN"},
        }.get(kind)
        if attr.name == "ExecutionStatus":
            allowed = {"=", "!=", "IN"}
        if kind in (T.INT, T.DOUBLE, T.DATETIME):
            allowed = {"=", "!=", ">", ">=", "<", "<=", "IN", "BETWEEN"}
        if allowed is not None and op not in allowed:
            raise ListFilterError(
                f"operator {op!r} is not supported for {attr.name}, of type "
                f"{type_name(kind)}; it takes " + ", ".join(sorted(allowed)),
                name.column,
            )

    def value(self, attr: Attribute, value: lf.Value) -> Any:
        if value.kind == "string":
            check_text(value.raw, f"a value in the list filter (column {value.column})")
        try:
            return self._value(attr, value)
        except ListFilterError:
            raise
        except (OverflowError, ValueError) as err:  # a number too large for its type
            raise ListFilterError(
                f"invalid value for search attribute {attr.name} of type "
                f"{type_name(attr.value_type)}: {quote(str(value.raw), 40)} (out of range)",
                value.column,
            ) from err

    def _value(self, attr: Attribute, value: lf.Value) -> Any:
        kind, raw = value.kind, value.raw
        if kind == "name":
            raise ListFilterError(
                f"{raw!r} on the right of a comparison is read as a name; quote a value "
                f"('{raw}'): one attribute cannot be compared with another",
                value.column,
            )

        def refuse(why: str = "") -> ListFilterError:
            shown = repr(raw) if kind == "string" else str(raw).lower()
            return ListFilterError(
                f"invalid value for search attribute {attr.name} of type "
                f"{type_name(attr.value_type)}: {shown}{why}",
                value.column,
            )

        t = attr.value_type
        if attr.name == "ExecutionStatus":
            if kind == "number" and isinstance(raw, int) and raw in STATUS_OF:
                return raw
            if kind == "string" and raw in STATUS_NAMES:
                return int(STATUS_NAMES[raw])
            if kind == "string" and raw.startswith("WORKFLOW_EXECUTION_STATUS_"):
                member = WorkflowExecutionStatus.__members__.get(raw[26:])
                if member is not None:  # the enum's full name, as Temporal's parser takes
                    return int(member)
            raise refuse(" (ExecutionStatus is one of " + ", ".join(STATUS_NAMES) + ")")
        if attr.name == "ExecutionDuration":
            if kind == "number" and isinstance(raw, int):
                return raw / 1e9
            seconds = parse_go_duration(raw) if kind == "string" else None
            if seconds is None:
                raise refuse(" (nanoseconds, or a duration such as '90s', '1h30m' or '00:01:30')")
            return seconds
        if t in (T.KEYWORD, T.TEXT, T.KEYWORD_LIST):
            if kind != "string":
                raise refuse(" (quote it)")
            return raw
        if t == T.INT:
            whole = kind == "number" and (isinstance(raw, int) or float(raw).is_integer())
            if whole and abs(int(raw)) < 2**63:
                return int(raw)
            raise refuse(" (a whole number)")
        if t == T.DOUBLE:
            if kind == "number":
                return float(raw)
            raise refuse(" (a number)")
        if t == T.BOOL:
            if kind == "bool":
                return int(raw)
            if kind == "string" and raw.lower() in ("true", "false"):
                return int(raw.lower() == "true")
            raise refuse(" (true or false)")
        if t == T.DATETIME:
            if kind == "number" and isinstance(raw, int):
                return raw / 1e9
            epoch = parse_datetime(raw) if kind == "string" else None
            if epoch is None:
                raise refuse(" (an RFC 3339 time such as '2026-12-01T09:00:00Z')")
            return epoch
        raise AssertionError(t)

    def _text_match(self, column: str, value: lf.Value, text: str) -> str:
        found = words(text)
        if not found:
            raise ListFilterError(f"{text!r} has no words to match", value.column)
        likes = " OR ".join(
            f"{column} LIKE {self.param('% ' + _escape_like(w) + ' %')} ESCAPE '\\'" for w in found
        )
        return f"({column} IS NOT NULL AND ({likes}))"

    def _list_has(self, column: str, value: str) -> str:
        if self.postgres:
            return (
                f"({column} IS NOT NULL AND CAST({column} AS jsonb) @> "
                f"jsonb_build_array(CAST({self.param(value)} AS text)))"
            )
        return f"EXISTS (SELECT 1 FROM json_each({column}) WHERE value = {self.param(value)})"


#: A comparison with an attribute no run has: unknown (SQL's NULL), so that NOT of it is
#: unknown too, as for a custom attribute a run does not have.
_UNKNOWN = "(NULL = 1)"


def _escape_like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
