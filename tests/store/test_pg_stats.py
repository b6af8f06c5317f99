"""Planner statistics of the engine's PostgreSQL tables (``engine._store.pg_stats``): the
service host analyzes a table once its changes since the last ``ANALYZE`` pass
autovacuum's threshold, also where autovacuum is off server-wide (as on this project's CI
server), so that the planner knows how run ids spread before the tables grow large.
PostgreSQL only: SQLite's planner works without statistics.

Where the test server runs autovacuum, it may analyze a table first: the waits below count
its analyses too (``autoanalyze_count``), and what the keeper must not do is checked on its
own count (``analyze_count``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from engine import Client, Worker, workflow
from engine._service import host as host_module
from engine._store import pg_stats
from engine._store.pg_stats import StatsKeeper

EVENT = (
    "INSERT INTO dn_history_events (run_id, event_id, event_time, event_type, attributes) "
    "SELECT 'run-' || (i / 10), i % 10 + 1, 0, 'WorkflowExecutionStarted', '{}' "
    "FROM generate_series(CAST(:first AS int), CAST(:last AS int)) AS i"
)

# A read of 32 runs' histories shaped like the engine's (a join with the keys).
READ = (
    "EXPLAIN SELECT h.event_id FROM dn_history_events h "
    "JOIN unnest(ARRAY(SELECT 'run-' || i FROM generate_series(1, 32) i), "
    "array_fill(1, ARRAY[32])) AS k(r, f) "
    "ON h.run_id = k.r AND h.event_id >= k.f"
)


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    async def migrate() -> None:
        async with await Client.connect(pg_url):
            pass

    asyncio.run(migrate())  # the engine's tables, in the fixture's schema
    e = sa.create_engine(pg_url)
    try:
        yield e
    finally:
        e.dispose()


def _insert_events(engine: sa.Engine, first: int, last: int) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(EVENT), {"first": first, "last": last})
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))  # counts seen at once


def _analyzed(engine: sa.Engine, table: str, *, auto: bool = False) -> int:
    """How many times ``table`` was analyzed by an ``ANALYZE`` (the keeper's); with
    ``auto``, by autovacuum too."""
    column = "analyze_count + autoanalyze_count" if auto else "analyze_count"
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text(f"SELECT {column} FROM pg_stat_user_tables WHERE relid = to_regclass(:t)"),
                {"t": table},
            ).scalar_one()
        )


def _plan(engine: sa.Engine) -> str:
    with engine.connect() as conn:
        return "\n".join(r[0] for r in conn.execute(sa.text(READ)))


def _run_until(keeper: StatsKeeper, table: str, timeout: float = 10.0) -> dict[str, float]:
    """``run_once`` until it analyzes ``table`` (a backend's counts reach the shared
    statistics within about a second, or at once after ``pg_stat_force_next_flush``), or
    autovacuum does."""
    deadline = time.monotonic() + timeout
    before = _analyzed(keeper.engine, table, auto=True) - _analyzed(keeper.engine, table)
    while True:
        done = keeper.run_once()
        if any(name.endswith("." + table) for name in done):
            return done
        if _analyzed(keeper.engine, table, auto=True) - _analyzed(keeper.engine, table) > before:
            return done
        assert time.monotonic() < deadline, f"{table} was never analyzed"
        time.sleep(0.1)


def test_grown_table_analyzed_once_and_plans_use_its_index(engine: sa.Engine) -> None:
    """Twenty thousand events of two thousand runs, never analyzed: the planner takes a
    couple of hundred distinct run ids for granted and reads 32 runs' histories by
    scanning the whole table. Once the keeper has analyzed it, the read uses the primary
    key; the next look, with nothing changed, analyzes nothing."""
    _insert_events(engine, 0, 19_999)
    assert _analyzed(engine, "dn_history_events") == 0
    assert "Seq Scan on dn_history_events" in _plan(engine)

    keeper = StatsKeeper(engine)
    _run_until(keeper, "dn_history_events")
    analyzed = _analyzed(engine, "dn_history_events")
    plan = _plan(engine)
    assert "Seq Scan on dn_history_events" not in plan
    assert "dn_history_events_pkey" in plan

    assert not any(n.endswith(".dn_history_events") for n in keeper.run_once())
    assert _analyzed(engine, "dn_history_events") == analyzed


@pytest.mark.parametrize("own_settings", [False, True])
def test_threshold_is_autovacuums(engine: sa.Engine, own_settings: bool) -> None:
    """A table analyzed at 1,000 rows waits for more than its threshold plus its scale
    factor times its size to change: ``autovacuum_analyze_threshold`` and
    ``autovacuum_analyze_scale_factor``, the table's own settings where it has them (here
    50 and 0.1, whatever the server's), else the server's (50 and 0.1 by default)."""
    if own_settings:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "ALTER TABLE dn_history_events SET (autovacuum_analyze_threshold = 50, "
                    "autovacuum_analyze_scale_factor = 0.1)"
                )
            )
    else:
        with engine.connect() as conn:
            server = conn.execute(
                sa.text(
                    "SELECT current_setting('autovacuum_analyze_threshold'), "
                    "current_setting('autovacuum_analyze_scale_factor')"
                )
            ).one()
        assert tuple(server) == ("50", "0.1"), "the test assumes the server's defaults"
    _insert_events(engine, 0, 999)
    keeper = StatsKeeper(engine)
    _run_until(keeper, "dn_history_events")
    _insert_events(engine, 1_000, 1_000 + 140)  # 141 rows: under 50 + 100
    time.sleep(0.2)
    assert not any(n.endswith(".dn_history_events") for n in keeper.run_once())
    _insert_events(engine, 1_141, 1_160)  # 161 in all
    _run_until(keeper, "dn_history_events")


def test_own_threshold_higher_than_the_servers(engine: sa.Engine) -> None:
    """A table whose own threshold is higher waits for it."""
    with engine.begin() as conn:
        conn.execute(
            sa.text("ALTER TABLE dn_history_events SET (autovacuum_analyze_threshold = 8000)")
        )
    _insert_events(engine, 0, 4_999)
    keeper = StatsKeeper(engine)
    time.sleep(0.2)
    assert not any(n.endswith(".dn_history_events") for n in keeper.run_once())
    _insert_events(engine, 5_000, 8_100)
    _run_until(keeper, "dn_history_events")


@pytest.mark.parametrize("spelling", ["false", "off", "0"])
def test_table_with_autovacuum_off_left_alone(engine: sa.Engine, spelling: str) -> None:
    """A table whose own settings turn autovacuum off (however spelt) is its
    administrator's."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"ALTER TABLE dn_history_events SET (autovacuum_enabled = {spelling})")
        )
    _insert_events(engine, 0, 4_999)
    keeper = StatsKeeper(engine)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert not any(n.endswith(".dn_history_events") for n in keeper.run_once())
        time.sleep(0.2)
    assert _analyzed(engine, "dn_history_events") == 0


