"""Warming the threads a timer's path needs (``Store.warm``, ``Handoffs.warm``, the timer
loop's ``ServiceHost._warm``): a moment before the next timer is due, the loop wakes the
store's writer thread(s) and the activation threads of the workers holding the timers'
runs, so that on a machine whose idle CPUs are slow to wake the timer's work finds them
running. Warming changes nothing else. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from datetime import timedelta
from typing import Any

import pytest

from engine import Client, Worker, workflow
from engine._service import host as host_module
from engine._service.host import WARM_LEAD, ServiceHost
from engine._worker.activation import ActivationThread

from .test_operations_pure import NS
from .test_timer_lookahead import _with_timers


async def test_warm_items_between_changes_change_nothing(db_url: str) -> None:
    """Wake-ups queued before, between and after changes: every change commits, and
    the store closes with some still queued."""
    async with await Client.connect(db_url, namespace=NS) as client:
        svc = client.service
        store = svc.store
        for _ in range(3):
            store.warm()
        started = []
        for i in range(6):
            started.append(asyncio.ensure_future(_with_timers(svc, f"wf-{i}", "t")))
            store.warm()
        run_ids = await asyncio.wait_for(asyncio.gather(*started), 30)
        assert len(set(run_ids)) == 6
        _, upcoming = await svc.next_timers(64)
        assert sorted(run for run, _, _, _ in upcoming) == sorted(run_ids)
        store.warm()

        # Wake-ups queued behind changes while the writers are busy: the writer that takes
        # the first change finds them among the others it takes for its batch.
        def slow(_tx: Any) -> str:
            time.sleep(0.2)
            return "slow"

        def value(_tx: Any, n: int) -> int:
            return n

        busy = [asyncio.ensure_future(store.transaction(slow)) for _ in range(4)]
        await asyncio.sleep(0.05)  # every writer thread has a slow change
        queued = []
        for n in range(5):
            queued.append(asyncio.ensure_future(store.transaction(value, n)))
            await asyncio.sleep(0)  # the change is queued: the wake-up goes behind it
            store.warm()
        assert await asyncio.wait_for(asyncio.gather(*busy, *queued), 30) == [
            *["slow"] * 4,
            *range(5),
        ]
    store.warm()  # closed: nothing happens


@workflow.defn
class Nap:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(timedelta(seconds=seconds))
        return "rested"


async def test_the_timer_loop_warms_the_threads_of_a_coming_timer_before_it_fires(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 0.5 s timer of a run a worker holds: once, about WARM_LEAD before it is due, the
    loop wakes the store's writer and that worker's activation thread, naming the run."""
    calls: list[tuple[str, float, Any]] = []
    real_store_warm: Any = None
    real_handoffs_warm: Any = None

    def store_warm() -> None:
        calls.append(("store", time.time(), None))
        real_store_warm()

    def handoffs_warm(run_ids: Collection[str]) -> None:
        calls.append(("handoffs", time.time(), sorted(run_ids)))
        real_handoffs_warm(run_ids)

    threads: list[ActivationThread] = []
    real_thread_warm = ActivationThread.warm

    def thread_warm(self: ActivationThread) -> None:
        threads.append(self)
        real_thread_warm(self)

    monkeypatch.setattr(ActivationThread, "warm", thread_warm)
    async with await Client.connect(db_url, namespace=NS) as client:
        svc = client.service
        real_store_warm, real_handoffs_warm = svc.store.warm, svc.handoffs.warm
        monkeypatch.setattr(svc.store, "warm", store_warm)
        monkeypatch.setattr(svc.handoffs, "warm", handoffs_warm)
        async with Worker(client, task_queue="naps", workflows=[Nap]):
            handle = await client.start_workflow(Nap.run, 0.5, id="nap", task_queue="naps")
            assert await asyncio.wait_for(handle.result(), 30) == "rested"
            run_id = handle.result_run_id
        fired = [
            float(e.event_time)
            async for e in handle.fetch_history_events()
            if e.event_type == "TimerFired"
        ]
    kinds = [kind for kind, _, _ in calls]
    assert kinds == ["store", "handoffs"], calls
    assert calls[1][2] == [run_id]
    assert len(threads) == 1  # the worker holding the run woke its activation thread
    # Before the timer fired (the service's clock is the wall clock here).
    assert len(fired) == 1 and calls[0][1] < fired[0], (calls, fired)


