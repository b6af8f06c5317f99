"""Schedules: how fast one host takes their actions, and a year of a daily schedule.

    python bench/schedules.py                        # SQLite and PostgreSQL
    python bench/schedules.py --backend sqlite --schedules 50 --seconds 5

- ``S_actions``: ``--schedules`` schedules each firing every second (ALLOW_ALL, no worker:
  each action starts a run that stays open) hosted by one process for ``--seconds`` of
  real time: actions taken per second, and how late each was taken after its time
  (median and max of ``decided_time - scheduled_time`` from the action log).
- ``S_year``: a daily schedule whose run completes at once, on the time-skipping clock,
  with a worker: the wall time for ``WorkflowEnvironment.sleep(365 days)`` (365 runs).

Lines are printed in the peers' format: ``peer=durable-sqlite workload=S_actions
value=.. unit=actions/s ...``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Client, Worker, workflow
from engine.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)
from engine.testing import WorkflowEnvironment

PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@workflow.defn
class Tick:
    @workflow.run
    async def run(self) -> str:
        return "tick"


def _pg_schema() -> str:
    import sqlalchemy as sa

    schema = "bench_" + uuid.uuid4().hex[:10]
    engine = sa.create_engine(PG, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    return f"{PG}?options=-csearch_path%3D{schema}"


def _url(backend: str, tmp: Path) -> str:
    return f"sqlite:///{tmp / f'{uuid.uuid4().hex}.db'}" if backend == "sqlite" else _pg_schema()


async def actions(url: str, schedules: int, seconds: float) -> tuple[float, float, float, int]:
    client = await Client.connect(url)
    try:
        for i in range(schedules):
            await client.create_schedule(
                f"s{i}",
                Schedule(
                    action=ScheduleActionStartWorkflow("Job", id=f"job{i}", task_queue="nobody"),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=1))]),
                    policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
                ),
            )
        began = time.time()
        async with client.hosting_service():
            await asyncio.sleep(seconds)
        taken, lateness = 0, []
        for i in range(schedules):
            for e in await client.get_schedule_handle(f"s{i}").actions():
                if e.outcome == "started" and e.scheduled_time.timestamp() >= began:
                    taken += 1
                    lateness.append((e.decided_time - e.scheduled_time).total_seconds() * 1000)
    finally:
        await client.close()
    return taken / seconds, statistics.median(lateness), max(lateness), taken


async def year(url: str) -> float:
    async with await WorkflowEnvironment.start_time_skipping(database_url=url) as env:
        client = env.client
        async with Worker(client, task_queue="q", workflows=[Tick]):
            handle = await client.create_schedule(
                "daily",
                Schedule(
                    action=ScheduleActionStartWorkflow(Tick.run, id="tick", task_queue="q"),
                    spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=1))]),
                ),
            )
            began = time.perf_counter()
            await env.sleep(timedelta(days=365))
            took = time.perf_counter() - began
            assert (await handle.describe()).info.num_actions == 365
    return took


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            peer = f"durable-{backend}"
            rate, median, worst, taken = await actions(
                _url(backend, Path(tmp)), args.schedules, args.seconds
            )
            print(
                f"peer={peer} workload=S_actions value={rate:.1f} unit=actions/s "
                f"late_median_ms={median:.1f} late_max_ms={worst:.1f} actions={taken} "
                f"schedules={args.schedules}",
                flush=True,
            )
            took = await year(_url(backend, Path(tmp)))
            print(f"peer={peer} workload=S_year value={took:.2f} unit=s runs=365", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
