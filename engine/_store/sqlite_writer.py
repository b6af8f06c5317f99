"""SQLite's single writer: one thread, one connection, group commits; and the caller's own
thread for a lone change.

Every change of a process goes through one connection (SQLite has one writer anyway). The
writer thread runs the changes waiting together back to back in one transaction and commits
them at once (group commit). If one of them raises, the whole batch is rolled back and each
is run again in a transaction of its own, so a failure never leaks into another caller's
change.

**A lone change runs inline.** Handing a change to the thread and its result back costs two
thread wake-ups and two passes of the interpreter lock between threads: on the 2-core
machine about 0.15 ms of CPU per change, and a lone activity step makes two. So a change
that asks for it (``Store.transaction(..., inline=True)``: the service's short hot-path
operations) runs on the caller's own thread, on the same connection, in a transaction of its
own, when all of these hold:

- no change of the process waits for the thread, and the thread is not using the
  connection (so a change never overtakes one submitted before it);
- it is about the same run as the change before it (``operation(locks=...)`` names it), or
  that change began at least :data:`LONE_GAP` ago. A workflow running alone makes its
  changes one after another, all about its run; changes of several runs coming close
  together are left to queue for the thread, which commits them together. An inline commit
  writes its pages alone: twenty workflows at once lost a fifth of their throughput when
  every change that found the thread idle ran inline.

The callers yield to their event loop every :data:`YIELD_EVERY` inline changes in a row
(counted for the whole process; a trip to the thread yielded every time), so a loop of
changes does not keep the loop's other tasks (heartbeats, widgets) waiting.

An inline change must never make the caller's event loop wait on another process or on the
disk:

- The connection keeps a busy timeout of zero between the thread's batches (the thread sets
  the usual 30 s for its own ``BEGIN``): an inline ``BEGIN IMMEDIATE`` that finds another
  process writing gives up at once, and the change goes to the thread, which waits.
- The connection never checkpoints the write-ahead log on its own (``wal_autocheckpoint``
  0): the thread does, every :data:`CHECKPOINT_EVERY` changes committed
  (``PRAGMA wal_checkpoint(PASSIVE)``, about 8 ms with its two ``fsync`` on this machine).
  After a checkpoint that emptied the log, the next commit starts the log afresh and syncs
  its header to disk: until the thread has committed once more, nothing runs inline.
- A change that asks to wait before its commit (the timer loop's firing pass,
  ``StoreTx.commit_not_before``) is rolled back and run by the thread, as is any change
  that meets a busy or locked database.
- With ``fsync=True`` (every commit synced to disk) nothing runs inline.

**Runs' rows kept between transactions.** Every change to a run starts by reading its row
and its workflow task's (a W1 workflow makes four or five such reads). The writer keeps
them as its own last commits left them (:class:`KnownRuns`, handed to each change as
``StoreTx.known_runs``), so the next change to the run needs no read. What is kept is
trusted only while nothing else wrote the file: each transaction begins by asking SQLite
(``PRAGMA data_version``, which changes when another connection, in this process or
another, commits), and forgets everything if so, or if its transaction was rolled back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from ..exceptions import StoreError
from .ahead import RunLock, lock_hint
from .delivery import WARM, Job, Warm, deliver, deliver_all, run_effects
from .outage import Waiting, classify
from .shared_time import one_time
from .tx import StoreTx

if TYPE_CHECKING:
    from .gateway import Store

log = logging.getLogger("engine.store")

#: The busy timeout of the thread's own ``BEGIN IMMEDIATE`` (milliseconds): another
#: process's write transaction is waited for this long, then as the store's retry
#: configuration says.
BUSY_TIMEOUT_MS = 30_000

#: Changes committed (inline or by the thread) after which the thread checkpoints the
#: write-ahead log. A lone change writes about 14 pages; changes committed together share
#: theirs. (SQLite's own default is every 1,000 pages.)
CHECKPOINT_EVERY = 200


def subject(fn: Callable[..., Any], args: tuple[Any, ...]) -> str | None:
    """The run (or, for a start, the workflow id) a change says it locks first
    (``operation(locks=...)``); None when it names none."""
    hint = lock_hint(fn)
    if hint is None:
        return None
    try:
        for lock in hint(*args):
            return lock.run_id if isinstance(lock, RunLock) else lock.workflow_id
    except Exception:  # a hint is an optimisation: the change still runs
        return None
    return None


class _WaitsToCommit(Exception):
    """Rolls back an inline change that asked to wait before its commit."""


class _Checkpoint:
    """Put on the writer's queue to have the thread checkpoint the write-ahead log."""


_CHECKPOINT = _Checkpoint()

