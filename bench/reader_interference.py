"""Reader interference on SQLite: W1 in a writer process, alone and with a reader process.

    python bench/reader_interference.py [--rounds 2] [--reps 3] [--n 500] [--rate 10]

Each round runs W1 (``OneActivityWF``, ``n`` workflows started at once, after an untimed
warm-up of 20) twice, in a fresh writer process on a fresh SQLite file: once alone, once
while another process on the same file loops over ``client.list_workflows`` (the newest 50
runs) and ``handle.fetch_history`` (of the newest 5), as live widgets or the web UI do:
``--rate`` passes a second (10: say five live views refreshing every half second; 0: a
tight loop, which measures the reader's CPU more than its locks on a 2-core machine). A
pass that falls behind is not made up for, so the reader offers the same work before and
after a change and reports how much it got done. The rounds interleave (alone, with reader,
alone, with reader, ...), and the figures are medians over every rep of every round. The
last line gives both throughputs and their ratio (the target: with the reader, within 10 %
of alone), and how many passes the reader made per second.

The writer and the reader are child processes of this one (``--role``), so each has the GIL
and the store of its own, as two notebooks, or a notebook and the web UI, would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
for entry in (str(REPO), str(BENCH_DIR)):
    if entry not in sys.path:
        sys.path.insert(0, entry)


# ---------------------------------------------------------------- the writer process


async def writer_main(url: str, reps: int, n: int, timeout: float) -> None:
    from run import new_tq, new_worker, w1_once

    from engine import Client

    client = await Client.connect(url)
    try:
        tq = new_tq()
        async with new_worker(client, tq):
            await w1_once(client, tq, 20, timeout)  # warm-up, not timed
            print("READY", flush=True)
            await asyncio.to_thread(sys.stdin.readline)  # the parent says go
            for _ in range(reps):
                dt = await w1_once(client, tq, n, timeout)
                print(f"RATE {n / dt:.1f}", flush=True)
    finally:
        await client.close()


# ---------------------------------------------------------------- the reader process


async def reader_main(url: str, rate: float) -> None:
    from engine import Client

    client = await Client.connect(url)
    stop = threading.Event()

    def watch_stdin() -> None:
        sys.stdin.read()  # the parent closes our stdin to stop us
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    passes = histories = events = 0
    busy = 0.0  # seconds spent in passes
    announced = False
    t0 = next_pass = time.perf_counter()
    try:
        while not stop.is_set():
            started = time.perf_counter()
            runs = [run async for run in client.list_workflows(limit=50, page_size=50)]
            for run in runs[:5]:
                history = await client.get_workflow_handle(
                    run.id, run_id=run.run_id
                ).fetch_history()
                histories += 1
                events += len(history.events)
            passes += 1
            busy += time.perf_counter() - started
            if not announced:
                announced = True
                t0 = next_pass = time.perf_counter()
                print("READING", flush=True)
            if rate > 0:
                next_pass = max(next_pass + 1 / rate, time.perf_counter())
                await asyncio.sleep(next_pass - time.perf_counter())
    finally:
        dt = time.perf_counter() - t0
        print(
            f"PASSES {passes} {passes / dt:.1f}/s mean_pass={1000 * busy / max(passes, 1):.1f}ms "
            f"histories={histories} events={events}",
            flush=True,
        )
        await client.close()


# ---------------------------------------------------------------- the parent


def _spawn(args: list[str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    return subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1, cwd=REPO
    )


def _expect(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(word):
            return
        print(f"    | {line.rstrip()}", flush=True)
    raise RuntimeError(f"child exited (rc={proc.wait()}) before printing {word}")


@contextlib.contextmanager
def _fresh_file() -> Iterator[str]:
    tmp = tempfile.mkdtemp(prefix="durable-bench-ri-")
    try:
        yield f"sqlite:///{tmp}/durable.db"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def one_phase(args: argparse.Namespace, with_reader: bool) -> tuple[list[float], str]:
    """One writer process running ``reps`` W1 batches, with or without a reader."""
    with _fresh_file() as url:
        writer = _spawn(
            ["--role", "writer", "--db-url", url, "--reps", str(args.reps), "--n", str(args.n)]
        )
        reader: subprocess.Popen[str] | None = None
        note = ""
        # Backstops: each kills exactly the child it was made for.
        killers = [threading.Timer(args.timeout, writer.kill)]
        killers[0].start()
        try:
            _expect(writer, "READY")
            if with_reader:
                reader = _spawn(["--role", "reader", "--db-url", url, "--rate", str(args.rate)])
                killers.append(threading.Timer(args.timeout, reader.kill))
                killers[-1].start()
                _expect(reader, "READING")
            assert writer.stdin is not None and writer.stdout is not None
            writer.stdin.write("go\n")
            writer.stdin.flush()
            rates: list[float] = []
            for line in writer.stdout:
                if line.startswith("RATE "):
                    rates.append(float(line.split()[1]))
                    if len(rates) == args.reps:
                        break
                else:
                    print(f"    | {line.rstrip()}", flush=True)
            if reader is not None:
                assert reader.stdin is not None and reader.stdout is not None
                reader.stdin.close()
                for line in reader.stdout:
                    if line.startswith("PASSES "):
                        note = line.split(" ", 1)[1].strip()
                reader.wait()
            writer.stdin.close()
            rc = writer.wait()
            if rc != 0 or len(rates) != args.reps:
                raise RuntimeError(f"writer failed (rc={rc}, rates={rates})")
            return rates, note
        finally:
            for killer in killers:
                killer.cancel()
            for proc in (writer, reader):
                if proc is not None and proc.poll() is None:
                    proc.kill()
                    proc.wait()


def parent_main(args: argparse.Namespace) -> int:
    alone: list[float] = []
    shared: list[float] = []
    for r in range(1, args.rounds + 1):
        rates, _ = one_phase(args, with_reader=False)
        alone += rates
        print(
            f"  round {r} alone:       W1 {', '.join(f'{x:.0f}' for x in rates)} wf/s", flush=True
        )
        rates, note = one_phase(args, with_reader=True)
        shared += rates
        print(
            f"  round {r} with reader: W1 {', '.join(f'{x:.0f}' for x in rates)} wf/s "
            f"(reader: {note})",
            flush=True,
        )
    a, s = statistics.median(alone), statistics.median(shared)
    print(
        f"peer=durable-sqlite workload=W1R alone={a:.4g} with_reader={s:.4g} unit=wf/s "
        f"ratio={s / a:.3f} change={100 * (s / a - 1):+.1f}% reader_rate={args.rate:g}/s "
        f"runs_alone={','.join(f'{x:.0f}' for x in alone)} "
        f"runs_with_reader={','.join(f'{x:.0f}' for x in shared)}",
        flush=True,
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="W1 batches per writer process")
    ap.add_argument("--n", type=int, default=500, help="workflows per W1 batch")
    ap.add_argument(
        "--rate", type=float, default=10.0, help="reader passes a second (0: a tight loop)"
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds a child may take")
    ap.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    ap.add_argument("--db-url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.role == "writer":
        asyncio.run(writer_main(args.db_url, args.reps, args.n, 300.0))
        return 0
    if args.role == "reader":
        asyncio.run(reader_main(args.db_url, args.rate))
        return 0
    return parent_main(args)


if __name__ == "__main__":
    sys.exit(main())
