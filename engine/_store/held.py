"""PostgreSQL: one transaction for an activity step (a change left open for the next one).

A step of a workflow is two changes: an activity's outcome, which starts the run's next
workflow task for the worker that holds the run in its cache (``engine._service.handoff``),
and that task's completion, once the worker has run the workflow code. Each used to be a
transaction of its own. A transaction on PostgreSQL costs a commit, a connection taken from
the pool and given back, and a read that locks the run again: about half of a lone step's
time went on the second one.

So the outcome's transaction can be **held**: :meth:`Store.hold` runs the first change and
leaves its transaction open, and the task's completion runs in it and commits both
(:meth:`HeldTransaction.commit_with`). The worker runs the workflow code meanwhile, on
events that are not committed yet: nothing outside this process is told of them before
the commit, as for any change.

Rules, so that nothing is lost and nothing waits long:

- **Bounded.** A held transaction holds its run's lock. If the second change has not come
  within :data:`HOLD_LIMIT` seconds (the workflow code runs long, or runs local
  activities), the first change commits alone (:meth:`HeldTransaction.commit`), and the
  second runs later in a transaction of its own: the two transactions of before. Whatever
  else the worker does with the task first commits it the same way. At most
  :data:`MAX_HELD` are open at once per store; past that, outcomes commit at once. Nor
  does a store hold while its writers have other changes waiting or running: under load,
  their group commit costs less per change than a transaction of its own.
- **Nothing lost.** If the held transaction fails (the connection was lost, the commit
  failed, the second change raised), everything in it is rolled back, and the first change
  is recorded again by itself (the caller's ``redo``: the activity runner sends the
  outcome again until the store takes it). The worker's task then names a workflow task
  that was never committed: the worker drops it (:class:`_TaskRolledBack`) and forgets the
  run, whose next task goes through the queue with its history read afresh.
- **Pure functions still.** Both changes are transaction functions as any other: run again
  after a rollback, they change nothing outside the database. The workflow code, which is
  not one, is never run again for a rolled-back change: its run is evicted instead.

SQLite does not hold: its one writer would wait for workflow code, and its transactions
already cost far less than PostgreSQL's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from .delivery import announce
from .outage import LOST, classify, is_database_error
from .pg_writer import NOTIFY_SQL, notify_params
from .tx import StoreTx

if TYPE_CHECKING:
    from .gateway import Store

T = TypeVar("T")
log = logging.getLogger("engine.store")

#: How long a transaction may be held for the change that should follow (seconds).
HOLD_LIMIT = 0.02
#: How many transactions a store holds open at once (each holds a pooled connection).
MAX_HELD = 4

_OPEN, _BUSY, _DONE = "open", "busy", "done"


class _TaskRolledBack(Exception):
    """The held transaction that started a workflow task failed and was rolled back: the
    task never existed. The first change was recorded again by itself; the worker drops
    the task and forgets the run (its next task comes through the queue)."""


class HeldTransaction:
    """A PostgreSQL transaction whose first change ran and which waits for a second one
    (see the module docstring). Made by :meth:`Store.hold`; used from the event loop of the
    caller that held it (the transaction's statements run on the store's threads)."""

    def __init__(
        self, store: Store, conn: sa.Connection, trans: Any, tx: StoreTx, key: str
    ) -> None:
        self.store = store
        #: What the transaction locks (its run): the store holds one per key.
        self.key = key
        self._conn: sa.Connection | None = conn
        self._trans = trans
        self._tx = tx
        self._lock = threading.Lock()
        self._state = _OPEN
        #: Set once the first change is committed, alone or with a second (True), or
        #: rolled back (False); awaited by a second change that came too late to join.
        self._committed: asyncio.Future[bool] | None = None
        self._redo: Callable[[], Awaitable[Any]] | None = None
        self._expiry: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: asyncio.Task[None] | None = None

    # -- the caller's side (its event loop) -----------------------------------------------

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        redo: Callable[[], Awaitable[Any]],
        limit: float = HOLD_LIMIT,
    ) -> None:
        """Begin holding: ``redo()`` records the first change again if the transaction is
        rolled back; after ``limit`` seconds the first change commits alone."""
        self._loop = loop
        self._redo = redo
        self._committed = loop.create_future()
        self._expiry = loop.call_later(limit, self._expire)

    @property
    def open(self) -> bool:
        """Whether the transaction still waits for its second change."""
        return self._state == _OPEN

    @property
    def rolled_back(self) -> bool:
        """Whether it ended, rolled back: the workflow task it started never existed."""
        return _failed(self._committed)

    async def commit(self) -> None:
        """Commit the first change alone, if nothing has ended the transaction yet (else
        wait until it has). A failure is handled here (the first change is recorded again)
        and not raised."""
        if self._take():
            self.store.held_counts["alone"] += 1
            failure: list[BaseException] = []
            await self._in_thread(self._commit, None, failure)
            if failure:
                log.debug("a held transaction failed to commit: %s", failure[0])
            await self._ended(not failure)
        else:
            await self._wait_committed()

    async def commit_with(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(tx, *args)`` in the held transaction and commit both changes.

        If the first change was committed alone meanwhile (the time limit passed), ``fn``
        runs in a transaction of its own. If the held transaction fails, the first change
        is recorded again by itself and :class:`_TaskRolledBack` is raised (or what ``fn``
        raised, if it was not a database error)."""
        if not self._take():
            if await self._wait_committed():
                return await self.store.transaction(fn, *args)
            raise _TaskRolledBack("the transaction that started this workflow task rolled back")
        self.store.held_counts["joined"] += 1
        failure: list[BaseException] = []
        result = await self._in_thread(self._commit, (fn, args), failure)
        await self._ended(not failure)
        if failure:
            err = failure[0]
            if is_database_error(err) or isinstance(err, _ConnectionGone):
                raise _TaskRolledBack(
                    f"the transaction that started this workflow task rolled back ({err})"
                ) from err
            raise err
        return result  # type: ignore[no-any-return]

    def _take(self, *, on_loop: bool = True) -> bool:
        """Take the open transaction to end it (False if something else took it)."""
        with self._lock:
            if self._state != _OPEN:
                return False
            self._state = _BUSY
        if on_loop and self._expiry is not None:
            self._expiry.cancel()  # (off the loop, the expiry finds the state taken)
        return True

    async def _wait_committed(self) -> bool:
        assert self._committed is not None
        return await asyncio.shield(self._committed)

    def _expire(self) -> None:
        """The time limit passed: commit the first change alone (in the background)."""
        if self._state == _OPEN and self._loop is not None:
            self.store.held_counts["expired"] += 1
            self._background = self._loop.create_task(self.commit())

    async def _in_thread(
        self,
        commit: Callable[..., Any],
        second: tuple[Callable[..., Any], tuple[Any, ...]] | None,
        failure: list[BaseException],
    ) -> Any:
        """Run the commit on a store thread; its result, or None with the error put in
        ``failure`` when it failed."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.shield(
                loop.run_in_executor(self.store._held_executor, commit, second)
            )
        except Exception as err:
            failure.append(err)
            return None

    async def _ended(self, ok: bool) -> None:
        """After the commit (``ok``) or a failure: on a failure, record the first change
        again (the caller's ``redo``); then let those waiting know."""
        if not ok:
            self.store.held_counts["failed"] += 1
        self.store._held_ended(self.key)
        if not ok and self._redo is not None:
            try:
                await self._redo()
            except Exception:
                log.exception("recording a change again after its held transaction failed")
        if self._committed is not None and not self._committed.done():
            self._committed.set_result(ok)

    # -- the store's threads --------------------------------------------------------------

    def _commit(self, second: tuple[Callable[..., Any], tuple[Any, ...]] | None) -> Any:
        """Run the second change (if any) in the transaction and commit it; the second
        change's result. Closes the connection, whatever happens."""
        conn = self._conn
        if conn is None:
            raise _ConnectionGone("the held transaction's connection was closed")
        store = self.store
        txs = [self._tx]
        try:
            result = None
            if second is not None:
                fn, args = second
                tx = StoreTx(
                    conn, postgres=True, pending_events=self._tx.pending_events, follows=self._tx
                )
                result = fn(tx, *args)
                txs.append(tx)
            last = txs[-1]
            last.write_pending_events()
            channels = set().union(*(t.wakeups for t in txs))
            token = store._token
            last.commit_pipelined(NOTIFY_SQL, notify_params(token, channels))
            self._trans.commit()
        except BaseException as err:
            if is_database_error(err) and classify(err) == LOST:
                with contextlib.suppress(Exception):
                    conn.invalidate()
            raise
        finally:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
        store.outage.up()
        announce(txs, store.notifier)
        return result

    def close_now(self) -> None:
        """The store is closing: commit the first change alone here and now, if the
        transaction is still open (a failure is logged: the store can no longer record it
        again)."""
        if not self._take(on_loop=False):
            return
        ok = True
        try:
            self._commit(None)
        except Exception as err:
            ok = False
            log.warning("a held transaction could not commit as the store closed: %s", err)
        self.store._held_ended(self.key)
        loop, committed = self._loop, self._committed
        if loop is not None and committed is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, committed, ok)


