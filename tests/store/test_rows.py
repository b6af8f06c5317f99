"""Rows of both backends read a column their query did not select as a default, through
``column()``: a SQLite row raises IndexError (not AttributeError) for a schema column it
lacks, so ``getattr(row, name, default)`` is not enough."""

from __future__ import annotations

from typing import Any

from engine import Client
from engine._service.state import RunState
from engine._store.queries import Q
from engine._store.tx import StoreTx, column

#: A run's columns as far as RunState needs them, without ``has_updates``.
_WITHOUT_HAS_UPDATES = Q(
    "SELECT run_id, namespace, workflow_id, task_queue, status, next_event_id, "
    "history_size_bytes FROM dn_executions WHERE run_id = :run_id"
)


async def test_a_row_without_the_column_gives_the_default(client: Client) -> None:
    handle = await client.start_workflow(
        "Anything", id="rows-1", task_queue="nobody-polls", request_eager_start=False
    )
    run_id = handle.first_execution_run_id

    def read(tx: StoreTx) -> tuple[Any, ...]:
        full = tx.get_execution(run_id or "")
        row = tx._q(_WITHOUT_HAS_UPDATES, {"run_id": run_id}).fetchone()
        assert row is not None and full is not None
        return (
            type(row).__name__,
            row.workflow_id,
            column(row, "has_updates"),
            column(row, "has_updates", "absent"),
            column(row, "no_such_column", "absent"),
            RunState(tx, row, 0.0).has_updates,  # unknown: looked at, as for old runs
            column(full, "has_updates"),
            RunState(tx, full, 0.0).has_updates,  # a new run says it has none
        )

    row_type, workflow_id, *values = await client.store.transaction(read)
    # The backends' own row types: psycopg's named tuples, SQLite's rows.
    assert row_type == ("Row" if client.store.postgres else "SqliteRow")
    assert workflow_id == "rows-1"
    assert values == [None, "absent", "absent", True, 0, False]
