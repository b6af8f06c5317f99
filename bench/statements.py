"""Count the SQL a workflow costs on PostgreSQL: statements and transactions per W1 workflow
and per W2 activity step, by kind, and which transaction functions ran.

    python bench/statements.py [--pg-url URL] [--n 200]

Counts do not depend on the machine's speed, so unlike timings they compare across runs
and machines (a count that grows with load, e.g. polls, shows here too). Statements are
counted at the driver (``psycopg.Cursor.execute``, which the store's SQL goes through)
and, for statements the store sends together as one query (``StoreTx._sent_together``),
each one as the store writes it (``engine._store.literals.bound``), round trips as the
waits for the server psycopg makes (one per query; one per pipeline block; one for
psycopg's ``BEGIN``, which it waits for even in a pipeline; one per ``COMMIT`` outside one),
transactions at the store (each also sends ``BEGIN`` and ``COMMIT``, not counted as
statements; a group commit of several changes counts once, by its size; a held transaction,
``engine._store.held``, counts once, by its first change, and its end is shown apart) with
their mean wall time, per phase: W1 (``--n`` workflows at once, one activity each) and one
workflow of 50 activities alone.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import psycopg  # noqa: E402
import run as bench  # noqa: E402
from workloads import SeqActivitiesWF  # noqa: E402

from engine import Client  # noqa: E402
from engine._store import tx as tx_module  # noqa: E402
from engine._store.gateway import Store  # noqa: E402
from engine._store.held import HeldTransaction  # noqa: E402
from engine._store.pg_writer import PgWriters  # noqa: E402
from engine._store.tx import StoreTx  # noqa: E402


class Census:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statements: collections.Counter[str] = collections.Counter()
        self.transactions: collections.Counter[str] = collections.Counter()
        self.parts: collections.Counter[str] = collections.Counter()
        self.seconds: collections.Counter[str] = collections.Counter()
        self.waits = 0

    def reset(self) -> None:
        with self.lock:
            self.statements.clear()
            self.transactions.clear()
            self.parts.clear()
            self.seconds.clear()
            self.waits = 0

    def statement(self, sql: Any) -> None:
        text = sql.as_string(None) if hasattr(sql, "as_string") else str(sql)
        words = text.split(None, 3)
        kind = " ".join(words[:1]).upper()
        if kind in ("INSERT", "DELETE") and len(words) > 2:
            kind += " " + words[2]
        elif kind == "UPDATE" and len(words) > 1:
            kind += " " + words[1]
        elif kind == "SELECT" and "pg_notify" in text:
            kind = "SELECT pg_notify"
        elif kind == "SELECT" and " FROM " in text.upper():
            rest = text.upper().split(" FROM ", 1)[1].split()
            kind += " FROM " + (rest[0].lower() if rest else "?")
        with self.lock:
            self.statements[kind] += 1

    def round_trips(self, n: int) -> None:
        if n:
            with self.lock:
                self.waits += n

    def transaction(self, name: str, seconds: float, *, count: bool = True) -> None:
        """One transaction (or, ``count`` False, a part of one: shown, not counted)."""
        with self.lock:
            (self.transactions if count else self.parts)[name] += 1
            self.seconds[name] += seconds


CENSUS = Census()


def _waits(conn: Any) -> int:
    """Round trips a statement sent now costs: one for psycopg's BEGIN when no
    transaction is open (psycopg waits for its answer, in a pipeline too: it sends a Sync
    after it); none more inside a pipeline (its sync is counted once, at the end of the
    block); one outside."""
    pgconn = conn.pgconn
    idle = pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    begin = 1 if idle and not conn.autocommit else 0
    if pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
        return begin
    return 1 + begin


#: Set while the store sends statements together as one query: they were counted one by
#: one as they were written (``bound``), the query counts as a round trip only.
_TOGETHER = threading.local()


def instrument() -> None:
    bound = tx_module.bound
    sent_together = StoreTx._sent_together

    def counted_bound(cur: Any, sql: str, params: Any) -> list[str]:
        statements = bound(cur, sql, params)
        for _ in statements:
            CENSUS.statement(sql)
        return statements

    def counted_together(self: StoreTx, statements: Any, tail: Any) -> Any:
        for text in tail:
            CENSUS.statement(text)
        _TOGETHER.on = True
        try:
            return sent_together(self, statements, tail)
        finally:
            _TOGETHER.on = False

    tx_module.bound = counted_bound  # type: ignore[assignment]
    StoreTx._sent_together = counted_together  # type: ignore[method-assign]
    execute = psycopg.Cursor.execute
    executemany = psycopg.Cursor.executemany
    commit = psycopg.Connection.commit
    pipeline = psycopg.Connection.pipeline

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(_TOGETHER, "on", False):
            CENSUS.statement(query)
        CENSUS.round_trips(_waits(self.connection))
        return execute(self, query, *args, **kwargs)

    def counted_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        CENSUS.statement(query)
        # Outside a pipeline, psycopg sends the batch (and BEGIN) in one of its own.
        CENSUS.round_trips(min(1, _waits(self.connection)))
        return executemany(self, query, *args, **kwargs)

    def counted_commit(self: Any) -> Any:
        if self.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            CENSUS.round_trips(1)
        return commit(self)

    @contextlib.contextmanager
    def counted_pipeline(self: Any) -> Any:
        outer = self.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
        with pipeline(self) as p:
            yield p
        if outer:
            CENSUS.round_trips(1)  # the sync at the end of the block

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
    psycopg.Connection.commit = counted_commit  # type: ignore[method-assign]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign,assignment]
    run_pooled = Store._run_pooled

    def counted_run(self: Store, fn: Any, args: Any, **kwargs: Any) -> Any:
        what = "read" if kwargs.get("read_only") else "write"
        if kwargs.get("hold"):
            what = "held (its first change)"
        began = time.perf_counter()
        try:
            return run_pooled(self, fn, args, **kwargs)
        finally:
            fn = getattr(fn, "func", fn)  # a transaction function bound with partial
            name = f"{what} {getattr(fn, '__qualname__', fn)}"
            CENSUS.transaction(name, time.perf_counter() - began)

    Store._run_pooled = counted_run  # type: ignore[method-assign]
    held_commit = HeldTransaction._commit

    def counted_held_commit(self: HeldTransaction, second: Any) -> Any:
        # The end of a held transaction: not a transaction of its own (counted above).
        began = time.perf_counter()
        try:
            return held_commit(self, second)
        finally:
            what = "alone" if second is None else getattr(second[0], "func", second[0])
            name = f"  (its end: {getattr(what, '__qualname__', what)})"
            CENSUS.transaction(name, time.perf_counter() - began, count=False)

    HeldTransaction._commit = counted_held_commit  # type: ignore[method-assign]
    together = PgWriters._together

    def counted_together(self: PgWriters, batch: Any) -> Any:
        began = time.perf_counter()
        try:
            return together(self, batch)
        finally:
            n = len(batch)
            size = "2-4" if n <= 4 else "5-16" if n <= 16 else f"17-{PgWriters.MAX_BATCH}"
            CENSUS.transaction(f"write group commit of {size} changes", time.perf_counter() - began)

    PgWriters._together = counted_together  # type: ignore[method-assign]


def report(title: str, per: int, unit: str) -> None:
    with CENSUS.lock:
        statements = dict(CENSUS.statements)
        transactions = dict(CENSUS.transactions)
        parts = dict(CENSUS.parts)
        seconds = dict(CENSUS.seconds)
        waits = CENSUS.waits
    total = sum(statements.values())
    print(f"\n== {title}: {total / per:.1f} statements, {waits / per:.1f} round trips and "
          f"{sum(transactions.values()) / per:.2f} transactions per {unit}")  # fmt: skip
    for kind, count in sorted(statements.items(), key=lambda kv: -kv[1]):
        print(f"   {count / per:8.2f}  {kind}")
    print("   transactions (per unit; mean wall time each, from the store thread's view):")
    for name, count in sorted(transactions.items(), key=lambda kv: -kv[1]):
        print(f"   {count / per:8.2f}  {name}  ({seconds[name] / count * 1000:.2f} ms)")
    for name, count in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"   {count / per:8.2f}  {name}  ({seconds[name] / count * 1000:.2f} ms)")


async def main(pg_url: str, n: int) -> None:
    with bench.fresh_database("postgres", pg_url) as url:
        client = await Client.connect(url)
        try:
            tq = bench.new_tq()
            async with bench.new_worker(client, tq):
                await bench.w1_once(client, tq, 20, 300)
                CENSUS.reset()
                await bench.w1_once(client, tq, n, 300)
                report(f"W1, {n} workflows at once", n, "workflow")
                CENSUS.reset()
                await client.execute_workflow(
                    SeqActivitiesWF.run, 50, id=f"one-{bench.new_tq()}", task_queue=tq
                )
                report("one workflow of 50 activities alone", 50, "activity step")
        finally:
            await client.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--pg-url", default=os.environ.get("DURABLE_BENCH_PG_URL", bench.DEFAULT_PG_URL)
    )
    ap.add_argument("--n", type=int, default=200)
    ns = ap.parse_args()
    instrument()
    asyncio.run(main(ns.pg_url, ns.n))
