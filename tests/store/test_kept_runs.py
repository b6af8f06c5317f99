"""SQLite: the writer keeps each run's rows (and its pending activities') as its own commits
left them, so the next change to the run reads nothing (``KnownRuns`` in ``engine._store.sqlite_writer``); what another
connection committed, or a rolled-back transaction, makes it forget them.

Throughout the suite, ``tests/conftest.py`` also reads the rows again at every use of the
kept ones and fails the test where they differ."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from types import MethodType
from typing import Any

import pytest
import sqlalchemy as sa

from engine import Client, Worker, activity, workflow
from engine._store.gateway import Store
from engine._store.queries import _ACT_COLS, LOCK_EXEC_WFT, Q
from engine._store.rows import ActRow, ExecRow, act_row, as_stored, exec_row
from engine._store.schema import metadata
from engine._store.sqlite_writer import KnownRuns, SqliteWriter, _immediate, keeps_runs
from engine._store.tx import StoreTx

from .test_sqlite_inline import _ready, _writer


@workflow.defn
class NeverRuns:
    """Started on a queue no worker polls: its signals are what the tests change."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal
    def poke(self, n: int) -> None:
        pass


@pytest.fixture
async def two_clients(tmp_path: Path) -> AsyncIterator[tuple[Client, Client]]:
    """Two clients on one SQLite file with a store each (one with ``fsync``: clients of
    one process share a store per URL and setting), so each has its own writer and
    connection, as two processes would."""
    url = f"sqlite:///{tmp_path / 'durable.db'}"
    first = await Client.connect(url)
    second = await Client.connect(url, fsync=True)
    assert first.store is not second.store
    try:
        yield first, second
    finally:
        await second.close()
        await first.close()


