"""Held-back writes sent together (``engine._store.set_writes``): writes of one statement
become one statement over a JSON array of rows; writes to one table keep their order, a
write of a statement not declared keeps its place; and on PostgreSQL any sequence of writes
leaves the tables as the writes one by one would have, or fails as they would have."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine import Client, Worker
from engine._store import tx as tx_module
from engine._store.migrations import migrate
from engine._store.queries import (
    BUFFER_EVENT,
    DELETE_ACT,
    DELETE_ACTS_OF_RUN,
    DELETE_BUFFERED,
    DELETE_TIMERS_OF_RUN,
    DELETE_WFT,
    END_ATTEMPT,
    INSERT_EVENT,
    INSERT_TIMER,
    _insert,
    _update,
)
from engine._store.set_writes import form_of, set_statements

from .batching import OneActivity, activity_tasks, one_batch

UPDATE_EXEC = _update("dn_executions", ("next_event_id", "history_size_bytes"), ("run_id",))
WFT_COLUMNS = (
    "run_id",
    "namespace",
    "task_queue",
    "state",
    "attempt",
    "scheduled_time",
    "visible_at",
    "start_to_close",
)
INSERT_WFT = _insert("dn_workflow_tasks", WFT_COLUMNS)
UPDATE_WFT = _update("dn_workflow_tasks", ("state", "attempt"), ("run_id",))
ATTEMPT_COLUMNS = (
    "run_id",
    "scheduled_event_id",
    "attempt",
    "activity_id",
    "activity_type",
    "scheduled_time",
    "started_time",
    "outcome",
)
INSERT_ATTEMPT = _insert("dn_activity_attempts", ATTEMPT_COLUMNS)
#: Not declared: its writes keep their place, and it reads what it changes.
BUMP_EXEC = (
    "UPDATE dn_executions SET next_event_id = next_event_id * 2 + 1 WHERE run_id = %(run_id)s"
)


def _event(run: str, event_id: int, time: float = 1.5) -> dict[str, Any]:
    return {
        "run_id": run,
        "event_id": event_id,
        "event_time": time,
        "event_type": "TimerFired",
        "attributes": "{}",
        "extra": None,
    }


def _wft(run: str, attempt: int = 1) -> dict[str, Any]:
    return {
        "run_id": run,
        "namespace": "default",
        "task_queue": "q",
        "state": 1,
        "attempt": attempt,
        "scheduled_time": 1.0,
        "visible_at": 1.0,
        "start_to_close": 10.0,
    }


# ------------------------------------------------------------------ the plan, no database


def test_writes_of_one_statement_to_different_rows_become_one_statement() -> None:
    writes = [(DELETE_WFT.pg, {"run_id": f"r{i}"}) for i in range(3)]
    [(sql, params)] = set_statements(writes)
    assert sql == form_of(DELETE_WFT.pg).sql  # type: ignore[union-attr]
    assert sql.startswith("DELETE FROM dn_workflow_tasks AS x USING json_to_recordset(")
    assert params == {"rows": '[{"run_id":"r0"},{"run_id":"r1"},{"run_id":"r2"}]'}


def test_a_lone_write_is_sent_as_it_was_made() -> None:
    assert set_statements([(DELETE_WFT.pg, {"run_id": "r"})]) == [(DELETE_WFT.pg, {"run_id": "r"})]


def test_interleaved_writes_to_two_tables_become_one_statement_each_in_first_order() -> None:
    writes = []
    for i in range(3):
        writes.append((INSERT_EVENT.pg, [_event(f"r{i}", 1), _event(f"r{i}", 2)]))
        writes.append((DELETE_WFT.pg, {"run_id": f"r{i}"}))
    sent = set_statements(writes)
    assert [sql for sql, _ in sent] == [
        form_of(INSERT_EVENT.pg).sql,  # type: ignore[union-attr]
        form_of(DELETE_WFT.pg).sql,  # type: ignore[union-attr]
    ]
    assert sent[0][1]["rows"].count('"run_id"') == 6


def test_another_statement_to_the_same_table_ends_the_group() -> None:
    writes = [
        (DELETE_WFT.pg, {"run_id": "a"}),
        (INSERT_WFT.pg, _wft("a")),
        (DELETE_WFT.pg, {"run_id": "b"}),
        (DELETE_WFT.pg, {"run_id": "c"}),
    ]
    sent = set_statements(writes)
    assert [sql for sql, _ in sent] == [
        DELETE_WFT.pg,
        INSERT_WFT.pg,
        form_of(DELETE_WFT.pg).sql,  # type: ignore[union-attr]
    ]


def test_a_row_changed_twice_goes_in_two_statements() -> None:
    writes = [
        (UPDATE_EXEC.pg, {"next_event_id": 2, "history_size_bytes": 1, "w_run_id": "a"}),
        (UPDATE_EXEC.pg, {"next_event_id": 2, "history_size_bytes": 1, "w_run_id": "b"}),
        (UPDATE_EXEC.pg, {"next_event_id": 3, "history_size_bytes": 2, "w_run_id": "a"}),
    ]
    sent = set_statements(writes)
    assert len(sent) == 2
    assert sent[0][0] == form_of(UPDATE_EXEC.pg).sql  # type: ignore[union-attr]
    assert sent[1] == writes[2]


def test_a_runs_timers_are_deleted_after_its_activities_whatever_came_before() -> None:
    """Deleting a run's activities may wait for a claim of one of them, which may add a
    heartbeat timer: the delete of the run's timers must come after it (RunState.close),
    even where another run's timers were deleted before."""
    writes = [
        (DELETE_WFT.pg, {"run_id": "a"}),
        (DELETE_TIMERS_OF_RUN.pg, {"run_id": "a"}),
        (DELETE_WFT.pg, {"run_id": "b"}),
        (DELETE_ACTS_OF_RUN.pg, {"run_id": "b"}),
        (DELETE_TIMERS_OF_RUN.pg, {"run_id": "b"}),
    ]
    sent = set_statements(writes)
    assert sent.index((DELETE_ACTS_OF_RUN.pg, {"run_id": "b"})) < sent.index(
        (DELETE_TIMERS_OF_RUN.pg, {"run_id": "b"})
    )