#: A change runs inline only when it is about the same run as the change before it (a
#: workflow alone: its changes follow one another), or when that change began at least
#: this long ago (seconds). Changes of several runs coming close together are left to queue
#: for the thread, which commits them together: an inline commit writes its pages alone,
#: and twenty workflows at once lost a fifth of their throughput when every change that
#: found the writer idle ran inline.
LONE_GAP = 0.002

#: Inline commits in a row after which the caller yields to its event loop once.
YIELD_EVERY = 8

#: What :meth:`SqliteWriter.run_inline` returns when it ran nothing: the thread runs it.
NOT_INLINE: Any = object()


def keeps_runs(fn: Callable[..., Any]) -> bool:
    """Whether a change writes runs' rows only through ``StoreTx``'s methods (the service's
    operations say so): only such a change may use and keep runs' rows
    (:class:`KnownRuns`); any other (a tool's, a test's own SQL) makes the writer forget."""
    target = getattr(fn, "__func__", None) or getattr(fn, "func", None) or fn
    target = getattr(target, "__func__", target)  # a partial of a bound method
    return getattr(target, "keeps_runs", False) is True


class KnownRuns:
    """Runs' rows as this connection's commits left them (run id -> (execution row,
    workflow task row or None); and their pending activities' rows), for the changes that
    follow (see the module docstring).
    Only the connection's user (whoever holds the writer's connection lock) touches it."""

    #: Runs kept at most (open ones: a run is not kept once closed); past this many, those
    #: written longest ago are dropped.
    LIMIT = 4096

    def __init__(self) -> None:
        self.rows: dict[str, tuple[Any, Any]] = {}
        #: The rows of the attempts running (run id -> scheduled event id -> row).
        self.acts: dict[str, dict[int, Any]] = {}
        self._version: tuple[int, int] | None = None

    def begin(self, driver: Any) -> None:
        """At the start of a write transaction (the write lock held): forget what another
        connection may have changed since this one last looked."""
        (version,) = driver.execute("PRAGMA data_version").fetchone()
        version = (id(driver), version)  # (a count per connection)
        if version != self._version:
            self.rows.clear()
            self.acts.clear()
            self._version = version
        for kept in (self.rows, self.acts):
            while len(kept) > self.LIMIT:  # those kept first (a run's row written goes last)
                del kept[next(iter(kept))]

    def forget(self) -> None:
        """The transaction was rolled back: what its changes kept never happened."""
        self.rows.clear()
        self.acts.clear()

    def for_change(self, tx: StoreTx, fn: Callable[..., Any]) -> None:
        """Give ``tx``, the transaction of ``fn``, a change about to run, the rows kept
        (``known_runs``, ``known_acts``); or, for a change that may write runs' rows its own
        way (see :func:`keeps_runs`), nothing, and forget them."""
        if keeps_runs(fn):
            tx.known_runs, tx.known_acts = self.rows, self.acts
        else:
            self.forget()


