"""A worker process for crash tests: ``python -m tests.crash.worker_proc URL QUEUE MARKER_DIR``.

Attempt 1 of ``slow_step`` writes a marker file and then hangs, so a test can kill the
process in the middle of an activity; later attempts return at once. Attempt 1 of
``freezable`` writes a marker and sleeps a second, so a test can freeze the process
(SIGSTOP) past the activity's timeout and thaw it after attempt 2 finished elsewhere.
``DN_WORKER_LOG=DEBUG`` logs the engine's debug lines to stdout (the test reads them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path

from engine import Client, RetryPolicy, Worker, activity, workflow

#: Where the activities leave their marker files: the process's third argument (set in
#: main); a test running these activities in its own process sets it itself.
MARKERS = Path(".")


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


@activity.defn
async def freezable(name: str) -> str:
    info = activity.info()
    (MARKERS / f"{info.workflow_id}.attempt{info.attempt}.pid{os.getpid()}").touch()
    if info.attempt == 1:
        await asyncio.sleep(1.0)  # frozen in here, thawed long after the timeout
        activity.heartbeat("late")  # refused: attempt 1 is over
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            why = activity.cancellation_details()
            gone = why is not None and why.not_found
            (MARKERS / f"{info.workflow_id}.attempt1.cancelled.not_found={gone}").touch()
        # Swallow the cancellation and complete: the completion is refused too.
    return f"{name} by attempt {info.attempt}"


@activity.defn
async def chaos_step(n: int, i: int) -> int:
    await asyncio.sleep(0.05)
    return n * 10 + i


@workflow.defn
class FreezeWF:
    """The activity, then a wait for the ``release`` signal (the run stays open while the
    frozen worker comes back)."""

    def __init__(self) -> None:
        self.released = False

    @workflow.run
    async def run(self, name: str) -> str:
        result = await workflow.execute_activity(
            freezable,
            name,
            start_to_close_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        await workflow.wait_condition(lambda: self.released)
        return result

    @workflow.signal
    def release(self) -> None:
        self.released = True


@workflow.defn
class ChaosWF:
    """Two activities around a durable timer (the kill-and-freeze loops)."""

    @workflow.run
    async def run(self, n: int, start_to_close: float = 3.0) -> int:
        options = dict(
            start_to_close_timeout=timedelta(seconds=start_to_close),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100)),
        )
        first = await workflow.execute_activity(chaos_step, args=[n, 1], **options)
        await workflow.sleep(0.3)
        second = await workflow.execute_activity(chaos_step, args=[n, 2], **options)
        return first + second


def chaos_result(n: int) -> int:
    return (n * 10 + 1) + (n * 10 + 2)


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
    global MARKERS
    url, queue, MARKERS = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    level = os.environ.get("DN_WORKER_LOG")
    if level:
        logging.basicConfig(
            level=logging.WARNING, stream=sys.stdout, format="%(levelname)s %(name)s %(message)s"
        )
        logging.getLogger("engine").setLevel(level)
    client = await Client.connect(url)
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[CrashActivityWF, CrashTimerWF, ShareWF, FreezeWF, ChaosWF],
        activities=[slow_step, quick, freezable, chaos_step],
    )
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