def test_a_write_not_declared_keeps_its_place() -> None:
    writes = [
        (DELETE_WFT.pg, {"run_id": "a"}),
        (INSERT_EVENT.pg, [_event("a", 1)]),
        (BUMP_EXEC, {"run_id": "a"}),
        (DELETE_WFT.pg, {"run_id": "b"}),
        ("SELECT pg_notify('c', 'p')", None),
    ]
    assert set_statements(writes) == [
        (DELETE_WFT.pg, {"run_id": "a"}),
        (INSERT_EVENT.pg, _event("a", 1)),
        (BUMP_EXEC, {"run_id": "a"}),
        (DELETE_WFT.pg, {"run_id": "b"}),
        ("SELECT pg_notify('c', 'p')", None),
    ]


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), b"\x00", 2**64])
def test_values_json_cannot_carry_go_as_they_were_made(value: Any) -> None:
    # (orjson writes a float that is not finite as null, and refuses an integer past 64
    # bits that the standard encoder writes: neither may reach a set statement.)
    rows = [_event("a", 1, value), _event("a", 2)]
    assert set_statements([(INSERT_EVENT.pg, rows)]) == [(INSERT_EVENT.pg, rows)]


def test_the_rows_parameter_reads_back_as_the_rows() -> None:
    awkward = 'q"b\\s/é\u2028\n\t\x01{}[],:'
    rows = [
        {**_event("a", 1, t), "attributes": json.dumps({"a": awkward, "f": t}), "extra": awkward}
        for t in (1e16, 1e-7, -0.0, 5e-324, 1.7976931348623157e308, 0.1, 2**63 - 1, -(2**63))
    ]
    [(sql, params)] = set_statements([(INSERT_EVENT.pg, rows)])
    assert sql == form_of(INSERT_EVENT.pg).sql  # type: ignore[union-attr]
    assert isinstance(params["rows"], str)
    assert json.loads(params["rows"]) == rows
    for read, row in zip(json.loads(params["rows"]), rows, strict=True):
        assert type(read["event_time"]) is type(row["event_time"])


# ------------------------------------------------------------------ on PostgreSQL

