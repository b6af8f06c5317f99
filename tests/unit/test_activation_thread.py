"""The activation thread: runs workflow code off the event loop, reports code that does not
yield at the deadlock timeout (without waiting for it), and goes on with the rest."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from engine._worker.activation import ActivationThread, DeadlockDetected


async def test_returns_what_the_code_returns_and_raises_what_it_raises() -> None:
    runner = ActivationThread(5.0)
    try:
        result, took = await runner.run(lambda a, b: a + b, 2, 3)
        assert result == 5 and took >= 0
        with pytest.raises(KeyError):
            await runner.run({}.__getitem__, "missing")
        assert threading.get_ident() != (await runner.run(threading.get_ident))[0]
    finally:
        runner.stop()


async def test_a_burst_of_activations_all_come_back_in_order_of_their_own() -> None:
    runner = ActivationThread(5.0)
    try:
        results = await asyncio.gather(*[runner.run(lambda i=i: i * i) for i in range(200)])
        assert [r for r, _ in results] == [i * i for i in range(200)]
    finally:
        runner.stop()


async def test_blocked_code_is_reported_at_the_timeout_and_the_rest_goes_on() -> None:
    runner = ActivationThread(0.2)
    release = threading.Event()
    ticks = 0

    def blocked() -> str:
        release.wait(30)  # blocks until the test lets it go
        return "late"

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    beat = asyncio.ensure_future(ticker())
    try:
        before = asyncio.ensure_future(runner.run(lambda: "before"))
        stuck = asyncio.ensure_future(runner.run(blocked))
        after = asyncio.ensure_future(runner.run(lambda: "after"))
        with pytest.raises(DeadlockDetected) as info:
            await stuck
        # Reported while the code still blocks, not when it returns.
        assert not release.is_set()
        assert (
            "test_activation_thread.py" in info.value.where
            and "release.wait(30)" in info.value.where
        )
        assert "blocked" in info.value.stack
        # What finished before it, and what was queued behind it, still come back.
        assert (await before)[0] == "before"
        assert (await after)[0] == "after"
        assert runner.abandoned == 1
        assert ticks > 0  # the event loop kept running throughout
    finally:
        release.set()
        beat.cancel()
        runner.stop()


async def test_a_busy_loop_is_reported_too() -> None:
    runner = ActivationThread(0.1)

    def spin() -> int:
        n, end = 0, time.perf_counter() + 1.0
        while time.perf_counter() < end:
            n += 1
        return n

    try:
        with pytest.raises(DeadlockDetected) as info:
            await runner.run(spin)
        assert "in spin" in info.value.where
        assert (await runner.run(lambda: "next"))[0] == "next"
    finally:
        runner.stop()


async def test_stop_drops_what_is_queued() -> None:
    runner = ActivationThread(5.0)
    gate = threading.Event()
    first = asyncio.ensure_future(runner.run(gate.wait, 5))
    queued = asyncio.ensure_future(runner.run(lambda: "never"))
    await asyncio.sleep(0.05)
    runner.stop()
    gate.set()
    assert (await first)[0] is True  # what ran, finishes
    with pytest.raises(asyncio.CancelledError):
        await queued
    with pytest.raises(RuntimeError, match="stopping"):
        await runner.run(lambda: None)


async def test_each_activation_gets_the_whole_timeout_from_its_own_start() -> None:
    # One watchdog serves all activations: a slow (but not stuck) one queued behind another
    # is measured from when it began, not from when it was queued.
    runner = ActivationThread(1.0)
    try:
        first = asyncio.ensure_future(runner.run(time.sleep, 0.6))
        second = asyncio.ensure_future(runner.run(time.sleep, 0.6))
        assert (await first)[0] is None and (await second)[0] is None
        assert runner.abandoned == 0
        # With nothing in flight the watchdog is gone; the next stuck code re-arms it.
        gate = threading.Event()
        try:
            with pytest.raises(DeadlockDetected):
                await runner.run(gate.wait, 30)
        finally:
            gate.set()
        assert runner.abandoned == 1
    finally:
        runner.stop()


async def test_stuck_code_whose_caller_gave_up_does_not_hold_up_the_queue() -> None:
    runner = ActivationThread(0.2)
    gate = threading.Event()
    try:
        stuck = asyncio.ensure_future(runner.run(gate.wait, 30))
        queued = asyncio.ensure_future(runner.run(lambda: "queued"))
        await asyncio.sleep(0.05)
        stuck.cancel()  # the caller stops waiting; the code still blocks the thread
        # Taken by a fresh thread once the stuck code is past the timeout.
        assert (await asyncio.wait_for(queued, 20))[0] == "queued"
        assert runner.abandoned == 1 and not gate.is_set()
    finally:
        gate.set()
        runner.stop()


async def test_each_result_comes_back_when_it_is_ready_not_behind_slower_ones() -> None:
    # A short activation queued between two slow ones: its result (and the first slow
    # one's) is on the event loop while the second slow one still runs.
    runner = ActivationThread(60.0)
    first_gate, second_gate = threading.Event(), threading.Event()
    try:
        slow_first = asyncio.ensure_future(runner.run(first_gate.wait, 30))
        short = asyncio.ensure_future(runner.run(lambda: "short"))
        slow_second = asyncio.ensure_future(runner.run(second_gate.wait, 30))
        await asyncio.sleep(0)  # all three queued
        first_gate.set()
        # The timeout only bounds a failing run: nothing here waits on the clock.
        assert (await asyncio.wait_for(short, 20))[0] == "short"
        assert slow_first.done() and (await slow_first)[0] is True
        assert not second_gate.is_set() and not slow_second.done()
        second_gate.set()
        assert (await slow_second)[0] is True
    finally:
        first_gate.set()
        second_gate.set()
        runner.stop()


async def test_results_that_finish_before_the_loop_takes_them_come_in_one_hand_over() -> None:
    # While the event loop is busy, what the thread finishes joins the hand-over already
    # scheduled: one call_soon_threadsafe for the batch, not one per activation.
    runner = ActivationThread(60.0)
    loop = asyncio.get_running_loop()
    all_ran = threading.Event()
    hand_overs = 0
    plain = loop.call_soon_threadsafe

    def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hand_overs
        if callback == runner._take:
            hand_overs += 1
        return plain(callback, *args, **kwargs)

    loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
    try:
        jobs = [asyncio.ensure_future(runner.run(lambda i=i: i)) for i in range(5)]
        jobs.append(asyncio.ensure_future(runner.run(all_ran.set)))
        await asyncio.sleep(0)  # all six queued
        assert all_ran.wait(20)  # blocks the event loop until the thread ran them all
        assert [r for r, _ in await asyncio.gather(*jobs)] == [0, 1, 2, 3, 4, None]
        assert hand_overs == 1
        # Once taken, the next result gets a hand-over of its own.
        assert (await runner.run(lambda: "next"))[0] == "next"
        assert hand_overs == 2
    finally:
        del loop.call_soon_threadsafe
        runner.stop()


class _CountingCondition(threading.Condition):
    """A condition that counts the waits that returned (the thread's wake-ups)."""

    def __init__(self) -> None:
        super().__init__(threading.Lock())
        self.returned = 0

    def wait(self, timeout: float | None = None) -> bool:
        woke = super().wait(timeout)
        self.returned += 1
        return woke


async def test_warm_wakes_an_idle_thread_which_waits_again_and_still_runs_work() -> None:
    runner = ActivationThread(5.0)
    cond = _CountingCondition()
    runner._cond = cond
    try:
        assert (await runner.run(lambda: 1))[0] == 1

        def idle() -> bool:
            with cond:
                return runner._idle

        deadline = time.monotonic() + 5
        while not idle():
            assert time.monotonic() < deadline, "the thread never went idle"
            await asyncio.sleep(0.005)
        with cond:
            before = cond.returned
        runner.warm()
        while True:
            with cond:
                if cond.returned > before and runner._idle:
                    break
            assert time.monotonic() < deadline, "warm() did not wake the thread"
            await asyncio.sleep(0.005)
        assert (await runner.run(lambda: 2))[0] == 2
    finally:
        runner.stop()


def test_warm_before_the_thread_starts_does_nothing() -> None:
    runner = ActivationThread(5.0)
    runner.warm()
    assert runner._thread is None


async def test_a_job_not_before_a_time_starts_then_and_lets_ready_ones_go_first() -> None:
    """A job handed over ahead of its time (a timer's workflow task, ``not_before``) does
    not start before it, does not hold up jobs that may start now, and starts on time
    with nothing else to wake the thread: the event loop is blocked meanwhile."""
    runner = ActivationThread(5.0)
    ran: list[tuple[str, float]] = []

    def note(name: str) -> str:
        ran.append((name, time.monotonic()))
        return name

    try:
        await runner.run(note, "warm-up")  # the thread exists and waits for work
        due = time.monotonic() + 0.2
        later = asyncio.ensure_future(runner.run(note, "later", not_before=due))
        much_later = asyncio.ensure_future(runner.run(note, "much later", not_before=due + 0.1))
        now = asyncio.ensure_future(runner.run(note, "now"))
        await asyncio.sleep(0)  # the three are queued
        time.sleep(0.35)  # the loop blocks past both times: only the thread can start them
        deadline = time.monotonic() + 10  # (on a busy machine, a little longer)
        while len(ran) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [name for name, _ in ran] == ["warm-up", "now", "later", "much later"]
        at = dict(ran)
        assert at["now"] < due <= at["later"] < due + 0.1 <= at["much later"]
        assert [r for r, _ in await asyncio.gather(later, much_later, now)] == [
            "later",
            "much later",
            "now",
        ]
    finally:
        runner.stop()


async def test_a_job_queued_meanwhile_wakes_a_thread_waiting_for_a_later_one() -> None:
    """The thread waits for a job's time; a job that may start now, queued meanwhile, runs
    at once (it wakes the thread), not when the waiting one's time comes."""
    runner = ActivationThread(5.0)
    try:
        await runner.run(lambda: None)
        waiting = asyncio.ensure_future(runner.run(time.monotonic, not_before=time.monotonic() + 5))
        await asyncio.sleep(0.05)  # the thread is waiting for it
        began = time.monotonic()
        (ran_at, _) = await asyncio.wait_for(runner.run(time.monotonic), 2)
        assert ran_at - began < 1.0
        assert not waiting.done()
        waiting.cancel()
    finally:
        runner.stop()
