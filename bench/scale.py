"""W1 on PostgreSQL with 1, 2 and 4 worker processes on one database, and what they wait on.

    python bench/scale.py [--procs 1 2 4] [--n 600] [--reps 3] [--pg-url URL]

Each worker process runs one :class:`~engine.Worker` (the bench's workflows and activities,
the engine's defaults) on one task queue of one fresh schema; this process starts ``--n``
W1 workflows (one activity each) at once with a client of its own and waits for every
result. Throughput is ``n`` over that time, the median of ``--reps`` batches after a
warm-up batch. While a batch runs, a sampler reads ``pg_stat_activity`` every 10 ms and
counts what the engine's connections are doing in their transactions
(``wait_event_type:wait_event``, ``CPU`` for an active backend not waiting, ``idle in
transaction`` for one waiting for its Python process to send the next statement), and the CPU time of every worker
process and of the PostgreSQL server is taken before and after, so the figures say where a
curve flattens: the workers' Python (a process near one core), the server's CPU, its WAL
flushes (``IO:WALSync``/``LWLock:WALWrite``), or row locks (``Lock:transactionid``/``tuple``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import psycopg  # noqa: E402
import run as bench  # noqa: E402
from workloads import OneActivityWF  # noqa: E402

from engine import Client  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def server_cpu_seconds(libpq_url: str) -> float:
    """CPU seconds of every PostgreSQL server process now alive (backends of the engine
    live as long as their pools, so a batch's work is in the difference)."""
    with psycopg.connect(libpq_url, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity").fetchall()]
    return sum(cpu_seconds(pid) for pid in pids)


class Sampler(threading.Thread):
    """What the schema's connections are doing, sampled until stopped."""

    def __init__(self, libpq_url: str) -> None:
        super().__init__(daemon=True)
        self.url = libpq_url
        self.counts: collections.Counter[str] = collections.Counter()
        #: Ungranted locks seen, by what they are on.
        self.locks: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            own = conn.info.backend_pid
            while not self._done.is_set():
                rows = conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> %s AND datname = "
                    "current_database() AND query NOT LIKE 'LISTEN%%'",
                    (own,),
                ).fetchall()
                # Which object an ungranted lock is on (e.g. NOTIFY's commit lock: class
                # pg_database, object 0).
                for kind, cls, obj, mode in conn.execute(
                    "SELECT locktype, classid::regclass::text, objid, mode FROM pg_locks "
                    "WHERE NOT granted AND pid <> %s",
                    (own,),
                ).fetchall():
                    self.locks[f"{kind} {cls or ''} {obj or ''} {mode}".strip()] += 1
                self.samples += 1
                for state, kind, event in rows:
                    if state == "idle":
                        continue  # a pooled connection between transactions
                    if state != "active":
                        # "idle in transaction": the backend waits for its client (Python).
                        self.counts[state or "?"] += 1
                    elif kind is None:
                        self.counts["CPU"] += 1
                    else:
                        self.counts[f"{kind}:{event}"] += 1
                self._done.wait(0.01)

    def stop(self) -> None:
        self._done.set()
        self.join()


def start_workers(url: str, tq: str, procs: int) -> list[subprocess.Popen[str]]:
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", url, tq],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    for w in workers:
        assert w.stdout is not None
        line = w.stdout.readline()
        if line.strip() != "READY":
            raise RuntimeError(f"a worker process did not start: {line!r}")
    return workers


def stop_workers(workers: list[subprocess.Popen[str]]) -> None:
    for w in workers:
        assert w.stdin is not None
        w.stdin.close()  # the worker stops when its stdin ends
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


async def w1_batch(client: Client, tq: str, n: int) -> float:
    ids = [f"scale-{uuid.uuid4().hex[:8]}-{i}" for i in range(n)]
    t0 = time.perf_counter()
    handles = await asyncio.gather(
        *(client.start_workflow(OneActivityWF.run, i, id=ids[i], task_queue=tq) for i in range(n))
    )
    results = await asyncio.gather(*(h.result() for h in handles))
    assert results == list(range(n)), "W1: wrong results"
    return time.perf_counter() - t0


async def measure(url: str, libpq_url: str, procs: int, n: int, reps: int) -> dict[str, Any]:
    tq = bench.new_tq()
    workers = start_workers(url, tq, procs)
    client = await Client.connect(url)
    try:
        await w1_batch(client, tq, 40)  # warm-up
        rates: list[float] = []
        sampler = Sampler(libpq_url)
        cpu0 = [cpu_seconds(w.pid) for w in workers]
        me0 = cpu_seconds(os.getpid())
        server0 = server_cpu_seconds(libpq_url)
        sampler.start()
        wall = 0.0
        for _ in range(reps):
            dt = await w1_batch(client, tq, n)
            wall += dt
            rates.append(n / dt)
        sampler.stop()
        server = server_cpu_seconds(libpq_url) - server0
        cpu = [cpu_seconds(w.pid) - c for w, c in zip(workers, cpu0, strict=True)]
        me = cpu_seconds(os.getpid()) - me0
    finally:
        await client.close()
        stop_workers(workers)
    return {
        "rate": statistics.median(rates),
        "rates": rates,
        "worker_cpu": [c / wall for c in cpu],
        "client_cpu": me / wall,
        "server_cpu": server / wall,
        "waits": sampler.counts,
        "locks": sampler.locks,
        "samples": sampler.samples,
    }


async def worker_main(url: str, tq: str) -> None:
    client = await Client.connect(url)
    try:
        async with bench.new_worker(client, tq):
            print("READY", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    finally:
        await client.close()


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        asyncio.run(worker_main(sys.argv[2], sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--pg-url", default=os.environ.get("DURABLE_BENCH_PG_URL", bench.DEFAULT_PG_URL)
    )
    args = ap.parse_args()
    libpq_url = args.pg_url.replace("postgresql+psycopg://", "postgresql://", 1)
    base = None
    for procs in args.procs:
        with bench.fresh_database("postgres", args.pg_url) as url:
            got = asyncio.run(measure(url, libpq_url, procs, args.n, args.reps))
        base = base or got["rate"]
        rates = ", ".join(f"{r:.1f}" for r in got["rates"])
        print(f"\n== {procs} worker process(es): W1 {got['rate']:.1f} wf/s ({rates}), "
              f"{got['rate'] / base:.2f}x one process")  # fmt: skip
        workers = " ".join(f"{c:.2f}" for c in got["worker_cpu"])
        print(f"   CPU (cores busy): workers {workers}; client {got['client_cpu']:.2f}; "
              f"PostgreSQL {got['server_cpu']:.2f}")  # fmt: skip
        total = sum(got["waits"].values()) or 1
        print(f"   the engine's connections, {got['samples']} samples of pg_stat_activity:")
        for what, count in got["waits"].most_common(8):
            print(f"   {count / total * 100:6.1f} %  {what}")
        if got["locks"]:
            print("   locks waited for (samples):")
            for what, count in got["locks"].most_common(4):
                print(f"   {count:7d}  {what}")


if __name__ == "__main__":
    main()