def test_another_process_analyzing_is_left_to_it(engine: sa.Engine) -> None:
    """The advisory lock a keeper takes for a table (another process's keeper holds it
    here) makes the others leave that table alone; once it is free, one analyzes it."""
    _insert_events(engine, 0, 4_999)
    with engine.connect() as conn:
        relid = conn.execute(sa.text("SELECT to_regclass('dn_history_events')::oid")).scalar()
    key = (pg_stats.ADVISORY_KEY << 32) + int(relid)
    with engine.connect() as other, other.begin():
        other.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        keeper = StatsKeeper(engine)
        time.sleep(1.5)  # the counts have reached the shared statistics
        assert not any(n.endswith(".dn_history_events") for n in keeper.run_once())
    assert _analyzed(engine, "dn_history_events") == 0
    _run_until(StatsKeeper(engine), "dn_history_events")


def test_locked_table_skipped_without_error(engine: sa.Engine) -> None:
    """A table locked by someone else (a migration, say) is skipped after the keeper's
    short lock timeout; the other tables are analyzed as usual."""
    _insert_events(engine, 0, 4_999)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dn_buffered_events (run_id, event_time, event_type, attributes) "
                "SELECT 'r', i, 'WorkflowExecutionSignaled', '{}' FROM generate_series(1, 500) i"
            )
        )
        conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
    with engine.connect() as other, other.begin():
        other.execute(sa.text("LOCK TABLE dn_history_events IN SHARE UPDATE EXCLUSIVE MODE"))
        keeper = StatsKeeper(engine)
        # (Waiting for the lock's end would hang here: the suite's timeout fails it.)
        done = _run_until(keeper, "dn_buffered_events")
        assert not any(n.endswith(".dn_history_events") for n in done)
    assert _analyzed(engine, "dn_history_events") == 0


@workflow.defn(name="StatsNoop")
class StatsNoop:
    @workflow.run
    async def run(self, n: int) -> int:
        return n


async def test_service_host_keeps_statistics(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's service host looks every ``STATS_INTERVAL``: the executions of the
    workflows it ran get analyzed without anyone asking, and stopping the host ends it."""
    monkeypatch.setattr(host_module, "STATS_INTERVAL", 0.2)
    async with await Client.connect(pg_url) as client:
        async with Worker(client, task_queue="stats", workflows=[StatsNoop]):
            handles = [
                await client.start_workflow(StatsNoop.run, i, id=f"s-{i}", task_queue="stats")
                for i in range(120)
            ]
            assert [await h.result() for h in handles] == list(range(120))
            engine = client.service.store.engine
            deadline = time.monotonic() + 15
            while _analyzed(engine, "dn_executions") == 0:
                assert time.monotonic() < deadline, "dn_executions was never analyzed"
                await asyncio.sleep(0.1)
        assert _analyzed(engine, "dn_history_events") >= 1
