"""Benchmarks W1, W2, W4 and W4s of ../shared/peers, run against durable-notebook.

    python bench/run.py [--backend sqlite|postgres|both] [--workloads W1,W2,W4,W4s]
                        [--reps 3] [--pg-url URL] [--profile] [--no-freeze-gc]

Semantics follow the peers (see ../shared/peers/README.md): the client and one Worker share
this process, each workload first runs an untimed warm-up on the same worker, and every
figure is the median of ``--reps`` repetitions. Each (backend, workload) pair runs in a child
process of its own, on a fresh database (a new SQLite file in a temporary directory, or a new
PostgreSQL schema that is dropped afterwards), so ``W1_worker_peak_rss`` is that of a process
that ran W1 alone. Result lines are printed in the peers' format and, for a run of every
workload, written to ``bench/results/latest-<backend>.txt``.

``--profile`` runs W1 in this process, after the warm-up: once unprofiled, counting the store's
transactions by function (count, wall time), then once under cProfile, printing the top 40
functions by cumulative and by own time for the event-loop thread and for the store's
database thread(s) separately (plus the top 40 of the engine's own functions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import sqlalchemy as sa  # noqa: E402
from workloads import (  # noqa: E402
    ALL_ACTIVITIES,
    ALL_WORKFLOWS,
    OneActivityWF,
    SeqActivitiesWF,
    SleepWF,
)

from engine import Client, Worker, WorkflowHandle  # noqa: E402

T = TypeVar("T")

DEFAULT_PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgres")
WORKLOADS = ("W1", "W2", "W3", "W4", "W4s", "W5")
SHORT_SLEEPS = (0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5)
RESULTS_DIR = BENCH_DIR / "results"


def peer_label(backend: str) -> str:
    return f"durable-{backend}"


# ---------------------------------------------------------------- result lines


def fmt(x: float) -> str:
    return f"{x:.4g}"


def stats_fields(xs: Sequence[float]) -> str:
    """``median=.. min=.. max=.. runs=..`` as in the peers' lines."""
    return (
        f"median={fmt(statistics.median(xs))} min={fmt(min(xs))} max={fmt(max(xs))} "
        f"runs={','.join(fmt(x) for x in xs)}"
    )


def result_line(peer: str, workload: str, value: float, unit: str, extra: str = "") -> str:
    line = f"peer={peer} workload={workload} value={fmt(value)} unit={unit}"
    return f"{line} {extra}" if extra else line


class Emitter:
    """Prints result lines as they come and keeps them."""

    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.lines: list[str] = []

    def __call__(self, workload: str, value: float, unit: str, extra: str = "") -> None:
        line = result_line(self.peer, workload, value, unit, extra)
        self.lines.append(line)
        print(line, flush=True)

    def series(self, workload: str, xs: Sequence[float], unit: str, note: str = "") -> None:
        extra = stats_fields(xs) + (f" note={note}" if note else "")
        self(workload, statistics.median(xs), unit, extra)


def progress(text: str) -> None:
    print(f"  {text}", flush=True)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------- fresh databases


def _pg_admin(pg_url: str) -> sa.Engine:
    return sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")


@contextlib.contextmanager
def fresh_database(backend: str, pg_url: str) -> Iterator[str]:
    """A URL of an empty database: a new SQLite file, or a new PostgreSQL schema.

    The file's directory or the schema is removed afterwards, whatever happened.
    """
    if backend == "sqlite":
        tmp = tempfile.mkdtemp(prefix="durable-bench-")
        try:
            yield f"sqlite:///{tmp}/durable.db"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    schema = "bench_" + uuid.uuid4().hex[:12]
    admin = _pg_admin(pg_url)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        sep = "&" if "?" in pg_url else "?"
        yield f"{pg_url}{sep}options=-csearch_path%3D{schema}"
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        finally:
            admin.dispose()


# ---------------------------------------------------------------- hang guard


class BenchHang(Exception):
    """A timed phase did not finish within its time limit."""


