"""Workflows and activities of the benchmark workloads (W1, W2, W4, W4s).

They mirror ``../shared/peers/temporal_wf.py`` so both engines run the same code shape:
an ``async def`` no-op activity with ``start_to_close_timeout=30s``, one workflow per
workload.
"""

from __future__ import annotations

import asyncio
import time as _wall_time
from datetime import timedelta

from engine import activity, workflow

TIMEOUT = timedelta(seconds=30)


@activity.defn
async def noop(x: int) -> int:
    """No-op activity: returns its input."""
    return x


@workflow.defn
class OneActivityWF:
    """W1: one no-op activity returning its input."""

    @workflow.run
    async def run(self, x: int) -> int:
        return int(await workflow.execute_activity(noop, x, start_to_close_timeout=TIMEOUT))


@workflow.defn
class SeqActivitiesWF:
    """W2: ``n`` sequential no-op activities; returns the sum of 0..n-1."""

    @workflow.run
    async def run(self, n: int) -> int:
        acc = 0
        for i in range(n):
            acc += await workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
        return acc


@workflow.defn
class SleepWF:
    """W4/W4s: a durable timer. Returns the wall clock [before, after] around the sleep."""

    @workflow.run
    async def run(self, seconds: float) -> list[float]:
        # Reading the wall clock in workflow code is NON-DETERMINISTIC (a replay would read
        # other values; workflow.now() is the deterministic clock). It is done here only to
        # measure timer lateness as seen by the workflow code, like the peers do; the values
        # only feed the result, never a decision. The run stays cached in the worker between
        # the two reads, so no replay happens in between under the bench's load.
        before = _wall_time.time()
        await workflow.sleep(seconds)
        after = _wall_time.time()
        return [before, after]


ALL_WORKFLOWS = [OneActivityWF, SeqActivitiesWF, SleepWF]
ALL_ACTIVITIES = [noop]


@workflow.defn
class BatchActivitiesWF:
    """W5: ``n`` no-op activities, ``batch`` at a time: a long history quickly (3 events per
    activity plus the workflow tasks between batches)."""

    @workflow.run
    async def run(self, n: int, batch: int) -> int:
        done = 0
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            results = await asyncio.gather(
                *(
                    workflow.execute_activity(noop, i, start_to_close_timeout=TIMEOUT)
                    for i in range(start, stop)
                )
            )
            done += len(results)
        return done
