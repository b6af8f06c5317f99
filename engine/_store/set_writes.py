"""PostgreSQL: the writes a transaction held back, sent as few statements as they allow.

A write whose result nobody reads waits for the transaction's next read or its commit
(``StoreTx._w``) and goes with it in one query. A batch of the PostgreSQL writers
(``engine._store.pg_writer``) holds back the writes of twenty changes or more, most of
them a few statements on different rows: each run's task row deleted, its run row and its
visibility row updated, an activity's row and its attempt written. Sent one by one, each
costs the writer thread about 13 microseconds of Python in psycopg and the server a
statement of its own. Here the writes of one statement become one statement, their
parameters one JSON array of objects (``json_to_recordset``, typed as the columns), where
that changes nothing they do:

- Writes to one table keep their order: a group takes a write to its table only while no
  write of another statement to that table came after the group began.
- Writes to different tables may go in another order than they were made. Every statement
  declared here names its rows by their own columns and reads no other table, and the
  schema has no foreign keys or triggers, so such writes do not see each other. Nor does
  any of them wait for another transaction in a way the writes after it depend on: they
  write rows this transaction has locked (with their run, or by a read ``FOR UPDATE``),
  new rows, or rows only a transaction holding the run's lock writes. The exception is
  an activity being claimed, which locks the activity's row and not its run, and may add
  a heartbeat timer: deleting a run's activities waits for such a claim, and the delete
  of the run's timers after it must see that timer (``RunState.close``). Those two deletes
  are not declared, so they keep their places. (A timer deleted by id may wait for a
  claim that deletes the same schedule-to-start timer; the firing code reads the activity
  right after, and a read sends everything held back before it.)
- An update or a delete joins a group only if its key (the parameters of its ``WHERE``)
  is not in the group yet, so that a set statement changes each row at most once, as the
  writes one by one would have done in turn.
- A write of a statement not declared here keeps its place: whatever was held back before
  it is sent before it, whatever came after goes after it.
- A group of one write is sent as it was made.

A set statement is more lenient than psycopg with a value of the wrong type (a missing
parameter is NULL, an integral float in an integer column is stored as an integer, a
list is stored as its JSON text); the engine passes none. A float written to an integer
column is stored as a write of its own would store it when it is integral and within
2**53; beyond that, and for halves (rounded away from zero, not to even), it is not.
Rows with serial ids get them in the order of the JSON array, the order in which
``json_to_recordset`` returns them.

The statements that may go together: the inserts and updates :mod:`engine._store.queries`
builds for a set of columns (``_insert``, ``_update``), and the commonest fixed ones
(``_FORMS``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy.dialects import postgresql

try:  # installed with the engine's PostgreSQL extra (pyproject.toml)
    import orjson
except ImportError:  # pragma: no cover - the standard library's encoder does the same
    orjson = None  # type: ignore[assignment]

from .queries import (
    BUFFER_EVENT,
    DELETE_ACT,
    DELETE_BUFFERED,
    DELETE_BUFFERED_ONE,
    DELETE_TIMER,
    DELETE_WFT,
    END_ATTEMPT,
    INSERT_EVENT,
    INSERT_TIMER,
    WRITE_SHAPES,
)
from .schema import metadata

_PG = postgresql.dialect()  # type: ignore[no-untyped-call]


class SetForm:
    """How writes of one statement are sent together: ``sql`` takes their parameters as
    one JSON array of objects (``rows``); ``key`` names the parameters that pick an
    update's or a delete's rows."""

    __slots__ = ("key", "sql", "table")

    def __init__(self, table: str, sql: str, key: tuple[str, ...] = ()) -> None:
        self.table = table
        self.sql = sql
        self.key = key


@cache
def _column_type(table: str, column: str) -> str:
    return str(metadata.tables[table].c[column].type.compile(dialect=_PG))


#: Integer columns' types: a value written to one is read as NUMERIC and cast (see
#: :func:`_source`).
_INTEGERS = frozenset({"SMALLINT", "INTEGER", "BIGINT"})


def _source(table: str, columns: Mapping[str, str], keys: Collection[str] = ()) -> str:
    """The rows of the ``rows`` parameter, one field per parameter, typed as the column it
    is written to or compared with (``columns``: parameter -> column). A value written to
    an integer column is read as NUMERIC and cast to the column's type where it is used
    (:func:`_value`), so that a float such as ``3.0`` is stored as a write of its own
    would store it (PostgreSQL rounds a double assigned to an integer column) rather than
    failing; the ``keys``, compared with their columns, keep the columns' types."""
    fields = []
    for p, c in columns.items():
        kind = _column_type(table, c)
        fields.append(f'"{p}" {"NUMERIC" if kind in _INTEGERS and p not in keys else kind}')
    return f"json_to_recordset(%(rows)s::json) AS v({', '.join(fields)})"


