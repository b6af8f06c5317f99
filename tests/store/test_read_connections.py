"""Reads (``Store.read``) run on read connections: one snapshot of what was committed, never
behind the writer and never holding the write lock, and they see the process's own writes.

Each test runs on SQLite and PostgreSQL (``db_url``) unless it is about SQLite's locks.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

import engine
from engine import Client
from engine._store.tx import StoreTx
from engine.exceptions import StoreError

REPO = Path(engine.__file__).resolve().parents[1]
#: Well under SQLite's busy timeout (30 s), which a read waiting for the write lock would
#: sit out; well over what a read takes on this machine, even loaded.
PROMPT = 5.0

#: Another process reads the workflow, prints what it saw and how long the reads took.
_READER = """
import asyncio, json, sys, time
from engine import Client

async def main(url, wid):
    t0 = time.perf_counter()
    client = await Client.connect(url)
    try:
        t1 = time.perf_counter()
        handle = client.get_workflow_handle(wid)
        history = await handle.fetch_history()
        runs = [run.id async for run in client.list_workflows()]
        described = await handle.describe()
        print(json.dumps({
            "events": [e.event_type for e in history.events],
            "runs": runs,
            "history_length": described.history_length,
            "connect_secs": t1 - t0,
            "read_secs": time.perf_counter() - t1,
        }), flush=True)
    finally:
        await client.close()

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""