async def guarded(
    aw: Awaitable[T], timeout: float, what: str, client: Client, ids: Sequence[str]
) -> T:
    """Await ``aw``; past ``timeout`` print what the unfinished runs are waiting for."""
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        print(f"# HANG: {what} did not finish within {timeout:.0f}s", flush=True)
        await diagnose(client, ids)
        raise BenchHang(what) from None


async def diagnose(client: Client, ids: Sequence[str]) -> None:
    """Print the status of each run, pending work of a few stuck ones, thread stacks."""
    counts: dict[str, int] = {}
    stuck: list[Any] = []
    for wid in ids:
        try:
            d = await asyncio.wait_for(client.get_workflow_handle(wid).describe(), 10)
        except Exception as err:  # the store itself may be wedged
            print(f"#   describe({wid}) failed: {type(err).__name__}: {err}", flush=True)
            break
        counts[d.status.name] = counts.get(d.status.name, 0) + 1
        if d.status.name == "RUNNING" and len(stuck) < 3:
            stuck.append(d)
    print(f"#   statuses: {counts}", flush=True)
    for d in stuck:
        print(
            f"#   {d.id}: history_length={d.history_length} "
            f"pending_workflow_task={d.pending_workflow_task} "
            f"pending_activities={d.pending_activities} pending_timers={d.pending_timers}",
            flush=True,
        )
    for task in asyncio.all_tasks():
        if task.get_name().startswith("durable"):
            buf = io.StringIO()
            task.print_stack(limit=8, file=buf)
            print(f"#   task {task.get_name()}:\n{buf.getvalue()}", flush=True)
    faulthandler.dump_traceback(file=sys.stdout, all_threads=True)


def new_tq() -> str:
    return f"bench-{uuid.uuid4().hex[:8]}"


#: Whether the bench's workers freeze the collector (``Worker(freeze_gc=...)``): on, as in
#: a process that exists to run workers; ``--no-freeze-gc`` measures without it.
FREEZE_GC = True


def new_worker(client: Client, tq: str) -> Worker:
    # Engine defaults for concurrency and polling, like the peers use their SDK defaults.
    return Worker(
        client,
        task_queue=tq,
        workflows=ALL_WORKFLOWS,
        activities=ALL_ACTIVITIES,
        freeze_gc=FREEZE_GC,
    )


# ---------------------------------------------------------------- W1


async def w1_once(client: Client, tq: str, n: int, timeout: float) -> float:
    run = uuid.uuid4().hex[:8]
    ids = [f"w1-{run}-{i}" for i in range(n)]
    t0 = time.perf_counter()

    async def go() -> list[Any]:
        handles = await asyncio.gather(
            *[
                client.start_workflow(OneActivityWF.run, i, id=ids[i], task_queue=tq)
                for i in range(n)
            ]
        )
        return await asyncio.gather(*[h.result() for h in handles])

    results = await guarded(go(), timeout, f"W1 ({n} workflows)", client, ids)
    dt = time.perf_counter() - t0
    assert results == list(range(n)), "W1: wrong results"
    return dt


async def w1(client: Client, emit: Emitter, reps: int, timeout: float, n: int = 500) -> None:
    tq = new_tq()
    rates: list[float] = []
    async with new_worker(client, tq):
        await w1_once(client, tq, 20, timeout)  # warm-up, not timed
        for _ in range(reps):
            dt = await w1_once(client, tq, n, timeout)
            rates.append(n / dt)
            progress(f"W1 run: {n} wf in {dt:.3f}s = {n / dt:.1f} wf/s")
    emit.series("W1", rates, "wf/s")
    emit("W1_worker_peak_rss", peak_rss_mib(), "MiB", "note=bench_process=worker+client,ru_maxrss")


# ---------------------------------------------------------------- W2


def held_counts(client: Client) -> str:
    """How the store's held transactions ended so far (PostgreSQL; see
    ``engine._store.held``), for the progress lines."""
    counts = getattr(client.store, "held_counts", None)
    return f" (held: {dict(counts)})" if counts else ""


