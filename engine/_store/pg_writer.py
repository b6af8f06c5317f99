"""PostgreSQL group commit: the changes of this process that wait at the same moment run
back to back in one transaction, with one commit, as SQLite's writer does.

- A few writer threads (:attr:`PgWriters.THREADS`) share one queue. Each takes every
  change waiting, at most :attr:`PgWriters.MAX_BATCH`, and runs them in one transaction on a
  connection of the pool. A change that waits alone runs as it would without batching
  (``Store._run_pooled``): a lone step costs what it did.
- Each change has a ``StoreTx`` of its own that follows the one before it: the writes one
  change holds back go in the same query as the next one's first read, and the last
  one's commit carries what is left with every wake-up of the batch. Commit is one round
  trip for the whole batch.
- A batch holds the locks of all its changes until it commits, so two batches (of this
  process or of two) could each wait for a run the other holds. A batch therefore waits for
  a lock at most :attr:`PgWriters.LOCK_TIMEOUT_MS` (``SET LOCAL lock_timeout``): such a wait
  ends in an error, not in PostgreSQL's deadlock check after a second.
- The runs the changes say they will lock (``operation(locks=...)``) are locked and read
  first, all in one round trip, in run id order (``engine._store.ahead``): each change's
  first lock of its run then takes what was read instead of waiting for a round trip of
  its own, while the batch holds the locks of the changes before it.
- A change that raises (a run not found, a workflow id taken, ...) before any of its
  writes reached the server is taken out of the batch: its held-back writes are dropped,
  its caller gets the exception once the others have committed. The locks its reads took
  stay until that commit. A change that must run alone (``_RunsAlone``: it needs a
  snapshot of its own) is taken out the same way and runs after the batch.
- Anything else that fails (a change that raised after its writes were sent, a database
  error, a lock timed out, the connection was lost) rolls the batch back, and each change
  runs again alone, with the store's usual waits and retries, so one caller's failure
  never reaches another caller's change. They run again in their order on the same
  thread, except the one that waited too long for a lock: it goes back to the queue,
  marked to run alone, for any free writer, so that its wait holds up none of the others.
  (A lock that waited too long while the batch locked runs ahead is nobody's in
  particular: every change that named runs goes back to the queue so.)
- The lock timeout ends before the commit, whose wait for PostgreSQL's ``NOTIFY`` lock is
  a queue of committers, not a deadlock.

Transaction functions are pure (see ``engine._store.gateway``), so running one again is
safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..exceptions import StoreError
from .ahead import lock_hint, wanted_by
from .delivery import WARM, Job, Warm, announce, deliver, deliver_all
from .dialects import NOTIFY_CHANNEL
from .outage import LOST, classify, is_database_error
from .shared_time import one_time
from .tx import StoreTx, _RunsAlone

if TYPE_CHECKING:
    from .gateway import Store

log = logging.getLogger("engine.store")

#: A wake-up for other processes (``LISTEN`` in ``PostgresListener``); sent in the
#: commit's query, so it is delivered only if the change commits.
#: The wake-ups of a commit, in one statement: one notification per payload, in order.
NOTIFY_SQL = "SELECT pg_notify(%(c)s, p) FROM unnest(CAST(%(ps)s AS text[])) AS p"


def notify_params(token: str, channels: Iterable[str]) -> list[dict[str, Any]]:
    """The parameters of :data:`NOTIFY_SQL` (sent with a commit) for the wake-up
    ``channels`` of this process (``token``): none when there are none."""
    payloads = [f"{token}:{c}" for c in channels]
    return [{"c": NOTIFY_CHANNEL, "ps": payloads}] if payloads else []


#: PostgreSQL's SQLSTATE for a lock wait that ran past ``lock_timeout``.
LOCK_NOT_AVAILABLE = "55P03"


#: What a change of a batch came to: its result, the exception it raised (delivered once
#: the batch commits), or that it must run alone after the batch.
_OK, _RAISED, _ALONE = "ok", "raised", "alone"


class _BatchFailed(Exception):
    """A batch failed (its cause is why) while change number ``index`` was running
    (:data:`_AHEAD`: while it locked its changes' runs ahead)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


#: The index of a :class:`_BatchFailed` in the batch's lock ahead, before any change ran.
_AHEAD = -1


def _sqlstate(err: BaseException | None) -> str | None:
    code = getattr(err, "sqlstate", None) or getattr(getattr(err, "orig", None), "sqlstate", None)
    return code if isinstance(code, str) else None


@dataclass(frozen=True)
class _Alone:
    """A change to run in a transaction of its own: one of a batch that failed, queued
    again, or one submitted so (``submit(..., alone=True)``). A writer gathering a batch
    that meets one puts it back for a free writer."""

    job: Job


class PgWriters:
    """The writer threads of a PostgreSQL store (see the module docstring)."""

    #: Two: one may wait (a timer pass's commit held to its due time, a lock) while the
    #: other writes. A third bought no throughput and cost CPU: every writer contends for
    #: the interpreter lock with the worker, and W1 took 7 % more CPU per workflow with
    #: three (bench/README.md, "Result reads together", eighth session).
    THREADS = 2
    MAX_BATCH = 64
    LOCK_TIMEOUT_MS = 50

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: queue.SimpleQueue[Job | _Alone | Warm | None] = queue.SimpleQueue()
        #: Set by :meth:`stop` (under ``_lock``): nothing is queued any more.
        self._stopped = False
        self._lock = threading.Lock()
        #: How many threads are running changes now (changed under ``_lock``; read
        #: without it by :meth:`idle`, a hint).
        self.running = 0
        self.threads = [
            threading.Thread(target=self._main, name=f"durable-pg-writer-{i}", daemon=True)
            for i in range(self.THREADS)
        ]
        for thread in self.threads:
            thread.start()

    def submit(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        loop: asyncio.AbstractEventLoop | None,
        fut: Any,
        since: float,
        *,
        alone: bool = False,
    ) -> None:
        """Queue a change; ``alone``: to run in a transaction of its own."""
        job: Job = (fn, args, loop, fut, since)
        with self._lock:
            if self._stopped:
                raise StoreError("the store is closed")
            self._queue.put(_Alone(job) if alone else job)

    def warm(self) -> None:
        """Wake the threads (see ``Store.warm``): one item each, though a thread may take
        two and leave another asleep. Each runs ``SELECT 1`` (:meth:`_ping`)."""
        with self._lock:
            if not self._stopped:
                for _ in self.threads:
                    self._queue.put(WARM)

    def stop(self) -> None:
        """Queue no more; stop the threads once the changes queued before are done (one
        stop each), then run here what a failed batch put back behind the stops."""
        with self._lock:
            self._stopped = True
            for _ in self.threads:
                self._queue.put(None)
        for thread in self.threads:
            thread.join(timeout=10)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not None and not isinstance(item, Warm):
                self._run_alone(item.job if isinstance(item, _Alone) else item)

    def _requeue(self, job: Job) -> None:
        """Put a change back to run alone on any free writer (here, once stopping)."""
        with self._lock:
            if not self._stopped:
                self._queue.put(_Alone(job))
                return
        self._run_alone(job)

    def _ping(self) -> None:
        """``SELECT 1`` on a pooled connection (for :meth:`warm`): the server process
        behind it wakes too, and the pool hands that connection out next. None while the
        database is known to be unreachable (the changes' own retries wait for it); a
        failure is only logged: the change that follows meets the database as it is."""
        if self.store.outage.down_since is not None:
            return
        try:
            with self.store.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
        except Exception as err:
            log.debug("warming a connection failed: %s", err)

    def _main(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, Warm):
                self._ping()
                continue
            batch = [item.job if isinstance(item, _Alone) else item]
            stop = False
            while not isinstance(item, _Alone) and len(batch) < self.MAX_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # this thread's stop: after this batch
                    stop = True
                    break
                if isinstance(more, _Alone):
                    # Back to the queue, for a writer that is free now (one to run alone
                    # may be due soon: a timer pass started ahead), not after this batch.
                    self._requeue(more.job)
                    break
                if not isinstance(more, Warm):
                    batch.append(more)
            with self._lock:
                self.running += 1
            try:
                self._run_batch(batch)
            except BaseException as err:  # a bug: answer everyone, keep the thread
                log.exception("a PostgreSQL writer failed; its changes get the error")
                failure = StoreError(f"the store's writer failed: {err!r}")
                for _, _, loop, fut, _ in batch:
                    deliver(loop, fut, None, failure)
            finally:
                with self._lock:
                    self.running -= 1
            if stop:
                return

    def idle(self) -> bool:
        """Whether no change is waiting or running now (a hint, read without a lock)."""
        return not self.running and self._queue.empty()

    def _run_batch(self, batch: list[Job]) -> None:
        store = self.store
        if len(batch) == 1:
            self._run_alone(batch[0])
            return
        try:
            outcomes, txs = self._together(batch)
        except _BatchFailed as failed:
            err = failed.__cause__
            log.debug("a batch of %d changes failed (%r): each runs alone", len(batch), err)
            again = batch
            if _sqlstate(err) == LOCK_NOT_AVAILABLE and failed.index == _AHEAD:
                # One of the runs locked ahead is held elsewhere, which is not known: the
                # changes that named runs go back to the queue, as below.
                named = [job for job in batch if lock_hint(job[0]) is not None]
                for job in named:
                    self._requeue(job)
                again = [job for job in batch if lock_hint(job[0]) is None]
            elif _sqlstate(err) == LOCK_NOT_AVAILABLE:
                # The change that waited goes back to the queue for any free writer, so
                # that its wait holds up none of the others.
                self._requeue(batch[failed.index])
                again = batch[: failed.index] + batch[failed.index + 1 :]
            for job in again:  # in their order, as SQLite's writer runs them again
                self._run_alone(job)
            return
        store.outage.up()
        announce(txs, store.notifier)
        done = []
        for (_, _, loop, fut, _), (kind, value) in zip(batch, outcomes, strict=True):
            if kind == _OK:
                done.append((loop, fut, value))
            elif kind == _RAISED:
                deliver(loop, fut, None, value)
        deliver_all(done)
        for job, (kind, _) in zip(batch, outcomes, strict=True):
            if kind == _ALONE:
                self._run_alone(job)

    def _run_alone(self, job: Job) -> None:
        """One change in a transaction of its own, with the store's waits and retries."""
        fn, args, loop, fut, since = job
        try:
            result = self.store._run_pooled(fn, args, read_only=False, since=since)
        except BaseException as err:  # delivered to the caller, who raises it
            deliver(loop, fut, None, err)
        else:
            deliver(loop, fut, result, None)

    def _together(self, batch: list[Job]) -> tuple[list[tuple[str, Any]], list[StoreTx]]:
        """Run the batch's changes in one transaction and commit it: what each came to,
        and the transactions of those that stayed in. A failure that takes more than
        withdrawing a change raises :class:`_BatchFailed`, with everything rolled back."""
        store = self.store
        outcomes: list[tuple[str, Any]] = []
        txs: list[StoreTx] = []
        conn: sa.Connection | None = None
        ahead = False
        try:
            conn = store.engine.connect()
            with conn.begin():
                pending: list[dict[str, Any]] = []
                # The batch's own statements first: its limit on lock waits, and the runs
                # its changes say they lock, locked and read in one round trip.
                tx = StoreTx(conn, postgres=True, pending_events=pending)
                tx.limit_lock_waits(self.LOCK_TIMEOUT_MS)
                ahead = True
                latest: set[tuple[str, str]] = set()
                runs = wanted_by(((fn, args) for fn, args, _, _, _ in batch), latest)
                tx.lock_ahead(runs, latest)
                ahead = False
                with one_time():  # the batch's changes read one time (see shared_time)
                    for fn, args, _, _, _ in batch:
                        tx = StoreTx(conn, postgres=True, pending_events=pending, follows=tx)
                        try:
                            outcomes.append((_OK, fn(tx, *args)))
                        except Exception as err:
                            if is_database_error(err) or not tx.withdraw():
                                raise
                            outcomes.append(
                                (_ALONE, None) if isinstance(err, _RunsAlone) else (_RAISED, err)
                            )
                            continue
                        txs.append(tx)
                tx.write_pending_events()
                tx.limit_lock_waits(0)  # the commit's wait for the NOTIFY lock is no deadlock
                channels = set().union(*(t.wakeups for t in txs))
                token = store._token
                tx.commit_pipelined(NOTIFY_SQL, notify_params(token, channels))
        except Exception as err:
            if conn is not None and classify(err) == LOST:
                with contextlib.suppress(Exception):
                    conn.invalidate()
            # The change that was running (a held-back write that failed is blamed on the
            # change whose read or commit sent it).
            raise _BatchFailed(_AHEAD if ahead else min(len(outcomes), len(batch) - 1)) from err
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        return outcomes, txs
