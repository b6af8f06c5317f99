"""Runs locked ahead (``engine._store.ahead``): a PostgreSQL batch locks and reads the runs
its changes name in one round trip; each run's first lock takes what was read, a later
lock of the same run reads again; a lock ahead that waits too long sends the changes that
named runs back to the queue, and the others commit meanwhile."""

from __future__ import annotations

import asyncio
import threading
import uuid
from functools import partial
from typing import Any

import psycopg
import pytest

from engine import Client, Worker, workflow
from engine._store import ahead
from engine._store import tx as tx_module
from engine._store.ahead import RunLock, lock_hint, wanted_by
from engine._store.queries import LEFTOVERS_OF_RUN, LOCK_EXEC
from engine._store.tx import StoreTx

from .batching import OneActivity, activity_tasks, one_batch


@workflow.defn
class Idle:
    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _runs_sent(monkeypatch: pytest.MonkeyPatch, one: Any, many: Any) -> list[str]:
    """Every run id a statement was sent for, in order: ``one`` (for the run of its
    ``run_id``) or ``many`` (a lock ahead's, for each of its ``runs``)."""
    sent: list[str] = []
    execute, bound = tx_module._execute, tx_module.bound

    def note(sql: str, params: Any) -> None:
        if sql == one.pg:
            sent.append(params["run_id"])
        elif sql == many.pg:
            sent.extend(params["runs"])

    def spy(cur: Any, sql: str, params: Any) -> None:
        note(sql, params)
        execute(cur, sql, params)

    def spy_bound(cur: Any, sql: str, params: Any) -> list[str]:
        note(sql, params)  # (statements sent together, as one query)
        return bound(cur, sql, params)

    monkeypatch.setattr(tx_module, "_execute", spy)
    monkeypatch.setattr(tx_module, "bound", spy_bound)
    return sent


