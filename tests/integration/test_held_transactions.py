"""One transaction per activity step on PostgreSQL (``engine._store.held``): an activity's
outcome and the completion of the workflow task it starts commit together when the worker
that caches the run has nothing else in hand; the time limit, a rollback, a signal that
arrives meanwhile and the store's close each leave a correct history."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from engine import Client, Worker, activity, workflow
from engine._store.gateway import Store
from engine._store.held import HeldTransaction
from engine._store.pg_writer import PgWriters
from engine._store.tx import StoreTx
from engine._worker.workflows import WorkflowRunner


@activity.defn
async def double(x: int) -> int:
    return 2 * x


@workflow.defn
class Chain:
    """Three activities in a row, then waits for a signal if asked to."""

    def __init__(self) -> None:
        self.signals: list[str] = []

    @workflow.signal
    def note(self, text: str) -> None:
        self.signals.append(text)

    @workflow.run
    async def run(self, wait_for_signal: bool) -> list[Any]:
        x = 1
        for _ in range(3):
            x = await workflow.execute_activity(
                double, x, start_to_close_timeout=timedelta(seconds=30)
            )
        if wait_for_signal:
            await workflow.wait_condition(lambda: bool(self.signals))
        return [x, self.signals]


@pytest.fixture(autouse=True)
def writers_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writers count as idle, so every step may hold: whether they are is a hint that
    a poll running at that moment changes (tested apart, below)."""
    monkeypatch.setattr(PgWriters, "idle", lambda self: True)


#: The history of ``Chain`` without a signal, as both backends write it.
CHAIN_EVENTS = [
    "WorkflowExecutionStarted",
    "WorkflowTaskScheduled",
    "WorkflowTaskStarted",
    "WorkflowTaskCompleted",
    *[
        "ActivityTaskScheduled",
        "ActivityTaskStarted",
        "ActivityTaskCompleted",
        "WorkflowTaskScheduled",
        "WorkflowTaskStarted",
        "WorkflowTaskCompleted",
    ]
    * 3,
    "WorkflowExecutionCompleted",
]


async def _types(client: Client, workflow_id: str) -> list[str]:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [e.event_type for e in history.events]


async def _run_chain(client: Client, wait_for_signal: bool = False) -> tuple[str, Any]:
    workflow_id = f"chain-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        Chain.run, wait_for_signal, id=workflow_id, task_queue="held"
    )
    return workflow_id, handle


async def test_each_step_of_a_lone_workflow_commits_once(db_url: str) -> None:
    """On PostgreSQL each of the three outcomes commits with the completion that follows
    it (``joined``); SQLite holds nothing. Both write the same history."""
    client = await Client.connect(db_url)
    try:
        async with Worker(client, task_queue="held", workflows=[Chain], activities=[double]):
            workflow_id, handle = await _run_chain(client)
            assert await handle.result() == [8, []]
        assert await _types(client, workflow_id) == CHAIN_EVENTS
        counts = dict(client.store.held_counts)
        if client.store.postgres:
            assert counts == {"joined": 3}
        else:
            assert counts == {}
        assert not client.store._held and not client.store._held_keys
    finally:
        await client.close()