class SqliteWriter:
    """The writer thread, its queue, and the inline path (see the module docstring)."""

    MAX_BATCH = 64

    def __init__(self, store: Store, *, inline: bool = True) -> None:
        self.store = store
        #: Whether changes may run on their caller's thread (not with ``fsync=True``).
        self.inline = inline
        self._queue: queue.SimpleQueue[Job | Warm | _Checkpoint | None] = queue.SimpleQueue()
        #: Changes submitted and not yet run (a change runs inline only when there are none).
        self._waiting = 0
        self._count_lock = threading.Lock()
        #: Held by whoever uses the connection: the thread for a batch, a caller inline.
        self._conn_lock = threading.Lock()
        self._conn: sa.Connection | None = None
        #: The runs' rows its commits left (the connection lock's holder's alone).
        self.known = KnownRuns()
        self._streak = 0
        #: Changes committed since the last checkpoint (see :data:`CHECKPOINT_EVERY`).
        self._unchecked = 0
        #: A checkpoint emptied the log: the next commit restarts it and syncs its header
        #: (see the module docstring); nothing runs inline until the thread has committed.
        self._fresh_log = False
        self._stopped = False
        #: When the last change was submitted or tried inline (``time.monotonic()``), and
        #: what it was about (:func:`subject`).
        self._last = 0.0
        self._last_subject: str | None = None
        #: How many changes ran inline, and how many checkpoints the thread ran for them.
        self.inline_count = 0
        self.checkpoints = 0
        self.thread = threading.Thread(target=self._main, name="durable-sqlite-writer", daemon=True)
        self.thread.start()

    def submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop | None,
        fut: Any,
        since: float,
        *,
        tried: bool = False,
    ) -> None:
        """Queue a change for the thread (``tried``: :meth:`run_inline` declined it, and
        noted it as the last change already). A writer stopped (the store closing) or whose
        thread died answers with :class:`StoreError` at once."""
        with self._count_lock:
            gone = self._stopped or not self.thread.is_alive()
            if not gone:
                self._waiting += 1
        if gone:
            deliver(loop, fut, None, StoreError("the store is closed"))
            return
        self._streak = 0
        if not tried:
            self._last = time.monotonic()
            self._last_subject = None
        self._queue.put((fn, args, loop, fut, since))

    def warm(self) -> None:
        """Wake the thread with nothing to do (see :meth:`Store.warm`)."""
        self._queue.put(WARM)

    def stop(self) -> None:
        """Let the thread finish what was submitted, then end it."""
        with self._count_lock:
            self._stopped = True
        self._queue.put(None)
        self.thread.join(timeout=10)
        if self.thread.is_alive():
            return  # still running a change: it answers its callers itself
        while True:  # nothing should be left; whatever is, is answered
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(job, tuple):
                deliver(job[2], job[3], None, StoreError("the store is closed"))

    # -- inline ---------------------------------------------------------------------------

    def run_inline(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(tx, *args)`` in a transaction of its own on this thread, committed; or
        :data:`NOT_INLINE`, having changed nothing, when it must go to the thread: other
        changes wait for it, another run's change came just before it (see
        :data:`LONE_GAP`), the thread is using the connection, another process writes,
        the change waits to commit, or the database was busy or locked."""
        now = time.monotonic()
        about = subject(fn, args)
        last, self._last = self._last, now
        same = about is not None and about == self._last_subject
        self._last_subject = about
        if (
            not self.inline
            or self._waiting
            or self._fresh_log
            or (not same and now - last < LONE_GAP)
            or not self._conn_lock.acquire(blocking=False)
        ):
            return NOT_INLINE
        try:
            conn = self._conn
            if conn is None or self._waiting or self._fresh_log:  # (changed meanwhile)
                return NOT_INLINE
            try:
                with _immediate(conn, self.known):  # busy timeout 0: the lock now, or not
                    tx = StoreTx(conn, postgres=False)
                    self.known.for_change(tx, fn)
                    result = fn(tx, *args)
                    tx.write_pending_events()
                    if tx._commit_at is not None:  # it waits to commit: on the thread
                        raise _WaitsToCommit
            except _WaitsToCommit:
                return NOT_INLINE
            except (DBAPIError, sqlite3.Error) as err:
                if classify(err) is not None:
                    return NOT_INLINE  # busy or locked: the thread waits as configured
                raise self.store._translate(getattr(err, "orig", err)) from err
            # Its effects before the next transaction on the connection (as the thread's).
            run_effects(tx.after)
            self.inline_count += 1
            self._unchecked += 1
            if self._unchecked >= CHECKPOINT_EVERY:
                self._unchecked = 0
                self._queue.put(_CHECKPOINT)
        finally:
            self._conn_lock.release()
        self.store.notifier.notify_many(tx.wakeups, tx.messages)
        return result

    def should_yield(self) -> bool:
        """After an inline commit: whether its caller yields to the event loop now (every
        :data:`YIELD_EVERY` inline commits in a row; a change sent to the thread yields
        anyway). Without it a caller making changes in a loop would keep the loop's other
        tasks (heartbeats, widgets) waiting until it is done."""
        self._streak += 1
        if self._streak < YIELD_EVERY:
            return False
        self._streak = 0
        return True

    # -- the thread -----------------------------------------------------------------------

    def _main(self) -> None:
        conn = self.store.engine.connect()
        driver = conn.connection.driver_connection
        assert driver is not None
        # Between batches the connection is the inline path's: see the module docstring.
        driver.execute("PRAGMA busy_timeout=0")
        driver.execute("PRAGMA wal_autocheckpoint=0")
        self._conn = conn
        waited = f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}"
        try:
            while True:
                job = self._queue.get()
                if job is None:
                    return
                if isinstance(job, _Checkpoint):
                    self._checkpoint(driver)
                    continue
                if isinstance(job, Warm):
                    continue
                batch = [job]
                stop = False
                while len(batch) < self.MAX_BATCH:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stop = True
                        break
                    if isinstance(more, _Checkpoint):
                        self._unchecked = CHECKPOINT_EVERY  # after this batch
                        break
                    if not isinstance(more, Warm):
                        batch.append(more)
                tell: list[Callable[[], None]] = []
                with self._conn_lock:
                    try:
                        driver.execute(waited)
                    except sqlite3.Error as err:  # each caller hears of it
                        failed = self.store._translate(err)
                        tell = [partial(deliver, j[2], j[3], None, failed) for j in batch]
                    else:
                        tell = self._run_batch(conn, batch)
                    finally:
                        with self._count_lock:
                            self._waiting -= len(batch)
                        self._fresh_log = False  # the thread has committed since
                        with contextlib.suppress(sqlite3.Error):
                            driver.execute("PRAGMA busy_timeout=0")
                    self._unchecked += len(batch)
                # The callers hear of their changes once the connection is free: the next
                # change a caller makes may run inline.
                for told in tell:
                    told()
                if self._unchecked >= CHECKPOINT_EVERY:
                    self._checkpoint(driver)
                if stop:
                    return
        finally:
            with self._conn_lock:
                self._conn = None
                conn.close()

    def _checkpoint(self, driver: Any) -> None:
        """Checkpoint the write-ahead log, without waiting for readers or writers (a
        failure is logged: the next one tries again)."""
        with self._conn_lock:
            self._unchecked = 0
            try:
                busy, frames, done = driver.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            except sqlite3.Error as err:
                log.warning("checkpointing the SQLite write-ahead log failed: %s", err)
                return
            self.checkpoints += 1
            if not busy and frames > 0 and frames == done:
                self._fresh_log = True  # the next commit restarts the log: on the thread

    def _run_batch(self, conn: sa.Connection, batch: list[Job]) -> list[Callable[[], None]]:
        """Run ``batch`` (committed, with the after-commit effects of what committed);
        return what tells its last callers, for once the connection is free."""
        if len(batch) > 1:
            results: list[Any] = []
            wakeups: set[str] = set()
            messages: dict[str, Any] = {}
            effects: list[Callable[[], None]] = []
            # The changes' history rows, inserted together (reads of history first insert
            # what is pending, so each change sees what the ones before it wrote).
            pending: list[dict[str, Any]] = []
            try:
                with _immediate(conn, self.known), one_time():
                    txs = []
                    for fn, args, _, _, _ in batch:
                        # One StoreTx each: a change may withdraw its own wake-ups (an
                        # eager hand-off), never another caller's.
                        tx = StoreTx(conn, postgres=False, pending_events=pending)
                        self.known.for_change(tx, fn)
                        results.append(fn(tx, *args))
                        txs.append(tx)
                        wakeups |= tx.wakeups
                        messages.update(tx.messages)
                    tx.write_pending_events()
                    for tx in txs:  # a change that waits to commit: the batch waits with it
                        tx.wait_to_commit()
                        effects += tx.after  # (the wait may add one)
            except Exception:
                pass  # run them one by one below, to find the failing one
            else:
                run_effects(effects)
                answers = [
                    (loop, fut, result)
                    for (_, _, loop, fut, _), result in zip(batch, results, strict=True)
                ]

                def tell_all() -> None:
                    self.store.notifier.notify_many(wakeups, messages)
                    deliver_all(answers)

                return [tell_all]
        # One by one: each caller is told as soon as its change is done (a later one may
        # wait long for a database another process holds), the last once the connection
        # is free.
        tell: list[Callable[[], None]] = []
        for fn, args, loop, fut, since in batch:
            for told in tell:
                told()
            try:
                result, tx = self._run_one(conn, fn, args, since)
            except BaseException as err:  # delivered to the caller, who raises it
                tell = [partial(deliver, loop, fut, None, err)]
            else:
                run_effects(tx.after)
                tell = [
                    partial(self.store.notifier.notify_many, tx.wakeups, tx.messages),
                    partial(deliver, loop, fut, result, None),
                ]
        return tell

    def _run_one(
        self, conn: sa.Connection, fn: Callable[..., Any], args: tuple[Any, ...], since: float
    ) -> tuple[Any, StoreTx]:
        """One change in a transaction of its own; a database locked by another process
        past the busy timeout is waited for as the store's retry configuration says."""
        waiting: Waiting | None = None
        while True:
            try:
                with _immediate(conn, self.known):
                    tx = StoreTx(conn, postgres=False)
                    self.known.for_change(tx, fn)
                    result = fn(tx, *args)
                    tx.write_pending_events()
                    tx.wait_to_commit()
                return result, tx
            except (DBAPIError, sqlite3.Error) as err:
                kind = classify(err)
                if kind is None:
                    raise self.store._translate(getattr(err, "orig", err)) from err
                waiting = waiting or self.store._waiting(since)
                waiting.pause(err, kind, connecting=False)


@contextlib.contextmanager
def _immediate(conn: sa.Connection, known: KnownRuns) -> Iterator[None]:
    """A write transaction straight on the sqlite3 connection the writer owns.

    ``BEGIN IMMEDIATE`` takes the write lock up front (no lock upgrade, no deadlock with
    other processes); SQLAlchemy's transaction bookkeeping is skipped on this hot path.
    """
    driver = conn.connection.driver_connection
    assert driver is not None
    driver.execute("BEGIN IMMEDIATE")
    try:
        known.begin(driver)
        yield
        driver.commit()
    except BaseException:  # a failed commit too: the connection is left outside a transaction
        known.forget()
        with contextlib.suppress(sqlite3.Error):
            driver.rollback()
        raise