def _value(table: str, column: str, param: str) -> str:
    """How the set statement reads the value of ``param`` written to ``column``."""
    kind = _column_type(table, column)
    return f'v."{param}"::{kind}' if kind in _INTEGERS else f'v."{param}"'


def insert_form(table: str, columns: Sequence[str]) -> SetForm:
    """Inserts of ``columns`` (each given by the parameter of its name)."""
    source = _source(table, {c: c for c in columns})
    values = ", ".join(_value(table, c, c) for c in columns)
    return SetForm(
        table, f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {source}"
    )


def update_form(
    table: str, sets: Mapping[str, str], where: Mapping[str, str], also: str = ""
) -> SetForm:
    """Updates that set columns (column -> parameter) of the rows whose ``where`` columns
    equal their parameters, and for which ``also`` holds (its columns qualified ``x.``)."""
    columns = {p: c for c, p in sets.items()} | {p: c for c, p in where.items()}
    source = _source(table, columns, keys=where.values())
    assignments = ", ".join(f"{c} = {_value(table, c, p)}" for c, p in sets.items())
    cond = " AND ".join(f'x.{c} = v."{p}"' for c, p in where.items())
    sql = f"UPDATE {table} AS x SET {assignments} FROM {source} WHERE {cond}"
    if also:
        sql += f" AND {also}"
    return SetForm(table, sql, tuple(where.values()))


def delete_form(table: str, where: Mapping[str, str]) -> SetForm:
    """Deletes of the rows whose ``where`` columns (column -> parameter) equal their
    parameters."""
    source = _source(table, {p: c for c, p in where.items()}, keys=where.values())
    cond = " AND ".join(f'x.{c} = v."{p}"' for c, p in where.items())
    return SetForm(
        table, f"DELETE FROM {table} AS x USING {source} WHERE {cond}", tuple(where.values())
    )


#: The form of each statement, by its PostgreSQL text (None: its writes go one by one).
_FORMS: dict[str, SetForm | None] = {
    INSERT_EVENT.pg: insert_form(
        "dn_history_events",
        ("run_id", "event_id", "event_time", "event_type", "attributes", "extra"),
    ),
    DELETE_WFT.pg: delete_form("dn_workflow_tasks", {"run_id": "run_id"}),
    DELETE_ACT.pg: delete_form(
        "dn_activity_tasks", {"run_id": "run_id", "scheduled_event_id": "sched"}
    ),
    INSERT_TIMER.pg: insert_form(
        "dn_timers", ("run_id", "kind", "ref", "attempt", "fire_at", "data")
    ),
    DELETE_TIMER.pg: delete_form("dn_timers", {"id": "id"}),
    BUFFER_EVENT.pg: insert_form(
        "dn_buffered_events", ("run_id", "event_time", "event_type", "attributes")
    ),
    DELETE_BUFFERED.pg: delete_form("dn_buffered_events", {"run_id": "run_id"}),
    DELETE_BUFFERED_ONE.pg: delete_form("dn_buffered_events", {"id": "id"}),
    END_ATTEMPT.pg: update_form(
        "dn_activity_attempts",
        {"ended_time": "ended_time", "outcome": "outcome", "failure": "failure"},
        {"run_id": "run_id", "scheduled_event_id": "sched", "attempt": "attempt"},
        also="x.ended_time IS NULL",
    ),
}
#: At most this many statements' forms (or their absence) are remembered (visibility
#: updates, for one, have a statement per set of search attributes).
_KEPT = 1024


def form_of(text: str) -> SetForm | None:
    """The form writes of ``text`` go together in, or None."""
    try:
        return _FORMS[text]
    except KeyError:
        pass
    shape = WRITE_SHAPES.get(text)
    if shape is None:
        if len(_FORMS) < _KEPT:
            _FORMS[text] = None
        return None
    kind, table, columns, where = shape
    try:
        if kind == "insert":
            form: SetForm | None = insert_form(table, columns)
        else:
            form = update_form(table, {c: c for c in columns}, {c: f"w_{c}" for c in where})
    except KeyError:  # a table or column the declared schema lacks: one by one
        form = None
    if len(_FORMS) < _KEPT:
        _FORMS[text] = form
    return form