async def test_a_change_another_connection_committed_is_not_overlooked(
    two_clients: tuple[Client, Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = two_clients
    known = _writer(first.store).known
    rolled_back: list[bool] = []
    forget = known.forget
    monkeypatch.setattr(known, "forget", lambda: (rolled_back.append(True), forget())[1])
    handle = await first.start_workflow(
        NeverRuns.run, id="kept-1", task_queue="nobody-polls", request_eager_start=False
    )
    await first.get_workflow_handle("kept-1").signal(NeverRuns.poke, 1)
    assert handle.first_execution_run_id in known.rows  # kept as the first writer left it
    # The other writer appends to the run's history behind the first one's back.
    await second.get_workflow_handle("kept-1").signal(NeverRuns.poke, 2)
    # The first writer's next change reads the run afresh: kept, it would take the run's
    # next event id as it was, fail on the history's key and be run again.
    await first.get_workflow_handle("kept-1").signal(NeverRuns.poke, 3)
    assert rolled_back == []
    events = (await handle.fetch_history()).events
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    signals = [e for e in events if e.event_type == "WorkflowExecutionSignaled"]
    assert [s.attributes["input"]["payloads"][0]["data"] for s in signals] == [
        "MQ==",  # 1, 2, 3 as JSON payloads
        "Mg==",
        "Mw==",
    ]
    await handle.terminate()


async def test_a_transaction_rolled_back_forgets_what_its_changes_kept(tmp_path: Path) -> None:
    client = await Client.connect(f"sqlite:///{tmp_path / 'durable.db'}")
    try:
        store: Store = client.store
        await _ready(store)
        writer: SqliteWriter = _writer(store)
        known = writer.known
        with writer._conn_lock:
            conn = writer._conn
            assert conn is not None
            with pytest.raises(RuntimeError), _immediate(conn, known):
                known.rows["some-run"] = ("row", None)  # as a change's flush would
                known.acts["some-run"] = {5: "row"}
                raise RuntimeError("the change fails after keeping a row")
        assert known.rows == {} and known.acts == {}
    finally:
        await client.close()


def test_known_runs_forget_when_another_connection_commits(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    mine = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None)
    mine.execute("CREATE TABLE t (x INTEGER)")
    known = KnownRuns()
    known.begin(mine)
    known.rows["r"] = ("row", None)
    known.acts["r"] = {5: "row"}
    mine.execute("INSERT INTO t VALUES (1)")  # its own commit: still trusted
    known.begin(mine)
    assert "r" in known.rows
    other.execute("INSERT INTO t VALUES (2)")
    known.begin(mine)
    assert known.rows == {} and known.acts == {}
    mine.close()
    other.close()


def _written_and_read_back(tmp_path: Path, table: str, values: dict[str, Any]) -> tuple:
    """``values`` (every column of ``table``, in order) inserted into a new SQLite file
    with the engine's schema and read back as the driver gives them."""
    path = tmp_path / f"{table}.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    metadata.create_all(engine, tables=[metadata.tables[table]])
    engine.dispose()
    conn = sqlite3.connect(path)
    try:
        marks = ", ".join("?" * len(values))
        conn.execute(
            f"INSERT INTO {table} ({', '.join(values)}) VALUES ({marks})", list(values.values())
        )
        return tuple(conn.execute(f"SELECT {', '.join(values)} FROM {table}").fetchone())
    finally:
        conn.close()


def test_kept_rows_have_the_types_the_database_gives_back(tmp_path: Path) -> None:
    """A row built from the values a change wrote reads as a row read back would: an
    integer in a float column is a float, a bool or whole float in an integer one an int."""
    values = {name: None for name in ExecRow._fields}
    values.update(
        run_id="r",
        namespace="default",
        workflow_id="w",
        workflow_type="T",
        task_queue="q",
        status=True,  # a bool: reads back as 1
        start_time=5,  # an int in a float column: reads back as 5.0
        first_run_id="r",
        next_event_id=3.0,  # a whole float in an integer column: reads back as 3
        history_size_bytes=10,
        workflow_task_timeout=10,
    )
    read = _written_and_read_back(tmp_path, "dn_executions", values)
    assert [(type(v), v) for v in exec_row(values)] == [(type(v), v) for v in read]
    assert as_stored("dn_executions", {"close_time": 7, "status": 2.0}) == {
        "close_time": 7.0,
        "status": 2,
    }


def test_the_read_a_kept_row_replaces_selects_the_rows_columns_in_order() -> None:
    """The SQLite read of a run and its task gives the run's columns first, in the order
    of :data:`ExecRow` (the writer cuts the joined row there)."""
    assert LOCK_EXEC_WFT.sqlite.startswith(
        "SELECT " + ", ".join(f"e.{name}" for name in ExecRow._fields) + ", "
    )


async def test_a_change_with_its_own_sql_makes_the_writer_forget(tmp_path: Path) -> None:
    """Only the service's operations write runs' rows through ``StoreTx``'s methods alone;
    any other change (a tool's, a test's own SQL) may write them its own way."""
    client = await Client.connect(f"sqlite:///{tmp_path / 'durable.db'}")
    try:
        handle = await client.start_workflow(
            NeverRuns.run, id="own-sql", task_queue="nobody-polls", request_eager_start=False
        )
        known = _writer(client.store).known
        assert handle.first_execution_run_id in known.rows
        operation = client.service.signal_workflow.__wrapped__  # type: ignore[attr-defined]
        assert keeps_runs(MethodType(operation, client.service))  # as operations hand it

        def own_sql(tx: StoreTx) -> None:
            tx._w(Q("UPDATE dn_executions SET memo = NULL WHERE workflow_id = 'own-sql'"))

        assert not keeps_runs(own_sql)
        known.acts["some-run"] = {5: "row"}
        await client.store.transaction(own_sql)
        assert known.rows == {} and known.acts == {}
        await handle.terminate()
    finally:
        await client.close()


def test_a_kept_activity_row_has_the_types_sqlite_gives_back(tmp_path: Path) -> None:
    """An activity row built from the values written reads as SQLite gives it back: its
    ``cancel_requested`` (a Boolean) as 0 or 1, durations given as integers as floats."""
    values: dict[str, Any] = {name: None for name in ActRow._fields}
    values.update(
        run_id="r",
        scheduled_event_id=5,
        namespace="default",
        workflow_id="w",
        workflow_type="T",
        activity_id="1",
        activity_type="noop",
        task_queue="q",
        input="[]",
        state=2,
        attempt=1,
        visible_at=3,
        scheduled_time=3.5,
        attempt_scheduled_time=3.5,
        start_to_close=30,
        retry_policy="{}",
        cancel_requested=False,
    )
    read = _written_and_read_back(tmp_path, "dn_activity_tasks", values)
    assert [(type(v), v) for v in act_row(values)] == [(type(v), v) for v in read]
    assert ActRow._fields == tuple(_ACT_COLS.split(", "))  # the order its reads select


@activity.defn
async def never_picked_up() -> None:
    """Scheduled on a queue no worker polls."""


@workflow.defn
class SchedulesForNobody:
    @workflow.run
    async def run(self) -> None:
        await workflow.execute_activity(
            never_picked_up, task_queue="nobody-polls", start_to_close_timeout=timedelta(seconds=9)
        )


async def test_only_running_attempts_are_kept(tmp_path: Path) -> None:
    """An activity waiting for a worker is not kept (a backlog could be any size, each
    row with its input); one that started is, until it ends."""
    client = await Client.connect(f"sqlite:///{tmp_path / 'durable.db'}")
    try:
        async with Worker(client, task_queue="tq", workflows=[SchedulesForNobody]):
            handle = await client.start_workflow(
                SchedulesForNobody.run, id="nobody", task_queue="tq"
            )
            for _ in range(500):
                events = (await handle.fetch_history()).events
                if any(e.event_type == "ActivityTaskScheduled" for e in events):
                    break
                await asyncio.sleep(0.01)
            known = _writer(client.store).known
            assert handle.first_execution_run_id in known.rows
            assert handle.first_execution_run_id not in known.acts
            async with Worker(client, task_queue="nobody-polls", activities=[never_picked_up]):
                await handle.result()
            assert handle.first_execution_run_id not in known.acts  # ended: dropped
    finally:
        await client.close()