async def test_no_warming_when_the_wait_is_short_or_time_skips(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timer due sooner than twice WARM_LEAD after the loop looks: the loop waits once
    and warms nothing."""
    warmed: list[float] = []
    monkeypatch.setattr(ServiceHost, "_warm", lambda self, target: warmed.append(target))
    async with await Client.connect(db_url, namespace=NS) as client:
        svc = client.service
        await _with_timers(svc, "wf-short", "t", duration=WARM_LEAD)
        host = ServiceHost(svc)
        host.start()
        try:
            for _ in range(250):
                _, upcoming = await svc.next_timers(64)
                if not upcoming:
                    break
                await asyncio.sleep(0.02)
            assert not upcoming, "the timer did not fire"
        finally:
            await host.stop()
    assert warmed == []
    assert host_module.WARM_LEAD == WARM_LEAD


async def test_postgres_warm_pings_the_connection_the_next_change_gets(pg_url: str) -> None:
    """On PostgreSQL each woken writer runs ``SELECT 1`` on a pooled connection, and the
    pool hands out the connection used last first: the change after the warm-up runs on
    a connection a ping just used (its server process awake)."""
    import sqlalchemy as sa

    async with await Client.connect(pg_url, namespace=NS) as client:
        store = client.service.store
        await _with_timers(client.service, "wf-ping", "t")
        # Six connections in the pool, more than the writers ping: only the order in which
        # the pool hands them out puts a pinged one under the next change.
        held = [store.engine.connect() for _ in range(6)]
        for conn in held:
            conn.close()
        pinged: list[int] = []
        used: list[int] = []

        def on_execute(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if statement == "SELECT 1":
                pinged.append(id(conn.connection.dbapi_connection))

        sa.event.listen(store.engine, "before_cursor_execute", on_execute)
        try:
            store.warm()
            deadline = time.monotonic() + 10
            while not pinged:
                assert time.monotonic() < deadline, "no SELECT 1 after warm()"
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # every writer has taken its wake-up

            def which(tx: Any) -> int:
                return id(tx.conn.connection.dbapi_connection)

            used.append(await store.transaction(which))
        finally:
            sa.event.remove(store.engine, "before_cursor_execute", on_execute)
        assert used[0] in pinged, (used, pinged)


async def test_a_failed_ping_is_only_logged(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async with await Client.connect(pg_url, namespace=NS) as client:
        store = client.service.store
        writers = store._pg_writers
        assert writers is not None
        failures: list[str] = []

        def refuse() -> Any:
            failures.append("connect")
            raise OSError("the database is not there")

        monkeypatch.setattr(store.engine, "connect", refuse)
        store.warm()
        deadline = time.monotonic() + 10
        while len(failures) < len(writers.threads):
            assert time.monotonic() < deadline, f"the writers did not all ping: {failures}"
            await asyncio.sleep(0.01)
        monkeypatch.undo()
        assert all(t.is_alive() for t in writers.threads)
        run_id = await _with_timers(client.service, "wf-after", "t")
        assert run_id


async def test_no_ping_while_the_database_is_known_to_be_down(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await Client.connect(pg_url, namespace=NS) as client:
        store = client.service.store
        connects: list[str] = []
        real_connect = store.engine.connect

        def counting_connect() -> Any:
            connects.append("connect")
            return real_connect()

        monkeypatch.setattr(store.engine, "connect", counting_connect)
        store.outage.down_since = time.monotonic()  # as after a failed connection
        store.warm()
        await asyncio.sleep(0.3)  # the writers have taken their wake-ups
        assert connects == []
        store.outage.down_since = None
        store.warm()
        deadline = time.monotonic() + 10
        while not connects:
            assert time.monotonic() < deadline, "no ping once the database is back"
            await asyncio.sleep(0.01)
