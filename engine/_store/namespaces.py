"""Namespaces and retention: the store's statements for them (``StoreTx`` inherits them).

Deleting a run past its namespace's retention removes every row that names it, in every
table that holds per-run state, in one transaction: the history, the tasks and timers,
the attempts, queries and updates, the request ids and the visibility row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Protocol

from .queries import Q
from .schema import EXEC_RUNNING

Row = Any

_NS_COLS = (
    "name, retention_seconds, created_at, namespace_id, description, owner_email, data, updated_at"
)
GET_NAMESPACE = Q(f"SELECT {_NS_COLS} FROM dn_namespaces WHERE name = :n")
LOCK_NAMESPACE = Q(f"SELECT {_NS_COLS} FROM dn_namespaces WHERE name = :n", pg_suffix=" FOR UPDATE")
GET_NAMESPACE_BY_ID = Q(f"SELECT {_NS_COLS} FROM dn_namespaces WHERE namespace_id = :i")
LIST_NAMESPACES = Q(
    f"SELECT {_NS_COLS} FROM dn_namespaces WHERE name > :after ORDER BY name LIMIT :lim"
)
INSERT_NAMESPACE = Q(
    "INSERT INTO dn_namespaces (name, retention_seconds, created_at, namespace_id, "
    "description, owner_email, data, updated_at) VALUES (:n, :r, :t, :i, :d, :e, :j, :t) "
    "ON CONFLICT (name) DO NOTHING"
)
UPDATE_NAMESPACE = Q(
    "UPDATE dn_namespaces SET retention_seconds = :r, description = :d, owner_email = :e, "
    "data = :j, updated_at = :t WHERE name = :n"
)
#: Closed runs whose close time is before the cutoff, oldest first (the listing index:
#: an open run's close_order is after every close time, so it is never picked).
EXPIRED_RUNS = Q(
    "SELECT run_id, history_length FROM dn_visibility WHERE namespace = :ns "
    "AND close_order < :cutoff ORDER BY close_order LIMIT :lim"
)

#: Every table with per-run rows, the run row's own last.
RUN_TABLES = (
    "dn_history_events",
    "dn_buffered_events",
    "dn_workflow_tasks",
    "dn_activity_tasks",
    "dn_timers",
    "dn_activity_attempts",
    "dn_queries",
    "dn_updates",
    "dn_requests",
    "dn_visibility",
    "dn_executions",
)


#: Run ids per statement of a deletion (a batch is cut into statements of this many).
_CHUNK = 50


@lru_cache(maxsize=32)
def _delete_runs(table: str) -> Q:
    ids = ", ".join(f":r{i}" for i in range(_CHUNK))
    return Q(f"DELETE FROM {table} WHERE run_id IN ({ids})")


#: The closed runs of a chunk, their rows locked (PostgreSQL) in run id order: taken
#: before any of their other rows, as every other transaction takes a run's row first.
_LOCK_CLOSED = Q(
    "SELECT run_id FROM dn_executions WHERE run_id IN ("
    + ", ".join(f":r{i}" for i in range(_CHUNK))
    + f") AND status <> {EXEC_RUNNING} ORDER BY run_id",
    pg_suffix=" FOR UPDATE",
)


def _chunks(run_ids: Sequence[str]) -> list[dict[str, str]]:
    """Parameters of each chunk, the last one padded by repeating its last id."""
    out = []
    for start in range(0, len(run_ids), _CHUNK):
        part = list(run_ids[start : start + _CHUNK])
        part += [part[-1]] * (_CHUNK - len(part))
        out.append({f"r{i}": run_id for i, run_id in enumerate(part)})
    return out


class _Tx(Protocol):
    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _w(self, q: Q, params: Any = None) -> None: ...

    def _one(self, q: Q, params: Any) -> Row | None: ...

    def _forget_ahead(self, run_id: str) -> None: ...

    known_runs: dict[str, tuple[Any, Any]] | None
    known_acts: dict[str, dict[int, Any]] | None


class NamespaceQueries:
    """Namespace rows, and deleting the runs retention is over for."""

    def get_namespace(self: _Tx, name: str, *, lock: bool = False) -> Row | None:
        """The namespace row (locked for an update on PostgreSQL with ``lock``), or None."""
        return self._one(LOCK_NAMESPACE if lock else GET_NAMESPACE, {"n": name})

    def get_namespace_by_id(self: _Tx, namespace_id: str) -> Row | None:
        """The namespace row with this id, or None."""
        return self._one(GET_NAMESPACE_BY_ID, {"i": namespace_id})

    def list_namespaces(self: _Tx, after: str, limit: int) -> Sequence[Row]:
        """Namespaces named after ``after``, by name, at most ``limit``."""
        return list(self._q(LIST_NAMESPACES, {"after": after, "lim": limit}).fetchall())

    def insert_namespace(
        self: _Tx,
        name: str,
        retention_seconds: float,
        now: float,
        *,
        description: str = "",
        owner_email: str = "",
        data: str = "{}",
    ) -> bool:
        """Create the namespace; False if one of that name exists (nothing changed)."""
        cur = self._q(
            INSERT_NAMESPACE,
            {
                "n": name,
                "r": retention_seconds,
                "t": now,
                "i": str(uuid.uuid4()),
                "d": description,
                "e": owner_email,
                "j": data,
            },
        )
        return bool(cur.rowcount)

    def update_namespace(
        self: _Tx,
        name: str,
        retention_seconds: float,
        description: str,
        owner_email: str,
        data: str,
        now: float,
    ) -> None:
        """Write the namespace's changeable fields."""
        self._w(
            UPDATE_NAMESPACE,
            {
                "n": name,
                "r": retention_seconds,
                "d": description,
                "e": owner_email,
                "j": data,
                "t": now,
            },
        )

    def expired_runs(self: _Tx, namespace: str, cutoff: float, limit: int) -> list[tuple[str, int]]:
        """Up to ``limit`` closed runs of ``namespace`` that closed before ``cutoff``,
        oldest first, with their history lengths."""
        params = {"ns": namespace, "cutoff": cutoff, "lim": limit}
        return [(str(r[0]), int(r[1] or 0)) for r in self._q(EXPIRED_RUNS, params).fetchall()]

    def delete_closed_runs(self: _Tx, run_ids: Sequence[str]) -> int:
        """Remove every row of those of these runs that are closed, in every table;
        returns how many runs were removed (a run another transaction removed first, or
        an open one, is skipped)."""
        locked: list[str] = []
        for params in _chunks(sorted(set(run_ids))):
            locked += [str(r[0]) for r in self._q(_LOCK_CLOSED, params).fetchall()]
        for run_id in locked:  # nothing read ahead of them, or kept of them, holds any more
            self._forget_ahead(run_id)
            if self.known_runs is not None:
                self.known_runs.pop(run_id, None)
            if self.known_acts is not None:
                self.known_acts.pop(run_id, None)
        for params in _chunks(locked):
            for table in RUN_TABLES:
                self._w(_delete_runs(table), params)
        return len(locked)