RUNS = ("a", "b", "c")
_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8
)
_time = st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=False, allow_infinity=False))
_run = st.sampled_from(RUNS)
_small = st.integers(1, 4)
#: A value written to an integer column: an int, or a float with an integral value (a
#: write alone stores it rounded; the set statement must store the same).
_written = _small | _small.map(float)


def _write() -> st.SearchStrategy[tuple[str, Any]]:
    events = st.lists(
        st.builds(
            lambda r, e, t, a, x: {**_event(r, e, t), "attributes": a, "extra": x},
            _run,
            st.integers(1, 6),
            _time,
            _text,
            st.none() | _text,
        ),
        min_size=1,
        max_size=3,
    )
    return st.one_of(
        events.map(lambda rows: (INSERT_EVENT.pg, rows)),
        events.map(lambda rows: (INSERT_EVENT.pg, rows[0])),
        _run.map(lambda r: (DELETE_WFT.pg, {"run_id": r})),
        st.builds(lambda r, n: (INSERT_WFT.pg, _wft(r, n)), _run, _written),
        st.builds(
            lambda r, s, n: (UPDATE_WFT.pg, {"state": s, "attempt": n, "w_run_id": r}),
            _run,
            _small,
            _written,
        ),
        st.builds(
            lambda r, n, b: (
                UPDATE_EXEC.pg,
                {"next_event_id": n, "history_size_bytes": b, "w_run_id": r},
            ),
            _run,
            _written,
            st.integers(0, 2**40),
        ),
        _run.map(lambda r: (BUMP_EXEC, {"run_id": r})),
        st.builds(
            lambda r, s, n, t: (
                INSERT_ATTEMPT.pg,
                {
                    "run_id": r,
                    "scheduled_event_id": s,
                    "attempt": n,
                    "activity_id": "x",
                    "activity_type": "T",
                    "scheduled_time": t,
                    "started_time": t,
                    "outcome": "started",
                },
            ),
            _run,
            _small,
            _small,
            _time,
        ),
        st.builds(
            lambda r, s, n, t, o, f: (
                END_ATTEMPT.pg,
                {
                    "run_id": r,
                    "sched": s,
                    "attempt": n,
                    "ended_time": t,
                    "outcome": o,
                    "failure": f,
                },
            ),
            _run,
            _small,
            _small,
            _time,
            st.sampled_from(["completed", "failed"]),
            st.none() | _text,
        ),
        st.builds(lambda r, s: (DELETE_ACT.pg, {"run_id": r, "sched": s}), _run, _small),
        st.builds(
            lambda r, k, t, d: (
                INSERT_TIMER.pg,
                {"run_id": r, "kind": k, "ref": 1, "attempt": 1, "fire_at": t, "data": d},
            ),
            _run,
            st.sampled_from(["user", "act_retry"]),
            _time,
            st.none() | _text,
        ),
        _run.map(lambda r: (DELETE_TIMERS_OF_RUN.pg, {"run_id": r})),
        st.builds(
            lambda r, t, a: (
                BUFFER_EVENT.pg,
                {
                    "run_id": r,
                    "event_time": t,
                    "event_type": "WorkflowExecutionSignaled",
                    "attributes": a,
                },
            ),
            _run,
            _time,
            _text,
        ),
        _run.map(lambda r: (DELETE_BUFFERED.pg, {"run_id": r})),
    )


#: What is compared of each table, in which order. Rows with serial ids are compared in
#: the order of their ids without the ids themselves (a sequence is not rolled back).
TABLES = {
    "dn_executions": ("*", "run_id"),
    "dn_history_events": ("*", "run_id, event_id"),
    "dn_workflow_tasks": ("*", "run_id"),
    "dn_activity_attempts": ("*", "run_id, scheduled_event_id, attempt"),
    "dn_activity_tasks": ("*", "run_id, scheduled_event_id"),
    "dn_timers": ("run_id, kind, ref, attempt, fire_at, data", "id"),
    "dn_buffered_events": ("run_id, event_time, event_type, attributes", "id"),
}


