"""A timer's workflow task reaches its worker before the timer is due, while the firing
pass waits to commit (``ServiceHost._hand_out_early``, ``engine._store.held.Committing``),
and its workflow code runs from the due time on (the task's ``not_before``), on both
backends; on PostgreSQL also while the pass's ``COMMIT`` is still on its way. The
completion waits for the commit; if the commit fails, the worker drops the task and the
timer fires again through the queue, once; if a PostgreSQL commit's answer is lost,
PostgreSQL is asked whether the pass's transaction committed."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg.errors
import pytest

from engine import Client, Worker, activity, workflow
from engine._service import host
from engine._store.held import Committing
from engine._store.tx import StoreTx
from engine._worker.workflows import WorkflowRunner


@workflow.defn
class SleepsOnce:
    @workflow.run
    async def run(self) -> float:
        await workflow.sleep(timedelta(seconds=0.3))
        # The wall clock, NON-DETERMINISTIC in workflow code: read here only to see when
        # the code ran (the result feeds nothing else; nothing replays it in this test).
        return time.time()


#: What the local activity below was called with, in this process.
CALLS: list[str] = []


@activity.defn
async def note(text: str) -> str:
    CALLS.append(text)
    return text


@workflow.defn
class SleepsThenNotes:
    @workflow.run
    async def run(self) -> str:
        await workflow.sleep(timedelta(seconds=0.3))
        return await workflow.execute_local_activity(
            note, "after the sleep", start_to_close_timeout=timedelta(seconds=10)
        )


class _Commits:
    """Watches the COMMIT of firing passes started ahead (those that wait to commit):
    optionally fails the first one, and slows each down so the hand-over shows."""

    def __init__(self, fail_first: bool, delay: float, lose: str = "") -> None:
        self.fail_first = fail_first
        self.delay = delay
        #: The first COMMIT seems lost with the connection (the same error either way):
        #: "commit", on its way (nothing committed); "answer", after the server committed.
        self.lose = lose
        self.lost = 0
        self.returned: list[float] = []  # wall-clock times the COMMITs came back
        self.failed = 0
        self._lock = threading.Lock()

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        pipelined = StoreTx._pipelined
        commits = self
        # The first pass of a process starts 20 ms ahead (not 4): a loop that wakes late on
        # a busy machine still starts it ahead.
        monkeypatch.setattr(host, "PREFIRE_FIRST", host.PREFIRE_MAX)

        def watched(tx: StoreTx, sql: Any, params: Any, tail: Any = ()) -> None:
            if tx._commit_at is None or tuple(tail) != ("COMMIT",):
                pipelined(tx, sql, params, tail)
                return
            time.sleep(commits.delay)  # the COMMIT is slow on its way
            with commits._lock:
                fail = commits.fail_first and not commits.failed
                commits.failed += fail
            if fail:
                raise psycopg.errors.SerializationFailure("injected: the commit failed")
            commits._lose_first("commit")
            pipelined(tx, sql, params, tail)
            commits.returned.append(time.time())
            commits._lose_first("answer")

        monkeypatch.setattr(StoreTx, "_pipelined", watched)

    def _lose_first(self, where: str) -> None:
        """Raise a lost connection here, if this is where the first COMMIT is lost."""
        with self._lock:
            lose = self.lose == where and not self.lost
            self.lost += lose
        if lose:
            raise psycopg.OperationalError("injected: the connection was lost")


def _watch_probe(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What the timer loop's probes of commits whose answer was lost came to."""
    answers: list[bool] = []
    probe = host.ServiceHost._committed

    async def watched(self: host.ServiceHost, xid: Any) -> bool:
        answer = await probe(self, xid)
        answers.append(answer)
        return answer

    monkeypatch.setattr(host.ServiceHost, "_committed", watched)
    return answers


