"""Soak: mixed load for a long time, resident memory every minute (issue 14, item 9).

    python bench/soak.py [--minutes 30] [--backend sqlite|postgres] [--pg-url URL]
                         [--rate 20] [--sample 60]

One process holds a client and a worker, as the kernel does. Every second it starts
``--rate`` workflows; each waits for a signal or a 1 s durable timer, runs an activity and
answers queries meanwhile. Alongside, a signaller signals running workflows, a querier
queries them, and a live reader lists runs and reads histories (as a widget or the web UI
does). Completed runs are left in the database, as in real use.

Every ``--sample`` seconds it prints the process's resident memory (``/proc/self/status``
VmRSS, not the peak), the runs completed so far and their rate; at the end, whether RSS
stayed within 10 % of its value at the end of minute five (the issue's criterion: the
first minutes fill caches and pools, growth after that is a leak).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine import Client, Worker, activity, workflow  # noqa: E402


@activity.defn
async def soak_step(n: int) -> int:
    await asyncio.sleep(0.01)
    return n + 1


@workflow.defn
class SoakWF:
    def __init__(self) -> None:
        self.poked = 0

    @workflow.run
    async def run(self, n: int) -> int:
        try:
            await workflow.wait_condition(lambda: self.poked > 0, timeout=timedelta(seconds=1))
        except TimeoutError:
            pass
        return await workflow.execute_activity(
            soak_step, n, start_to_close_timeout=timedelta(seconds=30)
        )

    @workflow.signal
    def poke(self) -> None:
        self.poked += 1

    @workflow.query
    def pokes(self) -> int:
        return self.poked


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def soak(url: str, minutes: float, rate: int, sample: float) -> int:
    stop_at = time.monotonic() + minutes * 60
    running: list = []
    done = 0
    errors: list[str] = []
    async with await Client.connect(url) as client:
        queue = "soak-" + uuid.uuid4().hex[:6]
        async with Worker(client, task_queue=queue, workflows=[SoakWF], activities=[soak_step]):

            async def starter() -> None:
                nonlocal done
                n = 0
                while time.monotonic() < stop_at:
                    began = time.monotonic()
                    for _ in range(rate):
                        n += 1
                        handle = await client.start_workflow(
                            SoakWF.run, n, id=f"soak-{n}", task_queue=queue
                        )
                        running.append(handle)
                    await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - began)))

            async def finisher() -> None:
                nonlocal done
                while time.monotonic() < stop_at or running:
                    if not running:
                        await asyncio.sleep(0.05)
                        continue
                    handle = running.pop(0)
                    try:
                        await handle.result()
                        done += 1
                    except Exception as err:  # counted and shown: a soak must not stop
                        errors.append(repr(err))

            async def signaller() -> None:
                rng = random.Random(1)
                while time.monotonic() < stop_at:
                    await asyncio.sleep(0.05)
                    if running:
                        handle = rng.choice(running[-50:])
                        try:
                            await handle.signal(SoakWF.poke)
                        except Exception:  # closed meanwhile: fine
                            pass

            async def querier() -> None:
                rng = random.Random(2)
                while time.monotonic() < stop_at:
                    await asyncio.sleep(0.2)
                    if running:
                        handle = rng.choice(running[-50:])
                        try:
                            await handle.query(SoakWF.pokes)
                        except Exception:  # closed meanwhile: fine
                            pass

            async def reader() -> None:
                while time.monotonic() < stop_at:
                    await asyncio.sleep(0.5)
                    listed = [e async for e in client.list_workflows(limit=50)]
                    if listed:
                        await client.get_workflow_handle(listed[0].id).fetch_history()

            async def sampler() -> list[float]:
                samples: list[float] = []
                began = time.monotonic()
                last_done = 0
                while time.monotonic() < stop_at:
                    await asyncio.sleep(sample)
                    gc.collect()
                    samples.append(rss_mib())
                    elapsed = time.monotonic() - began
                    print(
                        f"minute {elapsed / 60:5.1f}: RSS {samples[-1]:7.1f} MiB, "
                        f"{done} runs done ({(done - last_done) / sample:.1f}/s), "
                        f"{len(running)} open, {len(errors)} errors",
                        flush=True,
                    )
                    last_done = done
                return samples

            tasks = [
                asyncio.ensure_future(c()) for c in (starter, finisher, signaller, querier, reader)
            ]
            samples = await sampler()
            await asyncio.gather(*tasks)
    for err in errors[:5]:
        print("error:", err)
    per_minute = 60 / sample
    base_index = int(5 * per_minute) - 1
    if len(samples) > base_index + 1:
        base = samples[base_index]
        later = samples[base_index + 1 :]
        spread = max(abs(s - base) / base for s in later)
        verdict = "within" if spread <= 0.10 else "OUTSIDE"
        print(
            f"RSS after minute 5: {base:.1f} MiB; later {min(later):.1f}-{max(later):.1f} MiB: "
            f"{verdict} 10 % (max {spread * 100:.1f} %); {done} runs, {len(errors)} errors"
        )
    else:
        print(f"(too short for the 5-minute criterion) {done} runs, {len(errors)} errors")
    return 1 if errors else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--rate", type=int, default=20, help="workflows started per second")
    parser.add_argument("--sample", type=float, default=60.0, help="seconds between samples")
    args = parser.parse_args()
    if args.backend == "sqlite":
        url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='durable-soak-')) / 'durable.db'}"
    else:
        url = args.pg_url
    print(f"soak on {url} for {args.minutes:g} min, {args.rate} starts/s", flush=True)
    return asyncio.run(soak(url, args.minutes, args.rate, args.sample))


if __name__ == "__main__":
    raise SystemExit(main())
