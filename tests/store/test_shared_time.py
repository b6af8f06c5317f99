"""The changes of one group commit read one time (``engine._store.shared_time``): their
events carry the time of the batch's transaction, not the moment the writer got to each."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path
from typing import Any

from engine import Client
from engine._service.clock import Clock
from engine._store.gateway import Store
from engine._store.shared_time import not_before, now, one_time
from engine._store.tx import StoreTx

from .test_operations_pure import NS
from .test_timer_lookahead import _with_timers
from .test_timer_prefire import _queued, hold_writer


class Ticking(Clock):
    """A clock one second later at each reading."""

    def __init__(self) -> None:
        self.t = 1_000_000.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            self.t += 1.0
            return self.t


def test_one_time_keeps_its_first_reading_on_its_own_thread_only() -> None:
    clock = Ticking()
    assert now(clock) < now(clock)  # outside: every reading is the clock's
    with one_time():
        first = now(clock)
        assert now(clock) == now(clock) == first
        elsewhere: list[float] = []
        thread = threading.Thread(target=lambda: elsewhere.append(now(clock)))
        thread.start()
        thread.join()
        assert elsewhere[0] > first  # another thread reads the clock itself
    assert now(clock) > first
    with one_time():  # a new block reads anew
        second = now(clock)
        assert second > first
        with one_time():  # a block inside another reads anew, and the outer one goes on
            assert now(clock) > second
        assert now(clock) == second
        not_before(second + 100)  # a pass committing later moves the block's time to it
        assert now(clock) == second + 100
        not_before(second)  # never back
        assert now(clock) == second + 100
    not_before(0.0)  # outside a block: nothing to move
    assert now(clock) < second + 100


def _reads(
    clock: Clock, gate: threading.Event | None = None, began: threading.Event | None = None
) -> Any:
    def read(tx: StoreTx) -> float:
        if began is not None:
            began.set()
        if gate is not None:
            gate.wait(10)
        return now(clock)

    return read


async def test_sqlite_a_batch_reads_one_time_and_a_change_alone_its_own(tmp_path: Path) -> None:
    clock = Ticking()
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    store.open()
    try:
        gate, began = threading.Event(), threading.Event()
        # The writer thread runs a change that waits: the next ones queue behind it and
        # run as one batch.
        first = asyncio.ensure_future(store.transaction(_reads(clock, gate, began)))
        assert await asyncio.to_thread(began.wait, 10)
        queued = [asyncio.ensure_future(store.transaction(_reads(clock))) for _ in range(5)]
        await asyncio.sleep(0.05)
        gate.set()
        times = await asyncio.gather(*queued)
        assert len(set(times)) == 1, times
        assert times[0] > await first
        # One at a time, each is alone in its transaction: each reads the clock.
        alone = [await store.transaction(_reads(clock)) for _ in range(3)]
        assert len(set(alone)) == 3 and min(alone) > times[0]
    finally:
        store.close()


async def test_postgres_a_batch_reads_one_time(pg_url: str) -> None:
    clock = Ticking()
    store = Store(pg_url)
    store.open()
    try:
        writers = store._pg_writers
        assert writers is not None
        batch: list[Any] = [
            (_reads(clock), (), None, concurrent.futures.Future(), time.monotonic())
            for _ in range(4)
        ]
        outcomes, _ = await asyncio.to_thread(writers._together, batch)
        times = [value for _, value in outcomes]
        assert len(times) == 4 and len(set(times)) == 1, outcomes
    finally:
        store.close()


async def test_sqlite_signals_to_three_runs_in_one_batch_carry_one_time(tmp_path: Path) -> None:
    """The service's changes read the batch's time: three signals committed together are
    recorded at one time; one sent alone afterwards at its own."""
    clock = Ticking()
    url = f"sqlite:///{tmp_path / 'd.db'}"
    async with await Client.connect(url, namespace=NS, clock=clock) as client:
        svc = client.service
        for wid in ("wf-1", "wf-2", "wf-3"):
            await _with_timers(svc, wid, "t")
        gate, holding = await hold_writer(client.store, 3)
        signal = [{"data": "Mg=="}]
        sent = [
            asyncio.ensure_future(svc.signal_workflow(NS, wid, None, "s", signal, "me"))
            for wid in ("wf-1", "wf-2", "wf-3")
        ]
        await _queued(client.store, 4)
        gate.set()
        await asyncio.gather(holding, *sent)
        await svc.signal_workflow(NS, "wf-1", None, "s", signal, "me")

        async def signaled(wid: str) -> list[float]:
            handle = client.get_workflow_handle(wid)
            return [
                e.event_time
                async for e in handle.fetch_history_events()
                if e.event_type == "WorkflowExecutionSignaled"
            ]

        one, two, three = [await signaled(w) for w in ("wf-1", "wf-2", "wf-3")]
        assert len(one) == 2 and one[0] == two[0] == three[0], (one, two, three)
        assert one[1] > one[0]