async def w2_once(
    client: Client, tq: str, nwf: int, steps: int, timeout: float
) -> tuple[float, list[float]]:
    run = uuid.uuid4().hex[:8]
    ids = [f"w2-{run}-{i}" for i in range(nwf)]

    async def one(i: int) -> float:
        t = time.perf_counter()
        r = await client.execute_workflow(SeqActivitiesWF.run, steps, id=ids[i], task_queue=tq)
        assert r == steps * (steps - 1) // 2, f"W2: wrong result {r!r}"
        return time.perf_counter() - t

    t0 = time.perf_counter()
    durs = await guarded(
        asyncio.gather(*[one(i) for i in range(nwf)]), timeout, f"W2 ({nwf}x{steps})", client, ids
    )
    return time.perf_counter() - t0, list(durs)


async def w2(
    client: Client, emit: Emitter, reps: int, timeout: float, nwf: int = 20, steps: int = 50
) -> None:
    tq = new_tq()
    rates: list[float] = []
    lats: list[float] = []
    lat1: list[float] = []
    async with new_worker(client, tq):
        await w2_once(client, tq, 2, 5, timeout)  # warm-up
        for _ in range(reps):
            dt, durs = await w2_once(client, tq, nwf, steps, timeout)
            rates.append(nwf * steps / dt)
            lats.append(statistics.median(durs) / steps * 1000)
            progress(
                f"W2 run: {nwf}x{steps} acts in {dt:.3f}s = {nwf * steps / dt:.1f} act/s, "
                f"per-step {lats[-1]:.2f} ms{held_counts(client)}"
            )
        for _ in range(reps):  # the same workflow alone: unloaded per-step latency
            _, durs = await w2_once(client, tq, 1, steps, timeout)
            lat1.append(durs[0] / steps * 1000)
            progress(f"W2 alone: per-step {lat1[-1]:.2f} ms{held_counts(client)}")
    emit.series("W2", rates, "act/s")
    emit.series("W2_step_latency", lats, "ms", "median_wf_duration/50_with_20_concurrent")
    emit.series("W2_step_latency_1wf", lat1, "ms", "one_workflow_alone")


# ---------------------------------------------------------------- W4 / W4s


async def timer_lateness(handle: WorkflowHandle, requested: float) -> float:
    """TimerFired - TimerStarted - requested, in seconds, from the run's history."""
    history = await handle.fetch_history()
    times = {e.event_type: e.event_time for e in history.events}
    return times["TimerFired"] - times["TimerStarted"] - requested


async def w4_once(
    client: Client, tq: str, n: int, secs: float, timeout: float
) -> tuple[list[float], list[float], list[float]]:
    run = uuid.uuid4().hex[:8]
    ids = [f"w4-{run}-{i}" for i in range(n)]

    async def one(i: int) -> tuple[float, float]:
        t = time.time()
        t0, t1 = await client.execute_workflow(SleepWF.run, secs, id=ids[i], task_queue=tq)
        e2e = time.time() - t
        return (t1 - t0) - secs, e2e - secs

    res = await guarded(
        asyncio.gather(*[one(i) for i in range(n)]), timeout, f"W4 ({n} sleeps)", client, ids
    )
    server = [await timer_lateness(client.get_workflow_handle(wid), secs) for wid in ids]
    return [r[0] for r in res], [r[1] for r in res], server


