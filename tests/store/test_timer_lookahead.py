"""The timer loop's look-ahead: the firing transaction locks the runs of the timers it
expects to be due with its first read (one round trip on PostgreSQL, see
``StoreTx.due_work``). What was read ahead stands in for a run's first lock only; a stale
look-ahead (another host fired the timer, the run ended) fires nothing twice and nothing
on a closed run. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine import Client
from engine._model import commands as cmd
from engine._service.host import EXPECT_MARGIN, ServiceHost
from engine._service.service import Service
from engine._store.gateway import Store
from engine._store.schema import EXEC_RUNNING

from .test_operations_pure import NS, WORKER, FrozenClock, _workflow_task


async def _with_timers(
    svc: Service, workflow_id: str, *timer_ids: str, duration: float = 5.0
) -> str:
    """A run whose first workflow task started a timer of ``duration`` seconds per id."""
    task = await _workflow_task(svc, workflow_id)
    timers = [
        cmd.StartTimer(seq=i + 1, timer_id=t, duration=duration) for i, t in enumerate(timer_ids)
    ]
    await svc.complete_workflow_task(task, timers, WORKER)
    return task.run_id


async def _expected(svc: Service) -> list[tuple[int, str]]:
    _, upcoming = await svc.next_timers(64)
    return [(timer_id, run_id) for run_id, _, timer_id, _ in upcoming]


async def _types(client: Client, workflow_id: str) -> list[str]:
    handle = client.get_workflow_handle(workflow_id)
    return [e.event_type async for e in handle.fetch_history_events()]


async def test_two_timers_of_one_run_expected_together_fire_once_each(db_url: str) -> None:
    clock = FrozenClock()
    async with await Client.connect(db_url, clock=clock) as client:
        svc = client.service
        await _with_timers(svc, "wf-1", "a", "b")
        await _with_timers(svc, "wf-2", "c")
        clock.t += 10.0
        expected = await _expected(svc)
        assert len(expected) == 3
        fired, started = await svc.fire_due_timers_eager({}, expected)
        assert fired == 3 and started == {}
        types = await _types(client, "wf-1")
        # The second timer's firing read the run again after the first one changed it:
        # its event follows the workflow task the first one scheduled, which serves both.
        assert types[-5:] == [
            "TimerStarted",
            "TimerStarted",
            "TimerFired",
            "WorkflowTaskScheduled",
            "TimerFired",
        ], types
        assert (await _types(client, "wf-2"))[-2:] == ["TimerFired", "WorkflowTaskScheduled"]
        assert await svc.next_timers(64) == (None, [])


async def test_a_stale_look_ahead_fires_nothing_twice(db_url: str) -> None:
    """Two hosts (two stores, as two processes have) read the same look-ahead and fire at
    once. Each timer fires once."""
    clock = FrozenClock()
    other = Store(db_url)
    other.open()
    try:
        async with await Client.connect(db_url, clock=clock) as first:
            second = Service(other, clock)
            assert second.store is not first.store
            for i in range(5):
                await _with_timers(first.service, f"wf-{i}", "t")
            clock.t += 10.0
            expected = await _expected(first.service)
            assert len(expected) == 5 and await _expected(second) == expected
            results = await asyncio.gather(
                first.service.fire_due_timers_eager({}, expected),
                second.fire_due_timers_eager({}, expected),
            )
            assert all(started == {} for _, started in results)
            for i in range(5):
                types = await _types(first, f"wf-{i}")
                assert types.count("TimerFired") == 1, types
                assert types[-1] == "WorkflowTaskScheduled"
            # And once more, everything already fired: nothing due, nothing written.
            assert await second.fire_due_timers_eager({}, expected) == (0, {})
    finally:
        other.close()


async def test_a_run_that_ended_after_the_look_ahead_gets_no_timer_event(db_url: str) -> None:
    """The run's end took its timer with it: what the look-ahead expected is not due, its
    lock read ahead goes unused, and nothing is written."""
    clock = FrozenClock()
    async with await Client.connect(db_url, clock=clock) as client:
        svc = client.service
        run_id = await _with_timers(svc, "wf-1", "t")
        clock.t += 10.0
        expected = await _expected(svc)
        await client.get_workflow_handle("wf-1").terminate("done with it")
        assert await svc.fire_due_timers_eager({}, expected) == (0, {})
        types = await _types(client, "wf-1")
        assert "TimerFired" not in types and types[-1] == "WorkflowExecutionTerminated"
        assert run_id not in [r for _, r in await _expected(svc)]


class _Seen(Exception):
    """What the transaction function saw; raised so that nothing of it is kept."""


def _lock_after_a_change(tx: Any, now: float, timer_id: int, run_id: str) -> None:
    """Lock ahead, change the run under its first lock, then lock it again for the timer."""
    timers, _, _ = tx.due_work(now, 10, [(timer_id, run_id)])
    read_ahead = run_id in tx._prefetched_runs
    assert tx.lock_execution(run_id) is not None
    assert run_id not in tx._prefetched_runs  # the first lock took it
    tx.update_execution(run_id, history_size_bytes=999_999)
    again, wft = tx.lock_execution_and_workflow_task(run_id, timer=timer_id)
    timer = tx.take_timer(timer_id)
    raise _Seen(len(timers), read_ahead, again.history_size_bytes, timer, wft)


async def test_what_was_read_ahead_stands_in_for_the_first_lock_only(db_url: str) -> None:
    clock = FrozenClock()
    async with await Client.connect(db_url, clock=clock) as client:
        svc = client.service
        run_id = await _with_timers(svc, "wf-1", "t")
        clock.t += 10.0
        ((timer_id, _),) = await _expected(svc)
        with pytest.raises(_Seen) as seen:
            await client.store.transaction(_lock_after_a_change, clock.t, timer_id, run_id)
        due, read_ahead, after, timer, wft = seen.value.args
        assert due == 1 and timer is not None and timer.data == "t" and wft is None
        assert read_ahead == client.store.postgres  # SQLite reads locally: no look-ahead
        assert after == 999_999  # the second lock read the change, not what was read ahead
        # Nothing was kept: the timer fires as usual.
        assert await svc.fire_due_timers() == 1
        assert (await _types(client, "wf-1"))[-2:] == ["TimerFired", "WorkflowTaskScheduled"]
        row = await client.store.read(lambda tx: tx.get_execution(run_id))
        assert row.status == EXEC_RUNNING and row.namespace == NS


async def test_a_timer_due_just_after_the_loop_looks_is_expected_and_kept_until_it_fires(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host's pass expects the timers due within ``EXPECT_MARGIN`` of its clock too
    (their runs locked ahead, slots reserved): the transaction reads its clock later. One
    the transaction did not find due stays in the look-ahead and fires in a later pass."""
    clock = FrozenClock()
    async with await Client.connect(db_url, clock=clock) as client:
        svc = client.service
        await _with_timers(svc, "wf-1", "t")
        host = ServiceHost(svc)
        _, host._upcoming = await svc.next_timers(64)
        ((run_id, fire_at, timer_id, ahead),) = host._upcoming
        passes: list[list[tuple[int, str]]] = []
        fire = svc.fire_due_timers_eager

        async def spy(eager: Any, expected: list[tuple[int, str]], *rest: Any) -> Any:
            passes.append(list(expected))
            return await fire(eager, expected, *rest)

        monkeypatch.setattr(svc, "fire_due_timers_eager", spy)
        clock.t = fire_at - EXPECT_MARGIN / 2  # not due yet, but within the margin
        assert await host._fire_due() == 0
        assert passes == [[(timer_id, run_id)]]
        assert host._upcoming == [(run_id, fire_at, timer_id, ahead)]  # kept for the next pass
        clock.t = fire_at
        assert await host._fire_due() == 1
        assert passes[-1] == [(timer_id, run_id)] and host._upcoming == []
        assert (await _types(client, "wf-1"))[-2:] == ["TimerFired", "WorkflowTaskScheduled"]
        clock.t = fire_at - 10 * EXPECT_MARGIN  # further off: not expected
        host._upcoming = [(run_id, fire_at, timer_id, ahead)]
        await host._fire_due()
        assert len(passes) == 2 and host._upcoming == [(run_id, fire_at, timer_id, ahead)]
