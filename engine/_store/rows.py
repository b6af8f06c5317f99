"""The rows the store hands out: named columns on both backends (``row.run_id``)."""

from __future__ import annotations

import operator
import sqlite3
from typing import Any, Protocol

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
    from .schema import metadata

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