def _pipelines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many statements each pipeline of reads (``StoreTx._q_many``) sent."""
    pipelines: list[int] = []
    q_many = StoreTx._q_many

    def count(self: StoreTx, *statements: Any) -> Any:
        pipelines.append(len(statements))
        return q_many(self, *statements)

    monkeypatch.setattr(StoreTx, "_q_many", count)
    return pipelines


def _named(tx: StoreTx, run_id: str) -> tuple[int, int]:
    """Lock a run (as every change to it begins); its next event id and task state."""
    row, wft = tx.lock_execution_and_workflow_task(run_id)
    assert row is not None and wft is not None
    return int(row.next_event_id), int(wft.state)


_named.lock_hint = lambda run_id: [(run_id, None)]  # type: ignore[attr-defined]


async def _started_runs(client: Client, n: int) -> list[str]:
    """``n`` runs, each with a workflow task scheduled (no worker runs them)."""
    runs = []
    for _ in range(n):
        handle = await client.start_workflow(
            Idle.run, id=f"ahead-{uuid.uuid4().hex[:8]}", task_queue="nobody-polls"
        )
        assert handle.result_run_id is not None
        runs.append(handle.result_run_id)
    return runs


def test_the_hint_is_found_behind_bound_methods_and_partials() -> None:
    class Ops:
        def change(self, tx: StoreTx, run_id: str) -> None: ...

    Ops.change.lock_hint = lambda run_id: [(run_id, 7)]  # type: ignore[attr-defined]
    ops = Ops()
    assert lock_hint(ops.change) is not None
    assert lock_hint(partial(Ops.change, ops)) is not None
    assert lock_hint(lambda tx: None) is None
    # Every run named once, with each activity asked for; a hint that fails names nothing.
    broken = partial(Ops.change, ops)
    wanted = wanted_by(
        [(ops.change, ("r2",)), (ops.change, ("r1",)), (ops.change, ("r2",)), (broken, ())]
    )
    assert sorted(wanted) == ["r1", "r2"]
    assert wanted["r2"].activities == [7]


async def test_a_batch_locks_the_runs_its_changes_name_in_one_round_trip(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = await Client.connect(pg_url)
    try:
        runs = await _started_runs(client, 4)
        locked = _runs_sent(monkeypatch, LOCK_EXEC, ahead._LOCK_RUNS)
        pipelines = _pipelines(monkeypatch)
        results = await one_batch(client, [client.store.transaction(_named, r) for r in runs])
        fresh = await client.store.read(
            lambda tx: [(tx.get_execution(r), tx.get_workflow_task(r)) for r in runs]
        )
        # What each change read ahead is what the runs hold.
        assert results == [(int(row.next_event_id), int(wft.state)) for row, wft in fresh]
        # Each run locked once, by one statement, in run id order; no change read again.
        assert locked == sorted(runs)
        assert pipelines == [2]  # the runs, their tasks
    finally:
        await client.close()


async def test_a_second_change_to_a_run_in_the_batch_reads_what_the_first_wrote(
    pg_url: str,
) -> None:
    client = await Client.connect(pg_url)
    try:
        (run_id,) = await _started_runs(client, 1)

        def bump(tx: StoreTx, run_id: str) -> int:
            got, _ = _named(tx, run_id)
            tx.update_execution(run_id, next_event_id=got + 10)
            return got

        bump.lock_hint = _named.lock_hint  # type: ignore[attr-defined]
        first, second = await one_batch(
            client, [client.store.transaction(bump, run_id) for _ in range(2)]
        )
        assert second == first + 10
    finally:
        await client.close()


async def test_activity_outcomes_batched_together_lock_their_runs_ahead(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three activities' results recorded in one batch: their runs and activity rows are
    read ahead, each outcome uses what was read, and the workflows complete."""
    client = await Client.connect(pg_url)
    queue = "acts-" + uuid.uuid4().hex[:6]
    try:
        async with Worker(client, task_queue="ahead-wf", workflows=[OneActivity]):
            handles, tasks = await activity_tasks(client, 3, queue, "ahead-wf", "ahead")
            served: list[tuple[str, int, bool]] = []
            lock = StoreTx.lock_execution_and_workflow_task

            def spy(self: StoreTx, run_id: str, activity: int | None = None, *a: Any) -> Any:
                if activity is not None:
                    served.append((run_id, activity, run_id in self._prefetched_runs))
                return lock(self, run_id, activity, *a)

            monkeypatch.setattr(StoreTx, "lock_execution_and_workflow_task", spy)
            payload = client.data_converter.to_payloads_json([41])
            results = await one_batch(
                client, [client.service.complete_activity(t, payload) for t in tasks]
            )
            assert results == [None, None, None]
            assert sorted(served) == sorted((t.run_id, t.scheduled_event_id, True) for t in tasks)
            assert [await asyncio.wait_for(h.result(), 30) for h in handles] == [41, 41, 41]
    finally:
        await client.close()


async def test_a_lock_ahead_that_waits_too_long_sends_the_named_changes_back(
    pg_url: str,
) -> None:
    """Another connection holds one of the runs. The batch's lock ahead gives up its wait;
    the change that named no run commits at once, the named ones run alone: the one on a
    free run commits while the lock is held, the other once it is released."""
    client = await Client.connect(pg_url)
    try:
        free, held = await _started_runs(client, 2)
        holder = await asyncio.to_thread(psycopg.connect, _plain(pg_url))
        try:
            await asyncio.to_thread(
                holder.execute, "SELECT 1 FROM dn_executions WHERE run_id = %s FOR UPDATE", (held,)
            )
            released = threading.Event()
            marks = [f"ns-{uuid.uuid4().hex[:8]}" for _ in range(3)]

            def unnamed(tx: StoreTx, mark: str) -> bool:
                tx.insert_namespace(mark, 60.0, 0.0)
                return released.is_set()

            def named(tx: StoreTx, run_id: str, mark: str) -> bool:
                _named(tx, run_id)
                tx.insert_namespace(mark, 60.0, 0.0)
                return released.is_set()

            named.lock_hint = lambda run_id, mark: [(run_id, None)]  # type: ignore[attr-defined]
            calls = [
                client.store.transaction(named, held, marks[0]),
                client.store.transaction(unnamed, marks[1]),
                client.store.transaction(named, free, marks[2]),
            ]
            batch = asyncio.ensure_future(one_batch(client, calls))
            for _ in range(1000):  # the two that need no held lock commit
                found = await client.store.read(lambda tx: [tx.get_namespace(m) for m in marks])
                if found[1] is not None and found[2] is not None:
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the changes beside the held run did not commit")
            assert found[0] is None and not batch.done()  # the one on the held run waits
            released.set()
            await asyncio.to_thread(holder.rollback)
            assert await batch == [True, False, False]
        finally:
            await asyncio.to_thread(holder.close)
    finally:
        await client.close()


