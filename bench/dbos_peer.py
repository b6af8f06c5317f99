"""DBOS Transact on the peers' workloads, for comparisons run in one command.

    <peers venv>/bin/python bench/dbos_peer.py W1|W2|W4 --db postgresql://... [--reps 3]

Runs in the peers' virtual environment (``bench/beside_dbos.py`` makes it from
``bench/peers-requirements.txt``), never in the project's: DBOS pins its own SQLAlchemy.
The workloads mean what they mean in ``bench/run.py`` and in the peers' own scripts: DBOS's
primary configuration, plain functions as ``@DBOS.workflow()`` and ``@DBOS.step()``,
started with ``DBOS.start_workflow`` (its thread pool), the library in this process, its
system database at ``--db``. Each workload first runs an untimed warm-up. Result lines use
the format of ``bench/run.py`` with ``peer=dbos-pg`` (``dbos`` on SQLite).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from dbos import DBOS, DBOSConfig, SetWorkflowID

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
ap.add_argument("workload", choices=["W1", "W2", "W4"])
ap.add_argument("--db", required=True, help="DBOS's system database URL")
ap.add_argument("--reps", type=int, default=3)
ARGS = ap.parse_args()
PEER = "dbos-pg" if ARGS.db.startswith("postgres") else "dbos"

config: DBOSConfig = {
    "name": "durable-bench-peer",
    "system_database_url": ARGS.db,
    "log_level": "WARNING",
}
DBOS(config=config)


@DBOS.step()
def echo(x: int) -> int:
    return x


@DBOS.workflow()
def one_step(x: int) -> int:
    return echo(x)


@DBOS.workflow()
def steps_in_a_row(n: int) -> int:
    return sum(echo(i) for i in range(n))


@DBOS.workflow()
def nap(seconds: float) -> list[float]:
    before = time.time()
    DBOS.sleep(seconds)
    return [before, time.time()]


def line(workload: str, xs: Sequence[float], unit: str) -> None:
    runs = ",".join(f"{x:.4g}" for x in xs)
    print(
        f"peer={PEER} workload={workload} value={statistics.median(xs):.4g} unit={unit} "
        f"median={statistics.median(xs):.4g} min={min(xs):.4g} max={max(xs):.4g} runs={runs}",
        flush=True,
    )


def batch(fn: Callable[[Any], Any], args: list[Any]) -> tuple[float, list[Any], list[float]]:
    """Start every workflow, then wait for each: wall time, results, start-to-result times
    (an upper bound for all but the first: results are collected in order)."""
    prefix = uuid.uuid4().hex[:10]
    began = time.perf_counter()
    handles = []
    for i, arg in enumerate(args):
        with SetWorkflowID(f"{prefix}-{i}"):
            handles.append((time.perf_counter(), DBOS.start_workflow(fn, arg)))
    results, durations = [], []
    for started, handle in handles:
        results.append(handle.get_result())
        durations.append(time.perf_counter() - started)
    return time.perf_counter() - began, results, durations


def w1(reps: int, n: int = 500) -> None:
    batch(one_step, list(range(20)))
    rates = []
    for _ in range(reps):
        wall, results, _ = batch(one_step, list(range(n)))
        assert results == list(range(n))
        rates.append(n / wall)
    line("W1", rates, "wf/s")


def w2(reps: int, workflows: int = 20, steps: int = 50) -> None:
    batch(steps_in_a_row, [5, 5])
    rates, latencies, alone = [], [], []
    for _ in range(reps):
        wall, results, durations = batch(steps_in_a_row, [steps] * workflows)
        assert results == [steps * (steps - 1) // 2] * workflows
        rates.append(workflows * steps / wall)
        latencies.append(statistics.median(durations) / steps * 1000)
    for _ in range(reps):
        _, _, durations = batch(steps_in_a_row, [steps])
        alone.append(durations[0] / steps * 1000)
    line("W2", rates, "act/s")
    line("W2_step_latency", latencies, "ms")
    line("W2_step_latency_1wf", alone, "ms")


def w4(reps: int, n: int = 20, seconds: float = 1.0) -> None:
    batch(nap, [0.05, 0.05])
    medians, maxima, one = [], [], []
    for _ in range(reps):
        _, results, _ = batch(nap, [seconds] * n)
        late = [(after - before - seconds) * 1000 for before, after in results]
        medians.append(statistics.median(late))
        maxima.append(max(late))
    for _ in range(reps):
        _, results, _ = batch(nap, [seconds])
        (before, after), *_ = results
        one.append((after - before - seconds) * 1000)
    line("W4_lateness_median", medians, "ms")
    line("W4_lateness_max", maxima, "ms")
    line("W4_lateness_1wf", one, "ms")


DBOS.launch()
try:
    {"W1": w1, "W2": w2, "W4": w4}[ARGS.workload](ARGS.reps)
finally:
    DBOS.destroy()
