"""SQLite: a lone change runs on its caller's thread (``engine._store.sqlite_writer``), and
goes to the writer thread whenever running it there could make the caller's event loop wait
or let it overtake another change."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import engine._store.sqlite_writer as sqlite_writer
from engine import Client, Worker, activity, workflow
from engine._store.ahead import RunLock
from engine._store.commit_at import CommitAt
from engine._store.gateway import Store
from engine._store.queries import CLAIM_REQUEST, Q
from engine._store.tx import StoreTx
from engine.exceptions import StoreError


@pytest.fixture
async def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    # Changes of these tests name no run: let each run inline whatever came just before
    # (the rule about runs has a test of its own, which sets LONE_GAP itself).
    monkeypatch.setattr(sqlite_writer, "LONE_GAP", 0.0)
    c = await Client.connect(f"sqlite:///{tmp_path / 'durable.db'}")
    try:
        yield c
    finally:
        await c.close()


def _writer(store: Store) -> sqlite_writer.SqliteWriter:
    assert store._writer is not None
    return store._writer


async def _ready(store: Store) -> None:
    """Wait until the writer thread has its connection (it opens it when it starts)."""
    for _ in range(500):
        if _writer(store)._conn is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the writer thread never opened its connection")


def _claim(rid: str) -> Any:
    def claim(tx: StoreTx) -> str:
        tx._w(CLAIM_REQUEST, {"run_id": "r", "rid": rid, "t": time.time()})
        return threading.current_thread().name

    return claim


def _claimed(path: Path, rid: str) -> bool:
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT 1 FROM dn_requests WHERE request_id = ?", (rid,)).fetchone()
    return row is not None


async def test_a_lone_change_runs_on_the_callers_thread_only_when_asked(
    client: Client, tmp_path: Path
) -> None:
    store = client.store
    await _ready(store)
    here = threading.current_thread().name
    assert await store.transaction(_claim("a"), inline=True) == here
    assert await store.transaction(_claim("b")) == "durable-sqlite-writer"
    assert _claimed(tmp_path / "durable.db", "a") and _claimed(tmp_path / "durable.db", "b")
    assert _writer(store).inline_count == 1


async def test_a_change_waiting_for_the_writer_is_never_overtaken(client: Client) -> None:
    store = client.store
    await _ready(store)
    hold, holding = threading.Event(), threading.Event()
    order: list[str] = []

    def block(tx: StoreTx) -> None:
        holding.set()
        hold.wait(10)
        order.append("block")

    def queued(tx: StoreTx) -> None:
        order.append("queued")

    def lone(tx: StoreTx) -> str:
        order.append("lone")
        return threading.current_thread().name

    blocker = asyncio.ensure_future(store.transaction(block))
    while not holding.is_set():
        await asyncio.sleep(0.001)
    first = asyncio.ensure_future(store.transaction(queued))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(store.transaction(lone, inline=True))
    await asyncio.sleep(0.05)
    assert not second.done()  # it waits behind the others, in the writer's queue
    hold.set()
    await asyncio.gather(blocker, first)
    assert await second == "durable-sqlite-writer"
    assert order == ["block", "queued", "lone"]
    assert _writer(store).inline_count == 0


async def test_a_change_queued_before_the_thread_takes_it_is_not_overtaken(
    client: Client,
) -> None:
    """A change submitted and not yet taken by the thread (its connection still free)
    keeps a later change from running inline ahead of it."""
    store = client.store
    await _ready(store)
    writer = _writer(store)
    taken = writer._queue
    writer._queue = type(taken)()  # the thread still waits on the old queue
    order: list[str] = []

    def first(tx: StoreTx) -> None:
        order.append("first")

    def second(tx: StoreTx) -> None:
        order.append("second")

    queued = asyncio.ensure_future(store.transaction(first))
    await asyncio.sleep(0)
    assert writer._waiting == 1 and not writer._conn_lock.locked()
    later = asyncio.ensure_future(store.transaction(second, inline=True))
    await asyncio.sleep(0.01)
    assert order == [] and not later.done()
    pending, writer._queue = writer._queue, taken
    while not pending.empty():
        taken.put(pending.get())
    await asyncio.gather(queued, later)
    assert order == ["first", "second"]


async def test_another_process_writing_sends_the_change_to_the_thread(
    client: Client, tmp_path: Path
) -> None:
    """An inline BEGIN that finds the database locked gives up at once: the event loop goes
    on while the writer thread waits for the other process's transaction."""
    store = client.store
    await _ready(store)
    other = sqlite3.connect(tmp_path / "durable.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        began = time.monotonic()
        change = asyncio.ensure_future(store.transaction(_claim("c"), inline=True))
        for _ in range(20):
            await asyncio.sleep(0.005)
        # Not blocked for the busy timeout (30 s) before the change went to the thread.
        assert time.monotonic() - began < 10
        assert not change.done() and _writer(store)._waiting == 1
        other.execute("COMMIT")
        assert await asyncio.wait_for(change, 30) == "durable-sqlite-writer"
    finally:
        other.close()
    assert _claimed(tmp_path / "durable.db", "c")


async def test_an_inline_change_that_raises_leaves_nothing(client: Client, tmp_path: Path) -> None:
    store = client.store
    await _ready(store)

    def fails(tx: StoreTx) -> None:
        _claim("d")(tx)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await store.transaction(fails, inline=True)
    assert not _claimed(tmp_path / "durable.db", "d")
    # The connection is usable afterwards, inline again.
    assert await store.transaction(_claim("e"), inline=True) == threading.current_thread().name
    assert _claimed(tmp_path / "durable.db", "e")


async def test_a_change_that_waits_to_commit_goes_to_the_thread(
    client: Client, tmp_path: Path
) -> None:
    store = client.store
    await _ready(store)
    runs: list[str] = []

    def waits(tx: StoreTx) -> None:
        runs.append(threading.current_thread().name)
        _claim("f")(tx)
        tx.commit_not_before(CommitAt(time.monotonic() + 0.02))

    await store.transaction(waits, inline=True)
    # Run once here (rolled back: nothing committed), then on the thread, which waited.
    assert runs == [threading.current_thread().name, "durable-sqlite-writer"]
    assert _claimed(tmp_path / "durable.db", "f")


async def test_the_connection_neither_waits_nor_checkpoints_between_batches(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline: busy timeout 0; the thread's batches: the usual 30 s; never an automatic
    checkpoint. Every CHECKPOINT_EVERY changes the thread checkpoints; after a checkpoint
    that emptied the log, the next change goes to the thread (its commit restarts the log
    and syncs it), and the one after runs inline again."""
    store = client.store
    await _ready(store)

    def settings(tx: StoreTx) -> tuple[int, int]:
        busy = tx._one(Q("PRAGMA busy_timeout"), {})
        pages = tx._one(Q("PRAGMA wal_autocheckpoint"), {})
        assert busy is not None and pages is not None
        return busy[0], pages[0]

    assert await store.transaction(settings, inline=True) == (0, 0)
    assert await store.transaction(settings) == (sqlite_writer.BUSY_TIMEOUT_MS, 0)
    assert await store.transaction(settings, inline=True) == (0, 0)  # put back
    monkeypatch.setattr(sqlite_writer, "CHECKPOINT_EVERY", 3)
    writer = _writer(store)
    writer._unchecked = 0
    before = writer.checkpoints
    here = threading.current_thread().name
    for i in range(3):
        assert await store.transaction(_claim(f"g{i}"), inline=True) == here
    for _ in range(500):
        if writer.checkpoints > before:
            break
        await asyncio.sleep(0.01)
    assert writer.checkpoints == before + 1 and writer._fresh_log
    assert await store.transaction(_claim("g3"), inline=True) == "durable-sqlite-writer"
    assert await store.transaction(_claim("g4"), inline=True) == here


async def test_with_fsync_nothing_runs_inline(tmp_path: Path) -> None:
    client = await Client.connect(f"sqlite:///{tmp_path / 'synced.db'}", fsync=True)
    try:
        await _ready(client.store)
        assert await client.store.transaction(_claim("h"), inline=True) == ("durable-sqlite-writer")
    finally:
        await client.close()


@activity.defn
async def echo(x: int) -> int:
    return x


@workflow.defn
class TwoSteps:
    @workflow.run
    async def run(self) -> int:
        total = 0
        for i in range(2):
            total += await workflow.execute_activity(
                echo, i + 1, start_to_close_timeout=timedelta(seconds=10)
            )
        return total


async def test_a_lone_workflow_changes_its_state_inline(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start, the workflow tasks' completions and the activities' completions of one
    workflow alone ask to run inline (and the history is the usual one)."""
    await _ready(client.store)
    asked: list[str] = []
    tried = sqlite_writer.SqliteWriter.run_inline

    def spy(self: sqlite_writer.SqliteWriter, fn: Any, args: tuple[Any, ...]) -> Any:
        asked.append(getattr(fn, "__name__", ""))
        return tried(self, fn, args)

    monkeypatch.setattr(sqlite_writer.SqliteWriter, "run_inline", spy)
    tq = "q-" + uuid.uuid4().hex[:8]
    async with Worker(client, task_queue=tq, workflows=[TwoSteps], activities=[echo]):
        handle = await client.start_workflow(TwoSteps.run, id="w-" + tq, task_queue=tq)
        assert await handle.result() == 3
    assert sorted(set(asked)) == ["complete_activity", "complete_workflow_task", "start_workflow"]
    assert asked.count("complete_workflow_task") == 3 and asked.count("complete_activity") == 2
    # Whether each ran inline depends on what the worker's polls had the writer doing.
    assert _writer(client.store).inline_count >= 1
    types = [e.event_type for e in (await handle.fetch_history()).events]
    assert types[-1] == "WorkflowExecutionCompleted"
    assert types.count("ActivityTaskCompleted") == 2


def _about(run_id: str) -> Any:
    """A change naming the run it locks, as ``operation(locks=...)`` does."""

    def change(tx: StoreTx) -> str:
        return threading.current_thread().name

    change.lock_hint = lambda *args: (RunLock(run_id),)  # type: ignore[attr-defined]
    return change


async def test_another_runs_change_close_behind_goes_to_the_thread(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changes of several runs coming close together queue for the thread (to commit
    together); a run's changes following one another, or a change after a pause, run
    inline."""
    store = client.store
    await _ready(store)
    here = threading.current_thread().name
    monkeypatch.setattr(sqlite_writer, "LONE_GAP", 3600.0)  # "close behind", always
    await store.transaction(_about("a"), inline=True)  # (after the client's own changes)
    assert await store.transaction(_about("a"), inline=True) == here  # the same run
    assert await store.transaction(_about("b"), inline=True) == "durable-sqlite-writer"
    assert await store.transaction(_about("b"), inline=True) == here
    # Changes that name no run are never "the same run" as one another.
    assert await store.transaction(_claim("n1"), inline=True) == "durable-sqlite-writer"
    assert await store.transaction(_claim("n2"), inline=True) == "durable-sqlite-writer"
    monkeypatch.setattr(sqlite_writer, "LONE_GAP", 0.0)  # after a pause, always
    assert await store.transaction(_about("c"), inline=True) == here


async def test_a_caller_changing_things_in_a_loop_lets_other_tasks_run(client: Client) -> None:
    store = client.store
    await _ready(store)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    def change(tx: StoreTx) -> str:
        return threading.current_thread().name

    ticker = asyncio.ensure_future(other())
    await asyncio.sleep(0)
    seen = []
    try:
        for _ in range(3 * sqlite_writer.YIELD_EVERY):
            assert await store.transaction(change, inline=True) == threading.current_thread().name
            seen.append(ticks)
    finally:
        ticker.cancel()
    # The other task ran every YIELD_EVERY changes, and only then.
    assert len(set(seen)) == 4, seen


async def test_a_change_after_the_writer_stopped_is_answered(client: Client) -> None:
    """A change submitted to a writer whose thread has ended fails at once instead of
    waiting for ever."""
    store = client.store
    await _ready(store)
    _writer(store).stop()
    with pytest.raises(StoreError, match="closed"):
        await asyncio.wait_for(store.transaction(_claim("z")), 10)


async def test_an_inline_changes_effects_run_before_the_next_transaction(client: Client) -> None:
    """As on the thread: a change's after-commit effects run while the connection is still
    its own, so no other change's transaction comes between its commit and them."""
    store = client.store
    await _ready(store)
    writer = _writer(store)
    seen: list[bool] = []

    def with_effect(tx: StoreTx) -> str:
        tx.after_commit(lambda: seen.append(writer._conn_lock.locked()))
        return threading.current_thread().name

    assert await store.transaction(with_effect, inline=True) == threading.current_thread().name
    assert await store.transaction(with_effect) == "durable-sqlite-writer"
    assert seen == [True, True]


async def test_a_batch_the_connection_refuses_is_answered(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread's own set-up of a batch failing (here its busy-timeout PRAGMA, made
    invalid) answers the batch's callers with the error instead of leaving them waiting,
    and the thread goes on."""
    store = client.store
    await _ready(store)
    _writer(store).stop()
    monkeypatch.setattr(sqlite_writer, "BUSY_TIMEOUT_MS", "0; SELECT 1")  # two statements
    store._writer = sqlite_writer.SqliteWriter(store)  # reads it as its thread starts
    await _ready(store)
    with pytest.raises(StoreError, match="one statement"):
        await asyncio.wait_for(store.transaction(_claim("r1")), 10)
    assert _writer(store).thread.is_alive()
    assert await store.transaction(_claim("r2"), inline=True) == threading.current_thread().name
