"""The timer loop fires timers due within a pass's time of each other in one pass
(``ServiceHost._gather_until``), and timers further apart in passes of their own. A
firing pass stamps every event it writes with its one clock reading, so timers fired by
one pass have the same ``TimerFired`` time. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from engine import Client
from engine._service.clock import Clock
from engine._service.host import GATHER_MAX, ServiceHost

from .test_operations_pure import NS, T0
from .test_timer_lookahead import _with_timers


class HeldClock(Clock):
    """Held still while a test sets timers up, then running at the wall clock's pace."""

    def __init__(self) -> None:
        self.t = T0
        self._since: float | None = None

    def now(self) -> float:
        if self._since is None:
            return self.t
        return self.t + (time.monotonic() - self._since)

    def run(self) -> None:
        self._since = time.monotonic()


async def _fired_times(client: Client, workflow_ids: list[str]) -> list[float]:
    times = []
    for workflow_id in workflow_ids:
        handle = client.get_workflow_handle(workflow_id)
        async for event in handle.fetch_history_events():
            if event.event_type == "TimerFired":
                times.append(float(event.event_time))
    return times


async def _run_host(client: Client, pass_seconds: float, spacing: float) -> list[float]:
    """Three runs with a 0.3 s timer each, started ``spacing`` seconds apart; the host runs
    (its recent passes took ``pass_seconds``) until all three fired; their TimerFired times."""
    clock = client.service.clock
    assert isinstance(clock, HeldClock)
    ids = [f"wf-{i}" for i in range(3)]
    for i, workflow_id in enumerate(ids):
        clock.t = T0 + i * spacing
        await _with_timers(client.service, workflow_id, "t", duration=0.3)
    clock.run()
    host = ServiceHost(client.service)
    host._pass_seconds = pass_seconds
    host.start()
    try:
        for _ in range(200):
            times = await _fired_times(client, ids)
            if len(times) == 3:
                return times
            await asyncio.sleep(0.02)
        raise AssertionError(f"the timers did not fire: {times}")
    finally:
        await host.stop()


async def test_timers_due_within_a_pass_fire_in_one_pass(db_url: str) -> None:
    async with await Client.connect(db_url, namespace=NS, clock=HeldClock()) as client:
        times = await _run_host(client, pass_seconds=GATHER_MAX, spacing=0.0015)
    assert len(set(times)) == 1, times
    # ... and not before the last of them was due.
    assert times[0] >= T0 + 0.3 + 2 * 0.0015


async def test_timers_further_apart_fire_in_passes_of_their_own(db_url: str) -> None:
    async with await Client.connect(db_url, namespace=NS, clock=HeldClock()) as client:
        times = await _run_host(client, pass_seconds=GATHER_MAX, spacing=0.2)
    assert len(set(times)) == 3, times
    for i, fired in enumerate(sorted(times)):
        assert fired >= T0 + 0.3 + i * 0.2


async def test_a_pass_that_fired_is_not_followed_by_an_empty_one(db_url: str) -> None:
    """After a pass that fired fewer timers than its limit, the loop reads when the next
    timer is due instead of running a firing transaction for nothing at once."""
    clock = HeldClock()
    async with await Client.connect(db_url, namespace=NS, clock=clock) as client:
        svc = client.service
        await _with_timers(svc, "wf-0", "t", duration=0.3)
        calls: list[int] = []
        eager, ahead, plain = svc.fire_due_timers_eager, svc.fire_timers_at, svc.fire_due_timers

        async def spy_eager(*args: Any) -> Any:
            fired, started = await eager(*args)
            calls.append(fired)
            return fired, started

        async def spy_ahead(*args: Any) -> Any:  # PostgreSQL: a pass started ahead
            fired, started = await ahead(*args)
            calls.append(fired)
            return fired, started

        async def spy_plain(*args: Any) -> Any:
            fired = await plain(*args)
            calls.append(fired)
            return fired

        svc.fire_due_timers_eager = spy_eager  # type: ignore[method-assign]
        svc.fire_timers_at = spy_ahead  # type: ignore[method-assign]
        svc.fire_due_timers = spy_plain  # type: ignore[method-assign]
        clock.run()
        host = ServiceHost(svc, poll_interval=5.0, sweep_delay=60.0)
        host.start()
        try:
            for _ in range(200):
                if await _fired_times(client, ["wf-0"]):
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
        finally:
            await host.stop()
    # The first look (nothing due yet), the pass that fired the timer, and nothing after.
    assert calls == [0, 1], calls
