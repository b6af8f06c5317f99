"""Pending activities: the store's statements for ``dn_activity_tasks`` (``StoreTx``
inherits them).

A row is an activity scheduled by a run and not ended yet: waiting for a worker, started
(its attempt's deadline in ``timeout_at``), or waiting to retry. On PostgreSQL a row read
with its run (``lock_execution_and_workflow_task``) is kept for the change's next read of it;
SQLite's writer keeps the rows between its transactions (``known_acts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .queries import ACTS_OF_RUN, DELETE_ACT, DELETE_ACTS_OF_RUN, GET_ACT_LOCK, NEXT_ACTS, Q
from .rows import ActRow, act_row, as_stored
from .schema import ACT_STARTED

Row = Any


class _Tx(Protocol):
    _prefetched_act: tuple[str, int, Row | None] | None
    known_acts: dict[str, dict[int, Any]] | None

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
    #: SQLite's writer: the rows of the attempts running, as changes before this one left
    #: them (run id -> scheduled event id -> row), as ``StoreTx.known_runs`` keeps the
    #: runs'. Only started ones (as many as the workers run at once, not a backlog); every
    #: write of ``dn_activity_tasks`` goes through the methods below, which keep it true.
    #: None elsewhere.
    known_acts: dict[str, dict[int, Any]] | None

    def insert_activity_task(self: _Tx, **values: Any) -> None:
        """Add a pending activity."""
        self._prefetched_act = None
        self._forget_ahead(values["run_id"])
        self.forget_leftovers(values["run_id"])
        self._insert("dn_activity_tasks", values)
        if self.known_acts is not None and values["state"] == ACT_STARTED:
            kept = self.known_acts.setdefault(values["run_id"], {})
            kept[values["scheduled_event_id"]] = act_row(values)

    def get_activity_task(self: _Tx, run_id: str, scheduled_event_id: int) -> Row | None:
        """A pending activity (locked on PostgreSQL)."""
        held, self._prefetched_act = self._prefetched_act, None
        if held is not None and held[0] == run_id and held[1] == scheduled_event_id:
            return held[2]
        known = self.known_acts
        if known is not None:
            kept = known.get(run_id)
            if kept is not None and scheduled_event_id in kept:
                return kept[scheduled_event_id]
        row = self._one(GET_ACT_LOCK, {"run_id": run_id, "sched": scheduled_event_id})
        if row is not None and known is not None and row.state == ACT_STARTED:
            row = known.setdefault(run_id, {})[scheduled_event_id] = ActRow._make(row)
        return row

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
        known = self.known_acts
        kept = known.get(run_id) if known is not None else None
        if known is not None and kept is not None and scheduled_event_id in kept:
            row = kept[scheduled_event_id]._replace(**as_stored("dn_activity_tasks", values))
            if row.state == ACT_STARTED:
                kept[scheduled_event_id] = row
            else:  # waits to retry, or for a worker: not kept
                del kept[scheduled_event_id]
                if not kept:
                    del known[run_id]

    def delete_activity_task(self: _Tx, run_id: str, scheduled_event_id: int) -> None:
        """Remove a pending activity."""
        self._prefetched_act = None
        self._forget_ahead(run_id)
        self._w(DELETE_ACT, {"run_id": run_id, "sched": scheduled_event_id})
        known = self.known_acts
        kept = known.get(run_id) if known is not None else None
        if known is not None and kept is not None:
            kept.pop(scheduled_event_id, None)
            if not kept:
                del known[run_id]

    def delete_activity_tasks_of_run(self: _Tx, run_id: str) -> None:
        """Remove every pending activity of a run."""
        self._prefetched_act = None
        self._forget_ahead(run_id)
        self._w(DELETE_ACTS_OF_RUN, {"run_id": run_id})
        if self.known_acts is not None:
            self.known_acts.pop(run_id, None)

    def next_activity_tasks(
        self: _Tx, namespace: str, task_queue: str, now: float, limit: int
    ) -> Sequence[Row]:
        """Ready activities of the queue, locked (``SKIP LOCKED`` on PostgreSQL)."""
        params = {"ns": namespace, "q": task_queue, "now": now, "lim": limit}
        rows: Sequence[Row] = self._q(NEXT_ACTS, params).fetchall()
        known = self.known_acts
        if known is not None and rows:  # kept: they are started next (``claim``)
            rows = [ActRow._make(row) for row in rows]
            for row in rows:
                known.setdefault(row.run_id, {})[row.scheduled_event_id] = row
        return rows
