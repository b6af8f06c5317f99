"""The timer loop starts a firing pass a little before its timers are due; the pass reads,
locks and writes what they need, then commits once the clock reaches their due time
(``StoreTx.commit_not_before``, ``ServiceHost._lead``). Nothing outside the transaction
may see a timer fire before it is due, and a change to one of its runs waits for the
commit. On SQLite and PostgreSQL; on PostgreSQL the pass is never batched with other
changes."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from typing import Any

import pytest

from engine import Client
from engine._service.clock import Clock
from engine._service.host import (
    POLL_SLACK,
    PREFIRE_FIRST,
    PREFIRE_MAX,
    PREFIRE_MIN,
    ServiceHost,
)
from engine._service.service import Service
from engine._service.state import TIMERS_CHANNEL
from engine._store.commit_at import CommitAt
from engine._store.gateway import Store
from engine._store.queries import Q
from engine._store.tx import StoreTx
from engine.exceptions import StoreError

from .test_operations_pure import NS, QUEUE, T0, WORKER, _activity, _workflow_task
from .test_timer_lookahead import _expected, _types, _with_timers


class MonotonicClock(Clock):
    """Real time from ``time.monotonic()``, so that a wait measured on the monotonic clock
    (the commit's) and this clock's readings agree exactly."""

    def __init__(self) -> None:
        self._base = time.monotonic()

    def now(self) -> float:
        return T0 + (time.monotonic() - self._base)


async def _fired_at(client: Client, workflow_id: str) -> float | None:
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        if event.event_type == "TimerFired":
            return float(event.event_time)
    return None


async def _one_timer(
    svc: Any, clock: Clock, duration: float, workflow_id: str = "wf-1"
) -> tuple[list[tuple[int, str]], float, CommitAt]:
    """A run with one timer of ``duration``: the timers expected, its due time, and the
    CommitAt of a pass as of that time, started now."""
    await _with_timers(svc, workflow_id, "t", duration=duration)
    expected = await _expected(svc)
    _, upcoming = await svc.next_timers(8)
    at = upcoming[0][1]
    return expected, at, CommitAt(time.monotonic() + clock.real_delay(at))


async def test_a_pass_started_ahead_is_seen_only_once_its_timers_are_due(db_url: str) -> None:
    clock = MonotonicClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        expected, at, commit_at = await _one_timer(svc, clock, 0.5)
        assert at - clock.now() > 0.3, "the set-up took too long to test a wait"
        firing = asyncio.ensure_future(svc.fire_timers_at(at, commit_at, {}, expected))
        # Another connection (a reader) looks while the pass waits to commit.
        seen_before = 0
        while not firing.done():
            fired = await _fired_at(client, "wf-1")
            read_ended = clock.now()
            if fired is None:
                seen_before += read_ended < at
            else:  # the commit came before this read ended: the timer was due by then
                assert read_ended >= at
            await asyncio.sleep(0.01)
        count, started = await firing
        assert (count, started) == (1, {})
        assert clock.now() >= at
        assert seen_before >= 5, "the reads should have overlapped the wait"
        # Written before the wait, committed after it; stamped with the due time.
        assert commit_at.ready is not None and commit_at.ready < commit_at.deadline
        assert await _fired_at(client, "wf-1") == at


async def test_a_change_to_a_run_waits_for_the_pass_that_fires_its_timer(db_url: str) -> None:
    clock = MonotonicClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        expected, at, commit_at = await _one_timer(svc, clock, 0.5)
        firing = asyncio.ensure_future(svc.fire_timers_at(at, commit_at, {}, expected))
        while commit_at.ready is None:  # the pass holds the run's lock and waits
            await asyncio.sleep(0.002)
        assert clock.now() < at
        await svc.signal_workflow(NS, "wf-1", None, "sig", [{"data": "Mg=="}], "me")
        assert clock.now() >= at  # the signal waited for the lock
        await firing
        types = await _types(client, "wf-1")
        assert types.index("TimerFired") < types.index("WorkflowExecutionSignaled"), types


async def test_the_loop_starts_a_pass_ahead(db_url: str) -> None:
    """The loop's pass for a timer starts before it is due, and its event carries the due
    time."""
    clock = MonotonicClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        await _with_timers(svc, "wf-1", "t", duration=0.3)
        _, upcoming = await svc.next_timers(8)
        due = upcoming[0][1]
        calls: list[tuple[float, float]] = []  # (clock at the call, the pass's time)
        ahead = svc.fire_timers_at

        async def spy(at: float, commit_at: CommitAt, *args: Any) -> Any:
            calls.append((clock.now(), at))
            return await ahead(at, commit_at, *args)

        svc.fire_timers_at = spy  # type: ignore[method-assign]
        host = ServiceHost(svc, poll_interval=5.0, sweep_delay=60.0)
        host._prep_seconds = {1: PREFIRE_MAX}  # starts 20 ms ahead: a slow wake-up still is
        host.start()
        try:
            for _ in range(200):
                if (fired := await _fired_at(client, "wf-1")) is not None:
                    break
                await asyncio.sleep(0.02)
        finally:
            await host.stop()
    assert fired is not None
    assert len(calls) == 1, calls
    called, at = calls[0]
    assert at == due and called < due
    assert fired == due


async def test_a_read_has_no_commit_to_wait_for(db_url: str) -> None:
    store = Store(db_url)
    store.open()
    try:

        def wait(tx: StoreTx) -> None:
            tx.commit_not_before(CommitAt(time.monotonic() + 1.0))

        with pytest.raises(StoreError, match="read-only transaction has no commit"):
            await store.read(wait)
    finally:
        store.close()


async def test_changes_batched_with_one_that_waits_commit_with_it(tmp_path: Any) -> None:
    """SQLite's writer runs the changes waiting together in one transaction: they commit
    when the one that waits does, none before (PostgreSQL never batches such a change)."""
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    store.open()
    try:
        deadline = time.monotonic() + 0.2

        def waits(tx: StoreTx) -> None:
            tx.commit_not_before(CommitAt(deadline))

        def plain(tx: StoreTx) -> float:
            return time.monotonic()

        async def ended(op: Any) -> float:
            await op
            return time.monotonic()

        # Held behind a first change, so that the next ones are taken together.
        gate = asyncio.Event()
        loop = asyncio.get_running_loop()

        def first(tx: StoreTx) -> None:
            asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(5)

        blocking = asyncio.ensure_future(store.transaction(first))
        await asyncio.sleep(0.05)
        ops = [store.transaction(plain), store.transaction(waits), store.transaction(plain)]
        done = asyncio.gather(*(ended(op) for op in ops))
        await asyncio.sleep(0.01)
        gate.set()
        await blocking
        assert min(await done) >= deadline
    finally:
        store.close()


async def test_a_change_submitted_alone_is_never_batched(pg_url: str) -> None:
    """Changes waiting together share a transaction; one submitted ``alone`` has its own
    (told apart by ``txid_current()``)."""
    store = Store(pg_url)
    store.open()
    try:

        def txid(tx: StoreTx) -> int:
            row = tx._one(Q("SELECT txid_current()"), None)
            assert row is not None
            return int(row[0])

        for _ in range(20):
            plain = [store.transaction(txid) for _ in range(24)]
            alone = [store.transaction(txid, alone=True) for _ in range(4)]
            ids = await asyncio.gather(*plain[:12], *alone, *plain[12:])
            mine = ids[12:16]
            others = ids[:12] + ids[16:]
            assert len(set(mine)) == 4 and not set(mine) & set(others), ids
            if len(set(others)) < len(others):
                return  # some were batched, and the alone ones were not
        pytest.fail("no changes were batched in 20 tries: the test shows nothing")
    finally:
        store.close()


class _Counting:
    """Counts the firing passes a service runs (each kind the loop may call)."""

    def __init__(self, svc: Any) -> None:
        self.calls: list[str] = []
        for name in ("fire_due_timers", "fire_due_timers_eager", "fire_timers_at"):
            setattr(svc, name, self._spy(name, getattr(svc, name)))

    def _spy(self, name: str, method: Any) -> Any:
        async def spy(*args: Any) -> Any:
            self.calls.append(name)
            return await method(*args)

        return spy


async def test_the_loop_runs_no_pass_for_nothing(db_url: str) -> None:
    """With nothing due, the loop looks (a read) every poll interval and after every
    notification, and runs a firing pass (a write) only when it starts."""
    async with await Client.connect(db_url, namespace=NS, clock=MonotonicClock()) as client:
        svc = client.service
        await _with_timers(svc, "wf-1", "t", duration=600.0)
        counting = _Counting(svc)
        looks = []
        next_timers = svc.next_timers

        async def spy_next(*args: Any) -> Any:
            looks.append(1)
            return await next_timers(*args)

        svc.next_timers = spy_next  # type: ignore[method-assign]
        host = ServiceHost(svc, poll_interval=0.02, sweep_delay=60.0)
        host.start()
        try:
            await asyncio.sleep(0.3)
            for _ in range(5):
                svc.store.notifier.notify(TIMERS_CHANNEL)
                await asyncio.sleep(0.01)
        finally:
            await host.stop()
    assert len(looks) >= 10, looks
    assert counting.calls == ["fire_due_timers"], counting.calls


def test_a_look_due_just_before_a_timer_comes_earlier() -> None:
    clock = MonotonicClock()
    host = ServiceHost(_ServiceStub(clock))  # type: ignore[arg-type]
    host._upcoming = []
    now = clock.now()
    # The timer is due within the wait: the wait is for it.
    delay, target = host._next_wait(0.5, now + 0.3)
    assert target == now + 0.3 and 0.29 < delay <= 0.3
    # Due just after the look would come: the look comes POLL_SLACK before the timer.
    delay, target = host._next_wait(0.5, now + 0.52)
    assert target is None and 0.51 - POLL_SLACK < delay <= 0.52 - POLL_SLACK
    # Due well after: the look comes when it would.
    assert host._next_wait(0.5, now + 0.6) == (0.5, None)


class _ServiceStub:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock


def test_a_pass_starts_ahead_by_what_passes_of_as_many_timers_took() -> None:
    host = ServiceHost(_ServiceStub(MonotonicClock()))  # type: ignore[arg-type]
    assert host._lead(1) == PREFIRE_FIRST  # nothing measured yet
    host._prep_seconds = {1: 0.003, 5: 0.006}  # one timer; 16 to 31
    assert host._lead(1) == pytest.approx(2 * 0.003)
    assert host._lead(20) == pytest.approx(2 * 0.006)
    # Sizes not measured yet: figures of fewer timers, scaled by the size classes (1 timer
    # is class 1; 2-3 timers class 2; 16-31 class 5; 64-127 class 7).
    assert host._lead(3) == pytest.approx(2 * 0.003 * 2)
    host._prep_seconds = {1: 0.001, 5: 0.006}
    assert host._lead(100) == pytest.approx(2 * 0.006 * 7 / 5)
    assert host._lead(8) == pytest.approx(2 * 0.001 * 4)  # class 4: from class 1 alone
    # Within bounds.
    host._prep_seconds = {1: 0.0001, 5: 1.0}
    assert host._lead(1) == PREFIRE_MIN and host._lead(20) == PREFIRE_MAX


async def _started_activity(svc: Any, start_to_close: float) -> Any:
    """Run ``wf-act`` with one activity attempt started (one attempt only: a timeout ends
    it with ``ActivityTaskTimedOut``)."""
    task = await _workflow_task(svc, "wf-act")
    retry = {"maximumAttempts": 1}
    await svc.complete_workflow_task(
        task, [_activity(start_to_close=start_to_close, retry_policy=retry)], WORKER
    )
    (act,) = await svc.poll_activity_tasks(NS, QUEUE, WORKER, 1)
    return act


async def test_a_pass_started_ahead_judges_deadlines_by_the_clock(db_url: str) -> None:
    """A pass started ahead fires a user timer as of its due time, but a deadline due
    between the clock and that time (here an activity's start-to-close) is not past yet:
    an outcome that comes before it must still win."""
    clock = MonotonicClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        act = await _started_activity(svc, start_to_close=0.3)
        expected, at, commit_at = await _one_timer(svc, clock, 0.6, "wf-timer")
        # The activity's deadline falls before ``at``; the clock has not reached it.
        assert clock.now() < at - 0.35, "the set-up took too long"
        fired, _ = await svc.fire_timers_at(at, commit_at, {}, expected)
        assert fired == 1
        assert "TimerFired" in await _types(client, "wf-timer")
        assert "ActivityTaskTimedOut" not in await _types(client, "wf-act")
        await svc.complete_activity(act, [{"data": "MQ=="}])  # still its own to finish
        assert "ActivityTaskCompleted" in await _types(client, "wf-act")


async def test_the_loop_waits_for_a_deadline_without_passes_ahead(db_url: str) -> None:
    """Only timers that may fire early make a pass start ahead: with a deadline next (an
    activity's), the loop waits for it and runs one pass, none before."""
    clock = MonotonicClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        await _started_activity(svc, start_to_close=0.3)
        counting = _Counting(svc)
        host = ServiceHost(svc, poll_interval=5.0, sweep_delay=60.0)
        host._prep_seconds = {1: PREFIRE_MAX}  # a lead of 20 ms, were one taken
        host.start()
        try:
            for _ in range(100):
                if "ActivityTaskTimedOut" in await _types(client, "wf-act"):
                    break
                await asyncio.sleep(0.02)
        finally:
            await host.stop()
        assert "ActivityTaskTimedOut" in await _types(client, "wf-act")
    # The first pass (the loop starts), then the one at the deadline.
    assert counting.calls == ["fire_due_timers", "fire_due_timers"], counting.calls


async def test_a_pass_whose_commit_failed_fires_once_when_run_again(pg_url: str) -> None:
    """The store runs a transaction whose COMMIT failed again (here a serialization
    failure, once): the pass started ahead fires its timer once, not before it is due."""
    import psycopg.errors

    clock = MonotonicClock()
    async with await Client.connect(pg_url, namespace=NS, clock=clock) as client:
        svc = client.service
        expected, at, commit_at = await _one_timer(svc, clock, 0.3)
        failures = []
        commit = StoreTx.commit_pipelined

        def failing_once(tx: StoreTx, *args: Any) -> None:
            if tx._commit_at is not None and not failures:
                failures.append(clock.now())
                raise psycopg.errors.SerializationFailure("injected")
            commit(tx, *args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(StoreTx, "commit_pipelined", failing_once)
            fired, _ = await svc.fire_timers_at(at, commit_at, {}, expected)
        assert failures and fired == 1
        assert clock.now() >= at
        types = await _types(client, "wf-1")
        assert types.count("TimerFired") == 1, types
        fired_at = await _fired_at(client, "wf-1")
        assert fired_at is not None and fired_at >= at


async def test_two_hosts_starting_ahead_fire_each_timer_once(db_url: str) -> None:
    """Two hosts (two stores, as two processes have) start a pass ahead of the same timers
    at once: the second waits for the first's locks, finds the timers taken, and fires
    nothing; each timer fires once, as of its due time."""
    clock = MonotonicClock()
    other = Store(db_url)
    other.open()
    try:
        async with await Client.connect(db_url, namespace=NS, clock=clock) as first:
            second = Service(other, clock)
            for i in range(5):
                await _with_timers(first.service, f"wf-{i}", "t", duration=0.3)
            expected = await _expected(first.service)
            _, upcoming = await first.service.next_timers(8)
            at = max(e[1] for e in upcoming)
            deadline = time.monotonic() + clock.real_delay(at)
            results = await asyncio.gather(
                first.service.fire_timers_at(at, CommitAt(deadline), {}, expected),
                second.fire_timers_at(at, CommitAt(deadline), {}, expected),
            )
            assert clock.now() >= at
            assert sorted(fired for fired, _ in results)[-1] == 5, results
            for i in range(5):
                types = await _types(first, f"wf-{i}")
                assert types.count("TimerFired") == 1, types
                assert await _fired_at(first, f"wf-{i}") == at
    finally:
        other.close()


async def hold_writer(store: Store, queued: int) -> tuple[threading.Event, Any]:
    """Occupy the SQLite writer thread with a change that waits for the returned gate; the
    caller then submits ``queued`` changes and this waits until all are queued (they run
    as one batch once the gate opens). Returns the gate and the waiting change."""
    gate, began = threading.Event(), threading.Event()

    def wait(tx: StoreTx) -> None:
        began.set()
        gate.wait(10)

    holding = asyncio.ensure_future(store.transaction(wait))
    assert await asyncio.to_thread(began.wait, 10)
    return gate, holding


async def _queued(store: Store, n: int) -> None:
    """Wait until ``n`` changes wait for the SQLite writer (the one it runs included)."""
    writer = store._writer
    assert writer is not None
    for _ in range(1000):
        if writer._waiting >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"only {writer._waiting} changes queued")


@pytest.mark.parametrize("fail", [False, True])
async def test_sqlite_a_pass_batched_with_other_changes_tells_what_its_commit_came_to(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    """A pass started ahead and batched with other changes hands its work out before the
    due time, then tells whether the batch committed (an after-commit effect); if the
    batch's commit failed, the pass's next attempt (the batch runs again one by one) tells
    that the first did not commit. The changes batched after the pass carry its due time
    (they commit with it): the run's event times never go back."""
    clock = MonotonicClock()
    url = f"sqlite:///{tmp_path / 'd.db'}"
    async with await Client.connect(url, namespace=NS, clock=clock) as client:
        svc = client.service
        expected, at, commit_at = await _one_timer(svc, clock, 0.3)
        told: list[Any] = []
        commit_at.on_due = lambda: told.append("due")
        commit_at.on_done = lambda committed: told.append(("done", committed))
        if fail:
            wait = StoreTx.wait_to_commit

            def failing(tx: StoreTx) -> None:
                wait(tx)
                if tx._commit_at is not None and len(told) == 1:
                    told.append("failed")
                    raise sqlite3.OperationalError("disk I/O error (injected)")

            monkeypatch.setattr(StoreTx, "wait_to_commit", failing)
        gate, holding = await hold_writer(client.store, 3)
        signal = [{"data": "Mg=="}]
        first = asyncio.ensure_future(svc.signal_workflow(NS, "wf-1", None, "a", signal, "me"))
        firing = asyncio.ensure_future(svc.fire_timers_at(at, commit_at, {}, expected))
        last = asyncio.ensure_future(svc.signal_workflow(NS, "wf-1", None, "b", signal, "me"))
        await _queued(client.store, 4)
        gate.set()
        await asyncio.gather(holding, first, firing, last)
        if fail:
            assert told == ["due", "failed", ("done", False)], told
        else:
            assert told == ["due", ("done", True)], told
        handle = client.get_workflow_handle("wf-1")
        events = [e async for e in handle.fetch_history_events()]
        kinds = [e.event_type for e in events]
        assert kinds.count("TimerFired") == 1, kinds
        fired = kinds.index("TimerFired")
        assert "WorkflowExecutionSignaled" in kinds[:fired], kinds  # the change before it
        assert "WorkflowExecutionSignaled" in kinds[fired:], kinds  # and the one after it
        times = [e.event_time for e in events]
        assert times == sorted(times), list(zip(kinds, times, strict=True))