async def test_a_poll_reads_the_runs_and_histories_of_its_tasks_in_one_round_trip(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A poll that claims several workflow tasks locks their runs and reads their histories
    together; each task carries its run's whole history, as a read of it afterwards."""
    client = await Client.connect(pg_url)
    try:
        runs = await _started_runs(client, 3)
        for run_id in runs:  # more history than the start wrote
            await client.get_workflow_handle(
                (await client.store.read(lambda tx, r=run_id: tx.get_execution(r))).workflow_id
            ).signal("nudge", "x")
        pipelines = _pipelines(monkeypatch)
        tasks = await client.service.poll_workflow_tasks("default", "nobody-polls", "test", {}, 10)
        monkeypatch.undo()
        assert sorted(t.run_id for t in tasks) == sorted(runs)
        assert pipelines == [3]  # the runs, their tasks, their histories: all at once
        for task in tasks:
            stored = (await client.get_workflow_handle(task.workflow_id).fetch_history()).events
            assert [(e.event_id, e.event_type) for e in task.events] == [
                (e.event_id, e.event_type) for e in stored
            ]
            assert [e.event_type for e in task.events] == [
                "WorkflowExecutionStarted",
                "WorkflowTaskScheduled",
                "WorkflowExecutionSignaled",
                "WorkflowTaskStarted",
            ]
    finally:
        await client.close()


async def test_an_activity_row_written_without_its_runs_lock_is_read_again(
    pg_url: str,
) -> None:
    """Claiming an activity writes its row without locking its run. In a batch where a
    change claims it after the runs were locked ahead, a later change reads the row as the
    claim left it, not as it was read ahead."""
    client = await Client.connect(pg_url)
    queue = "acts-" + uuid.uuid4().hex[:6]
    try:
        async with Worker(client, task_queue="ahead-wf", workflows=[OneActivity]):
            handle = await client.start_workflow(
                OneActivity.run, queue, id=f"ahead-{uuid.uuid4().hex[:8]}", task_queue="ahead-wf"
            )
            for _ in range(500):
                events = (await handle.fetch_history()).events
                scheduled = [e for e in events if e.event_type == "ActivityTaskScheduled"]
                if scheduled:
                    break
                await asyncio.sleep(0.01)
            run_id, sched = handle.result_run_id, scheduled[0].event_id
            assert run_id is not None

        def reads_identity(tx: StoreTx, run_id: str, sched: int) -> str | None:
            tx.lock_execution_and_workflow_task(run_id, sched)
            act = tx.get_activity_task(run_id, sched)
            assert act is not None
            return act.identity

        reads_identity.lock_hint = lambda run_id, sched: [(run_id, sched)]  # type: ignore[attr-defined]
        claimed, identity = await one_batch(
            client,
            [
                client.service.poll_activity_tasks("default", queue, "claimer", 10),
                client.store.transaction(reads_identity, run_id, sched),
            ],
        )
        assert len(claimed) == 1
        assert identity == "claimer"
    finally:
        await client.close()


async def test_a_closing_change_reads_what_its_run_leaves_pending_ahead(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change that says it may close its run has what the run leaves pending (activities,
    timers, open children) read with the lock ahead; one that adds a timer to the run
    first reads it again, and sees the timer."""
    client = await Client.connect(pg_url)
    try:
        runs = await _started_runs(client, 2)

        def closing(tx: StoreTx, run_id: str, add_timer: bool) -> tuple[bool, bool, bool]:
            tx.lock_execution_and_workflow_task(run_id)
            if add_timer:
                tx.insert_timer(run_id, "user", 1, 1, 1e12, None)
            return tx.leftovers_of_run(run_id)

        closing.lock_hint = lambda run_id, _: [RunLock(run_id, closes=True)]  # type: ignore[attr-defined]
        sent = _runs_sent(monkeypatch, LEFTOVERS_OF_RUN, ahead._LEFTOVERS)
        results = await one_batch(
            client,
            [
                client.store.transaction(closing, runs[0], False),
                client.store.transaction(closing, runs[1], True),
            ],
        )
        assert results == [(False, False, False), (False, True, False)]
        # Both read ahead, in run id order; the one with a new timer read again.
        assert sent == [*sorted(runs), runs[1]]
    finally:
        await client.close()


def _latest_served(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Each locking ``find_latest_run``: (workflow id, whether it took what was read ahead)."""
    served: list[tuple[str, bool]] = []
    find = StoreTx.find_latest_run

    def spy(self: StoreTx, namespace: str, workflow_id: str, *, lock: bool = False) -> Any:
        if lock:
            served.append((workflow_id, (namespace, workflow_id) in self._ahead_latest))
        return find(self, namespace, workflow_id, lock=lock)

    monkeypatch.setattr(StoreTx, "find_latest_run", spy)
    return served


async def test_starts_batched_together_read_their_workflow_ids_latest_runs_ahead(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starts of new workflow ids, of one whose run closed, and a second start of an id
    started earlier in the same batch: the first ones take what was read ahead; the second
    start of an id reads again, sees the run the first one started, and is refused."""
    client = await Client.connect(pg_url)
    try:
        closed = f"ahead-{uuid.uuid4().hex[:8]}"
        old = await client.start_workflow(Idle.run, id=closed, task_queue="nobody-polls")
        await old.terminate("make room")
        served = _latest_served(monkeypatch)
        fresh = [f"ahead-{uuid.uuid4().hex[:8]}" for _ in range(2)]
        results = await one_batch(
            client,
            [
                client.start_workflow(Idle.run, id=fresh[0], task_queue="nobody-polls"),
                client.start_workflow(Idle.run, id=closed, task_queue="nobody-polls"),
                client.start_workflow(Idle.run, id=fresh[1], task_queue="nobody-polls"),
                client.start_workflow(Idle.run, id=fresh[0], task_queue="nobody-polls"),
            ],
        )
        assert [type(r).__name__ for r in results] == [
            "WorkflowHandle",
            "WorkflowHandle",
            "WorkflowHandle",
            "WorkflowAlreadyStartedError",
        ]
        assert served == [(fresh[0], True), (closed, True), (fresh[1], True), (fresh[0], False)]
        again = await client.get_workflow_handle(closed).describe()
        assert again.run_id != old.result_run_id and again.status.name == "RUNNING"
    finally:
        await client.close()


async def test_a_start_after_its_workflow_ids_run_closed_in_the_same_batch(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The latest run of an id is terminated, then the id started again, in one batch: the
    start does not take the run read ahead (open then), reads again and starts a new run."""
    client = await Client.connect(pg_url)
    try:
        wid = f"ahead-{uuid.uuid4().hex[:8]}"
        first = await client.start_workflow(Idle.run, id=wid, task_queue="nobody-polls")
        served = _latest_served(monkeypatch)
        terminated, second = await one_batch(
            client,
            [
                first.terminate("again"),
                client.start_workflow(Idle.run, id=wid, task_queue="nobody-polls"),
            ],
        )
        assert terminated is None
        assert second.result_run_id != first.result_run_id
        assert (wid, False) in served  # read again
        was = client.get_workflow_handle(wid, run_id=first.result_run_id)
        assert (await was.describe()).status.name == "TERMINATED"
    finally:
        await client.close()
