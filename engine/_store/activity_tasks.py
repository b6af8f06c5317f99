"""Pending activities: the store's statements for ``dn_activity_tasks`` (``StoreTx``
inherits them).

A row is an activity scheduled by a run and not ended yet: waiting for a worker, started
(its attempt's deadline in ``timeout_at``), or waiting to retry. On PostgreSQL a row read
with its run (``lock_execution_and_workflow_task``) is kept for the change's next read of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .queries import ACTS_OF_RUN, DELETE_ACT, DELETE_ACTS_OF_RUN, GET_ACT_LOCK, NEXT_ACTS, Q

Row = Any


class _Tx(Protocol):
    _prefetched_act: tuple[str, int, Row | None] | None

    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _w(self, q: Q, params: Any = None) -> None: ...

    def _one(self, q: Q, params: Any) -> Row | None: ...

    def _insert(self, table: str, values: dict[str, Any]) -> None: ...

    def _update(self, table: str, where: dict[str, Any], values: dict[str, Any]) -> None: ...

    def _forget_ahead(self, run_id: str) -> None: ...

    def forget_leftovers(self, run_id: str) -> None: ...


class ActivityQueries:
    """The statements of ``dn_activity_tasks``."""

    _prefetched_act: tuple[str, int, Row | None] | None

    def insert_activity_task(self: _Tx, **values: Any) -> None:
        """Add a pending activity."""
        self._prefetched_act = None
        self._forget_ahead(values["run_id"])
        self.forget_leftovers(values["run_id"])
        self._insert("dn_activity_tasks", values)

    def get_activity_task(self: _Tx, run_id: str, scheduled_event_id: int) -> Row | None:
        """A pending activity (locked on PostgreSQL)."""
        held, self._prefetched_act = self._prefetched_act, None
        if held is not None and held[0] == run_id and held[1] == scheduled_event_id:
            return held[2]
        return self._one(GET_ACT_LOCK, {"run_id": run_id, "sched": scheduled_event_id})

    def activity_tasks_of_run(self: _Tx, run_id: str) -> Sequence[Row]:
        """All pending activities of a run."""
        rows: Sequence[Row] = self._q(ACTS_OF_RUN, {"run_id": run_id}).fetchall()
        return rows

    def update_activity_task(
        self: _Tx, run_id: str, scheduled_event_id: int, **values: Any
    ) -> None:
        """Change a pending activity (claiming one does, without locking its run)."""
        self._prefetched_act = None
        self._forget_ahead(run_id)
        self._update(
            "dn_activity_tasks",
            {"run_id": run_id, "scheduled_event_id": scheduled_event_id},
            values,
        )

    def delete_activity_task(self: _Tx, run_id: str, scheduled_event_id: int) -> None:
        """Remove a pending activity."""
        self._prefetched_act = None
        self._forget_ahead(run_id)
        self._w(DELETE_ACT, {"run_id": run_id, "sched": scheduled_event_id})

    def delete_activity_tasks_of_run(self: _Tx, run_id: str) -> None:
        """Remove every pending activity of a run."""
        self._prefetched_act = None
        self._forget_ahead(run_id)
        self._w(DELETE_ACTS_OF_RUN, {"run_id": run_id})

    def next_activity_tasks(
        self: _Tx, namespace: str, task_queue: str, now: float, limit: int
    ) -> Sequence[Row]:
        """Ready activities of the queue, locked (``SKIP LOCKED`` on PostgreSQL)."""
        params = {"ns": namespace, "q": task_queue, "now": now, "lim": limit}
        rows: Sequence[Row] = self._q(NEXT_ACTS, params).fetchall()
        return rows
