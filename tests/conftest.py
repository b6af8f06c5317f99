"""Shared fixtures: every integration test runs on SQLite and on PostgreSQL.

PostgreSQL tests use a fresh schema per test in the database named by
``DURABLE_TEST_PG_URL`` (default: the local ``test`` database). When PostgreSQL cannot be
reached the tests fail: they never skip.
"""

from __future__ import annotations

import json
import os
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