async def w4(
    client: Client, emit: Emitter, reps: int, timeout: float, n: int = 20, secs: float = 1.0
) -> None:
    tq = new_tq()
    meds: list[float] = []
    maxs: list[float] = []
    e2e_meds: list[float] = []
    smeds: list[float] = []
    smaxs: list[float] = []
    alone: list[float] = []
    async with new_worker(client, tq):
        await w4_once(client, tq, 2, 0.05, timeout)  # warm-up
        for _ in range(reps):
            late, e2e, slate = await w4_once(client, tq, n, secs, timeout)
            meds.append(statistics.median(late) * 1000)
            maxs.append(max(late) * 1000)
            e2e_meds.append(statistics.median(e2e) * 1000)
            smeds.append(statistics.median(slate) * 1000)
            smaxs.append(max(slate) * 1000)
            progress(
                f"W4 run: lateness median {meds[-1]:.1f} ms max {maxs[-1]:.1f} ms "
                f"(client e2e-1s median {e2e_meds[-1]:.1f} ms; server timer "
                f"median {smeds[-1]:.1f} max {smaxs[-1]:.1f} ms)"
            )
        for _ in range(reps):
            late, _, _ = await w4_once(client, tq, 1, secs, timeout)
            alone.append(late[0] * 1000)
    emit.series(
        "W4_lateness_median", meds, "ms", "wall_clock_in_workflow_after-before_sleep_minus_1s"
    )
    emit.series("W4_lateness_max", maxs, "ms")
    emit.series("W4_lateness_1wf", alone, "ms", "one_timer_alone_in_workflow")
    emit.series("W4_e2e_overhead_median", e2e_meds, "ms", "client_start_to_result_minus_1s")
    emit.series(
        "W4_server_timer_lateness_median", smeds, "ms", "history_TimerFired-TimerStarted_minus_1s"
    )
    emit.series("W4_server_timer_lateness_max", smaxs, "ms")


async def w4s(client: Client, emit: Emitter, reps: int, timeout: float) -> None:
    """Timer precision by duration: one workflow at a time, server-side (history) view."""
    tq = new_tq()
    server: dict[float, list[float]] = {d: [] for d in SHORT_SLEEPS}
    inwf: dict[float, list[float]] = {d: [] for d in SHORT_SLEEPS}
    async with new_worker(client, tq):
        warm = f"w4s-warm-{uuid.uuid4().hex[:6]}"
        await guarded(
            client.execute_workflow(SleepWF.run, 0.01, id=warm, task_queue=tq),
            timeout,
            "W4s warm-up",
            client,
            [warm],
        )
        for _ in range(reps):
            for d in SHORT_SLEEPS:
                wid = f"w4s-{uuid.uuid4().hex[:8]}"
                t0, t1 = await guarded(
                    client.execute_workflow(SleepWF.run, d, id=wid, task_queue=tq),
                    timeout,
                    f"W4s sleep {d}s",
                    client,
                    [wid],
                )
                server[d].append(await timer_lateness(client.get_workflow_handle(wid), d) * 1000)
                inwf[d].append(((t1 - t0) - d) * 1000)
            progress(
                "W4s run: "
                + ", ".join(f"{d}s +{server[d][-1]:.1f}ms" for d in SHORT_SLEEPS)
                + " (server side)"
            )
    for d in SHORT_SLEEPS:
        extra = (
            f"{stats_fields(server[d])} in_workflow_median={fmt(statistics.median(inwf[d]))} "
            "note=one_wf_alone,TimerFired-TimerStarted-requested"
        )
        emit(f"W4s_sleep_{d}s_lateness", statistics.median(server[d]), "ms", extra)


async def w3(client: Client, emit: Emitter, reps: int, timeout: float) -> None:
    """Replay the peers' 6,005-event history (1,000 activities), as Temporal's W3 does:
    parse it with WorkflowHistory.from_json, replay it (warm: a fresh Replayer in a process
    that has replayed once), and turn a 50,000-event history into a DataFrame."""
    from workloads import SeqActivitiesWF

    from engine import WorkflowHistory
    from engine.worker import Replayer

    path = BENCH_DIR.parent / "tests" / "data" / "temporal" / "temporal_history_seq1000.json"
    text = path.read_text()
    parse: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        history = WorkflowHistory.from_json("seq1000", text)
        parse.append(time.perf_counter() - t0)
    events = len(history.events)
    t0 = time.perf_counter()
    await Replayer(workflows=[SeqActivitiesWF]).replay_workflow(history)
    cold = time.perf_counter() - t0
    rates: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        await Replayer(workflows=[SeqActivitiesWF]).replay_workflow(history)
        rates.append(events / (time.perf_counter() - t0))
    emit.series("W3", rates, "ev/s", f"events={events}")
    emit("W3_cold_first_replay", events / cold, "ev/s", f"seconds={cold:.4g} events={events}")
    emit.series("W3_json_parse", parse, "s", f"bytes={len(text)} events={events}")
    # A 50,000-event history: the seq1000 events repeated with fresh ids.
    from engine import HistoryEvent

    big: list[HistoryEvent] = []
    while len(big) < 50_000:
        for e in history.events:
            big.append(HistoryEvent(len(big) + 1, e.event_time, e.event_type, e.attributes))
    frames: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        WorkflowHistory("big", big).to_dataframe()
        frames.append(time.perf_counter() - t0)
    emit.series("W3_to_dataframe_50k", frames, "s", f"events={len(big)}")


