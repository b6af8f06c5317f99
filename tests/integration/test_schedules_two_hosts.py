"""Two processes hosting the service's background duties on one PostgreSQL database take
each of a schedule's actions once: the schedule's timer is taken under its row's lock, in
the transaction that starts the action's run."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from engine import Client
from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)

ROOT = Path(__file__).resolve().parents[2]

HOST = """
import asyncio, sys, time
from engine import Client

async def main(url: str, until: float) -> None:
    client = await Client.connect(url)
    client.start_service()
    print("hosting", flush=True)
    await asyncio.sleep(max(0.0, until - time.time()))
    await client.stop_service()
    await client.close()

asyncio.run(main(sys.argv[1], float(sys.argv[2])))
"""


async def test_two_hosts_take_each_action_once(pg_url: str) -> None:
    client = await Client.connect(pg_url)
    try:
        # No worker: every action's run stays open, so ALLOW_ALL starts each one.
        await client.create_schedule(
            "every-second",
            Schedule(
                action=ScheduleActionStartWorkflow("Job", id="job", task_queue="nobody"),
                spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
            ),
        )
        until = time.time() + 6.0
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        hosts = [
            subprocess.Popen(
                [sys.executable, "-c", HOST, pg_url, str(until)],
                stdout=subprocess.PIPE,
                env=env,
            )
            for _ in range(2)
        ]
        for host in hosts:
            assert host.stdout is not None
            assert host.stdout.readline().strip() == b"hosting"
        for host in hosts:
            assert await asyncio.to_thread(host.wait, 30) == 0
            assert host.stdout is not None
            host.stdout.close()
        handle = client.get_schedule_handle("every-second")
        log = await handle.actions()
        desc = await handle.describe()
        runs = [w async for w in client.list_workflows("TemporalScheduledById = 'every-second'")]
    finally:
        await client.close()
    started = [e for e in log if e.outcome == "started"]
    assert len(started) >= 4, log
    assert [e.outcome for e in log] == ["started"] * len(log)  # none failed or was skipped
    nominal = [e.nominal_time for e in started]
    assert len(set(nominal)) == len(nominal) == desc.info.num_actions
    gaps = {(b - a).total_seconds() for a, b in itertools.pairwise(nominal)}
    assert gaps == {1.0}  # every second, none taken twice, none left out
    assert sorted(w.id for w in runs) == sorted(e.workflow_id for e in started)