#: Another process holds SQLite's write lock (BEGIN IMMEDIATE) until its stdin closes.
_LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE dn_namespaces SET retention_seconds = retention_seconds")
print("held", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""

#: Another process checkpoints the WAL as hard as SQLite can, over and over.
_CHECKPOINTER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
print("checkpointing", flush=True)
n, stop = 0, time.monotonic() + float(sys.argv[2])
while time.monotonic() < stop:
    for mode in ("PASSIVE", "FULL", "RESTART", "TRUNCATE"):
        conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()
        n += 1
print(n, flush=True)
"""


def _marker(event_id: int) -> tuple[int, float, str, str]:
    return (event_id, time.time(), "MarkerRecorded", json.dumps({"markerName": str(event_id)}))


async def _start(client: Client) -> tuple[str, str]:
    """A run with no worker: its history is WorkflowExecutionStarted, WorkflowTaskScheduled."""
    wid = "rc-" + uuid.uuid4().hex[:10]
    handle = await client.start_workflow(
        "Absent", id=wid, task_queue="tq-" + uuid.uuid4().hex[:8], request_eager_start=False
    )
    assert handle.result_run_id is not None
    return wid, handle.result_run_id


async def _python(*args: str, stdin: bool = False) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        *args,
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _read_elsewhere(db_url: str, wid: str) -> dict[str, Any]:
    proc = await _python(_READER, db_url, wid)
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


class _HeldWriter:
    """A write transaction of ``client``'s store held open until :meth:`release`: on SQLite
    the batching writer is stuck inside it (holding the write lock); on PostgreSQL a pool
    connection is, with the run's row locked. It has appended a marker to the run's
    history (written to the database, not committed) and renamed the run's type."""

    def __init__(self, client: Client, run_id: str, next_event_id: int) -> None:
        self.client, self.run_id, self.event_id = client, run_id, next_event_id
        self.inside, self._go = threading.Event(), threading.Event()
        self.task: asyncio.Future[None] | None = None

    def _body(self, tx: StoreTx) -> None:
        assert tx.lock_execution(self.run_id) is not None
        tx.insert_events(self.run_id, [_marker(self.event_id)])
        tx.write_pending_events()  # in the database, uncommitted
        tx.update_execution(self.run_id, next_event_id=self.event_id + 1, workflow_type="Held")
        self.inside.set()
        assert self._go.wait(60)

    async def __aenter__(self) -> _HeldWriter:
        self.task = asyncio.ensure_future(self.client.store.transaction(self._body))
        while not self.inside.is_set():
            await asyncio.sleep(0.005)
        return self

    def release(self) -> None:
        self._go.set()

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        assert self.task is not None
        await self.task


async def test_reads_return_at_once_while_the_writer_is_inside_a_transaction(
    client: Client, db_url: str
) -> None:
    wid, run_id = await _start(client)
    handle = client.get_workflow_handle(wid)
    before = [e.event_type for e in (await handle.fetch_history()).events]
    assert before == ["WorkflowExecutionStarted", "WorkflowTaskScheduled"]

    async with _HeldWriter(client, run_id, next_event_id=3) as held:
        # This process: each read returns at once with the last committed state.
        t0 = time.perf_counter()
        history = await asyncio.wait_for(handle.fetch_history(), PROMPT)
        runs = await asyncio.wait_for(_listed(client), PROMPT)
        described = await asyncio.wait_for(handle.describe(), PROMPT)
        events = await asyncio.wait_for(_all_events(handle), PROMPT)
        assert time.perf_counter() - t0 < PROMPT
        assert [e.event_type for e in history.events] == before
        assert [e.event_type for e in events] == before
        assert [(r.id, r.workflow_type) for r in runs] == [(wid, "Absent")]
        assert described.history_length == 2
        assert described.workflow_type == "Absent"

        # Another process: the same (its connect reads the schema version, no lock either).
        seen = await _read_elsewhere(db_url, wid)
        assert seen["events"] == before
        assert seen["runs"] == [wid]
        assert seen["history_length"] == 2
        assert seen["connect_secs"] + seen["read_secs"] < PROMPT * 2
        held.release()

    # Committed now: every reader sees the change.
    history = await handle.fetch_history()
    assert [e.event_type for e in history.events] == [*before, "MarkerRecorded"]
    assert (await handle.describe()).workflow_type == "Held"
    assert (await _read_elsewhere(db_url, wid))["events"] == [*before, "MarkerRecorded"]


async def _listed(client: Client) -> list[Any]:
    return [run async for run in client.list_workflows()]


async def _all_events(handle: Any) -> list[Any]:
    return [e async for e in handle.fetch_history_events(page_size=1)]


async def test_a_read_sees_the_process_s_own_writes(client: Client) -> None:
    """Read-your-writes: a change that has returned is seen by every read after it, the
    history rows it wrote behind included, however the writes and reads interleave."""
    wid, run_id = await _start(client)
    store = client.store

    def append(tx: StoreTx, event_id: int) -> None:
        assert tx.lock_execution(run_id) is not None
        tx.insert_events(run_id, [_marker(event_id)])
        tx.update_execution(run_id, next_event_id=event_id + 1)

    def ids(tx: StoreTx) -> list[int]:
        return [int(r.event_id) for r in tx.read_events(run_id)]

    for event_id in range(3, 23):
        await store.transaction(append, event_id)
        assert (await store.read(ids))[-1] == event_id
        assert (await client.get_workflow_handle(wid).describe()).history_length == event_id

    # Many changes at once (one SQLite group commit, or several pool connections), each
    # followed by a read of its own: every read sees at least its own change.
    async def write_then_read(event_id: int) -> int:
        await store.transaction(append, event_id)
        return max(await store.read(ids))

    seen = await asyncio.gather(*(write_then_read(i) for i in range(23, 43)))
    assert all(got >= want for got, want in zip(seen, range(23, 43), strict=True))
    assert await store.read(ids) == list(range(1, 43))

    # A run started and finished in this process is listed and read back at once.
    wid2, _ = await _start(client)
    assert wid2 in [r.id for r in await _listed(client)]
    assert len((await client.get_workflow_handle(wid2).fetch_history()).events) == 2


async def test_a_read_is_one_snapshot(client: Client) -> None:
    """A change committed while a read is under way is not seen by the rest of that read."""
    _, run_id = await _start(client)
    store = client.store

    def append(tx: StoreTx) -> None:
        tx.insert_events(run_id, [_marker(3)])

    def read_twice(tx: StoreTx) -> tuple[int, int]:
        first = len(tx.read_events(run_id))
        store.run_sync(append)  # committed by the writer (or another pool connection)
        return first, len(tx.read_events(run_id))

    assert await store.read(read_twice) == (2, 2)
    assert len(await store.read(lambda tx: tx.read_events(run_id))) == 3


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda tx, run: tx.update_execution(run, workflow_type="x"), id="sql"),
        pytest.param(lambda tx, run: tx.insert_events(run, [_marker(3)]), id="history"),
        pytest.param(lambda tx, run: tx.wake("somewhere"), id="wake-up"),
    ],
)
async def test_a_read_cannot_write(client: Client, write: Callable[[StoreTx, str], None]) -> None:
    wid, run_id = await _start(client)
    with pytest.raises(StoreError):
        await client.store.read(write, run_id)
    described = await client.get_workflow_handle(wid).describe()
    assert (described.workflow_type, described.history_length) == ("Absent", 2)