async def w5(client: Client, emit: Emitter, reps: int, timeout: float) -> None:
    """Widgets on a 50,000-event run recorded in the store: the kernel time to open it in
    HistoryView (read the history, build the view model, send the first window), to scroll
    to another window, and to open it in Timeline."""
    from workloads import BatchActivitiesWF, noop

    from widgets import HistoryView, Timeline

    tq = new_tq()
    n = 16_650  # 3 events per activity plus the workflow tasks: just over 50,000 events
    async with Worker(
        client,
        task_queue=tq,
        workflows=[BatchActivitiesWF],
        activities=[noop],
        max_concurrent_activities=500,
        freeze_gc=FREEZE_GC,
    ):
        t0 = time.perf_counter()
        handle = await client.start_workflow(
            BatchActivitiesWF.run, args=[n, 500], id="w5-" + uuid.uuid4().hex, task_queue=tq
        )
        await guarded(handle.result(), timeout, "W5 recording", client, [handle.id])
        progress(f"W5: recorded {n} activities in {time.perf_counter() - t0:.1f}s")
    events = len((await handle.fetch_history()).events)
    opens: list[float] = []
    scrolls: list[float] = []
    timelines: list[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        view = await asyncio.to_thread(HistoryView, handle, mode="full")
        opens.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        view.window_start = events - 200
        scrolls.append((time.perf_counter() - t0) * 1000)
        assert view.rows and view.total == events
        view.close()
        t0 = time.perf_counter()
        line = await asyncio.to_thread(Timeline, handle, max_lanes=200)
        timelines.append(time.perf_counter() - t0)
        line.close()
    emit.series("W5_history_view_open_50k", opens, "s", f"events={events}")
    emit.series("W5_history_view_scroll", scrolls, "ms", f"events={events}")
    emit.series("W5_timeline_open_50k", timelines, "s", f"events={events}")


RUNNERS: dict[str, Callable[[Client, Emitter, int, float], Awaitable[None]]] = {
    "W1": w1,
    "W2": w2,
    "W3": w3,
    "W4": w4,
    "W4s": w4s,
    "W5": w5,
}


# ---------------------------------------------------------------- one workload, in-process


async def run_workload(
    url: str, backend: str, workload: str, reps: int, timeout: float
) -> list[str]:
    """Connect to ``url``, run one workload, close the store. Returns the result lines."""
    emit = Emitter(peer_label(backend))
    client = await Client.connect(url)
    try:
        await RUNNERS[workload](client, emit, reps, timeout)
    finally:
        await client.close()
    return emit.lines


def child_main(args: argparse.Namespace) -> int:
    """Run one workload on the database the parent made (``--db-url``)."""
    # Last resort if something wedges outside the guarded phases (e.g. worker shutdown):
    # dump every thread's stack and exit, so a run always stops by itself.
    faulthandler.dump_traceback_later(args.child_timeout, exit=True)
    try:
        asyncio.run(
            run_workload(args.db_url, args.backend, args.workloads, args.reps, args.rep_timeout)
        )
    except BenchHang:
        return 3
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        return 2
    finally:
        faulthandler.cancel_dump_traceback_later()
    return 0


# ---------------------------------------------------------------- orchestration


def run_child(
    backend: str, workload: str, args: argparse.Namespace, url: str
) -> tuple[int, list[str]]:
    """Run one workload in a child process; stream its output, return (rc, result lines)."""
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--backend",
        backend,
        "--workloads",
        workload,
        "--reps",
        str(args.reps),
        "--db-url",
        url,
        "--rep-timeout",
        str(args.rep_timeout),
        "--child-timeout",
        str(args.child_timeout),
        *([] if args.freeze_gc else ["--no-freeze-gc"]),
    ]
    lines: list[str] = []
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1, cwd=REPO)
    # Backstop beyond the child's own watchdog; kills exactly this child.
    killer = threading.Timer(args.child_timeout + 60, proc.kill)
    killer.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            print(line, flush=True)
            if line.startswith("peer="):
                lines.append(line)
        rc = proc.wait()
    finally:
        killer.cancel()
    return rc, lines


