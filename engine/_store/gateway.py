"""The store gateway: opens the database, migrates it, and runs transactions off the loop.

Two kinds of transaction, each a function of a :class:`~engine._store.tx.StoreTx`:

- :meth:`Store.transaction` for a state change. On SQLite every change goes through one
  connection (one writer anyway): on its thread, batched into group commits under ``BEGIN
  IMMEDIATE``, or, a lone change of the hot path, on its caller's thread
  (``engine._store.sqlite_writer``).
- :meth:`Store.read` for a read that changes nothing (histories, listings, describe,
  polls). On SQLite it runs on a reader thread with a connection of its own, in a
  ``BEGIN DEFERRED`` transaction: one WAL snapshot for the whole read, never the write
  lock, so it neither waits behind this process's writes nor blocks another process's
  writer. A read sees every change whose :meth:`~Store.transaction` has returned: the
  history rows a change writes behind are inserted before its commit, and only then is its
  caller answered; rows still pending belong to a change nobody has been told of yet.

On PostgreSQL a read runs on a small pool of connections, a ``READ ONLY`` transaction at
``REPEATABLE READ`` (one snapshot); changes go to a few writer threads that commit the
changes waiting together in one transaction (``engine._store.pg_writer``). Database errors
are translated here.

**Transaction functions are pure.** A function handed to :meth:`Store.transaction` may run
more than once: a batch (SQLite's or PostgreSQL's) in which one change fails is rolled back
and run again change by change, and PostgreSQL runs a transaction again after a
serialization failure, a deadlock or a lost connection. So it reads and writes the
database and changes nothing else; what must change elsewhere once it has committed is
asked for with ``tx.wake(...)`` (wake-ups) or ``tx.after_commit(effect)`` (anything else,
e.g. the in-process clock), which run only after the commit, once.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from ..exceptions import DurableError, StoreConflictError, StoreError
from .delivery import run_effects
from .dialects import PostgresListener, create_engine, parse_url
from .held import MAX_HELD, HeldTransaction
from .migrations import migrate
from .notify import Notifier
from .outage import CONTENTION, LOST, Outage, RetryConfig, Waiting, classify, is_database_error
from .pg_writer import NOTIFY_SQL, PgWriters, notify_params
from .sqlite_writer import NOT_INLINE, SqliteWriter
from .tx import StoreTx

T = TypeVar("T")
log = logging.getLogger("engine.store")


class Store:
    """A migrated database plus the threads that talk to it. Share one per process and URL."""

    def __init__(
        self,
        url: str | None = None,
        *,
        fsync: bool = False,
        retry_config: RetryConfig | None = None,
    ) -> None:
        self.url = parse_url(url)
        self.dialect = self.url.get_backend_name()
        self.postgres = self.dialect == "postgresql"
        self.display_url = self.url.render_as_string(hide_password=True)
        self.engine = create_engine(self.url, fsync=fsync)
        self.fsync = fsync
        self.notifier = Notifier()
        self._executor = ThreadPoolExecutor(max_workers=6, thread_name_prefix="durable-store")
        self._writer: SqliteWriter | None = None
        self._pg_writers: PgWriters | None = None
        self._readers: _SqliteReaders | None = None
        self._listener: PostgresListener | None = None
        self._closed = False
        #: Set by :meth:`close`: operations waiting for the database stop waiting.
        self._closing = threading.Event()
        #: How long and how often operations are tried again while the database is down
        #: or busy (``Client.connect(retry_config=)`` sets it for the whole store).
        self.retry_config = retry_config or RetryConfig()
        #: Whether the database is unreachable now (logged once down, once back).
        self.outage = Outage(self.display_url)
        self._users = 0
        self._lock = threading.Lock()
        #: Marks this store's PostgreSQL notifications, so its listener skips its own.
        self._token = uuid.uuid4().hex
        #: PostgreSQL: transactions held open for a second change (``engine._store.held``),
        #: by what they lock, and the keys of those held or being begun.
        self._held: dict[str, HeldTransaction] = {}
        self._held_keys: set[str] = set()
        #: How held transactions ended: "joined" (a second change committed with the
        #: first), "alone" (the first committed by itself; "expired" counts those the time
        #: limit ended), "failed" (rolled back; the first recorded again). For benchmarks.
        self.held_counts: collections.Counter[str] = collections.Counter()
        #: Where held transactions end (commit): threads of their own, one per transaction
        #: that may be held, so that an end never waits for a thread that is itself waiting
        #: for a lock the held transaction has.
        self._held_executor = ThreadPoolExecutor(
            max_workers=max(MAX_HELD, 1), thread_name_prefix="durable-held"
        )

    def open(self) -> None:
        """Connect and migrate (blocking). Raises clear errors for unreachable databases."""
        waiting: Waiting | None = None
        while True:
            try:
                migrate(self.engine, url_for_errors=self.display_url)
                break
            except DurableError:
                self.engine.dispose()
                raise
            except DBAPIError as err:
                if _restarting(err):
                    # The server is there but starting up or shutting down (a restart):
                    # wait for it as operations do. A refused connection fails at once:
                    # it is as likely a wrong port as a restart.
                    waiting = waiting or self._waiting()
                    try:
                        waiting.pause(err, LOST, connecting=True)
                    except StoreError:
                        self.engine.dispose()
                        raise
                    continue
                self.engine.dispose()
                raise StoreError(
                    f"cannot open the database {self.display_url}: {err.orig}. Check that "
                    "the server is running and the URL (host, port, user, database) is right."
                ) from err
        self.outage.up()
        if self.postgres:
            # The engine's URL: without ?prepare_threshold, which libpq does not know.
            url = self.engine.url
            self._listener = PostgresListener(url, self._remote_notify, self.notifier.wake_all)
            self._listener.start()
            self._pg_writers = PgWriters(self)
        else:
            self._readers = _SqliteReaders(self)
            self._writer = SqliteWriter(self, inline=not self.fsync)

    async def transaction(
        self, fn: Callable[..., T], *args: Any, alone: bool = False, inline: bool = False
    ) -> T:
        """Run ``fn(tx, *args)`` in one database transaction on the store's thread(s)
        (or, on SQLite with ``inline``, on this one).

        For changes. A function that only reads goes to :meth:`read` instead. ``alone``:
        on PostgreSQL, in a transaction of its own, never batched with other changes (one
        that waits to commit: ``StoreTx.commit_not_before``). ``inline``: on SQLite, a
        short change that may run on the caller's thread when no other change waits for
        the writer (``engine._store.sqlite_writer``); it must not wait for anything but
        the database.
        """
        if self._closed:
            raise StoreError("the store is closed")
        loop = asyncio.get_running_loop()
        if self._pg_writers is not None:
            fut: asyncio.Future[T] = loop.create_future()
            self._pg_writers.submit(fn, args, loop, fut, time.monotonic(), alone=alone)
            return await fut
        if self._writer is None:  # not opened
            return await loop.run_in_executor(self._executor, self._run, fn, args, time.monotonic())
        if inline:
            result = self._writer.run_inline(fn, args)
            if result is not NOT_INLINE:
                if self._writer.should_yield():
                    # A caller changing things in a loop must not keep the event loop's
                    # other tasks waiting (a trip to the thread yielded every time).
                    await asyncio.sleep(0)
                return result  # type: ignore[no-any-return]
        fut = loop.create_future()
        self._writer.submit(fn, args, loop, fut, time.monotonic(), tried=inline)
        return await fut

    async def hold(
        self, fn: Callable[..., T], args: tuple[Any, ...], redo: Callable[[], Any], key: str
    ) -> tuple[T, HeldTransaction] | None:
        """PostgreSQL: run ``fn(tx, *args)`` and leave its transaction open for a second
        change (see ``engine._store.held``); ``redo()`` (a coroutine function) records the
        change again if the held transaction is rolled back. ``key`` names what the change
        locks (its run): one held transaction per key. Waits and retries as
        :meth:`transaction` does until ``fn`` has run.

        None, having run nothing, where it would not hold: SQLite, ``MAX_HELD`` held
        already, one held for ``key``, or the writers busy (other changes of this process
        waiting or running: they commit together, which costs less per change); the
        caller runs ``fn`` with :meth:`transaction`."""
        if self._closed:
            raise StoreError("the store is closed")
        if self._pg_writers is None or not self._pg_writers.idle():
            return None
        with self._lock:
            if len(self._held_keys) >= MAX_HELD or key in self._held_keys:
                return None
            self._held_keys.add(key)
        loop = asyncio.get_running_loop()
        try:
            running = loop.run_in_executor(
                self._executor, self._run_held, fn, args, time.monotonic(), key
            )
        except RuntimeError as err:  # shut down since the check above
            self._held_ended(key)
            raise StoreError("the store is closed") from err
        try:
            result, held = await asyncio.shield(running)
        except asyncio.CancelledError:
            # The caller is gone, not the transaction: commit it once it has run.
            running.add_done_callback(lambda done: self._commit_orphan(done, key))
            raise
        except BaseException:
            self._held_ended(key)
            raise
        held.start(loop, redo)
        return result, held

    def _run_held(
        self, fn: Callable[..., T], args: tuple[Any, ...], since: float, key: str
    ) -> tuple[T, HeldTransaction]:
        return self._run_pooled(fn, args, read_only=False, since=since, hold=key)  # type: ignore[return-value]

    def _commit_orphan(
        self, running: asyncio.Future[tuple[Any, HeldTransaction]], key: str
    ) -> None:
        """A held transaction whose caller was cancelled while it ran: commit its change
        (or, if it failed, free its key)."""
        if running.cancelled() or running.exception() is not None:
            self._held_ended(key)
            return
        _, held = running.result()
        held.start(asyncio.get_running_loop(), _nothing)
        asyncio.get_running_loop().create_task(held.commit())

    def _held_ended(self, key: str) -> None:
        with self._lock:
            self._held_keys.discard(key)
            self._held.pop(key, None)

    def warm(self) -> None:
        """Wake the writer thread(s), a moment before a change is expected (the timer loop
        does it before a timer comes due). On a machine whose idle CPUs are slow to wake (a
        virtual machine's vCPU the host has descheduled), each thread that slept long pays
        that wake-up when work reaches it; woken shortly before, it is running or quick to
        wake again. On PostgreSQL each writer also runs ``SELECT 1`` on the pooled
        connection the next change will get, waking the server process behind it. Changes
        nothing else."""
        if self._closed:
            return
        writer = self._writer or self._pg_writers
        if writer is not None:
            writer.warm()

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(tx, *args)`` in a read-only transaction: one consistent snapshot of
        everything committed, including every change of this process that has returned.

        On SQLite the read runs on a reader connection (``BEGIN DEFERRED``): it does not
        queue behind this process's writes and takes no write lock. A function that tries
        to write (SQL, history rows, wake-ups) fails with :class:`StoreError`.
        """
        if self._closed:
            raise StoreError("the store is closed")
        loop = asyncio.get_running_loop()
        executor = self._readers.executor if self._readers is not None else self._executor
        try:
            running = loop.run_in_executor(executor, self._read, fn, args, time.monotonic())
        except RuntimeError as err:  # shut down since the check above
            raise StoreError("the store is closed") from err
        return await running

    def read_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """:meth:`read` on the calling thread (for tools and tests)."""
        return self._read(fn, args)

    def _read(self, fn: Callable[..., T], args: tuple[Any, ...], since: float | None = None) -> T:
        if self._readers is not None:
            return self._readers.run(fn, args, since)
        return self._run_pooled(fn, args, read_only=True, since=since)

    def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(tx, *args)`` in a transaction on the calling thread (for tools and tests)."""
        return self._run(fn, args)

    def _run(self, fn: Callable[..., T], args: tuple[Any, ...], since: float | None = None) -> T:
        if self._writer is not None and threading.current_thread() is not self._writer.thread:
            done: concurrent.futures.Future[T] = concurrent.futures.Future()
            self._writer.submit(fn, args, None, done, since or time.monotonic())
            return done.result()
        return self._run_pooled(fn, args, read_only=False, since=since)

    def _run_pooled(
        self,
        fn: Callable[..., T],
        args: tuple[Any, ...],
        *,
        read_only: bool,
        since: float | None = None,
        hold: str | None = None,
    ) -> T:
        """One transaction on a connection of the engine's pool.

        ``hold`` (a key, see :meth:`hold`): leave it open after ``fn`` has run; return
        ``fn``'s result and the :class:`HeldTransaction` that commits it.

        A failure that may pass (a lost or refused connection, a serialization failure, a
        deadlock: :func:`~engine._store.outage.classify`) runs the whole transaction again,
        after a backoff, until :attr:`retry_config` says to give up
        (:class:`~engine.exceptions.StoreUnavailableError`), counting from ``since`` (when
        the caller asked: time spent queued for a thread counts)."""
        waiting: Waiting | None = None
        while True:
            conn: sa.Connection | None = None
            try:
                try:
                    conn = self.engine.connect()
                except Exception as err:
                    kind = classify(err)
                    if kind is None:
                        raise self._translate(getattr(err, "orig", None) or err) from err
                    waiting = waiting or self._waiting(since)
                    waiting.pause(err, kind, connecting=True)
                    continue
                if hold is not None:
                    trans = conn.begin()
                    tx = StoreTx(conn, postgres=True)
                    tx.known_runs = {}
                    result = fn(tx, *args)
                    held = HeldTransaction(self, conn, trans, tx, hold)
                    with self._lock:
                        self._held[hold] = held
                    conn = None  # the held transaction closes it
                    return result, held  # type: ignore[return-value]
                with conn.begin():
                    tx = StoreTx(conn, postgres=self.postgres, read_only=read_only)
                    result = fn(tx, *args)
                    tx.write_pending_events()
                    if self.postgres and not read_only:
                        # The writes held back, the wake-ups and COMMIT in one round
                        # trip; SQLAlchemy's commit then finds nothing left to commit.
                        token = self._token
                        tx.commit_pipelined(NOTIFY_SQL, notify_params(token, tx.wakeups))
                    elif not read_only:
                        tx.wait_to_commit()
            except Exception as err:
                # Statements run on the driver's cursor: its errors arrive unwrapped.
                if not is_database_error(err):
                    raise
                kind = classify(err)
                if kind is None:
                    raise self._translate(getattr(err, "orig", None) or err) from err
                if kind == LOST and conn is not None:
                    with contextlib.suppress(Exception):
                        conn.invalidate()
                log.debug("running a transaction again after %s (%s)", kind, err)
                waiting = waiting or self._waiting(since)
                waiting.pause(err, kind, connecting=False)
                continue
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
            # Every success, not only one that waited: the operations that waited may all
            # have given up (StoreUnavailableError) before the database came back.
            self.outage.up()
            run_effects(tx.after)
            self.notifier.notify_many(tx.wakeups, tx.messages)
            return result

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (nothing it is asked will be done)."""
        return self._closed

    def _waiting(self, since: float | None = None) -> Waiting:
        """The waits of an operation that just failed for the first time (asked for at
        ``since``, ``time.monotonic()``; now if not given)."""
        if self._closed:
            raise StoreError("the store is closed")
        return Waiting(self.retry_config, self.outage, self._closing, since)

    def _remote_notify(self, payload: str) -> None:
        """A wake-up from PostgreSQL: ``<store token>:<channel>``. This store's own are
        skipped: they were notified here at commit, with their messages."""
        token, sep, channel = payload.partition(":")
        if sep and len(token) == 32 and all(c in "0123456789abcdef" for c in token):
            if token == self._token:
                return
            self.notifier.notify(channel)
        else:  # a process of an older release: the whole payload is the channel
            self.notifier.notify(payload)

    def _translate(self, err: BaseException) -> StoreError:
        """A driver error as the store's exception, saying which database and what."""
        code = getattr(err, "sqlstate", None)
        if code == "23505" or (isinstance(err, sqlite3.IntegrityError) and "UNIQUE" in str(err)):
            return StoreConflictError(f"conflicting change on {self.display_url}: {err}")
        return StoreError(f"database error on {self.display_url}: {err}")

    def close(self) -> None:
        """Stop the threads and close connections."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        # First, so that writers waiting for a held run's lock can finish and stop.
        self._close_held()
        if self._listener is not None:
            self._listener.stop()
        if self._writer is not None:
            self._writer.stop()
        if self._pg_writers is not None:
            self._pg_writers.stop()
        if self._readers is not None:
            self._readers.close()
        self._executor.shutdown(wait=True)
        self._close_held()  # those begun while the store was closing
        self._held_executor.shutdown(wait=True)
        self.engine.dispose()

    def _close_held(self) -> None:
        """Commit here what the store holds (``HeldTransaction.close_now``)."""
        with self._lock:
            held = list(self._held.values())
        for h in held:
            h.close_now()


async def _nothing() -> None:
    return None


class _SqliteReaders:
    """SQLite's readers: a few threads, each with a connection of its own for its life.

    A read is one ``BEGIN DEFERRED`` transaction: in WAL mode it reads the snapshot of the
    last commit when its first statement runs, for the whole read, and takes no write lock,
    so neither this process's writer nor another process's ever waits for it (nor it for
    them). The connections are ``query_only``: a write attempted in a read fails.

    SQLite may still answer a read with ``SQLITE_BUSY`` in rare moments (another process
    recovering the WAL after a crash, or closing the last connection to the file, holds it
    exclusively for a moment). The busy timeout waits those out; a read that still finds
    the database busy is run again (it changes nothing) as the store's retry configuration
    says.
    """

    SIZE = 3

    def __init__(self, store: Store) -> None:
        self.store = store
        self.executor = ThreadPoolExecutor(
            max_workers=self.SIZE, thread_name_prefix="durable-sqlite-reader"
        )
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns: set[sa.Connection] = set()
        self._closed = False

    def _connection(self) -> sa.Connection:
        conn: sa.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.store.engine.connect()
            driver = conn.connection.driver_connection
            assert driver is not None
            driver.execute("PRAGMA query_only=1")
            with self._lock:
                if self._closed:
                    conn.close()
                    raise StoreError("the store is closed")
                self._conns.add(conn)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn: sa.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            with self._lock:
                self._conns.discard(conn)
            with contextlib.suppress(Exception):
                conn.invalidate()
                conn.close()

    def run(self, fn: Callable[..., T], args: tuple[Any, ...], since: float | None = None) -> T:
        """Run the read ``fn(tx, *args)`` on this thread's connection (asked for at
        ``since``, from which the retry time counts)."""
        waiting: Waiting | None = None
        while True:
            try:
                conn = self._connection()
            except (DBAPIError, sqlite3.Error) as err:
                raise self.store._translate(getattr(err, "orig", None) or err) from err
            driver = conn.connection.driver_connection
            assert driver is not None
            try:
                driver.execute("BEGIN DEFERRED")
                try:
                    tx = StoreTx(conn, postgres=False, read_only=True)
                    result = fn(tx, *args)
                finally:
                    driver.rollback()  # ends the read, releasing its snapshot
            except sqlite3.OperationalError as err:
                if classify(err) == CONTENTION:
                    log.debug("read found the database busy (%s); reading again", err)
                    waiting = waiting or self.store._waiting(since)
                    waiting.pause(err, CONTENTION, connecting=False)
                    continue
                if "readonly" not in str(err).lower():
                    self._drop_connection()  # e.g. an I/O error: open a fresh one next time
                raise self.store._translate(err) from err
            except sqlite3.Error as err:
                raise self.store._translate(err) from err
            return result

    def close(self) -> None:
        """Wait for the reads under way, then close the connections."""
        with self._lock:
            self._closed = True
        self.executor.shutdown(wait=True)
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            with contextlib.suppress(Exception):
                conn.close()


def _restarting(err: DBAPIError) -> bool:
    """Whether PostgreSQL refused a connection because it is starting up, shutting down or
    recovering (SQLSTATE 57P03, "cannot connect now"). psycopg reports a refused
    connection without its SQLSTATE, so libpq's message is read too."""
    if getattr(err.orig, "sqlstate", None) == "57P03":
        return True
    text = str(err.orig).lower()
    return any(
        words in text
        for words in (
            "the database system is starting up",
            "the database system is shutting down",
            "the database system is not yet accepting connections",
            "the database system is in recovery mode",
        )
    )


_registry: dict[tuple[str, bool], Store] = {}
_registry_lock = threading.Lock()


def shared_store(
    url: str | None, *, fsync: bool = False, retry_config: RetryConfig | None = None
) -> Store:
    """One :class:`Store` per URL in this process, so clients and workers share wake-ups.

    Each call counts as a user; :func:`release_store` closes the store after the last one.
    A ``retry_config`` applies to the store from now on (for every user of it).
    """
    parsed = parse_url(url)
    key = (parsed.render_as_string(hide_password=False), fsync)
    with _registry_lock:
        store = _registry.get(key)
        if store is None or store._closed:
            store = Store(key[0], fsync=fsync, retry_config=retry_config)
            store.open()
            _registry[key] = store
        elif retry_config is not None:
            store.retry_config = retry_config
        store._users += 1
        return store


def release_store(store: Store) -> None:
    """One user of a shared store is done; close it when none is left."""
    with _registry_lock:
        store._users -= 1
        if store._users > 0:
            return
        for key, value in list(_registry.items()):
            if value is store:
                del _registry[key]
    store.close()
