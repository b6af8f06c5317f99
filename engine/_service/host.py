"""Hosting the service's background duties: firing timers, taking schedules' actions,
skipping time when idle, and deleting closed runs once their namespace's retention period
is over.

Any process may run a :class:`ServiceHost` (the Jupyter server does, and so does every
:class:`~engine.Worker` unless told not to); timers are claimed transactionally, so several
hosts on one database never fire a timer twice, nor take a schedule's action twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from .._store.commit_at import CommitAt
from .._store.held import Committing
from .._store.pg_stats import STATS_INTERVAL, StatsKeeper
from .._store.tx import StoreTx
from ..exceptions import StoreUnavailableError
from .alarm import Alarm
from .handoff import Reservation
from .namespaces import SWEEP_BATCH
from .service import Service
from .state import TIMER_HORIZON, TIMERS_CHANNEL
from .types import WorkflowTask

log = logging.getLogger("engine.service")

#: How many of the next timers the loop looks at before it waits, to reserve their
#: workers' slots when they come due (timers due together beyond these fire as usual).
EAGER_LOOKAHEAD = 64

#: The longest the loop waits past the next timer for the timers due just after it, so that
#: one firing pass takes them all (see :meth:`ServiceHost._gather_until`).
GATHER_MAX = 0.005

#: The most timers one firing pass fires (the rest wait for the next pass, at once).
FIRE_LIMIT = 200

#: Timers due this soon after the loop looks are expected too (their runs locked ahead, a
#: slot reserved with their workers): the firing transaction reads its clock a little later,
#: and a timer it finds due but did not expect is handed to no worker (a poll takes it).
EXPECT_MARGIN = 0.002

#: How long before the next timer the loop wakes its store's writer and the activation
#: threads of the workers holding the timers' runs (see :meth:`ServiceHost._warm`), when it
#: would otherwise wait longer than twice this.
WARM_LEAD = 0.02

#: How long before its timers are due a firing pass starts, at first (seconds). It reads
#: and writes what they need meanwhile, holding their runs' locks (on SQLite, the write
#: lock), and commits when they are due (``StoreTx.commit_not_before``): at the due time,
#: only the commit is left to wait for (on PostgreSQL, its round trip). Later,
#: :data:`PREFIRE_FACTOR` times as long as that part of a pass took lately (passes of about
#: as many timers: it grows with them), within :data:`PREFIRE_MIN` and :data:`PREFIRE_MAX`.
#: Generous: on a virtual machine that part varies twofold from one pass to the next, and
#: starting early only holds the timers' runs (a change to one of them waits for the pass)
#: and a connection a little longer (on SQLite, the writer: the changes of this process
#: queue meanwhile, and commit together after it).
PREFIRE_FIRST = 0.004
PREFIRE_FACTOR = 2.0
PREFIRE_MIN = 0.001
PREFIRE_MAX = 0.02

#: The loop looks at the timers at least every ``poll_interval``; when that look would come
#: less than this before the next timer is due (seconds), it comes this long before instead.
POLL_SLACK = 0.05

#: Clock seconds between two retention sweeps, and from the host's start to its first.
SWEEP_INTERVAL = 60.0
SWEEP_DELAY = 5.0


#: How long (seconds) the probe of a commit whose answer was lost waits for PostgreSQL to
#: end the transaction (a server process whose client vanished may hold it open until its
#: keepalives give up: about 15 s, ``PG_CONNECT_ARGS``), before taking it as rolled back.
PROBE_PATIENCE = 20.0


class ServiceHost:
    """Runs the timer loop of a :class:`Service` as an asyncio task."""

    def __init__(
        self,
        service: Service,
        *,
        poll_interval: float = TIMER_HORIZON,
        sweep_delay: float = SWEEP_DELAY,
    ) -> None:
        self.service = service
        self.poll_interval = poll_interval
        #: Clock seconds from the start to the first retention sweep.
        self.sweep_delay = sweep_delay
        self._task: asyncio.Task[None] | None = None
        #: On PostgreSQL: keeps the planner's statistics of the engine's tables up to date
        #: while they grow fast (see ``engine._store.pg_stats``).
        self._stats_task: asyncio.Task[None] | None = None
        self._stopping = False
        self._next_sweep = 0.0
        #: The first timers by due time (run id, due, timer id, whether a pass started
        #: ahead may fire it), read before the wait.
        self._upcoming: list[tuple[str, float, int, bool]] = []
        #: How long a firing pass that fired something took lately (seconds, a moving
        #: average): the timers due within that long after the next one wait for it. Before
        #: the first, half the most it waits for them.
        self._pass_seconds = GATHER_MAX / 2
        #: The due time the next firing pass fires as of, when it starts ahead
        #: of it (see :data:`PREFIRE_FIRST`); None: a pass as of now.
        self._at: float | None = None
        #: How long a pass started ahead took lately until only its commit was left
        #: (seconds, a moving average), by how many timers it expected (a power of two:
        #: 1, 2-3, 4-7, ... as ``int.bit_length``).
        self._prep_seconds: dict[int, float] = {}
        #: Wakes the loop for the next timer on time (asyncio's own waits end up to a
        #: millisecond or more late: see ``engine._service.alarm``).
        self._alarm = Alarm("durable-timer-alarm")

    def start(self) -> None:
        """Start the loop on the running event loop."""
        if self._task is None:
            self._stopping = False
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._run(), name="durable-host")
            if self.service.store.postgres and self._stats_task is None:
                self._stats_task = loop.create_task(self._keep_stats(), name="durable-stats")

    async def stop(self) -> None:
        """Stop the loop and wait for it."""
        self._stopping = True
        for task in (self._task, self._stats_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._stats_task = None
        self._alarm.close()

    async def _run(self) -> None:
        service = self.service
        clock = service.clock
        notifier = service.store.notifier
        self._next_sweep = clock.now() + self.sweep_delay
        # Whether something is known to be due (the wait ended at its timer, or the read
        # found one due): only then a firing pass. After a notification or the poll
        # interval the turn reads first (the read covers every kind of deadline), so no
        # write transaction runs for nothing, and a pass just before a timer is due does
        # not hold up the one that starts ahead of it. Under time skipping, a pass each turn.
        due = True
        while not self._stopping:
            try:
                # One batch per turn, between the timers; a full one leaves the next due.
                # Not under a time-skipping clock (Temporal's test server keeps every run).
                if not clock.skipping and clock.now() >= self._next_sweep:
                    await self._sweep_batch()
                generation = notifier.generation(TIMERS_CHANNEL)
                fired = await self._fire_due() if due or clock.skipping else 0
                due = True  # until the wait below says otherwise (an error: a pass again)
                # A full pass leaves more due: another at once. After any other, the read
                # of the next timers below finds what came due meanwhile (a wait of zero),
                # so no write transaction runs for nothing beside the tasks just started.
                # Under time skipping, as before: a pass again at once.
                if fired >= FIRE_LIMIT or (fired and clock.skipping):
                    continue
                if clock.skipping:
                    if await service.fire_due_schedules():
                        continue
                    if getattr(clock, "auto_skip", False):
                        # Give in-process workers a moment to pick up anything just committed.
                        await asyncio.sleep(0.002)
                        if await service.skip_to_next_timer():
                            continue
                    next_at = await service.next_timer_at()
                else:
                    # The schedules due and the next timers, read at the same time (two
                    # round trips at once, not one after the other: a timer due just after
                    # the pass that ended waits for them). A schedule's pass may add timers:
                    # after one, the turn starts again and reads them.
                    ran, (next_at, upcoming) = await asyncio.gather(
                        service.fire_due_schedules(), service.next_timers(EAGER_LOOKAHEAD)
                    )
                    if ran:
                        continue
                    self._upcoming = upcoming
                delay = self.poll_interval
                if not clock.skipping:  # wake for the next sweep batch too
                    delay = min(delay, clock.real_delay(self._next_sweep))
                target = None  # when the next pass is due, if the wait is for a timer
                if next_at is not None:
                    if clock.skipping:
                        delay = min(delay, clock.real_delay(next_at), 0.05)
                    else:
                        delay, target = self._next_wait(delay, next_at)
                # The pass starts a little ahead and commits at the target, if what it
                # expects to fire may fire so (no deadline: see AHEAD_KINDS).
                lead = 0.0
                if target is not None:
                    due_by = [e[3] for e in self._upcoming if e[1] <= target]
                    if due_by and all(due_by):
                        lead = self._lead(len(due_by))
                if target is not None and delay - lead > 2 * WARM_LEAD:
                    # Most of the wait, then wake the threads the timers will need, then
                    # the rest (a notification in the first part starts the turn again).
                    if await notifier.wait(
                        TIMERS_CHANNEL,
                        delay - lead - WARM_LEAD,
                        since=generation,
                        call_later=self._alarm.call_later,
                    ):
                        due = False  # something changed: read again first
                        continue
                    self._warm(target)
                    delay = clock.real_delay(target)
                if lead:
                    self._at = target
                    delay -= lead
                if delay > 0 and await notifier.wait(
                    TIMERS_CHANNEL, delay, since=generation, call_later=self._alarm.call_later
                ):
                    self._at = None  # something changed: read again first
                    due = False
                else:
                    # At its timer: a pass. At the poll interval or a sweep: a read first.
                    due = target is not None
            except asyncio.CancelledError:
                raise
            except StoreUnavailableError as err:  # the store logs outages itself, once
                log.debug("timer loop: %s; retrying in a second", err)
                await asyncio.sleep(1.0)
            except Exception:
                log.exception("timer loop error; retrying in a second")
                await asyncio.sleep(1.0)

    async def _keep_stats(self) -> None:
        """Every :data:`STATS_INTERVAL`, ``ANALYZE`` the engine's tables that grew past
        autovacuum's threshold (:class:`StatsKeeper`), off the event loop (a thread of the
        loop's default executor); stopping waits for an ``ANALYZE`` under way (its
        connection goes back to the pool)."""
        store = self.service.store
        keeper = StatsKeeper(store.engine)
        while True:
            await asyncio.sleep(STATS_INTERVAL)
            if store.closed:
                return
            running = asyncio.ensure_future(asyncio.to_thread(keeper.run_once))
            try:
                await asyncio.shield(running)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await running
                raise
            except Exception as err:  # an outage, a dropped table: the next look tries again
                log.debug("planner statistics not kept this time: %s", err)

    async def _fire_due(self) -> int:
        """Fire what is due. The timers among the upcoming ones (read before the wait)
        that are due now (or within :data:`EXPECT_MARGIN`) are expected: the firing
        transaction locks their runs with its first read. Their runs' workers may hold
        them in their caches: a slot is reserved with each such worker of this process,
        and the transaction that fires the timer starts the run's workflow task for it
        (no poll, no wake-up). A pass the wait ended ahead of its due time
        (``self._at``) fires what is due by then, and commits at that time."""
        service = self.service
        reservations = {}
        expected: list[tuple[int, str]] = []
        at, self._at = self._at, None
        now = service.clock.now()
        horizon = now + EXPECT_MARGIN if at is None else max(now + EXPECT_MARGIN, at)
        if self._upcoming:
            for run_id, fire_at, timer_id, _ in self._upcoming:
                if fire_at > horizon:
                    break
                expected.append((timer_id, run_id))
                if run_id not in reservations:
                    reservation = service.handoffs.offer_next(None, run_id)
                    if reservation is not None:
                        reservations[run_id] = reservation
            # The later ones stay for the next passes, and so do those expected within the
            # margin: the transaction's clock may not have reached them (if it fired them,
            # the next pass finds them gone and gives their slots back).
            self._upcoming = [e for e in self._upcoming if e[1] > max(now, at or now)]
        began = time.monotonic()
        commit_at = None
        if not expected:
            fired = await service.fire_due_timers(FIRE_LIMIT)
        else:
            started: dict[str, WorkflowTask] = {}
            try:
                if at is None:
                    fired, started = await service.fire_due_timers_eager(
                        reservations, expected, FIRE_LIMIT
                    )
                else:
                    # (Bounded: a wall clock set back meanwhile must not hold the runs.)
                    wait = min(service.clock.real_delay(at), 2 * PREFIRE_MAX)
                    commit_at = CommitAt(began + wait)
                    # (Whatever happens here, a pass that handed tasks out tells their
                    # workers what its commit came to: the store's thread does, or the
                    # pass's next attempt, or the handler below for a failure raised here.)
                    committing = self._hand_out_early(commit_at, reservations)
                    try:
                        fired, started = await service.fire_timers_at(
                            at, commit_at, reservations, expected, FIRE_LIMIT
                        )
                    except Exception:
                        # Nothing committed: tasks handed out are dropped (a commit that
                        # went through said so first: the first word counts).
                        if committing is not None:
                            committing.settle(False)
                        _let_go(commit_at)
                        raise
                    _let_go(commit_at)
            finally:  # every reservation settled once, whatever happened
                for run_id, reservation in reservations.items():
                    if not reservation.settled:  # (not handed out early)
                        reservation.settle(started.get(run_id))
        ended = time.monotonic()
        if commit_at is not None and commit_at.ready is not None:
            prep = commit_at.ready - began
            size = len(expected).bit_length()
            last = self._prep_seconds.get(size)
            self._prep_seconds[size] = prep if last is None else 0.7 * last + 0.3 * prep
        if fired:
            # The whole pass, its wait included: a timer due just after the ones it fires
            # waits for it, then for the loop's reads, then for a pass of its own (started
            # late, so not ahead), which costs it more than the pass did.
            self._pass_seconds = 0.7 * self._pass_seconds + 0.3 * (ended - began)
        return fired

    def _next_wait(self, delay: float, next_at: float) -> tuple[float, float | None]:
        """How long to wait (real seconds) when the next timer is due at ``next_at`` and
        the loop would look again after ``delay`` anyway; and the next pass's due time if
        the wait is for it (see :meth:`_gather_until`), else None."""
        target = self._gather_until(next_at)
        timer_delay = self.service.clock.real_delay(target)
        if timer_delay <= delay:
            return timer_delay, target
        if timer_delay - POLL_SLACK > 0 and timer_delay <= delay + POLL_SLACK:
            # A look just before the timer would cut into its pass's time: looking earlier
            # keeps the wait for the timer whole.
            return timer_delay - POLL_SLACK, None
        return delay, None

    def _hand_out_early(
        self, commit_at: CommitAt, reservations: dict[str, Reservation]
    ) -> Committing | None:
        """Arrange for the workflow tasks a pass started ahead starts for its reserved
        workers to reach them before the due time, not after the commit: once the pass is
        ready to commit, the store's thread hands them out and waits for the due time
        (``CommitAt.on_due``). Each task carries the due time (``not_before``: its worker
        runs its workflow code from then on, on the activation thread, which wakes by
        itself then; the worker's event loop has already prepared it) and a
        :class:`Committing` that what the worker sends about it waits for, and that tells
        the worker to drop it if the commit failed (``engine._store.held``); on
        PostgreSQL, if the commit's answer was lost, :meth:`_committed` finds out what it
        came to. So what stands between the due time and the workflow code is the
        activation thread's wake-up, not the commit (on PostgreSQL a round trip and the
        server's flush), the loop's turn and the hand-over of every task of the pass."""
        if not reservations:
            return None
        loop = asyncio.get_running_loop()
        committing = Committing(self.service.store, loop)
        #: The id of the transaction whose tasks were handed out (a later attempt's
        #: overwrites ``commit_at.xid``).
        handed_xid: list[str | None] = [None]
        if self.service.store.postgres:
            committing.probe = lambda: self._committed(handed_xid[0])

        def hand_out(started: dict[str, WorkflowTask]) -> None:  # on the loop
            for run_id, task in started.items():
                reservation = reservations.get(run_id)
                if reservation is not None and not reservation.settled:
                    task.held = committing
                    task.not_before = commit_at.deadline
                    reservation.settle(task)

        def on_due() -> None:  # on the store's thread: what this attempt started
            handed_xid[0] = commit_at.xid
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(hand_out, commit_at.payload or {})

        def on_done(committed: bool | None) -> None:  # on the store's thread, after on_due's
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(committing.settle, committed)

        commit_at.on_due, commit_at.on_done = on_due, on_done
        return committing

    async def _committed(self, xid: str | None) -> bool:
        """Whether the transaction ``xid`` (a firing pass's) committed, after its
        ``COMMIT``'s answer was lost: PostgreSQL's own word on it (``pg_xact_status``), read
        once the database answers again, and again while the transaction is still in
        progress (for at most :data:`PROBE_PATIENCE`)."""
        if xid is None:
            return False
        give_up = time.monotonic() + PROBE_PATIENCE
        while True:
            status = await self.service.store.read(StoreTx.transaction_status, xid)
            if status != "in progress" or time.monotonic() > give_up:
                return status == "committed"
            await asyncio.sleep(0.05)

    def _lead(self, timers: int) -> float:
        """How long before its due time a firing pass of ``timers`` starts:
        after passes of about as many, from how long they took; else from passes of
        fewer, scaled up by how many times larger the size class is (the first burst of
        twenty timers after passes of two took twice as long as they did: started as
        early as they were, it committed 1.4 ms late); else :data:`PREFIRE_FIRST`."""
        size = max(timers, 1).bit_length()
        prep = self._prep_seconds.get(size)
        if prep is None:
            known = [seconds * size / n for n, seconds in self._prep_seconds.items() if n < size]
            if not known:
                return PREFIRE_FIRST
            prep = max(known)
        return min(max(PREFIRE_FACTOR * prep, PREFIRE_MIN), PREFIRE_MAX)

    def _warm(self, target: float) -> None:
        """The next pass is due at ``target``, :data:`WARM_LEAD` from now: wake the
        store's writer thread(s) and the activation threads of this process's workers
        that hold the runs of the timers due by then. On a virtual machine a thread that
        slept a second can take milliseconds to wake (its vCPU descheduled by the host),
        and a timer's path has several: the firing transaction's writer, the loop, the
        activation thread. Woken shortly before, they are quick to wake again."""
        runs = [e[0] for e in self._upcoming if e[1] <= target]
        service = self.service
        service.store.warm()
        if runs:
            service.handoffs.warm(runs)

    def _gather_until(self, next_at: float) -> float:
        """When the next firing pass should start: at ``next_at`` (the next timer), or as
        late as the last upcoming timer due within a pass's time after it (at most
        :data:`GATHER_MAX`). A timer due while a pass runs waits for that pass to end and
        then for a pass of its own; twenty timers due within two milliseconds would
        otherwise fire in a chain of passes, each later than the one before. Waiting for
        them instead costs the first no more than the pass it would have waited for."""
        until = next_at
        horizon = next_at + min(self._pass_seconds, GATHER_MAX)
        for _, fire_at, _, _ in self._upcoming:
            if fire_at > horizon:
                break
            until = max(until, fire_at)
        return until

    async def _sweep_batch(self) -> int:
        """One batch of the retention sweep; the next is due at once after a full batch,
        else a minute later (clock time)."""
        deleted = await self.service.delete_expired_runs()
        full = deleted >= SWEEP_BATCH
        self._next_sweep = self.service.clock.now() + (0.0 if full else SWEEP_INTERVAL)
        if deleted:
            log.info("retention: deleted %d closed runs past their namespace's retention", deleted)
        return deleted

    async def sweep(self) -> int:
        """Delete every closed run past its namespace's retention now, a batch per
        transaction (what the loop does a batch per turn); returns how many."""
        deleted = 0
        while batch := await self._sweep_batch():
            deleted += batch
        return deleted


def _let_go(commit_at: CommitAt) -> None:
    """Drop a firing pass's callbacks once its transaction is over (it returned or raised;
    not when the pass was cancelled: the store's thread may still be running it). They
    refer to ``commit_at`` as it refers to them: the cycle held the pass's tasks and
    histories until the collector ran."""
    commit_at.on_due = commit_at.on_done = None
