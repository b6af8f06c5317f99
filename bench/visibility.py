"""Finding runs among many: the List Filter and count_workflows on 100,000 runs.

    python bench/visibility.py                         # SQLite and PostgreSQL, 100,000 runs
    python bench/visibility.py --backend sqlite --runs 20000 --reps 5

Five custom search attributes are registered (CustomerId Keyword, Region Keyword, Amount
Int, Priority Int, Notes Text). The runs are written straight into ``dn_executions`` and
``dn_visibility`` with the values a run started through the client would have (starting
100,000 runs through the engine takes minutes and measures starts, not finding): ids
``run-<n>``, four workflow types, statuses in the proportions of a busy namespace (80 %
completed, 10 % running, 5 % failed, 5 % terminated or cancelled), 10,000 customers.

Each figure is the median of ``--reps`` calls through the public API (``list_workflows``
reading one page, ``count_workflows``), after one untimed call:

- ``selective``: ``CustomerId = '<one customer>'`` (about 10 runs), the first page;
- ``status_page``: ``ExecutionStatus = 'Running'``, the first page of 100;
- ``combined``: ``CustomerId = ... AND ExecutionStatus = 'Completed' AND Amount > 100``;
- ``count_grouped``: ``count_workflows("GROUP BY ExecutionStatus")`` over every run;
- ``count_selective``: ``count_workflows("Region = 'eu' AND Amount > 500")``.

Then the retention sweep: every closed run is given 11 history events, and a service
whose clock is 8 days ahead deletes everything past the default namespace's week
(``delete_expired_runs``, a batch of at most 200 runs per transaction) until nothing is
left: ``V_sweep_rate`` is runs deleted per second, ``V_sweep_batch`` the median and
longest time of one batch (how long it holds SQLite's writer, or the runs' row locks).

Lines are printed in the peers' format: ``peer=durable-sqlite workload=V_selective
value=.. unit=ms median=.. min=.. max=.. runs=..``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import Client
from engine._service.clock import Clock
from engine._service.service import Service
from engine._service.visibility import text_column_value
from engine._store.schema import OPEN_CLOSE_ORDER

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
TYPES = ["OrderWF", "RefundWF", "ShipmentWF", "InvoiceWF"]
#: 80 % completed, 10 % running, 5 % failed, 5 % cancelled.
STATUSES = [2] * 16 + [1] * 2 + [3, 4]


def _payload(value: Any, kind: str) -> dict[str, Any]:
    import base64

    return {
        "metadata": {
            "encoding": base64.b64encode(b"json/plain").decode(),
            "type": base64.b64encode(kind.encode()).decode(),
        },
        "data": base64.b64encode(json.dumps(value).encode()).decode(),
    }


def populate(url: str, runs: int, seed: int = 1) -> None:
    """``runs`` runs straight into the tables (see the module docstring)."""
    rng = random.Random(seed)
    engine = sa.create_engine(url)
    now = time.time()
    with engine.begin() as conn:
        columns = {
            r[0]: r[2]
            for r in conn.execute(
                sa.text("SELECT name, value_type, column_name FROM dn_search_attributes")
            )
        }
        exec_rows, vis_rows = [], []
        for n in range(runs):
            run_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            status = rng.choice(STATUSES)
            start = now - (runs - n) * 0.5
            close = None if status == 1 else start + rng.uniform(0.1, 30)
            wtype = TYPES[n % len(TYPES)]
            customer = f"c-{rng.randrange(10_000)}"
            region = rng.choice(["eu", "us", "apac"])
            amount = rng.randrange(1000)
            priority = rng.randrange(5)
            notes = rng.choice(["gift wrapped", "express delivery", "fragile glass", ""])
            held = {
                "CustomerId": _payload(customer, "Keyword"),
                "Region": _payload(region, "Keyword"),
                "Amount": _payload(amount, "Int"),
                "Priority": _payload(priority, "Int"),
            }
            if notes:
                held["Notes"] = _payload(notes, "Text")
            exec_rows.append(
                {
                    "run_id": run_id,
                    "namespace": "default",
                    "workflow_id": f"run-{n}",
                    "workflow_type": wtype,
                    "task_queue": "orders",
                    "status": status,
                    "start_time": start,
                    "close_time": close,
                    "first_run_id": run_id,
                    "next_event_id": 12,
                    "history_size_bytes": 2400,
                    "workflow_task_timeout": 10.0,
                }
            )
            vis_rows.append(
                {
                    "run_id": run_id,
                    "namespace": "default",
                    "workflow_id": f"run-{n}",
                    "workflow_type": wtype,
                    "task_queue": "orders",
                    "status": status,
                    "start_time": start,
                    "execution_time": start,
                    "close_time": close,
                    "close_order": OPEN_CLOSE_ORDER if close is None else close,
                    "execution_duration": None if close is None else close - start,
                    "history_length": None if close is None else 11,
                    "history_size_bytes": None if close is None else 2400,
                    "root_workflow_id": f"run-{n}",
                    "root_run_id": run_id,
                    "search_attributes": json.dumps(held),
                    columns["CustomerId"]: customer,
                    columns["Region"]: region,
                    columns["Amount"]: amount,
                    columns["Priority"]: priority,
                    columns["Notes"]: text_column_value(notes) if notes else None,
                }
            )
        for table, rows in (("dn_executions", exec_rows), ("dn_visibility", vis_rows)):
            names = list(rows[0])
            insert = sa.text(
                f"INSERT INTO {table} ({', '.join(names)}) "
                f"VALUES ({', '.join(':' + c for c in names)})"
            )
            for start in range(0, len(rows), 5000):
                conn.execute(insert, rows[start : start + 5000])
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE dn_visibility"))
            conn.execute(sa.text("ANALYZE dn_executions"))
            conn.commit()
    else:
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE"))
            conn.commit()
    engine.dispose()


async def measure(url: str, runs: int, reps: int, peer: str) -> None:
    client = await Client.connect(url)
    await client.service.add_search_attributes(
        "default",
        {"CustomerId": 2, "Region": 2, "Amount": 3, "Priority": 3, "Notes": 1},
    )
    t0 = time.perf_counter()
    populate(url, runs)
    print(f"# {peer}: {runs:,} runs written in {time.perf_counter() - t0:.1f} s", flush=True)

    async def page(query: str) -> int:
        listing = client.list_workflows(query, page_size=100)
        await listing.fetch_next_page()
        return len(listing.current_page or [])

    cases = {
        "V_selective": lambda: page("CustomerId = 'c-4242'"),
        "V_status_page": lambda: page("ExecutionStatus = 'Running'"),
        "V_combined": lambda: page(
            "CustomerId = 'c-4242' AND ExecutionStatus = 'Completed' AND Amount > 100"
        ),
        "V_count_grouped": lambda: client.count_workflows("GROUP BY ExecutionStatus"),
        "V_count_selective": lambda: client.count_workflows("Region = 'eu' AND Amount > 500"),
    }
    for name, call in cases.items():
        await call()  # untimed
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            await call()
            times.append((time.perf_counter() - start) * 1000)
        median = statistics.median(times)
        print(
            f"peer={peer} workload={name} value={median:.2f} unit=ms median={median:.2f} "
            f"min={min(times):.2f} max={max(times):.2f} "
            f"runs={','.join(f'{t:.2f}' for t in times)}",
            flush=True,
        )
    await sweep(url, client, peer)
    await client.close()


class _Ahead(Clock):
    def now(self) -> float:
        return time.time() + 8 * 86400


async def sweep(url: str, client: Client, peer: str) -> None:
    """Give each closed run a history, then time the retention sweep deleting them all."""
    engine = sa.create_engine(url)
    t0 = time.perf_counter()
    with engine.begin() as conn:
        closed = conn.execute(
            sa.text("SELECT run_id, start_time FROM dn_executions WHERE status <> 1")
        ).all()
        insert = sa.text(
            "INSERT INTO dn_history_events (run_id, event_id, event_time, event_type, "
            "attributes) VALUES (:r, :e, :t, :y, :a)"
        )
        rows = [
            {"r": r.run_id, "e": e, "t": r.start_time, "y": "ActivityTaskCompleted", "a": "{}"}
            for r in closed
            for e in range(1, 12)
        ]
        for start in range(0, len(rows), 20_000):
            conn.execute(insert, rows[start : start + 20_000])
    engine.dispose()
    print(
        f"# {peer}: {len(rows):,} history events written in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    later = Service(client.store, _Ahead())
    batches, deleted = [], 0
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        n = await later.delete_expired_runs()
        if not n:
            break
        batches.append((time.perf_counter() - start) * 1000)
        deleted += n
    took = time.perf_counter() - began
    rate = deleted / took
    print(
        f"peer={peer} workload=V_sweep_rate value={rate:.0f} unit=runs/s deleted={deleted} "
        f"seconds={took:.1f}",
        flush=True,
    )
    print(
        f"peer={peer} workload=V_sweep_batch value={statistics.median(batches):.1f} unit=ms "
        f"median={statistics.median(batches):.1f} max={max(batches):.1f} batches={len(batches)}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{tmp}/durable.db"
            asyncio.run(measure(url, args.runs, args.reps, "durable-sqlite"))
    if args.backend in ("postgres", "both"):
        schema = "bench_" + uuid.uuid4().hex[:8]
        admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        try:
            url = f"{PG_URL}?options=-csearch_path%3D{schema}"
            asyncio.run(measure(url, args.runs, args.reps, "durable-postgres"))
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()


if __name__ == "__main__":
    main()
