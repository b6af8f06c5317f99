"""Every SQL statement the engine runs, as methods of one transaction (:class:`StoreTx`).

The service composes these into state transitions; it never writes SQL itself. Rows come
back as SQLAlchemy ``Row`` objects (attribute access by column name).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa

from .schema import (
    ACT_SCHEDULED,
    ACT_STARTED,
    WFT_SCHEDULED,
    WFT_STARTED,
    activity_attempts,
    activity_tasks,
    buffered_events,
    executions,
    history_events,
    namespaces,
    timers,
    workflow_tasks,
)

Row = Any  # SQLAlchemy rows, read by column name

_E = executions.c
_WT = workflow_tasks.c
_AT = activity_tasks.c
_T = timers.c


class StoreTx:
    """One open transaction. Methods run SQL on it; wake-up channels are collected."""

    def __init__(self, conn: sa.Connection, *, postgres: bool) -> None:
        self.conn = conn
        self.postgres = postgres
        #: Channels to notify once this transaction has committed.
        self.wakeups: set[str] = set()

    # -- wake-ups ---------------------------------------------------------------------

    def wake(self, channel: str) -> None:
        """Ask for ``channel`` to be notified after commit (in every process)."""
        self.wakeups.add(channel)

    # -- namespaces -------------------------------------------------------------------

    def ensure_namespace(self, name: str, retention_seconds: float, now: float) -> None:
        """Create the namespace if it does not exist (safe when racing other processes)."""
        insert: Any
        if self.postgres:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        self.conn.execute(
            insert(namespaces)
            .values(name=name, retention_seconds=retention_seconds, created_at=now)
            .on_conflict_do_nothing(index_elements=["name"])
        )

    def get_namespace(self, name: str) -> Row | None:
        """The namespace row, or None."""
        return self.conn.execute(sa.select(namespaces).where(namespaces.c.name == name)).first()

    # -- executions -------------------------------------------------------------------

    def insert_execution(self, **values: Any) -> None:
        """Insert a run."""
        self.conn.execute(executions.insert().values(**values))

    def lock_execution(self, run_id: str) -> Row | None:
        """Read a run and lock it for this transaction (every change to a run starts here)."""
        stmt = sa.select(executions).where(_E.run_id == run_id)
        if self.postgres:
            stmt = stmt.with_for_update()
        return self.conn.execute(stmt).first()

    def get_execution(self, run_id: str) -> Row | None:
        """Read a run without locking it."""
        return self.conn.execute(sa.select(executions).where(_E.run_id == run_id)).first()

    def find_open_run(self, namespace: str, workflow_id: str, *, lock: bool = False) -> Row | None:
        """The open run with this workflow id, if any."""
        stmt = sa.select(executions).where(
            _E.namespace == namespace, _E.workflow_id == workflow_id, _E.status == 1
        )
        if lock and self.postgres:
            stmt = stmt.with_for_update()
        return self.conn.execute(stmt).first()

    def find_latest_run(self, namespace: str, workflow_id: str) -> Row | None:
        """The most recently started run with this workflow id, open or closed."""
        return self.conn.execute(
            sa.select(executions)
            .where(_E.namespace == namespace, _E.workflow_id == workflow_id)
            .order_by(_E.start_time.desc())
            .limit(1)
        ).first()

    def update_execution(self, run_id: str, **values: Any) -> None:
        """Update columns of a run."""
        self.conn.execute(executions.update().where(_E.run_id == run_id).values(**values))

    def list_executions(
        self, namespace: str, *, limit: int, workflow_id: str | None = None
    ) -> Sequence[Row]:
        """Runs, newest first."""
        stmt = sa.select(executions).where(_E.namespace == namespace)
        if workflow_id is not None:
            stmt = stmt.where(_E.workflow_id == workflow_id)
        return self.conn.execute(stmt.order_by(_E.start_time.desc()).limit(limit)).all()

    # -- history ----------------------------------------------------------------------

    def insert_events(self, run_id: str, events: Sequence[tuple[int, float, str, str]]) -> None:
        """Append events ``(event_id, event_time, event_type, attributes_json)``."""
        if not events:
            return
        self.conn.execute(
            history_events.insert(),
            [
                {"run_id": run_id, "event_id": i, "event_time": t, "event_type": k, "attributes": a}
                for i, t, k, a in events
            ],
        )

    def read_events(self, run_id: str, first_event_id: int = 1) -> Sequence[Row]:
        """Events of a run from ``first_event_id`` on, in order."""
        c = history_events.c
        return self.conn.execute(
            sa.select(c.event_id, c.event_time, c.event_type, c.attributes)
            .where(c.run_id == run_id, c.event_id >= first_event_id)
            .order_by(c.event_id)
        ).all()

    def last_event(self, run_id: str) -> Row | None:
        """The newest event of a run."""
        c = history_events.c
        return self.conn.execute(
            sa.select(c.event_id, c.event_time, c.event_type, c.attributes)
            .where(c.run_id == run_id)
            .order_by(c.event_id.desc())
            .limit(1)
        ).first()

    def read_event(self, run_id: str, event_id: int) -> Row | None:
        """One event."""
        c = history_events.c
        return self.conn.execute(
            sa.select(c.event_id, c.event_time, c.event_type, c.attributes).where(
                c.run_id == run_id, c.event_id == event_id
            )
        ).first()

    # -- buffered events --------------------------------------------------------------

    def buffer_event(self, run_id: str, event_time: float, event_type: str, attrs: str) -> None:
        """Keep an event aside until the running workflow task ends."""
        self.conn.execute(
            buffered_events.insert().values(
                run_id=run_id, event_time=event_time, event_type=event_type, attributes=attrs
            )
        )

    def take_buffered(self, run_id: str) -> Sequence[Row]:
        """Remove and return a run's buffered events, oldest first."""
        c = buffered_events.c
        rows = self.conn.execute(
            sa.select(c.id, c.event_time, c.event_type, c.attributes)
            .where(c.run_id == run_id)
            .order_by(c.id)
        ).all()
        if rows:
            self.conn.execute(buffered_events.delete().where(c.run_id == run_id))
        return rows

    def has_buffered(self, run_id: str) -> bool:
        """Whether a run has buffered events."""
        c = buffered_events.c
        return (
            self.conn.execute(sa.select(c.id).where(c.run_id == run_id).limit(1)).first()
            is not None
        )

    # -- workflow tasks ---------------------------------------------------------------

    def get_workflow_task(self, run_id: str) -> Row | None:
        """The pending workflow task of a run."""
        return self.conn.execute(sa.select(workflow_tasks).where(_WT.run_id == run_id)).first()

    def insert_workflow_task(self, **values: Any) -> None:
        """Schedule a workflow task (at most one per run)."""
        self.conn.execute(workflow_tasks.insert().values(**values))

    def update_workflow_task(self, run_id: str, **values: Any) -> None:
        """Change a run's workflow task."""
        self.conn.execute(workflow_tasks.update().where(_WT.run_id == run_id).values(**values))

    def delete_workflow_task(self, run_id: str) -> None:
        """Remove a run's workflow task."""
        self.conn.execute(workflow_tasks.delete().where(_WT.run_id == run_id))

    def next_workflow_task(self, namespace: str, task_queue: str, now: float) -> str | None:
        """Pick a ready workflow task of the queue and lock its run; return the run id.

        On PostgreSQL the run row is taken with ``FOR UPDATE SKIP LOCKED``: pollers on other
        machines pass over it, and the lock order (run first) matches every other change.
        """
        stmt = (
            sa.select(_E.run_id)
            .select_from(executions.join(workflow_tasks, _WT.run_id == _E.run_id))
            .where(
                _WT.namespace == namespace,
                _WT.task_queue == task_queue,
                _WT.state == WFT_SCHEDULED,
                _WT.visible_at <= now,
            )
            .order_by(_WT.visible_at)
            .limit(1)
        )
        if self.postgres:
            stmt = stmt.with_for_update(of=executions, skip_locked=True)
        value = self.conn.execute(stmt).scalar()
        return None if value is None else str(value)

    def expedite_workflow_tasks(self, namespace: str, workflow_type: str, now: float) -> set[str]:
        """Make backed-off workflow tasks of a workflow type ready now; return their queues."""
        runs = sa.select(_E.run_id).where(
            _E.namespace == namespace, _E.workflow_type == workflow_type, _E.status == 1
        )
        waiting = _WT.run_id.in_(runs) & (_WT.state == WFT_SCHEDULED) & (_WT.visible_at > now)
        queues = {
            str(q)
            for q in self.conn.execute(
                sa.select(_WT.task_queue).where(waiting).distinct()
            ).scalars()
        }
        if queues:
            self.conn.execute(workflow_tasks.update().where(waiting).values(visible_at=now))
        return queues

    # -- activity tasks ---------------------------------------------------------------

    def insert_activity_task(self, **values: Any) -> None:
        """Add a pending activity."""
        self.conn.execute(activity_tasks.insert().values(**values))

    def get_activity_task(self, run_id: str, scheduled_event_id: int) -> Row | None:
        """A pending activity."""
        stmt = sa.select(activity_tasks).where(
            _AT.run_id == run_id, _AT.scheduled_event_id == scheduled_event_id
        )
        if self.postgres:
            stmt = stmt.with_for_update()
        return self.conn.execute(stmt).first()

    def activity_tasks_of_run(self, run_id: str) -> Sequence[Row]:
        """All pending activities of a run."""
        return self.conn.execute(
            sa.select(activity_tasks).where(_AT.run_id == run_id).order_by(_AT.scheduled_event_id)
        ).all()

    def update_activity_task(self, run_id: str, scheduled_event_id: int, **values: Any) -> None:
        """Change a pending activity."""
        self.conn.execute(
            activity_tasks.update()
            .where(_AT.run_id == run_id, _AT.scheduled_event_id == scheduled_event_id)
            .values(**values)
        )

    def delete_activity_task(self, run_id: str, scheduled_event_id: int) -> None:
        """Remove a pending activity."""
        self.conn.execute(
            activity_tasks.delete().where(
                _AT.run_id == run_id, _AT.scheduled_event_id == scheduled_event_id
            )
        )

    def delete_activity_tasks_of_run(self, run_id: str) -> None:
        """Remove every pending activity of a run."""
        self.conn.execute(activity_tasks.delete().where(_AT.run_id == run_id))

    def next_activity_tasks(
        self, namespace: str, task_queue: str, now: float, limit: int
    ) -> Sequence[Row]:
        """Ready activities of the queue, locked (``SKIP LOCKED`` on PostgreSQL)."""
        stmt = (
            sa.select(activity_tasks)
            .where(
                _AT.namespace == namespace,
                _AT.task_queue == task_queue,
                _AT.state == ACT_SCHEDULED,
                _AT.visible_at <= now,
            )
            .order_by(_AT.visible_at)
            .limit(limit)
        )
        if self.postgres:
            stmt = stmt.with_for_update(skip_locked=True)
        return self.conn.execute(stmt).all()

    # -- timers -----------------------------------------------------------------------

    def insert_timer(
        self, run_id: str, kind: str, ref: int, attempt: int, fire_at: float, data: str | None
    ) -> None:
        """Add a durable timer."""
        self.conn.execute(
            timers.insert().values(
                run_id=run_id, kind=kind, ref=ref, attempt=attempt, fire_at=fire_at, data=data
            )
        )

    def delete_timers(self, run_id: str, kinds: Iterable[str], ref: int | None = None) -> None:
        """Remove a run's timers of the given kinds (and reference)."""
        stmt = timers.delete().where(_T.run_id == run_id, _T.kind.in_(list(kinds)))
        if ref is not None:
            stmt = stmt.where(_T.ref == ref)
        self.conn.execute(stmt)

    def delete_timers_of_run(self, run_id: str) -> None:
        """Remove all timers of a run."""
        self.conn.execute(timers.delete().where(_T.run_id == run_id))

    def take_timer(self, timer_id: int) -> Row | None:
        """Delete a timer and return it, or None if another host already took it."""
        row = self.conn.execute(sa.select(timers).where(_T.id == timer_id)).first()
        if row is not None:
            self.conn.execute(timers.delete().where(_T.id == timer_id))
        return row

    def due_timers(self, now: float, limit: int) -> Sequence[Row]:
        """Timers due at ``now``, earliest first (unlocked: claim each with take_timer)."""
        return self.conn.execute(
            sa.select(_T.id, _T.run_id).where(_T.fire_at <= now).order_by(_T.fire_at).limit(limit)
        ).all()

    def next_timer_at(self) -> float | None:
        """When the earliest timer is due, or None."""
        value = self.conn.execute(sa.select(sa.func.min(_T.fire_at))).scalar()
        return None if value is None else float(value)

    def timers_of_run(self, run_id: str) -> Sequence[Row]:
        """A run's timers."""
        return self.conn.execute(
            sa.select(timers).where(_T.run_id == run_id).order_by(_T.fire_at)
        ).all()

    # -- attempts ---------------------------------------------------------------------

    def insert_attempt(self, **values: Any) -> None:
        """Record the start of an activity attempt."""
        self.conn.execute(activity_attempts.insert().values(**values))

    def end_attempt(
        self, run_id: str, scheduled_event_id: int, attempt: int, **values: Any
    ) -> None:
        """Record how an activity attempt ended."""
        c = activity_attempts.c
        self.conn.execute(
            activity_attempts.update()
            .where(
                c.run_id == run_id,
                c.scheduled_event_id == scheduled_event_id,
                c.attempt == attempt,
                c.ended_time.is_(None),
            )
            .values(**values)
        )

    def attempts_of_run(self, run_id: str) -> Sequence[Row]:
        """Every activity attempt of a run."""
        c = activity_attempts.c
        return self.conn.execute(
            sa.select(activity_attempts)
            .where(c.run_id == run_id)
            .order_by(c.scheduled_event_id, c.attempt)
        ).all()

    # -- time skipping ----------------------------------------------------------------

    def consistent_snapshot(self) -> None:
        """Make the following reads see one snapshot (PostgreSQL; SQLite already does)."""
        if self.postgres:
            self.conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def work_in_progress(self, now: float) -> bool:
        """Whether any task is ready or running (the time-skipping clock waits for it)."""
        wft = self.conn.execute(
            sa.select(_WT.run_id)
            .where(
                sa.or_(
                    _WT.state == WFT_STARTED,
                    sa.and_(_WT.state == WFT_SCHEDULED, _WT.visible_at <= now),
                )
            )
            .limit(1)
        ).first()
        if wft is not None:
            return True
        act = self.conn.execute(
            sa.select(_AT.run_id)
            .where(
                sa.or_(
                    _AT.state == ACT_STARTED,
                    sa.and_(_AT.state == ACT_SCHEDULED, _AT.visible_at <= now),
                )
            )
            .limit(1)
        ).first()
        return act is not None