async def test_busy_writers_mean_no_hold(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With other changes of the process waiting or running, outcomes are not held: they
    go to the writers' group commit, and the history is the same."""
    monkeypatch.setattr(PgWriters, "idle", lambda self: False)
    client = await Client.connect(pg_url)
    try:
        async with Worker(client, task_queue="held", workflows=[Chain], activities=[double]):
            workflow_id, handle = await _run_chain(client)
            assert await handle.result() == [8, []]
        assert await _types(client, workflow_id) == CHAIN_EVENTS
        assert not client.store.held_counts
    finally:
        await client.close()


async def test_a_held_step_that_rolls_back_is_recorded_again(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit of a held step fails (the connection is lost): both changes are rolled
    back, the activity's outcome is recorded again by itself, and the worker drops the task
    it ran and replays the run from its history. Nothing is recorded twice."""
    commit = HeldTransaction._commit
    failed: list[str] = []

    def lose_the_first(self: HeldTransaction, second: Any) -> Any:
        if second is not None and not failed:
            failed.append(self.key)
            conn, self._conn = self._conn, None
            assert conn is not None
            conn.close()  # rolls the transaction back
            raise psycopg.OperationalError("server closed the connection (test)")
        return commit(self, second)

    monkeypatch.setattr(HeldTransaction, "_commit", lose_the_first)
    client = await Client.connect(pg_url)
    try:
        async with Worker(client, task_queue="held", workflows=[Chain], activities=[double]):
            workflow_id, handle = await _run_chain(client)
            assert await handle.result() == [8, []]
        assert failed
        assert client.store.held_counts["failed"] == 1
        assert client.store.held_counts["joined"] == 3  # the failed one, and two more
        types = await _types(client, workflow_id)
        assert types.count("ActivityTaskCompleted") == 3
        assert types.count("ActivityTaskScheduled") == 3
        assert types == CHAIN_EVENTS
    finally:
        await client.close()


async def test_the_time_limit_commits_the_outcome_alone_and_a_signal_waits(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workflow code that is slow to start (here: held up before its activation) lets the
    hold's time limit commit the outcome alone; a signal sent meanwhile waits for the run's
    lock, lands after that commit (buffered behind the running task) and is seen by the
    next task. The completion then commits in a transaction of its own."""
    activate = WorkflowRunner._activate
    seen: list[str] = []

    async def slow(self: WorkflowRunner, current: list[Any], *args: Any) -> Any:
        task = current[0]
        if task.held is not None and not seen:
            seen.append(task.run_id)
            signal = asyncio.ensure_future(
                client.get_workflow_handle(task.workflow_id).signal(Chain.note, "late")
            )
            await asyncio.sleep(0.2)  # past HOLD_LIMIT: the outcome commits alone
            assert not task.held.open
            await signal
        return await activate(self, current, *args)

    monkeypatch.setattr(WorkflowRunner, "_activate", slow)
    client = await Client.connect(pg_url)
    try:
        async with Worker(client, task_queue="held", workflows=[Chain], activities=[double]):
            workflow_id, handle = await _run_chain(client, wait_for_signal=True)
            assert await handle.result() == [8, ["late"]]
        counts = client.store.held_counts
        assert counts["expired"] == 1 and not counts["failed"]
        types = await _types(client, workflow_id)
        # The signal came while the first step's task ran: written after its completion.
        first_done = types.index("ActivityTaskCompleted")
        signaled = types.index("WorkflowExecutionSignaled")
        assert types[first_done : signaled + 1] == [
            "ActivityTaskCompleted",
            "WorkflowTaskScheduled",
            "WorkflowTaskStarted",
            "WorkflowTaskCompleted",
            "ActivityTaskScheduled",
            "WorkflowExecutionSignaled",
        ]
        assert types.count("WorkflowExecutionSignaled") == 1
        assert types[-1] == "WorkflowExecutionCompleted"
    finally:
        await client.close()


async def test_closing_the_store_commits_what_it_holds(pg_url: str) -> None:
    """A transaction still held when its store closes is committed, not lost."""
    store = Store(pg_url)
    store.open()
    run_id = uuid.uuid4().hex

    def claim(tx: StoreTx) -> bool:
        return tx.claim_request(run_id, "r1", 1.0)

    async def nothing() -> None:
        raise AssertionError("nothing failed: nothing to record again")

    try:
        holding = await store.hold(claim, (), nothing, run_id)
        assert holding is not None
        claimed, held = holding
        assert claimed and held.open
        assert await store.hold(claim, (), nothing, run_id) is None  # one per key
    finally:
        await asyncio.to_thread(store.close)
    assert not held.open
    again = Store(pg_url)
    again.open()
    try:
        # Claimed already: the held transaction's insert was committed at close.
        assert not await again.transaction(lambda tx: tx.claim_request(run_id, "r1", 2.0))
    finally:
        await asyncio.to_thread(again.close)


async def test_a_held_transaction_ends_while_every_store_thread_waits(pg_url: str) -> None:
    """Every thread of the store's shared pool is taken by a change that waits (as one
    waits for the run lock a held transaction has): the held transaction still commits,
    on threads of its own. Were it to end on the shared pool, it would wait for a thread
    that waits for it."""
    store = Store(pg_url)
    store.open()
    run_id = uuid.uuid4().hex
    release = threading.Event()

    def claim(tx: StoreTx) -> bool:
        return tx.claim_request(run_id, "r1", 1.0)

    async def nothing() -> None:
        raise AssertionError("nothing failed: nothing to record again")

    loop = asyncio.get_running_loop()
    blocked: list[asyncio.Future[bool]] = []
    try:
        holding = await store.hold(claim, (), nothing, run_id)
        assert holding is not None
        _, held = holding
        blocked = [
            loop.run_in_executor(store._executor, release.wait, 30.0)
            # Every thread: ThreadPoolExecutor keeps its size there (fails loudly if not).
            for _ in range(store._executor._max_workers)
        ]
        await asyncio.wait_for(held.commit(), 10)
        assert not held.open
        assert store.held_counts["alone"] == 1 and not store.held_counts["failed"]
        assert not any(f.done() for f in blocked)  # the shared threads were taken all along
        release.set()
        await asyncio.gather(*blocked)
        assert not await store.transaction(lambda tx: tx.claim_request(run_id, "r1", 2.0))
    finally:
        release.set()
        await asyncio.gather(*blocked, return_exceptions=True)
        await asyncio.to_thread(store.close)


async def test_a_hold_whose_caller_is_cancelled_still_commits(pg_url: str) -> None:
    """The caller of ``Store.hold`` is cancelled while the first change runs: the change
    commits anyway once it has run, and the store can hold for that key again."""
    store = Store(pg_url)
    store.open()
    run_id = uuid.uuid4().hex

    def slow_claim(tx: StoreTx) -> bool:
        time.sleep(0.2)
        return tx.claim_request(run_id, "r1", 1.0)

    async def nothing() -> None:
        raise AssertionError("nothing failed: nothing to record again")

    try:
        caller = asyncio.ensure_future(store.hold(slow_claim, (), nothing, run_id))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        for _ in range(200):
            if not store._held_keys:
                break
            await asyncio.sleep(0.01)
        assert not store._held_keys and not store._held
        assert store.held_counts["alone"] == 1
        assert not await store.transaction(lambda tx: tx.claim_request(run_id, "r1", 2.0))
    finally:
        await asyncio.to_thread(store.close)


async def test_a_held_transaction_merges_writes_to_the_same_rows(pg_url: str) -> None:
    """Within a held transaction a workflow task inserted and then deleted is never sent,
    and two updates of one run become one (the statements held back show it)."""
    store = Store(pg_url)
    store.open()
    try:
        conn = store.engine.connect()
        try:
            with conn.begin():
                tx = StoreTx(conn, postgres=True)
                tx.known_runs = {}
                tx.update_execution("r1", next_event_id=5, history_size_bytes=10)
                tx.insert_workflow_task(run_id="r1", namespace="default", state=1, attempt=1)
                tx.update_workflow_task("r1", buffered=1)
                tx.update_execution("r1", next_event_id=7, status=2)
                tx.delete_workflow_task("r1")
                held_back = list(tx._deferred or [])
                tx._deferred = []  # nothing to send: the rows do not exist
        finally:
            conn.close()
    finally:
        await asyncio.to_thread(store.close)
    assert len(held_back) == 1
    text, params = held_back[0]
    assert text.startswith("UPDATE dn_executions SET ")
    assert params == {
        "next_event_id": 7,
        "history_size_bytes": 10,
        "status": 2,
        "w_run_id": "r1",
    }
