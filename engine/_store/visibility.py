"""Visibility rows and registered search attributes: the store's statements for finding
runs (``StoreTx`` inherits them). The conditions come compiled from a List Filter
(``engine._service.visibility``): SQL made of catalogue column names and fixed operators
over ``dn_visibility AS v``, every value a bound parameter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from .queries import _EXEC_COLS, Q, _insert, _update

Row = Any

#: The run row's columns, read through the join.
_EXEC_SELECT = ", ".join(f"e.{c}" for c in _EXEC_COLS.split(", "))

LIST_SEARCH_ATTRIBUTES = Q(
    "SELECT name, value_type, column_name, created_at FROM dn_search_attributes "
    "WHERE namespace = :ns ORDER BY name"
)
ADD_SEARCH_ATTRIBUTE = Q(
    "INSERT INTO dn_search_attributes (namespace, name, value_type, column_name, created_at) "
    "VALUES (:ns, :name, :t, :col, :now)"
)
REMOVE_SEARCH_ATTRIBUTE = Q(
    "DELETE FROM dn_search_attributes WHERE namespace = :ns AND name = :name"
)


#: Text columns a listing may be ordered by: compared by code point on PostgreSQL too
#: (``COLLATE "C"``), whatever the database's collation, so that both backends order them
#: alike. (Run ids, the last tie-break, keep the column's collation: its index orders them.)
_CODE_POINT_ORDER = {"workflow_id", "workflow_type", "task_queue"}


_CUSTOM_COLUMN = re.compile(r"(keyword|text|int|double|bool|datetime|keyword_list)\d\d")


class _Tx(Protocol):
    postgres: bool

    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _w(self, q: Q, params: Any = None) -> None: ...


def _ordered(column: str, postgres: bool) -> str:
    collate = ' COLLATE "C"' if postgres and column in _CODE_POINT_ORDER else ""
    return f"v.{column}{collate}"


def _keyset(
    order: Sequence[tuple[str, bool]], after: Sequence[Any], postgres: bool
) -> tuple[str, dict[str, Any]]:
    """The condition for the rows that come after ``after`` (the last row's order
    values) in ``order``: ``(a < :k0) OR (a = :k0 AND (b < :k1 OR ...))``."""
    params = {f"k{i}": value for i, value in enumerate(after)}
    condition = ""
    for i in reversed(range(len(order))):
        column, descending = order[i]
        key = _ordered(column, postgres)
        step = f"{key} {'<' if descending else '>'} :k{i}"
        condition = step if not condition else f"{step} OR ({key} = :k{i} AND ({condition}))"
    return f"({condition})", params


#: The run columns :meth:`VisibilityQueries.list_executions` filters on.
_LIST_COLUMNS = frozenset({"workflow_id", "run_id", "workflow_type", "task_queue", "status"})


class VisibilityQueries:
    """The visibility statements of a store transaction."""

    def list_executions(
        self: _Tx,
        namespace: str,
        *,
        limit: int,
        filters: dict[str, Any] | None = None,
        before: tuple[float, str] | None = None,
    ) -> Sequence[Row]:
        """Runs, newest first (ties by run id), where each column in ``filters`` equals its
        value; with ``before=(start_time, run_id)``, only the runs listed after that one."""
        filters = filters or {}
        unknown = set(filters) - _LIST_COLUMNS
        if unknown:
            raise ValueError(f"cannot filter runs on {sorted(unknown)}")
        terms = ["namespace = :ns", *(f"{c} = :f_{c}" for c in sorted(filters))]
        params: dict[str, Any] = {
            "ns": namespace,
            "lim": limit,
            **{f"f_{c}": v for c, v in filters.items()},
        }
        if before is not None:
            terms.append("(start_time < :b_t OR (start_time = :b_t AND run_id < :b_r))")
            params.update(b_t=before[0], b_r=before[1])
        q = Q(
            f"SELECT {_EXEC_COLS} FROM dn_executions WHERE {' AND '.join(terms)} "
            "ORDER BY start_time DESC, run_id DESC LIMIT :lim"
        )
        rows: Sequence[Row] = self._q(q, params).fetchall()
        return rows

    def insert_visibility(self: _Tx, **values: Any) -> None:
        """Insert a run's visibility row."""
        self._w(_insert("dn_visibility", tuple(values)), values)

    def update_visibility(self: _Tx, run_id: str, **values: Any) -> None:
        """Change columns of a run's visibility row."""
        params = dict(values)
        params["w_run_id"] = run_id
        self._w(_update("dn_visibility", tuple(values), ("run_id",)), params)

    def get_visibility(self: _Tx, run_id: str) -> Row | None:
        """A run's visibility row."""
        return self._q(Q("SELECT * FROM dn_visibility WHERE run_id = :r"), {"r": run_id}).fetchone()

    def list_visibility(
        self: _Tx,
        namespace: str,
        where: str | None,
        params: dict[str, Any],
        order: Sequence[tuple[str, bool]],
        after: Sequence[Any] | None,
        limit: int,
    ) -> list[Row]:
        """Runs matching ``where`` in ``order``, the page after ``after``; each row is the
        run's row with its visibility's ``search_attributes`` and its order values
        (``o0``, ``o1``...) for the next page."""
        terms = ["v.namespace = :ns"]
        values = {**params, "ns": namespace, "lim": limit}
        if where:
            terms.append(where)
        if after is not None:
            condition, keys = _keyset(order, after, self.postgres)
            terms.append(condition)
            values.update(keys)
        keys_out = ", ".join(f"v.{c} AS o{i}" for i, (c, _) in enumerate(order))
        ordering = ", ".join(
            f"{_ordered(c, self.postgres)} {'DESC' if d else 'ASC'}" for c, d in order
        )
        sql = (
            f"SELECT {_EXEC_SELECT}, v.search_attributes AS visible_search_attributes, "
            f"{keys_out} FROM dn_visibility v JOIN dn_executions e ON e.run_id = v.run_id "
            f"WHERE {' AND '.join(terms)} ORDER BY {ordering} LIMIT :lim"
        )
        return list(self._q(Q(sql), values).fetchall())

    def count_visibility(
        self: _Tx, namespace: str, where: str | None, params: dict[str, Any], group_by: str | None
    ) -> list[tuple[Any, int]]:
        """How many runs match ``where``: ``[(None, n)]``, or one ``(value, n)`` per value
        of the ``group_by`` column."""
        condition = "v.namespace = :ns" + (f" AND {where}" if where else "")
        values = {**params, "ns": namespace}
        if group_by is None:
            sql = f"SELECT COUNT(*) FROM dn_visibility v WHERE {condition}"
            return [(None, int(self._q(Q(sql), values).fetchone()[0]))]
        sql = (
            f"SELECT v.{group_by}, COUNT(*) FROM dn_visibility v WHERE {condition} "
            f"GROUP BY v.{group_by} ORDER BY COUNT(*) DESC, v.{group_by}"
        )
        return [(row[0], int(row[1])) for row in self._q(Q(sql), values).fetchall()]

    def search_attributes(self: _Tx, namespace: str) -> list[Row]:
        """The custom search attributes registered in ``namespace``, by name."""
        return list(self._q(LIST_SEARCH_ATTRIBUTES, {"ns": namespace}).fetchall())

    def add_search_attribute(
        self: _Tx, namespace: str, name: str, value_type: int, column: str, now: float
    ) -> None:
        """Register a custom search attribute held in ``column``."""
        self._w(
            ADD_SEARCH_ATTRIBUTE,
            {"ns": namespace, "name": name, "t": value_type, "col": column, "now": now},
        )

    def forget_search_attribute(self: _Tx, namespace: str, name: str, column: str) -> None:
        """Remove an attribute from every run of the namespace that holds it: its column
        emptied, its name dropped from the runs' attributes JSON."""
        if not _CUSTOM_COLUMN.fullmatch(column):
            raise ValueError(f"not a custom search attribute column: {column!r}")
        holding = self._q(
            Q(
                "SELECT run_id, search_attributes FROM dn_visibility WHERE namespace = :ns "
                "AND search_attributes IS NOT NULL"
            ),
            {"ns": namespace},
        ).fetchall()
        for run_id, held in holding:
            fields = json.loads(held)
            if name in fields:
                del fields[name]
                self._w(
                    Q("UPDATE dn_visibility SET search_attributes = :j WHERE run_id = :r"),
                    {"j": json.dumps(fields) if fields else None, "r": run_id},
                )
        sql = f"UPDATE dn_visibility SET {column} = NULL WHERE namespace = :ns"
        self._w(Q(sql), {"ns": namespace})

    def remove_search_attribute(self: _Tx, namespace: str, name: str) -> None:
        """Unregister a custom search attribute (its column is cleared by the caller)."""
        self._w(REMOVE_SEARCH_ATTRIBUTE, {"ns": namespace, "name": name})
