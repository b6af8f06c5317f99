"""PostgreSQL: runs locked and read ahead, several in one round trip.

Every change to a run begins by locking the run's row and reading it with its workflow
task (``StoreTx.lock_execution_and_workflow_task``), which on PostgreSQL is a round trip of
its own. A transaction that knows beforehand which runs it will lock can lock and read
them all in one query instead, in run id order, and let each run's first lock take what
was read. A start reads and locks the latest run of its workflow id the same way. Three
kinds of transaction do so:

- the timer loop's firing pass, for the runs of the timers it expects to be due
  (``TimerQueries.due_work``, which sends these reads with its own);
- a batch of the PostgreSQL writers (``engine._store.pg_writer``), for the runs its changes
  say they lock and the workflow ids they start (``operation(locks=...)``): a batch of
  twenty changes then waits for one round trip where it waited for twenty, while holding
  the locks of those before;
- a poll of workflow tasks, for the runs of the tasks it claimed, with their histories
  from the event the worker needs on (one round trip where there were two per task).

What was read stays true until the run's first lock in the transaction takes it, because
a change locks a run before it writes the run's rows: nothing in this transaction changed
them before that lock. Later locks of the same run read again. Claiming an activity is the
exception (it locks the activity's row, not the run), and a start's read can be overtaken
by a change that closes, continues or deletes the run: so any write to a run's rows, a
deleted run or a new run of a workflow id drops what was read ahead of it
(``StoreTx._forget_ahead``), and an activity, timer or child added to a run drops what was
read of what it leaves pending (``StoreTx.forget_leftovers``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, Protocol

from .queries import _ACT_COLS, _EXEC_COLS, _TIMER_COLS, _WFT_COLS, Q
from .schema import EXEC_RUNNING

Row = Any


class RunLock(NamedTuple):
    """A run a change locks first, named before it runs (``operation(locks=...)``)."""

    run_id: str
    #: The scheduled event id of the activity whose row the change reads with the run.
    activity: int | None = None
    #: Whether the change may close the run (its close reads what the run leaves pending).
    closes: bool = False


class LatestRun(NamedTuple):
    """A workflow id whose latest run a change locks first (a start: ``find_latest_run``),
    named before it runs."""

    namespace: str
    workflow_id: str


@dataclass
class Ahead:
    """A run locked ahead: its row (None: no such run), its workflow task row, and the rows
    of the timers (by id) and activities (by scheduled event id) read with it (None where
    the row is gone)."""

    row: Row | None
    wft: Row | None
    timers: dict[int, Row | None] = field(default_factory=dict)
    activities: dict[int, Row | None] = field(default_factory=dict)


@dataclass
class Wanted:
    """What to read with a run locked ahead: timer ids, activities' scheduled event ids,
    and the history from an event id on (None: none of it)."""

    timers: list[int] = field(default_factory=list)
    activities: list[int] = field(default_factory=list)
    history_from: int | None = None
    #: Whether to read what the run leaves pending were it to close (``leftovers_of_run``).
    leftovers: bool = False


#: The statements of a lock ahead, each for every run at once (PostgreSQL only): a run's
#: row is locked before anything joined to it is read, in run id order; what is read after
#: the lock statement is as the runs' last lock holders left it.
_LOCK_RUNS = Q(
    f"SELECT {_EXEC_COLS} FROM dn_executions WHERE run_id = ANY(:runs) ORDER BY run_id FOR UPDATE"
)
_GET_WFTS = Q(f"SELECT {_WFT_COLS} FROM dn_workflow_tasks WHERE run_id = ANY(:runs)")
_GET_TIMERS = Q(f"SELECT {_TIMER_COLS} FROM dn_timers WHERE id = ANY(:ids)")
_ACT_KEYS = "unnest(CAST(:runs AS text[]), CAST(:scheds AS bigint[])) AS k(r, s)"
_LOCK_ACTS = Q(
    f"SELECT a.{_ACT_COLS.replace(', ', ', a.')} FROM dn_activity_tasks a JOIN {_ACT_KEYS} "
    "ON a.run_id = k.r AND a.scheduled_event_id = k.s "
    "ORDER BY a.run_id, a.scheduled_event_id FOR UPDATE OF a"
)
_HISTORIES = Q(
    "SELECT h.event_id, h.event_time, h.event_type, h.attributes, h.extra, h.run_id "
    "FROM dn_history_events h "
    "JOIN unnest(CAST(:runs AS text[]), CAST(:firsts AS bigint[])) AS k(r, f) "
    "ON h.run_id = k.r AND h.event_id >= k.f ORDER BY h.run_id, h.event_id"
)
_LATEST_RUNS = Q(
    "SELECT l.* FROM unnest(CAST(:nss AS text[]), CAST(:wids AS text[])) AS k(n, w) "
    f"CROSS JOIN LATERAL (SELECT {_EXEC_COLS} FROM dn_executions "
    "WHERE namespace = k.n AND workflow_id = k.w ORDER BY start_time DESC LIMIT 1 FOR UPDATE) l"
)
_LEFTOVERS = Q(
    "SELECT k.r AS run_id, "
    "EXISTS (SELECT 1 FROM dn_activity_tasks WHERE run_id = k.r) AS activities, "
    "EXISTS (SELECT 1 FROM dn_timers WHERE run_id = k.r) AS timers, "
    "EXISTS (SELECT 1 FROM dn_executions WHERE parent_run_id = k.r "
    f"AND status = {EXEC_RUNNING}) AS children "
    "FROM unnest(CAST(:runs AS text[])) AS k(r)"
)


def reads_for(
    runs: Mapping[str, Wanted], latest: Collection[tuple[str, str]] = ()
) -> list[tuple[Q, Any]]:
    """The statements locking and reading ``runs`` (and, first, the latest runs of the
    workflow ids ``latest``): a few, whatever their number; the runs are locked in run id
    order, the latest runs in (namespace, workflow id) order, as every lock ahead takes
    them."""
    reads: list[tuple[Q, Any]] = []
    if latest:
        keys = sorted(latest)
        reads.append((_LATEST_RUNS, {"nss": [n for n, _ in keys], "wids": [w for _, w in keys]}))
    if not runs:
        return reads
    ids = sorted(runs)
    reads += [(_LOCK_RUNS, {"runs": ids}), (_GET_WFTS, {"runs": ids})]
    timers = [t for r in ids for t in runs[r].timers]
    if timers:
        reads.append((_GET_TIMERS, {"ids": timers}))
    acts = [(r, a) for r in ids for a in runs[r].activities]
    if acts:
        reads.append((_LOCK_ACTS, {"runs": [r for r, _ in acts], "scheds": [a for _, a in acts]}))
    first = {r: w.history_from for r, w in runs.items() if w.history_from is not None}
    if first:
        order = sorted(first)
        reads.append((_HISTORIES, {"runs": order, "firsts": [first[r] for r in order]}))
    closing = [r for r in ids if runs[r].leftovers]
    if closing:
        reads.append((_LEFTOVERS, {"runs": closing}))
    return reads


def take_results(
    runs: Mapping[str, Wanted],
    found: list[list[Row]],
    into: dict[str, Ahead],
    histories: dict[str, tuple[int, list[Row]]] | None = None,
    leftovers: dict[str, tuple[bool, bool, bool]] | None = None,
    latest: Collection[tuple[str, str]] = (),
    latest_into: dict[tuple[str, str], Row | None] | None = None,
) -> None:
    """Put what :func:`reads_for` read (its rows, ``found``, in its order) in ``into``,
    the histories asked for in ``histories`` (run id -> first event id, rows), what the
    runs leave pending in ``leftovers`` and the latest runs in ``latest_into``."""
    if latest:
        got = {(str(r.namespace), str(r.workflow_id)): r for r in found[0]}
        found = found[1:]
        if latest_into is not None:
            for key in latest:
                latest_into[key] = got.get(key)
    if not runs:
        return
    rows = {str(r.run_id): r for r in found[0]}
    wfts = {str(r.run_id): r for r in found[1]}
    i = 2
    timers: dict[int, Row] = {}
    if any(w.timers for w in runs.values()):
        timers = {int(r.id): r for r in found[i]}
        i += 1
    acts: dict[tuple[str, int], Row] = {}
    if any(w.activities for w in runs.values()):
        acts = {(str(r.run_id), int(r.scheduled_event_id)): r for r in found[i]}
        i += 1
    events: dict[str, list[Row]] = {}
    if any(w.history_from is not None for w in runs.values()):
        for r in found[i]:
            events.setdefault(str(r.run_id), []).append(r)
        i += 1
    pending: dict[str, Row] = {}
    if any(w.leftovers for w in runs.values()):
        pending = {str(r.run_id): r for r in found[i]}
    for run_id, wanted in runs.items():
        ahead = Ahead(rows.get(run_id), wfts.get(run_id))
        ahead.timers = {t: timers.get(t) for t in wanted.timers}
        ahead.activities = {a: acts.get((run_id, a)) for a in wanted.activities}
        if wanted.history_from is not None and histories is not None:
            histories[run_id] = (wanted.history_from, events.get(run_id, []))
        if run_id in pending and leftovers is not None:
            p = pending[run_id]
            leftovers[run_id] = (bool(p.activities), bool(p.timers), bool(p.children))
        into[run_id] = ahead


def lock_hint(fn: Callable[..., Any]) -> Callable[..., Iterable[RunLock | LatestRun]] | None:
    """The function naming what a change locks, given to ``operation(locks=...)``, behind
    a transaction function as the store gets it (the operation's function bound to its
    service, possibly through ``functools.partial``); None for any other function."""
    target: Any = fn.func if isinstance(fn, partial) else fn
    target = getattr(target, "__func__", target)
    hint = getattr(target, "lock_hint", None)
    return hint if callable(hint) else None


def wanted_by(
    jobs: Iterable[tuple[Callable[..., Any], tuple[Any, ...]]],
    latest: set[tuple[str, str]] | None = None,
) -> dict[str, Wanted]:
    """The runs (and activity rows) the changes ``jobs`` (function, arguments) say they
    lock; the workflow ids whose latest runs they lock are added to ``latest``. A change
    whose hint fails names nothing (it locks as it runs)."""
    runs: dict[str, Wanted] = {}
    for fn, args in jobs:
        hint = lock_hint(fn)
        if hint is None:
            continue
        try:
            locks = list(hint(*args))
        except Exception:  # a hint is an optimisation: the change still runs
            continue
        for lock in locks:
            if isinstance(lock, LatestRun):
                if latest is not None:
                    latest.add((lock.namespace, lock.workflow_id))
                continue
            run_id, activity, closes = RunLock(*lock)
            wanted = runs.setdefault(run_id, Wanted())
            if activity is not None and activity not in wanted.activities:
                wanted.activities.append(activity)
            wanted.leftovers |= closes
    return runs


def usable(ahead: Ahead, activity: int | None, timer: int | None) -> bool:
    """Whether ``ahead`` holds what a lock asking for ``activity`` and ``timer`` reads."""
    return (activity is None or activity in ahead.activities) and (
        timer is None or timer in ahead.timers
    )


class _Tx(Protocol):
    postgres: bool
    _prefetched_runs: dict[str, Ahead]
    _ahead_history: dict[str, tuple[int, list[Row]]]
    _ahead_leftovers: dict[str, tuple[bool, bool, bool]]
    _ahead_latest: dict[tuple[str, str], Row | None]
    _ahead_latest_runs: dict[str, tuple[str, str]]

    def _q_many(self, *statements: tuple[Q, Any]) -> list[list[Row]]: ...

    def write_pending_events(self) -> None: ...


class AheadQueries:
    """``StoreTx.lock_ahead``."""

    def lock_ahead(
        self: _Tx, runs: Mapping[str, Wanted], latest: Collection[tuple[str, str]] = ()
    ) -> None:
        """PostgreSQL: lock and read ``runs`` now, in one round trip, for their first
        locks in this transaction (nothing on SQLite, whose transactions hold the write
        lock from their start and read locally), and the latest runs of the workflow ids
        ``latest`` (namespace, workflow id) for their first ``find_latest_run``. A history
        asked for is kept for this change's next ``read_events`` of that run from that
        event id."""
        if not self.postgres or not (runs or latest):
            return
        if any(w.history_from is not None for w in runs.values()):
            # The history rows the changes before this one wrote behind go first.
            self.write_pending_events()
        found = self._q_many(*reads_for(runs, latest))
        take_results(
            runs,
            found,
            self._prefetched_runs,
            self._ahead_history,
            self._ahead_leftovers,
            latest,
            self._ahead_latest,
        )
        for key in latest:
            row = self._ahead_latest.get(key)
            if row is not None:
                self._ahead_latest_runs[str(row.run_id)] = key
