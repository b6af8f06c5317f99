"""Every SQL statement the engine runs, as methods of one transaction (:class:`StoreTx`).

The service composes these into state transitions; it never writes SQL itself. The SQL
text lives in :mod:`.queries`; statements go straight to the driver's cursor inside the
SQLAlchemy-managed transaction (building SQLAlchemy expressions on every call cost more
than the database work itself).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from .._json import compact_dumps
from .._json import loads as json_loads
from ..exceptions import StoreError
from .activity_tasks import ActivityQueries
from .ahead import Ahead, AheadQueries, usable
from .closes import CloseQueries
from .commit_at import CommitAt, wait_for
from .literals import bound, client_cursor
from .messages import MessageQueries
from .namespaces import NamespaceQueries
from .outage import LOST, classify, is_database_error
from .queries import (
    _N_EXEC_COLS,
    _WFT_NAMES,
    ACT_BUSY,
    BUFFER_EVENT,
    CLAIM_REQUEST,
    CLOSE_EVENT,
    DELETE_BUFFERED,
    DELETE_BUFFERED_ONE,
    DELETE_WFT,
    EVENTS_OF_TYPE,
    FIRST_EVENT,
    GET_ACT_LOCK,
    GET_EXEC,
    GET_TIMER,
    GET_WFT,
    INSERT_EVENT,
    LAST_EVENT,
    LATEST_RUN,
    LATEST_RUN_LOCK,
    LEFTOVERS_OF_RUN,
    LOCK_EXEC,
    LOCK_EXEC_WFT,
    NEXT_WFT,
    NEXT_WFT_PG,
    OPEN_CHILDREN,
    OPEN_RUN,
    READ_BUFFERED,
    READ_EVENT_RANGE,
    READ_EVENTS,
    WFT_BUSY,
    Q,
    _insert,
    _update,
)
from .rows import ExecRow, SqliteRow, _Cursor
from .rows import Row as Row
from .rows import column as column
from .schedules import ScheduleQueries
from .schema import EXEC_RUNNING, WFT_SCHEDULED
from .set_writes import begin_sql, in_transaction, own_begin, set_statements
from .timers import TimerQueries
from .visibility import VisibilityQueries

JsonDict = dict[str, Any]
_dumps = compact_dumps()

#: Statements whose text varies per call, the fixed part (state numbers from the schema).
_WAITING_WFTS = (
    f"FROM dn_workflow_tasks WHERE state = {WFT_SCHEDULED} AND visible_at > :now AND run_id IN "
    "(SELECT run_id FROM dn_executions WHERE namespace = :ns AND workflow_type = :t "
    f"AND status = {EXEC_RUNNING})"
)

#: How the held-back writes a held transaction merges begin (see ``StoreTx.known_runs``).
_UPDATE_EXEC = "UPDATE dn_executions SET "
_INSERT_WFT = "INSERT INTO dn_workflow_tasks "
_UPDATE_WFT = "UPDATE dn_workflow_tasks SET "

#: The first statement of a transaction that must see one snapshot (PostgreSQL).
_REPEATABLE_READ = Q("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
_XACT_ID = "SELECT pg_current_xact_id()::text"
XACT_STATUS = Q("SELECT pg_xact_status(CAST(:xid AS xid8))")  # PostgreSQL only


def _execute(cur: Any, sql: str, params: Any) -> None:
    if isinstance(params, list):
        cur.executemany(sql, params)
    else:
        cur.execute(sql, params or {})


class _RunsAlone(StoreError):
    """A change that must have a transaction of its own was run in a batch: the batch takes
    it out and runs it alone (``engine._store.pg_writer``)."""


class StoreTx(
    ActivityQueries,
    NamespaceQueries,
    VisibilityQueries,
    ScheduleQueries,
    TimerQueries,
    AheadQueries,
    MessageQueries,
    CloseQueries,
):
    """One open transaction. Methods run SQL on it; wake-up channels are collected.

    A read-only one (``read_only``, from ``Store.read``) sees one snapshot of what was
    committed: its history reads find no rows written behind, since none can be pending
    outside the writer's own transaction.

    Statements go straight to the driver's cursor (inside the SQLAlchemy-managed
    transaction): the statements are fixed, so SQLAlchemy's per-call result machinery
    would only add cost. On PostgreSQL they must go through these methods: the
    connection is in autocommit, and the transaction's own ``BEGIN`` goes with the first.
    """

    def __init__(
        self,
        conn: sa.Connection,
        *,
        postgres: bool,
        pending_events: list[dict[str, Any]] | None = None,
        read_only: bool = False,
        follows: StoreTx | None = None,
    ) -> None:
        self.conn = conn
        self.postgres = postgres
        #: A read (``Store.read``): the database refuses writes (``query_only`` on SQLite,
        #: ``READ ONLY`` on PostgreSQL), and so does this object for history rows and
        #: wake-ups, which it would otherwise only collect.
        self.read_only = read_only
        #: History rows written behind: inserted by :meth:`write_pending_events` (before
        #: any read of history, and before commit), so the changes of one SQLite commit
        #: insert their events with one statement. Changes batched together share it.
        self.pending_events: list[dict[str, Any]] = (
            pending_events if pending_events is not None else []
        )
        #: Channels to notify once this transaction has committed.
        self.wakeups: set[str] = set()
        #: What some of those notifications carry to waiters in this process.
        self.messages: dict[str, Any] = {}
        #: Effects to carry out once this transaction has committed (see
        #: :meth:`after_commit`).
        self.after: list[Callable[[], None]] = []
        driver: Any = conn.connection.driver_connection
        #: PostgreSQL: writes whose result nobody reads, held until the next statement
        #: whose result is read, or the commit, then sent with it in one query (one
        #: round trip for all; ``None`` where writes go at once: SQLite, reads).
        self._deferred: list[tuple[str, Any]] | None = None
        #: PostgreSQL: whether the transaction was opened yet (its ``BEGIN`` goes with the
        #: first statements sent).
        self._begun = False
        #: PostgreSQL: an activity row read (and locked) with its run by
        #: :meth:`lock_execution_and_workflow_task`, for the next :meth:`get_activity_task`
        #: of that activity: ``(run_id, scheduled_event_id, row)``.
        self._prefetched_act: tuple[str, int, Row | None] | None = None
        #: PostgreSQL: a timer row read the same way, for the next :meth:`take_timer` of
        #: that timer: ``(timer id, row)``.
        self._prefetched_timer: tuple[int, Row | None] | None = None
        #: PostgreSQL: runs locked ahead (``engine._store.ahead``), until each one's first
        #: lock. Changes batched together share them.
        self._prefetched_runs: dict[str, Ahead] = {}
        #: PostgreSQL: histories read with runs locked ahead, for this change's next read
        #: of each: run id -> (first event id, rows from it).
        self._ahead_history: dict[str, tuple[int, list[Row]]] = {}
        #: PostgreSQL: what runs locked ahead leave pending (``leftovers_of_run``), until
        #: a row is added to it. Changes batched together share them.
        self._ahead_leftovers: dict[str, tuple[bool, bool, bool]] = {}
        #: PostgreSQL: the latest runs of workflow ids, locked ahead for a start, by
        #: (namespace, workflow id), and the key of each by its run id. Shared by a batch.
        self._ahead_latest: dict[tuple[str, str], Row | None] = {}
        self._ahead_latest_runs: dict[str, tuple[str, str]] = {}
        #: Runs' rows as changes before this one left them (run id -> (execution row,
        #: workflow task row or None)), so that the next change locks them without a
        #: read: a held PostgreSQL transaction's (``engine._store.held``; there, writes
        #: held back for a row are also merged with the next write to it), and SQLite's
        #: writer's, kept between its transactions (``KnownRuns``). None elsewhere (the
        #: service keeps each run's rows up to date here only when it is set: ``RunState``).
        self.known_runs: dict[str, tuple[Any, Any]] | None = None
        self.known_acts: dict[str, dict[int, Any]] | None = None  # (see ActivityQueries)
        #: PostgreSQL: a time before which this transaction must not commit
        #: (:meth:`commit_not_before`). Changes batched together share it.
        self._commit_at: CommitAt | None = None
        self._cursor: _Cursor
        if postgres and follows is not None:
            # The changes of a batch run one after another on one connection: they share
            # its cursor (a new psycopg cursor copies the connection's adapters).
            self._cursor = follows._cursor
        elif postgres:
            # Parameters are bound on this side, and the BEGIN sent with the first query
            # (see :meth:`_sent_together`).
            own_begin(driver)
            self._cursor = client_cursor(driver)
            if not read_only:
                self._deferred = []
        else:
            driver.row_factory = SqliteRow  # type: ignore[union-attr]
            self._cursor = driver.cursor()  # type: ignore[union-attr]
        #: PostgreSQL: a change of a batch (``engine._store.pg_writer``), not alone in its
        #: transaction.
        self._in_batch = follows is not None
        #: PostgreSQL, in a batch: how many of the held-back writes are the changes'
        #: before this one (until they are sent), and how many of this change's own
        #: writes reached the server (see :meth:`withdraw`).
        self._inherited = 0
        self._own_sent = 0
        #: In a batch: the history rows pending before this change, and whether this
        #: change wrote the pending rows out (theirs and its own, in one statement).
        self._pending_mark = len(self.pending_events)
        self._wrote_pending = False
        if follows is not None:
            # The next change of the batch, in the same transaction: what the one before
            # held back goes with this one's first read.
            self._deferred = follows._deferred
            self._begun = follows._begun
            self._inherited = len(follows._deferred or ())
            self.known_runs = follows.known_runs
            self._prefetched_runs = follows._prefetched_runs
            self._ahead_leftovers = follows._ahead_leftovers
            self._ahead_latest = follows._ahead_latest
            self._ahead_latest_runs = follows._ahead_latest_runs
            self._commit_at = follows._commit_at

    def _q(self, q: Q, params: Any = None) -> _Cursor:
        """Run a statement whose result (rows, ``rowcount``) the caller reads."""
        cur = self._cursor
        if self.postgres:
            if self._in_batch and not q.pg.startswith("SELECT"):
                self._own_sent += 1  # a write whose result is read goes at once
            if self._deferred or not self._begun:
                self._pipelined(q.pg, params)
            else:
                _execute(cur, q.pg, params)
            return cur
        _execute(cur, q.sqlite, params)
        return cur

    def _q_many(self, *statements: tuple[Q, Any]) -> list[list[Row]]:
        """PostgreSQL: run reads one after another in one query (one round trip, with
        whatever writes were held back first); the rows of each."""
        cur = self._cursor
        reads: list[str] = []
        for q, params in statements:
            reads += bound(cur, q.pg, params)
        self._sent_together(reads, ())
        rows = [cur.fetchall()]
        for _ in statements[1:]:
            cur.nextset()
            rows.append(cur.fetchall())
        return rows

    def _w(self, q: Q, params: Any = None) -> None:
        """Run a write whose result nobody reads. On PostgreSQL it waits for the next
        :meth:`_q` or the commit and goes with it in one query; a failure is then
        raised there, still inside the transaction, which the store rolls back."""
        if self._deferred is None:
            self._q(q, params)
        else:
            self._deferred.append((q.pg, params))

    def _pipelined(self, sql: str | None, params: Any, tail: Sequence[str] = ()) -> None:
        """Send the deferred writes, then ``sql`` (whose result the cursor is left on),
        then each statement of ``tail``, in one query: one round trip for them all."""
        if sql is not None and isinstance(params, list):  # several parameter sets: a write
            self._sent_together([], ())  # (in a read: refused) goes after what was held back
            _execute(self._cursor, sql, params)
            return self._sent_together([], tail)
        self._sent_together([] if sql is None else bound(self._cursor, sql, params), tail)

    def _sent_together(self, statements: list[str], tail: Sequence[str]) -> None:
        """PostgreSQL: the transaction's ``BEGIN`` (the first time), the writes held back,
        then ``statements`` (their parameters written in), then ``tail``, as one query of
        several statements; the cursor is left on the result of the first of ``statements``.

        Not psycopg's pipeline: it polls the socket for every statement, a poll lets the
        interpreter lock go, and in a busy process the thread waits for it again, up to
        the switch interval (5 ms) each time: twenty statements took 1.3 ms alone and 24
        to 120 ms beside a thread running Python, against 0.8 ms as one query either
        way. The price: the server plans these statements each time (none is prepared)."""
        held: list[str] = [] if self._begun else [begin_sql(self.read_only)]
        if self._deferred:
            self._own_sent += len(self._deferred) - self._inherited
            self._inherited = 0
            for text, values in set_statements(self._deferred):
                held += bound(self._cursor, text, values)
            self._deferred.clear()
        parts = [*held, *statements, *tail]
        if not parts:
            return
        cur = self._cursor
        try:
            cur.execute("; ".join(parts))  # no parameters: the text is sent as it is
        finally:  # (not if the server refused the whole text: the next query begins)
            self._begun = self._begun or in_transaction(cur)
        for _ in held if statements or tail else ():  # onto the first result after them
            if not cur.nextset():  # (each statement one result: none may end in ";")
                raise StoreError("a statement sent together gave no result of its own")

    def withdraw(self) -> bool:
        """PostgreSQL, in a batch: take this change out of the transaction after it raised
        (its held-back writes and history rows are dropped; the rows it read and locked
        stay locked until the batch commits). False when some of its writes already
        reached the server, or its history rows went out with the changes' before it:
        then only rolling back the whole transaction undoes them."""
        if self._own_sent or self._wrote_pending or self._deferred is None:
            return False
        del self._deferred[self._inherited :]
        del self.pending_events[self._pending_mark :]
        return True

    def commit_pipelined(self, notify_sql: str, notify_params: Sequence[Any]) -> None:
        """PostgreSQL: send what is left (the deferred writes, one ``notify_sql`` per item
        of ``notify_params``) and ``COMMIT``, in one query. A failure raises here, with
        the transaction rolled back or failed (the caller rolls back)."""
        assert self._deferred is not None, "only a PostgreSQL write transaction commits so"
        if not self._begun and not self._deferred and not notify_params:
            return  # nothing was sent: no transaction was opened
        self._deferred += [(notify_sql, p) for p in notify_params]
        at = self._commit_at
        if at is None:
            self._pipelined(None, None, ("COMMIT",))
            return
        # Everything but the COMMIT now (a round trip), then the wait, then the COMMIT
        # alone: what remains on the due time's path is the commit's own round trip, and
        # what the transaction did is handed out before the wait (on_due), for use from
        # the deadline on.
        if at.on_done is not None:  # (its id goes with the writes: no round trip more)
            self._pipelined(_XACT_ID, None)
            row = self._cursor.fetchone()
            at.xid = None if row is None else str(row[0])
        else:
            self._pipelined(None, None)
        wait_for(at)
        try:
            self._pipelined(None, None, ("COMMIT",))
        except BaseException as err:
            if at.on_done is not None:
                # The connection lost with the COMMIT sent: whether it committed is unknown.
                at.on_done(None if is_database_error(err) and classify(err) == LOST else False)
            raise
        if at.on_done is not None:
            at.on_done(True)

    def commit_not_before(self, at: CommitAt) -> None:
        """Commit no earlier than ``at.deadline`` (``time.monotonic()``), holding the
        transaction's locks meanwhile (the timer loop's firing pass, started a little
        before its timers are due: see ``engine._service.host``). On PostgreSQL the commit
        sends every write first, then waits; on SQLite the writer waits before its commit
        (:meth:`wait_to_commit`). Changes batched with this one wait with it."""
        if self.read_only:
            raise StoreError("a read-only transaction has no commit to wait for")
        at.ready = None  # (an attempt run again after a failure measures afresh)
        self._commit_at = at

    def wait_to_commit(self) -> None:
        """SQLite: the wait :meth:`commit_not_before` asked for, if any (the store's writer
        calls it just before it commits; PostgreSQL's :meth:`commit_pipelined` waits
        itself). If the wait handed out what the transaction did, its commit tells
        ``on_done`` (a failed attempt is told of by the next one, or by the caller)."""
        at = self._commit_at
        if at is not None and wait_for(at) and at.on_done is not None:
            done = at.on_done
            self.after_commit(lambda: done(True))

    def limit_lock_waits(self, ms: int) -> None:
        """PostgreSQL: wait at most ``ms`` milliseconds (0: without limit) for any lock in
        this transaction (a longer wait fails with ``lock_not_available``). For a batch:
        the transaction is not this change's alone."""
        self._in_batch = True
        self._w(Q(f"SET LOCAL lock_timeout = {int(ms)}"))
        self._inherited += 1  # the batch's, not this change's (see withdraw)

    def _one(self, q: Q, params: Any) -> Row | None:
        return self._q(q, params).fetchone()

    def _insert(self, table: str, values: dict[str, Any]) -> None:
        self._w(_insert(table, tuple(values)), values)

    def _update(self, table: str, where: dict[str, Any], values: dict[str, Any]) -> None:
        params = dict(values)
        for key, value in where.items():
            params[f"w_{key}"] = value
        self._w(_update(table, tuple(values), tuple(where)), params)

    # -- wake-ups ---------------------------------------------------------------------

    def wake(self, channel: str, message: Any = None) -> None:
        """Ask for ``channel`` to be notified after commit (in every process). A
        ``message`` reaches waiters of this process only (see ``Notifier.message``)."""
        if self.read_only:
            raise StoreError(f"a read-only transaction cannot wake {channel!r}")
        self.wakeups.add(channel)
        if message is not None:
            self.messages[channel] = message

    def after_commit(self, effect: Callable[[], None]) -> None:
        """Carry out ``effect()`` once this transaction has committed, and only then.

        A transaction function may run more than once (a SQLite batch that failed is run
        again change by change; PostgreSQL retries serialization failures), so it must not
        change anything outside the database itself: what it must change elsewhere (the
        in-process clock, say) goes here. Effects run right after the commit, on the thread
        that committed (the store's; for a SQLite change run inline, its caller's), before
        the callers hear of it and before the next transaction on the SQLite writer's
        connection; one that raises is logged and does not undo the commit.
        """
        if self.read_only:
            raise StoreError("a read-only transaction has no commit to run effects after")
        self.after.append(effect)

    # -- executions -------------------------------------------------------------------

    def insert_execution(self, **values: Any) -> None:
        """Insert a run."""
        parent = values.get("parent_run_id")
        if parent is not None:
            self.forget_leftovers(parent)
        if self._ahead_latest and "workflow_id" in values:  # a new latest run of its id
            self._ahead_latest.pop((str(values["namespace"]), str(values["workflow_id"])), None)
        self._insert("dn_executions", values)

    def forget_leftovers(self, run_id: str) -> None:
        """This transaction adds an activity, timer or child to the run: what was read
        ahead of what it leaves pending no longer holds."""
        if self._ahead_leftovers:
            self._ahead_leftovers.pop(run_id, None)

    def _forget_ahead(self, run_id: str) -> None:
        """A row of the run is written: what was read of it ahead is no longer sure (a
        change locks a run before it writes it, which takes that already, but claiming an
        activity writes the activity's row without locking the run)."""
        if self._prefetched_runs:
            self._prefetched_runs.pop(run_id, None)
        if self._ahead_latest_runs:
            key = self._ahead_latest_runs.pop(run_id, None)
            if key is not None:
                self._ahead_latest.pop(key, None)

    def lock_execution(self, run_id: str) -> Row | None:
        """Read a run and lock it for this transaction (every change to a run starts here)."""
        self._prefetched_timer = None
        if self._prefetched_runs and run_id in self._prefetched_runs:
            return self._prefetched_runs.pop(run_id).row
        known = None if self.postgres else self.known_runs  # (SQLite's writer keeps them)
        if known is None:
            return self._one(LOCK_EXEC, {"run_id": run_id})
        if run_id in known:
            return known[run_id][0]
        row = self._one(LOCK_EXEC, {"run_id": run_id})
        return None if row is None else ExecRow._make(row)

    def lock_execution_and_workflow_task(
        self, run_id: str, activity: int | None = None, timer: int | None = None
    ) -> tuple[Row | None, Any]:
        """:meth:`lock_execution` then :meth:`get_workflow_task` (and, given ``activity``,
        a scheduled event id, that activity's row for the next :meth:`get_activity_task`;
        given ``timer``, a timer id, that timer's row for the next :meth:`take_timer`).

        One statement on SQLite, where the transaction holds the write lock from its start.
        Two (or three) on PostgreSQL, sent in one query: a statement that waited for the
        run's lock re-reads the run but not a joined row, which another transaction may
        have just changed; the statements after it start once it has the lock, so they
        read the rows as the last transaction to hold the lock left them (every change to
        a task row locks its run first).
        """
        self._prefetched_timer = None  # held for the take right after a lock only
        known = self.known_runs
        plain = activity is None and timer is None  # (SQLite reads neither with the run)
        if known and run_id in known and (plain or not self.postgres):
            return known[run_id]
        ahead = self._prefetched_runs.pop(run_id, None) if self._prefetched_runs else None
        if ahead is not None and usable(ahead, activity, timer):
            if timer is not None:
                self._prefetched_timer = (timer, ahead.timers[timer])
            if ahead.row is None:
                return None, None
            if activity is not None:
                self._prefetched_act = (run_id, activity, ahead.activities[activity])
            return ahead.row, ahead.wft
        if self.postgres:
            reads: list[tuple[Q, Any]] = [
                (LOCK_EXEC, {"run_id": run_id}),
                (GET_WFT, {"run_id": run_id}),
            ]
            if activity is not None:
                reads.append((GET_ACT_LOCK, {"run_id": run_id, "sched": activity}))
            if timer is not None:
                reads.append((GET_TIMER, {"id": timer}))
            found = self._q_many(*reads)
            if timer is not None:
                self._prefetched_timer = (timer, found[-1][0] if found[-1] else None)
            row = found[0][0] if found[0] else None
            if row is None:
                return None, None
            if activity is not None:
                act = found[2][0] if found[2] else None
                self._prefetched_act = (run_id, activity, act)
            return row, (found[1][0] if found[1] else None)
        row = self._one(LOCK_EXEC_WFT, {"run_id": run_id})
        if row is None:
            return None, None
        values = tuple(row)
        if known is not None:  # kept by the writer: a row a change can copy with its values
            row = ExecRow._make(values[:_N_EXEC_COLS])
        if values[_N_EXEC_COLS] is None:  # no task row
            return row, None
        return row, SimpleNamespace(**dict(zip(_WFT_NAMES, values[_N_EXEC_COLS:], strict=True)))

    def get_execution(self, run_id: str) -> Row | None:
        """Read a run without locking it."""
        return self._one(GET_EXEC, {"run_id": run_id})

    def find_open_run(self, namespace: str, workflow_id: str) -> Row | None:
        """The open run with this workflow id, if any."""
        return self._one(OPEN_RUN, {"ns": namespace, "wid": workflow_id})

    def find_latest_run(
        self, namespace: str, workflow_id: str, *, lock: bool = False
    ) -> Row | None:
        """The most recently started run with this workflow id, open or closed.

        An open run, if there is one, is always the latest: a new run starts only after
        the previous one closed.
        """
        if lock and self._ahead_latest and (namespace, workflow_id) in self._ahead_latest:
            row = self._ahead_latest.pop((namespace, workflow_id))
            if row is not None:
                self._ahead_latest_runs.pop(str(row.run_id), None)
            return row
        return self._one(
            LATEST_RUN_LOCK if lock else LATEST_RUN, {"ns": namespace, "wid": workflow_id}
        )

    def open_children(self, run_id: str) -> Sequence[Row]:
        """Open child runs of a run, with their parent close policy."""
        return self._q(OPEN_CHILDREN, {"run_id": run_id}).fetchall()

    def update_execution(self, run_id: str, **values: Any) -> None:
        """Update columns of a run."""
        self._forget_ahead(run_id)
        if self.known_runs is not None:
            self.known_runs.pop(run_id, None)
            earlier = self._take_deferred(_UPDATE_EXEC, "w_run_id", run_id)
            if earlier is not None:  # one UPDATE for both, with the later values
                earlier.pop("w_run_id")
                values = {**earlier, **values}
        self._update("dn_executions", {"run_id": run_id}, values)

    def _take_deferred(self, prefix: str, key: str, value: Any) -> dict[str, Any] | None:
        """A held transaction: take out of the held-back writes the last one whose SQL
        starts with ``prefix`` and whose ``key`` parameter is ``value``; its parameters,
        or None if there is none. (Not for a batch of ``engine._store.pg_writer``, whose
        held-back writes may be another change's, which it may withdraw.)"""
        deferred = self._deferred
        if not deferred:
            return None
        for i in range(len(deferred) - 1, -1, -1):
            text, params = deferred[i]
            if text.startswith(prefix) and isinstance(params, dict) and params.get(key) == value:
                del deferred[i]
                return dict(params)
        return None

    def claim_request(self, run_id: str, request_id: str, now: float) -> bool:
        """Note that request ``request_id`` changed run ``run_id``: False if it already
        had (the same request run again: it must change nothing this time)."""
        return bool(
            self._q(CLAIM_REQUEST, {"run_id": run_id, "rid": request_id, "t": now}).rowcount
        )

    # -- history ----------------------------------------------------------------------

    def insert_events(
        self,
        run_id: str,
        events: Sequence[tuple[int, float, str, str]],
        extra: Mapping[int, JsonDict] | None = None,
    ) -> None:
        """Append events ``(event_id, event_time, event_type, attributes_json)``, with the
        top-level fields ``extra`` gives for some event ids (written behind: see
        ``pending_events``; the store writes them before commit)."""
        if self.read_only:
            raise StoreError("a read-only transaction cannot append history events")
        self.pending_events += [
            {
                "run_id": run_id,
                "event_id": i,
                "event_time": t,
                "event_type": k,
                "attributes": a,
                "extra": _dumps(extra[i]) if extra and i in extra else None,
            }
            for i, t, k, a in events
        ]

    def write_pending_events(self) -> None:
        """Insert the history rows written behind so far."""
        if self.pending_events:
            rows = list(self.pending_events)
            self.pending_events.clear()
            self._wrote_pending = True
            self._w(INSERT_EVENT, rows)

    def read_events(
        self, run_id: str, first_event_id: int = 1, last_event_id: int | None = None
    ) -> Sequence[Row]:
        """Events of a run from ``first_event_id`` (to ``last_event_id``), in order."""
        ahead = self._ahead_history.pop(run_id, None) if self._ahead_history else None
        if ahead is not None and ahead[0] == first_event_id and last_event_id is not None:
            # Read with the run's lock: nothing but this change has written to it since.
            return [r for r in ahead[1] if r.event_id <= last_event_id]
        self.write_pending_events()
        if last_event_id is None:
            return self._q(READ_EVENTS, {"run_id": run_id, "first": first_event_id}).fetchall()
        params = {"run_id": run_id, "first": first_event_id, "last": last_event_id}
        return self._q(READ_EVENT_RANGE, params).fetchall()

    def events_of_type(self, run_id: str, event_type: str) -> Sequence[Row]:
        """A run's events of one type, in order."""
        self.write_pending_events()
        return self._q(EVENTS_OF_TYPE, {"run_id": run_id, "t": event_type}).fetchall()

    def first_event(self, run_id: str) -> Row | None:
        """The first event of a run (WorkflowExecutionStarted)."""
        self.write_pending_events()
        return self._one(FIRST_EVENT, {"run_id": run_id})

    def close_event(self, run_id: str) -> Row | None:
        """The event that closed a run, or None while it is open."""
        self.write_pending_events()
        return self._one(CLOSE_EVENT, {"run_id": run_id})

    def last_event(self, run_id: str) -> Row | None:
        """The newest event of a run."""
        self.write_pending_events()
        return self._one(LAST_EVENT, {"run_id": run_id})

    # -- buffered events --------------------------------------------------------------

    def buffer_event(self, run_id: str, event_time: float, event_type: str, attrs: str) -> None:
        """Keep an event aside until the running workflow task ends."""
        self._w(
            BUFFER_EVENT,
            {
                "run_id": run_id,
                "event_time": event_time,
                "event_type": event_type,
                "attributes": attrs,
            },
        )

    def take_buffered(self, run_id: str) -> Sequence[Row]:
        """Remove and return a run's buffered events, oldest first."""
        rows = self._q(READ_BUFFERED, {"run_id": run_id}).fetchall()
        if rows:
            self._w(DELETE_BUFFERED, {"run_id": run_id})
        return rows

    def drop_buffered_timer_fired(self, run_id: str, timer_id: str) -> int:
        """Remove a buffered TimerFired of ``timer_id``; return its startedEventId (or 0)."""
        for row in self._q(READ_BUFFERED, {"run_id": run_id}).fetchall():
            if row.event_type != "TimerFired":
                continue
            attrs = json_loads(row.attributes)
            if attrs.get("timerId") == timer_id:
                self._w(DELETE_BUFFERED_ONE, {"id": row.id})
                return int(attrs.get("startedEventId", 0))
        return 0

    def transaction_status(self, xid: str) -> str | None:
        """PostgreSQL: ``committed``, ``aborted`` or ``in progress`` for a recent
        transaction id (``CommitAt.xid``); None if too old to be known."""
        row = self._q(XACT_STATUS, {"xid": xid}).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def get_workflow_task(self, run_id: str) -> Row | None:
        """The pending workflow task of a run."""
        return self._one(GET_WFT, {"run_id": run_id})

    def insert_workflow_task(self, **values: Any) -> None:
        """Schedule a workflow task (at most one per run)."""
        self._forget_ahead(values["run_id"])
        if self.known_runs is not None:
            self.known_runs.pop(values["run_id"], None)
        self._insert("dn_workflow_tasks", values)

    def update_workflow_task(self, run_id: str, **values: Any) -> None:
        """Change a run's workflow task."""
        self._forget_ahead(run_id)
        if self.known_runs is not None:
            self.known_runs.pop(run_id, None)
        self._update("dn_workflow_tasks", {"run_id": run_id}, values)

    def delete_workflow_task(self, run_id: str) -> None:
        """Remove a run's workflow task."""
        self._forget_ahead(run_id)
        if self.known_runs is not None:
            self.known_runs.pop(run_id, None)
            # A held transaction that inserted the row (a task started and completed in
            # it): the insert is not sent, and there is nothing to delete.
            if self._take_deferred(_INSERT_WFT, "run_id", run_id) is not None:
                while self._take_deferred(_UPDATE_WFT, "w_run_id", run_id) is not None:
                    pass
                return
        self._w(DELETE_WFT, {"run_id": run_id})

    def next_workflow_tasks(
        self, namespace: str, task_queue: str, now: float, limit: int
    ) -> list[str]:
        """Pick up to ``limit`` ready workflow tasks of the queue (oldest first) and lock
        their runs; return the run ids.

        On PostgreSQL the run rows are taken with ``FOR UPDATE SKIP LOCKED``: pollers on
        other machines pass over them, and the lock order (run first) matches every other
        change.
        """
        rows = self._q(
            NEXT_WFT_PG if self.postgres else NEXT_WFT,
            {"ns": namespace, "q": task_queue, "now": now, "lim": limit},
        ).fetchall()
        return [str(row[0]) for row in rows]

    def expedite_workflow_tasks(self, namespace: str, workflow_type: str, now: float) -> set[str]:
        """Make backed-off workflow tasks of a workflow type ready now; return their queues."""
        waiting = _WAITING_WFTS
        params = {"now": now, "ns": namespace, "t": workflow_type}
        queues = {
            str(r[0])
            for r in self._q(Q(f"SELECT DISTINCT task_queue {waiting}"), params).fetchall()
        }
        if queues:
            if self.known_runs:
                self.known_runs.clear()  # task rows of runs not named here change
            self._w(
                Q(
                    "UPDATE dn_workflow_tasks SET visible_at = :now WHERE run_id IN "
                    f"(SELECT run_id {waiting})"
                ),
                params,
            )
        return queues

    # -- what a run leaves pending ----------------------------------------------------

    def leftovers_of_run(self, run_id: str) -> tuple[bool, bool, bool]:
        """Whether a run has pending activities, timers, open child runs (one read, or
        none where it was read with the run locked ahead)."""
        ahead = self._ahead_leftovers.pop(run_id, None) if self._ahead_leftovers else None
        if ahead is not None:
            return ahead
        row = self._q(LEFTOVERS_OF_RUN, {"run_id": run_id}).fetchone()
        assert row is not None  # EXISTS always gives a row
        return bool(row[0]), bool(row[1]), bool(row[2])

    # -- time skipping ----------------------------------------------------------------

    def consistent_snapshot(self) -> None:
        """Make the following reads see one snapshot (PostgreSQL; SQLite already does).
        Only in a transaction of its own, as its first read: in a PostgreSQL batch it
        raises, and the batch takes the change out to run it alone afterwards
        (``engine._store.pg_writer``)."""
        if self.postgres:
            if self._begun or self._in_batch:
                raise _RunsAlone("a consistent snapshot must be the transaction's first read")
            self._w(_REPEATABLE_READ)  # goes with the first read, right after the BEGIN

    def work_in_progress(self, now: float) -> bool:
        """Whether any task is ready or running (the time-skipping clock waits for it)."""
        if self._one(WFT_BUSY, {"now": now}) is not None:
            return True
        return self._one(ACT_BUSY, {"now": now}) is not None