def orchestrate(args: argparse.Namespace, backends: list[str], workloads: list[str]) -> int:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    all_lines: list[str] = []
    t_all = time.perf_counter()
    for backend in backends:
        lines: list[str] = []
        for workload in workloads:
            print(f"== {peer_label(backend)} {workload} (reps={args.reps})", flush=True)
            t0 = time.perf_counter()
            try:
                with fresh_database(backend, args.pg_url) as url:
                    rc, got = run_child(backend, workload, args, url)
            except Exception as err:  # e.g. PostgreSQL unreachable
                rc, got = 1, []
                print(f"# error: {type(err).__name__}: {err}", flush=True)
            lines += got
            print(f"   ({workload} took {time.perf_counter() - t0:.1f}s)", flush=True)
            if rc != 0:
                step = f"{peer_label(backend)} {workload}"
                print(f"# FAILED rc={rc}: {step}", flush=True)
                failed.append(step)
        # The record of the last full run: a run of some workloads (beside_dbos.py runs
        # them one at a time) would replace it with a part of it.
        if set(workloads) >= set(WORKLOADS):
            out = RESULTS_DIR / f"latest-{backend}.txt"
            out.write_text("".join(f"{line}\n" for line in lines))
            print(f"== wrote {out.relative_to(REPO)}", flush=True)
        all_lines += lines
    print(f"\n== all result lines ({time.perf_counter() - t_all:.0f}s in total)")
    for line in all_lines:
        print(line)
    if failed:
        print(f"# {len(failed)} step(s) failed: {', '.join(failed)}")
    return 1 if failed else 0


# ---------------------------------------------------------------- CLI


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--backend", choices=[*BACKENDS, "both"], default="both")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--pg-url", default=os.environ.get("DURABLE_BENCH_PG_URL", DEFAULT_PG_URL))
    ap.add_argument("--profile", action="store_true", help="profile one W1 run (cProfile)")
    ap.add_argument(
        "--rep-timeout",
        type=float,
        default=300.0,
        help="seconds one timed phase may take before it is reported as a hang",
    )
    ap.add_argument(
        "--child-timeout",
        type=float,
        default=1500.0,
        help="seconds one workload process may take in all",
    )
    ap.add_argument(
        "--no-freeze-gc",
        dest="freeze_gc",
        action="store_false",
        help="workers leave the garbage collector as it is (Worker(freeze_gc=False))",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--db-url", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main() -> int:
    global FREEZE_GC
    args = parse_args()
    FREEZE_GC = args.freeze_gc
    if args.child:
        return child_main(args)
    backends = list(BACKENDS) if args.backend == "both" else [args.backend]
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        print(f"unknown workload(s) {unknown}; choose from {', '.join(WORKLOADS)}")
        return 2
    if args.reps < 1:
        print("--reps must be at least 1")
        return 2
    if args.profile:
        import profiling  # only for --profile

        return profiling.profile_main(args, backends, bench=sys.modules[__name__])
    return orchestrate(args, backends, workloads)


if __name__ == "__main__":
    sys.exit(main())