class _Group:
    __slots__ = ("form", "keys", "rows", "text")

    def __init__(self, form: SetForm, text: str) -> None:
        self.form = form
        self.text = text
        self.rows: list[dict[str, Any]] = []
        self.keys: set[tuple[Any, ...]] = set()


def set_statements(writes: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The statements that do what ``writes`` (statement text, parameters: a dict, a list
    of dicts for several rows, or None) do, in the order to send them (see the module's
    docstring for what may go together and in which order)."""
    out: list[tuple[str, Any]] = []
    groups: list[_Group] = []
    last: dict[str, _Group] = {}  # each table's latest group
    for text, params in writes:
        form = form_of(text) if params else None
        if form is None:
            _emit(groups, out)
            groups.clear()
            last.clear()
            out.append((text, params))
            continue
        for row in params if isinstance(params, list) else (params,):
            group = last.get(form.table)
            key = tuple(row[p] for p in form.key) if form.key else ()
            if group is None or group.form is not form or (key and key in group.keys):
                group = _Group(form, text)
                groups.append(group)
                last[form.table] = group
            group.rows.append(row)
            if key:
                group.keys.add(key)
    _emit(groups, out)
    return out


#: How a PostgreSQL ``StoreTx`` opens its transaction: as the first statement of the first
#: query it sends (see :func:`own_begin`). A read sees one snapshot and may not write.
BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"


def begin_sql(read_only: bool) -> str:
    """The ``BEGIN`` of a store transaction (a read: :data:`BEGIN_READ`)."""
    return BEGIN_READ if read_only else BEGIN_WRITE


def own_begin(driver: Any) -> None:
    """Put the psycopg connection ``driver`` (idle, just taken from the pool) in autocommit,
    so that the transaction's ``BEGIN`` goes with its first statements in one query.
    Outside autocommit psycopg sends a ``BEGIN`` of its own before the first statement
    and waits for the answer: a round trip more per transaction (a lone activity step
    took three; two now). The pool puts the connection back out of autocommit when it
    returns (``engine._store.dialects``), for its other users.

    A connection that is not idle cannot change its mode: it is treated as lost (an
    ``OperationalError``), so the store drops it and runs the transaction again."""
    if driver.autocommit:
        return
    import psycopg

    try:
        driver.autocommit = True
    except psycopg.ProgrammingError as err:
        raise psycopg.OperationalError(f"a connection that cannot begin: {err}") from err


def in_transaction(cur: Any) -> bool:
    """Whether the psycopg cursor's connection is inside a transaction (a statement of a
    query whose ``BEGIN`` ran failed: in one; the server refused the whole text, a syntax
    error: not, and in autocommit the next statements would each commit on their own)."""
    from psycopg.pq import TransactionStatus

    return bool(cur.connection.info.transaction_status != TransactionStatus.IDLE)


def _emit(groups: list[_Group], out: list[tuple[str, Any]]) -> None:
    for group in groups:
        rows = group.rows
        if len(rows) == 1:
            out.append((group.text, rows[0]))
            continue
        try:
            out.append((group.form.sql, {"rows": _json(rows)}))
        except (TypeError, ValueError):  # a value JSON cannot carry: as they were made
            out.append((group.text, rows))


#: Floats as ``repr`` writes them, which PostgreSQL reads back to the same double; a
#: value JSON has no word for (bytes, infinity) raises. Text as it is (psycopg encodes the
#: statement's parameter as it would each value), and no check for cycles (rows are flat
#: dicts): 13 % less time than the defaults.
_stdlib_json = json.JSONEncoder(
    separators=(",", ":"), allow_nan=False, ensure_ascii=False, check_circular=False
).encode

#: What orjson must not turn into JSON itself, so that a value the standard encoder
#: refuses is refused here too and its rows go as they were made: dates and times,
#: dataclasses. (orjson refuses integers past 64 bits, which the standard encoder
#: writes: their rows go as they were made, which stores the same.)
_ORJSON_REFUSES = (
    0 if orjson is None else orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _orjson(rows: list[dict[str, Any]]) -> str:
    """The rows as :data:`_stdlib_json` writes them, four times as fast (orjson: compact,
    text unescaped, each float the shortest text that reads back as the same double; an
    exponent may be written ``1e16`` where ``repr`` writes ``1e+16``, which PostgreSQL
    reads the same). orjson writes a float that is not finite as ``null``: those are
    refused here, as the standard encoder refuses them."""
    for row in rows:
        for value in row.values():
            if type(value) is float and not math.isfinite(value):
                raise ValueError(f"{value!r} has no JSON form")
    return orjson.dumps(rows, option=_ORJSON_REFUSES).decode()


_json = _stdlib_json if orjson is None else _orjson
