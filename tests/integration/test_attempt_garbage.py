"""An activity attempt, a run the worker drops once it completed, and a timer pass that
handed its workflow tasks out early leave no reference cycles behind: their objects are
freed as soon as they end, not left to the cycle collector (on the hot path, the collections that garbage caused cost W2 about 8 % of its
throughput, and a completed run's thirty objects made W1's full collections about twice
as long; bench/README.md)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from engine import Client, Worker, activity, workflow
from engine._replay.instance import WorkflowInstance
from engine._service.host import ServiceHost
from engine._store.commit_at import CommitAt
from engine._worker.activities import _Running


@contextlib.contextmanager
def left_in_cycles() -> Iterator[list[object]]:
    """What the block leaves in reference cycles (filled in when it ends): the collector is
    off meanwhile, and keeps what it then finds (``gc.DEBUG_SAVEALL``)."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[object] = []
    try:
        yield found
        gc.collect()
        found.extend(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()


@activity.defn
async def add_one(x: int) -> int:
    return x + 1


@activity.defn
def add_two(x: int) -> int:  # a plain function: runs in the worker's thread pool
    return x + 2


@workflow.defn
class Steps:
    @workflow.run
    async def run(self, n: int) -> int:
        x = 0
        for _ in range(n):
            x = await workflow.execute_activity(
                add_one, x, start_to_close_timeout=timedelta(seconds=10)
            )
            x = await workflow.execute_activity(
                add_two, x, start_to_close_timeout=timedelta(seconds=10)
            )
        return x


async def test_attempts_leave_no_cycles(client: Client, task_queue: str) -> None:
    async with Worker(
        client, task_queue=task_queue, workflows=[Steps], activities=[add_one, add_two]
    ):
        await client.execute_workflow(
            Steps.run, 1, id="warm-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with left_in_cycles() as garbage:
            result = await client.execute_workflow(
                Steps.run, 20, id="steps-" + uuid.uuid4().hex, task_queue=task_queue
            )
    kinds = Counter(type(o).__qualname__ for o in garbage)
    attempts = sum(isinstance(o, _Running) for o in garbage)
    assert result == 60
    assert attempts == 0, f"attempts left in cycles: {attempts}; garbage {kinds.most_common(8)}"
    # Whatever else is cyclic does not grow with the number of attempts.
    assert sum(kinds.values()) < 200, kinds.most_common(8)


@workflow.defn
class OneStep:
    @workflow.run
    async def run(self, x: int) -> int:
        return await workflow.execute_activity(
            add_one, x, start_to_close_timeout=timedelta(seconds=10)
        )


async def test_completed_runs_leave_no_cycles(client: Client, task_queue: str) -> None:
    worker = Worker(client, task_queue=task_queue, workflows=[OneStep], activities=[add_one])
    async with worker:
        await client.execute_workflow(
            OneStep.run, 0, id="warm-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with left_in_cycles() as garbage:
            results = await asyncio.gather(
                *[
                    client.execute_workflow(
                        OneStep.run, i, id=f"one-{i}-" + uuid.uuid4().hex, task_queue=task_queue
                    )
                    for i in range(10)
                ]
            )
            # The worker drops a run after its completion was accepted: that can come
            # just after the client heard of the result.
            for _ in range(500):
                if worker.metrics.sticky_cache_size == 0:
                    break
                await asyncio.sleep(0.01)
            cached = worker.metrics.sticky_cache_size
    kinds = Counter(type(o).__qualname__ for o in garbage)
    runs = sum(isinstance(o, WorkflowInstance) for o in garbage)
    assert results == list(range(1, 11))
    assert cached == 0
    assert runs == 0, f"completed runs left in cycles: {runs}; garbage {kinds.most_common(8)}"


@workflow.defn
class Naps:
    @workflow.run
    async def run(self, naps: int) -> int:
        for _ in range(naps):
            await workflow.sleep(0.2)
        return naps


async def test_timer_passes_leave_no_cycles(
    client: Client, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    early: list[object] = []
    hand_out_early = ServiceHost._hand_out_early

    def counted(self: ServiceHost, *args: Any) -> Any:
        committing = hand_out_early(self, *args)
        if committing is not None:
            early.append(committing)
        return committing

    monkeypatch.setattr(ServiceHost, "_hand_out_early", counted)
    async with Worker(client, task_queue=task_queue, workflows=[Naps]):
        await client.execute_workflow(
            Naps.run, 1, id="warm-" + uuid.uuid4().hex, task_queue=task_queue
        )
        with left_in_cycles() as garbage:
            # Runs sleeping in the worker's cache: the timer loop starts their passes
            # ahead and hands the tasks out before the commit (CommitAt's callbacks).
            results = await asyncio.gather(
                *[
                    client.execute_workflow(
                        Naps.run, 3, id=f"naps-{i}-" + uuid.uuid4().hex, task_queue=task_queue
                    )
                    for i in range(5)
                ]
            )
    kinds = Counter(type(o).__qualname__ for o in garbage)
    passes = sum(isinstance(o, CommitAt) for o in garbage)
    assert results == [3] * 5
    assert early, "no timer pass handed its tasks out early: the test tested nothing"
    assert passes == 0, f"timer passes left in cycles: {passes}; garbage {kinds.most_common(8)}"