async def _run(url: str, wf: Any = SleepsOnce) -> tuple[Any, list[str]]:
    async with await Client.connect(url) as client:
        queue = f"q-{uuid.uuid4().hex[:6]}"
        worker = Worker(client, task_queue=queue, workflows=[wf], activities=[note])
        async with worker:
            handle = await client.start_workflow(wf.run, id="sleeper", task_queue=queue)
            ran_at = await asyncio.wait_for(handle.result(), 30)
            types = [e.event_type async for e in handle.fetch_history_events()]
            # No workflow task is left waiting in the worker (for a commit, say).
            runner = worker._workflows
            assert runner is not None
            for _ in range(100):
                if not runner._inflight:
                    break
                await asyncio.sleep(0.01)
            assert not runner._inflight, runner._inflight
    return ran_at, types


@workflow.defn
class SleepsOnceMonotonic:
    @workflow.run
    async def run(self) -> float:
        await workflow.sleep(timedelta(seconds=0.3))
        # NON-DETERMINISTIC in workflow code: read here only to see when the code ran.
        return time.monotonic()


def _watch_hand_outs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """(when, not before when) of each task handed to a worker with a time to wait for
    (``time.monotonic()``); passes start 200 ms ahead, so that a busy machine's loop
    still takes their tasks before they are due."""
    monkeypatch.setattr(host, "PREFIRE_FIRST", 0.2)
    monkeypatch.setattr(host, "PREFIRE_MAX", 0.2)
    handed: list[tuple[float, float]] = []
    settle = WorkflowRunner.settle_workflow_task

    def watched(self: WorkflowRunner, reservation: Any, task: Any) -> None:
        if task is not None and task.not_before is not None:
            handed.append((time.monotonic(), task.not_before))
        settle(self, reservation, task)

    monkeypatch.setattr(WorkflowRunner, "settle_workflow_task", watched)
    return handed