def _sqlite_path(db_url: str) -> str:
    return db_url.removeprefix("sqlite:///")


@pytest.fixture
async def sqlite_client(tmp_path: Path) -> AsyncIterator[Client]:
    c = await Client.connect(f"sqlite:///{tmp_path / 'durable.db'}")
    try:
        yield c
    finally:
        await c.close()


async def test_sqlite_reads_take_no_write_lock(sqlite_client: Client) -> None:
    """With another process holding SQLite's write lock, every read path returns at once
    (before, each read began with BEGIN IMMEDIATE and waited out the busy timeout)."""
    client = sqlite_client
    wid, run_id = await _start(client)
    handle = client.get_workflow_handle(wid)
    holder = await _python(
        _LOCK_HOLDER, _sqlite_path(client.store.url.render_as_string()), stdin=True
    )
    try:
        assert holder.stdout is not None
        line = await asyncio.wait_for(holder.stdout.readline(), 60)
        assert line.strip() == b"held"
        t0 = time.perf_counter()
        reads = asyncio.gather(
            handle.fetch_history(),
            _listed(client),
            handle.describe(),
            handle.fetch_attempts(),
            _all_events(handle),
            client.service.closed_among([run_id]),
            client.service.next_timer_at(),
        )
        history, runs, described, attempts, events, closed, _ = await asyncio.wait_for(
            reads, PROMPT
        )
        assert time.perf_counter() - t0 < PROMPT
        assert len(history.events) == len(events) == described.history_length == 2
        assert [r.id for r in runs] == [wid]
        assert attempts == [] and closed == []
        # A write does wait for the lock (the test's premise): it is still queued.
        write = asyncio.ensure_future(
            client.store.transaction(lambda tx: tx.update_execution(run_id, workflow_type="W"))
        )
        await asyncio.sleep(0.3)
        assert not write.done()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        await asyncio.wait_for(holder.wait(), 60)
    await asyncio.wait_for(write, 60)
    assert (await handle.describe()).workflow_type == "W"


async def test_sqlite_reads_go_through_reader_connections(sqlite_client: Client) -> None:
    store = sqlite_client.store

    def where(tx: StoreTx) -> tuple[str, bool]:
        driver = tx.conn.connection.driver_connection
        assert driver is not None
        query_only = driver.execute("PRAGMA query_only").fetchone()[0]
        return threading.current_thread().name, bool(query_only)

    name, query_only = await store.read(where)
    assert name.startswith("durable-sqlite-reader") and query_only
    name, query_only = await store.transaction(where)
    assert name == "durable-sqlite-writer" and not query_only


async def test_sqlite_read_during_checkpoints(sqlite_client: Client) -> None:
    """Reads (and writes) go on while another process checkpoints the WAL in every mode."""
    client = sqlite_client
    wid, run_id = await _start(client)
    path = _sqlite_path(client.store.url.render_as_string())
    proc = await _python(_CHECKPOINTER, path, "2.0")
    assert proc.stdout is not None
    assert (await asyncio.wait_for(proc.stdout.readline(), 60)).strip() == b"checkpointing"
    handle = client.get_workflow_handle(wid)
    reads = 0
    event_id = 3
    stop = time.monotonic() + 1.8
    while time.monotonic() < stop:
        await client.store.transaction(
            lambda tx, i=event_id: tx.insert_events(run_id, [_marker(i)])
        )
        history = await asyncio.wait_for(handle.fetch_history(), PROMPT)
        assert len(history.events) == event_id
        event_id += 1
        reads += 1
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert int(out.strip()) > 0 and reads > 5


async def test_sqlite_read_busy_is_retried(sqlite_client: Client) -> None:
    """A read that finds the database busy (a moment of exclusive locking by another
    process) is run again: it changed nothing."""
    calls: list[int] = []

    def flaky(tx: StoreTx) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")
        return "read"

    assert await sqlite_client.store.read(flaky) == "read"
    assert len(calls) == 3

    def always_busy(tx: StoreTx) -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(StoreError, match="locked"):
        await sqlite_client.store.read(always_busy)
