"""Deliberately changed ``temporalio`` workflows: replaying our histories against them must
fail with temporalio's non-determinism error (so a clean replay means something).

Importing this module has no side effects: temporalio's sandbox re-imports it.
"""

from __future__ import annotations

from temporalio import workflow

from .temporal_code import TIMEOUT, say_hello


@workflow.defn(name="TimerWF")
class TimerSwappedForActivityWF:
    """``TimerWF`` with its timer replaced by an activity."""

    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.execute_activity(say_hello, str(seconds), start_to_close_timeout=TIMEOUT)
        return "timer done"


@workflow.defn(name="HelloWF")
class HelloWithExtraTimerWF:
    """``HelloWF`` with a timer added after its activity."""

    @workflow.run
    async def run(self, name: str) -> str:
        greeting = await workflow.execute_activity(say_hello, name, start_to_close_timeout=TIMEOUT)
        await workflow.sleep(1)
        return greeting


CHANGED_WORKFLOWS = [TimerSwappedForActivityWF, HelloWithExtraTimerWF]