async def test_a_timers_task_reaches_its_worker_before_it_is_due_and_runs_from_then(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker has the task before the due time (its event loop prepares it while the
    pass waits to commit) and its activation thread starts the code at the due time."""
    handed = _watch_hand_outs(monkeypatch)
    ran_at, types = await _run(db_url, SleepsOnceMonotonic)
    assert len(handed) == 1, handed
    (at, not_before) = handed[0]
    assert at < not_before, "handed out after the due time"
    assert ran_at >= not_before, "the workflow code ran before the timer was due"
    assert types.count("TimerFired") == 1 and types[-1] == "WorkflowExecutionCompleted"
    assert types.count("WorkflowTaskCompleted") == 2, types


class _SqliteCommits:
    """SQLite: fails the commit of the first firing pass started ahead, after it handed its
    tasks out (``error``: the database seems locked, which the store's writer waits out
    and runs the pass again; or a disk error, which reaches the timer loop)."""

    def __init__(self, error: str) -> None:
        self.error = error
        self.failed = 0

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        wait = StoreTx.wait_to_commit
        commits = self

        def failing(tx: StoreTx) -> None:
            wait(tx)
            if tx._commit_at is not None and tx._commit_at.handed_out and not commits.failed:
                commits.failed += 1
                raise sqlite3.OperationalError(commits.error)

        monkeypatch.setattr(StoreTx, "wait_to_commit", failing)


@pytest.mark.parametrize("error", ["database is locked", "disk I/O error"])
async def test_sqlite_a_task_handed_out_before_a_failed_commit_is_dropped(
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: str,
) -> None:
    handed = _watch_hand_outs(monkeypatch)
    commits = _SqliteCommits(error)
    commits.install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="engine"):
        _, types = await _run(f"sqlite:///{tmp_path / 'd.db'}", SleepsOnceMonotonic)
    assert commits.failed == 1 and len(handed) == 1
    dropped = [r for r in caplog.records if "workflow task dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in caplog.records]
    # The timer fired once (the pass that committed), the run went on from the task that
    # came through the queue, at once (no task timed out).
    assert types.count("TimerFired") == 1, types
    assert "WorkflowTaskTimedOut" not in types, types
    assert types.count("WorkflowTaskCompleted") == 2, types
    assert types[-1] == "WorkflowExecutionCompleted"


async def test_the_workflow_code_runs_while_the_commit_travels(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    commits = _Commits(fail_first=False, delay=0.5)
    commits.install(monkeypatch)
    ran_at, types = await _run(pg_url)
    assert commits.returned, "no firing pass started ahead"
    # The code after the sleep ran before the pass's COMMIT came back.
    assert ran_at < commits.returned[0], (ran_at, commits.returned)
    assert types.count("TimerFired") == 1 and types[-1] == "WorkflowExecutionCompleted"


async def test_a_task_handed_out_before_a_failed_commit_is_dropped(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    commits = _Commits(fail_first=True, delay=0.05)
    commits.install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="engine"):
        _, types = await _run(pg_url)
    assert commits.failed == 1
    # The worker had the task and dropped it (and nothing went wrong in the timer loop).
    dropped = [r for r in caplog.records if "workflow task dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # The store ran the pass again (as of the clock, the due time passed): the timer fired
    # once, and the run completed from the task that went through the queue.
    assert types.count("TimerFired") == 1, types
    assert types.count("WorkflowExecutionCompleted") == 1, types
    assert types[-1] == "WorkflowExecutionCompleted"
    # The worker dropped the task at once: it did not wait for it to time out.
    assert "WorkflowTaskTimedOut" not in types, types


async def _run_losing(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, lose: str
) -> tuple[_Commits, list[bool], Any, list[str]]:
    """A run whose timer's pass loses its first COMMIT's connection (``lose``, as
    :class:`_Commits` takes it): the COMMITs, the probes' answers, the result, the history."""
    commits = _Commits(fail_first=False, delay=0.05, lose=lose)
    commits.install(monkeypatch)
    probed = _watch_probe(monkeypatch)
    with caplog.at_level(logging.INFO, logger="engine"):
        ran_at, types = await _run(pg_url)
    assert commits.lost == 1
    return commits, probed, ran_at, types


async def test_a_task_whose_commit_answer_was_lost_is_run_if_it_committed(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection seems lost with the COMMIT sent, but the server committed: the
    timer loop learns so from PostgreSQL (the transaction's id), and the worker completes
    the task instead of dropping it and leaving the run to wait for its timeout."""
    commits, probed, ran_at, types = await _run_losing(pg_url, monkeypatch, caplog, "answer")
    # The task had been handed out (its code ran while the COMMIT travelled), and the
    # worker learnt from PostgreSQL that the transaction committed.
    assert ran_at < commits.returned[0], (ran_at, commits.returned)
    assert probed == [True], probed
    assert not [r for r in caplog.records if "workflow task dropped" in r.getMessage()]
    assert types.count("TimerFired") == 1, types
    assert "WorkflowTaskTimedOut" not in types, types
    assert types.count("WorkflowTaskCompleted") == 2, types
    assert types[-1] == "WorkflowExecutionCompleted"


async def test_a_task_whose_commit_was_lost_is_dropped(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same lost connection, but the COMMIT never reached the server: PostgreSQL says
    the transaction did not commit, the worker drops the task, and the run goes on from
    the queue."""
    _, probed, _, types = await _run_losing(pg_url, monkeypatch, caplog, "commit")
    assert probed == [False], probed
    dropped = [r for r in caplog.records if "workflow task dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in caplog.records]
    assert types.count("TimerFired") == 1, types
    assert "WorkflowTaskTimedOut" not in types, types
    assert types[-1] == "WorkflowExecutionCompleted"


async def test_the_first_word_on_a_commit_counts_even_when_unknown() -> None:
    """A commit reported unknown, then (by the store's rerun of the pass, another
    transaction) committed: the probe's answer about the first transaction counts."""
    committing = Committing(store=None, loop=asyncio.get_running_loop())  # type: ignore[arg-type]

    async def probe() -> bool:
        await asyncio.sleep(0.01)
        return False

    committing.probe = probe
    committing.settle(None)
    committing.settle(True)
    await asyncio.wait_for(committing.commit(), 5)
    assert committing.rolled_back


async def test_no_local_activity_runs_for_a_task_whose_commit_failed(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow code of a task handed out early asks for a local activity: it runs
    only once the commit has come back, and not at all for a task whose commit failed."""
    CALLS.clear()
    commits = _Commits(fail_first=True, delay=0.05)
    commits.install(monkeypatch)
    result, types = await _run(pg_url, SleepsThenNotes)
    assert commits.failed == 1
    assert result == "after the sleep"
    assert CALLS == ["after the sleep"], CALLS
    assert types.count("TimerFired") == 1, types
