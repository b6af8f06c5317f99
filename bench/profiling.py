"""``python bench/run.py --profile``: where W1 spends its time (see bench/README.md).

W1 runs twice in this process after the warm-up: once unprofiled with a census of the
store's transactions, once under cProfile with a profiler per thread (event loop, store
threads, workflow-code thread).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine import Client

T = TypeVar("T")
REPO = Path(__file__).resolve().parent.parent


def _short(path: str) -> str:
    """Shorten a code path for the profile listing: repo-relative, or from site-packages."""
    if path.startswith(str(REPO) + os.sep):
        return path[len(str(REPO)) + 1 :]
    for marker in ("site-packages" + os.sep, "lib" + os.sep + "python3."):
        i = path.find(marker)
        if i >= 0:
            rest = path[i + len(marker) :]
            return rest if marker.startswith("site") else "stdlib/" + rest.split(os.sep, 1)[-1]
    return path


def _shorten_stats(st: pstats.Stats) -> pstats.Stats:
    def key(k: tuple[str, int, str]) -> tuple[str, int, str]:
        return (_short(k[0]), k[1], k[2])

    raw: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    new: dict[Any, Any] = {}
    for func, (cc, nc, tt, ct, callers) in raw.items():
        new[key(func)] = (cc, nc, tt, ct, {key(c): v for c, v in callers.items()})
    st.stats = new  # type: ignore[attr-defined]
    return st


def _print_stats(title: str, st: pstats.Stats) -> None:
    for order, label in (("cumulative", "cumulative time"), ("tottime", "own (total) time")):
        print(f"\n---- {title}: top 40 by {label}")
        buf = io.StringIO()
        st.stream = buf  # type: ignore[attr-defined]
        st.sort_stats(order).print_stats(40)
        text = buf.getvalue()
        # drop pstats' header lines before the table
        start = text.find("   ncalls")
        print(text[start:] if start >= 0 else text)
    # The same, restricted to the engine's own code (where a change would go).
    print(f"\n---- {title}: top 40 engine/ functions by cumulative time")
    buf = io.StringIO()
    st.stream = buf  # type: ignore[attr-defined]
    st.sort_stats("cumulative").print_stats(r"^engine/", 40)
    text = buf.getvalue()
    start = text.find("   ncalls")
    print(text[start:] if start >= 0 else text)


async def profile_w1(bench: Any, url: str, backend: str, n: int = 500) -> None:
    """W1 twice after the warm-up: once unprofiled with a census of the store's
    transactions (count and wall time per transaction function), once under cProfile."""
    from engine._replay.driver import HistoryDriver
    from engine._store.gateway import Store
    from engine._store.pg_writer import PgWriters
    from engine._store.sqlite_writer import NOT_INLINE, SqliteWriter

    client = await Client.connect(url)
    thread_profiles: dict[tuple[str, int], cProfile.Profile] = {}
    census: dict[str, list[float]] = {}
    batches = [0, 0]  # group commits (SQLite's writer, PostgreSQL's writers): batches, jobs
    lock = threading.Lock()
    mode = "off"

    def count(name: str, secs: float) -> None:
        with lock:
            entry = census.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += secs

    def profiled(group: str, call: Callable[[], T]) -> T:
        # cProfile sees one thread only: each store or workflow-code thread gets a profiler
        # of its own, enabled around each transaction (or batch of them) or activation.
        with lock:
            prof = thread_profiles.setdefault((group, threading.get_ident()), cProfile.Profile())
        prof.enable()
        try:
            return call()
        finally:
            prof.disable()

    orig_run = Store._run
    orig_read = Store._read
    orig_batch = SqliteWriter._run_batch

    def observed(fns: list[Any], call: Callable[[], T]) -> T:
        # Census: a call's wall time shared among the transaction functions it ran.
        if mode == "profile":
            return profiled("store", call)
        t = time.perf_counter()
        try:
            return call()
        finally:
            share = (time.perf_counter() - t) / len(fns)
            for fn in fns:
                count(getattr(fn, "__qualname__", repr(fn)), share)

    def run(self: Store, fn: Any, args: Any) -> Any:
        # Transactions run on the calling thread (run_sync, tools); PostgreSQL's changes
        # go through its writers' batches instead (pg_batch below).
        if self._writer is not None or mode == "off":
            return orig_run(self, fn, args)
        return observed([fn], lambda: orig_run(self, fn, args))

    def read(self: Store, fn: Any, args: Any, since: float | None = None) -> Any:
        # Reads (both backends): on SQLite's reader threads, on PostgreSQL's pool.
        if mode == "off":
            return orig_read(self, fn, args, since)
        return observed([fn], lambda: orig_read(self, fn, args, since))

    def run_batch(self: Any, conn: Any, batch: list[Any]) -> None:
        # SQLite: several transactions' changes per commit on the writer thread.
        if mode == "off":
            return orig_batch(self, conn, batch)
        if mode == "census":
            batches[0] += 1
            batches[1] += len(batch)
        return observed([job[0] for job in batch], lambda: orig_batch(self, conn, batch))

    orig_pg_batch = PgWriters._run_batch

    def pg_batch(self: Any, batch: list[Any]) -> None:
        # PostgreSQL: the changes waiting at one moment, in one transaction per writer.
        if mode == "off":
            return orig_pg_batch(self, batch)
        if mode == "census":
            batches[0] += 1
            batches[1] += len(batch)
        return observed([job[0] for job in batch], lambda: orig_pg_batch(self, batch))

    orig_inline = SqliteWriter.run_inline

    def run_inline(self: Any, fn: Any, args: Any) -> Any:
        # SQLite: a lone change on the event-loop thread (under profile, the loop's own
        # profile has it); one commit each, counted as a batch of one.
        if mode != "census":
            return orig_inline(self, fn, args)
        t = time.perf_counter()
        result = orig_inline(self, fn, args)
        if result is not NOT_INLINE:
            batches[0] += 1
            batches[1] += 1
            count(getattr(fn, "__qualname__", repr(fn)), time.perf_counter() - t)
        return result

    orig_apply = HistoryDriver.apply

    def apply(self: Any, *a: Any, **kw: Any) -> Any:
        if mode != "profile":
            return orig_apply(self, *a, **kw)
        return profiled("workflow", lambda: orig_apply(self, *a, **kw))

    Store._run = run  # type: ignore[method-assign]
    Store._read = read  # type: ignore[method-assign]
    HistoryDriver.apply = apply  # type: ignore[method-assign]
    SqliteWriter._run_batch = run_batch  # type: ignore[method-assign]
    SqliteWriter.run_inline = run_inline  # type: ignore[method-assign]
    PgWriters._run_batch = pg_batch  # type: ignore[method-assign]
    tq = bench.new_tq()
    main_prof = cProfile.Profile()
    try:
        async with bench.new_worker(client, tq):
            await bench.w1_once(client, tq, 20, 300)  # warm-up, not measured
            mode = "census"
            census_wall = await bench.w1_once(client, tq, n, 600)
            mode = "profile"
            cpu0, wall0 = time.process_time(), time.perf_counter()
            main_prof.enable()
            try:
                await bench.w1_once(client, tq, n, 600)
            finally:
                main_prof.disable()
                mode = "off"
            wall = time.perf_counter() - wall0
            cpu = time.process_time() - cpu0
    finally:
        Store._run = orig_run  # type: ignore[method-assign]
        Store._read = orig_read  # type: ignore[method-assign]
        HistoryDriver.apply = orig_apply  # type: ignore[method-assign]
        SqliteWriter._run_batch = orig_batch  # type: ignore[method-assign]
        SqliteWriter.run_inline = orig_inline  # type: ignore[method-assign]
        PgWriters._run_batch = orig_pg_batch  # type: ignore[method-assign]
        await client.close()
    total_n = sum(int(c) for c, _ in census.values())
    total_t = sum(t for _, t in census.values())
    print(
        f"\n== store transactions during one unprofiled W1 run on {backend}: {n} workflows in "
        f"{census_wall:.2f}s = {n / census_wall:.1f} wf/s; {total_n} transactions "
        f"({total_n / n:.1f} per workflow), {total_t:.2f}s of transaction wall time"
    )
    if batches[0]:
        print(
            f"   group commits (batches of changes): {batches[0]} ({batches[0] / n:.2f} per workflow), "
            f"{batches[1] / batches[0]:.1f} transactions per commit"
        )
    print(f"{'count':>8} {'per wf':>7} {'total s':>8} {'mean ms':>8} {'share':>6}  function")
    for name, (calls, secs) in sorted(census.items(), key=lambda kv: -kv[1][1]):
        print(
            f"{int(calls):8d} {calls / n:7.2f} {secs:8.3f} {secs / calls * 1000:8.3f} "
            f"{secs / total_t * 100 if total_t else 0:5.1f}%  {name}"
        )
    print(
        f"\n== profile of W1 on {backend}: {n} workflows in {wall:.2f}s = {n / wall:.1f} wf/s "
        f"under cProfile; process CPU {cpu:.2f}s ({cpu / wall * 100:.0f}% of one core)"
    )
    _print_stats("event-loop thread", _shorten_stats(pstats.Stats(main_prof)))
    for group, title in (("store", "store thread(s)"), ("workflow", "workflow-code thread(s)")):
        profs = [p for (g, _), p in thread_profiles.items() if g == group]
        if profs:
            st = pstats.Stats(profs[0])
            for p in profs[1:]:
                st.add(p)
            _print_stats(f"{title} ({len(profs)})", _shorten_stats(st))


def profile_main(args: argparse.Namespace, backends: list[str], *, bench: Any) -> int:
    """Profile W1 on each backend; ``bench`` is the module of ``run.py`` (workers, W1)."""
    for backend in backends:
        with bench.fresh_database(backend, args.pg_url) as url:
            asyncio.run(profile_w1(bench, url, backend))
    return 0