def _failed(committed: asyncio.Future[bool] | None) -> bool:
    return committed is not None and committed.done() and not committed.result()


def _resolve(fut: asyncio.Future[bool], ok: bool) -> None:
    if not fut.done():
        fut.set_result(ok)


class _ConnectionGone(Exception):
    """The held transaction was already ended on its connection."""


class Committing:
    """The transaction that started a workflow task is committing, and the task was handed
    to its worker before the commit came back (the timer loop does so, on both backends,
    with the tasks its firing pass started: ``engine._service.host``). As with a held transaction,
    the worker runs the workflow code meanwhile; everything it sends about the task waits
    for the commit first, and if the commit failed the task never existed: the worker
    drops it (:class:`_TaskRolledBack`) and forgets the run. Used from the event loop.

    When the connection was lost with the ``COMMIT`` sent, the server may have committed:
    :attr:`probe` (set by whoever handed the tasks out: the timer loop asks PostgreSQL
    about the transaction's id) then tells whether it did, once the database answers
    again. Without it such a task would be dropped although it exists, and its run would
    wait for the task's timeout."""

    def __init__(self, store: Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self._loop = loop
        self._committed: asyncio.Future[bool] = loop.create_future()
        #: Reads whether the transaction committed (after a lost connection); None: it
        #: is taken as rolled back.
        self.probe: Callable[[], Awaitable[bool]] | None = None
        self._probing: asyncio.Task[None] | None = None  # (held: the loop keeps weak refs)
        self._spoken = False

    def settle(self, committed: bool | None) -> None:
        """The commit came back (True), or failed (False), or nobody knows (None: the
        connection was lost with the ``COMMIT`` sent; :attr:`probe` tells). The first word
        counts (a later one, say from the store's rerun of the transaction, is about
        another transaction)."""
        if self._spoken:
            return
        self._spoken = True
        if committed is not None or self.probe is None:
            _resolve(self._committed, bool(committed))
        else:
            self._probing = self._loop.create_task(self._settle_by_probe(self.probe))

    async def _settle_by_probe(self, probe: Callable[[], Awaitable[bool]]) -> None:
        try:
            committed = await probe()
        except Exception as err:  # the database stayed away: as before, dropped
            log.warning("whether a commit went through is unknown (%s): its tasks are dropped", err)
            committed = False
        _resolve(self._committed, committed)

    async def commit(self) -> None:
        """Wait until the commit has come back (whatever it came to)."""
        await asyncio.shield(self._committed)

    @property
    def rolled_back(self) -> bool:
        """Whether the commit came back failed (the task never existed)."""
        return _failed(self._committed)

    async def commit_with(self, fn: Callable[..., T], *args: Any) -> T:
        """Once the commit has come back: ``fn(tx, *args)`` in a transaction of its own;
        :class:`_TaskRolledBack` if the commit failed."""
        if not await asyncio.shield(self._committed):
            raise _TaskRolledBack("the transaction that started this workflow task failed")
        return await self.store.transaction(fn, *args)