@pytest.fixture(scope="module")
def pg_conn() -> Iterator[psycopg.Connection[Any]]:
    """A migrated PostgreSQL schema with the runs ``RUNS`` and an activity of each."""
    from ..conftest import PG_URL, _pg_schema_url

    schema = "t_" + uuid.uuid4().hex[:12]
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sa.text(f"CREATE SCHEMA {schema}"))
    engine = sa.create_engine(_pg_schema_url(schema))
    try:
        migrate(engine)
        engine.dispose()
        url = PG_URL.replace("postgresql+psycopg://", "postgresql://", 1)
        with psycopg.connect(url, options=f"-csearch_path={schema}") as conn:
            for run in RUNS:
                conn.execute(
                    "INSERT INTO dn_executions (run_id, namespace, workflow_id, workflow_type, "
                    "task_queue, status, start_time, first_run_id, next_event_id, "
                    "history_size_bytes, workflow_task_timeout) VALUES "
                    "(%s, 'default', %s, 'T', 'q', 1, 0, %s, 1, 0, 10)",
                    (run, run, run),
                )
                for sched in (1, 2):
                    conn.execute(
                        "INSERT INTO dn_activity_tasks (run_id, scheduled_event_id, namespace, "
                        "workflow_id, workflow_type, activity_id, activity_type, task_queue, "
                        "input, state, attempt, visible_at, scheduled_time, "
                        "attempt_scheduled_time, retry_policy, cancel_requested) VALUES "
                        "(%s, %s, 'default', %s, 'T', 'x', 'A', 'q', '[]', 1, 1, 0, 0, 0, '{}', "
                        "false)",
                        (run, sched, run),
                    )
            conn.commit()
            yield conn
    finally:
        with admin.connect() as c:
            c.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def _outcome(conn: psycopg.Connection[Any], writes: list[tuple[str, Any]]) -> Any:
    """What the writes leave in the tables (or the error they end in), then rolled back."""
    cur = conn.cursor()
    try:
        for sql, params in writes:
            tx_module._execute(cur, sql, params)
    except psycopg.Error as err:
        conn.rollback()
        return type(err).__name__
    tables = {}
    for table, (columns, order) in TABLES.items():
        cur.execute(f"SELECT {columns} FROM {table} ORDER BY {order}")
        tables[table] = cur.fetchall()
    conn.rollback()
    return tables


@settings(
    derandomize=True,
    database=None,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(writes=st.lists(_write(), max_size=14))
@example(  # a run's row changed twice: the second write's values must hold
    writes=[
        (UPDATE_EXEC.pg, {"next_event_id": n, "history_size_bytes": n, "w_run_id": "a"})
        for n in (2, 3)
    ]
)
def test_set_statements_leave_the_tables_as_the_writes_one_by_one(
    pg_conn: psycopg.Connection[Any], writes: list[tuple[str, Any]]
) -> None:
    assert _outcome(pg_conn, set_statements(writes)) == _outcome(pg_conn, writes)


# ------------------------------------------------------------------ in the engine


async def test_a_batch_of_activity_outcomes_deletes_their_rows_in_one_statement(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six activities' results recorded in one batch: their activity rows go in one
    statement, their attempts' ends in another, and the workflows complete."""
    client = await Client.connect(pg_url)
    queue = "acts-" + uuid.uuid4().hex[:6]
    try:
        async with Worker(client, task_queue="set-wf", workflows=[OneActivity]):
            handles, tasks = await activity_tasks(client, 6, queue, "set-wf", "set")
            sent: list[str] = []
            execute, bound = tx_module._execute, tx_module.bound

            def spy(cur: Any, sql: str, params: Any) -> None:
                sent.append(sql)
                execute(cur, sql, params)

            def spy_bound(cur: Any, sql: str, params: Any) -> list[str]:
                sent.append(sql)  # (statements sent together, as one query)
                return bound(cur, sql, params)

            monkeypatch.setattr(tx_module, "_execute", spy)
            monkeypatch.setattr(tx_module, "bound", spy_bound)
            payload = client.data_converter.to_payloads_json([41])
            results = await one_batch(
                client, [client.service.complete_activity(t, payload) for t in tasks]
            )
            monkeypatch.undo()
            assert results == [None] * 6
            assert [await asyncio.wait_for(h.result(), 30) for h in handles] == [41] * 6
    finally:
        await client.close()
    for single in (DELETE_ACT, END_ATTEMPT):
        assert sent.count(form_of(single.pg).sql) == 1  # type: ignore[union-attr]
        assert single.pg not in sent
