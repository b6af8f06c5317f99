"""A worker process for crash tests: ``python -m tests.crash.worker_proc URL QUEUE MARKER_DIR``.

Attempt 1 of ``slow_step`` writes a marker file and then hangs, so a test can kill the
process in the middle of an activity; later attempts return at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

from engine import Client, Worker, activity, workflow

MARKERS = Path(sys.argv[3]) if len(sys.argv) > 3 else Path(".")


@activity.defn
async def slow_step(name: str) -> str:
    info = activity.info()
    (MARKERS / f"{info.workflow_id}.attempt{info.attempt}.pid{os.getpid()}").touch()
    if info.attempt == 1:
        await asyncio.sleep(3600)
    return f"{name} done by attempt {info.attempt}"


@activity.defn
async def quick(n: int) -> int:
    return n * 2


@workflow.defn
class CrashActivityWF:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            slow_step, name, start_to_close_timeout=timedelta(seconds=2)
        )


@workflow.defn
class CrashTimerWF:
    @workflow.run
    async def run(self, seconds: float) -> str:
        await workflow.sleep(seconds)
        return f"woke after {seconds}s"


@workflow.defn
class ShareWF:
    @workflow.run
    async def run(self, n: int) -> int:
        return await workflow.execute_activity(
            quick, n, start_to_close_timeout=timedelta(seconds=10)
        )


async def main() -> None:
    url, queue = sys.argv[1], sys.argv[2]
    client = await Client.connect(url)
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[CrashActivityWF, CrashTimerWF, ShareWF],
        activities=[slow_step, quick],
    )
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
