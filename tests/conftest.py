"""Shared fixtures: every integration test runs on SQLite and on PostgreSQL.

PostgreSQL tests use a fresh schema per test in the database named by
``DURABLE_TEST_PG_URL`` (default: the local ``test`` database). When PostgreSQL cannot be
reached the tests fail: they never skip.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from engine import Client
from engine.testing import WorkflowEnvironment

PG_URL = os.environ.get("DURABLE_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
#: Real Temporal histories, copied into the repository (tests/data/temporal/README.md says
#: where they came from).
TEMPORAL_DATA = Path(__file__).resolve().parent / "data" / "temporal"


def _pg_schema_url(schema: str) -> str:
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'durable.db'}"
        return
    yield from _fresh_pg_schema()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL schema (for tests about PostgreSQL only)."""
    yield from _fresh_pg_schema()


def _fresh_pg_schema() -> Iterator[str]:
    schema = "t_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
    except sa.exc.OperationalError as err:
        admin.dispose()
        pytest.fail(f"PostgreSQL at {PG_URL} is not reachable: {err.orig}")
    try:
        yield _pg_schema_url(schema)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[Client]:
    """A client on a fresh database (real time)."""
    c = await Client.connect(db_url)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
async def env(db_url: str) -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping environment on a fresh database."""
    e = await WorkflowEnvironment.start_time_skipping(database_url=db_url)
    try:
        yield e
    finally:
        await e.shutdown()


@pytest.fixture
def task_queue() -> str:
    """A task queue name no other test uses."""
    return "tq-" + uuid.uuid4().hex[:10]


@pytest.fixture(autouse=True)
def _events_handed_over_equal_their_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Throughout the suite: the events a change hands to the worker in memory (attributes
    as the service built them) equal what their stored JSON reads back as, so a worker
    that got them from memory sees exactly what one reading the history sees (a tuple, a
    non-string key or a non-JSON value would differ)."""
    from engine._service.state import RunState

    real = RunState.written_events

    def checked(self: RunState, first: int = 1) -> list:
        events = real(self, first)
        stored = {i: text for i, _, _, text in self.written}
        for event in events:
            assert json.loads(stored[event.event_id]) == event.attributes, (
                f"{event.event_type} (event {event.event_id}) differs from its JSON"
            )
        return events

    monkeypatch.setattr(RunState, "written_events", checked)


#: What a change found kept of a run and the database disagreed on (test -> messages).
KEPT_RUN_MISMATCHES: list[str] = []


def _same(kept: object, read: object) -> bool:
    """Equal in value and in type (an int where the database gives a float is a miss)."""
    if isinstance(kept, tuple) and isinstance(read, tuple):
        return len(kept) == len(read) and all(map(_same, kept, read))
    return kept == read and type(kept) is type(read)


@pytest.fixture(autouse=True)
def _kept_runs_equal_the_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Throughout the suite, on SQLite: each time a change takes a run's rows as the
    writer kept them instead of reading them (``StoreTx.known_runs``), they are read as
    well and must equal, value and type, what the database holds: a write the kept rows
    missed shows here, in whatever test makes it."""
    from engine._store.queries import (
        _N_EXEC_COLS,
        _WFT_NAMES,
        GET_ACT_LOCK,
        LOCK_EXEC,
        LOCK_EXEC_WFT,
    )
    from engine._store.tx import StoreTx

    def task(wft: object) -> tuple[object, ...] | None:
        if wft is None:
            return None
        if isinstance(wft, sqlite3.Row):
            return tuple(wft)
        return tuple(getattr(wft, name) for name in _WFT_NAMES)

    def kept(tx: StoreTx, run_id: str) -> bool:
        return bool(tx.known_runs) and not tx.postgres and run_id in tx.known_runs  # type: ignore[operator]

    def differs(run_id: str, what: str, got: object, want: object) -> None:
        if not _same(got, want):
            KEPT_RUN_MISMATCHES.append(f"run {run_id}: kept {what} {got} != read {want}")

    real_both = StoreTx.lock_execution_and_workflow_task
    real_run = StoreTx.lock_execution

    def both(
        self: StoreTx, run_id: str, activity: int | None = None, timer: int | None = None
    ) -> tuple[object, object]:
        was_kept = kept(self, run_id)
        row, wft = real_both(self, run_id, activity, timer)
        if was_kept:
            fresh = self._one(LOCK_EXEC_WFT, {"run_id": run_id})
            values = tuple(fresh) if fresh is not None else ()
            has_task = bool(values) and values[_N_EXEC_COLS] is not None
            differs(run_id, "run", tuple(row) if row else (), values[:_N_EXEC_COLS])
            differs(run_id, "task", task(wft), values[_N_EXEC_COLS:] if has_task else None)
        return row, wft

    def run(self: StoreTx, run_id: str) -> object:
        was_kept = kept(self, run_id)
        row = real_run(self, run_id)
        if was_kept:
            fresh = self._one(LOCK_EXEC, {"run_id": run_id})
            differs(run_id, "run", tuple(row) if row else (), tuple(fresh) if fresh else ())
        return row

    real_act = StoreTx.get_activity_task

    def act(self: StoreTx, run_id: str, sched: int) -> object:
        known = None if self.postgres else self.known_acts
        was_kept = bool(known) and sched in known.get(run_id, {})  # type: ignore[union-attr]
        row = real_act(self, run_id, sched)
        if was_kept:
            fresh = self._one(GET_ACT_LOCK, {"run_id": run_id, "sched": sched})
            got, want = tuple(row) if row else (), tuple(fresh) if fresh else ()
            differs(f"{run_id}/{sched}", "activity", got, want)
        return row

    monkeypatch.setattr(StoreTx, "lock_execution_and_workflow_task", both)
    monkeypatch.setattr(StoreTx, "lock_execution", run)
    monkeypatch.setattr(StoreTx, "get_activity_task", act)
    KEPT_RUN_MISMATCHES.clear()
    yield
    found, KEPT_RUN_MISMATCHES[:] = list(KEPT_RUN_MISMATCHES), []
    assert not found, "rows kept by the SQLite writer differ from the database:\n" + "\n".join(
        found[:5]
    )
