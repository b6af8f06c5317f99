"""The rows of activity attempts, queries and updates: the store's statements for them
(``StoreTx`` inherits them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .queries import (
    ABANDON_UPDATES,
    ANSWER_QUERY,
    ATTEMPTS_OF_RUN,
    DELETE_QUERY,
    END_ATTEMPT,
    FIND_UPDATE,
    FIND_UPDATE_BY_ID,
    GET_QUERY,
    GET_UPDATE,
    INSERT_QUERY,
    INSERT_UPDATE,
    PENDING_QUERIES,
    SET_UPDATE,
    TAKE_QUERY,
    UPDATES_OF_RUN,
    Q,
)

Row = Any


class _Tx(Protocol):
    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _w(self, q: Q, params: Any = None) -> None: ...

    def _one(self, q: Q, params: Any) -> Row | None: ...

    def _insert(self, table: str, values: dict[str, Any]) -> None: ...


class MessageQueries:
    """Activity attempts, queries and updates."""

    # -- attempts ---------------------------------------------------------------------

    def insert_attempt(self: _Tx, **values: Any) -> None:
        """Record the start of an activity attempt."""
        self._insert("dn_activity_attempts", values)

    def end_attempt(
        self: _Tx,
        run_id: str,
        scheduled_event_id: int,
        attempt: int,
        *,
        ended_time: float,
        outcome: str,
        failure: str | None,
    ) -> None:
        """Record how an activity attempt ended."""
        self._w(
            END_ATTEMPT,
            {
                "run_id": run_id,
                "sched": scheduled_event_id,
                "attempt": attempt,
                "ended_time": ended_time,
                "outcome": outcome,
                "failure": failure,
            },
        )

    def attempts_of_run(self: _Tx, run_id: str) -> Sequence[Row]:
        """Every activity attempt of a run."""
        rows: Sequence[Row] = self._q(ATTEMPTS_OF_RUN, {"run_id": run_id}).fetchall()
        return rows

    # -- queries ----------------------------------------------------------------------

    def insert_query(self: _Tx, **values: Any) -> int:
        """Queue a query for a worker; return its id."""
        row = self._one(INSERT_QUERY, values)
        assert row is not None
        return int(row[0])

    def take_queries(self: _Tx, namespace: str, task_queue: str, limit: int) -> Sequence[Row]:
        """Claim pending queries of a task queue."""
        params = {"ns": namespace, "q": task_queue, "lim": limit}
        rows: Sequence[Row] = self._q(PENDING_QUERIES, params).fetchall()
        for row in rows:
            self._w(TAKE_QUERY, {"id": row.id})
        return rows

    def answer_query(self: _Tx, query_id: int, answer: str | None, failure: str | None) -> None:
        """Store a query's answer (or failure)."""
        self._w(ANSWER_QUERY, {"id": query_id, "answer": answer, "failure": failure})

    def get_query(self: _Tx, query_id: int) -> Row | None:
        """A query row."""
        return self._one(GET_QUERY, {"id": query_id})

    def delete_query(self: _Tx, query_id: int) -> None:
        """Forget a query."""
        self._w(DELETE_QUERY, {"id": query_id})

    # -- updates ----------------------------------------------------------------------

    def insert_update(self: _Tx, **values: Any) -> int:
        """Record an update request; return its row id."""
        row = self._one(INSERT_UPDATE, values)
        assert row is not None
        return int(row[0])

    def updates_of_run(self: _Tx, run_id: str, state: int) -> Sequence[Row]:
        """A run's updates in a state, oldest first."""
        rows: Sequence[Row] = self._q(UPDATES_OF_RUN, {"run_id": run_id, "state": state}).fetchall()
        return rows

    def set_update(self: _Tx, run_id: str, update_id: str, state: int, outcome: str | None) -> int:
        """Move an update (not yet finished) to ``state``; return its row id, or 0."""
        row = self._one(FIND_UPDATE, {"run_id": run_id, "update_id": update_id})
        if row is None:
            return 0
        self._w(SET_UPDATE, {"id": row.id, "state": state, "outcome": outcome})
        return int(row.id)

    def find_update_by_id(self: _Tx, run_id: str, update_id: str) -> Row | None:
        """A run's update with this update id, in any state."""
        return self._one(FIND_UPDATE_BY_ID, {"run_id": run_id, "update_id": update_id})

    def abandon_updates(self: _Tx, run_id: str, outcome: str, accepted_outcome: str) -> list[int]:
        """Mark the run's unfinished updates abandoned, with ``accepted_outcome`` for those
        that were accepted and ``outcome`` for the others; their row ids."""
        params = {"run_id": run_id, "outcome": outcome, "accepted_outcome": accepted_outcome}
        rows = self._q(ABANDON_UPDATES, params).fetchall()
        return [int(r[0]) for r in rows]

    def get_update(self: _Tx, row_id: int) -> Row | None:
        """An update row."""
        return self._one(GET_UPDATE, {"id": row_id})
