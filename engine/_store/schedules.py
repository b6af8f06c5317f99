"""Schedules: the store's statements for them (``StoreTx`` inherits them).

A schedule is one row of ``dn_schedules`` (its definition and its state as JSON), its
timers in ``dn_timers`` (kind ``"schedule"``, ``run_id`` the schedule's key) and its action
log in ``dn_schedule_actions``. Every change to a schedule starts by locking its row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from .queries import GET_TIMER, Q

Row = Any

#: The kind of a schedule's timers in dn_timers.
SCHEDULE_TIMER = "schedule"

_COLS = (
    "namespace, schedule_id, schedule_key, definition, info, memo, search_attributes, "
    "created_at, updated_at, conflict_token"
)
GET_SCHEDULE = Q(f"SELECT {_COLS} FROM dn_schedules WHERE namespace = :ns AND schedule_id = :id")
LOCK_SCHEDULE = Q(GET_SCHEDULE.sqlite, pg_suffix=" FOR UPDATE")
LOCK_SCHEDULE_BY_KEY = Q(
    f"SELECT {_COLS} FROM dn_schedules WHERE schedule_key = :key", pg_suffix=" FOR UPDATE"
)
INSERT_SCHEDULE = Q(
    f"INSERT INTO dn_schedules ({_COLS}) VALUES (:ns, :id, :key, :definition, :info, :memo, "
    ":sa, :t, NULL, 1) ON CONFLICT (namespace, schedule_id) DO NOTHING"
)
UPDATE_SCHEDULE = Q(
    "UPDATE dn_schedules SET definition = :definition, info = :info, "
    "search_attributes = :sa, updated_at = :updated, conflict_token = :token "
    "WHERE namespace = :ns AND schedule_id = :id"
)
DELETE_SCHEDULE = Q("DELETE FROM dn_schedules WHERE namespace = :ns AND schedule_id = :id")
LIST_SCHEDULES = Q(
    f"SELECT {_COLS} FROM dn_schedules WHERE namespace = :ns AND schedule_id > :after "
    "ORDER BY schedule_id LIMIT :lim"
)
DUE_SCHEDULE_TIMERS = Q(
    f"SELECT id, run_id FROM dn_timers WHERE kind = '{SCHEDULE_TIMER}' AND fire_at <= :now "
    "ORDER BY fire_at LIMIT :lim"
)
SCHEDULE_TIMERS = Q(
    f"SELECT id, fire_at FROM dn_timers WHERE run_id = :key AND kind = '{SCHEDULE_TIMER}' "
    "ORDER BY fire_at"
)
DELETE_SCHEDULE_TIMERS = Q(
    f"DELETE FROM dn_timers WHERE run_id = :key AND kind = '{SCHEDULE_TIMER}'"
)

_ACTION_COLS = (
    "namespace, schedule_id, nominal_time, scheduled_time, decided_time, outcome, source, "
    "overlap, workflow_id, started_run_id, detail"
)
#: The columns of an action log row, as :meth:`ScheduleQueries.schedule_actions` reads them.
ACTION_FIELDS = ("id", *_ACTION_COLS.split(", "))
INSERT_ACTION = Q(
    f"INSERT INTO dn_schedule_actions ({_ACTION_COLS}) VALUES (:ns, :id, :nominal, "
    ":scheduled, :decided, :outcome, :source, :overlap, :workflow_id, :run_id, :detail)"
)
ACTIONS = Q(
    f"SELECT id, {_ACTION_COLS} FROM dn_schedule_actions WHERE namespace = :ns "
    "AND schedule_id = :id AND id > :after ORDER BY id LIMIT :lim"
)
NEWEST_ACTIONS = Q(
    f"SELECT id, {_ACTION_COLS} FROM dn_schedule_actions WHERE namespace = :ns "
    "AND schedule_id = :id ORDER BY id DESC LIMIT :lim"
)
#: The id of the newest row past the ``keep`` newest: it and those before it go.
ACTION_CUT = Q(
    "SELECT id FROM dn_schedule_actions WHERE namespace = :ns AND schedule_id = :id "
    "ORDER BY id DESC LIMIT 1 OFFSET :keep"
)
TRIM_ACTIONS = Q(
    "DELETE FROM dn_schedule_actions WHERE namespace = :ns AND schedule_id = :id AND id <= :cut"
)
DELETE_ACTIONS = Q("DELETE FROM dn_schedule_actions WHERE namespace = :ns AND schedule_id = :id")


class _Tx(Protocol):
    postgres: bool
    _prefetched_timer: tuple[int, Row | None] | None

    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _q_many(self, *statements: tuple[Q, Any]) -> list[list[Row]]: ...

    def _w(self, q: Q, params: Any = None) -> None: ...

    def _one(self, q: Q, params: Any) -> Row | None: ...


class ScheduleQueries:
    """Schedule rows, their timers and their action log."""

    _prefetched_timer: tuple[int, Row | None] | None

    def get_schedule(self: _Tx, namespace: str, schedule_id: str, *, lock: bool = False) -> Row:
        """The schedule's row (locked for this transaction with ``lock``), or None."""
        return self._one(
            LOCK_SCHEDULE if lock else GET_SCHEDULE, {"ns": namespace, "id": schedule_id}
        )

    def lock_schedule_by_key(self: _Tx, key: str, timer: int | None = None) -> Row | None:
        """The row of the schedule with this key, locked, or None (deleted). Given
        ``timer``, a timer id, that timer's row is read after the lock for the next
        ``take_timer`` (on PostgreSQL in the same round trip)."""
        if timer is None or not self.postgres:
            return self._one(LOCK_SCHEDULE_BY_KEY, {"key": key})
        found, held = self._q_many((LOCK_SCHEDULE_BY_KEY, {"key": key}), (GET_TIMER, {"id": timer}))
        self._prefetched_timer = (timer, held[0] if held else None)
        return found[0] if found else None

    def insert_schedule(self: _Tx, **values: Any) -> bool:
        """Create a schedule; False if the id is taken in the namespace (nothing changed)."""
        return bool(self._q(INSERT_SCHEDULE, values).rowcount)

    def update_schedule(self: _Tx, **values: Any) -> None:
        """Write a schedule's definition, state, search attributes and conflict token."""
        self._w(UPDATE_SCHEDULE, values)

    def delete_schedule(self: _Tx, namespace: str, schedule_id: str, key: str) -> None:
        """Remove a schedule, its timers and its action log (the runs it started stay)."""
        params = {"ns": namespace, "id": schedule_id}
        self._w(DELETE_SCHEDULE, params)
        self._w(DELETE_ACTIONS, params)
        self._w(DELETE_SCHEDULE_TIMERS, {"key": key})

    def list_schedules(self: _Tx, namespace: str, after: str, limit: int) -> Sequence[Row]:
        """The namespace's schedules with ids after ``after``, by id, at most ``limit``."""
        return list(self._q(LIST_SCHEDULES, {"ns": namespace, "after": after, "lim": limit}))

    def due_schedule_timers(self: _Tx, now: float, limit: int) -> list[tuple[int, str]]:
        """(timer id, schedule key) of schedule timers due at ``now``, earliest first."""
        rows = self._q(DUE_SCHEDULE_TIMERS, {"now": now, "lim": limit}).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows]

    def schedule_timers(self: _Tx, key: str) -> list[tuple[int, float]]:
        """(timer id, due time) of a schedule's timers."""
        return [(int(r[0]), float(r[1])) for r in self._q(SCHEDULE_TIMERS, {"key": key})]

    def delete_schedule_timers(self: _Tx, key: str) -> None:
        """Remove every timer of a schedule."""
        self._w(DELETE_SCHEDULE_TIMERS, {"key": key})

    def insert_schedule_action(self: _Tx, **values: Any) -> None:
        """Log what became of one action time."""
        self._w(INSERT_ACTION, values)

    def schedule_actions(
        self: _Tx, namespace: str, schedule_id: str, after: int, limit: int, newest: bool = False
    ) -> Sequence[Row]:
        """A schedule's logged actions with ids after ``after`` (with ``newest``: its
        ``limit`` newest), oldest first."""
        params = {"ns": namespace, "id": schedule_id, "after": after, "lim": limit}
        if newest:
            return list(reversed(self._q(NEWEST_ACTIONS, params).fetchall()))
        return list(self._q(ACTIONS, params))

    def trim_schedule_actions(self: _Tx, namespace: str, schedule_id: str, keep: int) -> None:
        """Keep only the ``keep`` newest logged actions of a schedule."""
        params: dict[str, Any] = {"ns": namespace, "id": schedule_id, "keep": keep}
        cut = self._one(ACTION_CUT, params)
        if cut is not None:
            self._w(TRIM_ACTIONS, {"ns": namespace, "id": schedule_id, "cut": int(cut[0])})
