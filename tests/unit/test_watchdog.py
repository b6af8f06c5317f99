"""The activation watchdog: interrupts code that runs too long, and nothing else."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from engine._worker.watchdog import ActivationWatchdog, DeadlockDetected


def _spin(seconds: float) -> str:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return "done"


def test_returns_what_the_code_returns_and_raises_what_it_raises() -> None:
    dog = ActivationWatchdog(5.0)
    try:
        assert dog.run(lambda a, b: a + b, 2, 3) == 5
        with pytest.raises(KeyError):
            dog.run({}.__getitem__, "missing")
    finally:
        dog.stop()


def test_a_busy_loop_is_interrupted_with_where_it_was() -> None:
    dog = ActivationWatchdog(0.1)
    try:
        t0 = time.perf_counter()
        with pytest.raises(DeadlockDetected) as info:
            dog.run(_spin, 30.0)
        assert time.perf_counter() - t0 < 10  # interrupted, not run to its end
        assert info.value.timeout == 0.1
        assert "_spin" in info.value.stack and "test_watchdog.py" in info.value.where
    finally:
        dog.stop()


def test_code_that_swallows_the_interrupt_is_still_reported() -> None:
    def stubborn() -> str:
        try:
            _spin(30.0)
        except BaseException:
            pass
        return "finished anyway"

    dog = ActivationWatchdog(0.1)
    try:
        with pytest.raises(DeadlockDetected):
            dog.run(stubborn)
    finally:
        dog.stop()


def test_no_interrupt_ever_lands_outside_an_activation() -> None:
    """Activations that end right around the timeout: the interrupt either stops one of
    them (reported as a deadlock) or is withdrawn, never raised in the caller's code."""
    dog = ActivationWatchdog(0.01)
    rng = random.Random(7)
    outcomes = {"done": 0, "deadlock": 0}
    try:
        deadline = time.perf_counter() + 3.0
        while time.perf_counter() < deadline:
            try:
                outcomes[dog.run(_spin, rng.uniform(0.0, 0.03))] += 1
            except DeadlockDetected:
                outcomes["deadlock"] += 1
            # Caller code between activations: a stray interrupt would surface here.
            total = 0
            for i in range(2000):
                total += i
            assert total == 1999000
        time.sleep(0.05)  # a withdrawn interrupt would have had every chance to land
        _spin(0.05)
    finally:
        dog.stop()
    assert outcomes["done"] > 0 and outcomes["deadlock"] > 0, outcomes


def test_the_running_event_loop_is_restored_after_an_interrupt() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        other = asyncio.new_event_loop()

        def activation() -> None:
            # What a workflow activation does: its own loop is "running" meanwhile.
            asyncio.events._set_running_loop(other)
            _spin(30.0)

        dog = ActivationWatchdog(0.05)
        try:
            with pytest.raises(DeadlockDetected):
                dog.run(activation)
            assert asyncio.get_running_loop() is loop
        finally:
            dog.stop()
            other.close()

    asyncio.run(main())
