"""Where a durable timer's lateness goes, stage by stage (W4's 1 s timers).

    python bench/timer_stages.py [--backend sqlite|postgres|both] [--n 20] [--reps 3]

W4 measures lateness inside workflow code: the wall clock read after ``workflow.sleep(1)``
minus the one read before it, minus 1 s. This splits that figure into the stages between
the two reads, from the timestamps the run's history holds:

- ``record``: from the read before the sleep to ``TimerStarted`` (the workflow task that
  asks for the timer, until its completion is written; the timer counts from then, as on
  Temporal's server);
- ``fire``: from when the timer was due (``TimerStarted`` + 1 s) to ``TimerFired`` (the
  timer loop waking up and the firing transaction starting; on PostgreSQL the pass starts
  ahead and stamps its events with its due time, the latest of the timers it gathered, so
  this is how long each waited for the others, and its commit falls in ``run``);
- ``dispatch``: from ``TimerFired`` to the next ``WorkflowTaskStarted`` (the task reaching a
  worker: handed over in the same transaction, or through a poll);
- ``run``: from ``WorkflowTaskStarted`` to the read after the sleep (the activation thread
  starting the code at the due time, the task having reached the worker before it while
  the pass waited to commit; the jobs of the pass's other tasks queued before it;
  replaying nothing).

Each stage is the median (and max) over the timers of a batch of ``--n`` concurrent
workflows, then the median over ``--reps`` batches; ``--n 1`` is the lone timer.
Timestamps of history events are the engine's clock at the start of the writing
transaction (for a batch of changes committed together, the clock as its first change
read it: ``engine/_store/shared_time.py``), so the stages add up to the total.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import uuid
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import machine  # noqa: E402
import run as bench  # noqa: E402
from workloads import SleepWF  # noqa: E402

from engine import Client  # noqa: E402

STAGES = ("record", "fire", "dispatch", "run", "total")


async def batch(client: Client, tq: str, n: int, secs: float) -> dict[str, list[float]]:
    """One batch of ``n`` concurrent sleeps: each stage of each, in milliseconds."""
    ids = [f"stages-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)]
    results = await asyncio.gather(
        *(client.execute_workflow(SleepWF.run, secs, id=i, task_queue=tq) for i in ids)
    )
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    for wid, (before, after) in zip(ids, results, strict=True):
        events = (await client.get_workflow_handle(wid).fetch_history()).events
        kinds = [e.event_type for e in events]
        started = events[kinds.index("TimerStarted")].event_time
        fired_at = kinds.index("TimerFired")
        fired = events[fired_at].event_time
        task = next(
            e.event_time for e in events[fired_at:] if e.event_type == "WorkflowTaskStarted"
        )
        parts = {
            "record": started - before,
            "fire": fired - (started + secs),
            "dispatch": task - fired,
            "run": after - task,
            "total": after - before - secs,
        }
        for name, value in parts.items():
            stages[name].append(value * 1000)
    return stages


async def measure(backend: str, pg_url: str, n: int, reps: int) -> None:
    with bench.fresh_database(backend, pg_url) as url:
        client = await Client.connect(url)
        try:
            tq = bench.new_tq()
            async with bench.new_worker(client, tq):
                await batch(client, tq, 2, 0.05)  # warm-up
                medians: dict[str, list[float]] = {name: [] for name in STAGES}
                maxima: dict[str, list[float]] = {name: [] for name in STAGES}
                for _ in range(reps):
                    got = await batch(client, tq, n, 1.0)
                    for name in STAGES:
                        medians[name].append(statistics.median(got[name]))
                        maxima[name].append(max(got[name]))
        finally:
            await client.close()
    print(f"\n== {backend}, {n} concurrent 1 s timer(s), median of {reps} batches (ms)")
    print(f"   {'stage':<9} {'median':>8} {'max':>8}")
    for name in STAGES:
        med = statistics.median(medians[name])
        top = statistics.median(maxima[name])
        print(f"   {name:<9} {med:8.2f} {top:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument(
        "--pg-url", default=os.environ.get("DURABLE_BENCH_PG_URL", bench.DEFAULT_PG_URL)
    )
    ap.add_argument("--n", type=int, nargs="+", default=[20, 1])
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    backends = bench.BACKENDS if args.backend == "both" else (args.backend,)
    print(machine.line(), flush=True)  # how fast the VM wakes threads today
    for backend in backends:
        for n in args.n:
            asyncio.run(measure(backend, args.pg_url, n, args.reps))


if __name__ == "__main__":
    main()
