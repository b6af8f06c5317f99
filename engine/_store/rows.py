"""The rows the store hands out: named columns on both backends (``row.run_id``)."""

from __future__ import annotations

import operator
import sqlite3
from collections import namedtuple
from collections.abc import Mapping
from typing import Any, Protocol

import sqlalchemy as sa

from .schema import activity_tasks, executions, metadata

Row = Any  # SQLAlchemy rows, read by column name


class _Cursor(Protocol):
    def fetchone(self) -> Row | None: ...
    def fetchall(self) -> list[Row]: ...
    def execute(self, sql: str, params: Any = ...) -> object: ...
    def executemany(self, sql: str, params: Any) -> object: ...
    def nextset(self) -> bool | None: ...  # PostgreSQL's (psycopg) only
    @property
    def rowcount(self) -> int: ...


class SqliteRow(sqlite3.Row):
    """A SQLite row that also reads columns as attributes (``row.run_id``)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except IndexError:
            raise AttributeError(name) from None


def _column_properties() -> None:
    # Reading ``row.run_id`` through __getattr__ first fails the normal lookup: the
    # columns of the schema get C-level getters instead (the hot path reads ~100 per run).
    # A schema column the query did not select raises IndexError (not AttributeError), so
    # rows are read for the columns their query names, never probed with getattr/hasattr:
    # column() is the probe that works on every row type. (A getter turning IndexError into
    # AttributeError would add a Python call to each of the ~80 reads a workflow makes.)
    names = {c.name for table in metadata.tables.values() for c in table.columns}
    for name in sorted(names):
        if not hasattr(SqliteRow, name):
            setattr(SqliteRow, name, property(operator.itemgetter(name)))


_column_properties()


def column(row: Row, name: str, default: Any = None) -> Any:
    """``row.<name>``, or ``default`` when the row has no such column, on every row type
    the store hands out (:class:`SqliteRow`, psycopg's named tuples) and on the plain
    objects the service builds for new runs. ``getattr(row, name, default)`` is not that:
    a :class:`SqliteRow` raises IndexError for a schema column its query did not select.
    """
    try:
        return getattr(row, name)
    except (AttributeError, IndexError):
        return default


def _kinds(table: sa.Table) -> tuple[frozenset[str], frozenset[str]]:
    cols = table.columns
    return (
        frozenset(c.name for c in cols if isinstance(c.type, sa.Float)),
        # SQLite keeps a Boolean as an integer (only the activity rows, kept on SQLite
        # alone, have one).
        frozenset(c.name for c in cols if isinstance(c.type, (sa.Integer, sa.Boolean))),
    )


#: Per table, the columns the database reads back as floats, and as integers.
_KINDS = {table.name: _kinds(table) for table in metadata.tables.values()}

#: A run's row as a change leaves it, kept for the change that follows it
#: (``StoreTx.known_runs``): a named tuple, so a change can leave a copy with its values.
_EXEC_NAMES: list[str] = [c.name for c in executions.columns]
ExecRow: Any = namedtuple("ExecRow", _EXEC_NAMES)  # type: ignore[misc]
#: A pending activity's row, kept the same way (SQLite only: ``StoreTx.known_acts``).
_ACT_NAMES: list[str] = [c.name for c in activity_tasks.columns]
ActRow: Any = namedtuple("ActRow", _ACT_NAMES)  # type: ignore[misc]


def as_stored(table: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` for columns of ``table`` as the database gives them back: an integer
    written to a float column reads as a float, a bool or a whole float written to an
    integer column as an integer (for a row kept instead of read again)."""
    floats, ints = _KINDS[table]
    out = dict(values)
    for name, value in out.items():
        if value is None:
            continue
        if value.__class__ is float:
            if name in ints and value.is_integer():
                out[name] = int(value)
        elif name in floats and isinstance(value, int):
            out[name] = float(value)
        elif name in ints and isinstance(value, bool):
            out[name] = int(value)
    return out


def exec_row(values: Mapping[str, Any]) -> Any:
    """The row of a run just inserted with ``values`` (columns not given are NULL)."""
    stored = as_stored("dn_executions", values)
    return ExecRow._make([stored.get(name) for name in _EXEC_NAMES])


def act_row(values: Mapping[str, Any]) -> Any:
    """The row of an activity just inserted with ``values`` (columns not given are NULL)."""
    stored = as_stored("dn_activity_tasks", values)
    return ActRow._make([stored.get(name) for name in _ACT_NAMES])
