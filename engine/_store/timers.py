"""Durable timers and deadlines: the store's statements for them (``StoreTx`` inherits them).

A timer is a row of ``dn_timers``: a run's (``run_id``) or a schedule's (its key, kind
``"schedule"``), due at ``fire_at``. Workflow-task and activity deadlines are not timers:
they are the ``timeout_at`` of the started task rows, found by the same firing pass.

On PostgreSQL the firing pass reads what is due and locks the runs it expects to fire
(the service host's look-ahead) in one query, so a pass costs two round trips whatever
the number of timers: that read, then the commit with every write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from .ahead import Ahead, Wanted, reads_for, take_results
from .queries import (
    DELETE_TIMER,
    DELETE_TIMERS_OF_RUN,
    DUE_TIMERS,
    DUE_TIMERS_AHEAD,
    FIRST_TIMERS,
    GET_TIMER,
    INSERT_TIMER,
    NEXT_TIMER_AT,
    TIMED_OUT_ACTS,
    TIMED_OUT_WFTS,
    TIMERS_OF_RUN,
    Q,
    _delete_timers,
)

Row = Any


class _Tx(Protocol):
    postgres: bool
    _prefetched_timer: tuple[int, Row | None] | None
    _prefetched_runs: dict[str, Ahead]

    def _q(self, q: Q, params: Any = None) -> Any: ...

    def _q_many(self, *statements: tuple[Q, Any]) -> list[list[Row]]: ...

    def _w(self, q: Q, params: Any = None) -> None: ...

    def _one(self, q: Q, params: Any) -> Row | None: ...

    def forget_leftovers(self, run_id: str) -> None: ...


class TimerQueries:
    """The statements of ``dn_timers`` and of the deadline scans."""

    _prefetched_timer: tuple[int, Row | None] | None
    _prefetched_runs: dict[str, Ahead]

    def insert_timer(
        self: _Tx, run_id: str, kind: str, ref: int, attempt: int, fire_at: float, data: str | None
    ) -> None:
        """Add a durable timer."""
        self.forget_leftovers(run_id)
        self._w(
            INSERT_TIMER,
            {
                "run_id": run_id,
                "kind": kind,
                "ref": ref,
                "attempt": attempt,
                "fire_at": fire_at,
                "data": data,
            },
        )

    def delete_timers(self: _Tx, run_id: str, kinds: Iterable[str], ref: int | None = None) -> None:
        """Remove a run's timers of the given kinds (and reference)."""
        kinds = tuple(kinds)
        params: dict[str, Any] = {"run_id": run_id, "ref": ref}
        params.update({f"k{i}": k for i, k in enumerate(kinds)})
        self._w(_delete_timers(len(kinds), ref is not None), params)

    def delete_timers_of_run(self: _Tx, run_id: str) -> None:
        """Remove all timers of a run."""
        self._w(DELETE_TIMERS_OF_RUN, {"run_id": run_id})

    def take_timer(self: _Tx, timer_id: int) -> Row | None:
        """Delete a timer and return it, or None if another host already took it. Call it
        with the timer's run (or schedule) locked: that lock is what makes the take safe."""
        held, self._prefetched_timer = self._prefetched_timer, None
        if held is not None and held[0] == timer_id:
            row = held[1]
        else:
            row = self._one(GET_TIMER, {"id": timer_id})
        if row is not None:
            self._w(DELETE_TIMER, {"id": timer_id})
        return row

    def due_work(
        self: _Tx,
        now: float,
        limit: int,
        expected: Sequence[tuple[int, str]] = (),
        real: float | None = None,
    ) -> tuple[Sequence[Row], Sequence[Row], Sequence[Row]]:
        """What is due at ``now``: the timers (earliest first, unlocked: each is claimed
        with :meth:`take_timer`), the started workflow tasks and the started activity
        attempts past their deadlines. ``real``: the clock, when ``now`` is a little ahead
        of it (a pass started ahead): deadlines are due by the clock, and only timers of
        ``AHEAD_KINDS`` by ``now``.

        On PostgreSQL they are read in one query with, for each ``(timer id, run id)``
        of ``expected`` (the timers the caller expects to be due), the run locked (in run id
        order) and read with its workflow task and that timer's row.
        The first lock of each such run in this transaction then takes what was read
        instead of a round trip of its own (later ones read again: by then this
        transaction may have changed the run). On SQLite, where reads are local,
        ``expected`` is ignored."""
        ahead = real is not None and real < now
        by_clock = {"now": real if ahead else now, "lim": limit}
        due_timers: tuple[Q, Any] = (
            (DUE_TIMERS_AHEAD, {"now": now, "real": real, "lim": limit})
            if ahead
            else (DUE_TIMERS, by_clock)
        )
        reads = [due_timers, (TIMED_OUT_WFTS, by_clock), (TIMED_OUT_ACTS, by_clock)]
        if not self.postgres:
            timers, wfts, acts = (self._q(q, p).fetchall() for q, p in reads)
            return timers, wfts, acts
        runs: dict[str, Wanted] = {}
        for timer_id, run_id in sorted(expected):
            runs.setdefault(run_id, Wanted()).timers.append(timer_id)
        found = self._q_many(*reads, *reads_for(runs))
        take_results(runs, found[3:], self._prefetched_runs)
        return found[0], found[1], found[2]

    def next_timers(self: _Tx, limit: int) -> tuple[float | None, Sequence[Row]]:
        """When the earliest timer is due (None if there is none), and the first ``limit``
        timers of runs (not schedules) by due time: id, run id, fire_at. One round trip
        on PostgreSQL."""
        if self.postgres:
            first, rows = self._q_many((NEXT_TIMER_AT, None), (FIRST_TIMERS, {"lim": limit}))
            at = first[0][0] if first else None
        else:
            at = self._q(NEXT_TIMER_AT).fetchone()[0]
            rows = self._q(FIRST_TIMERS, {"lim": limit}).fetchall()
        return (None if at is None else float(at)), rows

    def next_timer_at(self: _Tx) -> float | None:
        """When the earliest timer is due, or None."""
        row = self._q(NEXT_TIMER_AT).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def timers_of_run(self: _Tx, run_id: str) -> Sequence[Row]:
        """A run's timers."""
        rows: Sequence[Row] = self._q(TIMERS_OF_RUN, {"run_id": run_id}).fetchall()
        return rows
