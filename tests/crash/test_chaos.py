"""Kill and freeze loops (issue 14, item 6): three worker processes, SIGKILLed and frozen
(SIGSTOP, then SIGCONT a few seconds later) at random while 200 workflows with activities
and a durable timer run; then the same with PostgreSQL restarted in the middle.

Whatever happens, every workflow completes exactly once with its result, its event ids
are contiguous, and no workflow id has a second run. What the chaos cost (activity attempts
run again after their timeout) is printed; the seed is fixed, so a failure can be re-run.
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

import pytest

from engine import Client

from ..pg_cluster import pg_cluster
from .procs import WorkerProcess, assert_no_gaps
from .worker_proc import ChaosWF, chaos_result

pytestmark = pytest.mark.crash

N = 200


async def _start_all(client: Client, task_queue: str, start_to_close: float = 3.0) -> list:
    return list(
        await asyncio.gather(
            *(
                client.start_workflow(
                    ChaosWF.run, args=[i, start_to_close], id=f"chaos-{i}", task_queue=task_queue
                )
                for i in range(N)
            )
        )
    )


async def _check_all(client: Client, handles: list) -> dict[str, int]:
    """Every run completed once, contiguous events, one run per id; what was re-run."""
    retried = timed_out = 0
    for handle in handles:
        events = (await handle.fetch_history()).events
        assert_no_gaps(events)
        types = [e.event_type for e in events]
        assert types.count("WorkflowExecutionCompleted") == 1, (handle.id, types)
        assert types[-1] == "WorkflowExecutionCompleted"
        assert types.count("ActivityTaskCompleted") == 2
        assert types.count("TimerFired") == 1
        retried += sum(
            1
            for e in events
            if e.event_type == "ActivityTaskStarted" and e.attributes["attempt"] > 1
        )
        timed_out += types.count("WorkflowTaskTimedOut")
    runs = [e async for e in client.list_workflows("WorkflowType = 'ChaosWF'")]
    assert sorted(r.id for r in runs) == sorted(h.id for h in handles)  # no second runs
    return {"activity_attempts_rerun": retried, "workflow_tasks_timed_out": timed_out}


def _thaw_due(workers: list[WorkerProcess], frozen: dict[int, float]) -> None:
    """Thaw the frozen workers whose time has come (``frozen``: index -> when)."""
    now = time.monotonic()
    for i, at in list(frozen.items()):
        if at <= now:
            workers[i].thaw()
            del frozen[i]


async def _chaos(url: str, task_queue: str, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    workers = [WorkerProcess(url, task_queue, tmp_path) for _ in range(3)]
    frozen: dict[int, float] = {}  # worker index -> when to thaw it
    kills = freezes = 0
    client = await Client.connect(url)
    handles: list = []
    try:
        # 20 starts every half second for 5 s, and the chaos meanwhile and after.
        async def start_in_waves() -> None:
            for wave in range(10):
                handles.extend(
                    await asyncio.gather(
                        *(
                            client.start_workflow(
                                ChaosWF.run, i, id=f"chaos-{i}", task_queue=task_queue
                            )
                            for i in range(wave * N // 10, (wave + 1) * N // 10)
                        )
                    )
                )
                await asyncio.sleep(0.5)

        starting = asyncio.ensure_future(start_in_waves())
        # Five SIGKILLs and five freezes of 1-3 s, in a seeded order, 0.3-0.8 s apart,
        # never leaving fewer than one worker going.
        plan = ["kill"] * 5 + ["freeze"] * 5
        rng.shuffle(plan)
        for action in plan:
            await asyncio.sleep(rng.uniform(0.3, 0.8))
            while True:
                _thaw_due(workers, frozen)
                healthy = [i for i in range(3) if i not in frozen]
                if len(healthy) >= 2:
                    break
                await asyncio.sleep(0.05)
            i = rng.choice(healthy)
            if action == "kill":
                workers[i].kill()
                kills += 1
                workers[i] = await asyncio.to_thread(WorkerProcess, url, task_queue, tmp_path)
            else:
                workers[i].freeze()
                freezes += 1
                frozen[i] = time.monotonic() + rng.uniform(1.0, 3.0)
        while frozen:
            _thaw_due(workers, frozen)
            await asyncio.sleep(0.05)
        await starting
        results = asyncio.gather(*(h.result() for h in handles))
        values = await asyncio.wait_for(results, 180)
        assert values == [chaos_result(i) for i in range(N)]
        cost = await _check_all(client, handles)
        print(f"\n{kills} SIGKILLs, {freezes} freezes over {N} workflows: {cost}")
    finally:
        for w in workers:
            w.stop()
        await client.close()


async def test_kill_and_freeze_loop(db_url: str, task_queue: str, tmp_path: Path) -> None:
    await _chaos(db_url, task_queue, tmp_path, seed=14)


async def test_postgres_restart_in_the_middle(task_queue: str, tmp_path: Path) -> None:
    with pg_cluster() as cluster:
        workers = [WorkerProcess(cluster.url, task_queue, tmp_path) for _ in range(3)]
        client = await Client.connect(cluster.url)
        try:
            # The figure: activities with a 30 s start-to-close timeout.
            handles = await _start_all(client, task_queue, start_to_close=30.0)
            finished: dict[int, float] = {}

            async def wait(i: int) -> int:
                value = await handles[i].result()
                finished[i] = time.monotonic()
                return value

            results = asyncio.ensure_future(asyncio.gather(*(wait(i) for i in range(N))))
            while len(finished) < N // 4:
                await asyncio.sleep(0.01)
            went, back = await asyncio.to_thread(cluster.restart, 3.0)
            values = await asyncio.wait_for(results, 120)
            assert values == [chaos_result(i) for i in range(N)]
            cost = await _check_all(client, handles)
            in_flight = N - len([t for t in finished.values() if t < went])
            print(
                f"\nPostgreSQL down {back - went:.1f} s with {in_flight} of {N} runs in flight; "
                f"the last completed {max(finished.values()) - back:.2f} s after its return; "
                f"{cost}"
            )
            assert in_flight > 0
            # Nothing waited for a timeout: the workers kept what they had finished.
            assert cost["activity_attempts_rerun"] == 0
            for w in workers:
                out = w.output()
                assert "crashed" not in out and "Traceback" not in out, out[-3000:]
        finally:
            for w in workers:
                w.stop()
            await client.close()
