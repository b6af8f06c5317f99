"""Runs and their closing events read many at a time (``StoreTx`` inherits these).

A result waited for in another process than the one that closes its run reads the run
when it begins to wait and again when the close wakes it. Many waiters wake together (one
commit closes twenty runs), so their reads go in one transaction
(``engine._service.close_reads``), and here in a few statements however many they are:
the runs by id in one, the last event of each closed run by its key in another (a closed
run's last event is the one that closed it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

from .queries import _EXEC_COLS, Q
from .schema import EXEC_RUNNING

Row = Any

#: Ids per statement: SQLite allows 32,766 parameters, PostgreSQL 65,535.
CHUNK = 500

_CLOSED_AMONG = f"SELECT run_id FROM dn_executions WHERE status != {EXEC_RUNNING} AND run_id IN"
_RUNS_BY_ID = f"SELECT {_EXEC_COLS} FROM dn_executions WHERE run_id IN"
#: (A row value compared with a list must be compared with a subquery on SQLite: VALUES.)
_EVENTS_BY_KEY = (
    "SELECT run_id, event_id, event_time, event_type, attributes, extra "
    "FROM dn_history_events WHERE (run_id, event_id) IN (VALUES"
)


class _Tx(Protocol):
    def _q(self, q: Q, params: Any = None) -> Any: ...


def _marks(n: int, prefix: str = "r") -> str:
    return ", ".join(f":{prefix}{j}" for j in range(n))


class CloseQueries:
    """Runs, their statuses and closing events, for many runs in a few statements."""

    def closed_among(self: _Tx, run_ids: Sequence[str]) -> list[str]:
        """The runs among ``run_ids`` that are no longer running."""
        closed: list[str] = []
        for i in range(0, len(run_ids), CHUNK):
            chunk = list(run_ids[i : i + CHUNK])
            params = {f"r{j}": r for j, r in enumerate(chunk)}
            q = Q(f"{_CLOSED_AMONG} ({_marks(len(chunk))})")
            closed += [str(r[0]) for r in self._q(q, params).fetchall()]
        return closed

    def runs_by_id(self: _Tx, run_ids: Collection[str]) -> dict[str, Row]:
        """The runs among ``run_ids`` that exist, by id (read without locking them)."""
        ids = list(dict.fromkeys(run_ids))
        found: dict[str, Row] = {}
        for i in range(0, len(ids), CHUNK):
            chunk = ids[i : i + CHUNK]
            params = {f"r{j}": r for j, r in enumerate(chunk)}
            q = Q(f"{_RUNS_BY_ID} ({_marks(len(chunk))})")
            for row in self._q(q, params).fetchall():
                found[str(row.run_id)] = row
        return found

    def events_by_key(self: _Tx, keys: Mapping[str, int]) -> dict[str, Row]:
        """The event ``keys[run_id]`` of each run, by run id (those that exist), with its
        ``run_id``. Nothing is pending in a read, the one kind of transaction this is for
        (a write would have to write its pending events first)."""
        items = list(keys.items())
        found: dict[str, Row] = {}
        for i in range(0, len(items), CHUNK):
            chunk = items[i : i + CHUNK]
            params: dict[str, Any] = {}
            for j, (run_id, event_id) in enumerate(chunk):
                params[f"r{j}"] = run_id
                params[f"e{j}"] = event_id
            pairs = ", ".join(f"(:r{j}, :e{j})" for j in range(len(chunk)))
            for row in self._q(Q(f"{_EVENTS_BY_KEY} {pairs})"), params).fetchall():
                found[str(row.run_id)] = row
        return found
